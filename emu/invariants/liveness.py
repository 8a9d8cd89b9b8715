"""Eventual liveness: after the last fault heals, every object reaches a steady or terminal state.

Rationale: KubeRay's controllers are level-triggered and requeue every few seconds (RayCluster on
Pod events and after errors, RayJob every 3 s, RayService every 2 s: SPEC.md 2.1, 3.1, 4.1), and
everything they need to decide is persisted (SPEC.md 1.8 lists what is not, and none of it blocks
progress for good), so once faults stop, each object converges. Steady means:

- RayCluster: ``spec.suspend`` → ``status.state`` "suspended"; otherwise ``status.state`` "ready",
  a Ready head Pod and at least the desired number of Ready worker Pods (each group's
  ``replicas`` clamped to [min, max] times ``numOfHosts``, suspended groups 0: SPEC.md 2.5). A
  provisioned cluster annotated ``ray.io/disable-provisioned-head-restart: "true"`` whose head is
  gone is terminal by contract (``shouldSkipHeadPodRestart``) and counts as steady.
- RayJob: a terminal ``jobDeploymentStatus`` (Complete, Failed, ValidationFailed), Suspended while
  ``spec.suspend``, or Waiting (InteractiveMode waits for the user).
- RayService: ``spec.suspend`` → condition Suspended True; Ready False with reason
  InitializingTimeout is terminal; otherwise ``serviceStatus`` "Running" and no pending cluster
  (an upgrade finished).

Objects being deleted are `Cleanup`'s business. The bound: each object must be steady by
``max(last fault healed, the object's creation or last spec change) + bound`` (default 300 s:
long enough for a head to be recreated, GCS FT's 600 s worker reconnection aside, and the RayJob
status-check timeout of 300 s). The last fault healed is read from ``sim.faults.applied`` (a
fault's ``at`` plus its ``duration`` when it has one, plus an informer lag's ``seconds``).
``finish`` waits, in virtual time, until every object is steady or its deadline has passed, so
a test need not wait itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from .base import BaseMonitor, Invariant
from .view import Obj, WorldView, condition, deleting, labels, pod_live, pod_ready

if TYPE_CHECKING:
    from ..simulation import Simulation

KINDS = ("RayCluster", "RayJob", "RayService")


def heals_at(fault: object) -> float:
    """When ``fault`` stops acting: its ``at`` plus its ``duration`` when it has one, plus the
    lag of an `emu.faults.InformerLag` (``seconds``: events received while it is active still
    reach the cache that much later, so its effect outlasts its duration)."""
    from ..faults import InformerLag

    at = float(getattr(fault, "at", 0.0))
    duration = getattr(fault, "duration", None)
    heal = at + (float(duration) if isinstance(duration, (int, float)) else 0.0)
    if isinstance(fault, InformerLag):
        heal += float(fault.seconds)
    return heal


def last_fault_healed(sim: Simulation) -> float:
    """The latest `heals_at` of the faults performed so far (the run's start when none: 0, or
    the real instant a paced run began at)."""
    return max([heals_at(fault) for fault in sim.faults.applied]
               or [float(getattr(sim.loop, "start", 0.0))])


def _desired_workers(cluster: Obj) -> int:
    total = 0
    for group in (cluster.get("spec") or {}).get("workerGroupSpecs") or []:
        if group.get("suspend"):
            continue
        lo = int(group.get("minReplicas") or 0)
        hi = int(group.get("maxReplicas") if group.get("maxReplicas") is not None
                 else 2**31 - 1)
        replicas = group.get("replicas")
        n = lo if replicas is None else min(max(int(replicas), lo), hi)
        total += n * int(group.get("numOfHosts") or 1)
    return total


def why_not_steady(view: WorldView, kind: str, obj: Obj) -> str | None:
    """What keeps ``obj`` from its steady or terminal state now, or None if it is there."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ns, name = str(obj["metadata"].get("namespace", "")), str(obj["metadata"]["name"])
    if kind == "RayCluster":
        state = status.get("state") or "(none)"
        if spec.get("suspend"):
            return None if state == "suspended" else f"suspend requested, state {state}"
        pods = view.select("Pod", ns, **{"ray.io/cluster": name})
        heads = [p for p in pods if labels(p).get("ray.io/node-type") == "head"]
        annotations = (obj["metadata"].get("annotations") or {})
        if (annotations.get("ray.io/disable-provisioned-head-restart") == "true"
                and condition(obj, "RayClusterProvisioned").get("status") == "True"
                and not any(pod_live(p) for p in heads)):
            return None
        head_ready = any(pod_ready(p) and not deleting(p) for p in heads)
        workers = sum(1 for p in pods if labels(p).get("ray.io/node-type") == "worker"
                      and pod_ready(p) and not deleting(p))
        desired = _desired_workers(obj)
        if state != "ready" or not head_ready or workers < desired:
            return (f"state {state}, head {'Ready' if head_ready else 'not Ready'}, "
                    f"{workers}/{desired} workers Ready")
        return None
    if kind == "RayJob":
        deployment = status.get("jobDeploymentStatus") or "(new)"
        if deployment in ("Complete", "Failed", "ValidationFailed", "Waiting"):
            return None
        if deployment == "Suspended" and spec.get("suspend"):
            return None
        return f"jobDeploymentStatus {deployment}, jobStatus {status.get('jobStatus') or '(none)'}"
    # RayService
    if spec.get("suspend"):
        ok = condition(obj, "RayServiceSuspended").get("status") == "True" or \
            condition(obj, "Suspended").get("status") == "True"
        return None if ok else "suspend requested, not Suspended"
    ready = condition(obj, "Ready")
    if ready.get("reason") == "InitializingTimeout":
        return None
    pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
    service = status.get("serviceStatus") or "(none)"
    if service != "Running" or pending:
        return f"serviceStatus {service}" + (f", pending cluster {pending}" if pending else "")
    return None


@attrs.frozen
class EventuallySteady(Invariant):
    """Every RayCluster, RayJob and RayService reaches its steady or terminal state within
    ``bound`` seconds of the last fault healing (or of its own creation or spec change)."""

    name: ClassVar[str] = "eventually-steady"
    rationale: ClassVar[str] = (
        "level-triggered controllers with periodic requeues and persisted state converge once "
        "faults stop (SPEC.md 2.1, 3.1, 4.1, 1.8); bound 300 s covers head recreation and the "
        "RayJob status-check timeout")

    #: Seconds after the last fault healed (or the object's last spec change) to converge.
    bound: float = 300.0

    @property
    def settle_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _SteadyMonitor:
        return _SteadyMonitor(self, sim)


class _SteadyMonitor(BaseMonitor):
    def __init__(self, inv: EventuallySteady, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.view = WorldView.of(sim)
        #: (kind, ns, name) → virtual time of its creation or last spec (generation) change.
        self.since: dict[tuple[str, str, str], float] = {}
        self.view.subscribe(self._on_change, replay=KINDS)

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        if kind not in KINDS:
            return
        meta = obj["metadata"]
        key = (kind, str(meta.get("namespace", "")), str(meta["name"]))
        if type_ == "DELETED":
            self.since.pop(key, None)
        elif old is None or (old.get("metadata") or {}).get("generation") != \
                meta.get("generation"):
            self.since[key] = self.view.now

    def _unsteady(self, quiet: float) -> list[tuple[float, str, Obj, str]]:
        out = []
        for (kind, ns, name), since in sorted(self.since.items()):
            obj = self.view.get(kind, ns, name)
            if obj is None or deleting(obj):
                continue
            why = why_not_steady(self.view, kind, obj)
            if why is not None:
                out.append((max(quiet, since) + self.inv.bound, kind, obj, why))
        return out

    def settled(self, now: float) -> bool:
        """Settled only when every object is steady (an unsteady one's report names the
        instant ``finish`` ran)."""
        return super().settled(now) and not self._unsteady(0.0)

    async def check_end(self, sim: Simulation) -> None:
        quiet = last_fault_healed(sim)
        while True:
            unsteady = self._unsteady(quiet)
            waiting = [d for d, *_ in unsteady if d > sim.now]
            if not waiting:
                break
            await self.view.wait_change(min(waiting) - sim.now)
        for deadline, kind, obj, why in unsteady:
            ns, name = str(obj["metadata"].get("namespace", "")), str(obj["metadata"]["name"])
            since = self.since[(kind, ns, name)]
            ref = f"last fault healed at t={quiet:.3f}s" if quiet >= since else \
                f"created or spec changed at t={since:.3f}s"
            self.report(f"{kind} {ns}/{name} not steady at t={sim.now:.3f}s ({why}); expected "
                        f"within {self.inv.bound:g}s ({ref})", deadline, (f"{kind}/{ns}/{name}",))
