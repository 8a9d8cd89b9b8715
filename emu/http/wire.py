"""The HTTP request and response values the gateway works on, independent of any web framework.

The aiohttp server (`emu.http.server`) and the in-process httpx transport (`emu.http.transport`)
both turn their framework's request into an `HttpRequest`, hand it to one `Gateway`, and turn the
`HttpResponse` or `WatchResponse` back; so a kubectl call over a socket and a lightkube call on virtual
time take the same path to the API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import attrs
import orjson

JSON = "application/json"

#: The largest request body the gateway reads (kube-apiserver's limit is 3 MiB).
DEFAULT_MAX_BODY = 3 * 1024 * 1024


class HttpRequest:
    """One request: ``headers`` is a mapping looked up with lower-case names (a plain dict with
    lower-case keys, or a framework's case-insensitive headers); ``query`` keeps repeated keys in
    order. A plain slotted class rather than attrs: one is built per request."""

    __slots__ = ("body", "caller", "headers", "method", "path", "peer", "query")

    def __init__(self, method: str, path: str, query: tuple[tuple[str, str], ...] = (),
                 headers: Mapping[str, str] | None = None, body: bytes = b"") -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers: Mapping[str, str] = {} if headers is None else headers
        self.body = body
        #: The network identity the request's credentials give it (a ServiceAccount token's
        #: user), set by the gateway; None: the User-Agent's product names the caller.
        self.caller: str | None = None
        #: The verified client certificate (``getpeercert()``), over HTTPS with x509 login.
        self.peer: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"HttpRequest({self.method!r}, {self.path!r}, {self.query!r})"

    def param(self, name: str, default: str | None = None) -> str | None:
        """The last value of query parameter ``name`` (kube reads the last one too)."""
        found = default
        for key, value in self.query:
            if key == name:
                found = value
        return found

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


class HttpResponse:
    """A complete response (a plain slotted class: one is built per request)."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, status: int, body: bytes, content_type: str = JSON,
                 headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers

    def __repr__(self) -> str:
        return f"HttpResponse({self.status}, {self.body[:80]!r}, {self.content_type!r})"

    @classmethod
    def json(cls, obj: Any, status: int = 200) -> HttpResponse:
        return cls(status, orjson.dumps(obj))

    @classmethod
    def error(cls, status: dict[str, Any], code: int) -> HttpResponse:
        """A failure ``Status`` as kube-apiserver writes it: Go's ``json.Encoder`` ends the
        body with a newline."""
        return cls(code, orjson.dumps(status) + b"\n")

    def decoded(self) -> Any:
        return orjson.loads(self.body)


@attrs.define
class WatchResponse:
    """A 200 response whose body is a stream of newline-terminated JSON events; ``close`` stops
    it (the client went away)."""

    chunks: AsyncIterator[bytes]
    close: Callable[[], None]
    content_type: str = JSON


class Dropped(Exception):
    """The emulated network did not deliver an answer: the adapter drops the connection, as a
    refused or timed-out TCP connection looks to a real client. ``timeout`` tells which."""

    def __init__(self, message: str, *, timeout: bool) -> None:
        super().__init__(message)
        self.timeout = timeout
