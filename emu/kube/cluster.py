"""`install`: the Kubernetes built-ins of a simulation, each its own process with its own client.

    cluster = emu.kube.cluster.install(sim, nodes=5, image_pull_delay=2.0)
    await cluster.wait_ready()

starts, in this order: a kubelet per Node (``kubelet-node-1`` on host ``node-1``, …; each
registers its Node), the scheduler, and the controllers named in `KubeConfig.controllers`
(``node-lifecycle-controller``, ``pod-gc``, ``garbage-collector``, ``job-controller``,
``deployment-controller``, ``replicaset-controller``, ``statefulset-controller``,
``endpointslice-controller``,
``kube-proxy``, ``persistentvolume-controller``). Every one talks to the API server over the
network, so faults reach it; crash one to see the cluster without it.

A standard cluster (`KubeConfig.standard_cluster`, `emu.kube.standard`) starts, after the
workers' kubelets, the control plane's (``kubelet-emu-control-plane``, with the static Pods),
then the controllers with ``daemonset-controller``, ``serviceaccount-controller``,
``root-ca-cert-publisher`` and ``kube-apiserver-endpoints``, and last the one-shot ``kubeadm``
that applies CoreDNS and kube-proxy.

Node failure is `KubeCluster.fail_node` (the machine is gone: the kubelet and every container on
it die, nothing is remembered) and `KubeCluster.recover_node` (it boots again, empty).
"""

from __future__ import annotations

import math
import shutil
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..kernel.process import MainFn, Process
from . import standard
from .config import KubeConfig, NodePool
from .containers import NodeRuntime
from .kubelet import Kubelet

if TYPE_CHECKING:
    from ..kernel.world import World
    from .gateway import GatewayController

__all__ = ["KubeCluster", "KubeConfig", "cluster_of", "install"]

_CLUSTERS: weakref.WeakKeyDictionary[Any, KubeCluster] = weakref.WeakKeyDictionary()


def cluster_of(sim: World) -> KubeCluster:
    """The cluster `install` put into ``sim`` (what fault values act on)."""
    try:
        return _CLUSTERS[sim]
    except KeyError:
        raise LookupError("no Kubernetes cluster in this simulation: call "
                          "emu.kube.cluster.install(sim) first") from None


class KubeCluster:
    """Handles on the running built-ins: processes by name, Nodes, their runtimes."""

    def __init__(self, world: World, config: KubeConfig) -> None:
        self.world = world
        self.config = config
        self.node_names = [f"node-{i}" for i in range(1, config.nodes + 1)]
        #: The pool of each Node that belongs to one (`KubeConfig.node_pools`, `add_node_pool`).
        self.node_pools: dict[str, NodePool] = {}
        for pool in config.node_pools:
            self._add_pool_names(pool)
        self.processes: dict[str, Process] = {}
        self.kubelets: dict[str, Kubelet] = {}
        self.runtimes: dict[str, NodeRuntime] = {}
        self._node_index: dict[str, int] = {}
        #: Node -> when its losses end (`fail_node_for`; inf for `fail_node`'s, which only
        #: `recover_node` ends): overlapping losses keep it down until the last of them ends.
        self._down_until: dict[str, float] = {}
        #: When set, replaces `KubeConfig.endpoint_propagation_delay` (`DelayEndpoints`).
        self.endpoint_delay_override: float | None = None
        self._components: dict[str, MainFn] = {}
        #: The Gateway API implementation (`KubeConfig.gateway_classes`), if any.
        self.gateway: GatewayController | None = None
        #: The control-plane Node of a standard cluster (`KubeConfig.standard_cluster`), kept
        #: out of `node_names` (the Nodes a user's Pods can run on).
        self.control_plane: str | None = None
        #: Static Pod manifests per Node (the control plane's; `emu.kube.standard`).
        self.static_pods: dict[str, list[dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"<KubeCluster nodes={len(self.node_names)} processes={len(self.processes)}>"

    # -- things tests use ------------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """Where PersistentVolumes and emptyDirs live: the simulation's work directory."""
        return Path(self.world.workdir)  # type: ignore[attr-defined]

    @property
    def endpoint_propagation_delay(self) -> float:
        if self.endpoint_delay_override is not None:
            return self.endpoint_delay_override
        return self.config.endpoint_propagation_delay

    def client(self, identity: str = "kube-test") -> Client:
        return Client(self.world.network, identity=identity)

    def process(self, name: str) -> Process:
        """A built-in's current process (``kube-scheduler``, ``kubelet-node-1``, …)."""
        return self.world.processes.get(name)

    def kubelet_process(self, node: str) -> Process:
        return self.world.processes.get(f"kubelet-{node}")

    def container_process(self, namespace: str, pod: str, container: str) -> Process | None:
        """The process of a container (its current attempt), if it ever started."""
        return self.world.processes.find(f"{namespace}/{pod}/{container}")

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until every Node is registered and Ready (in a standard cluster, the control
        plane too, and every system Pod Ready: `emu.kube.standard.system_pods_ready`)."""
        client = self.client("kube-wait")
        names = [*self.node_names, *([self.control_plane] if self.control_plane else [])]

        async def ready() -> bool:
            try:
                nodes = await client.list("Node")
            except ApiError:
                return False
            ok = {n["metadata"]["name"] for n in nodes if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or [])}
            return all(name in ok for name in names)

        await self.world.wait_until(ready, timeout=timeout, every=0.1,  # type: ignore[attr-defined]
                                    what="all Nodes Ready")
        if self.control_plane:
            await self.world.wait_until(  # type: ignore[attr-defined]
                lambda: standard.system_pods_ready(self), timeout=timeout, every=0.25,
                what="the system Pods Ready")

    # -- nodes -----------------------------------------------------------------------------------

    def runtime_for(self, node: str, index: int) -> NodeRuntime:
        """The Node's container runtime: the surviving one after a kubelet restart, a fresh one
        after the Node failed."""
        rt = self.runtimes.get(node)
        if rt is None or not rt.alive:
            rt = NodeRuntime(self.world, node, index)
            if self.config.standard_cluster:  # a kind node image has these preloaded
                for image in standard.preloaded_images(self.config.kubernetes_version):
                    rt.add_image(image)
            self.runtimes[node] = rt
        return rt

    def _add_pool_names(self, pool: NodePool) -> list[str]:
        names = pool.node_names()
        taken = [n for n in names if n in self.node_names]
        if taken or any(p.name == pool.name for p in self.node_pools.values()):
            raise ValueError(f"node pool {pool.name!r} already exists (or its Node names "
                             f"{', '.join(taken)} are taken)")
        for name in names:
            self.node_names.append(name)
            self.node_pools[name] = pool
        return names

    def add_node_pool(self, name: str, count: int = 1, labels: dict[str, str] | None = None,
                      taints: list[dict[str, str]] | None = None,
                      capacity: dict[str, str] | None = None) -> list[str]:
        """Start a pool of ``count`` Nodes ``<name>-1`` … with these labels, taints and
        capacity (extended resources such as ``nvidia.com/gpu`` included); their names."""
        pool = NodePool(name, count, labels or {}, tuple(taints or ()), capacity or {})
        names = self._add_pool_names(pool)
        for node in names:
            self.start_kubelet(node)
        return names

    def start_kubelet(self, node: str) -> Process:
        index = self._node_index.get(node)
        if index is None:
            index = max(self._node_index.values(), default=0) + 1
            self._node_index[node] = index
        kubelet = Kubelet(self, node, index)
        self.kubelets[node] = kubelet
        return self._start(f"kubelet-{node}", kubelet.main, host=node)

    def add_node(self, node: str | None = None) -> str:
        """Start one more Node (its kubelet registers it)."""
        name = node or f"node-{max(self._node_index.values(), default=0) + 1}"
        if name not in self.node_names:
            self.node_names.append(name)
        self.start_kubelet(name)
        return name

    def fail_node(self, node: str, *, delete_node: bool = False) -> None:
        """The machine is gone: its kubelet and every container die, its memory is lost. With
        ``delete_node``, the Node object is removed too (what a cloud provider's node controller
        does for a vanished VM), so PodGC force-deletes its Pods after its quarantine. Undo:
        `recover_node` (the end of a timed loss, `fail_node_for`, does not undo this one)."""
        self._hold_down(node, math.inf)
        self._fail(node, delete_node)

    def _hold_down(self, node: str, until: float) -> None:
        if until > self._down_until.get(node, -math.inf):
            self._down_until[node] = until

    def _fail(self, node: str, delete_node: bool) -> None:
        proc = self.world.processes.find(f"kubelet-{node}")
        if proc is not None and proc.alive:
            proc.crash("node failed")
        rt = self.runtimes.get(node)
        if rt is not None:
            rt.fail()
        self.world.trace.emit("kube", "node_failed", node=node, delete_node=delete_node)
        if delete_node:
            self.world.loop.create_task(self._delete_node(node))

    async def _delete_node(self, node: str) -> None:
        try:
            await self.client("cloud-node-controller").delete("Node", node)
        except ApiError as err:
            if not is_not_found(err):
                raise

    def fail_node_for(self, node: str, duration: float, *, delete_node: bool = False) -> None:
        """`fail_node`, then `recover_node` ``duration`` seconds later. When timed losses of one
        Node overlap, it stays down until the last of them ends (the union of the windows):
        the first loss's end does not boot a machine a second loss still holds down."""
        end = self.world.loop.time() + duration
        self._hold_down(node, end)
        self._fail(node, delete_node)
        self.world.loop.call_later(duration, self._end_timed_loss, node, end)

    def _end_timed_loss(self, node: str, end: float) -> None:
        if self._down_until.get(node) != end:
            return  # a later (or untimed) loss holds it down longer, or it was recovered
        del self._down_until[node]
        if not self.node_is_up(node):
            self.recover_node(node)

    def node_is_up(self, node: str) -> bool:
        """Whether the Node's kubelet runs (it has not failed, or it has recovered)."""
        proc = self.world.processes.find(f"kubelet-{node}")
        return proc is not None and proc.alive

    def recover_node(self, node: str) -> Process:
        """The Node boots again: a fresh runtime and kubelet (it re-registers the Node). A Node
        that is up (its kubelet runs) is refused with a `ValueError` naming it."""
        if self.node_is_up(node):
            raise ValueError(f"Node {node!r} is up (its kubelet runs): nothing to recover")
        self._down_until.pop(node, None)  # a recovery ends every loss of the Node
        rt = self.runtimes.get(node)
        if rt is not None and rt.alive:
            rt.fail()
        self.world.trace.emit("kube", "node_recovered", node=node)
        return self.start_kubelet(node)

    def volume_dir(self, pv: dict[str, Any]) -> Path:
        """The host directory behind a PersistentVolume (``hostPath`` or ``local``), inside
        the work directory."""
        from .volumes import pv_directory

        return pv_directory(self, pv)

    def remove_dir(self, path: Path) -> None:
        if self.workdir in path.parents:
            shutil.rmtree(path, ignore_errors=True)

    # -- processes -------------------------------------------------------------------------------

    def _start(self, name: str, main: MainFn, *, host: str | None = None) -> Process:
        self._components[name] = main
        proc = self.world.processes.start(name, main, host=host)
        self.processes[name] = proc
        return proc

    def restart(self, name: str) -> Process:
        """Start a built-in again after it crashed (a new process, cold caches)."""
        if name.startswith("kubelet-"):
            return self.start_kubelet(name.removeprefix("kubelet-"))
        proc = self.world.processes.find(name)
        if proc is not None and proc.alive:
            proc.crash("restart")
        return self._start(name, self._components[name], host=proc.host if proc else None)


def install(sim: World, config: KubeConfig | None = None, **overrides: Any) -> KubeCluster:
    """Start the built-ins in ``sim``; keyword arguments override `KubeConfig` fields."""
    if sim in _CLUSTERS:
        raise RuntimeError("this simulation already has a Kubernetes cluster installed")
    config = attrs.evolve(config or KubeConfig(), **overrides)
    cluster = KubeCluster(sim, config)
    _CLUSTERS[sim] = cluster
    api = getattr(sim, "api", None)
    if api is not None:
        api.version = config.kubernetes_version
    for node in cluster.node_names:
        cluster.start_kubelet(node)
    if config.standard_cluster:
        _install_standard(cluster)
    wanted = config.enabled_controllers()
    from . import (
        csrsigning,
        daemonsets,
        deployments,
        endpoints,
        endpointslices,
        gc,
        jobs,
        nodes,
        scheduler,
        serviceaccounts,
        services,
        statefulsets,
        volumes,
    )

    components: list[tuple[str, str, MainFn]] = [
        ("scheduler", "kube-scheduler", scheduler.Scheduler(cluster).main),
        ("node-lifecycle", "node-lifecycle-controller", nodes.NodeLifecycle(cluster).main),
        ("pod-gc", "pod-gc", nodes.PodGC(cluster).main),
        ("garbage-collector", "garbage-collector", gc.GarbageCollector(cluster).main),
        ("job", "job-controller", jobs.JobController(cluster).main),
        ("deployment", "deployment-controller", deployments.DeploymentController(cluster).main),
        ("replicaset", "replicaset-controller", deployments.ReplicaSetController(cluster).main),
        ("statefulset", "statefulset-controller",
         statefulsets.StatefulSetController(cluster).main),
        ("endpointslice", "endpointslice-controller",
         endpointslices.EndpointSliceController(cluster).main),
        ("endpoints", "endpoint-controller", endpoints.EndpointsController(cluster).main),
        ("kube-proxy", "kube-proxy", services.KubeProxy(cluster).main),
        ("persistentvolume", "persistentvolume-controller",
         volumes.PersistentVolumeController(cluster).main),
        ("daemonset", "daemonset-controller", daemonsets.DaemonSetController(cluster).main),
        ("serviceaccount", "serviceaccount-controller",
         serviceaccounts.ServiceAccountController(cluster).main),
        ("root-ca-cert-publisher", "root-ca-cert-publisher",
         serviceaccounts.RootCACertPublisher(cluster,
                                             standard.root_ca_pem(cluster.world.seed)).main),
        ("csrsigning", "csrsigning-controller", csrsigning.CSRSigningController(cluster).main),
        ("apiserver-endpoints", "kube-apiserver-endpoints",
         standard.APIServerEndpoints(cluster).main),
    ]
    unknown = sorted(set(wanted) - {c[0] for c in components})
    if unknown:
        raise ValueError(f"unknown controllers in KubeConfig.controllers: {', '.join(unknown)}; "
                         f"known: {', '.join(c[0] for c in components)}")
    for key, name, main in components:
        if key in wanted:
            cluster._start(name, main)
    if config.gateway_classes:
        from .gateway import GatewayController

        cluster.gateway = GatewayController(cluster, config.gateway_classes)
        cluster._start("gateway-controller", cluster.gateway.main)
    if config.standard_cluster:
        standard.boot(cluster)
    return cluster


def _install_standard(cluster: KubeCluster) -> None:
    """The standard cluster's control plane (`emu.kube.standard`): its Node's kubelet with
    the static Pods, the system images' programs, DefaultTolerationSeconds."""
    config = cluster.config
    node = standard.CONTROL_PLANE_NODE
    cluster.control_plane = node
    cluster.static_pods[node] = standard.static_pods(config.kubernetes_version)
    cluster._node_index[node] = 0
    cluster.start_kubelet(node)
    standard.register_programs(cluster.world)
    api = getattr(cluster.world, "api", None)
    if api is not None:
        api.default_toleration_seconds = int(config.pod_eviction_timeout)
