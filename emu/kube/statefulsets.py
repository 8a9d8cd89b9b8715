"""StatefulSets (apps/v1), as ``pkg/controller/statefulset`` runs them.

Why: samples run Redis as a StatefulSet with a volume claim template (the persistent-Redis GCS
fault tolerance sample), and its Pods must come up with stable names and their own PVCs.

`StatefulSetController` (``stateful_set_control.go`` ``updateStatefulSet``): Pods are named
``<set>-<ordinal>`` for ordinals ``0 … replicas-1``, with ``hostname`` = the Pod name and
``subdomain`` = ``serviceName``, the labels ``statefulset.kubernetes.io/pod-name`` and
``apps.kubernetes.io/pod-index``. Each ``volumeClaimTemplates`` entry becomes a PVC
``<template>-<set>-<ordinal>`` created before its Pod and never deleted by the controller (the
default ``Retain`` policy). With ``podManagementPolicy: OrderedReady`` (the default) a Pod is
created only when every lower ordinal is Running and Ready, and scale-down removes the highest
ordinal first, one at a time; ``Parallel`` creates and deletes without waiting. A Pod that failed
or was deleted is recreated under the same name. Status: replicas, readyReplicas,
currentReplicas, updatedReplicas, availableReplicas, observedGeneration.

Not emulated: rolling updates of a changed template (revisions, partitions), ``minReadySeconds``,
``ordinals.start``, PVC deletion by retention policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.network import NetworkError
from ..kernel.process import Process
from .common import KeyQueue, Obj, controller_ref, owner_reference, pod_is_ready
from .events import EventRecorder

if TYPE_CHECKING:
    from .cluster import KubeCluster

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _ordinal(set_name: str, pod_name: str) -> int | None:
    prefix = f"{set_name}-"
    rest = pod_name[len(prefix):] if pod_name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


class StatefulSetController:
    """The StatefulSet controller process."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.sets: Informer | None = None
        self.pods: Informer | None = None
        self.queue: KeyQueue | None = None
        self.events: EventRecorder | None = None

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
        if self.cluster.config.standard_cluster:
            self.events = EventRecorder(self.client, process, "statefulset-controller")
        self.queue = KeyQueue(process, "statefulset")
        self.sets = Informer(self.client, "StatefulSet")
        self.pods = Informer(self.client, "Pod")
        self.sets.add_event_handler(FuncHandler(
            on_add=self._set_changed, on_update=lambda _o, n: self._set_changed(n)))
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda _o, n: self._pod_changed(n),
            on_delete=self._pod_changed))
        for inf in (self.sets, self.pods):
            process.spawn(inf.run())
        for inf in (self.sets, self.pods):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _set_changed(self, sts: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"{sts['metadata']['namespace']}/{sts['metadata']['name']}")

    def _pod_changed(self, pod: Obj) -> None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "StatefulSet":
            return
        assert self.queue is not None
        self.queue.add(f"{pod['metadata']['namespace']}/{ref['name']}")

    def set_pods(self, sts: Obj) -> dict[int, Obj]:
        """The set's Pods by ordinal (controlled by this set)."""
        assert self.pods is not None
        meta = sts["metadata"]
        out: dict[int, Obj] = {}
        for pod in self.pods.list(meta["namespace"]):
            ordinal = _ordinal(meta["name"], pod["metadata"]["name"])
            if ordinal is not None and (controller_ref(pod) or {}).get("uid") == meta["uid"]:
                out[ordinal] = pod
        return dict(sorted(out.items()))

    async def sync(self, key: str) -> None:
        """``updateStatefulSet``: one step towards ``replicas`` Pods, then the status."""
        assert self.sets is not None
        ns, _, name = key.partition("/")
        sts = self.sets.get(name, ns)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        pods = self.set_pods(sts)
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        try:
            await self._step(sts, pods, replicas, ordered)
        except (ApiError, NetworkError) as err:
            if isinstance(err, ApiError) and is_already_exists(err):
                pass  # the informer has not seen our create yet
            else:
                raise
        await self.update_status(sts, self.set_pods(sts))

    async def _step(self, sts: Obj, pods: dict[int, Obj], replicas: int, ordered: bool) -> None:
        assert self.client is not None
        ns = sts["metadata"]["namespace"]
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Failed" and \
                    not pod["metadata"].get("deletionTimestamp"):
                await self._delete(pod)  # recreated under the same name on the next sync
                if ordered:
                    return
                continue
            if pod is None:
                await self._create_claims(sts, ordinal)
                created = await self.client.create(self.new_pod(sts, ordinal))
                if self.events is not None:
                    self.events.event(sts, "Normal", "SuccessfulCreate",
                                      f"create Pod {created['metadata']['name']} in StatefulSet "
                                      f"{sts['metadata']['name']} successful")
                assert self.process is not None
                self.process.log("statefulset_pod_created", statefulset=f"{ns}/"
                                 f"{sts['metadata']['name']}", ordinal=ordinal)
                if ordered:
                    return
                continue
            if ordered and (pod["metadata"].get("deletionTimestamp") or not pod_is_ready(pod)):
                return  # wait for this ordinal before the next
        surplus = sorted((o for o in pods if o >= replicas), reverse=True)
        for ordinal in surplus:
            pod = pods[ordinal]
            if pod["metadata"].get("deletionTimestamp"):
                if ordered:
                    return
                continue
            await self._delete(pod)
            if ordered:
                return

    async def _delete(self, pod: Obj) -> None:
        assert self.client is not None
        try:
            await self.client.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        except ApiError as err:
            if not is_not_found(err):
                raise

    def new_pod(self, sts: Obj, ordinal: int) -> Obj:
        """``newVersionedStatefulSetPod``: the template, named and labelled for its ordinal,
        with its claims as volumes."""
        meta = sts["metadata"]
        spec = sts.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        name = f"{meta['name']}-{ordinal}"
        labels = {**(tmeta.get("labels") or {}), POD_NAME_LABEL: name,
                  POD_INDEX_LABEL: str(ordinal)}
        pod_spec = dict(template.get("spec") or {})
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        volumes = [vol for vol in pod_spec.get("volumes") or []
                   if vol.get("name") not in {c["metadata"]["name"]
                                              for c in spec.get("volumeClaimTemplates") or []}]
        for claim in spec.get("volumeClaimTemplates") or []:
            cname = claim["metadata"]["name"]
            volumes.append({"name": cname, "persistentVolumeClaim": {
                "claimName": f"{cname}-{meta['name']}-{ordinal}"}})
        if volumes:
            pod_spec["volumes"] = volumes
        pod_meta: Obj = {"name": name, "namespace": meta["namespace"], "labels": labels,
                         "ownerReferences": [owner_reference(sts)]}
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}

    async def _create_claims(self, sts: Obj, ordinal: int) -> None:
        """``createPersistentVolumeClaims``: each missing claim of the ordinal (kept with the
        Retain policy: no owner reference)."""
        assert self.client is not None
        meta = sts["metadata"]
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        for claim in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
            cmeta = claim.get("metadata") or {}
            name = f"{cmeta['name']}-{meta['name']}-{ordinal}"
            pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": name, "namespace": meta["namespace"],
                                "labels": {**(cmeta.get("labels") or {}), **selector}},
                   "spec": dict(claim.get("spec") or {})}
            try:
                await self.client.create(pvc)
            except ApiError as err:
                if not is_already_exists(err):
                    raise

    async def update_status(self, sts: Obj, pods: dict[int, Obj]) -> None:
        """``computeReplicaStatus`` and a write when it changed."""
        assert self.client is not None
        live = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        ready = sum(1 for p in live if pod_is_ready(p))
        status: Obj = {"replicas": len(live), "readyReplicas": ready,
                       "currentReplicas": len(live), "updatedReplicas": len(live),
                       "availableReplicas": ready,
                       "observedGeneration": sts["metadata"].get("generation", 1)}
        if status == (sts.get("status") or {}):
            return
        try:
            await self.client.update_status({**sts, "status": status})
        except ApiError as err:
            if not is_not_found(err):
                raise
