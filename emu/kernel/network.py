"""The network: every call between processes travels here, and here is where faults apply.

A client's request to the API server, the operator's HTTP call to a Ray dashboard, a raylet's
heartbeat to its GCS: each is `Network.call` from a source process to an endpoint address. With no
fault active a call costs one scheduling step (it yields once, as a real round trip would, so
concurrent processes interleave). Faults, each with its undo:

- `partition(a, b)`: packets between a and b are dropped; calls time out. Undo: `heal`.
- `outage(endpoint)`: the endpoint is down; calls are refused (or time out with
  ``mode="blackhole"``), and open streams break. Undo: `restore`.
- `set_latency(seconds, ...)`: one-way delay on matching calls. Undo: ``set_latency(0, ...)``.
- `fail_requests(match, ...)`: matching calls fail with a given error, for a count or a time window.
  Undo: `clear_rule` (or it expires).
- `lose_responses(match, ...)`: matching calls take effect but the caller never hears back and
  times out — the request a zombie leader sent that still lands. Undo: `clear_rule`.
- `host_gone(host)`: the machine behind an address (a deleted Pod's IP, a dead Node's Pods) no
  longer exists; a call to it gets no answer and times out after the caller's own timeout, as an
  unanswered SYN does, where a live host with nothing on the port refuses at once. Undo:
  `host_back` (the IP is given to a new Pod). ``blackhole_gone_hosts = False`` refuses instead
  (the emulator's older, faster and optimistic behaviour).

Long-lived streams (watches) are opened with `Network.stream`; a partition or outage between the
two ends breaks them with `ConnectionReset`, as a TCP connection reset would.

Prior art: turmoil ``top.rs`` (partition, repair, hold, release), madsim's ``NetSim``.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import attrs

from .process import Process, ProcessGone, ProcessState

if TYPE_CHECKING:
    from .trace import Trace

@types.coroutine
def _in_transit() -> Generator[None, None, None]:
    """One scheduling step: what ``asyncio.sleep(0)`` does, without its extra coroutine."""
    yield


#: How long a caller waits on a dropped packet before it gives up, unless it says otherwise.
DEFAULT_TIMEOUT = 30.0


class NetworkError(OSError):
    """A call did not get an answer from its endpoint (an `OSError`, as socket errors are, so
    code written against real sockets catches it)."""

    def __init__(self, message: str, *, src: str = "", dst: str = "") -> None:
        super().__init__(message)
        self.src = src
        self.dst = dst


class ConnectionRefused(NetworkError, ConnectionRefusedError):
    """Nothing listens at the address (endpoint down, process gone, or outage)."""


class Timeout(NetworkError, TimeoutError):
    """No answer within the caller's timeout (dropped packets or a lost response)."""


class ConnectionReset(NetworkError, ConnectionResetError):
    """An open stream was cut (partition, outage, or the far end died)."""


class CallInfo(NamedTuple):
    """What a call looks like on the wire: who, to where, and what (for fault matching).

    A named tuple rather than an attrs value: one is built for every call, and a tuple is built
    in a third of the time (issue 17); it is as immutable."""

    src: str
    src_host: str
    dst: str
    verb: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""


@attrs.frozen
class Match:
    """A predicate over calls: every field that is set must equal the call's (``caller`` matches
    the source process name or host; ``dst`` the endpoint address or its owner's name)."""

    verb: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    caller: str | None = None
    dst: str | None = None

    def matches(self, info: CallInfo, dst_owner: str = "") -> bool:
        return (
            (self.verb is None or self.verb == info.verb)
            and (self.kind is None or self.kind == info.kind)
            and (self.name is None or self.name == info.name)
            and (self.namespace is None or self.namespace == info.namespace)
            and (self.caller is None or self.caller in (info.src, info.src_host))
            and (self.dst is None or self.dst in (info.dst, dst_owner))
        )


class Handler(Protocol):
    def __call__(self, payload: Any, info: CallInfo) -> Awaitable[Any]: ...


class StreamHandler(Protocol):
    """Opens a stream: returns an object with ``__anext__`` and ``close()``."""

    def __call__(self, payload: Any, info: CallInfo) -> Awaitable[ServerStream]: ...


class ServerStream(Protocol):
    def __aiter__(self) -> AsyncIterator[Any]: ...
    async def __anext__(self) -> Any: ...
    def close(self) -> None: ...


@attrs.define
class Endpoint:
    address: str
    handler: Handler | None
    stream_handler: StreamHandler | None
    process: Process | None
    #: every address it was registered under (the address and its aliases)
    addresses: tuple[str, ...] = ()
    #: ``handler`` as a plain function, for a handler that never waits (`Network.register`)
    sync_handler: Callable[[Any, CallInfo], Any] | None = None

    @property
    def owner(self) -> str:
        return self.process.name if self.process is not None else ""

    @property
    def owner_host(self) -> str:
        return self.process.host if self.process is not None else ""

    @property
    def up(self) -> bool:
        return self.process is None or self.process.alive


@attrs.define
class _Rule:
    id: int
    kind: str  # "fail" | "lose"
    match: Match
    remaining: int | None
    until: float | None
    error: Callable[[CallInfo], Exception] | None


class _Stream:
    """The caller's end of a stream; broken by faults between its two ends."""

    def __init__(self, net: Network, src: Process | None, ep: Endpoint, info: CallInfo,
                 inner: ServerStream) -> None:
        self._net = net
        self._src = src
        self.endpoint = ep
        self.info = info
        self._inner = inner
        self.broken: str | None = None

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Any:
        if self.broken:
            raise ConnectionReset(self.broken, src=self.info.src, dst=self.info.dst)
        try:
            item = await self._inner.__anext__()
        except StopAsyncIteration:
            self._net._drop_stream(self)
            if self.broken:
                raise ConnectionReset(self.broken, src=self.info.src, dst=self.info.dst) from None
            raise
        if self.broken:  # cut while the item was in flight: it never arrives
            raise ConnectionReset(self.broken, src=self.info.src, dst=self.info.dst)
        delay = self._net._latency_for(self.info, self.endpoint.owner)
        if delay:
            await asyncio.sleep(delay)
        if self._src is not None and self._src.state is not ProcessState.RUNNING:
            await self._src.checkpoint()
        return item

    def break_(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
            self._inner.close()

    def close(self) -> None:
        self._net._drop_stream(self)
        self._inner.close()


class Network:
    """Endpoints by address, and the fault rules that apply to calls between processes."""

    def __init__(self, clock: Callable[[], float], trace: Trace,
                 default_timeout: float = DEFAULT_TIMEOUT) -> None:
        self._clock = clock
        self._trace = trace
        self.default_timeout = default_timeout
        self._endpoints: dict[str, Endpoint] = {}
        #: DNS names that resolve to Pod IPs on any port (headless Services; kube-proxy fills
        #: it): name → the IPs now behind it. `ContainerContext.resolve` consults it when no
        #: endpoint is registered at ``name:port``.
        self.hostnames: dict[str, Callable[[], list[str]]] = {}
        self._partitions: dict[tuple[str, str], int] = {}
        self._outages: dict[str, str] = {}
        self._latency: list[tuple[Match, float]] = []
        self._rules: dict[int, _Rule] = {}
        self._rule_seq = 0
        self._streams: dict[int, _Stream] = {}
        #: The open streams again, by id of their endpoint and of their source process (in
        #: opening order, as `_streams`), so an endpoint's or a process's end touches only its
        #: own streams rather than scanning every open one.
        self._streams_to: dict[int, dict[int, _Stream]] = {}
        self._streams_from: dict[int, dict[int, _Stream]] = {}
        self._triggers: dict[int, tuple[Match, int | None, Callable[[CallInfo], None]]] = {}
        self._gone_hosts: dict[str, None] = {}
        #: See `host_gone`; set before the hosts go.
        self.blackhole_gone_hosts = True
        self._faulty = False
        #: Where each call's `emu.kernel.trace.Span` goes (who sent what, how long it took, how
        #: it ended), or None to keep none. Recorded here rather than by wrapping `call`: one
        #: coroutine less on every request. Appended as a row tuple (see
        #: `emu.kernel.trace.request_span`), which a `Trace`'s ``spans`` turns into a `Span` when
        #: read: most runs never look at them. Spans are outside the digest.
        self.spans: list[Any] | None = None
        #: How many calls each fail/lose/after-call rule (by id) and each latency match caught,
        #: kept after a rule expires: a fault whose matcher caught nothing did not happen.
        self.rule_hits: dict[int, int] = {}
        self.latency_hits: dict[Match, int] = {}
        #: Identities of non-process callers seen (a test's ``kubectl`` client), for fault checks.
        self.callers: dict[str, None] = {}

    # -- endpoints -------------------------------------------------------------------------------

    def register(self, address: str, handler: Handler | None = None, *,
                 stream_handler: StreamHandler | None = None, process: Process | None = None,
                 aliases: tuple[str, ...] = (),
                 sync_handler: Callable[[Any, CallInfo], Any] | None = None) -> None:
        """Listen at ``address`` (and aliases). If ``process`` ends, the endpoint goes down.
        ``sync_handler``: ``handler`` as a plain function (the same answers and errors), for
        a handler that never waits; a call without faults runs it in place of awaiting
        ``handler`` (one coroutine less per request: the API server's)."""
        ep = Endpoint(address, handler, stream_handler, process, (address, *aliases),
                      sync_handler)
        for addr in (address, *aliases):
            self._endpoints[addr] = ep
        if process is not None:
            process.on_exit(lambda _p: self._endpoint_died(ep))

    def unregister(self, address: str) -> None:
        ep = self._endpoints.get(address)
        if ep is None:
            return
        for addr in ep.addresses:
            if self._endpoints.get(addr) is ep:
                del self._endpoints[addr]
        self._endpoint_died(ep)

    def endpoint(self, address: str) -> Endpoint | None:
        return self._endpoints.get(address)

    def endpoint_names(self) -> list[str]:
        """Every name a fault may give an endpoint by: its addresses and its owner process's
        name, sorted."""
        names: dict[str, None] = {}
        for addr, ep in self._endpoints.items():
            names[addr] = None
            if ep.owner:
                names[ep.owner] = None
        return sorted(names)

    def _endpoint_died(self, ep: Endpoint) -> None:
        for stream in list(self._streams_to.get(id(ep), {}).values()):
            stream.break_(f"{ep.address}: connection reset (endpoint gone)")

    def process_gone(self, proc: Process) -> None:
        """Close every stream a finished process still had open."""
        for stream in list(self._streams_from.get(id(proc), {}).values()):
            self._drop_stream(stream)
            stream.close()

    def _add_stream(self, stream: _Stream) -> None:
        key = id(stream)
        self._streams[key] = stream
        self._streams_to.setdefault(id(stream.endpoint), {})[key] = stream
        if stream._src is not None:
            self._streams_from.setdefault(id(stream._src), {})[key] = stream

    def _drop_stream(self, stream: _Stream) -> None:
        """Forget an open stream (a live stream keeps its endpoint and process alive, so their
        ids are not reused while indexed)."""
        key = id(stream)
        if self._streams.pop(key, None) is None:
            return
        for index, owner in ((self._streams_to, stream.endpoint), (self._streams_from,
                                                                    stream._src)):
            streams = index.get(id(owner))
            if streams is not None:
                streams.pop(key, None)
                if not streams:
                    del index[id(owner)]

    # -- faults ----------------------------------------------------------------------------------

    def _refresh(self) -> None:
        self._faulty = bool(self._partitions or self._outages or self._latency or self._rules
                            or self._triggers or self._gone_hosts)

    def host_gone(self, host: str) -> None:
        """The machine at ``host`` (an IP or host name) is gone: calls to its addresses time out
        (module docstring). Undo: `host_back`."""
        if host and self.blackhole_gone_hosts:
            self._gone_hosts[host] = None
            self._refresh()

    def host_back(self, host: str) -> None:
        """``host`` exists again (its IP was given to a new Pod)."""
        if self._gone_hosts.pop(host, 0) is None:
            self._refresh()

    def partition(self, a: str, b: str) -> None:
        """Drop every packet between a and b (process names, hosts or addresses; a host covers
        every process on it, both as caller and as server). Undo: heal."""
        key = (a, b) if a <= b else (b, a)
        self._partitions[key] = 1
        self._refresh()
        self._trace.emit("network", "partition", a=key[0], b=key[1])
        for stream in list(self._streams.values()):
            if self._partitioned(stream.info, stream.endpoint.owner, stream.endpoint.owner_host):
                stream.break_(f"{stream.info.dst}: connection reset (partition)")

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        """End the partition between a and b, or every partition when neither is given."""
        if a is None and b is None:
            self._partitions.clear()
        else:
            assert a is not None and b is not None, "heal takes both ends or neither"
            self._partitions.pop((a, b) if a <= b else (b, a), None)
        self._refresh()
        self._trace.emit("network", "heal", a=a, b=b)

    def partitioned_pairs(self, a: str | None = None, b: str | None = None
                          ) -> list[tuple[str, str]]:
        """The partitions in force (sorted pairs); only the one between a and b when given."""
        if a is None or b is None:
            return sorted(self._partitions)
        key = (a, b) if a <= b else (b, a)
        return [key] if key in self._partitions else []

    def in_outage(self, endpoint: str) -> bool:
        """Whether ``endpoint`` (as given to `outage`) is down."""
        return endpoint in self._outages

    def outage(self, endpoint: str, mode: str = "refuse") -> None:
        """Take an endpoint down: calls are refused (``mode="refuse"``) or time out
        (``"blackhole"``), and its open streams break. Undo: restore."""
        if mode not in ("refuse", "blackhole"):
            raise ValueError(f"outage mode must be 'refuse' or 'blackhole', not {mode!r}")
        self._outages[endpoint] = mode
        self._refresh()
        self._trace.emit("network", "outage", endpoint=endpoint, mode=mode)
        for stream in list(self._streams.values()):
            if endpoint in (stream.info.dst, stream.endpoint.owner, stream.endpoint.address):
                stream.break_(f"{stream.info.dst}: connection reset (outage)")

    def restore(self, endpoint: str) -> None:
        """End an outage."""
        self._outages.pop(endpoint, None)
        self._refresh()
        self._trace.emit("network", "restore", endpoint=endpoint)

    def set_latency(self, seconds: float, match: Match | None = None) -> None:
        """One-way delay for matching calls (the last matching rule wins); 0 removes the rule."""
        if seconds < 0:
            raise ValueError(f"latency can't be negative: {seconds}")
        match = match or Match()
        self._latency = [(m, s) for m, s in self._latency if m != match]
        if seconds > 0:
            self._latency.append((match, seconds))
        self._refresh()

    def fail_requests(self, match: Match, error: Callable[[CallInfo], Exception], *,
                      count: int | None = None, duration: float | None = None) -> int:
        """Fail matching calls with ``error(info)`` (before they reach the endpoint), for ``count``
        calls and/or ``duration`` seconds (forever when neither). Returns the rule id."""
        return self._add_rule("fail", match, error, count, duration)

    def lose_responses(self, match: Match, *, count: int | None = 1,
                       duration: float | None = None) -> int:
        """Matching calls take effect, but their responses are lost: the caller times out."""
        return self._add_rule("lose", match, None, count, duration)

    def after_call(self, match: Match, action: Callable[[CallInfo], None], *,
                   count: int | None = 1) -> int:
        """Run ``action(info)`` right after a matching call took effect at its endpoint (before
        the caller hears back), for ``count`` calls (every one when None): "crash the leader just
        after its Job create was committed". Returns a rule id for `clear_rule`."""
        if count is not None and count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        self._rule_seq += 1
        self._triggers[self._rule_seq] = (match, count, action)
        self._refresh()
        return self._rule_seq

    def _take_triggers(self, info: CallInfo, owner: str) -> list[Callable[[CallInfo], None]]:
        fired = []
        for rule_id, (match, count, action) in list(self._triggers.items()):
            if match.matches(info, owner):
                fired.append(action)
                self.rule_hits[rule_id] = self.rule_hits.get(rule_id, 0) + 1
                if count is not None:
                    if count <= 1:
                        del self._triggers[rule_id]
                    else:
                        self._triggers[rule_id] = (match, count - 1, action)
        if fired:
            self._refresh()
        return fired

    def clear_rule(self, rule_id: int) -> None:
        """Remove a fail, lose or after-call rule."""
        self._rules.pop(rule_id, None)
        self._triggers.pop(rule_id, None)
        self._refresh()

    def _add_rule(self, kind: str, match: Match, error: Callable[[CallInfo], Exception] | None,
                  count: int | None, duration: float | None) -> int:
        if count is not None and count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        self._rule_seq += 1
        until = None if duration is None else self._clock() + duration
        self._rules[self._rule_seq] = _Rule(self._rule_seq, kind, match, count, until, error)
        self._refresh()
        return self._rule_seq

    def _take_rule(self, kind: str, info: CallInfo, owner: str) -> _Rule | None:
        now = self._clock()
        for rule_id, rule in list(self._rules.items()):
            if rule.until is not None and now >= rule.until:
                del self._rules[rule_id]
                continue
            if rule.kind == kind and rule.match.matches(info, owner):
                self.rule_hits[rule_id] = self.rule_hits.get(rule_id, 0) + 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        del self._rules[rule_id]
                self._refresh()
                return rule
        return None

    def _partitioned(self, info: CallInfo, owner: str, owner_host: str = "") -> bool:
        if not self._partitions:
            return False
        srcs = (info.src, info.src_host)
        dsts = (info.dst, owner, owner_host)
        return any((a in srcs and b in dsts) or (b in srcs and a in dsts)
                   for a, b in self._partitions)

    def _latency_for(self, info: CallInfo, owner: str) -> float:
        delay = 0.0
        hit = None
        for match, seconds in self._latency:
            if match.matches(info, owner):
                delay, hit = seconds, match
        if hit is not None:
            self.latency_hits[hit] = self.latency_hits.get(hit, 0) + 1
        return delay

    def _outage_mode(self, info: CallInfo, ep: Endpoint | None) -> str | None:
        if self._gone_hosts and (ep is None or not ep.up) \
                and info.dst.rsplit(":", 1)[0] in self._gone_hosts:
            return "blackhole"
        if not self._outages:
            return None
        for key in (info.dst, ep.owner if ep else "", ep.address if ep else ""):
            if key and key in self._outages:
                return self._outages[key]
        return None

    # -- calls -----------------------------------------------------------------------------------

    def _info(self, src: Process | None, dst: str, verb: str, kind: str, name: str,
              namespace: str, caller: str | None) -> CallInfo:
        if src is None:
            who = caller or "test"
            self.callers[who] = None
            return CallInfo(who, who, dst, verb, kind, name, namespace)
        return CallInfo(src.name, src.host, dst, verb, kind, name, namespace)

    async def call(self, src: Process | None, dst: str, payload: Any, *, verb: str = "",
                   kind: str = "", name: str = "", namespace: str = "",
                   timeout: float | None = None, caller: str | None = None) -> Any:
        """Send ``payload`` from ``src`` to the endpoint at ``dst`` and return its answer.

        Raises `ConnectionRefused` or `Timeout` (or a fault rule's error); the endpoint's own
        exceptions pass through to the caller, as an HTTP error response would. ``caller`` names
        a source that is not a process (a test's client).
        """
        spans = self.spans  # a request's span is kept when the world keeps them
        start = self._clock() if spans is not None else 0.0
        outcome = "ok"
        try:
            if src is None:  # `_info`, inline: this runs for every request
                who = caller or "test"
                self.callers[who] = None
                info = CallInfo(who, who, dst, verb, kind, name, namespace)
            else:
                if src.state is not ProcessState.RUNNING:
                    await src.checkpoint()
                info = CallInfo(src.name, src.host, dst, verb, kind, name, namespace)
            await _in_transit()  # faults applied meanwhile still catch the call
            ep = self._endpoints.get(dst)
            if not self._faulty:
                # `Endpoint.up`, inline
                if ep is None or ep.handler is None or (
                        ep.process is not None and not ep.process.alive):
                    raise ConnectionRefused(f"dial {dst}: connection refused", src=info.src,
                                            dst=dst)
                sync = ep.sync_handler
                result = sync(payload, info) if sync is not None else \
                    await ep.handler(payload, info)
                if src is not None and src.state is not ProcessState.RUNNING:
                    await src.checkpoint()
                return result
            return await self._faulty_call(src, ep, info, payload, timeout)
        except BaseException as exc:
            outcome = type(exc).__name__
            raise
        finally:
            if spans is not None:
                # A row, made a `Span` only when someone reads the spans (`request_span`).
                spans.append((src.name if src is not None else (caller or "test"), verb, kind,
                               name, dst, start, self._clock(), outcome))

    async def _faulty_call(self, src: Process | None, ep: Endpoint | None, info: CallInfo,
                           payload: Any, timeout: float | None) -> Any:
        wait = self.default_timeout if timeout is None else timeout
        owner = ep.owner if ep else ""
        mode = self._outage_mode(info, ep)
        if self._partitioned(info, owner, ep.owner_host if ep else "") or mode == "blackhole":
            await asyncio.sleep(wait)
            self._trace.emit(info.src, "call_timeout", dst=info.dst, verb=info.verb,
                             kind=info.kind, name=info.name)
            raise Timeout(f"{info.verb or 'call'} {info.dst}: i/o timeout after {wait:g}s",
                          src=info.src, dst=info.dst)
        delay = self._latency_for(info, owner)
        if delay:
            await asyncio.sleep(delay)
        if src is not None and src.state is not ProcessState.RUNNING:
            await src.checkpoint()
        if mode == "refuse" or ep is None or ep.handler is None or not ep.up:
            raise ConnectionRefused(f"dial {info.dst}: connection refused", src=info.src,
                                    dst=info.dst)
        rule = self._take_rule("fail", info, owner)
        if rule is not None and rule.error is not None:
            raise rule.error(info)
        lose = self._take_rule("lose", info, owner)
        try:
            result = await ep.handler(payload, info)
        except Exception:
            if lose is None:
                raise
            result = None
        for after in self._take_triggers(info, owner):
            after(info)
        if lose is not None:
            self._trace.emit(info.src, "response_lost", dst=info.dst, verb=info.verb,
                             kind=info.kind, name=info.name)
            await asyncio.sleep(wait)
            self._trace.emit(info.src, "call_timeout", dst=info.dst, verb=info.verb,
                             kind=info.kind, name=info.name)
            raise Timeout(f"{info.verb or 'call'} {info.dst}: i/o timeout after {wait:g}s "
                          "(the request was applied; its response was lost)",
                          src=info.src, dst=info.dst)
        delay = self._latency_for(info, owner)
        if delay:
            await asyncio.sleep(delay)
        if src is not None and src.state is not ProcessState.RUNNING:
            await src.checkpoint()
        return result

    async def stream(self, src: Process | None, dst: str, payload: Any, *, verb: str = "watch",
                     kind: str = "", name: str = "", namespace: str = "",
                     timeout: float | None = None, caller: str | None = None) -> _Stream:
        """Open a long-lived stream; iterate it for items. Faults between the ends break it."""
        if src is not None and src.state is not ProcessState.RUNNING:
            await src.checkpoint()
        info = self._info(src, dst, verb, kind, name, namespace, caller)
        await _in_transit()
        ep = self._endpoints.get(dst)
        if self._faulty:
            owner = ep.owner if ep else ""
            mode = self._outage_mode(info, ep)
            if self._partitioned(info, owner, ep.owner_host if ep else "") or mode == "blackhole":
                wait = self.default_timeout if timeout is None else timeout
                await asyncio.sleep(wait)
                raise Timeout(f"watch {dst}: i/o timeout after {wait:g}s", src=info.src, dst=dst)
            if mode == "refuse":
                ep = None
            rule = self._take_rule("fail", info, owner)
            if rule is not None and rule.error is not None:
                raise rule.error(info)
        if ep is None or ep.stream_handler is None or not ep.up:
            raise ConnectionRefused(f"dial {dst}: connection refused", src=info.src, dst=dst)
        if src is not None and not src.alive:
            raise ProcessGone(f"process {src.name} is {src.state.value}")
        inner = await ep.stream_handler(payload, info)
        stream = _Stream(self, src, ep, info, inner)
        self._add_stream(stream)
        return stream
