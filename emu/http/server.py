"""The aiohttp server in front of a `Gateway`: real sockets, for kubectl and any HTTP client.

It runs on the simulation's own loop (a wall-clock-paced one under ``emu serve``), binds
127.0.0.1 by default, and answers every path through the gateway. A request the emulated network
drops (outage, partition, lost response) drops the TCP connection, which is what a real client
sees of an unreachable API server; a lost response first waits out the network's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..apiserver.errors import InternalError, RequestEntityTooLarge
from .gateway import Gateway
from .wire import DEFAULT_MAX_BODY, Dropped, HttpRequest, HttpResponse, WatchResponse

if TYPE_CHECKING:
    from ..simulation import Simulation


async def _to_request(request: web.Request, max_body: int,
                      client_certs: bool = False) -> HttpRequest | HttpResponse:
    body = b""
    if request.body_exists:  # most requests are reads, with no body to wait for
        length = request.content_length
        if length is not None and length > max_body:
            err = RequestEntityTooLarge(f"the request body is {length} bytes; the limit is "
                                        f"{max_body}")
            return HttpResponse.error(err.status, err.code)
        try:  # to its end: content.read(n) stops at what the socket has delivered so far
            body = await request.read()  # the app's client_max_size is max_body + 1
        except web.HTTPRequestEntityTooLarge:
            err = RequestEntityTooLarge(f"the request body is larger than the limit of "
                                        f"{max_body} bytes")
            return HttpResponse.error(err.status, err.code)
    # aiohttp's headers are already case-insensitive: no copy
    out = HttpRequest(request.method, request.path,
                      tuple(request.query.items()) if request.query_string else (),
                      request.headers, body)
    if client_certs and request.transport is not None:
        # the client certificate OpenSSL verified against the cluster CA (`emu.http.tls`)
        out.peer = request.transport.get_extra_info("peercert") or None
    return out


class HttpServer:
    """Serve ``sim``'s API server on ``host:port`` (port 0 picks a free one): ``await start()``
    returns the URL, ``await stop()`` closes open watches and the socket. Run it on a loop that
    really waits for sockets (``emu.kernel.paced.PacedLoop``, or ``emu.run(...,
    wall_clock=True)``); a virtual-time loop would jump past the clients."""

    def __init__(self, sim: Simulation, *, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
                 identity: str | None = None, ssl_context: Any = None) -> None:
        self.sim = sim
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.max_body = max_body
        #: Whether TLS asks clients for certificates (x509 login, `emu.http.tls`).
        self.client_certs = ssl_context is not None and \
            getattr(ssl_context, "verify_mode", 0) != 0
        self.gateway = Gateway(sim, token=token, max_body=max_body, identity=identity,
                               client_certs=self.client_certs)
        self._runner: web.AppRunner | None = None
        self._watches: dict[int, WatchResponse] = {}  # by id, in opening order
        #: Set each time a watch stream ends (tests wait on it; cleared by whoever waits).
        self.watch_ended = asyncio.Event()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> str:
        app = web.Application(client_max_size=self.max_body + 1)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that hangs up cancels its handler, so a quiet watch
        # whose client went away is closed at once instead of at its next event.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=0.5, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True,
                           ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = sockets[0].getsockname()[1]
        self.gateway.server_url = self.url
        return self.url

    async def stop(self) -> None:
        for watch in list(self._watches.values()):
            watch.close()
        self._watches.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        parsed = await _to_request(request, self.max_body, self.client_certs)
        if isinstance(parsed, HttpResponse):
            return web.Response(status=parsed.status, body=parsed.body,
                                content_type=parsed.content_type)
        try:
            result = await self.gateway.handle(parsed)
        except Dropped:
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError from None
        except Exception as exc:  # a bug here must still answer with a Status
            err = InternalError(f"an error on the server: {type(exc).__name__}: {exc}")
            return web.Response(status=500, body=HttpResponse.error(err.status, 500).body,
                                content_type="application/json")
        if isinstance(result, HttpResponse):
            if not result.headers:
                # the Content-Type header given as is: the same header aiohttp's content_type=
                # writes for a bytes body, without its parsing (half of the Response's cost)
                return web.Response(status=result.status, body=result.body,
                                    headers={"Content-Type": result.content_type})
            resp = web.Response(status=result.status, body=result.body,
                                content_type=result.content_type)
            for key, value in result.headers:
                resp.headers.add(key, value)  # kube sends one Warning header per warning
            return resp
        return await self._stream(request, result)

    async def _stream(self, request: web.Request, watch: WatchResponse) -> web.StreamResponse:
        """Write the watch's chunks as they come (the gateway puts the events that are ready
        together in one chunk). A client that hangs up cancels this handler, which closes the
        watch."""
        resp = web.StreamResponse(status=200)
        resp.content_type = watch.content_type
        resp.enable_chunked_encoding()
        self._watches[id(watch)] = watch
        try:
            await resp.prepare(request)
            async for chunk in watch.chunks:
                await resp.write(chunk)
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
        except ConnectionError:
            pass  # the client went away
        finally:
            watch.close()
            self._watches.pop(id(watch), None)
            self.watch_ended.set()
        return resp
