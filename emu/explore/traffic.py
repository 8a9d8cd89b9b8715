"""Request traffic in explore runs: what a workload's users see, as an invariant.

A workload with ``Setup.traffic`` has a client GET each URL every ``Setup.traffic_interval``
seconds (`runner.start_traffic`); each streak of refused requests is one ``requests_failing``
event on its ``traffic/serve`` lane. `NoRefusalAfterSwitch` reads them.

Its window is the one KubeRay documents for a NewCluster upgrade: the serve Service is pointed
at the new cluster only once that cluster's Serve applications are RUNNING
(``reconcileServicesToReadyCluster`` after ``getAndCheckServeStatus``, SPEC.md 4.7 and 4.9), and
the old cluster is kept ``rayClusterDeletionDelaySeconds`` (60 s by default) after the switch.
So a request refused by the cluster the Service was just switched to — its head Pod Ready, so
it is up but does not serve — while the cluster it was switched from is still ready is a switch
made too early (KubeRay PR #730 fixed exactly that). Refusals outside that shape are not this
invariant's business: before the first switch (nothing served yet), once the new cluster's head
is lost (a fault, no better target), once the old cluster is gone.
`emu.invariants.NoRefusedRequestsDuringSwitch` covers the time before the switch, while both
clusters are in the status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from ..invariants import BaseMonitor, Invariant
from ..invariants.rayservice import cluster_ready
from ..invariants.view import Obj, WorldView

if TYPE_CHECKING:
    from ..kernel.trace import TraceEvent
    from ..simulation import Simulation


@attrs.frozen
class NoRefusalAfterSwitch(Invariant):
    """No request is refused by the cluster a serve Service was just switched to while the one
    it left could still serve."""

    name: ClassVar[str] = "rayservice-no-refused-requests-after-switch"
    rationale: ClassVar[str] = (
        "the serve Service moves to a new cluster only once its Serve applications are RUNNING, "
        "and the old cluster stays rayClusterDeletionDelaySeconds (SPEC.md 4.7, 4.9): a refusal "
        "by the new cluster (head Ready) while the old one is still ready is a switch made too "
        "early")

    #: Processes whose ``requests_failing`` events are the serve traffic's refusals.
    traffic_prefix: str = "traffic/serve"
    #: Seconds after a switch in which the refusal counts (KubeRay's default deletion delay).
    window: float = 60.0

    def __attrs_post_init__(self) -> None:
        if self.window <= 0:
            raise ValueError(f"NoRefusalAfterSwitch.window must be positive, not {self.window!r}")

    def attach(self, sim: Simulation) -> _SwitchMonitor:
        return _SwitchMonitor(self, sim)


@attrs.frozen
class _Switch:
    t: float
    namespace: str
    service: str
    old: str
    new: str


class _SwitchMonitor(BaseMonitor):
    def __init__(self, inv: NoRefusalAfterSwitch, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.view = WorldView.of(sim)
        #: (namespace, Service) → the cluster its ``ray.io/cluster`` selector names.
        self.targets: dict[tuple[str, str], str] = {}
        self.switches: list[_Switch] = []
        self.view.subscribe(self._on_change, replay=("Service",))
        sim.trace.subscribe(self._on_event)

    def _on_change(self, kind: str, type_: str, obj: Obj, _old: Obj | None) -> None:
        if kind != "Service":
            return
        meta = obj["metadata"]
        selector = (obj.get("spec") or {}).get("selector") or {}
        if "ray.io/serve" not in selector:
            return
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        if type_ == "DELETED":
            self.targets.pop(key, None)
            return
        target = str(selector.get("ray.io/cluster") or "")
        before = self.targets.get(key)
        self.targets[key] = target
        if before and target and before != target:
            self.switches.append(_Switch(self.view.now, key[0], key[1], before, target))

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event != "requests_failing" or not ev.process.startswith(self.inv.traffic_prefix):
            return
        for sw in self.switches:
            if not 0.0 <= ev.t - sw.t <= self.inv.window:
                continue
            if self.targets.get((sw.namespace, sw.service)) != sw.new:
                continue
            if cluster_ready(self.view, sw.namespace, sw.new) is not None:
                continue  # the new cluster's head is not Ready: lost, not switched too early
            if cluster_ready(self.view, sw.namespace, sw.old) is not None:
                continue  # nothing better to serve from
            self.report(
                f"serve Service {sw.namespace}/{sw.service}: {ev.process} had a request refused "
                f"({ev.fields.get('error', '?')}) by RayCluster {sw.new} (head Pod Ready) "
                f"{ev.t - sw.t:.3f}s after the Service was switched to it from RayCluster "
                f"{sw.old}, which was still ready",
                ev.t, (f"Service/{sw.namespace}/{sw.service}",
                       f"RayCluster/{sw.namespace}/{sw.new}",
                       f"RayCluster/{sw.namespace}/{sw.old}"))
