"""Deployments (apps/v1) through ReplicaSets, as ``pkg/controller/deployment`` and
``pkg/controller/replicaset`` run them.

`ReplicaSetController` (``syncReplicaSet``, ``manageReplicas``, ``getPodsToDelete``,
``calculateStatus``): keeps ``replicas`` active Pods (not terminating, not finished) named
``<rs>-<5 chars>``; a Pod that crashed out (Failed) or was deleted is replaced by a new Pod — a new
name, a new process identity. Surplus Pods are deleted least useful first (unscheduled, pending,
not ready, newest). Status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas
(``minReadySeconds`` honoured), observedGeneration.

`DeploymentController` (``sync.go``, ``recreate.go`` ``rolloutRecreate``, ``rolling.go``
``rolloutRolling``): the ReplicaSet for the current template is ``<deployment>-<hash>`` with the
``pod-template-hash`` label; ``Recreate`` scales every old ReplicaSet to 0 and creates or scales up
the new one only once no Pod of the old ones exists any more; ``RollingUpdate`` scales the new one
up within ``maxSurge`` and old ones down within ``maxUnavailable`` (unhealthy old replicas first).
Status: replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
observedGeneration and the Available / Progressing conditions.

The Deployment carries its newest ReplicaSet's ``deployment.kubernetes.io/revision`` (written
with its status, as kube does), and a ReplicaSet whose template is current again gets the newest
revision, so ``kubectl rollout history`` and ``kubectl rollout undo`` work.

In a standard cluster (``KubeConfig.standard_cluster``) the ReplicaSet controller records
``SuccessfulCreate`` / ``SuccessfulDelete`` and the Deployment controller ``ScalingReplicaSet``.

Not emulated: adoption of orphaned Pods or ReplicaSets, revision history cleanup, the rollback
``spec.rollbackTo`` of old API versions, ``paused``, ``progressDeadlineSeconds``.

Over 500 lines because both controllers live here with the pure pieces they share with the
standard cluster's boot (`new_replica_set`, `new_replica_pod`, `calculate_rs_status`,
`calculate_deployment_status`): one definition of what these controllers write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import (
    Expectations,
    KeyQueue,
    Obj,
    OwnedPods,
    controller_ref,
    get_condition,
    int_or_percent,
    owner_reference,
    pod_is_ready,
    rfc3339,
    set_condition,
    template_hash,
)
from .events import EventRecorder

if TYPE_CHECKING:
    from .cluster import KubeCluster

HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def _revision(rs: Obj) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0"))
    except ValueError:
        return 0


def _active(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _available(pod: Obj, min_ready: float, now: float) -> bool:
    """``podutil.IsPodAvailable``: Ready for at least ``minReadySeconds``."""
    cond = get_condition(pod.get("status"), "Ready")
    if cond is None or cond.get("status") != "True":
        return False
    if min_ready <= 0:
        return True
    return now - clock.parse_time(cond["lastTransitionTime"]) >= min_ready


def _deletion_rank(pod: Obj) -> tuple[int, int, int, int, str]:
    """``ActivePodsWithRanks`` order: the Pod to delete first sorts first."""
    status = pod.get("status") or {}
    assigned = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase", ""), 0)
    ready = 1 if pod_is_ready(pod) else 0
    restarts = sum(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses") or [])
    created = pod["metadata"].get("creationTimestamp", "")
    inverted = "".join(chr(0x10FFFF - ord(ch)) for ch in created)  # newest first
    return (assigned, phase, ready, -restarts, inverted)


def calculate_rs_status(rs: Obj, active: list[Obj], now: float) -> tuple[Obj, bool]:
    """``calculateStatus``: the ReplicaSet's status over its ``active`` Pods, and whether a
    ready Pod waits out ``minReadySeconds`` (the caller looks again then)."""
    spec = rs.get("spec") or {}
    min_ready = float(spec.get("minReadySeconds") or 0)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    ready = [p for p in active if pod_is_ready(p)]
    available = [p for p in ready if _available(p, min_ready, now)]
    status: Obj = {
        "replicas": len(active),
        "fullyLabeledReplicas": sum(
            1 for p in active if all((p["metadata"].get("labels") or {}).get(k) == v
                                     for k, v in labels.items())),
        "readyReplicas": len(ready), "availableReplicas": len(available),
        "observedGeneration": rs["metadata"].get("generation", 1),
    }
    for k in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
        if not status[k]:
            del status[k]
    old = rs.get("status") or {}
    if old.get("conditions"):
        status["conditions"] = old["conditions"]
    return status, len(available) < len(ready) and min_ready > 0


def new_replica_pod(rs: Obj) -> Obj:
    """A Pod of ``rs``'s template, ``<rs>-<5 chars>``, owned by it (``getPodsFromTemplate``)."""
    meta = rs["metadata"]
    template = (rs.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta: Obj = {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                     "labels": dict(tmeta.get("labels") or {}),
                     "ownerReferences": [owner_reference(rs)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": template.get("spec") or {}}


def new_replica_set(d: Obj, hash_: str, replicas: int, old: list[Obj]) -> Obj:
    """The ReplicaSet ``<deployment>-<hash>`` of ``d``'s current template (``getNewReplicaSet``):
    the ``pod-template-hash`` label on it, its selector and template, the next revision after
    ``old``'s."""
    spec = d.get("spec") or {}
    template = dict(spec.get("template") or {})
    tmeta = dict(template.get("metadata") or {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: hash_}
    template["metadata"] = tmeta
    selector = dict(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: hash_}
    revision = 1 + max((int((rs["metadata"].get("annotations") or {}).get(
        REVISION_ANNOTATION, "0")) for rs in old), default=0)
    meta = d["metadata"]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{hash_}", "namespace": meta["namespace"],
                         "labels": dict(tmeta["labels"]),
                         "annotations": {REVISION_ANNOTATION: str(revision)},
                         "ownerReferences": [owner_reference(d)]},
            "spec": {"replicas": replicas, "minReadySeconds": spec.get("minReadySeconds", 0),
                     "selector": selector, "template": template}}


class ReplicaSetController:
    """The ReplicaSet controller process."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.rsets: Informer | None = None
        self.pods: Informer | None = None
        self.queue: KeyQueue | None = None
        self.expectations = Expectations()
        self._owned = OwnedPods("ReplicaSet")
        self.events: EventRecorder | None = None

    async def main(self, process: Process) -> None:
        self.process = process
        # A new process remembers nothing.
        self.expectations, self._owned = Expectations(), OwnedPods("ReplicaSet")
        self.client = Client(self.cluster.world.network, process=process)
        if self.cluster.config.standard_cluster:
            self.events = EventRecorder(self.client, process, "replicaset-controller")
        self.queue = KeyQueue(process, "replicaset")
        self.rsets = Informer(self.client, "ReplicaSet")
        self.pods = Informer(self.client, "Pod")
        self.rsets.add_event_handler(FuncHandler(
            on_add=self._rs_changed, on_update=lambda _o, n: self._rs_changed(n)))
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda _o, n: self._pod_changed(n),
            on_delete=lambda p: self._pod_changed(p, deleted=True)))
        for inf in (self.rsets, self.pods):
            process.spawn(inf.run())
        for inf in (self.rsets, self.pods):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _rs_changed(self, rs: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"{rs['metadata']['namespace']}/{rs['metadata']['name']}")

    def _pod_changed(self, pod: Obj, deleted: bool = False) -> None:
        key = self._owned.changed(pod, deleted)
        if key is not None:
            assert self.queue is not None
            self.queue.add(key)

    def rs_pods(self, rs: Obj) -> list[Obj]:
        assert self.pods is not None
        return self._owned.pods(rs, self.pods.get)

    async def sync(self, key: str) -> None:
        """``syncReplicaSet``."""
        assert self.rsets is not None and self.client is not None and self.queue is not None
        ns, _, name = key.partition("/")
        rs = self.rsets.get(name, ns)
        if rs is None:
            self.expectations.clear(key)
            self._owned.forget(key)
            return
        pods = self.rs_pods(rs)
        active = [p for p in pods if _active(p)]
        satisfied = self.expectations.satisfied(key, lambda n: self.pods.get(n, ns))  # type: ignore[union-attr]
        if not satisfied:
            self.queue.add_after(key, 0.05)
        elif not rs["metadata"].get("deletionTimestamp"):
            await self.manage_replicas(key, rs, active)
        await self.update_status(rs, active)

    async def manage_replicas(self, key: str, rs: Obj, active: list[Obj]) -> None:
        assert self.client is not None and self.process is not None
        want = int((rs.get("spec") or {}).get("replicas", 1))
        diff = len(active) - want
        meta = rs["metadata"]
        if diff < 0:
            for _ in range(-diff):
                created = await self.client.create(new_replica_pod(rs))
                if self.events is not None:
                    self.events.event(rs, "Normal", "SuccessfulCreate",
                                      f"Created pod: {created['metadata']['name']}")
                self.expectations.expect_create(key, created["metadata"]["name"])
                self.process.log("rs_pod_created", replicaset=key,
                                 pod=created["metadata"]["name"])
        elif diff > 0:
            for pod in sorted(active, key=_deletion_rank)[:diff]:
                try:
                    await self.client.delete("Pod", pod["metadata"]["name"], meta["namespace"])
                    self.expectations.expect_delete(key, pod["metadata"]["name"])
                    if self.events is not None:
                        self.events.event(rs, "Normal", "SuccessfulDelete",
                                          f"Deleted pod: {pod['metadata']['name']}")
                except ApiError as err:
                    if not is_not_found(err):
                        raise

    async def update_status(self, rs: Obj, active: list[Obj]) -> None:
        """``calculateStatus`` and a write when it changed."""
        assert self.client is not None and self.queue is not None
        status, waiting = calculate_rs_status(rs, active, clock.now())
        if waiting:
            key = f"{rs['metadata']['namespace']}/{rs['metadata']['name']}"
            self.queue.add_after(key, float((rs.get("spec") or {}).get("minReadySeconds") or 0))
        old = rs.get("status") or {}
        if status == old:
            return
        try:
            await self.client.update_status({**rs, "status": status})
        except ApiError as err:
            if not is_not_found(err):
                raise


def calculate_deployment_status(d: Obj, new: Obj | None, old: list[Obj], now: float) -> Obj:
    """``syncRolloutStatus``'s status: counts summed over the ReplicaSets, the Available and
    Progressing conditions."""
    spec = d.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    all_rs = [rs for rs in [new, *old] if rs is not None]

    def total(field: str) -> int:
        return sum(int((rs.get("status") or {}).get(field) or 0) for rs in all_rs)

    available = total("availableReplicas")
    strategy = (spec.get("strategy") or {}).get("type", "RollingUpdate")
    unavailable_ok = 0 if strategy == "Recreate" else \
        DeploymentController.max_surge_unavailable(d)[1]
    stamp = rfc3339(now)
    old_status = d.get("status") or {}
    conditions = list(old_status.get("conditions") or [])
    if available >= replicas - unavailable_ok:
        avail = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."}
    else:
        avail = {"type": "Available", "status": "False",
                 "reason": "MinimumReplicasUnavailable",
                 "message": "Deployment does not have minimum availability."}
    prev = get_condition(old_status, "Available")
    avail["lastUpdateTime"] = prev.get("lastUpdateTime", stamp) if prev and \
        prev.get("status") == avail["status"] else stamp
    avail["lastTransitionTime"] = stamp
    conditions = set_condition(conditions, avail)
    if new is not None:
        new_name = new["metadata"]["name"]
        new_status = new.get("status") or {}
        done = (int(new_status.get("availableReplicas") or 0) >= replicas
                and int(new_status.get("replicas") or 0) == replicas
                and all(int((rs.get("status") or {}).get("replicas") or 0) == 0 for rs in old))
        progress = {"type": "Progressing", "status": "True",
                    "reason": "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                    "message": f'ReplicaSet "{new_name}" has successfully progressed.'
                    if done else f'ReplicaSet "{new_name}" is progressing.'}
        prev = get_condition(old_status, "Progressing")
        same = prev is not None and prev.get("reason") == progress["reason"]
        progress["lastUpdateTime"] = prev.get("lastUpdateTime", stamp) if same and prev \
            else stamp
        progress["lastTransitionTime"] = stamp
        conditions = set_condition(conditions, progress)
    status: Obj = {
        "observedGeneration": d["metadata"].get("generation", 1),
        "replicas": total("replicas"),
        "updatedReplicas": int(((new or {}).get("status") or {}).get("replicas") or 0),
        "readyReplicas": total("readyReplicas"), "availableReplicas": available,
        "unavailableReplicas": max(replicas - available, 0),
        "conditions": conditions,
    }
    for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
              "unavailableReplicas"):
        if not status[k]:
            del status[k]
    return status


class DeploymentController:
    """The Deployment controller process."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.deployments: Informer | None = None
        self.rsets: Informer | None = None
        self.pods: Informer | None = None
        self.queue: KeyQueue | None = None
        self.events: EventRecorder | None = None

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
        if self.cluster.config.standard_cluster:
            self.events = EventRecorder(self.client, process, "deployment-controller")
        self.queue = KeyQueue(process, "deployment")
        self.deployments = Informer(self.client, "Deployment")
        self.rsets = Informer(self.client, "ReplicaSet")
        self.pods = Informer(self.client, "Pod", label_selector=HASH_LABEL)
        self.deployments.add_event_handler(FuncHandler(
            on_add=self._d_changed, on_update=lambda _o, n: self._d_changed(n)))
        self.rsets.add_event_handler(FuncHandler(
            on_add=self._rs_changed, on_update=lambda _o, n: self._rs_changed(n),
            on_delete=self._rs_changed))
        self.pods.add_event_handler(FuncHandler(on_delete=self._pod_deleted))
        for inf in (self.deployments, self.rsets, self.pods):
            process.spawn(inf.run())
        for inf in (self.deployments, self.rsets, self.pods):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _d_changed(self, d: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"{d['metadata']['namespace']}/{d['metadata']['name']}")

    def _rs_changed(self, rs: Obj) -> None:
        ref = controller_ref(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            assert self.queue is not None
            self.queue.add(f"{rs['metadata']['namespace']}/{ref['name']}")

    def _pod_deleted(self, pod: Obj) -> None:
        """``deletePod``: a Recreate rollout waits for the last old Pod to go."""
        assert self.rsets is not None
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.rsets.get(ref["name"], pod["metadata"]["namespace"])
        if rs is not None:
            self._rs_changed(rs)

    def owned_rsets(self, d: Obj) -> list[Obj]:
        assert self.rsets is not None
        uid = d["metadata"]["uid"]
        return [rs for rs in self.rsets.list(d["metadata"]["namespace"])
                if (controller_ref(rs) or {}).get("uid") == uid]

    async def sync(self, key: str) -> None:
        """``syncDeployment``."""
        assert self.deployments is not None
        ns, _, name = key.partition("/")
        d = self.deployments.get(name, ns)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = d.get("spec") or {}
        template = spec.get("template") or {}
        hash_ = template_hash(template)
        rsets = self.owned_rsets(d)
        new = next((rs for rs in rsets if (rs["metadata"].get("labels") or {}).get(HASH_LABEL)
                    == hash_), None)
        old = sorted((rs for rs in rsets if rs is not new),
                     key=lambda rs: rs["metadata"].get("creationTimestamp", ""))
        if new is not None and old and _revision(new) <= max(_revision(rs) for rs in old):
            new = await self.bump_revision(new, old)  # an old template again (rollout undo)
        strategy = (spec.get("strategy") or {}).get("type", "RollingUpdate")
        if strategy == "Recreate":
            new = await self.rollout_recreate(d, new, old, hash_)
        else:
            new = await self.rollout_rolling(d, new, old, hash_)
        await self.sync_status(d, new, old)

    # -- the new ReplicaSet ----------------------------------------------------------------------

    async def create_new_rs(self, d: Obj, hash_: str, replicas: int, old: list[Obj]) -> Obj:
        assert self.client is not None and self.rsets is not None
        meta = d["metadata"]
        rs = new_replica_set(d, hash_, replicas, old)
        try:
            created = await self.client.create(rs)
        except ApiError as err:
            if not is_already_exists(err):
                raise
            return await self.client.get("ReplicaSet", rs["metadata"]["name"], meta["namespace"])
        assert self.process is not None
        self.process.log("deployment_new_replicaset", deployment=meta["name"],
                         replicaset=created["metadata"]["name"])
        if self.events is not None and replicas > 0:
            self.events.event(d, "Normal", "ScalingReplicaSet",
                              f"Scaled up replica set {created['metadata']['name']} from 0 to "
                              f"{replicas}")
        return created

    async def bump_revision(self, rs: Obj, old: list[Obj]) -> Obj:
        """``getNewReplicaSet`` for a ReplicaSet whose template is current again: its revision
        becomes the newest (``kubectl rollout undo`` relies on it)."""
        assert self.client is not None
        revision = 1 + max(_revision(r) for r in old)
        return await self.client.patch(
            "ReplicaSet", rs["metadata"]["name"],
            {"metadata": {"resourceVersion": rs["metadata"]["resourceVersion"],
                          "annotations": {REVISION_ANNOTATION: str(revision)}}},
            rs["metadata"]["namespace"])

    async def scale(self, d: Obj, rs: Obj, replicas: int) -> Obj:
        """``scaleReplicaSet``: the ReplicaSet to ``replicas`` (a ``ScalingReplicaSet`` Event on
        ``d`` in a standard cluster)."""
        assert self.client is not None
        before = int((rs.get("spec") or {}).get("replicas", 1))
        if before == replicas:
            return rs
        scaled = await self.client.patch(
            "ReplicaSet", rs["metadata"]["name"],
            {"metadata": {"resourceVersion": rs["metadata"]["resourceVersion"]},
             "spec": {"replicas": replicas}}, rs["metadata"]["namespace"])
        if self.events is not None:
            self.events.event(d, "Normal", "ScalingReplicaSet",
                              f"Scaled {'up' if replicas > before else 'down'} replica set "
                              f"{rs['metadata']['name']} from {before} to {replicas}")
        return scaled

    # -- strategies ------------------------------------------------------------------------------

    async def rollout_recreate(self, d: Obj, new: Obj | None, old: list[Obj],
                               hash_: str) -> Obj | None:
        """``rolloutRecreate``: old ReplicaSets to 0, wait until their Pods are gone, then the
        new one up."""
        assert self.pods is not None
        scaled = False
        for rs in old:
            if int((rs.get("spec") or {}).get("replicas", 1)) != 0:
                await self.scale(d, rs, 0)
                scaled = True
        if scaled:
            return new
        old_uids = {rs["metadata"]["uid"] for rs in old}
        for pod in self.pods.peek_list(d["metadata"]["namespace"]):
            ref = controller_ref(pod)
            if ref is not None and ref.get("uid") in old_uids and \
                    (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                return new  # ``oldPodsRunning``: wait for it to go
        replicas = int((d.get("spec") or {}).get("replicas", 1))
        if new is None:
            return await self.create_new_rs(d, hash_, replicas, old)
        return await self.scale(d, new, replicas)

    async def rollout_rolling(self, d: Obj, new: Obj | None, old: list[Obj],
                              hash_: str) -> Obj | None:
        """``rolloutRolling``: ``reconcileNewReplicaSet`` then ``reconcileOldReplicaSets``."""
        spec = d.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        surge, unavailable = self.max_surge_unavailable(d)
        if new is None:
            new = await self.create_new_rs(d, hash_, replicas if not old else 0, old)
        all_rs = [new, *old]
        total = sum(int((rs.get("spec") or {}).get("replicas", 1)) for rs in all_rs)
        new_replicas = int((new.get("spec") or {}).get("replicas", 1))
        if new_replicas > replicas:
            new = await self.scale(d, new, replicas)
            return new
        if new_replicas < replicas and total < replicas + surge:
            new = await self.scale(d, new, min(new_replicas + replicas + surge - total, replicas))
            return new
        old_count = sum(int((rs.get("spec") or {}).get("replicas", 1)) for rs in old)
        if old_count == 0:
            return new
        min_available = replicas - unavailable
        new_unavailable = new_replicas - int((new.get("status") or {}).get(
            "availableReplicas") or 0)
        max_scaled_down = total - min_available - new_unavailable
        if max_scaled_down <= 0:
            return new
        # cleanupUnhealthyReplicas: old replicas that are not available go first
        for i, rs in enumerate(old):
            if max_scaled_down <= 0:
                break
            rs_replicas = int((rs.get("spec") or {}).get("replicas", 1))
            unhealthy = rs_replicas - int((rs.get("status") or {}).get("availableReplicas") or 0)
            cut = min(max_scaled_down, unhealthy)
            if cut > 0:
                old[i] = await self.scale(d, rs, rs_replicas - cut)
                max_scaled_down -= cut
        available = sum(int((rs.get("status") or {}).get("availableReplicas") or 0)
                        for rs in [new, *old])
        budget = available - min_available
        for rs in old:
            if budget <= 0:
                break
            rs_replicas = int((rs.get("spec") or {}).get("replicas", 1))
            cut = min(rs_replicas, budget)
            if cut > 0:
                await self.scale(d, rs, rs_replicas - cut)
                budget -= cut
        return new

    @staticmethod
    def max_surge_unavailable(d: Obj) -> tuple[int, int]:
        """``ResolveFenceposts``: surge rounds up, unavailable down; never both 0."""
        spec = d.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        surge = int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True)
        unavailable = int_or_percent(rolling.get("maxUnavailable", "25%"), replicas,
                                     round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable

    # -- status ----------------------------------------------------------------------------------

    async def sync_status(self, d: Obj, new: Obj | None, old: list[Obj]) -> None:
        assert self.client is not None
        status = calculate_deployment_status(d, new, old, clock.now())
        old_status = d.get("status") or {}
        if status == old_status:
            return
        meta = d["metadata"]
        if new is not None:
            # SetDeploymentRevision: the Deployment carries its newest ReplicaSet's revision
            # (kubectl rollout history/undo read it); a Deployment's /status may change its
            # annotations, and kube writes it with the status too
            revision = (new["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION)
            annotations = meta.get("annotations") or {}
            if revision and annotations.get(REVISION_ANNOTATION) != revision:
                meta = {**meta, "annotations": {**annotations, REVISION_ANNOTATION: revision}}
        try:
            await self.client.update_status({**d, "metadata": meta, "status": status})
        except ApiError as err:
            if not is_not_found(err):
                raise
