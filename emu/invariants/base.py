"""The invariant interface: values that attach to a run, watch it, and report what broke.

An `Invariant` is a frozen value (it prints as code, so an explorer's finding can name it in a
pytest file); ``attach(sim)`` returns a `Monitor` that observes the run through ``sim.trace`` and
the API server's own watches *beside* the network — a fault never hides the truth from a checker.
A monitor's `violations()` are the safety properties broken so far; ``await finish(sim)`` adds the
end-state checks (liveness within a bound, cleanup) and returns every violation, sorted by time.

Information that is not a violation — a two-leader window, which KubeRay cannot prevent because it
has no fencing — is a `Violation` with ``severity="info"``: it is never in ``violations()`` nor in
what ``finish`` returns, and is read from ``Monitor.info()`` (`BaseMonitor` and `Monitors` have
it). So an explorer that treats everything ``finish`` returns as a finding never reports an
information item as a bug, and a test can still assert a window was seen.

`Monitors` bundles several for users' own tests::

    monitors = Monitors.attach(sim, kuberay_invariants())
    ...  # apply manifests, inject faults, let the world settle
    await monitors.assert_ok(sim)   # raises InvariantViolated naming every violation
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from ..simulation import Simulation

Severity = Literal["error", "info"]


@attrs.frozen
class Violation:
    """One broken invariant (or, with ``severity="info"``, one thing worth reporting).

    ``message`` names the objects, the virtual time and what was seen; ``at`` is the first virtual
    instant the violation held; ``objects`` are ``Kind/namespace/name`` strings; ``severity``
    is "error" for a violation and "info" for something reported that KubeRay does not promise
    to prevent (a two-leader window).
    """

    invariant: str
    message: str
    at: float
    objects: tuple[str, ...] = ()
    severity: Severity = "error"

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else f" ({self.severity})"
        return f"[{self.invariant}{tag}] t={self.at:.3f}s: {self.message}"


@runtime_checkable
class Monitor(Protocol):
    """What ``Invariant.attach`` returns: the live checker of one invariant for one run."""

    def violations(self) -> list[Violation]:
        """Violations found so far (safety properties), sorted by time."""
        ...

    async def finish(self, sim: Simulation) -> list[Violation]:
        """End-of-run checks (liveness, cleanup); returns all violations, sorted by time."""
        ...


@attrs.frozen
class Invariant:
    """Base of every invariant value: a frozen description, ``attach`` makes the live monitor.

    Subclasses set ``name`` (stable, kebab-case: explorers deduplicate findings by it) and
    ``rationale`` (the KubeRay or Kubernetes contract checked, and why the bound is what it is).
    """

    name: ClassVar[str] = ""
    rationale: ClassVar[str] = ""

    def attach(self, sim: Simulation) -> Monitor:
        """Start watching ``sim``; call right after the world is built, before the workload."""
        raise NotImplementedError(f"{type(self).__name__}.attach")

    @property
    def settle_time(self) -> float:
        """Virtual seconds after the last fault heals this invariant needs before ``finish``."""
        return 0.0

    @property
    def hold_time(self) -> float:
        """Virtual seconds a condition this invariant bounds may last unreported. A driver that
        ends a workload once it reached its goal (e.g. deletes it) lets the goal state stand
        longer than this first, or a contradiction present in that state is never reported."""
        return 0.0


class BaseMonitor:
    """Shared bookkeeping for monitors: found violations and information items, sorted output."""

    def __init__(self, invariant: str) -> None:
        self.invariant = invariant
        self._found: list[Violation] = []
        self._finished = False

    def report(self, message: str, at: float, objects: Sequence[str] = (), *,
               severity: Severity = "error") -> Violation:
        """Record one finding of this monitor's invariant."""
        v = Violation(self.invariant, message, at, tuple(objects), severity)
        self._found.append(v)
        return v

    def violations(self) -> list[Violation]:
        return _sorted(v for v in self._found if v.severity == "error")

    def info(self) -> list[Violation]:
        """Information items (``severity="info"``): reported, never violations."""
        return _sorted(v for v in self._found if v.severity == "info")

    async def check_end(self, sim: Simulation) -> None:
        """Subclasses add end-state checks here (called once by `finish`)."""

    async def finish(self, sim: Simulation) -> list[Violation]:
        """Run the end checks once (a second call returns the same violations)."""
        if not self._finished:
            self._finished = True
            await self.check_end(sim)
            self.close()
        return self.violations()

    def close(self) -> None:
        """Stop background watches (subclasses that start tasks override)."""

    def settled(self, now: float) -> bool:
        """True when ``finish`` at ``now`` finds what it would find later in a world where
        nothing changes any more: no bounded episode is open. An explorer asks this before it
        ends a quiet run's settle early (`emu.explore.runner.Quiet`); monitors with deadlines
        of their own override it."""
        return not any(callable(getattr(v, "any_open", None)) and v.any_open()
                       for v in vars(self).values())


def _sorted(vs: Iterable[Violation]) -> list[Violation]:
    return sorted(vs, key=lambda v: (v.at, v.invariant, v.objects, v.message))


class InvariantViolated(AssertionError):
    """Raised by `Monitors.assert_ok`: one line per violation, in time order."""

    def __init__(self, violations: Sequence[Violation]) -> None:
        self.violations = list(violations)
        lines = "\n".join(f"  {v}" for v in self.violations)
        n = len(self.violations)
        super().__init__(f"{n} invariant violation{'s' if n != 1 else ''}:\n{lines}")


@attrs.define
class Monitors:
    """Several monitors attached to one run, for users' own tests.

    ``Monitors.attach(sim, invariants)`` right after the world is built; ``violations()`` are the
    safety violations so far; ``await finish(sim)`` runs every end check (liveness and cleanup
    wait, in virtual time, until their deadlines are met or past) and returns all violations in
    time order; ``await assert_ok(sim)`` raises `InvariantViolated` if there are any; ``info()``
    holds the information items (never violations); ``settle_time`` is how long after the last
    fault a caller should let the world run before ``finish``.
    """

    invariants: tuple[Invariant, ...]
    monitors: tuple[Monitor, ...]

    @classmethod
    def attach(cls, sim: Simulation, invariants: Iterable[Invariant]) -> Monitors:
        """Attach every invariant to ``sim`` (before the workload is applied)."""
        invs = tuple(invariants)
        for inv in invs:
            if not isinstance(inv, Invariant):
                raise TypeError(f"Monitors.attach: {inv!r} is not an Invariant value")
        return cls(invs, tuple(inv.attach(sim) for inv in invs))

    @property
    def settle_time(self) -> float:
        """The longest ``settle_time`` of the attached invariants."""
        return max((inv.settle_time for inv in self.invariants), default=0.0)

    @property
    def hold_time(self) -> float:
        """The longest ``hold_time`` of the attached invariants."""
        return max((inv.hold_time for inv in self.invariants), default=0.0)

    def violations(self) -> list[Violation]:
        """Safety violations found so far, all monitors, sorted by time."""
        return _sorted(v for m in self.monitors for v in m.violations())

    def info(self) -> list[Violation]:
        """Information items (e.g. two-leader windows) of every monitor that has them."""
        out: list[Violation] = []
        for m in self.monitors:
            info = getattr(m, "info", None)
            if info is not None:
                out.extend(info())
        return _sorted(out)

    async def finish(self, sim: Simulation) -> list[Violation]:
        """Run every monitor's end checks; all violations, sorted by time."""
        out: list[Violation] = []
        for m in self.monitors:
            out.extend(await m.finish(sim))
        return _sorted(out)

    async def assert_ok(self, sim: Simulation) -> None:
        """`finish`, then raise `InvariantViolated` if anything was violated."""
        found = await self.finish(sim)
        if found:
            raise InvariantViolated(found)


def kuberay_invariants() -> list[Invariant]:
    """The default set `emu explore` checks: every KubeRay invariant of this package."""
    from . import defaults

    return defaults.default_set()
