"""An HTTP forward proxy on loopback into the emulated world's network, for real processes.

A program running outside the world (the real KubeRay operator started by ``emu serve
--kuberay-binary``) reaches the fake Ray's servers through it: with ``HTTP_PROXY`` set to this
proxy, Go's ``net/http`` (``http.ProxyFromEnvironment``) sends every plain-HTTP request whose
host is not loopback here, in absolute form (``GET http://raycluster-head-svc.default.svc.
cluster.local:8265/api/jobs/ HTTP/1.1``). The proxy resolves the host as a Pod in the world
would (`resolve_address`): a Service's name (``<svc>.<ns>.svc.cluster.local``, ``<svc>.<ns>.svc``,
``<svc>.<ns>``) or cluster IP goes through kube-proxy to a ready endpoint (`emu.kube.services`),
a Pod IP straight to the Pod, a headless Service's name on a port no Service port declares to its
first ready Pod's IP (its DNS A records). The request then travels the emulated network as the
HTTP-shaped call `emu.ray.net` documents, from the network identity given to the proxy, so
partitions, outages, latency and lost responses between that identity and the Ray Pods apply.

What a caller sees when the world cannot deliver: the connection is closed without an answer
(Go reports ``EOF``), as a dial that fails behind a transparent network would fail, rather than a
``502`` page, which a client would take for a server's answer. A request the network holds (a
partition) stays unanswered until the caller's own timeout (KubeRay's dashboard client: 2 s).
HTTPS (``CONNECT``) and WebSockets are not proxied: ``CONNECT`` gets 405. A request line aiohttp
cannot parse gets its 400 without a traceback on stderr: KubeRay sends
``GET http://:8000/-/healthz`` while a head Pod has no IP yet, which is the client's mistake.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from ..kernel.network import Network, NetworkError

if TYPE_CHECKING:
    from ..simulation import Simulation

#: Request headers not passed on: hop-by-hop ones, and those the proxy itself consumes.
_HOP = frozenset({"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
                  "trailer", "transfer-encoding", "upgrade", "content-length"})


class _DropClientErrors(logging.Filter):
    """Keep the server's log for its own errors: a request it could not parse is answered 400
    and is no news."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, HttpProcessingError)


#: The proxy's server log (aiohttp's request handler logs its errors here).
LOG = logging.getLogger("emu.http.forward_proxy")
LOG.addFilter(_DropClientErrors())


def resolve_address(network: Network, host: str, port: int) -> str:
    """The network address a request to ``host:port`` from outside any namespace reaches:
    ``host:port`` when something listens there (a Service address kube-proxy registered, a
    Pod IP), else the first IP a headless Service's name resolves to, on that port; else
    ``host:port`` unchanged (the call is then refused)."""
    address = f"{host}:{port}"
    if network.endpoint(address) is not None:
        return address
    lookup = network.hostnames.get(host)
    ips = lookup() if lookup is not None else []
    return f"{ips[0]}:{port}" if ips else address


class ForwardProxy:
    """``await start()`` listens on ``host`` (a free port unless ``port``); ``url`` is what
    ``HTTP_PROXY`` is set to; ``await stop()`` closes it. ``identity`` is the network caller
    every forwarded request comes from. ``forwarded`` and ``dropped`` count requests."""

    def __init__(self, sim: Simulation, *, identity: str, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.sim = sim
        self.identity = identity
        self.host = host
        self.port = port
        self.forwarded = 0
        self.dropped = 0
        self._runner: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> str:
        from aiohttp import web

        # the low-level server: every request reaches the handler, whatever its target's
        # form (an application's router answers 404 to CONNECT's ``host:port``)
        server = web.Server(self._handle, handler_cancellation=True, logger=LOG)
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def target(self, request: Any) -> tuple[str, int] | None:
        """(host, port) a proxied request is for: the absolute-form URL's authority, else the
        Host header (a client that talks to the proxy as to the server itself)."""
        url = request.url
        host = url.host or ""
        if not host:
            return None
        port = url.port or (443 if url.scheme == "https" else 80)
        return host.lower().rstrip("."), int(port)

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        if request.method == "CONNECT":
            return web.Response(status=405, text="emu forward proxy: CONNECT (HTTPS) is not "
                                                 "proxied; the world's servers speak plain HTTP\n")
        found = self.target(request)
        if found is None:
            return web.Response(status=400, text="emu forward proxy: the request names no host\n")
        host, port = found
        address = resolve_address(self.sim.network, host, port)
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in _HOP}
        payload = {"method": request.method, "path": request.rel_url.path_qs,
                   "headers": headers, "body": body.decode(errors="replace") if body else None}
        try:
            answer = await self.sim.network.call(None, address, payload, verb="http",
                                                 caller=self.identity)
        except NetworkError:
            answer = None
        if not isinstance(answer, dict):
            self.dropped += 1
            if request.transport is not None:
                request.transport.abort()  # the caller sees the connection fail: no answer
            raise asyncio.CancelledError
        self.forwarded += 1
        out = {str(k).lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
        ctype = out.pop("content-type", "text/plain")
        out.pop("content-length", None)
        text = answer.get("body")
        data = text.encode() if isinstance(text, str) else orjson.dumps(text) if text else b""
        resp = web.Response(status=int(answer.get("status", 200)), body=data, headers=out)
        resp.content_type = ctype.split(";")[0].strip() or "text/plain"
        return resp
