"""Two-leader windows, reported as information: KubeRay has no fencing, so they are not bugs.

Rationale: client-go's ``leaderelection`` package says it "does not guarantee that only one client
is acting as a leader (a.k.a. fencing)"; controller-runtime's manager, which KubeRay's operator
uses, adds none, and KubeRay's reconcilers carry no fencing token in their writes (SPEC.md,
"Leader election"). A process that was paused past its Lease and wakes up still believes it leads
until its next renew fails — a window in which two operators reconcile. That is the contract, not
a violation of it, so each window is reported with ``severity="info"`` (see `emu.invariants.base`):
it names the processes, the interval and the reconciles each did in it. Whatever *harm* such a
window causes (a second head Pod, a job submitted twice) is caught by the other invariants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from .base import BaseMonitor, Invariant, Violation
from .leadership import TwoLeaderChecker

if TYPE_CHECKING:
    from ..simulation import Simulation


@attrs.frozen
class TwoLeaderWindows(Invariant):
    """Reports (as information) every window in which two processes believed they led."""

    name: ClassVar[str] = "two-leader-window"
    rationale: ClassVar[str] = (
        "client-go leader election gives no fencing (leaderelection.go package comment); "
        "KubeRay adds none, so overlapping leadership is expected and reported, not violated")

    #: Report only windows in which at least two believers started or ran reconciles.
    only_when_both_worked: bool = True
    #: Only the processes leading through this Lease ("NAME" or "NAMESPACE/NAME"); None: all.
    lease: str | None = None

    def attach(self, sim: Simulation) -> _TwoLeaderMonitor:
        return _TwoLeaderMonitor(self, sim)


class _TwoLeaderMonitor(BaseMonitor):
    def __init__(self, inv: TwoLeaderWindows, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.checker = TwoLeaderChecker(sim.trace, lease=inv.lease)

    def info(self) -> list[Violation]:
        self._found = []
        for w in self.checker.windows:
            if self.inv.only_when_both_worked and not w.both_worked:
                continue
            end = "still open" if w.end is None else f"until t={w.end:.3f}s"
            work = ", ".join(f"{p}: {n} reconciles" for p, n in sorted(w.work.items()))
            self.report(f"processes {', '.join(w.processes)} all believed they led from "
                        f"t={w.start:.3f}s {end} ({work})", w.start,
                        tuple(f"Process/{p}" for p in w.processes), severity="info")
        return super().info()


