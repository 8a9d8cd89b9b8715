"""HTTP from an operator process: how a controller reaches a Ray dashboard.

KubeRay's dashboard client sends HTTP to ``<head-svc>.<ns>.svc.cluster.local:8265``; here the
request travels the emulated network from the operator's process (so partitions, outages and
lost responses reach it) to whatever serves that address — the kube-proxy analog in front of the
head Pod's dashboard. The wire shape is a plain dict (``{"method", "path", "headers", "body"}`` →
``{"status", "headers", "body"}``), the one the fake Ray's servers speak; error statuses are
responses, only a missing server raises (`emu.kernel.network` errors).
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import orjson

from ..kernel.network import Network, Timeout
from ..kernel.process import Process

#: client-go's and KubeRay's dashboard client timeout (``http.Client{Timeout: 2 * time.Second}``).
DEFAULT_HTTP_TIMEOUT = 2.0


@attrs.frozen
class HttpResponse:
    """A response: status code, headers and body text."""

    status: int
    body: str = ""
    headers: dict[str, str] = attrs.field(factory=dict)

    def json(self) -> Any:
        """The body decoded as JSON (`ValueError` when it is not)."""
        return orjson.loads(self.body) if self.body else None


class HttpClient:
    """Sends HTTP-shaped requests from one process over the emulated network."""

    def __init__(self, network: Network, process: Process | None, *,
                 timeout: float = DEFAULT_HTTP_TIMEOUT) -> None:
        self.network = network
        self.process = process
        self.timeout = timeout

    async def request(self, address: str, method: str, path: str, body: Any = None, *,
                      headers: dict[str, str] | None = None,
                      timeout: float | None = None) -> HttpResponse:
        """Send ``method path`` to ``address`` (``host:port``); the response, whatever its status.

        ``body`` may be text or a JSON-able value (sent as JSON).
        """
        if body is not None and not isinstance(body, str):
            body = orjson.dumps(body).decode()
            headers = {"content-type": "application/json", **(headers or {})}
        payload = {"method": method.upper(), "path": path, "headers": dict(headers or {}),
                   "body": body or ""}
        limit = self.timeout if timeout is None else timeout
        try:
            # Go's http.Client{Timeout} covers the whole exchange: a slow server times out too,
            # not only a lost packet.
            raw = await asyncio.wait_for(
                self.network.call(self.process, address, payload, verb=method.upper(), name=path,
                                  timeout=limit),
                limit)
        except TimeoutError:
            raise Timeout(f"{method.upper()} http://{address}{path}: context deadline exceeded "
                          f"(Client.Timeout exceeded while awaiting headers) after {limit:g}s",
                          dst=address) from None
        if not isinstance(raw, dict):
            raise TypeError(f"{address} answered {type(raw).__name__}, not an HTTP response")
        text = raw.get("body", "")
        if not isinstance(text, str):
            text = orjson.dumps(text).decode()
        return HttpResponse(int(raw.get("status", 0)), text, dict(raw.get("headers") or {}))
