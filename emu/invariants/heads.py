"""At most one live head Pod per RayCluster.

Rationale (SPEC.md 2.5, ``RayClusterReconciler.reconcilePods`` in raycluster_controller.go): the
operator lists the cluster's head Pods — terminating ones included, since a List through the
cache returns Pods with a deletionTimestamp until they are gone — and creates a head only when that
list is empty (more than one is an error it reports, never a state it makes). A head Pod deleted
by anyone stays listed while it terminates, so its replacement is created only after it is gone.
A second head would run a second GCS: workers and jobs split between two clusters under one name.

What counts: a Pod labelled ``ray.io/cluster=<name>`` and ``ray.io/node-type=head`` is *live*
while it has no deletionTimestamp and its phase is neither Succeeded nor Failed (Pending counts:
it is about to run a GCS). The bound: a *terminating* head may overlap its replacement only while
it terminates — that is not counted, because a deleted Pod cannot be undeleted and its containers
are being stopped; KubeRay's own list would not even allow the replacement yet. Two live heads are
a violation at once (``bound=0``); a positive ``bound`` tolerates shorter overlaps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from .base import BaseMonitor, Invariant
from .bounded import Bounded
from .view import Obj, WorldView, labels, pod_live

if TYPE_CHECKING:
    from ..simulation import Simulation


@attrs.frozen
class OneLiveHead(Invariant):
    """At most one live (not terminating, not finished) head Pod per RayCluster."""

    name: ClassVar[str] = "one-live-head"
    rationale: ClassVar[str] = (
        "reconcilePods (raycluster_controller.go, SPEC.md 2.5) creates a head only when the "
        "cached list of head Pods, terminating ones included, is empty; two live heads mean two "
        "GCSes for one cluster. Bound 0: a terminating head overlapping its replacement is "
        "allowed (it is not live)")

    #: Seconds two live heads may coexist before it is a violation (0: never).
    bound: float = 0.0

    @property
    def hold_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _HeadMonitor:
        return _HeadMonitor(self, sim)


class _HeadMonitor(BaseMonitor):
    def __init__(self, inv: OneLiveHead, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.view = WorldView.of(sim)
        self.overlaps = Bounded(self, inv.bound)
        self.view.subscribe(self._on_change, replay=("Pod",))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        if kind != "Pod":
            self.overlaps.check(self.view.now)
            return
        lab = labels(obj)
        if lab.get("ray.io/node-type") != "head" or not lab.get("ray.io/cluster"):
            return
        ns = str(obj["metadata"].get("namespace", ""))
        cluster = lab["ray.io/cluster"]
        heads = sorted(str(p["metadata"]["name"]) for p in self.view.select(
            "Pod", ns, **{"ray.io/cluster": cluster, "ray.io/node-type": "head"}) if pod_live(p))
        self.overlaps.set(
            (ns, cluster), len(heads) > 1, self.view.now,
            f"RayCluster {ns}/{cluster} had {len(heads)} live head Pods ({', '.join(heads)})",
            [f"RayCluster/{ns}/{cluster}"] + [f"Pod/{ns}/{h}" for h in heads])

    async def check_end(self, sim: Simulation) -> None:
        self.overlaps.check(sim.now)
