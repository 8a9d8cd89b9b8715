"""What happens to Nodes that stop answering, and to the Pods bound to them.

`NodeLifecycle` (``pkg/controller/nodelifecycle``, ``monitorNodeHealth``, plus the taint eviction
controller): a Node whose Lease in ``kube-node-lease`` has not been renewed for
`KubeConfig.node_monitor_grace_period` — judged on the time this controller *observed* the last
renewal — gets every condition set to ``Unknown`` (``NodeStatusUnknown``, "Kubelet stopped posting
node status."), the ``node.kubernetes.io/unreachable`` taints (NoSchedule and NoExecute), and its
Pods ``Ready=False`` (``MarkPodsNotReady``). Each Pod is then evicted (``DisruptionTarget`` condition,
then a graceful delete) after its toleration of the NoExecute taint runs out:
`KubeConfig.pod_eviction_timeout` (the 300 s DefaultTolerationSeconds adds) unless the Pod says
otherwise. With the kubelet gone nobody finishes the deletion: the Pod stays Terminating, as in
Kubernetes, until the Node comes back or its Node object is deleted. The taints follow the Ready
condition (``processTaintBaseEviction``): they go when the kubelet reports Ready again.

`PodGC` (``pkg/controller/podgc``, ``gcOrphaned``): Pods bound to a Node that no longer exists
are marked ``Failed`` with ``DisruptionTarget`` (``DeletionByPodGC``) and force-deleted after
`KubeConfig.pod_gc_quarantine`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import KeyQueue, Obj, get_condition, pod_is_terminal, rfc3339, set_condition
from .kubelet import NODE_LEASE_NAMESPACE

if TYPE_CHECKING:
    from .cluster import KubeCluster

UNREACHABLE = "node.kubernetes.io/unreachable"
NODE_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
#: A Node with this label counts in no zone's health (``labelNodeDisruptionExclusion``).
EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"
#: ``--unhealthy-zone-threshold`` and ``--large-cluster-size-threshold``: a zone with more than
#: two Nodes not Ready, at least this share of them, is partially disrupted; in a zone of at
#: most this many Nodes that stops new NoExecute taints (the secondary eviction rate is 0).
UNHEALTHY_ZONE_THRESHOLD = 0.55
LARGE_CLUSTER_THRESHOLD = 50


def zone_key(node: Obj) -> str:
    """``nodetopology.GetZoneKey``: region and zone labels (empty when the Node has neither)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    region = labels.get("topology.kubernetes.io/region",
                        labels.get("failure-domain.beta.kubernetes.io/region", ""))
    zone = labels.get("topology.kubernetes.io/zone",
                      labels.get("failure-domain.beta.kubernetes.io/zone", ""))
    return f"{region}:\x00:{zone}" if region or zone else ""


def _taint_key(taint: Obj) -> tuple[str, str]:
    return str(taint.get("key")), str(taint.get("effect"))


def toleration_seconds(pod: Obj, taint: Obj, default: float) -> float | None:
    """How long ``pod`` tolerates ``taint`` (None: forever; 0: not at all). A Pod with no
    matching toleration gets the DefaultTolerationSeconds admission plugin's ``default``."""
    matched = False
    shortest: float | None = None
    forever = False
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("key") and t.get("key") != taint.get("key"):
            continue
        if t.get("operator", "Equal") != "Exists" and not t.get("key"):
            continue
        matched = True
        if t.get("tolerationSeconds") is None:
            forever = True
        else:
            secs = max(float(t["tolerationSeconds"]), 0.0)
            shortest = secs if shortest is None else min(shortest, secs)
    if not matched:
        return default
    if shortest is not None:
        return shortest
    return None if forever else default


class NodeLifecycle:
    """The node lifecycle controller with taint-based eviction."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.config = cluster.config
        self._observed: dict[str, float] = {}
        self._renew_times: dict[str, str] = {}
        self._heartbeats: dict[str, str] = {}
        #: Per Node counted for disruption: (zone key, Ready is True).
        self._health: dict[str, tuple[str, bool]] = {}
        self._full_disruption = False
        #: Zones whose state stops new NoExecute taints (partial disruption, small zone).
        self._stopped_zones: frozenset[str] = frozenset()
        self.process: Process | None = None
        self.client: Client | None = None
        self.nodes: Informer | None = None
        self.queue: KeyQueue | None = None

    async def main(self, process: Process) -> None:
        self.process = process
        # a new process knows nothing: each Node's grace period starts when it is first seen
        self._observed, self._renew_times, self._heartbeats = {}, {}, {}
        self._health, self._full_disruption, self._stopped_zones = {}, False, frozenset()
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "node-lifecycle")
        self.nodes = Informer(self.client, "Node")
        leases = Informer(self.client, "Lease", namespace=NODE_LEASE_NAMESPACE)
        self.nodes.add_event_handler(FuncHandler(
            on_add=self._node_seen, on_update=lambda _o, n: self._node_seen(n),
            on_delete=self._node_gone))
        leases.add_event_handler(FuncHandler(
            on_add=self._lease_seen, on_update=lambda _o, n: self._lease_seen(n)))
        process.spawn(self.nodes.run())
        process.spawn(leases.run())
        # like the real controller, judge the cluster's health only with a full view of it
        await self.nodes.wait_synced()
        await leases.wait_synced()
        self._check_disruption()
        await self.queue.run(self.sync)

    def _node_seen(self, node: Obj) -> None:
        """A new Node, or a changed heartbeat on its Ready condition, counts as a sign of life
        (``tryUpdateNodeHealth``), as a renewed Lease does."""
        name = node["metadata"]["name"]
        beat = str((get_condition(node.get("status"), "Ready") or {}).get("lastHeartbeatTime"))
        if name not in self._observed or self._heartbeats.get(name) != beat:
            self._observed[name] = clock.now()
        self._heartbeats[name] = beat
        assert self.queue is not None
        self.queue.add(name)
        labels = node["metadata"].get("labels") or {}
        if EXCLUDE_DISRUPTION in labels:
            self._health.pop(name, None)
        else:
            ready = (get_condition(node.get("status"), "Ready") or {}).get("status") == "True"
            self._health[name] = (zone_key(node), ready)
        self._check_disruption()

    def _node_gone(self, node: Obj) -> None:
        self._health.pop(node["metadata"]["name"], None)
        self._check_disruption()

    def _zone_counts(self) -> dict[str, list[int]]:
        """Per zone: [Nodes Ready, Nodes not Ready]."""
        counts: dict[str, list[int]] = {}
        for zone, ready in self._health.values():
            counts.setdefault(zone, [0, 0])[0 if ready else 1] += 1
        return counts

    @staticmethod
    def _zone_stops_tainting(ready: int, not_ready: int) -> bool:
        """Whether a zone's state stops new NoExecute taints (``ComputeZoneState`` and
        ``setLimiterInZone``): partially disrupted in a small cluster. (A fully disrupted zone
        beside a healthy one keeps the normal rate.)"""
        if ready == 0:
            return False
        return (not_ready > 2 and not_ready / (ready + not_ready) >= UNHEALTHY_ZONE_THRESHOLD
                and ready + not_ready <= LARGE_CLUSTER_THRESHOLD)

    def _check_disruption(self) -> None:
        """``handleDisruption``: when no Node in any zone is Ready the controller assumes the
        fault is its own (a control-plane or network problem) and stops evicting: every Node
        loses its NoExecute taint. When some Node is Ready again every Node's grace period
        starts over."""
        if self.nodes is None or not self.nodes.has_synced():
            return  # the first list is still arriving
        counts = self._zone_counts()
        full = bool(counts) and all(ready == 0 for ready, _ in counts.values())
        stopped = frozenset(z for z, (ready, not_ready) in counts.items()
                            if self._zone_stops_tainting(ready, not_ready))
        assert self.queue is not None and self.process is not None
        if full != self._full_disruption:
            self._full_disruption = full
            self.process.log("node_disruption_mode", entered=full)
            now = clock.now()
            for name in sorted(self._health):
                if not full:
                    self._observed[name] = now
                self.queue.add(name)
        if stopped != self._stopped_zones:
            changed = stopped ^ self._stopped_zones
            self._stopped_zones = stopped
            for name, (zone, _ready) in sorted(self._health.items()):
                if zone in changed:
                    self.queue.add(name)  # tainting stopped or resumed there

    def _lease_seen(self, lease: Obj) -> None:
        name = lease["metadata"]["name"]
        renew = str((lease.get("spec") or {}).get("renewTime"))
        if self._renew_times.get(name) != renew:
            self._renew_times[name] = renew
            self._observed[name] = clock.now()
            assert self.queue is not None
            self.queue.add(name)

    async def sync(self, name: str) -> None:
        """``monitorNodeHealth`` for one Node: ``tryUpdateNodeHealth``, then the taints its
        Ready condition calls for (``processTaintBaseEviction``) and the evictions."""
        assert self.nodes is not None and self.client is not None and self.queue is not None
        node = self.nodes.get(name)
        if node is None:
            return
        now = clock.now()
        observed = self._observed.get(name, now)
        grace = self.config.node_monitor_grace_period
        ready = get_condition(node.get("status"), "Ready")
        observed_ready = str((ready or {}).get("status", "Unknown"))
        if now - observed >= grace:
            if any((get_condition(node.get("status"), c) or {}).get("status") != "Unknown"
                   for c in NODE_CONDITIONS):
                await self.mark_unknown(node)
                if observed_ready == "True":
                    await self.mark_pods_not_ready(name)
                return  # the informer's update brings us back for the taints
        else:
            self.queue.add_after(name, observed + grace - now + 1e-6)
        taints = list((node.get("spec") or {}).get("taints") or [])
        no_execute = any(_taint_key(t) == (UNREACHABLE, "NoExecute") for t in taints)
        no_schedule = any(_taint_key(t) == (UNREACHABLE, "NoSchedule") for t in taints)
        # NoSchedule follows the Ready condition (``doNoScheduleTaintingPass``); NoExecute too
        # (``processTaintBaseEviction``) unless the cluster or the zone is disrupted
        want_no_schedule = observed_ready != "True"
        if observed_ready == "True" or self._full_disruption:
            want_no_execute = False
        elif self._health.get(name, ("", False))[0] in self._stopped_zones:
            want_no_execute = no_execute
        else:
            want_no_execute = True
        if (no_schedule, no_execute) != (want_no_schedule, want_no_execute):
            await self.set_unreachable_taints(node, want_no_schedule, want_no_execute)
        elif no_execute:
            await self.evict_pods(node)

    async def mark_unknown(self, node: Obj) -> None:
        assert self.client is not None and self.process is not None
        now = rfc3339(clock.now())
        conditions = list((node.get("status") or {}).get("conditions") or [])
        for ctype in NODE_CONDITIONS:
            old = get_condition({"conditions": conditions}, ctype) or {}
            conditions = set_condition(conditions, {
                "type": ctype, "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
                "lastHeartbeatTime": old.get("lastHeartbeatTime", now),
                "lastTransitionTime": now})
        self.process.log("node_status_unknown", node=node["metadata"]["name"])
        await self.client.patch("Node", node["metadata"]["name"],
                                {"status": {"conditions": conditions}}, subresource="status")

    async def set_unreachable_taints(self, node: Obj, no_schedule: bool,
                                     no_execute: bool) -> None:
        """Add or remove the two ``unreachable`` taints, keeping one that stays as it was."""
        assert self.client is not None
        old = list((node.get("spec") or {}).get("taints") or [])
        taints = [t for t in old if t.get("key") != UNREACHABLE]
        now = rfc3339(clock.now())
        for effect, wanted in (("NoSchedule", no_schedule), ("NoExecute", no_execute)):
            if wanted:
                kept = next((t for t in old if _taint_key(t) == (UNREACHABLE, effect)), None)
                taints.append(kept or {"key": UNREACHABLE, "effect": effect, "timeAdded": now})
        await self.client.patch("Node", node["metadata"]["name"],
                                {"metadata": {"resourceVersion": node["metadata"]
                                              ["resourceVersion"]},
                                 "spec": {"taints": taints or None}})

    async def _pods_on(self, node: str) -> list[Obj]:
        assert self.client is not None
        return list(await self.client.list("Pod", field_selector=f"spec.nodeName={node}"))

    async def mark_pods_not_ready(self, node: str) -> None:
        """``MarkPodsNotReady``: the Ready condition of every Pod on the Node becomes False."""
        assert self.client is not None
        now = rfc3339(clock.now())
        for pod in await self._pods_on(node):
            if pod_is_terminal(pod):
                continue
            ready = get_condition(pod.get("status"), "Ready")
            if ready is None or ready.get("status") == "False":
                continue
            conditions = set_condition(list(pod["status"].get("conditions") or []),
                                       {**ready, "status": "False", "lastTransitionTime": now})
            try:
                await self.client.patch("Pod", pod["metadata"]["name"],
                                        {"status": {"conditions": conditions}},
                                        pod["metadata"]["namespace"], subresource="status")
            except ApiError as err:
                if not is_not_found(err):
                    raise

    async def evict_pods(self, node: Obj) -> None:
        """The taint eviction controller: delete each Pod whose toleration of the NoExecute
        unreachable taint has run out; come back when the next one does."""
        assert self.client is not None and self.queue is not None and self.process is not None
        name = node["metadata"]["name"]
        taint = next(t for t in node["spec"]["taints"]
                     if _taint_key(t) == (UNREACHABLE, "NoExecute"))
        added = clock.parse_time(taint["timeAdded"]) if taint.get("timeAdded") else clock.now()
        now = clock.now()
        next_due: float | None = None
        for pod in await self._pods_on(name):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") or pod_is_terminal(pod):
                continue
            secs = toleration_seconds(pod, taint, self.config.pod_eviction_timeout)
            if secs is None:
                continue
            due = added + secs
            if due > now:
                next_due = due if next_due is None else min(next_due, due)
                continue
            self.process.log("pod_evicted", pod=f"{meta['namespace']}/{meta['name']}", node=name)
            conditions = set_condition(list((pod.get("status") or {}).get("conditions") or []), {
                "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": rfc3339(now)})
            try:
                await self.client.patch("Pod", meta["name"], {"status": {"conditions": conditions}},
                                        meta["namespace"], subresource="status")
                await self.client.delete("Pod", meta["name"], meta["namespace"],
                                         preconditions={"uid": meta["uid"]})
            except ApiError as err:
                if not is_not_found(err):
                    raise
        if next_due is not None:
            self.queue.add_after(name, next_due - now)


class PodGC:
    """Force-deletes Pods bound to Nodes that no longer exist (``gcOrphaned``)."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.nodes: Informer | None = None
        self.queue: KeyQueue | None = None

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "pod-gc")
        self.nodes = Informer(self.client, "Node")
        quarantine = self.cluster.config.pod_gc_quarantine
        self.nodes.add_event_handler(FuncHandler(
            on_delete=lambda n: self.queue.add_after(n["metadata"]["name"], quarantine)))  # type: ignore[union-attr]
        process.spawn(self.nodes.run())
        await self.nodes.wait_synced()
        await asyncio.sleep(0)
        await self.queue.run(self.sync)

    async def sync(self, node: str) -> None:
        assert self.nodes is not None and self.client is not None and self.process is not None
        if self.nodes.get(node) is not None:
            return
        now = rfc3339(clock.now())
        for pod in await self.client.list("Pod", field_selector=f"spec.nodeName={node}"):
            meta = pod["metadata"]
            self.process.log("pod_gc_orphaned", pod=f"{meta['namespace']}/{meta['name']}",
                             node=node)
            status = dict(pod.get("status") or {})
            conditions = set_condition(list(status.get("conditions") or []), {
                "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists", "lastTransitionTime": now})
            patch: Obj = {"conditions": conditions}
            if not pod_is_terminal(pod):
                patch["phase"] = "Failed"
            try:
                await self.client.patch("Pod", meta["name"], {"status": patch}, meta["namespace"],
                                        subresource="status")
                await self.client.delete("Pod", meta["name"], meta["namespace"],
                                         grace_period_seconds=0,
                                         preconditions={"uid": meta["uid"]})
            except ApiError as err:
                if not is_not_found(err):
                    raise
