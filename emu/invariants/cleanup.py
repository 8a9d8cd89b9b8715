"""Cleanup: after deletion nothing of the object remains, and no finalizer holds it forever.

Rationale: every object KubeRay creates for a RayCluster, RayJob or RayService carries an owner
reference to it (SPEC.md 2.4, 2.5, 3.3, 3.4, 4.4, 4.7: ``SetControllerReference`` in
``createHeadPod``, ``createWorkerPod``, ``reconcileHeadService``, ``createNewK8sJob``,
``constructRayClusterForRayJob``, ``constructRayClusterForRayService``), so Kubernetes' garbage
collector deletes the Pods, Services, Jobs, PVCs and RayClusters of a deleted object; KubeRay's
finalizers (``ray.io/rayjob-finalizer``, ``ray.io/rayservice-finalizer``,
``ray.io/gcs-ft-redis-cleanup-finalizer``) are removed once their work is done (SPEC.md 3.1, 4.10,
2.11), and the Redis cleanup Job deletes the cluster's storage namespace in Redis before the
finalizer goes (SPEC.md 2.11).

Checked: for each RayCluster, RayJob and RayService,
- once it has a deletionTimestamp, it is gone from the API server within ``bound``;
- once it is gone, no object whose owner chain reaches it (Pod, Service, Job, PVC, RayCluster)
  remains ``bound`` seconds later;
- exempt: a terminating Pod on a Node that is not Ready. Kubernetes keeps it Terminating until its
  kubelet confirms the containers stopped (or the Node object is deleted), so neither KubeRay nor
  the garbage collector can remove it sooner; it is named only if it stays once its Node is Ready;
- a RayCluster that carried the Redis cleanup finalizer has, ``bound`` seconds after it is gone,
  no key of its GCS storage namespace (read from its GCS's ``gcs_started`` event) in any Redis
  server of the world.

The bound (default 120 s) covers graceful termination (30 s), the garbage collector, and the
Redis cleanup Job's retries. Checked lazily at every committed write and at ``finish``, which
waits (virtual time) until every pending deadline is met or past; Redis keys are read at
``finish`` only, on the Redis server itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ..kernel.trace import TraceEvent
from .base import BaseMonitor, Invariant
from .view import Obj, WorldView, deleting, labels

if TYPE_CHECKING:
    from ..simulation import Simulation

ROOTS = ("RayCluster", "RayJob", "RayService")
REDIS_FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"


@attrs.define
class _Pending:
    kind: str
    ns: str
    name: str
    uid: str
    what: str  # "finalizers" or "dependents"
    since: float
    deadline: float
    #: Past its deadline with only exempt leftovers (terminating Pods on Nodes not Ready).
    exempt: bool = False


@attrs.frozen
class Cleanup(Invariant):
    """After deletion no dependents or Redis keys of the object remain; no finalizer stays
    forever."""

    name: ClassVar[str] = "cleanup-after-delete"
    rationale: ClassVar[str] = (
        "owner references on everything KubeRay creates let the garbage collector remove it, "
        "and KubeRay's finalizers (rayjob, rayservice, gcs-ft-redis-cleanup) are removed when "
        "their work is done (SPEC.md 2.11, 3.1, 4.10); bound 120 s covers graceful termination "
        "and the Redis cleanup Job")

    #: Seconds after a deletion (or the object's disappearance) for everything to be gone.
    bound: float = 120.0

    @property
    def settle_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _CleanupMonitor:
        return _CleanupMonitor(self, sim)


class _CleanupMonitor(BaseMonitor):
    def __init__(self, inv: Cleanup, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.inv = inv
        self.view = WorldView.of(sim)
        self.pending: list[_Pending] = []
        #: uid of RayClusters that carried the Redis cleanup finalizer.
        self.redis_clusters: dict[str, tuple[str, str]] = {}
        #: (ns, cluster) → GCS storage namespace in Redis.
        self.storage_ns: dict[tuple[str, str], str] = {}
        #: (uid, ns, name, gone at) of deleted Redis-cleanup clusters.
        self.redis_gone: list[tuple[str, str, str, float]] = []
        self.view.subscribe(self._on_change, replay=ROOTS)
        sim.trace.subscribe(self._on_event)

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event != "gcs_started" or ev.fields.get("storage") != "redis":
            return
        parts = ev.process.split("/")
        if len(parts) < 2:
            return
        pod = self.view.get("Pod", parts[0], parts[1])
        cluster = labels(pod).get("ray.io/cluster") if pod is not None else None
        if cluster:
            self.storage_ns[(parts[0], cluster)] = str(ev.fields.get("namespace") or "")

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        now = self.view.now
        self._expire(now)  # judged on the state before this write
        if kind in ROOTS:
            meta = obj["metadata"]
            ns, name, uid = str(meta.get("namespace", "")), str(meta["name"]), \
                str(meta.get("uid", ""))
            if kind == "RayCluster" and REDIS_FINALIZER in (meta.get("finalizers") or []):
                self.redis_clusters[uid] = (ns, name)
            if type_ == "DELETED":
                self.pending.append(_Pending(kind, ns, name, uid, "dependents", now,
                                             now + self.inv.bound))
                if uid in self.redis_clusters:
                    self.redis_gone.append((uid, ns, name, now))
            elif deleting(obj) and (old is None or not deleting(old)):
                self.pending.append(_Pending(kind, ns, name, uid, "finalizers", now,
                                             now + self.inv.bound))
        self._drop_met()

    def _left(self, p: _Pending, *, exempt_too: bool = False) -> list[str]:
        if p.what == "finalizers":
            obj = self.view.get(p.kind, p.ns, p.name)
            if obj is None or str(obj["metadata"].get("uid", "")) != p.uid:
                return []
            return [f"finalizers {obj['metadata'].get('finalizers') or []}"]
        return [f"{k}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
                for k, o in self.view.owned_by(p.uid)
                if exempt_too or not (k == "Pod" and deleting(o) and self.view.node_note(o))]

    def _expire(self, now: float) -> None:
        """Report the items whose deadline passed: they were unmet at the last write before it,
        and nothing changed since, so they were unmet at it. An item whose only leftovers are
        exempt stays, unreported, until they go (fine) or stop being exempt (reported)."""
        keep = []
        for p in self.pending:
            if p.deadline >= now:
                keep.append(p)
                continue
            left = self._left(p)
            if left:
                self._report(p, left)
            elif self._left(p, exempt_too=True):
                p.exempt = True
                keep.append(p)
            elif not p.exempt:
                self._report(p, ["cleared only after the deadline"])
        self.pending = keep

    def _drop_met(self) -> None:
        self.pending = [p for p in self.pending if self._left(p, exempt_too=True)]

    def _report(self, p: _Pending, left: list[str]) -> None:
        if p.what == "finalizers":
            msg = (f"{p.kind} {p.ns}/{p.name} was still present {self.inv.bound:g}s after its "
                   f"deletion at t={p.since:.3f}s ({', '.join(left)})")
            objs: tuple[str, ...] = (f"{p.kind}/{p.ns}/{p.name}",)
        else:
            msg = (f"{p.kind} {p.ns}/{p.name} was deleted at t={p.since:.3f}s but "
                   f"{self.inv.bound:g}s later {len(left)} of its objects remained: "
                   f"{', '.join(left)}")
            objs = (f"{p.kind}/{p.ns}/{p.name}", *(x for x in left if x.count("/") == 2))
        self.report(msg, p.deadline, objs)

    def settled(self, now: float) -> bool:
        """Settled when nothing deleted is waiting for its dependents, finalizers or Redis
        keys to go."""
        return (super().settled(now) and not self.pending
                and all(gone + self.inv.bound <= now for _, _, _, gone in self.redis_gone))

    async def check_end(self, sim: Simulation) -> None:
        while True:
            self._expire(sim.now)
            waiting = [p.deadline for p in self.pending if not p.exempt]
            if not waiting:
                break
            await self.view.wait_change(min(waiting) - sim.now + 1e-6)
        self._expire(sim.now)
        await self._check_redis(sim)

    async def _check_redis(self, sim: Simulation) -> None:
        servers = _redis_servers(sim)
        for uid, ns, name, gone in self.redis_gone:
            deadline = gone + self.inv.bound
            storage = self.storage_ns.get((ns, name)) or uid
            if sim.now < deadline:
                remaining = deadline - sim.now
                await sim.sleep(remaining)
            found = []
            for server_name, server in servers:
                keys = _keys(server, f"RAY{storage}@*")
                if keys:
                    found.append(f"{keys} keys on Redis {server_name}")
            if found:
                self.report(f"RayCluster {ns}/{name} was deleted at t={gone:.3f}s with the Redis "
                            f"cleanup finalizer, but {self.inv.bound:g}s later its storage "
                            f"namespace {storage} still had {', '.join(found)}", deadline,
                            (f"RayCluster/{ns}/{name}",))


def _redis_servers(sim: Simulation) -> list[tuple[str, Any]]:
    config = getattr(sim, "ray_config", None)
    records = getattr(config, "records", None)
    servers = getattr(records, "redis_servers", None) or {}
    return sorted(servers.items())


def _keys(server: Any, pattern: str) -> int:
    """How many keys match ``pattern`` on ``server`` (a ``RedisServer``), read synchronously."""
    import fakeredis

    raw = fakeredis.FakeRedis(server=server.server)
    return len(raw.keys(pattern))
