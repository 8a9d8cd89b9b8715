"""The trace: every event of a run, stamped with virtual time and the emitting process, in order.

A run's trace is its evidence: the timeline the CLI prints, the HTML and Perfetto views, and the
digest that proves two runs of the same seed did the same thing. Events are appended in the order
they happen on the single event loop, so the order is itself deterministic; the digest is a SHA-256
over each event's canonical JSON (sorted keys), updated as events arrive.

Components log through structlog (`Trace.logger`): the bound logger's processors stamp the virtual
time and the process and append to the trace, so ``log.info("lease_acquired", holder=...)`` is all a
component writes.
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
        return orjson.dumps(
            {"t": round(self.t, 9), "process": self.process, "event": self.event, **self.fields},
            option=_DUMP_OPTS,
            default=_default,
        )


class Trace:
    """An append-only, ordered list of `TraceEvent` with a running digest."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._events: list[TraceEvent] = []
        self._hash = hashlib.sha256()
        self._listeners: list[Callable[[TraceEvent], None]] = []

    def emit(self, process: str, event: str, **fields: Any) -> TraceEvent:
        """Record an event now."""
        ev = TraceEvent(self._clock(), process, event, fields)
        self._events.append(ev)
        self._hash.update(ev.to_json())
        self._hash.update(b"\n")
        for listener in self._listeners:
            listener(ev)
        return ev

    def subscribe(self, listener: Callable[[TraceEvent], None]) -> None:
        """Call ``listener`` with every later event (invariant checkers use this)."""
        self._listeners.append(listener)

    def digest(self) -> str:
        """Hex SHA-256 of every event so far: equal digests mean equal histories."""
        return self._hash.hexdigest()

    @property
    def events(self) -> list[TraceEvent]:
        return self._events

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self._events)

    def select(self, event: str | None = None, process: str | None = None) -> list[TraceEvent]:
        """The events with this name and/or from this process, in order."""
        return [
            e for e in self._events
            if (event is None or e.event == event) and (process is None or e.process == process)
        ]

    def to_jsonl(self, path: str | Path | None = None) -> str:
        """The trace as JSON lines; written to ``path`` when given."""
        text = "".join(e.to_json().decode() + "\n" for e in self._events)
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_chrome(self, path: str | Path | None = None) -> list[dict[str, Any]]:
        """Chrome trace events (instant events, one track per process); opens in Perfetto."""
        tids: dict[str, int] = {}
        out: list[dict[str, Any]] = []
        for e in self._events:
            tid = tids.setdefault(e.process, len(tids) + 1)
            out.append({"name": e.event, "ph": "i", "s": "t", "ts": e.t * 1e6, "pid": 1,
                        "tid": tid, "args": orjson.loads(orjson.dumps(e.fields, default=_default))})
        for name, tid in tids.items():
            out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                        "args": {"name": name}})
        if path is not None:
            Path(path).write_bytes(orjson.dumps({"traceEvents": out}))
        return out

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


def render_timeline(events: Iterable[TraceEvent], *, width: int = 12) -> str:
    """A plain-text timeline: ``   12.345s  operator-0   lease_acquired holder=...``."""
    lines = []
    for e in events:
        fields = " ".join(f"{k}={v}" for k, v in e.fields.items())
        lines.append(f"{e.t:10.3f}s  {e.process:<{width}} {e.event}{' ' + fields if fields else ''}")
    return "\n".join(lines)
