"""RayService invariants: the serve Service selects a ready cluster; no request refused mid-switch.

- `ServesReadyCluster` (``rayservice-serves-ready-cluster``). Rationale (SPEC.md 4.3 step 14,
  4.7 and 4.9: ``reconcileServicesToReadyCluster``, ``reconcileServices``,
  ``cleanUpRayClusterInstance``): the operator points the serve Service (selector
  ``ray.io/cluster=<cluster>``, ``ray.io/serve=true``) only at a cluster it found serve-ready, and
  deletes only clusters that are neither active nor pending, so the Service never selects a
  cluster being deleted. Two conditions, each an episode:
  (a) *selected while not ready*: the Service was created or re-pointed to a cluster that does
  not exist, is being deleted, or has no Ready head Pod; allowed for ``bound`` seconds (default
  5: the operator judges readiness from its cache and the RayCluster status, which may lag the
  Pod by a few seconds) — it ends when that cluster's head becomes Ready or the Service moves on;
  (b) *selects a cluster being deleted or gone* while the RayService is not itself being
  deleted or suspended (suspend deletes the clusters first, then the Services): no bound.
  A selected cluster whose head is lost later (head Pod deleted, Node lost) is not a
  violation: there is nothing else to serve from, and KubeRay recreates the head. Only the
  RayService's own serve Service is checked (``spec.serveService`` name or
  ``<rayservice>-serve-svc``), not an incremental upgrade's per-cluster Services.
- `NoRefusedRequestsDuringSwitch` (``rayservice-no-refused-requests-during-switch``).
  Rationale (SPEC.md 4.7 and 4.9; the blue/green design): while a RayService has an active and
  a pending cluster and both are ready (exist, not deleting, head Pod Ready), whichever one the
  serve Service's endpoints lead to can answer, so no request is refused. Observed where traffic
  exists: a process whose name starts with ``traffic_prefix`` (default ``traffic/serve``, the
  lane of ``emu.scenarios``' ``serve_traffic``) logs ``requests_failing`` at the first refused
  request of a streak; a refusal at an instant when some RayService is switching with both
  clusters ready is a violation (no bound). A user's own client can log the same event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from ..kernel.trace import TraceEvent
from .base import BaseMonitor, Invariant
from .bounded import Bounded
from .view import Obj, WorldView, deleting, pod_ready

if TYPE_CHECKING:
    from ..simulation import Simulation


def _owner_rayservice(obj: Obj) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "RayService":
            return str(ref.get("name"))
    return None


def _serve_target(view: WorldView, svc: Obj) -> str | None:
    """The cluster a RayService's serve Service selects, or None if ``svc`` is not the serve
    Service of an existing RayService (``spec.serveService.metadata.name`` or
    ``<rayservice>-serve-svc``; per-cluster Services of an incremental upgrade are not it)."""
    selector = (svc.get("spec") or {}).get("selector") or {}
    owner = _owner_rayservice(svc)
    if "ray.io/serve" not in selector or owner is None:
        return None
    ns = str(svc["metadata"].get("namespace", ""))
    rs = view.get("RayService", ns, owner)
    if rs is None:
        return None
    user = ((rs.get("spec") or {}).get("serveService") or {}).get("metadata") or {}
    if svc["metadata"]["name"] != (user.get("name") or f"{owner}-serve-svc"):
        return None
    return str(selector.get("ray.io/cluster") or "")


def _tearing_down(rs: Obj | None) -> bool:
    """The RayService is gone, being deleted, or suspending/suspended (SPEC.md 4.11: suspend
    deletes its clusters, then its Services)."""
    if rs is None or deleting(rs) or (rs.get("spec") or {}).get("suspend"):
        return True
    return any(c.get("type") in ("Suspending", "Suspended") and c.get("status") == "True"
               for c in (rs.get("status") or {}).get("conditions") or [])


def cluster_ready(view: WorldView, ns: str, cluster: str) -> str | None:
    """Why ``cluster`` cannot serve now, or None when it exists, is not being deleted and has a
    Ready head Pod."""
    obj = view.get("RayCluster", ns, cluster)
    if obj is None:
        return "does not exist"
    if deleting(obj):
        return "is being deleted"
    heads = view.select("Pod", ns, **{"ray.io/cluster": cluster, "ray.io/node-type": "head"})
    if not any(pod_ready(p) and not deleting(p) for p in heads):
        return "has no Ready head Pod"
    return None


@attrs.frozen
class ServesReadyCluster(Invariant):
    """A RayService's serve Service is pointed only at a ready cluster, never at a deleted one."""

    name: ClassVar[str] = "rayservice-serves-ready-cluster"
    rationale: ClassVar[str] = (
        "reconcileServicesToReadyCluster switches the serve Service only to a serve-ready "
        "cluster, and cleanUpRayClusterInstance deletes only clusters neither active nor pending "
        "(SPEC.md 4.3, 4.7, 4.9). Bound 5 s for a switch to a not-yet-ready cluster (cache lag); "
        "none for selecting a cluster being deleted")

    #: Seconds a newly selected cluster may still be unready (the operator's cache lag).
    bound: float = 5.0

    @property
    def hold_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _ServesMonitor:
        return _ServesMonitor(self, sim)


class _ServesMonitor(BaseMonitor):
    def __init__(self, inv: ServesReadyCluster, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.view = WorldView.of(sim)
        self.unready = Bounded(self, inv.bound)
        self.deleted = Bounded(self, 0.0)
        #: (ns, service) → cluster it selects.
        self.targets: dict[tuple[str, str], str] = {}
        self.view.subscribe(self._on_change, replay=("Service",))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        now = self.view.now
        if kind == "Service":
            meta = obj["metadata"]
            key = (str(meta.get("namespace", "")), str(meta["name"]))
            target = _serve_target(self.view, obj)
            if type_ == "DELETED" or target is None:
                self.targets.pop(key, None)
                self.unready.release(key, now)
                self.deleted.release(key, now)
            elif self.targets.get(key) != target:
                self.targets[key] = target
                self.unready.release(key, now)
                why = cluster_ready(self.view, key[0], target)
                if why is not None:
                    self.unready.hold(key, now, self._msg(key, obj, target, "was pointed at",
                                                          why), self._objs(key, obj, target))
        for key, target in list(self.targets.items()):
            ns = key[0]
            if self.unready.is_open(key) and cluster_ready(self.view, ns, target) is None:
                self.unready.release(key, now)
            svc = self.view.get("Service", ns, key[1])
            if svc is None:
                continue
            rs = self.view.get("RayService", ns, _owner_rayservice(svc) or "")
            cluster = self.view.get("RayCluster", ns, target)
            gone = cluster is None or deleting(cluster)
            bad = gone and not _tearing_down(rs)
            # a cluster that never existed is (a)'s business; (b) is about a deleted one
            bad = bad and (cluster is not None or self._existed(ns, target))
            self.deleted.set(key, bad, now, self._msg(
                key, svc, target, "selected", "is being deleted" if cluster is not None
                else "was deleted"), self._objs(key, svc, target))
        self.unready.check(now)

    def _existed(self, ns: str, cluster: str) -> bool:
        return any(k == "RayCluster" and n == ns and name == cluster
                   for k, n, name, _ in self.view.uids.values())

    @staticmethod
    def _msg(key: tuple[str, str], svc: Obj, target: str, verb: str, why: str) -> str:
        rs = _owner_rayservice(svc)
        return (f"RayService {key[0]}/{rs}: serve Service {key[1]} {verb} RayCluster {target}, "
                f"which {why}")

    @staticmethod
    def _objs(key: tuple[str, str], svc: Obj, target: str) -> list[str]:
        return [f"RayService/{key[0]}/{_owner_rayservice(svc)}", f"Service/{key[0]}/{key[1]}",
                f"RayCluster/{key[0]}/{target}"]

    async def check_end(self, sim: Simulation) -> None:
        self.unready.check(sim.now)
        self.deleted.check(sim.now)


@attrs.frozen
class NoRefusedRequestsDuringSwitch(Invariant):
    """No request through the serve Service is refused while both clusters of a switch are
    ready."""

    name: ClassVar[str] = "rayservice-no-refused-requests-during-switch"
    rationale: ClassVar[str] = (
        "blue/green: while active and pending clusters are both ready, either can answer, and "
        "the old one is deleted only after promotion (SPEC.md 4.7, 4.9). No bound")

    #: Processes whose ``requests_failing`` events are the serve traffic's refusals.
    traffic_prefix: str = "traffic/serve"

    def attach(self, sim: Simulation) -> _TrafficMonitor:
        return _TrafficMonitor(self, sim)


class _TrafficMonitor(BaseMonitor):
    def __init__(self, inv: NoRefusedRequestsDuringSwitch, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.view = WorldView.of(sim)
        sim.trace.subscribe(self._on_event)

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event != "requests_failing" or not ev.process.startswith(self.inv.traffic_prefix):
            return
        for rs in self.view.all("RayService"):
            status = rs.get("status") or {}
            active = (status.get("activeServiceStatus") or {}).get("rayClusterName") or ""
            pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
            ns, name = str(rs["metadata"].get("namespace", "")), str(rs["metadata"]["name"])
            if not active or not pending or deleting(rs):
                continue
            if cluster_ready(self.view, ns, active) is None and \
                    cluster_ready(self.view, ns, pending) is None:
                self.report(
                    f"RayService {ns}/{name}: {ev.process} had a request refused "
                    f"({ev.fields.get('error', '?')}) while switching from RayCluster {active} "
                    f"to {pending}, both ready", ev.t,
                    (f"RayService/{ns}/{name}", f"RayCluster/{ns}/{active}",
                     f"RayCluster/{ns}/{pending}"))
