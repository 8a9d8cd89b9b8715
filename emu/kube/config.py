"""`KubeConfig`: every knob of the emulated cluster, with the real default where there is one."""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    """A list or tuple of names as a tuple of str."""
    return tuple(str(v) for v in value)


def _non_negative(_inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"KubeConfig.{attribute.name} can't be negative: {value}")


def _kube_version(_inst: object, _attribute: object, value: str) -> None:
    if not re.fullmatch(r"v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]*)?", str(value)):
        raise ValueError(f"KubeConfig.kubernetes_version is a Kubernetes release like "
                         f"'v1.35.0', not {value!r}")


def _pool_name(_inst: object, _attribute: object, value: str) -> None:
    if not value or not all(ch.isalnum() or ch == "-" for ch in value) or \
            not value[0].isalnum() or value != value.lower():
        raise ValueError(f"a node pool name is a lower-case DNS label (its Nodes are "
                         f"<name>-1, <name>-2, ...), not {value!r}")


def _str_dict(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(value).items()}  # type: ignore[call-overload]


def _taints(value: object) -> tuple[dict[str, str], ...]:
    return tuple(dict(t) for t in value)  # type: ignore[attr-defined]


def _check_taints(_inst: object, _attribute: object, value: tuple[dict[str, str], ...]) -> None:
    for taint in value:
        if not taint.get("key") or taint.get("effect") not in (
                "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(f"a taint has a key and an effect NoSchedule, PreferNoSchedule or "
                             f"NoExecute, not {taint!r}")


@attrs.frozen
class NodePool:
    """A group of alike Nodes (a cloud node pool): ``count`` Nodes ``<name>-1`` … with these
    labels, taints and capacity. ``capacity`` overrides the cluster's ``cpu``, ``memory`` and
    ``pods`` and adds extended resources (``{"nvidia.com/gpu": "4"}``, ``google.com/tpu``)."""

    name: str = attrs.field(validator=_pool_name)
    count: int = attrs.field(default=1, validator=attrs.validators.ge(0))
    labels: dict[str, str] = attrs.field(factory=dict, converter=_str_dict)
    taints: tuple[dict[str, str], ...] = attrs.field(default=(), converter=_taints,
                                                     validator=_check_taints)
    capacity: dict[str, str] = attrs.field(factory=dict, converter=_str_dict)

    def node_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(1, self.count + 1)]


def _pools(value: object) -> tuple[NodePool, ...]:
    return tuple(p if isinstance(p, NodePool) else NodePool(**p)
                 for p in value)  # type: ignore[attr-defined]


#: The built-ins `install` starts by default (`KubeConfig.controllers`).
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    "scheduler", "node-lifecycle", "pod-gc", "garbage-collector", "job",
    "deployment", "replicaset", "statefulset", "endpointslice", "kube-proxy",
    "persistentvolume",
)
#: What the standard cluster adds to the default controllers (`KubeConfig.standard_cluster`):
#: the DaemonSet controller, the ServiceAccount controller, the root-CA publisher,
#: kube-apiserver's endpoint reconciler for ``default/kubernetes`` and the csrsigning controller.
STANDARD_CONTROLLERS: tuple[str, ...] = (
    "daemonset", "serviceaccount", "root-ca-cert-publisher", "apiserver-endpoints",
    "csrsigning",
)


@attrs.frozen
class KubeConfig:
    """How the built-ins behave. Times are virtual seconds."""

    #: Number of worker Nodes (``node-1`` … ``node-N``). Defaults to 3.
    nodes: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    #: Each Node's CPU capacity (allocatable). Defaults to ``"64"`` cores.
    node_cpu: str = "64"
    #: Each Node's memory capacity. Defaults to ``"256Gi"``.
    node_memory: str = "256Gi"
    #: Each Node's Pod capacity. Defaults to 110 (the kubelet's ``maxPods``).
    node_pods: int = 110
    #: Labels on every Node besides ``kubernetes.io/hostname``. Defaults to none.
    node_labels: dict[str, str] = attrs.field(factory=dict)
    #: Node pools besides the ``nodes`` plain Nodes (`NodePool` values, or dicts of their
    #: fields): GPU or TPU Nodes with their labels, taints and extended resources.
    node_pools: tuple[NodePool, ...] = attrs.field(default=(), converter=_pools)
    #: The scheduler's ``percentageOfNodesToScore``: how many feasible Nodes it looks for before
    #: picking the best (never fewer than 100). Defaults to 0, Kubernetes' adaptive value
    #: (50% - Nodes/125, at least 5%: 42% of 1,000 Nodes).
    scheduler_percentage_of_nodes_to_score: int = attrs.field(
        default=0, validator=[attrs.validators.ge(0), attrs.validators.le(100)])
    #: Pulling an image the first time on a Node (again every start for ``imagePullPolicy:
    #: Always``). Defaults to 1 s.
    image_pull_delay: float = attrs.field(default=1.0, validator=_non_negative)
    #: Creating and starting one container, including each restart. Defaults to 0.5 s.
    container_start_delay: float = attrs.field(default=0.5, validator=_non_negative)
    #: How long a container takes to exit after SIGTERM on Pod deletion (capped by the Pod's
    #: grace period; 0 stops it at once). Defaults to 0 s.
    container_stop_delay: float = attrs.field(default=0.0, validator=_non_negative)
    #: CrashLoopBackOff: first back-off and cap (the kubelet's 10 s and 300 s).
    crash_loop_backoff: float = 10.0
    crash_loop_backoff_max: float = 300.0
    #: Node Lease renew interval (``nodeLeaseDurationSeconds`` 40 x 0.25). Defaults to 10 s.
    node_lease_renew_interval: float = 10.0
    #: Node lifecycle controller: a Node whose Lease was not renewed for this long is marked
    #: ``Ready=Unknown`` (``--node-monitor-grace-period``, 50 s since Kubernetes 1.32).
    node_monitor_grace_period: float = 50.0
    #: How long a Pod stays bound to an unreachable Node before it is evicted (deleted): the
    #: ``tolerationSeconds`` the DefaultTolerationSeconds admission plugin adds. Defaults to 300 s.
    pod_eviction_timeout: float = 300.0
    #: How long PodGC waits after a Node object disappeared before it force-deletes the Pods bound
    #: to it (``quarantineTime``). Defaults to 40 s.
    pod_gc_quarantine: float = 40.0
    #: Delay between a change to a Service's Pods and the EndpointSlice write (the controller's
    #: batching plus watch propagation). Defaults to 1 s.
    endpoint_propagation_delay: float = attrs.field(default=1.0, validator=_non_negative)
    #: Reclaim policy of dynamically provisioned PersistentVolumes (a default StorageClass's).
    #: Defaults to ``"Delete"``.
    provisioned_reclaim_policy: str = attrs.field(
        default="Delete", validator=attrs.validators.in_(("Delete", "Retain")))
    #: GatewayClasses a Gateway API implementation manages (`emu.kube.gateway`; e.g.
    #: ``("istio",)``, as installing Istio does): it creates them, accepts their Gateways and
    #: HTTPRoutes and routes the Gateways' traffic by the routes' weights. Defaults to none (no
    #: Gateway API implementation, as on a bare cluster).
    gateway_classes: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    #: Which built-ins `install` starts besides the kubelets (all but ``endpoints`` and
    #: `STANDARD_CONTROLLERS` by default: the core/v1 Endpoints controller,
    #: `emu.kube.endpoints`, is opt-in). Leave one out to
    #: observe the cluster without it. (Namespace termination is done by the API server.)
    controllers: tuple[str, ...] = DEFAULT_CONTROLLERS
    #: The cluster's Kubernetes version: what the API server's ``/version`` reports and each
    #: kubelet's ``nodeInfo.kubeletVersion`` (KubeRay's SidecarSubmitterRestart gate needs
    #: v1.35 or later). Defaults to ``"v1.33.0"``.
    kubernetes_version: str = attrs.field(default="v1.33.0", validator=_kube_version)
    #: Run the containers' startup, liveness and readiness probes (`emu.kube.probes`). Defaults
    #: to True. False is faster and optimistic: readiness then follows the programs' own state
    #: (sampled on the readiness probe's schedule where one is set) and nothing is restarted by
    #: a failing probe.
    probes: bool = True
    #: Make a fresh world look like a kind cluster (`emu.kube.standard`): a tainted
    #: control-plane Node ``emu-control-plane`` whose kubelet runs the control plane's static
    #: Pods, CoreDNS and the ``kube-dns`` Service, kube-proxy as a DaemonSet, the
    #: ``default/kubernetes`` Service, a ``default`` ServiceAccount and the ``kube-root-ca.crt``
    #: ConfigMap in every namespace, DefaultTolerationSeconds on Pods and the Events of normal
    #: operation (Scheduled, Pulled, Started, SuccessfulCreate, ...). It starts
    #: `STANDARD_CONTROLLERS` besides `controllers` (crash one to see the cluster without it).
    #: Defaults to True; False gives a minimal world (worker Nodes and the built-in
    #: controllers only), cheaper to build and run.
    standard_cluster: bool = True

    def enabled_controllers(self) -> tuple[str, ...]:
        """The built-ins `install` starts: `controllers`, and `STANDARD_CONTROLLERS` with
        `standard_cluster` (without it, `controllers` may name any of them to start it alone,
        e.g. ``"daemonset"``)."""
        if not self.standard_cluster:
            return self.controllers
        return (*self.controllers, *(c for c in STANDARD_CONTROLLERS if c not in self.controllers))
