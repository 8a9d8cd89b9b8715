"""The trace: every event of a run, stamped with virtual time and the emitting process, in order.

A run's trace is its evidence: the timeline the CLI prints, the HTML and Perfetto views, and the
digest that proves two runs of the same seed did the same thing. Events are appended in the order
they happen on the single event loop, so the order is itself deterministic; the digest is a SHA-256
over each event's canonical JSON (sorted keys), updated as events arrive.

Components log through structlog (`Trace.logger`): the bound logger's processors stamp the virtual
time and the process and append to the trace, so ``log.info("lease_acquired", holder=...)`` is all a
component writes.

Beside the events, the trace keeps `Span`s that are not part of the history (no digest): the
requests each process sent, with their start and end. `Trace.to_chrome` draws them, with process
lifetimes and reconciles rebuilt from the events, as Chrome trace "complete" events (Perfetto).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import attrs
import orjson
import structlog

_DUMP_OPTS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
#: How many emitted events' lines wait behind recorded rows before the digest catches up: an
#: emitted event is encoded at once, and its line is held only while rows before it wait.
_HELD_LINES = 1024


def _default(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return repr(value)


@attrs.frozen
class TraceEvent:
    """One thing that happened: when (virtual seconds), where (process), what, and its fields."""

    t: float
    process: str
    event: str
    fields: dict[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> bytes:
        return _encode(self.t, self.process, self.event, self.fields)


def _encode(t: float, process: str, event: str, fields: dict[str, Any]) -> bytes:
    """An event's JSON line (without its newline): what the digest hashes and JSONL holds."""
    return orjson.dumps({"t": round(t, 9), "process": process, "event": event, **fields},
                        option=_DUMP_OPTS, default=_default)


@attrs.frozen
class Span:
    """Something that took time in a process (a request it sent): shown, never digested."""

    process: str
    name: str
    start: float
    end: float
    args: dict[str, Any] = attrs.field(factory=dict)


def request_span(row: tuple[str, str, str, str, str, float, float, str]) -> Span:
    """The `Span` of a request row as `emu.kernel.network.Network.call` records it: (caller,
    verb, kind, name, destination, start, end, outcome)."""
    who, verb, kind, name, dst, start, end, outcome = row
    what = " ".join([x for x in (verb, kind, name) if x]) or f"call {dst}"
    return Span(who, what, start, end, {"dst": dst, "outcome": outcome})


def _row(item: tuple[Any, ...]) -> tuple[float, str, str, dict[str, Any]]:
    """A recorded row as (t, process, event, fields), its fields a dict of their own."""
    if len(item) == 5:
        t, process, event, keys, values = item
        return t, process, event, dict(zip(keys, values, strict=True))
    return cast("tuple[float, str, str, dict[str, Any]]", item)


#: Events that end a process's lifetime.
_PROCESS_ENDS = ("process_crashed", "process_exited", "process_stopped")


class Trace:
    """An append-only, ordered list of `TraceEvent` with a running digest."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._spans: list[Any] = []
        # `TraceEvent`s, and rows `record` and `record_row` appended: (t, process, event,
        # fields) and (t, process, event, keys, values) tuples, made events when the events are
        # read (`_settle`); those before ``_made`` are all events.
        self._events: list[Any] = []
        self._made = 0
        self._hash = hashlib.sha256()
        # Events before ``_hashed`` are in the hash; the others wait for `digest`, each row
        # encoded then, each `emit`ted event already encoded in ``_encoded`` (by index).
        self._hashed = 0
        self._encoded: dict[int, bytes] = {}
        self._listeners: list[Callable[[TraceEvent], None]] = []

    @property
    def spans(self) -> list[Span]:
        """Requests and other durations (see `Span`), in the order they ended. The same list
        every time: the network appends request rows to it, made Spans here when read."""
        spans = self._spans
        for i, item in enumerate(spans):
            if type(item) is tuple:
                spans[i] = request_span(item)
        return cast("list[Span]", spans)

    def emit(self, process: str, event: str, **fields: Any) -> TraceEvent:
        """Record an event now."""
        t = self._clock()
        ev = TraceEvent(t, process, event, fields)
        events = self._events
        # encoded now, as the fields may hold values their owner changes later
        line = _encode(t, process, event, fields) + b"\n"
        if self._hashed == len(events):
            self._hash.update(line)
            self._hashed += 1
            events.append(ev)
        else:
            self._encoded[len(events)] = line
            events.append(ev)
            if len(self._encoded) >= _HELD_LINES:
                self._catch_up()
        if self._listeners:
            for listener in self._listeners:
                listener(ev)
        return ev

    def record(self, process: str, event: str, fields: dict[str, Any]) -> None:
        """`emit` for events recorded on every request (the API server's writes, RBAC's
        decisions), deferred: ``fields`` is the caller's own dict, new for this event, and
        holds only strings and numbers (nothing changes it later), so the event is kept as a
        row, made a `TraceEvent` when the events are read and encoded into the digest when
        `digest` is asked. A server nobody asks for a digest or the events (``emu serve``, a
        benchmark) never pays for either; the digest is the same bytes either way."""
        if self._listeners:
            self.emit(process, event, **fields)
            return
        self._events.append((self._clock(), process, event, fields))

    def record_row(self, process: str, event: str, keys: tuple[str, ...],
                   values: tuple[Any, ...]) -> None:
        """`record` with the fields as two tuples, names and values (the names one constant of
        the caller's): the API server records every write this way, and a row of two tuples
        is a fifth of a dict's memory in a served world that writes for hours."""
        if self._listeners:
            self.emit(process, event, **dict(zip(keys, values, strict=True)))
            return
        self._events.append((self._clock(), process, event, keys, values))

    def _settle(self) -> list[TraceEvent]:
        """The events, every recorded row made a `TraceEvent` (in place, once)."""
        events = self._events
        for i in range(self._made, len(events)):
            item = events[i]
            if type(item) is tuple:
                events[i] = TraceEvent(*_row(item))
        self._made = len(events)
        return cast("list[TraceEvent]", events)

    def subscribe(self, listener: Callable[[TraceEvent], None]) -> None:
        """Call ``listener`` with every later event (invariant checkers use this)."""
        self._listeners.append(listener)

    def digest(self) -> str:
        """Hex SHA-256 of every event so far: equal digests mean equal histories."""
        self._catch_up()
        return self._hash.hexdigest()

    def _catch_up(self) -> None:
        """Hash every event not in the digest yet, in order (recorded rows encoded now)."""
        events = self._events
        if self._hashed < len(events):
            encoded = self._encoded
            lines = []
            for i in range(self._hashed, len(events)):
                line = encoded.pop(i, None)
                if line is None:
                    item = events[i]
                    t, process, event, fields = (_row(item) if type(item) is tuple else
                                                 (item.t, item.process, item.event, item.fields))
                    line = _encode(t, process, event, fields) + b"\n"
                lines.append(line)
            self._hash.update(b"".join(lines))
            self._hashed = len(events)

    @property
    def events(self) -> list[TraceEvent]:
        return self._settle()

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self._settle())

    def select(self, event: str | None = None, process: str | None = None) -> list[TraceEvent]:
        """The events with this name and/or from this process, in order."""
        return [
            e for e in self._settle()
            if (event is None or e.event == event) and (process is None or e.process == process)
        ]

    def to_jsonl(self, path: str | Path | None = None) -> str:
        """The trace as JSON lines; written to ``path`` when given."""
        text = "".join(e.to_json().decode() + "\n" for e in self._settle())
        if path is not None:
            Path(path).write_text(text)
        return text

    def add_span(self, process: str, name: str, start: float, end: float, **args: Any) -> None:
        """Record a `Span` (outside the digest)."""
        self._spans.append(Span(process, name, start, end, args))

    def to_chrome(self, path: str | Path | None = None) -> list[dict[str, Any]]:
        """Chrome trace events (Perfetto, ``chrome://tracing``): one process track per emulated
        process, holding its events as instants and its lifetimes (one slice per incarnation);
        a thread per controller worker holding its reconciles; and request threads holding the
        requests it sent (overlapping requests on separate threads, so slices nest).
        Timestamps are virtual microseconds. Written as ``{"traceEvents": [...]}`` to ``path``."""
        return _Chrome(self._settle(), self.spans).events(path)

    def logger(self, process: str, **bound: Any) -> structlog.stdlib.BoundLogger:
        """A structlog logger whose events land in this trace under ``process``."""

        def append(_logger: object, _method: str, event_dict: dict[str, Any]) -> Any:
            name = str(event_dict.pop("event", ""))
            proc = str(event_dict.pop("process", process))
            self.emit(proc, name, **event_dict)
            raise structlog.DropEvent

        processors: list[Any] = [append]
        return cast(structlog.stdlib.BoundLogger, structlog.wrap_logger(
            None, processors=processors, cache_logger_on_first_use=False, **bound
        ))


class _Chrome:
    """Builds `Trace.to_chrome`'s events."""

    def __init__(self, events: list[TraceEvent], spans: list[Span]) -> None:
        self._events = events
        self._spans = spans
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[int, str], int] = {}
        self._out: list[dict[str, Any]] = []
        self._end = max((e.t for e in events), default=0.0)
        self._end = max([self._end, *(s.end for s in spans)])

    def _pid(self, process: str) -> int:
        pid = self._pids.get(process)
        if pid is None:
            pid = self._pids[process] = len(self._pids) + 1
        return pid

    def _tid(self, pid: int, thread: str) -> int:
        key = (pid, thread)
        tid = self._tids.get(key)
        if tid is None:
            tid = self._tids[key] = sum(1 for p, _ in self._tids if p == pid) + 1
        return tid

    def _slice(self, process: str, thread: str, name: str, start: float, end: float,
               args: dict[str, Any]) -> None:
        pid = self._pid(process)
        self._out.append({"name": name, "cat": thread.split(" ", 1)[0], "ph": "X",
                          "ts": _us(start), "dur": max(_us(end) - _us(start), 0.0), "pid": pid,
                          "tid": self._tid(pid, thread), "args": _plain(args)})

    def events(self, path: str | Path | None) -> list[dict[str, Any]]:
        alive: dict[str, tuple[float, dict[str, Any]]] = {}
        reconciling: dict[tuple[str, str, str], list[tuple[float, int]]] = {}
        for e in self._events:
            pid = self._pid(e.process)
            self._out.append({"name": e.event, "cat": "event", "ph": "i", "s": "t",
                              "ts": _us(e.t), "pid": pid, "tid": self._tid(pid, "events"),
                              "args": _plain(e.fields)})
            if e.event == "process_started":
                alive[e.process] = (e.t, dict(e.fields))
            elif e.event in _PROCESS_ENDS and e.process in alive:
                start, fields = alive.pop(e.process)
                self._lifetime(e.process, start, e.t, fields, e.event, e.fields)
                for key in [k for k in reconciling if k[0] == e.process]:
                    for begun, worker in reconciling.pop(key):
                        self._reconcile(key, begun, worker, e.t, {"outcome": "killed"})
            elif e.event == "reconcile_started":
                key = (e.process, str(e.fields.get("controller")), str(e.fields.get("key")))
                reconciling.setdefault(key, []).append((e.t, int(e.fields.get("worker", 0))))
            elif e.event == "reconcile_finished":
                key = (e.process, str(e.fields.get("controller")), str(e.fields.get("key")))
                open_ = reconciling.get(key)
                if open_:
                    begun, worker = open_.pop(0)
                    if not open_:
                        del reconciling[key]
                    self._reconcile(key, begun, worker, e.t, e.fields)
        for process, (start, fields) in alive.items():
            self._lifetime(process, start, self._end, fields, "running at the end", {})
        for key, open_ in reconciling.items():
            for begun, worker in open_:
                self._reconcile(key, begun, worker, self._end, {"outcome": "unfinished"})
        self._requests()
        for process, pid in self._pids.items():
            self._out.append({"name": "process_name", "ph": "M", "pid": pid,
                              "args": {"name": process}})
            self._out.append({"name": "process_sort_index", "ph": "M", "pid": pid,
                              "args": {"sort_index": pid}})
        for (pid, thread), tid in self._tids.items():
            self._out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                              "args": {"name": thread}})
        if path is not None:
            Path(path).write_bytes(orjson.dumps({"traceEvents": self._out,
                                                 "displayTimeUnit": "ms"}))
        return self._out

    def _lifetime(self, process: str, start: float, end: float, fields: dict[str, Any],
                  how: str, end_fields: dict[str, Any]) -> None:
        name = f"{process} #{fields.get('incarnation', 1)}"
        self._slice(process, "events", name, start, end,
                    {"host": fields.get("host"), "ended": how, **end_fields})

    def _reconcile(self, key: tuple[str, str, str], start: float, worker: int, end: float,
                   fields: dict[str, Any]) -> None:
        process, controller, obj = key
        args = {k: v for k, v in fields.items() if k not in ("controller", "key")}
        self._slice(process, f"reconcile {controller} worker {worker}", f"reconcile {obj}",
                    start, end, args)

    def _requests(self) -> None:
        lanes: dict[str, list[float]] = {}
        for s in sorted(self._spans, key=lambda s: (s.start, -s.end)):
            ends = lanes.setdefault(s.process, [])
            lane = next((i for i, end in enumerate(ends) if end <= s.start), None)
            if lane is None:
                lane = len(ends)
                ends.append(s.end)
            else:
                ends[lane] = s.end
            self._slice(s.process, f"requests {lane}", s.name, s.start, s.end, s.args)


def _us(seconds: float) -> float:
    """Virtual seconds as trace microseconds, rounded to the nanosecond."""
    return round(seconds * 1e6, 3)


def _plain(fields: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], orjson.loads(orjson.dumps(fields, default=_default,
                                                          option=orjson.OPT_NON_STR_KEYS)))


def render_timeline(events: Iterable[TraceEvent], *, width: int = 12) -> str:
    """A plain-text timeline: ``   12.345s  operator-0   lease_acquired holder=...``."""
    lines = []
    for e in events:
        fields = " ".join(f"{k}={v}" for k, v in e.fields.items())
        lines.append(f"{e.t:10.3f}s  {e.process:<{width}} {e.event}{' ' + fields if fields else ''}")
    return "\n".join(lines)
