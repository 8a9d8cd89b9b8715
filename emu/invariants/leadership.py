"""Checkers that watch a run and report what went wrong, or what happened, in leadership.

- `TwoLeaderChecker` (from the trace): every interval in which two or more processes *believe*
  they lead — from ``leader_acquired`` until ``leader_lost`` or the process's end — and, per
  process, how much leader-only work (reconciles started or still in flight) it did in that
  interval. A window in which two processes both worked is the article's no-fencing window.
- `LeadershipTenures` (from the trace): each tenure — holder, process, start, end, and why it
  ended (lost the Lease, crashed, exited, released, or still leading).
- `LeaseHolderChecker` (from the API server's own watch, beside the network, so faults never hide
  it): at most one *valid* holder at any instant as the API server sees it, i.e. a Lease never
  changes holder while the previous holder's ``renewTime + leaseDurationSeconds`` is in the future.

Attach them before the run does anything (they see only later events).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import attrs

from ..kernel import clock
from ..kernel.trace import Trace, TraceEvent

if TYPE_CHECKING:
    from ..simulation import Simulation

_BELIEF_ENDS = {"leader_lost": "lost", "leader_released": "released",
                "process_crashed": "crashed", "process_exited": "exited"}


@attrs.frozen
class Tenure:
    """One leadership tenure as the leader itself saw it."""

    process: str
    identity: str
    start: float
    end: float | None
    ended_by: str  # "lost", "crashed", "exited", "released" or "leading" (not over)


class LeadershipTenures:
    """Records every tenure from ``leader_acquired`` to its end."""

    def __init__(self, trace: Trace) -> None:
        self._open: dict[str, tuple[str, float]] = {}
        self.tenures: list[Tenure] = []
        self._clock: Any = None
        trace.subscribe(self._on_event)

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event == "leader_acquired":
            self._open[ev.process] = (str(ev.fields.get("identity", "")), ev.t)
        elif ev.event in _BELIEF_ENDS and ev.process in self._open:
            identity, start = self._open.pop(ev.process)
            why = _BELIEF_ENDS[ev.event]
            if ev.event == "process_exited":
                why = f"exited ({ev.fields.get('code')})"
            self.tenures.append(Tenure(ev.process, identity, start, ev.t, why))

    def all(self) -> list[Tenure]:
        """Finished tenures, then the open ones (``ended_by="leading"``), by start time."""
        still = [Tenure(p, ident, start, None, "leading")
                 for p, (ident, start) in self._open.items()]
        return sorted(self.tenures + still, key=lambda t: (t.start, t.process))


@attrs.define
class TwoLeaderWindow:
    """An interval in which two or more processes believed they led."""

    start: float
    end: float | None
    processes: list[str]
    #: Process → reconciles it started, or had in flight, inside the window.
    work: dict[str, int] = attrs.field(factory=dict)

    @property
    def both_worked(self) -> bool:
        return sum(1 for n in self.work.values() if n > 0) >= 2


def _lease_matcher(lease: str | None) -> tuple[str | None, str] | None:
    """``lease`` ("NAME" or "NAMESPACE/NAME") as (namespace or None, name); None for all Leases.
    Raises ValueError naming what is wrong with it."""
    if lease is None:
        return None
    if not isinstance(lease, str) or not lease.strip("/"):
        raise ValueError(f"lease= is a Lease's name or 'NAMESPACE/NAME', got {lease!r}")
    ns, sep, name = lease.rpartition("/")
    if (sep and not ns) or not name or "/" in ns:
        raise ValueError(f"lease= is a Lease's name or 'NAMESPACE/NAME', got {lease!r}")
    return (ns if sep else None), name


class TwoLeaderChecker:
    """Reports every window of overlapping leadership beliefs and the work done in it.

    ``lease`` scopes it to one Lease ("NAME", in any namespace, or "NAMESPACE/NAME"): only the
    processes that lead through that Lease count, so a world with KubeRay's operator and a
    user's own operator (two Leases, one leader each) reports no window."""

    def __init__(self, trace: Trace, *, lease: str | None = None) -> None:
        self.lease = lease
        self._match = _lease_matcher(lease)
        self._believers: dict[str, float] = {}
        self._in_flight: dict[str, int] = {}
        self.windows: list[TwoLeaderWindow] = []
        self._current: TwoLeaderWindow | None = None
        trace.subscribe(self._on_event)

    def _on_event(self, ev: TraceEvent) -> None:
        p = ev.process
        if ev.event == "reconcile_started":
            self._in_flight[p] = self._in_flight.get(p, 0) + 1
            if self._current is not None and p in self._believers:
                self._current.work[p] = self._current.work.get(p, 0) + 1
        elif ev.event == "reconcile_finished":
            self._in_flight[p] = max(0, self._in_flight.get(p, 0) - 1)
        elif ev.event == "leader_acquired":
            if not self._matches(ev):
                return
            self._believers[p] = ev.t
            self._changed(ev.t)
        elif ev.event in _BELIEF_ENDS:
            if ev.event in ("process_crashed", "process_exited"):
                self._in_flight.pop(p, None)
            if self._believers.pop(p, None) is not None:
                self._changed(ev.t)

    def _matches(self, ev: TraceEvent) -> bool:
        """Whether ``ev`` (a ``leader_acquired``) is about the Lease this checker watches."""
        if self._match is None:
            return True
        ns, name = self._match
        lock_ns, _, lock_name = str(ev.fields.get("lock", "")).rpartition("/")
        return lock_name == name and (ns is None or lock_ns == ns)

    def _changed(self, now: float) -> None:
        if len(self._believers) >= 2:
            if self._current is None:
                self._current = TwoLeaderWindow(now, None, [])
                self.windows.append(self._current)
            for p in self._believers:
                if p not in self._current.processes:
                    self._current.processes.append(p)
                    # work already in flight when the overlap began counts as work in it
                    self._current.work[p] = self._current.work.get(p, 0) + self._in_flight.get(
                        p, 0)
        elif self._current is not None:
            self._current.end = now
            self._current = None

    @property
    def violations(self) -> list[TwoLeaderWindow]:
        """Windows in which at least two believers did leader-only work."""
        return [w for w in self.windows if w.both_worked]


@attrs.frozen
class HolderViolation:
    """A Lease changed holder while the previous holder was still valid."""

    at: float
    lease: str
    previous: str
    previous_valid_until: float
    new: str


class LeaseHolderChecker:
    """Watches one Lease from inside the API server and checks one valid holder at a time."""

    def __init__(self, sim: Simulation, namespace: str, name: str) -> None:
        self.sim = sim
        self.namespace = namespace
        self.name = name
        self.violations: list[HolderViolation] = []
        self.writes = 0
        self.holder_changes = 0
        self._holder = ""
        self._valid_until = float("-inf")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> LeaseHolderChecker:
        self._task = self.sim.loop.create_task(self._run(), name=f"lease-checker:{self.name}")
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        field = f"metadata.name={self.name}"
        listing = self.sim.api.list("Lease", self.namespace, field_selector=field)
        for item in listing.get("items") or []:
            self._observe(item)
        stream = self.sim.api.watch("Lease", self.namespace, field_selector=field,
                                    resource_version=listing["metadata"]["resourceVersion"])
        try:
            async for event in stream:
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._observe(event["object"])
        finally:
            stream.close()

    def _observe(self, lease: dict[str, Any]) -> None:
        self.writes += 1
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        now = self.sim.now
        if holder and holder != self._holder:
            if self._holder and self._valid_until > now + 1e-9:
                self.violations.append(HolderViolation(now, f"{self.namespace}/{self.name}",
                                                       self._holder, self._valid_until, holder))
            self.holder_changes += 1
        renew = spec.get("renewTime")
        duration = spec.get("leaseDurationSeconds") or 0
        self._holder = holder
        self._valid_until = (clock.parse_time(renew) + duration) if holder and renew else \
            float("-inf")
