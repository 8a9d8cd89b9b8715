"""DaemonSets (apps/v1): one Pod per eligible Node, as ``pkg/controller/daemon`` runs them.

`DaemonSetController` (``daemon_controller.go``: ``syncDaemonSet``, ``manage``,
``podsShouldBeOnNode``, ``NodeShouldRunDaemonPod``, ``updateDaemonSetStatus``; ``update.go``
``rollingUpdate``; ``util/daemonset_util.go``):

- a Node should run the daemon Pod when it matches the template's ``nodeSelector`` and required
  node affinity and the Pod tolerates its NoSchedule and NoExecute taints (with the tolerations
  the controller adds to every daemon Pod: not-ready and unreachable NoExecute, the pressure
  and unschedulable NoSchedule taints, network-unavailable for ``hostNetwork``); a Pod already
  there keeps running unless a NoExecute taint is not tolerated (``shouldContinueRunning``);
- each Pod is ``<ds>-<5 chars>``, owned by the DaemonSet, with the ``controller-revision-hash``
  and ``pod-template-generation`` labels, and pinned to its Node by the required node affinity
  the real controller writes (``metadata.name`` In [node], replacing the template's terms, which
  the controller already checked); the scheduler then binds it;
- extra Pods on a Node (all but the oldest), Pods on Nodes that should not run one and Failed
  Pods are deleted (a Failed Pod is replaced on the next sync);
- ``RollingUpdate`` (the default): Pods of an older template are deleted, unavailable ones
  first, while at most ``maxUnavailable`` (1) daemon Pods are unavailable; the new Pod comes
  with the next sync. ``OnDelete`` replaces only Pods deleted by someone else. ``maxSurge`` is
  read as 0 (see docs/deviations.md);
- status: desired, current, misscheduled, ready, available (``minReadySeconds``), unavailable
  and updated counts, ``observedGeneration``.

In a standard cluster (`KubeConfig.standard_cluster`) it records kube's Events
``SuccessfulCreate`` ("Created pod: NAME") and ``SuccessfulDelete`` ("Deleted pod: NAME").
Not emulated: ControllerRevisions (``kubectl rollout history daemonset``), ``maxSurge``,
adoption of orphaned Pods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import (
    Expectations,
    KeyQueue,
    Obj,
    OwnedPods,
    int_or_percent,
    owner_reference,
    pod_is_ready,
    template_hash,
)
from .deployments import _available
from .events import EventRecorder
from .scheduler import node_matches_terms, required_node_affinity, tolerates

if TYPE_CHECKING:
    from .cluster import KubeCluster

REVISION_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"

#: ``AddOrUpdateDaemonPodTolerations``: what every daemon Pod tolerates.
DAEMON_TOLERATIONS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"


def daemon_pod_tolerations(spec: Obj) -> list[Obj]:
    """``AddOrUpdateDaemonPodTolerations``: the template's tolerations, then each of
    `DAEMON_TOLERATIONS` (and network-unavailable for ``hostNetwork``) not there already."""
    out = [dict(t) for t in spec.get("tolerations") or []]
    wanted = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append((NETWORK_UNAVAILABLE, "NoSchedule"))
    for key, effect in wanted:
        toleration = {"key": key, "operator": "Exists", "effect": effect}
        if toleration not in out:
            out.append(toleration)
    return out


def node_should_run_daemon_pod(node: Obj, tolerations: list[Obj], template_spec: Obj
                               ) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (should run, should continue running) a daemon Pod with
    ``tolerations`` (the daemon Pod's, `daemon_pod_tolerations`) on ``node``."""
    meta = node.get("metadata") or {}
    name, labels = str(meta.get("name", "")), meta.get("labels") or {}
    wanted = template_spec.get("nodeName")
    if wanted and wanted != name:
        return False, False
    selector = template_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False, False
    terms = required_node_affinity({"spec": template_spec})
    if terms and not node_matches_terms(terms, name, labels):
        return False, False
    run = keep = True
    for taint in (node.get("spec") or {}).get("taints") or []:
        effect = taint.get("effect")
        if effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            run = False
            if effect == "NoExecute":
                keep = False
    return run, keep


def _pinned_affinity(spec: Obj, node: str) -> Obj:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the required node affinity becomes one
    term, ``metadata.name`` In [node]; other affinities stay."""
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    affinity["nodeAffinity"] = node_affinity
    return affinity


def new_daemon_pod(ds: Obj, node: str) -> Obj:
    """``CreatePodTemplate`` with the Node's pin and the daemon tolerations."""
    meta = ds["metadata"]
    spec = ds.get("spec") or {}
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels[REVISION_LABEL] = template_hash(template)
    labels[GENERATION_LABEL] = str(meta.get("generation", 1))
    pod_meta: Obj = {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                     "labels": labels, "ownerReferences": [owner_reference(ds)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    pod_spec = dict(template.get("spec") or {})
    pod_spec["tolerations"] = daemon_pod_tolerations(pod_spec)
    pod_spec["affinity"] = _pinned_affinity(pod_spec, node)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def _created(pod: Obj) -> tuple[str, str]:
    meta = pod["metadata"]
    return str(meta.get("creationTimestamp", "")), str(meta.get("name", ""))


def calculate_ds_status(ds: Obj, by_node: dict[str, list[Obj]],
                        placement: dict[str, tuple[bool, bool]], now: float) -> tuple[Obj, bool]:
    """``updateDaemonSetStatus``'s counts over the daemon Pods by Node and where they should
    run (`node_should_run_daemon_pod` per Node), and whether a ready Pod waits out
    ``minReadySeconds``."""
    spec = ds.get("spec") or {}
    current = template_hash(spec.get("template") or {})
    min_ready = float(spec.get("minReadySeconds") or 0)
    desired = scheduled = misscheduled = ready = available = updated = 0
    waiting = False
    for node, (run, _keep) in placement.items():
        pods = [p for p in by_node.get(node, [])
                if (p.get("spec") or {}).get("nodeName")]
        if run:
            desired += 1
        if not pods:
            continue
        if not run:
            misscheduled += 1
            continue
        scheduled += 1
        pod = min(pods, key=_created)
        if pod["metadata"].get("labels", {}).get(REVISION_LABEL) == current:
            updated += 1
        if pod_is_ready(pod):
            ready += 1
            if _available(pod, min_ready, now):
                available += 1
            else:
                waiting = True
    status: Obj = {
        "currentNumberScheduled": scheduled, "numberMisscheduled": misscheduled,
        "desiredNumberScheduled": desired, "numberReady": ready,
        "observedGeneration": ds["metadata"].get("generation", 1),
        "updatedNumberScheduled": updated, "numberAvailable": available,
        "numberUnavailable": desired - available,
    }
    for k in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):
        if not status[k]:
            del status[k]
    return status, waiting


class DaemonSetController:
    """The DaemonSet controller process (``daemonset-controller``)."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.dsets: Informer | None = None
        self.pods: Informer | None = None
        self.nodes: Informer | None = None
        self.queue: KeyQueue | None = None
        self.expectations = Expectations()
        self.events: EventRecorder | None = None
        self._owned = OwnedPods("DaemonSet")

    async def main(self, process: Process) -> None:
        self.process = process
        # A new process remembers nothing.
        self.expectations, self._owned = Expectations(), OwnedPods("DaemonSet")
        self.client = Client(self.cluster.world.network, process=process)
        if self.cluster.config.standard_cluster:
            self.events = EventRecorder(self.client, process, "daemonset-controller")
        self.queue = KeyQueue(process, "daemonset")
        self.dsets = Informer(self.client, "DaemonSet")
        self.pods = Informer(self.client, "Pod")
        self.nodes = Informer(self.client, "Node")
        self.dsets.add_event_handler(FuncHandler(
            on_add=self._ds_changed, on_update=lambda _o, n: self._ds_changed(n)))
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda _o, n: self._pod_changed(n),
            on_delete=lambda p: self._pod_changed(p, deleted=True)))
        self.nodes.add_event_handler(FuncHandler(
            on_add=lambda _n: self._enqueue_all(),
            on_update=self._node_updated, on_delete=lambda _n: self._enqueue_all()))
        for inf in (self.dsets, self.pods, self.nodes):
            process.spawn(inf.run())
        for inf in (self.dsets, self.pods, self.nodes):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    # -- event handlers --------------------------------------------------------------------------

    def _ds_changed(self, ds: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"{ds['metadata']['namespace']}/{ds['metadata']['name']}")

    def _enqueue_all(self) -> None:
        assert self.dsets is not None
        for ds in self.dsets.peek_list():
            self._ds_changed(ds)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        """``updateNode``: only a change that can change where daemons run (labels, taints,
        readiness) enqueues the DaemonSets, not a heartbeat."""
        def relevant(node: Obj) -> tuple[object, ...]:
            conditions = [(c.get("type"), c.get("status"))
                          for c in (node.get("status") or {}).get("conditions") or []]
            return ((node.get("metadata") or {}).get("labels"),
                    (node.get("spec") or {}).get("taints"), conditions)

        if relevant(old) != relevant(new):
            self._enqueue_all()

    def _pod_changed(self, pod: Obj, deleted: bool = False) -> None:
        key = self._owned.changed(pod, deleted)
        if key is not None:
            assert self.queue is not None
            self.queue.add(key)

    def ds_pods(self, ds: Obj) -> list[Obj]:
        assert self.pods is not None
        return self._owned.pods(ds, self.pods.get)

    # -- the sync --------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        """``syncDaemonSet``: ``manage``, the rolling update, then the status."""
        assert self.dsets is not None and self.nodes is not None and self.queue is not None
        ns, _, name = key.partition("/")
        ds = self.dsets.get(name, ns)
        if ds is None:
            self.expectations.clear(key)
            self._owned.forget(key)
            return
        pods = self.ds_pods(ds)
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            node = self._pod_node(pod)
            by_node.setdefault(node, []).append(pod)
        spec = ds.get("spec") or {}
        template_spec = (spec.get("template") or {}).get("spec") or {}
        tolerations = daemon_pod_tolerations(template_spec)
        nodes = sorted(self.nodes.peek_list(), key=lambda n: n["metadata"]["name"])
        placement = {n["metadata"]["name"]: node_should_run_daemon_pod(n, tolerations,
                                                                       template_spec)
                     for n in nodes}
        satisfied = self.expectations.satisfied(key, lambda n: self.pods.get(n, ns))  # type: ignore[union-attr]
        if not satisfied:
            self.queue.add_after(key, 0.05)
        elif not ds["metadata"].get("deletionTimestamp"):
            await self.manage(key, ds, by_node, placement)
            await self.rolling_update(key, ds, by_node, placement)
        await self.update_status(ds, by_node, placement)

    @staticmethod
    def _pod_node(pod: Obj) -> str:
        """The Node a daemon Pod is bound to, or pinned to by its node affinity."""
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            return str(spec["nodeName"])
        for term in required_node_affinity(pod):
            for field in term.get("matchFields") or []:
                if field.get("key") == "metadata.name" and field.get("values"):
                    return str(field["values"][0])
        return ""

    async def manage(self, key: str, ds: Obj, by_node: dict[str, list[Obj]],
                     placement: dict[str, tuple[bool, bool]]) -> None:
        """``manage`` (``podsShouldBeOnNode``): create where a Pod is missing, delete where one
        should not run, extras and Failed Pods."""
        create: list[str] = []
        delete: list[Obj] = []
        for node, (run, keep) in placement.items():
            pods = sorted(by_node.get(node, []), key=_created)
            failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
            running = [p for p in pods if p not in failed]
            delete.extend(failed)
            if run and not running and not failed:
                create.append(node)
            elif keep and running:
                delete.extend(running[1:])  # keep the oldest
            elif not keep:
                delete.extend(running)
        for node, pods in sorted(by_node.items()):
            if node not in placement:  # the Node is gone (or never existed)
                delete.extend(pods)
        for node in create:
            await self.create_pod(key, ds, node)
        for pod in delete:
            await self.delete_pod(key, ds, pod)

    async def create_pod(self, key: str, ds: Obj, node: str) -> None:
        assert self.client is not None and self.process is not None
        created = await self.client.create(new_daemon_pod(ds, node))
        pod_name = created["metadata"]["name"]
        self.expectations.expect_create(key, pod_name)
        self.process.log("ds_pod_created", daemonset=key, pod=pod_name, node=node)
        if self.events is not None:
            self.events.event(ds, "Normal", "SuccessfulCreate", f"Created pod: {pod_name}")

    async def delete_pod(self, key: str, ds: Obj, pod: Obj) -> None:
        assert self.client is not None and self.process is not None
        pod_name = pod["metadata"]["name"]
        try:
            await self.client.delete("Pod", pod_name, pod["metadata"]["namespace"])
        except ApiError as err:
            if not is_not_found(err):
                raise
            return
        self.expectations.expect_delete(key, pod_name)
        self.process.log("ds_pod_deleted", daemonset=key, pod=pod_name)
        if self.events is not None:
            self.events.event(ds, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")

    async def rolling_update(self, key: str, ds: Obj, by_node: dict[str, list[Obj]],
                             placement: dict[str, tuple[bool, bool]]) -> None:
        """``rollingUpdate`` with ``maxSurge`` 0: delete old Pods, the unavailable ones
        first, while the daemon Pods unavailable stay within ``maxUnavailable``."""
        spec = ds.get("spec") or {}
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        current = template_hash(spec.get("template") or {})
        desired = sum(1 for run, _keep in placement.values() if run)
        max_unavailable = int_or_percent(
            (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1), desired,
            round_up=True) or 1
        min_ready = float(spec.get("minReadySeconds") or 0)
        now = clock.now()
        unavailable = 0
        old_unavailable: list[Obj] = []
        old_available: list[Obj] = []
        for node, (run, _keep) in sorted(placement.items()):
            pods = [p for p in by_node.get(node, [])
                    if (p.get("status") or {}).get("phase") != "Failed"]
            if not run:
                continue
            pod = min(pods, key=_created) if pods else None
            available = pod is not None and _available(pod, min_ready, now)
            if not available:
                unavailable += 1
            if pod is not None and pod["metadata"].get("labels", {}).get(REVISION_LABEL) \
                    != current:
                (old_available if available else old_unavailable).append(pod)
        for pod in old_unavailable:
            await self.delete_pod(key, ds, pod)
        budget = max_unavailable - unavailable
        for pod in old_available[:max(budget, 0)]:
            await self.delete_pod(key, ds, pod)

    async def update_status(self, ds: Obj, by_node: dict[str, list[Obj]],
                            placement: dict[str, tuple[bool, bool]]) -> None:
        """``updateDaemonSetStatus``: the counts, written when they changed."""
        assert self.client is not None and self.queue is not None
        status, waiting = calculate_ds_status(ds, by_node, placement, clock.now())
        if waiting:
            self.queue.add_after(f"{ds['metadata']['namespace']}/{ds['metadata']['name']}",
                                 float((ds.get("spec") or {}).get("minReadySeconds") or 0))
        old = ds.get("status") or {}
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if status == old:
            return
        try:
            await self.client.update_status({**ds, "status": status})
        except ApiError as err:
            if not is_not_found(err):
                raise
