"""``emu serve --expose svc/NAME:PORT``: a local port forwarded to an emulated Service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import orjson

from ..kernel.network import NetworkError

if TYPE_CHECKING:
    from ..simulation import Simulation


@attrs.frozen
class ExposeSpec:
    namespace: str
    service: str
    port: int
    local_port: int = 0


def parse_expose(text: str) -> ExposeSpec:
    """``svc/NAME:PORT``, ``svc/NAMESPACE/NAME:PORT``, optionally ``:LOCALPORT`` after."""
    body = text[4:] if text.startswith(("svc/", "service/")) else None
    if text.startswith("service/"):
        body = text[8:]
    if body is None:
        raise ValueError(f"--expose {text!r}: expected svc/NAME:PORT[:LOCAL_PORT]")
    name, _, ports = body.partition(":")
    ns, _, svc = name.rpartition("/")
    parts = ports.split(":") if ports else []
    if not svc or not 1 <= len(parts) <= 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--expose {text!r}: expected svc/NAME:PORT[:LOCAL_PORT]")
    return ExposeSpec(ns or "default", svc, int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)


class Expose:
    """A local HTTP port whose requests go to ``svc/NAME:PORT`` on the emulated network, as
    HTTP-shaped calls (the wire shape `emu.ray.net` documents), from the identity
    ``port-forward``; a Service with no ready endpoint answers 502, as kubectl port-forward's
    failed dial does."""

    def __init__(self, sim: Simulation, spec: ExposeSpec, *, host: str = "127.0.0.1") -> None:
        self.sim = sim
        self.spec = spec
        self.host = host
        self.port = spec.local_port
        self._runner: Any = None

    @property
    def address(self) -> str:
        return f"{self.spec.service}.{self.spec.namespace}.svc.cluster.local:{self.spec.port}"

    def describe(self) -> str:
        return (f"svc/{self.spec.namespace}/{self.spec.service}:{self.spec.port}="
                f"http://{self.host}:{self.port}")

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        payload = {"method": request.method, "path": request.path_qs,
                   "headers": {k.lower(): v for k, v in request.headers.items()},
                   "body": body.decode(errors="replace") if body else None}
        try:
            answer = await self.sim.network.call(None, self.address, payload, verb="http",
                                                 caller="port-forward")
        except NetworkError as err:
            return web.Response(status=502, text=f"emu port-forward: {err}\n")
        if not isinstance(answer, dict):
            return web.Response(status=502, text="emu port-forward: the Service's answer was "
                                                 "not an HTTP response\n")
        headers = {str(k): str(v) for k, v in (answer.get("headers") or {}).items()}
        ctype = headers.pop("content-type", "text/plain")
        text = answer.get("body")
        data = text.encode() if isinstance(text, str) else orjson.dumps(text) if text else b""
        resp = web.Response(status=int(answer.get("status", 200)), body=data, headers=headers)
        resp.content_type = ctype.split(";")[0]
        return resp
