"""In-process transports: Python Kubernetes clients inside a simulation, on virtual time.

lightkube uses httpx2 (a fork of httpx with the same transport interface) and accepts a
transport; plain httpx clients do too. A request then never touches a socket: it goes to the
simulation's `Gateway` and from there over the emulated network, as the caller ``identity``.
Everything runs on the virtual-time loop, so the client's waits (watch timeouts, retries with
backoff) cost no real time and a seed replays the same history, digest included.

    transport = emu.httpx_transport(sim)          # for httpx.AsyncClient(transport=...)
    client = emu.lightkube_client(sim)            # a lightkube.AsyncClient
    api = await emu.kr8s_api(sim)                 # a kr8s.asyncio Api

kr8s reads a kubeconfig file in worker threads, which a virtual-time loop cannot wait on (the run
would jump to its time limit): `kr8s_api` hands it its configuration as a dict instead, and
gives it an httpx client on this transport where kr8s would build one for the server's URL.

Faults reach these clients as socket errors: a refused call raises the module's
``ConnectError``, a partitioned call or a lost response its ``ReadTimeout`` (after the network's
timeout, in virtual time).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .gateway import Gateway
from .wire import DEFAULT_MAX_BODY, Dropped, HttpRequest, HttpResponse

if TYPE_CHECKING:
    from ..simulation import Simulation

#: The base URL in-process clients are given (any host works; nothing resolves it).
BASE_URL = "http://emu.invalid"

_CLASSES: dict[str, type] = {}


def _transport_class(module_name: str) -> type:
    """An ``AsyncBaseTransport`` subclass for ``httpx`` or ``httpx2``, built once per module."""
    found = _CLASSES.get(module_name)
    if found is not None:
        return found
    mod = importlib.import_module(module_name)

    class _Stream(mod.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, chunks: AsyncIterator[bytes], close: Any) -> None:
            self._chunks = chunks
            self._close = close

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._chunks:
                yield chunk

        async def aclose(self) -> None:
            self._close()

    class EmuTransport(mod.AsyncBaseTransport):  # type: ignore[name-defined]
        """Sends each request to a simulation's gateway; no sockets."""

        def __init__(self, gateway: Gateway) -> None:
            self.gateway = gateway

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            url = request.url
            # a plain dict with lower-case names: httpx's case-insensitive Headers cost several
            # microseconds a lookup, and the gateway looks up a few per request
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in request.headers.raw}
            query = tuple((str(k), str(v)) for k, v in url.params.multi_items()) \
                if url.query else ()
            req = HttpRequest(request.method, url.path, query, headers, body)
            try:
                result = await self.gateway.handle(req)
            except Dropped as err:
                if err.timeout:
                    raise mod.ReadTimeout(str(err), request=request) from None
                raise mod.ConnectError(str(err), request=request) from None
            if isinstance(result, HttpResponse):
                return mod.Response(result.status,
                                    headers=[("content-type", result.content_type),
                                             *result.headers],
                                    content=result.body, request=request)
            return mod.Response(200, headers=[("content-type", result.content_type),
                                              ("transfer-encoding", "chunked")],
                                stream=_Stream(result.chunks, result.close), request=request)

    EmuTransport.__qualname__ = f"EmuTransport[{module_name}]"
    _CLASSES[module_name] = EmuTransport
    return EmuTransport


def httpx_transport(sim: Simulation, *, identity: str | None = None, module: str = "httpx",
                    token: str | None = None, max_body: int = DEFAULT_MAX_BODY) -> Any:
    """An async transport for ``module`` (``"httpx"`` or ``"httpx2"``) answering from ``sim``'s
    API server as ``identity`` (default: from each request's User-Agent); ``token`` and
    ``max_body`` as for ``emu serve``."""
    gateway = Gateway(sim, identity=identity, token=token, max_body=max_body,
                      server_url=BASE_URL)
    return _transport_class(module)(gateway)


def _kubeconfig(namespace: str) -> dict[str, Any]:
    """A kubeconfig, as a dict, for the in-process server."""
    return {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "emu", "cluster": {"server": BASE_URL}}],
            "users": [{"name": "emu", "user": {}}],
            "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "emu",
                                                     "namespace": namespace}}],
            "current-context": "emu"}


def lightkube_client(sim: Simulation, *, identity: str = "lightkube",
                     namespace: str = "default", **options: Any) -> Any:
    """A ``lightkube.AsyncClient`` wired to ``sim`` through an in-process transport."""
    from lightkube import AsyncClient, KubeConfig

    config = KubeConfig.from_dict(_kubeconfig(namespace))
    return AsyncClient(config, transport=httpx_transport(sim, identity=identity,
                                                         module="httpx2"),
                       trust_env=False, **options)


async def kr8s_api(sim: Simulation, *, identity: str = "kr8s", namespace: str = "default") -> Any:
    """A ``kr8s.asyncio.Api`` wired to ``sim`` through an in-process transport, authenticated
    (kr8s reads ``/version`` first): pass it as ``api=`` to kr8s objects, or call its methods
    (``get``, ``watch``, ``async_get``...). Not cached: each call gives a new client."""
    import httpx
    from kr8s._api import Api  # kr8s.asyncio.api() caches by arguments and builds its own client

    transport = httpx_transport(sim, identity=identity)

    class EmuKr8sApi(Api):
        """kr8s's Api with the httpx client it builds swapped for one on the transport."""

        async def _create_session(self) -> None:
            if self._session is not None and not self._session.is_closed:
                await self._session.aclose()
            self._session = httpx.AsyncClient(
                base_url=self.auth.server, transport=transport, timeout=self._timeout,
                follow_redirects=True,
                headers={"User-Agent": f"kr8s/{self.__version__}",
                         "content-type": "application/json"})

    api = EmuKr8sApi(bypass_factory=True, kubeconfig=_kubeconfig(namespace),
                     namespace=namespace)
    await api
    return api
