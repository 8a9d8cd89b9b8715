"""The Endpoints controller: core/v1 Endpoints objects for Services with a selector.

Kubernetes keeps both: the EndpointSlice controller (`emu.kube.endpointslices`) and the older
``pkg/controller/endpoint``, which writes one ``Endpoints`` object per Service, named after it,
with ``subsets`` of ready ``addresses`` and ``notReadyAddresses`` (IP, ``nodeName``,
``targetRef``) and the ports. KubeRay up to v1.5 reads them (its RayService controller counts
the Serve Service's ready addresses); later releases read EndpointSlices.

Here the Endpoints object mirrors the Service's EndpointSlices (those the slice controller
manages), so both views change together, one propagation delay after the Pods. It is not among
the built-ins `install` starts by default (``KubeConfig.controllers`` names it ``endpoints``):
existing worlds, and their scenario digests, stay as they were; ``emu serve --kuberay-binary``
turns it on for the real operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.process import Process
from .common import KeyQueue, Obj
from .endpointslices import MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL

if TYPE_CHECKING:
    from .cluster import KubeCluster


def endpoints_subsets(slices: list[Obj]) -> list[Obj]:
    """The ``subsets`` the Service's slices amount to: one per distinct port list, addresses
    sorted by IP (the controller's order), ready and not ready apart."""
    by_ports: dict[str, Obj] = {}
    for sl in sorted(slices, key=lambda s: s["metadata"]["name"]):
        ports = [{k: p[k] for k in ("name", "port", "protocol") if p.get(k) not in (None, "")}
                 for p in sl.get("ports") or []]
        key = repr(ports)
        subset = by_ports.setdefault(key, {"addresses": [], "notReadyAddresses": [],
                                           "ports": ports})
        for ep in sl.get("endpoints") or []:
            ready = bool((ep.get("conditions") or {}).get("ready"))
            for ip in ep.get("addresses") or []:
                address: Obj = {"ip": ip}
                if ep.get("nodeName"):
                    address["nodeName"] = ep["nodeName"]
                if ep.get("targetRef"):
                    address["targetRef"] = dict(ep["targetRef"])
                subset["addresses" if ready else "notReadyAddresses"].append(address)
    out = []
    for subset in by_ports.values():
        for field in ("addresses", "notReadyAddresses"):
            subset[field].sort(key=lambda a: a["ip"])
            if not subset[field]:
                del subset[field]
        if "addresses" in subset or "notReadyAddresses" in subset:
            out.append(subset)
    return out


class EndpointsController:
    """One process: Services and EndpointSlices in, Endpoints out."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.client: Client | None = None
        self.services: Informer | None = None
        self.slices: Informer | None = None
        self.queue: KeyQueue | None = None

    async def main(self, process: Process) -> None:
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "endpoints")
        self.services = Informer(self.client, "Service")
        self.slices = Informer(self.client, "EndpointSlice",
                               label_selector={MANAGED_BY_LABEL: MANAGED_BY})
        self.services.add_event_handler(FuncHandler(
            on_add=self._changed, on_update=lambda _o, n: self._changed(n),
            on_delete=self._changed))
        self.slices.add_event_handler(FuncHandler(
            on_add=self._slice_changed, on_update=lambda _o, n: self._slice_changed(n),
            on_delete=self._slice_changed))
        for inf in (self.services, self.slices):
            process.spawn(inf.run())
        for inf in (self.services, self.slices):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _changed(self, svc: Obj) -> None:
        assert self.queue is not None
        meta = svc["metadata"]
        self.queue.add(f"{meta.get('namespace', 'default')}/{meta['name']}")

    def _slice_changed(self, sl: Obj) -> None:
        assert self.queue is not None
        meta = sl["metadata"]
        name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            self.queue.add(f"{meta.get('namespace', 'default')}/{name}")

    async def sync(self, key: str) -> None:
        """``syncService``: write the Service's Endpoints as its slices say, or delete it when
        the Service is gone or has no selector."""
        assert self.client is not None and self.services is not None
        assert self.slices is not None
        ns, _, name = key.partition("/")
        svc = self.services.get(name, ns)
        current: Any = None
        try:
            current = await self.client.get("Endpoints", name, namespace=ns)
        except ApiError as err:
            if not is_not_found(err):
                raise
        if svc is None or not (svc.get("spec") or {}).get("selector"):
            if current is not None:
                try:
                    await self.client.delete("Endpoints", name, namespace=ns)
                except ApiError as err:
                    if not is_not_found(err):
                        raise
            return
        subsets = endpoints_subsets(self.slices.peek_list(ns, {SERVICE_NAME_LABEL: name}))
        labels = dict(svc["metadata"].get("labels") or {})
        if current is None:
            await self.client.create({"apiVersion": "v1", "kind": "Endpoints",
                                      "metadata": {"name": name, "namespace": ns,
                                                   "labels": labels},
                                      "subsets": subsets})
            return
        if (current.get("subsets") or []) == subsets and \
                (current["metadata"].get("labels") or {}) == labels:
            return
        current["subsets"] = subsets
        current["metadata"]["labels"] = labels
        await self.client.update(current)
