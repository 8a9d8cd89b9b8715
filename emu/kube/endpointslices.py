"""The EndpointSlice controller: which Pods back each Service, and whether they are ready.

Port of the parts of ``pkg/controller/endpointslice`` (``syncService``, ``reconcile``) that
controllers and traffic observe. For each Service with a selector, the Pods it selects (with an
IP, not Succeeded/Failed) are listed in EndpointSlices labelled
``kubernetes.io/service-name=<service>``, owned by the Service, one slice per distinct port
mapping. Each endpoint carries ``conditions.ready`` (PodReady and not terminating, or always with
``publishNotReadyAddresses``), ``serving`` and ``terminating``, ``nodeName`` and a ``targetRef``.
Named ``targetPort`` values are resolved per Pod from its container ports.

Changes reach the slices after `KubeConfig.endpoint_propagation_delay` (the controller's batching
and the watch hops to kube-proxy in one number; `DelayEndpoints` raises it for a while): at each
change the controller takes what the slices should say, and writes exactly that a delay later, so
a slice always shows its Service's Pods as they were one delay ago.

Not emulated: the 100-endpoint limit per slice, topology hints, dual stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, is_not_found
from ..apiserver.selectors import LabelSelector, selector_from_dict
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import KeyQueue, Obj, condition_true, owner_reference, rfc3339

if TYPE_CHECKING:
    from .cluster import KubeCluster

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"

#: ``(namespace, label key, label value)``: one equality term of a Service's selector.
_Term = tuple[str, str, str]


def find_port(pod: Obj, target: Any, protocol: str) -> int | None:
    """``podutil.FindPort``: a number as is, a name looked up in the Pod's container ports."""
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == target and p.get("protocol", "TCP") == protocol:
                return int(p["containerPort"])
    return None


def endpoint_ports(service: Obj, pod: Obj) -> list[Obj]:
    out = []
    for sp in (service.get("spec") or {}).get("ports") or []:
        protocol = sp.get("protocol", "TCP")
        port = find_port(pod, sp.get("targetPort", sp.get("port")), protocol)
        if port is None:
            continue
        out.append({"name": sp.get("name", ""), "port": port, "protocol": protocol})
    return out


def pod_endpoint(service: Obj, pod: Obj) -> Obj:
    meta = pod["metadata"]
    terminating = bool(meta.get("deletionTimestamp"))
    ready_cond = condition_true(pod, "Ready")
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    ready = publish or (ready_cond and not terminating)
    ep: Obj = {"addresses": [pod["status"]["podIP"]],
               "conditions": {"ready": ready, "serving": publish or ready_cond,
                              "terminating": terminating},
               "targetRef": {"kind": "Pod", "namespace": meta.get("namespace"),
                             "name": meta["name"], "uid": meta["uid"]}}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        ep["nodeName"] = node
    return ep


class EndpointSliceController:
    """The controller process: Services and Pods in, EndpointSlices out."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.services: Informer | None = None
        self.pods: Informer | None = None
        self.slices: Informer | None = None
        self.queue: KeyQueue | None = None
        self._forget()

    def _forget(self) -> None:
        """The controller's memory, empty (at construction, and when its process starts again:
        a restart must not replay snapshots or trackers from before the crash)."""
        self._selectors: dict[str, tuple[str, LabelSelector]] = {}
        #: Each selector's position in `_selectors` (its insertion order), and the selectors by
        #: one of their ``key=value`` terms, so a Pod event looks up the Services that can select
        #: it instead of testing every selector (which made each Pod event O(Services)). The
        #: term chosen is the one fewest selectors share (``ray.io/cluster=x``, not
        #: ``app.kubernetes.io/created-by=kuberay-operator``), counted in `_term_uses`.
        self._selector_seq: dict[str, int] = {}
        self._next_seq = 0
        self._by_term: dict[_Term, dict[str, None]] = {}
        self._term_of: dict[str, _Term] = {}
        self._term_uses: dict[_Term, int] = {}
        #: What this controller last wrote per Service (slice name → resourceVersion): a sync
        #: waits until the cache has caught up (the real controller's ``endpointSliceTracker``).
        self._written: dict[str, dict[str, tuple[int, float]]] = {}
        #: The snapshot being written (kept until a write succeeds, for the retry).
        self._target: dict[str, tuple[Obj | None, list[tuple[list[Obj], list[Obj]]]]] = {}
        #: Per Service: (when to write, (service, desired slices)) in event order.
        self._snapshots: dict[str, list[tuple[float, tuple[Obj | None,
                                                           list[tuple[list[Obj], list[Obj]]]]]]] = {}

    async def main(self, process: Process) -> None:
        self.process = process
        self._forget()
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "endpointslice")
        self.services = Informer(self.client, "Service")
        self.pods = Informer(self.client, "Pod")
        self.slices = Informer(self.client, "EndpointSlice",
                               label_selector={MANAGED_BY_LABEL: MANAGED_BY})
        self.services.add_event_handler(FuncHandler(
            on_add=self._service_changed, on_update=lambda _o, n: self._service_changed(n),
            on_delete=self._service_deleted))
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda o, n: self._pod_changed(n, o),
            on_delete=self._pod_changed))
        for inf in (self.services, self.pods, self.slices):
            process.spawn(inf.run())
        for inf in (self.services, self.pods, self.slices):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    # -- events ----------------------------------------------------------------------------------

    def _enqueue(self, key: str) -> None:
        """Take what the slices should say now, to be written after the propagation delay."""
        assert self.queue is not None and self.services is not None
        delay = self.cluster.endpoint_propagation_delay
        ns, _, name = key.partition("/")
        svc = self.services.get(name, ns)
        snapshot = (svc, self.desired(svc) if svc is not None else [])
        self._snapshots.setdefault(key, []).append((clock.now() + delay, snapshot))
        self.queue.add_after(key, delay)

    def _service_changed(self, svc: Obj) -> None:
        meta = svc["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        selector = (svc.get("spec") or {}).get("selector")
        self._forget_selector(key)
        if selector:
            if key not in self._selector_seq:
                self._selector_seq[key] = self._next_seq
                self._next_seq += 1
            ns = meta["namespace"]
            parsed = selector_from_dict({"matchLabels": selector})
            self._selectors[key] = (ns, parsed)
            # a non-string value never equals a (validated, string) Pod label: not indexed
            terms = [(ns, r.key, r.values[0]) for r in parsed.requirements
                     if isinstance(r.values[0], str)]
            if len(terms) == len(parsed.requirements):
                uses = self._term_uses
                for term in terms:
                    uses[term] = uses.get(term, 0) + 1
                best = min(terms, key=uses.__getitem__)  # first of the rarest, in key order
                self._term_of[key] = best
                self._by_term.setdefault(best, {})[key] = None
        else:
            self._selectors.pop(key, None)
            self._selector_seq.pop(key, None)
        self._enqueue(key)

    def _service_deleted(self, svc: Obj) -> None:
        meta = svc["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._forget_selector(key)
        self._selectors.pop(key, None)
        self._selector_seq.pop(key, None)

    def _forget_selector(self, key: str) -> None:
        """Drop ``key`` from the term index and counts (its `_selectors` entry stays)."""
        term = self._term_of.pop(key, None)
        if term is None:
            return
        keys = self._by_term[term]
        del keys[key]
        if not keys:
            del self._by_term[term]
        sns, selector = self._selectors[key]
        uses = self._term_uses
        for r in selector.requirements:
            t = (sns, r.key, r.values[0])
            left = uses[t] - 1
            if left:
                uses[t] = left
            else:
                del uses[t]

    def _pod_changed(self, pod: Obj, old: Obj | None = None) -> None:
        ns = pod["metadata"].get("namespace")
        labels = pod["metadata"].get("labels") or {}
        old_labels = (old or {}).get("metadata", {}).get("labels") or {}
        # Every Service that selects the Pod (now or before) is indexed under one of its labels.
        candidates: dict[str, None] = {}
        by_term = self._by_term
        for source in (labels, old_labels) if old else (labels,):
            for label, value in source.items():
                keys = by_term.get((ns, label, value))
                if keys:
                    candidates.update(keys)
        seq = self._selector_seq
        for key in sorted(candidates, key=seq.__getitem__):  # `_selectors` order, as a scan
            _sns, selector = self._selectors[key]
            if selector.matches(labels) or (old and selector.matches(old_labels)):
                self._enqueue(key)

    # -- sync ------------------------------------------------------------------------------------

    def desired(self, svc: Obj) -> list[tuple[list[Obj], list[Obj]]]:
        """(ports, endpoints) per distinct port mapping, in first-seen order."""
        assert self.pods is not None
        meta = svc["metadata"]
        selector = (svc.get("spec") or {}).get("selector") or {}
        groups: dict[str, tuple[list[Obj], list[Obj]]] = {}
        for pod in self.pods.peek_list(meta["namespace"], selector):
            status = pod.get("status") or {}
            if not status.get("podIP") or status.get("phase") in ("Succeeded", "Failed"):
                continue
            ports = endpoint_ports(svc, pod)
            gkey = repr(ports)
            if gkey not in groups:
                groups[gkey] = (ports, [])
            groups[gkey][1].append(pod_endpoint(svc, pod))
        return list(groups.values())

    async def sync(self, key: str) -> None:
        """``syncService``: make the Service's slices list what its selector selects now."""
        assert self.services is not None and self.slices is not None
        assert self.client is not None
        ns, _, _name = key.partition("/")
        if self._stale(key, ns):
            assert self.queue is not None
            self.queue.add_after(key, 0.01)
            return
        pending = self._snapshots.get(key) or []
        due = [snap for when, snap in pending if when <= clock.now() + 1e-9]
        later = [(when, snap) for when, snap in pending if when > clock.now() + 1e-9]
        if later:
            self._snapshots[key] = later
            assert self.queue is not None
            self.queue.add_after(key, later[0][0] - clock.now())
        else:
            self._snapshots.pop(key, None)
        if due:
            self._target[key] = due[-1]
        target = self._target.get(key)
        if target is None:
            return
        svc, desired = target
        if svc is None or svc["metadata"].get("deletionTimestamp") or \
                not (svc.get("spec") or {}).get("selector"):
            del self._target[key]
            return  # the garbage collector removes the slices it owns
        await self.write_slices(key, svc, desired)
        del self._target[key]

    async def write_slices(self, key: str, svc: Obj,
                           desired: list[tuple[list[Obj], list[Obj]]]) -> None:
        assert self.slices is not None and self.client is not None
        ns, _, name = key.partition("/")
        written: dict[str, tuple[int, float]] = {}
        self._written[key] = written
        existing = self.slices.list(ns, {SERVICE_NAME_LABEL: name})
        unused = {s["metadata"]["name"]: s for s in existing}
        now = rfc3339(clock.now())
        labels = {**(svc["metadata"].get("labels") or {}), SERVICE_NAME_LABEL: name,
                  MANAGED_BY_LABEL: MANAGED_BY}
        for ports, endpoints in desired:
            match = next((s for s in unused.values() if (s.get("ports") or []) == ports), None)
            if match is not None:
                del unused[match["metadata"]["name"]]
                if match.get("endpoints") == endpoints and \
                        match["metadata"].get("labels") == labels:
                    continue
                match["endpoints"] = endpoints
                match["metadata"]["labels"] = labels
                match["metadata"].setdefault("annotations", {})[
                    "endpoints.kubernetes.io/last-change-trigger-time"] = now
                self._note(written, await self.client.update(match))
                continue
            self._note(written, await self.client.create({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{name}-", "namespace": ns, "labels": labels,
                             "annotations": {
                                 "endpoints.kubernetes.io/last-change-trigger-time": now},
                             "ownerReferences": [owner_reference(svc)]},
                "addressType": "IPv4", "endpoints": endpoints, "ports": ports}))
        if not desired and not existing:
            # a Service with nothing selected still gets one empty slice
            self._note(written, await self.client.create({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{name}-", "namespace": ns, "labels": labels,
                             "ownerReferences": [owner_reference(svc)]},
                "addressType": "IPv4", "endpoints": [], "ports": []}))
            return
        keep_one_empty = not desired
        for slice_name in sorted(unused):
            stale = unused[slice_name]
            if keep_one_empty:
                keep_one_empty = False
                if stale.get("endpoints"):
                    stale["endpoints"] = []
                    self._note(written, await self.client.update(stale))
                continue
            try:
                await self.client.delete("EndpointSlice", slice_name, ns)
            except ApiError as err:
                if not is_not_found(err):
                    raise

    @staticmethod
    def _note(written: dict[str, tuple[int, float]], obj: Obj) -> None:
        written[obj["metadata"]["name"]] = (int(obj["metadata"]["resourceVersion"]), clock.now())

    def _stale(self, key: str, ns: str) -> bool:
        """Whether the cache still lacks a slice this controller wrote (for at most 5 s: a
        slice someone else deleted meanwhile never shows up)."""
        assert self.slices is not None
        for slice_name, (rv, when) in (self._written.get(key) or {}).items():
            seen = self.slices.get(slice_name, ns)
            if (seen is None or int(seen["metadata"]["resourceVersion"]) < rv) and \
                    clock.now() - when < 5.0:
                return True
        return False
