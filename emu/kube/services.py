"""kube-proxy: a Service's addresses on the network, each call sent to one ready endpoint.

For every Service port the proxy listens at ``<svc>.<ns>.svc.cluster.local:<port>`` (also
``<svc>.<ns>.svc:<port>``, ``<svc>.<ns>:<port>`` and ``<clusterIP>:<port>``; a container's short
``<svc>:<port>`` is resolved by `ContainerContext.resolve`). Each call is forwarded to one endpoint
that is ready in the Service's EndpointSlices *as this proxy's cache holds them now*, chosen with
the seeded random stream (iptables' random choice), on the endpoint's port for that Service port.
With no ready endpoint the call is refused (``ConnectionRefused``, as kube-proxy's REJECT rule
answers). The forwarded call keeps the original caller as its source, so partitions and outages
between the caller and the Pod still apply.

A headless Service (``clusterIP: None``) also gets DNS names (``network.hostnames``) that resolve
to its Pods' IPs, so a container reaches any port of theirs by the Service's name, declared or
not, as a real headless Service's A records allow.

The proxy is one process for the whole cluster (the real one runs per Node, all with the same
rules); crashing it takes every Service address down until it is restarted.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.network import CallInfo, ConnectionRefused, Handler
from ..kernel.process import Process
from .common import Obj
from .endpointslices import SERVICE_NAME_LABEL

if TYPE_CHECKING:
    from .cluster import KubeCluster


def service_addresses(svc: Obj, port: int) -> list[str]:
    """Every address a Service port answers at (the first is its canonical DNS name)."""
    meta = svc["metadata"]
    name, ns = meta["name"], meta.get("namespace", "default")
    out = [f"{name}.{ns}.svc.cluster.local:{port}", f"{name}.{ns}.svc:{port}",
           f"{name}.{ns}:{port}"]
    ip = (svc.get("spec") or {}).get("clusterIP")
    if ip and ip != "None":
        out.append(f"{ip}:{port}")
    return out


class KubeProxy:
    """The proxy process: Services and EndpointSlices in, network endpoints out."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.rng = cluster.world.rng.fork("kube-proxy")
        self.process: Process | None = None
        self.slices: Informer | None = None
        self._registered: dict[str, list[str]] = {}
        #: DNS names of headless Services put into ``network.hostnames``, per Service key.
        self._hostnames: dict[str, list[str]] = {}
        #: Calls forwarded / refused for lack of a ready endpoint, per Service key.
        self.forwarded: dict[str, int] = {}
        self.refused: dict[str, int] = {}

    async def main(self, process: Process) -> None:
        self.process = process
        client = Client(self.cluster.world.network, process=process)
        services = Informer(client, "Service")
        self.slices = Informer(client, "EndpointSlice")
        services.add_event_handler(FuncHandler(
            on_add=self._service_changed, on_update=lambda _o, n: self._service_changed(n),
            on_delete=self._service_deleted))
        process.spawn(self.slices.run())
        await services.run()

    def _key(self, svc: Obj) -> str:
        return f"{svc['metadata'].get('namespace')}/{svc['metadata']['name']}"

    def _service_changed(self, svc: Obj) -> None:
        key = self._key(svc)
        spec = svc.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return
        wanted: dict[str, Handler] = {}
        for sp in spec.get("ports") or []:
            handler = self._handler(key, str(sp.get("name", "")))
            for addr in service_addresses(svc, int(sp["port"])):
                wanted[addr] = handler
        network = self.cluster.world.network
        headless = spec.get("clusterIP") == "None"
        for host in self._hostnames.pop(key, []):
            network.hostnames.pop(host, None)
        if headless:  # its DNS name is its Pods' IPs: every port of theirs answers
            names = [a.rsplit(":", 1)[0] for a in service_addresses(svc, 0)]
            publish = bool(spec.get("publishNotReadyAddresses"))
            lookup = functools.partial(self.pod_ips, key, publish)
            for host in names:
                network.hostnames[host] = lookup
            self._hostnames[key] = names
        for addr in self._registered.get(key, []):
            if addr not in wanted:
                network.unregister(addr)
        for addr, handler in wanted.items():
            network.register(addr, handler, process=self.process)
        self._registered[key] = list(wanted)

    def _service_deleted(self, svc: Obj) -> None:
        for addr in self._registered.pop(self._key(svc), []):
            self.cluster.world.network.unregister(addr)
        for host in self._hostnames.pop(self._key(svc), []):
            self.cluster.world.network.hostnames.pop(host, None)

    def pod_ips(self, key: str, not_ready_too: bool) -> list[str]:
        """The IPs a headless Service's DNS name answers with (its EndpointSlices' addresses,
        ready ones only unless ``publishNotReadyAddresses``), sorted."""
        assert self.slices is not None
        ns, _, name = key.partition("/")
        out: set[str] = set()
        for sl in self.slices.peek_list(ns, {SERVICE_NAME_LABEL: name}):
            for ep in sl.get("endpoints") or []:
                if not_ready_too or (ep.get("conditions") or {}).get("ready"):
                    out.update(ep.get("addresses") or [])
        return sorted(out)

    def ready_endpoints(self, key: str, port_name: str) -> list[tuple[str, int]]:
        """(ip, port) of every ready endpoint for a Service port, as the cache has it now."""
        assert self.slices is not None
        ns, _, name = key.partition("/")
        out: list[tuple[str, int]] = []
        for sl in self.slices.peek_list(ns, {SERVICE_NAME_LABEL: name}):
            port = next((p.get("port") for p in sl.get("ports") or []
                         if p.get("name", "") == port_name), None)
            if port is None:
                continue
            for ep in sl.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready"):
                    out.extend((addr, int(port)) for addr in ep.get("addresses") or [])
        return sorted(out)

    def _handler(self, key: str, port_name: str) -> Handler:
        async def forward(payload: Any, info: CallInfo) -> Any:
            candidates = self.ready_endpoints(key, port_name)
            if not candidates:
                self.refused[key] = self.refused.get(key, 0) + 1
                raise ConnectionRefused(f"dial {info.dst}: connection refused (service {key} "
                                        "has no ready endpoints)", src=info.src, dst=info.dst)
            ip, port = candidates[self.rng.randrange(len(candidates))]
            self.forwarded[key] = self.forwarded.get(key, 0) + 1
            world = self.cluster.world
            src = world.processes.find(info.src)
            if src is not None and not src.alive:
                src = None
            return await world.network.call(src, f"{ip}:{port}", payload, verb=info.verb,
                                             kind=info.kind, name=info.name,
                                             namespace=info.namespace,
                                             caller=None if src is not None else info.src)

        return forward
