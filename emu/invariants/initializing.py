"""A RayService with ``ray.io/initializing-timeout`` ends its initialization within the timeout.

Rationale (``markFailedOnInitializingTimeout`` and ``handleSuspend`` in rayservice_controller.go,
SPEC.md 4.3): with the annotation ``ray.io/initializing-timeout`` (a Go duration or integer
seconds), a RayService that has not become ready within that long of starting to initialize
gets ``Ready=False`` with reason ``InitializingTimeout`` (terminal: both cluster names cleared,
nothing more is reconciled). Initialization starts when the RayService is created and again
when it is resumed (``spec.suspend`` back to false, and KubeRay's ``Suspended`` condition leaves
True: a resume asked mid-suspension waits for the suspension to finish; KubeRay PR #4894 re-arms
the timer there, before which a resumed RayService whose new cluster never became ready waited
forever). The
timeout is the user's promise that a broken application or cluster ends in a terminal state,
so it must hold whatever broke: it is the one liveness claim that also covers a fault that
never heals.

An episode (from creation or a resume) ends when ``serviceStatus`` is ``Running`` or the Ready
condition is True, when Ready's reason is ``InitializingTimeout``, or when the RayService is
suspended or deleted. It is a violation once it lasts past ``timeout + bound`` (default bound
30 s: the 2 s requeue and a status write), counted from the later of its start plus the timeout
and the last fault healed (an operator that cannot run cannot time anything out).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

import attrs

from ..kernel.clock import parse_go_duration
from .base import BaseMonitor, Invariant
from .liveness import last_fault_healed
from .view import Obj, WorldView, condition, deleting

if TYPE_CHECKING:
    from ..simulation import Simulation

ANNOTATION = "ray.io/initializing-timeout"

def timeout_seconds(text: str) -> float | None:
    """The annotation's value in seconds as KubeRay reads it (``getInitializingTimeout``: Go's
    ``time.ParseDuration``, else integer seconds), None when absent, not positive or
    unreadable (KubeRay's validation refuses those)."""
    text = text.strip()
    value = parse_go_duration(text)
    if value is None and re.fullmatch(r"[+-]?[0-9]+", text):
        value = float(int(text))
    return value if value is not None and value > 0 else None


@attrs.frozen
class InitializingTimeoutHonoured(Invariant):
    """A RayService annotated ``ray.io/initializing-timeout`` is Running or InitializingTimeout
    within the timeout plus ``bound`` seconds of its creation or of a resume."""

    name: ClassVar[str] = "rayservice-initializing-timeout"
    rationale: ClassVar[str] = (
        "markFailedOnInitializingTimeout (rayservice_controller.go, SPEC.md 4.3) ends an "
        "initialization that outlives ray.io/initializing-timeout with Ready=False "
        "InitializingTimeout; a resume re-arms it (PR #4894). Bound 30 s past the timeout, "
        "counted from the later of the timeout's end and the last fault healed")

    #: Seconds past the timeout (and the last fault healed) KubeRay has to say so.
    bound: float = 30.0

    def attach(self, sim: Simulation) -> _InitializingMonitor:
        return _InitializingMonitor(self, sim)


def _ready(obj: Obj) -> Obj:
    return condition(obj, "Ready")


def _suspended(obj: Obj) -> bool:
    return condition(obj, "Suspended").get("status") == "True"


def _done(obj: Obj) -> bool:
    ready = _ready(obj)
    return ((obj.get("status") or {}).get("serviceStatus") == "Running"
            or ready.get("status") == "True" or ready.get("reason") == "InitializingTimeout")


@attrs.define
class _Episode:
    start: float
    timeout: float
    why: str
    reported: bool = False


class _InitializingMonitor(BaseMonitor):
    def __init__(self, inv: InitializingTimeoutHonoured, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.sim = sim
        self.view = WorldView.of(sim)
        #: (namespace, name) → the open initialization episode.
        self.open: dict[tuple[str, str], _Episode] = {}
        self.view.subscribe(self._on_change, replay=("RayService",))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        now = self.view.now
        if kind == "RayService":
            key = (str(obj["metadata"].get("namespace", "")), str(obj["metadata"]["name"]))
            spec = obj.get("spec") or {}
            timeout = timeout_seconds(str((obj["metadata"].get("annotations") or {})
                                          .get(ANNOTATION, "")))
            # resumed as KubeRay does it: its Suspended condition leaves True while the spec
            # no longer asks for suspension (a resume asked mid-suspension waits for it)
            resumed = old is not None and _suspended(old) and not _suspended(obj) \
                and not spec.get("suspend")
            if type_ == "DELETED" or deleting(obj) or spec.get("suspend") or timeout is None \
                    or _done(obj):
                self._close(key, now)
            elif key not in self.open and (old is None or resumed):
                self.open[key] = _Episode(now, timeout, "resumed" if resumed else "created")
        self._check_all(now)

    def _close(self, key: tuple[str, str], now: float) -> None:
        ep = self.open.pop(key, None)
        if ep is not None:
            self._check(key, ep, now, closing=True)

    def _deadline(self, ep: _Episode) -> float:
        return max(ep.start + ep.timeout, last_fault_healed(self.sim)) + self.inv.bound

    def _check(self, key: tuple[str, str], ep: _Episode, now: float,
               closing: bool = False) -> None:
        deadline = self._deadline(ep)
        if ep.reported or now <= deadline + 1e-9:
            return
        ep.reported = True
        ns, name = key
        obj = self.view.get("RayService", ns, name) or {}
        ready = _ready(obj)
        seen = (f"serviceStatus {(obj.get('status') or {}).get('serviceStatus') or '(none)'}, "
                f"Ready {ready.get('status') or '(none)'} reason {ready.get('reason') or '(none)'}")
        until = f" (it ended at t={now:.3f}s)" if closing else ""
        self.report(f"RayService {ns}/{name}, {ep.why} at t={ep.start:.3f}s with {ANNOTATION} "
                    f"{ep.timeout:g}s, was neither Running nor InitializingTimeout by "
                    f"t={deadline:.3f}s ({seen}){until}",
                    deadline, (f"RayService/{ns}/{name}",))

    def _check_all(self, now: float) -> None:
        for key, ep in sorted(self.open.items()):
            self._check(key, ep, now)

    def settled(self, now: float) -> bool:
        """Not while an unreported episode is open: its verdict still depends on time."""
        return super().settled(now) and not any(not ep.reported for ep in self.open.values())

    async def check_end(self, sim: Simulation) -> None:
        while True:
            waiting = [self._deadline(ep) for ep in self.open.values()
                       if not ep.reported and self._deadline(ep) > sim.now]
            if not waiting:
                break
            await self.view.wait_change(min(waiting) - sim.now + 1e-6)
        self._check_all(sim.now)
