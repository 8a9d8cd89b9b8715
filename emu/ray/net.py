"""How the fake Ray's processes talk: RPC servers, HTTP-shaped requests, and running a handler
inside the server's own process.

Two wire shapes, both plain dicts so that callers outside ``emu.ray`` (the operator's dashboard
client, the kubelet's probes) need nothing from this package:

- **RPC** (GCS, raylet): ``{"method": "RegisterNode", ...fields}`` → the method's result; a failure
  is raised as `RpcError` (a gRPC status: ``code`` and ``message``).
- **HTTP** (dashboard on 8265, Serve proxy on 8000, dashboard agent on 52365):
  request ``{"method": "GET", "path": "/api/jobs/x?y=1", "headers": {...}, "body": "<text>"}``
  (``body`` may also be a dict, which counts as JSON), response
  ``{"status": 200, "headers": {"content-type": ...}, "body": "<text>"}``. Error statuses are
  responses, not exceptions, as on a real socket; only a missing server raises (the network's
  ``ConnectionRefused``/``Timeout``/``ConnectionReset``).

A handler registered on the network runs in the *caller's* task. Server work must belong to the
server's process, so that a crashed GCS stops mid-write and its callers see a reset connection:
`run_in` spawns the work in the server process and turns its death into `ConnectionReset`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import orjson

from emu.kernel.network import CallInfo, ConnectionRefused, ConnectionReset
from emu.kernel.process import Process, ProcessGone
from emu.kernel.programs import ContainerContext

from .tls import check_handshake

RpcMethod = Callable[[dict[str, Any]], Coroutine[Any, Any, Any]]
HttpHandler = Callable[["HttpRequest"], Coroutine[Any, Any, dict[str, Any]]]


class RpcError(Exception):
    """A Ray server answered an RPC with an error status (gRPC's code and message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


async def run_in(process: Process, coro: Coroutine[Any, Any, Any], address: str) -> Any:
    """Run ``coro`` as a task of ``process`` and return its result to the calling task.

    If the process ends first (crash, exit) the caller gets `ConnectionReset`, as a client whose
    server died mid-request would; if it had already ended, `ConnectionRefused`.
    """
    try:
        task = process.spawn(coro)
    except ProcessGone:
        raise ConnectionRefused(f"dial {address}: connection refused", dst=address) from None
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError:
        # the caller is gone (its process crashed mid-call): the server still finishes the
        # request, and an error it answers with reaches nobody, as a gRPC server's reply to a
        # closed connection does; retrieved here, or asyncio prints it as "Task exception was
        # never retrieved"
        task.add_done_callback(answer_to_nobody)
        raise
    if task.cancelled():
        raise ConnectionReset(f"{address}: connection reset (server process ended)", dst=address)
    exc = task.exception()
    if isinstance(exc, ProcessGone):
        raise ConnectionReset(f"{address}: connection reset (server process ended)", dst=address)
    if exc is not None:
        raise exc
    return task.result()


def answer_to_nobody(task: asyncio.Future[Any]) -> None:
    """A done callback for server work whose caller has gone: its outcome is retrieved and
    dropped (nobody is left to answer)."""
    if not task.cancelled():
        task.exception()


def serve_rpc(ctx: ContainerContext, port: int, methods: Mapping[str, RpcMethod]) -> str:
    """Listen on ``port`` for RPCs dispatched by ``payload["method"]``; the address."""
    address = f"{ctx.ip}:{port}"

    async def handler(payload: Any, info: CallInfo) -> Any:
        check_handshake(ctx.network, ctx.process.name, info)  # RAY_USE_TLS (emu.ray.tls)
        name = payload.get("method") if isinstance(payload, dict) else None
        method = methods.get(name) if isinstance(name, str) else None
        if method is None:
            raise RpcError("UNIMPLEMENTED", f"unknown method {name!r} at {address}")
        return await run_in(ctx.process, method(payload), address)

    return ctx.listen(port, handler)


# -- HTTP ----------------------------------------------------------------------------------------


@attrs.frozen
class HttpRequest:
    """A parsed HTTP request: method, path without query, query parameters, body text."""

    method: str
    path: str
    query: dict[str, str]
    body: str
    headers: dict[str, str]
    #: Every value of each query parameter, blank ones kept, in order (``filter_keys=a&
    #: filter_keys=b``), as aiohttp's ``query.getall`` gives them.
    query_all: dict[str, list[str]] = attrs.field(factory=dict)

    def json(self) -> Any:
        """The body decoded as JSON (raises ``ValueError`` on bad JSON)."""
        return orjson.loads(self.body) if self.body else None

    @classmethod
    def parse(cls, payload: Any) -> HttpRequest:
        if not isinstance(payload, dict):
            raise ValueError(f"not an HTTP request: {payload!r}")
        url = urlsplit(str(payload.get("path") or "/"))
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        query_all = parse_qs(url.query, keep_blank_values=True)
        body = payload.get("body")
        if body is None:
            text = ""
        elif isinstance(body, (bytes, bytearray)):
            text = bytes(body).decode()
        elif isinstance(body, str):
            text = body
        else:
            text = orjson.dumps(body).decode()
        headers = {str(k).lower(): str(v) for k, v in (payload.get("headers") or {}).items()}
        return cls(str(payload.get("method") or "GET").upper(), url.path or "/", query, text,
                   headers, query_all)


def http_request(method: str, path: str, body: Any = None,
                 headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The request dict for ``method path`` (``body``: text, or anything JSON-serializable)."""
    if body is not None and not isinstance(body, str):
        body = orjson.dumps(body).decode()
    return {"method": method, "path": path, "headers": dict(headers or {}), "body": body}


def response(status: int, body: str = "", content_type: str = "text/plain") -> dict[str, Any]:
    return {"status": status, "headers": {"content-type": content_type}, "body": body}


def json_response(status: int, obj: Any) -> dict[str, Any]:
    return response(status, orjson.dumps(obj).decode(), "application/json")


def serve_http(ctx: ContainerContext, port: int, handler: HttpHandler) -> str:
    """Listen on ``port`` for HTTP-shaped requests; a malformed one gets 400."""
    address = f"{ctx.ip}:{port}"

    async def on_call(payload: Any, info: CallInfo) -> Any:
        try:
            request = HttpRequest.parse(payload)
        except ValueError as err:
            return response(400, str(err))
        return await run_in(ctx.process, handler(request), address)

    return ctx.listen(port, on_call)


@attrs.frozen
class HttpResponse:
    """What an HTTP call returned (client side)."""

    status: int
    body: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None


Caller = Callable[..., Awaitable[Any]]


async def http_call(call: Caller, address: str, method: str, path: str, body: Any = None,
                    timeout: float | None = None) -> HttpResponse:
    """Send an HTTP request with ``call(address, payload, verb=, name=, timeout=)`` (a
    `ContainerContext.call` or a `Network.call` bound to a caller)."""
    result = await call(address, http_request(method, path, body), verb=method,
                        name=path.split("?", 1)[0], timeout=timeout)
    return HttpResponse(int(result["status"]), str(result.get("body") or ""))


def bind_caller(network: Any, *, process: Process | None = None,
                caller: str = "test") -> Caller:
    """A ``call(address, payload, verb=, name=, timeout=)`` for code outside any container (a
    test's driver, the dashboard of a test): from ``process`` if given, else as ``caller``."""

    async def call(address: str, payload: Any, *, verb: str = "", name: str = "",
                   timeout: float | None = None) -> Any:
        return await network.call(process, address, payload, verb=verb, name=name,
                                  timeout=timeout, caller=None if process else caller)

    return call
