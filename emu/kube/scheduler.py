"""The scheduler: binds each Pending Pod to a Node that fits it.

A reduced ``kube-scheduler`` with the default profile's effects that controllers observe:
- filters (``NodeResourcesFit``, ``NodeName``, ``NodeUnschedulable``, ``NodeAffinity`` for
  ``nodeSelector``, ``TaintToleration`` for NoSchedule/NoExecute taints, ``VolumeBinding`` for
  unbound or missing PVCs), tried on Nodes in round-robin order from where the last Pod stopped,
  until ``numFeasibleNodesToFind`` fit (``schedule_one.go``: 50% - nodes/125, at least 5%, at
  least 100 Nodes);
- score: ``NodeResourcesFit`` LeastAllocated (CPU and memory, equal weights); ties are broken by
  the seeded random stream, as the real one samples among equal scores;
- a bound Pod gets ``spec.nodeName`` (the binding) and ``PodScheduled=True``; a Pod that fits
  nowhere gets ``PodScheduled=False`` reason ``Unschedulable`` with the real message
  (``0/3 nodes are available: 3 Insufficient cpu.``) and is retried when a Node, a Pod or a PVC
  changes (the scheduling queue's ``moveAllToActiveOrBackoffQueue`` on cluster events).

- extended resources (``nvidia.com/gpu``, ``google.com/tpu``: any name a Node advertises besides
  cpu, memory, pods and storage) are filtered like CPU (``Insufficient nvidia.com/gpu``); required
  node affinity (``nodeSelectorTerms`` with ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``,
  ``Gt``, ``Lt`` and ``matchFields`` on ``metadata.name``) filters like ``nodeSelector``;
- every time a Pod is found unschedulable with a new message, a Warning Event
  ``FailedScheduling`` carries that message, as ``kubectl describe pod`` shows it.

- preemption (``DefaultPreemption``): a Pod with a ``spec.priority`` (set from its
  PriorityClass by the API server) that fits nowhere evicts the fewest and least important
  lower-priority Pods of one Node (``DisruptionTarget`` condition, ``Preempted`` Event, a
  graceful delete) and is nominated there (``status.nominatedNodeName``).

Not emulated: preferred affinity, Pod (anti-)affinity, topology spread, the scheduling queue's
priority order, PodDisruptionBudgets in the choice of victims, scheduling gates.

Over 500 lines because the cache (Nodes, bound and assumed Pods, extended resources), the
filters, the fast path that must give the same pick as the slow one, and preemption (which
reruns the filters on the cache without some Pods) belong together.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import attrs

from ..apiserver.errors import ApiError, is_conflict, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.network import NetworkError
from ..kernel.process import Process
from .common import (
    STANDARD_RESOURCES,
    Obj,
    milli,
    pod_extended_requests,
    pod_requests,
    rfc3339,
    set_condition,
    whole,
)
from .events import EventRecorder
from .volumes import SELECTED_NODE, delayed_binding, explicit_class

if TYPE_CHECKING:
    from .cluster import KubeCluster

SCHEDULER_NAME = "default-scheduler"
#: How a plugin's error (not a filter's verdict) begins (the framework's ``RunPreFilterPlugins``).
_PLUGIN_ERROR = "running PreFilter plugin "
#: How long a binding waits for its WaitForFirstConsumer claims (``bindTimeoutSeconds``).
BIND_TIMEOUT = 600.0
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENT = 5


@attrs.define(eq=False)
class NodeInfo:
    """What the scheduler caches per Node: allocatable and what bound Pods request."""

    name: str
    cpu: int
    memory: int
    pods: int
    labels: dict[str, str]
    taints: list[Obj]
    unschedulable: bool
    ready: bool
    used_cpu: int = 0
    used_memory: int = 0
    used_pods: int = 0
    #: Extended resources the Node advertises, and what bound Pods request of them.
    extended: dict[str, int] = attrs.field(factory=dict)
    used_extended: dict[str, int] = attrs.field(factory=dict)
    #: Where it last was in the scheduler's Node list.
    index_hint: int = 0


def num_feasible_nodes_to_find(total: int, percentage: int = 0) -> int:
    """``numFeasibleNodesToFind``; ``percentage`` 0 is the adaptive default."""
    if total < MIN_FEASIBLE_NODES or percentage >= 100:
        return total
    percent = percentage or max(50 - total // 125, MIN_FEASIBLE_PERCENT)
    return max(total * percent // 100, MIN_FEASIBLE_NODES)


def _expression_matches(expr: Obj, labels: dict[str, str]) -> bool:
    """One ``NodeSelectorRequirement`` against a Node's labels (``nodeaffinity``)."""
    key, op = expr.get("key", ""), expr.get("operator")
    values = [str(x) for x in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def required_node_affinity(pod: Obj) -> list[Obj]:
    """The Pod's ``requiredDuringSchedulingIgnoredDuringExecution`` node selector terms."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(required.get("nodeSelectorTerms") or [])


def node_matches_terms(terms: list[Obj], name: str, labels: dict[str, str]) -> bool:
    """``NodeSelectorTerms`` are ORed; a term's expressions and fields are ANDed; a term with
    neither matches nothing."""
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_expression_matches(e, labels) for e in exprs) and all(
                _expression_matches(f, {"metadata.name": name}) for f in fields):
            return True
    return False


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    """``v1helper.TolerationsTolerateTaint``."""
    for t in tolerations:
        effect = t.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = t.get("key")
        if key and key != taint.get("key"):
            continue
        op = t.get("operator", "Equal")
        if (op == "Exists" or (op == "Equal" and t.get("value", "") == taint.get("value", ""))) \
                and (key or op == "Exists"):
            return True
    return False


class Scheduler:
    """The scheduler process: `main` is its entry point."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.rng = cluster.world.rng.fork("scheduler")
        self.nodes: dict[str, NodeInfo] = {}
        self._node_order: list[str] = []
        self._node_list: list[NodeInfo] = []
        #: Per request shape (millicores, bytes): each Node's score for a Pod without
        #: selectors, or -1 where it does not fit; kept current as Nodes change.
        self._scores: dict[tuple[int, int], list[int]] = {}
        self._next_start = 0
        #: Pods to schedule, in arrival order; unschedulable Pods wait in `_unschedulable`.
        self._active: dict[str, None] = {}
        self._unschedulable: dict[str, None] = {}
        #: Pods this scheduler bound (assumed) but the cache has not seen bound yet.
        self._assumed: dict[str, tuple[str, int, int]] = {}
        self._bound_requests: dict[str, tuple[str, int, int]] = {}
        #: Extended resources charged per Pod (assumed or bound): (Node, requests).
        self._ext: dict[str, tuple[str, dict[str, int]]] = {}
        self.events: EventRecorder | None = None
        self._wake = asyncio.Event()
        self.process: Process | None = None
        self.client: Client | None = None
        self.pods: Informer | None = None
        self.pvcs: Informer | None = None
        #: StorageClasses, watched from the first Pod whose unbound claim names one.
        self.classes: Informer | None = None
        #: Set when a claim changes: a binding waiting for its WaitForFirstConsumer claims.
        self._claims_changed = asyncio.Event()

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
        self.events = EventRecorder(self.client, process, SCHEDULER_NAME)
        node_informer = Informer(self.client, "Node")
        node_informer.add_event_handler(FuncHandler(
            on_add=self._node_changed, on_update=lambda _o, n: self._node_changed(n),
            on_delete=self._node_deleted))
        self.pods = Informer(self.client, "Pod")
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda _o, n: self._pod_changed(n),
            on_delete=self._pod_deleted))
        self.pvcs = Informer(self.client, "PersistentVolumeClaim")
        self.pvcs.add_event_handler(FuncHandler(
            on_add=lambda _p: self._requeue_unschedulable(),
            on_update=lambda _o, _n: self._claim_updated()))
        for inf in (node_informer, self.pods, self.pvcs):
            process.spawn(inf.run(), name=f"{process.name}:informer:{inf.kind}")
        for inf in (node_informer, self.pods, self.pvcs):
            await inf.wait_synced()
        await self.schedule_loop()

    # -- cache -----------------------------------------------------------------------------------

    def _node_changed(self, node: Obj) -> None:
        meta = node["metadata"]
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        name = meta["name"]
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo(name=name, cpu=0, memory=0, pods=0, labels={}, taints=[],
                            unschedulable=False, ready=False)
            self.nodes[name] = info
            self._node_order.append(name)
            self._node_list.append(info)
        info.cpu = milli(alloc.get("cpu", "0"))
        info.memory = whole(alloc.get("memory", "0"))
        info.pods = whole(alloc.get("pods", "0"))
        info.extended = {k: whole(v) for k, v in sorted(alloc.items())
                         if k not in STANDARD_RESOURCES and not k.startswith("hugepages-")}
        info.labels = dict(meta.get("labels") or {})
        info.taints = list((node.get("spec") or {}).get("taints") or [])
        info.unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        info.ready = ready
        self._refresh_scores(info)
        self._requeue_unschedulable()

    def _node_deleted(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        info = self.nodes.pop(name, None)
        if name in self._node_order:
            self._node_order.remove(name)
        if info is not None:
            self._node_list.remove(info)
            self._scores.clear()

    def _charge(self, key: str, node: str, cpu: int, mem: int, sign: int) -> None:
        info = self.nodes.get(node)
        if info is None:
            return
        info.used_cpu += sign * cpu
        info.used_memory += sign * mem
        info.used_pods += sign
        self._refresh_scores(info)

    def _ext_charge(self, key: str, node: str, req: dict[str, int]) -> None:
        if self._ext.get(key, ("", {}))[0] == node:
            return
        self._ext_release(key)
        if not req:
            return
        info = self.nodes.get(node)
        if info is not None:
            for k, n in req.items():
                info.used_extended[k] = info.used_extended.get(k, 0) + n
        self._ext[key] = (node, req)

    def _ext_release(self, key: str) -> None:
        entry = self._ext.pop(key, None)
        if entry is None:
            return
        info = self.nodes.get(entry[0])
        if info is not None:
            for k, n in entry[1].items():
                info.used_extended[k] = info.used_extended.get(k, 0) - n

    def _pod_changed(self, pod: Obj) -> None:
        meta = pod["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if node:
            self._active.pop(key, None)
            self._unschedulable.pop(key, None)
            bound = self._bound_requests.get(key)
            if terminal:
                self._ext_release(key)
                if bound is not None:
                    self._charge(key, *bound, -1)
                    del self._bound_requests[key]
                    self._requeue_unschedulable()
                self._assumed.pop(key, None)
                return
            if bound is None:
                assumed = self._assumed.pop(key, None)
                cpu, mem = pod_requests(pod)
                if assumed is None or assumed[0] != node:
                    if assumed is not None:
                        self._charge(key, *assumed, -1)
                    self._charge(key, node, cpu, mem, +1)
                self._bound_requests[key] = (node, cpu, mem)
                self._ext_charge(key, node, pod_extended_requests(pod))
            return
        if meta.get("deletionTimestamp") or terminal:
            return
        if spec.get("schedulerName", SCHEDULER_NAME) != SCHEDULER_NAME:
            return
        if key not in self._unschedulable and key not in self._assumed:
            self._active[key] = None
            self._wake.set()

    def _pod_deleted(self, pod: Obj) -> None:
        meta = pod["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        self._active.pop(key, None)
        self._unschedulable.pop(key, None)
        self._ext_release(key)
        bound = self._bound_requests.pop(key, None)
        if bound is not None:
            self._charge(key, *bound, -1)
        assumed = self._assumed.pop(key, None)
        if assumed is not None:
            self._charge(key, *assumed, -1)
        if bound is not None or assumed is not None:
            self._requeue_unschedulable()

    def _claim_updated(self) -> None:
        self._claims_changed.set()
        self._requeue_unschedulable()

    def _unbound_claims(self, pod: Obj) -> list[Obj]:
        assert self.pvcs is not None
        ns = pod["metadata"].get("namespace")
        out = []
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            pvc = self.pvcs.get(claim, ns) if claim else None
            if pvc is not None and (pvc.get("status") or {}).get("phase") != "Bound":
                out.append(pvc)
        return out

    async def _need_classes(self, pod: Obj) -> None:
        """Start the StorageClass informer when ``pod`` has an unbound claim naming a class
        (worlds whose claims name none never watch StorageClasses)."""
        if self.classes is not None or not any(explicit_class(c) is not None
                                               for c in self._unbound_claims(pod)):
            return
        assert self.client is not None and self.process is not None
        self.classes = Informer(self.client, "StorageClass")
        self.classes.add_event_handler(FuncHandler(
            on_add=lambda _c: self._requeue_unschedulable(),
            on_update=lambda _o, _n: self._requeue_unschedulable()))
        self.process.spawn(self.classes.run(), name=f"{self.process.name}:informer:StorageClass")
        await self.classes.wait_synced()

    def _delayed_claims(self, pod: Obj) -> list[Obj]:
        """The unbound claims of ``pod`` whose class binds on first consumer."""
        if self.classes is None:
            return []
        out = []
        for pvc in self._unbound_claims(pod):
            name = explicit_class(pvc)
            if name is not None and delayed_binding(self.classes.get(name)):
                out.append(pvc)
        return out

    def _selected_node(self, pod: Obj) -> str | None:
        """The Node a claim of ``pod`` was provisioned for (``selected-node``): a node-local
        volume pins its Pods there (the PV's node affinity, read from the claim)."""
        if self.classes is None:
            return None
        assert self.pvcs is not None
        ns = pod["metadata"].get("namespace")
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            pvc = self.pvcs.get(claim, ns) if claim else None
            if pvc is not None:
                node = ((pvc.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE)
                if node:
                    return str(node)
        return None

    def _requeue_unschedulable(self) -> None:
        if self._unschedulable:
            for key in self._unschedulable:
                self._active[key] = None
            self._unschedulable.clear()
            self._wake.set()

    # -- scheduling ------------------------------------------------------------------------------

    async def schedule_loop(self) -> None:
        while True:
            while not self._active:
                self._wake.clear()
                await self._wake.wait()
            key = next(iter(self._active))
            del self._active[key]
            assert self.pods is not None
            ns, _, name = key.partition("/")
            pod = self.pods.get(name, ns)
            if pod is None or (pod.get("spec") or {}).get("nodeName"):
                continue
            if self.classes is None and (pod.get("spec") or {}).get("volumes"):
                await self._need_classes(pod)
            self.schedule_one(key, pod)
            await asyncio.sleep(0)

    def schedule_one(self, key: str, pod: Obj) -> None:
        """``ScheduleOne``: pick a Node and bind asynchronously, or record why none fits."""
        node, reasons = self.find_node(pod)
        assert self.process is not None
        if node is None:
            self._unschedulable[key] = None
            if (pod.get("spec") or {}).get("priority") is not None:
                self._maybe_preempt(key, pod)
            error = next((r for r in reasons if r.startswith(_PLUGIN_ERROR)), None)
            if error is not None:  # a plugin's error, not a FitError: kube's SchedulerError
                self.process.spawn(self._mark_unschedulable(pod, error, "SchedulerError"))
                return
            total = len(self.nodes)
            parts = sorted(f"{n} {r}" for r, n in reasons.items())
            message = f"0/{total} nodes are available: {', '.join(parts)}." if parts else \
                f"0/{total} nodes are available."
            self.process.spawn(self._mark_unschedulable(pod, message))
            return
        cpu, mem = pod_requests(pod)
        self._charge(key, node.name, cpu, mem, +1)
        self._assumed[key] = (node.name, cpu, mem)
        self._ext_charge(key, node.name, pod_extended_requests(pod))
        self.process.spawn(self._bind(key, pod, node.name))

    @staticmethod
    def _simple_score(info: NodeInfo, cpu: int, mem: int) -> int:
        """The score of a Node for a Pod without selectors or tolerations; -1 if it can't run
        it."""
        free_cpu = info.cpu - info.used_cpu - cpu
        free_mem = info.memory - info.used_memory - mem
        if free_cpu < 0 or free_mem < 0 or info.used_pods >= info.pods or info.taints or \
                info.unschedulable:
            return -1
        return ((free_cpu * 100 // info.cpu if info.cpu > 0 else 0)
                + (free_mem * 100 // info.memory if info.memory > 0 else 0)) // 2

    def _refresh_scores(self, info: NodeInfo) -> None:
        if not self._scores:
            return
        index = self._node_list.index(info) if self._node_list[info.index_hint:
                                                                info.index_hint + 1] != [info] \
            else info.index_hint
        info.index_hint = index
        for (cpu, mem), scores in self._scores.items():
            scores[index] = self._simple_score(info, cpu, mem)

    def _fast_pick(self, cpu: int, mem: int, want: int) -> NodeInfo | None:
        """`find_node` for a Pod without selectors when every Node of the window fits: the
        same window, the same best score and the same random pick among ties, without
        walking the Nodes one by one."""
        scores = self._scores.get((cpu, mem))
        nodes = self._node_list
        if scores is None:
            if len(self._scores) >= 8:
                self._scores.clear()
            for i, info in enumerate(nodes):
                info.index_hint = i
            scores = self._scores[(cpu, mem)] = [self._simple_score(n, cpu, mem) for n in nodes]
        total = len(nodes)
        start = self._next_start % total
        end = start + want
        window = scores[start:end] if end <= total else scores[start:] + scores[:end - total]
        if -1 in window:
            return None
        top = max(window)
        ties = [i for i, s in enumerate(window) if s == top]
        pick = ties[self.rng.randrange(len(ties))] if len(ties) > 1 else ties[0]
        self._next_start = end % total
        return nodes[(start + pick) % total]

    def find_node(self, pod: Obj) -> tuple[NodeInfo | None, dict[str, int]]:
        spec = pod.get("spec") or {}
        cpu, mem = pod_requests(pod)
        selector: dict[str, str] = spec.get("nodeSelector") or {}
        tolerations: list[Obj] = spec.get("tolerations") or []
        extended = pod_extended_requests(pod)
        terms = required_node_affinity(pod)
        reasons: dict[str, int] = {}
        volume_reason = self._volume_problem(pod)
        order = self._node_order
        total = len(order)
        if total == 0:
            return None, reasons
        if volume_reason is not None:
            return None, {volume_reason: total}
        want = num_feasible_nodes_to_find(
            total, self.cluster.config.scheduler_percentage_of_nodes_to_score)
        wanted_node = spec.get("nodeName") or self._selected_node(pod)
        simple = not selector and not wanted_node and not extended and not terms
        if simple and want <= total:
            fast = self._fast_pick(cpu, mem, want)
            if fast is not None:
                return fast, reasons
        best: list[NodeInfo] = []
        best_score = -1
        found = 0
        start = self._next_start % total
        checked = 0
        for info in self._node_list[start:] + self._node_list[:start]:
            checked += 1
            # the common case inline (no selector, no taints, resources fit), score included:
            # this loop runs for hundreds of Nodes per Pod
            free_cpu = info.cpu - info.used_cpu - cpu
            free_mem = info.memory - info.used_memory - mem
            if simple and free_cpu >= 0 and free_mem >= 0 and info.used_pods < info.pods \
                    and not info.taints and not info.unschedulable:
                score = ((free_cpu * 100 // info.cpu if info.cpu > 0 else 0)
                         + (free_mem * 100 // info.memory if info.memory > 0 else 0)) // 2
            else:
                reason = self._filter(info, cpu, mem, selector, tolerations, wanted_node,
                                      extended, terms)
                if reason is not None:
                    reasons[reason] = reasons.get(reason, 0) + 1
                    continue
                score = self._score(info, cpu, mem)
            found += 1
            if score > best_score:
                best, best_score = [info], score
            elif score == best_score:
                best.append(info)
            if found >= want:
                break
        self._next_start = (start + checked) % total
        if not best:
            return None, reasons
        # equal scores: one picked at random, as ``selectHost`` samples among the best
        return best[self.rng.randrange(len(best))] if len(best) > 1 else best[0], reasons

    @staticmethod
    def _filter(info: NodeInfo, cpu: int, mem: int, selector: dict[str, str],
                tolerations: list[Obj], wanted: str | None,
                extended: dict[str, int] | None = None,
                terms: list[Obj] | None = None) -> str | None:
        if wanted and wanted != info.name:
            return "node(s) didn't match the requested node name"
        if info.unschedulable:
            return "node(s) were unschedulable"
        for key, value in selector.items():
            if info.labels.get(key) != value:
                return "node(s) didn't match Pod's node affinity/selector"
        if terms and not node_matches_terms(terms, info.name, info.labels):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in info.taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(
                    tolerations, taint):
                return (f"node(s) had untolerated taint {{{taint.get('key')}: "
                        f"{taint.get('value', '')}}}")
        if info.used_pods + 1 > info.pods:
            return "Too many pods"
        if cpu and info.used_cpu + cpu > info.cpu:
            return "Insufficient cpu"
        if mem and info.used_memory + mem > info.memory:
            return "Insufficient memory"
        for name, n in (extended or {}).items():
            if info.used_extended.get(name, 0) + n > info.extended.get(name, 0):
                return f"Insufficient {name}"
        return None

    @staticmethod
    def _score(info: NodeInfo, cpu: int, mem: int) -> int:
        """LeastAllocated: the free share (0-100) after placing the Pod, CPU and memory
        averaged, in whole points as the real plugin's integer score."""
        cpu_free = (info.cpu - info.used_cpu - cpu) * 100 // info.cpu if info.cpu > 0 else 0
        mem_free = (info.memory - info.used_memory - mem) * 100 // info.memory \
            if info.memory > 0 else 0
        return (max(cpu_free, 0) + max(mem_free, 0)) // 2

    def _volume_problem(self, pod: Obj) -> str | None:
        assert self.pvcs is not None
        ns = pod["metadata"].get("namespace")
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.pvcs.get(claim, ns)
            if pvc is None:
                return f'persistentvolumeclaim "{claim}" not found'
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim}" is being deleted'
            if (pvc.get("status") or {}).get("phase") != "Bound":
                name = explicit_class(pvc)
                if name is not None and self.classes is not None:
                    storage_class = self.classes.get(name)
                    if storage_class is None:  # GetBindingMode's error fails PreFilter
                        return (f'{_PLUGIN_ERROR}"VolumeBinding": storageclass.storage.k8s.io '
                                f'"{name}" not found')
                    if delayed_binding(storage_class):
                        continue  # bound for the Node this Pod gets (`_bind_volumes`)
                return "pod has unbound immediate PersistentVolumeClaims"
        return None

    async def _mark_unschedulable(self, pod: Obj, message: str,
                                  reason: str = "Unschedulable") -> None:
        assert self.client is not None and self.process is not None
        meta = pod["metadata"]
        conditions = list((pod.get("status") or {}).get("conditions") or [])
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current is not None and current.get("status") == "False" and \
                current.get("message") == message:
            return
        conditions = set_condition(conditions, {
            "type": "PodScheduled", "status": "False", "reason": reason,
            "message": message, "lastTransitionTime": rfc3339(clock.now())})
        self.process.log("pod_unschedulable", pod=f"{meta.get('namespace')}/{meta['name']}",
                         message=message)
        if self.events is not None:
            self.events.event({"apiVersion": "v1", "kind": "Pod", **pod}, "Warning",
                              "FailedScheduling", message)
        try:
            await self.client.patch("Pod", meta["name"], {"status": {"conditions": conditions}},
                                    meta.get("namespace"), subresource="status")
        except (ApiError, NetworkError):
            pass

    async def _bind(self, key: str, pod: Obj, node: str) -> None:
        """The binding: ``spec.nodeName`` then ``PodScheduled=True`` (one request in Kubernetes;
        two here, in that order, so a kubelet never sees a Pod it can't run)."""
        assert self.client is not None and self.process is not None
        meta = pod["metadata"]
        ns = meta.get("namespace")
        try:
            delayed = self._delayed_claims(pod)
            if delayed and not await self._bind_volumes(pod, delayed, node):
                self._forget(key)
                self._unschedulable[key] = None
                return
            bound = await self.client.patch(
                "Pod", meta["name"], {"metadata": {"resourceVersion": meta["resourceVersion"]},
                                      "spec": {"nodeName": node}}, ns)
            conditions = set_condition(list((bound.get("status") or {}).get("conditions") or []),
                                       {"type": "PodScheduled", "status": "True",
                                        "lastTransitionTime": rfc3339(clock.now())})
            await self.client.patch("Pod", meta["name"], {"status": {"conditions": conditions}},
                                    ns, subresource="status")
            if self.cluster.config.standard_cluster and self.events is not None:
                self.events.event({"apiVersion": "v1", "kind": "Pod", **bound}, "Normal",
                                  "Scheduled", f"Successfully assigned {ns}/{meta['name']} to "
                                               f"{node}")
        except (ApiError, NetworkError) as err:
            if isinstance(err, ApiError) and is_not_found(err):
                self._forget(key)
                return
            self._forget(key)
            if not (isinstance(err, ApiError) and is_conflict(err)):
                self.process.log("bind_failed", pod=key, node=node, error=str(err))
            await self.process.sleep(1.0)
            assert self.pods is not None
            ns_, _, name = key.partition("/")
            if self.pods.get(name, ns_) is not None:
                self._active[key] = None
                self._wake.set()

    async def _bind_volumes(self, pod: Obj, claims: list[Obj], node: str) -> bool:
        """The VolumeBinding plugin's PreBind for WaitForFirstConsumer claims: write
        ``selected-node`` on each, then wait (at most ``BIND_TIMEOUT``) until the PV controller
        has bound them all; False when they were not bound in time."""
        assert self.client is not None and self.pvcs is not None and self.process is not None
        for pvc in claims:
            meta = pvc["metadata"]
            if (meta.get("annotations") or {}).get(SELECTED_NODE) != node:
                await self.client.patch("PersistentVolumeClaim", meta["name"], {
                    "metadata": {"annotations": {SELECTED_NODE: node}}}, meta.get("namespace"))
        ns = pod["metadata"].get("namespace")
        deadline = clock.now() + BIND_TIMEOUT
        names = [c["metadata"]["name"] for c in claims]
        while True:
            current = [self.pvcs.get(n, ns) for n in names]
            if all(c is not None and (c.get("status") or {}).get("phase") == "Bound"
                   for c in current):
                return True
            left = deadline - clock.now()
            if left <= 0:
                return False
            self._claims_changed.clear()
            try:
                await asyncio.wait_for(self._claims_changed.wait(), left)
            except TimeoutError:
                return False

    # -- preemption ------------------------------------------------------------------------------

    def _bound_on(self, node: str) -> list[tuple[int, str, Obj]]:
        """(priority, key, Pod) of the Pods bound to ``node`` that are not being deleted."""
        assert self.pods is not None
        out = []
        for key, (where, _cpu, _mem) in self._bound_requests.items():
            if where != node:
                continue
            ns, _, name = key.partition("/")
            pod = self.pods.get(name, ns)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            out.append((int((pod.get("spec") or {}).get("priority") or 0), key, pod))
        return out

    def _eligible(self, pod: Obj, prio: int) -> bool:
        """``PodEligibleToPreemptOthers``: not with ``preemptionPolicy: Never``, nor while
        lower-priority Pods on its nominated Node are still terminating."""
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return False
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated:
            assert self.pods is not None
            for key, (where, _cpu, _mem) in self._bound_requests.items():
                if where != nominated:
                    continue
                ns, _, name = key.partition("/")
                other = self.pods.get(name, ns)
                if other is not None and other["metadata"].get("deletionTimestamp") and \
                        int((other.get("spec") or {}).get("priority") or 0) < prio:
                    return False
        return True

    def _victims_on(self, info: NodeInfo, pod: Obj, prio: int
                    ) -> list[tuple[int, str, Obj]] | None:
        """``selectVictimsOnNode``: with every lower-priority Pod removed the Pod must fit;
        then as many of them as still leave room are reprieved, highest priority first. None
        when the Node cannot take the Pod at all."""
        spec = pod.get("spec") or {}
        cpu, mem = pod_requests(pod)
        extended = pod_extended_requests(pod)
        lower = sorted((v for v in self._bound_on(info.name) if v[0] < prio),
                       key=lambda v: (-v[0], v[1]))
        if not lower:
            return None
        trial = attrs.evolve(info, used_extended=dict(info.used_extended))

        def take(victim: tuple[int, str, Obj], sign: int) -> None:
            _n, vcpu, vmem = self._bound_requests[victim[1]]
            trial.used_cpu += sign * vcpu
            trial.used_memory += sign * vmem
            trial.used_pods += sign
            for k, n in self._ext.get(victim[1], ("", {}))[1].items():
                trial.used_extended[k] = trial.used_extended.get(k, 0) + sign * n

        def fits() -> bool:
            return self._filter(trial, cpu, mem, spec.get("nodeSelector") or {},
                                spec.get("tolerations") or [], spec.get("nodeName"),
                                extended, required_node_affinity(pod)) is None

        for victim in lower:
            take(victim, -1)
        if not fits():
            return None
        victims = []
        for victim in lower:  # reprieve the highest priorities first
            take(victim, +1)
            if not fits():
                take(victim, -1)
                victims.append(victim)
        return victims

    def _maybe_preempt(self, key: str, pod: Obj) -> None:
        """``DefaultPreemption`` (PostFilter): find the Node where evicting the fewest and
        least important lower-priority Pods lets ``pod`` fit, nominate it, and delete those
        Pods (the Pod is scheduled again once they are gone)."""
        prio = int((pod.get("spec") or {}).get("priority") or 0)
        if not self._eligible(pod, prio):
            return
        best: tuple[tuple[int, int, int, int], NodeInfo, list[tuple[int, str, Obj]]] | None = None
        for index, info in enumerate(self._node_list):
            victims = self._victims_on(info, pod, prio)
            if not victims:
                continue
            rank = (max(v[0] for v in victims), sum(v[0] for v in victims), len(victims), index)
            if best is None or rank < best[0]:
                best = (rank, info, victims)
        if best is None:
            return
        assert self.process is not None
        self.process.log("preempt", pod=key, node=best[1].name,
                         victims=[v[1] for v in best[2]])
        self.process.spawn(self._preempt(pod, best[1].name, [v[2] for v in best[2]]))

    async def _preempt(self, pod: Obj, node: str, victims: list[Obj]) -> None:
        """``prepareCandidate``: each victim gets ``DisruptionTarget`` and a ``Preempted``
        Event and is deleted; the preemptor's ``status.nominatedNodeName`` is the Node."""
        assert self.client is not None
        meta = pod["metadata"]
        for victim in victims:
            vmeta = victim["metadata"]
            conditions = set_condition(
                list((victim.get("status") or {}).get("conditions") or []),
                {"type": "DisruptionTarget", "status": "True",
                 "reason": "PreemptionByScheduler",
                 "message": f"{SCHEDULER_NAME}: preempting to accommodate a higher priority pod",
                 "lastTransitionTime": rfc3339(clock.now())})
            if self.events is not None:
                self.events.event({"apiVersion": "v1", "kind": "Pod", **victim}, "Normal",
                                  "Preempted", f"Preempted by pod {meta.get('uid', '')} on "
                                               f"node {node}")
            try:
                await self.client.patch("Pod", vmeta["name"],
                                        {"status": {"conditions": conditions}},
                                        vmeta.get("namespace"), subresource="status")
                await self.client.delete("Pod", vmeta["name"], vmeta.get("namespace"))
            except (ApiError, NetworkError):
                pass
        try:
            await self.client.patch("Pod", meta["name"], {"status": {"nominatedNodeName": node}},
                                    meta.get("namespace"), subresource="status")
        except (ApiError, NetworkError):
            pass

    def _forget(self, key: str) -> None:
        self._ext_release(key)
        assumed = self._assumed.pop(key, None)
        if assumed is not None:
            self._charge(key, *assumed, -1)
