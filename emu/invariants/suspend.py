"""A RayCluster that says it is suspended runs no Pod.

Rationale (SPEC.md 2.5, ``RayClusterReconciler.reconcilePods`` in raycluster_controller.go):
while ``spec.suspend`` is true, every pass of ``reconcilePods`` deletes all the cluster's Pods
(``deleteAllPods`` by the ``ray.io/cluster`` label) before anything else, and the status says
``suspended`` (``status.state``, or the ``RayClusterSuspended`` condition) only once none is
left. A Pod that appears afterwards — a stale writer's late create, a resume quickly undone —
is deleted on the next pass, which its own creation triggers. KubeRay once skipped the whole
reconcile of a cluster already ``suspended`` (undone by PR #1741, "`suspend` is not a stateless
operation"): a resume followed by a quick suspend then left the resumed Pods running for good
under a status that says suspended, which is what a queue such as Kueue reads to hand the
quota to someone else.

The bound: such a Pod may live ``bound`` seconds (default 5: one pass after its creation event,
as the operator sees it) counted from when the condition began or from when the last fault
healed, whichever is later (a fault that delays what the operator observes, e.g. a lagging Pod
watch, delays the deletion too). A Pod is live while it is not terminating and not finished
(`emu.invariants.view.pod_live`). Clusters being deleted are `Cleanup`'s business.
``hold_time`` equals the bound, so an explorer keeps the workload's goal standing that long
before it deletes the workload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from .base import BaseMonitor, Invariant
from .liveness import last_fault_healed
from .view import Obj, WorldView, condition, deleting, labels, pod_live

if TYPE_CHECKING:
    from ..simulation import Simulation


@attrs.frozen
class SuspendedClusterHasNoPods(Invariant):
    """A RayCluster with ``spec.suspend`` whose status says suspended has no live Pod for longer
    than ``bound`` seconds (after the last fault healed)."""

    name: ClassVar[str] = "suspended-cluster-has-no-pods"
    rationale: ClassVar[str] = (
        "reconcilePods (raycluster_controller.go, SPEC.md 2.5) deletes every Pod of a suspended "
        "RayCluster on each pass and reports suspended only once none is left (PR #1741 stopped "
        "skipping the reconcile of a suspended cluster); bound 5 s after the condition began or "
        "the last fault healed: one pass after the Pod's creation event")

    #: Seconds a live Pod may run under a status that says suspended.
    bound: float = 5.0

    @property
    def hold_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _SuspendMonitor:
        return _SuspendMonitor(self, sim)


def says_suspended(cluster: Obj) -> bool:
    """``spec.suspend`` and a status that says suspended (state or condition)."""
    if not (cluster.get("spec") or {}).get("suspend"):
        return False
    status = cluster.get("status") or {}
    if status.get("state") == "suspended":
        return True
    return condition(cluster, "RayClusterSuspended").get("status") == "True"


@attrs.define
class _Episode:
    start: float
    pods: tuple[str, ...]
    reported: bool = False


class _SuspendMonitor(BaseMonitor):
    def __init__(self, inv: SuspendedClusterHasNoPods, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.sim = sim
        self.view = WorldView.of(sim)
        #: (namespace, cluster) → the open episode.
        self.open: dict[tuple[str, str], _Episode] = {}
        self.view.subscribe(self._on_change, replay=("RayCluster",))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        ns = str(obj["metadata"].get("namespace", ""))
        if kind == "RayCluster":
            self._update(ns, str(obj["metadata"]["name"]))
        elif kind == "Pod" and labels(obj).get("ray.io/cluster"):
            self._update(ns, labels(obj)["ray.io/cluster"])
        self._check_all(self.view.now)

    def _update(self, ns: str, name: str) -> None:
        now = self.view.now
        cluster = self.view.get("RayCluster", ns, name)
        live: tuple[str, ...] = ()
        if cluster is not None and not deleting(cluster) and says_suspended(cluster):
            live = tuple(sorted(str(p["metadata"]["name"]) for p in self.view.select(
                "Pod", ns, **{"ray.io/cluster": name}) if pod_live(p)))
        key = (ns, name)
        if live:
            ep = self.open.get(key)
            if ep is None:
                self.open[key] = _Episode(now, live)
            else:
                ep.pods = live
            return
        ep = self.open.pop(key, None)
        if ep is not None:
            self._check(key, ep, now, closing=True)

    def _deadline(self, ep: _Episode) -> float:
        return max(ep.start, last_fault_healed(self.sim)) + self.inv.bound

    def _check(self, key: tuple[str, str], ep: _Episode, now: float,
               closing: bool = False) -> None:
        deadline = self._deadline(ep)
        if ep.reported or now <= deadline + 1e-9:
            return
        ep.reported = True
        ns, name = key
        until = f" to t={now:.3f}s" if closing else ""
        self.report(f"RayCluster {ns}/{name} says suspended (spec.suspend, status suspended) "
                    f"yet runs live Pods ({', '.join(ep.pods)}), from t={ep.start:.3f}s{until} "
                    f"(longer than the bound of {self.inv.bound:g}s after the condition began "
                    "or the last fault healed)",
                    deadline, [f"RayCluster/{ns}/{name}"] + [f"Pod/{ns}/{p}" for p in ep.pods])

    def _check_all(self, now: float) -> None:
        for key, ep in sorted(self.open.items()):
            self._check(key, ep, now)

    def settled(self, now: float) -> bool:
        """Not while an unreported episode is open: its verdict still depends on time."""
        return super().settled(now) and not any(not ep.reported for ep in self.open.values())

    async def check_end(self, sim: Simulation) -> None:
        self._check_all(sim.now)
