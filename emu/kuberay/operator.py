"""The KubeRay operator process: flags, config file, feature gates, manager wiring, install.

Port of ``ray-operator/main.go`` (SPEC §1.1 to §1.4) on `emu.runtime`'s operator machinery:

- `parse_flags` reads ``os.Args`` as Go's ``flag`` package does, with KubeRay's defaults
  (`OperatorFlags`); `load_configuration` turns them into a `Configuration`, or, with
  ``--config``, decodes the file and ignores every config-bearing flag — except
  ``--feature-gates`` (and the log encoders), which still come from the flags (**quirk**);
- `operator_config` builds the `emu.runtime.OperatorConfig`: leader election on the
  ``ray-operator-leader`` Lease in ``leaderElectionNamespace`` (empty: the Pod's namespace from
  the service-account file, which exists only in a Pod: elsewhere the manager fails with
  controller-runtime's "not running in-cluster" error and the process exits 1), watch namespaces
  split on commas, ``MaxConcurrentReconciles`` = ``reconcileConcurrency``, and KubeRay's cache
  selectors (Jobs labelled ``app.kubernetes.io/created-by=kuberay-operator``, Pods with
  ``ray.io/node-type`` in head/worker/redis-cleanup);
- `setup_controllers` registers the controllers in main.go's order: RayCluster, then RayService
  and RayJob when their modules exist (`CONTROLLER_HOOKS`);
- `operator_program` is the container program of ``quay.io/kuberay/operator``;
- `install_kuberay` installs the chart (`emu.kuberay.helm`) so the operator runs as Deployment
  Pods when the world has Deployments, or starts replica processes directly.

Over 500 lines because main.go's three halves (the flag and config-file parsing whose precedence
is the point of SPEC §1.2, the manager wiring, and the process as a container program with its
install) must agree on one `Configuration`; splitting them would scatter that contract.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, cast

import attrs
import yaml

from emu.apiserver.errors import ApiError
from emu.client.client import Client
from emu.runtime import Manager, OperatorConfig, operator_main, start_operator

from . import helm
from .raycluster import RayClusterReconciler, RayClusterReconcilerOptions
from .utils import constant as C
from .utils.features import RAY_CLUSTER_MTLS as C_RAY_CLUSTER_MTLS
from .utils.features import FeatureGates, parse_feature_gates

#: controller-runtime's ``LeaderElectionID`` as KubeRay sets it.
LEADER_ELECTION_ID = "ray-operator-leader"
#: The file a Pod's service account mounts; controller-runtime reads the lock namespace there.
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: The operator image's repository (what `install_kuberay` registers a program for).
OPERATOR_IMAGE = "quay.io/kuberay/operator"
OPERATOR_IMAGE_PATTERN = "kuberay/operator"
#: ``K8sControllerRuntimeCacheSelectors`` (internal/managercache/cache.go).
CACHE_SELECTORS: Mapping[str, str] = {
    "Job": f"{C.KUBERNETES_CREATED_BY_LABEL_KEY}={C.COMPONENT_NAME}",
    "Pod": f"{C.RAY_NODE_TYPE_LABEL_KEY} in "
           f"({C.HEAD_NODE},{C.WORKER_NODE},{C.REDIS_CLEANUP_NODE})",
}


class FlagError(ValueError):
    """A command line Go's ``flag`` package (or KubeRay's config decoding) refuses."""


# ---------------------------------------------------------------------------------------------
# Flags and configuration (main.go, defaults.go, configuration_types.go)
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class OperatorFlags:
    """main.go's flag variables with their defaults (SPEC §1.1)."""

    metrics_addr: str = ":8080"
    health_probe_bind_address: str = ":8082"
    enable_leader_election: bool = True
    leader_election_namespace: str = ""
    reconcile_concurrency: int = 1
    watch_namespace: str = ""
    forced_cluster_upgrade: bool = False
    log_file_path: str = ""
    log_file_encoder: str = "json"
    log_stdout_encoder: str = "json"
    enable_batch_scheduler: bool = False
    batch_scheduler: str = ""
    config: str = ""
    use_kubernetes_proxy: bool = False
    feature_gates: str = ""
    enable_metrics: bool = False
    qps: float = 100.0
    burst: int = 200


#: flag name → (field, kind); zap's flags (``opts.BindFlags``) are accepted and ignored.
_FLAGS: dict[str, tuple[str, str]] = {
    "metrics-addr": ("metrics_addr", "str"),
    "health-probe-bind-address": ("health_probe_bind_address", "str"),
    "enable-leader-election": ("enable_leader_election", "bool"),
    "leader-election-namespace": ("leader_election_namespace", "str"),
    "reconcile-concurrency": ("reconcile_concurrency", "int"),
    "watch-namespace": ("watch_namespace", "str"),
    "forced-cluster-upgrade": ("forced_cluster_upgrade", "bool"),
    "log-file-path": ("log_file_path", "str"),
    "log-file-encoder": ("log_file_encoder", "str"),
    "log-stdout-encoder": ("log_stdout_encoder", "str"),
    "enable-batch-scheduler": ("enable_batch_scheduler", "bool"),
    "batch-scheduler": ("batch_scheduler", "str"),
    "config": ("config", "str"),
    "use-kubernetes-proxy": ("use_kubernetes_proxy", "bool"),
    "feature-gates": ("feature_gates", "str"),
    "enable-metrics": ("enable_metrics", "bool"),
    "qps": ("qps", "float"),
    "burst": ("burst", "int"),
    "zap-devel": ("", "bool"),
    "zap-encoder": ("", "str"),
    "zap-log-level": ("", "str"),
    "zap-stacktrace-level": ("", "str"),
    "zap-time-encoding": ("", "str"),
}

_BOOL_TEXT = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
              "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def parse_flags(args: Sequence[str]) -> OperatorFlags:
    """Port of main.go's ``flag.Parse`` over KubeRay's flags (Go ``flag`` package rules).

    ``-x`` and ``--x`` are the same; ``-x=v`` or ``-x v`` (booleans only ``-x`` or ``-x=v``);
    parsing stops at the first non-flag or at ``--``. Errors carry Go's text."""
    values: dict[str, Any] = {}
    i = 0
    args = list(args)
    while i < len(args):
        arg = args[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            break
        name = arg[2:] if arg.startswith("--") else arg[1:]
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        has_value = "=" in name
        name, _, text = name.partition("=")
        if name not in _FLAGS:
            raise FlagError(f"flag provided but not defined: -{name}")
        field, kind = _FLAGS[name]
        if kind == "bool":
            if has_value:
                if text not in _BOOL_TEXT:
                    raise FlagError(f'invalid boolean value "{text}" for -{name}: parse error')
                value: Any = _BOOL_TEXT[text]
            else:
                value = True
        else:
            if not has_value:
                i += 1
                if i >= len(args):
                    raise FlagError(f"flag needs an argument: -{name}")
                text = args[i]
            try:
                value = int(text) if kind == "int" else float(text) if kind == "float" else text
            except ValueError:
                raise FlagError(f'invalid value "{text}" for flag -{name}: parse error') from None
        if field:
            values[field] = value
        i += 1
    return OperatorFlags(**values)


@attrs.frozen
class Configuration:
    """Port of ``config.ray.io/v1alpha1 Configuration`` (configuration_types.go), with
    ``SetDefaults_Configuration`` (defaults.go) applied by `decode_config`."""

    metrics_addr: str = ":8080"
    probe_addr: str = ":8082"
    enable_leader_election: bool = True
    leader_election_namespace: str = ""
    reconcile_concurrency: int = 1
    watch_namespace: str = ""
    log_file: str = ""
    log_file_encoder: str = ""
    log_stdout_encoder: str = ""
    enable_batch_scheduler: bool = False
    batch_scheduler: str = ""
    use_kubernetes_proxy: bool = False
    delete_ray_job_after_job_finishes: bool = False
    enable_metrics: bool = False
    qps: float = 100.0
    burst: int = 200
    head_sidecar_containers: tuple[dict[str, Any], ...] = ()
    worker_sidecar_containers: tuple[dict[str, Any], ...] = ()
    default_container_envs: tuple[dict[str, Any], ...] = ()
    default_pod_annotations: Mapping[str, str] = attrs.field(factory=dict)
    default_pod_labels: Mapping[str, str] = attrs.field(factory=dict)


_CONFIG_FIELDS: dict[str, str] = {
    "metricsAddr": "metrics_addr", "probeAddr": "probe_addr",
    "enableLeaderElection": "enable_leader_election",
    "leaderElectionNamespace": "leader_election_namespace",
    "reconcileConcurrency": "reconcile_concurrency", "watchNamespace": "watch_namespace",
    "logFile": "log_file", "logFileEncoder": "log_file_encoder",
    "logStdoutEncoder": "log_stdout_encoder", "enableBatchScheduler": "enable_batch_scheduler",
    "batchScheduler": "batch_scheduler", "useKubernetesProxy": "use_kubernetes_proxy",
    "deleteRayJobAfterJobFinishes": "delete_ray_job_after_job_finishes",
    "enableMetrics": "enable_metrics", "qps": "qps", "burst": "burst",
    "headSidecarContainers": "head_sidecar_containers",
    "workerSidecarContainers": "worker_sidecar_containers",
    "defaultContainerEnvs": "default_container_envs",
    "defaultPodAnnotations": "default_pod_annotations", "defaultPodLabels": "default_pod_labels",
}


def decode_config(text: str) -> Configuration:
    """Port of ``decodeConfig`` (main.go): a ``config.ray.io/v1alpha1 Configuration`` document,
    then ``SetDefaults_Configuration`` (an absent ``enableLeaderElection`` is true, a zero
    ``reconcileConcurrency`` is 1). Unknown fields are ignored, as the universal decoder does."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise FlagError(f"failed to decode config file: {err}") from None
    if not isinstance(doc, Mapping):
        raise FlagError("failed to decode config file: not a mapping")
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if kind != "Configuration" or api_version != "config.ray.io/v1alpha1":
        raise FlagError(f"failed to decode config file: no kind \"{kind}\" is registered for "
                        f"version \"{api_version}\"")
    fields: dict[str, Any] = {}
    for key, field in _CONFIG_FIELDS.items():
        if key in doc and doc[key] is not None:
            value = doc[key]
            fields[field] = tuple(value) if isinstance(value, list) else value
    if not fields.get("reconcile_concurrency"):
        fields["reconcile_concurrency"] = 1
    for key, default in (("metrics_addr", ":8080"), ("probe_addr", ":8082")):
        if not fields.get(key):
            fields[key] = default
    return Configuration(**fields)


def load_configuration(flags: OperatorFlags, env: Mapping[str, str],
                       read_file: Callable[[str], str]) -> tuple[Configuration, FeatureGates]:
    """main.go between ``flag.Parse`` and ``ctrl.NewManager``: the Configuration (from the file
    when ``--config`` is set, else from the flags) and the feature gates (always from the flag)."""
    if flags.config:
        try:
            text = read_file(flags.config)
        except OSError as err:
            raise FlagError(f"failed to read config file: {err}") from None
        config = decode_config(text)
    else:
        config = Configuration(
            metrics_addr=flags.metrics_addr, probe_addr=flags.health_probe_bind_address,
            enable_leader_election=flags.enable_leader_election,
            leader_election_namespace=flags.leader_election_namespace,
            reconcile_concurrency=flags.reconcile_concurrency,
            watch_namespace=flags.watch_namespace, log_file=flags.log_file_path,
            log_file_encoder=flags.log_file_encoder,
            log_stdout_encoder=flags.log_stdout_encoder,
            enable_batch_scheduler=flags.enable_batch_scheduler,
            batch_scheduler=flags.batch_scheduler, use_kubernetes_proxy=flags.use_kubernetes_proxy,
            delete_ray_job_after_job_finishes=env.get(C.DELETE_RAYJOB_CR_AFTER_JOB_FINISHES)
            == "true",
            enable_metrics=flags.enable_metrics, qps=flags.qps, burst=flags.burst)
    try:
        gates = parse_feature_gates(flags.feature_gates)
    except ValueError as err:
        raise FlagError(f"Unable to set flag gates for known features: {err}") from None
    return config, gates


# ---------------------------------------------------------------------------------------------
# Manager wiring (main.go after the flags)
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class OperatorContext:
    """What the controllers' setup functions get: the configuration, gates and environment of
    this operator process (Go reads the last two from globals and ``os.Getenv``)."""

    config: Configuration
    gates: FeatureGates
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: Seeds the reconcilers' randomness (auth tokens, generated names).
    seed: int = 0
    #: main.go's ``certManagerAPIAvailable`` (`operator_cert_manager_check`).
    cert_manager_available: bool = False


def setup_ray_cluster_controller(mgr: Manager, ctx: OperatorContext) -> RayClusterReconciler:
    """``ray.NewReconciler(mgr, rayClusterOptions).SetupWithManager(mgr, concurrency)``."""
    import random

    cfg = ctx.config
    options = RayClusterReconcilerOptions(
        head_sidecar_containers=tuple(cfg.head_sidecar_containers),
        worker_sidecar_containers=tuple(cfg.worker_sidecar_containers),
        default_container_envs=tuple(cfg.default_container_envs),
        default_pod_annotations=dict(cfg.default_pod_annotations),
        default_pod_labels=dict(cfg.default_pod_labels),
        env=dict(ctx.env), gates=ctx.gates, cert_manager_available=ctx.cert_manager_available)
    reconciler = RayClusterReconciler(mgr.get_client(), options,
                                      rng=random.Random(f"{ctx.seed}:raycluster"))
    reconciler.setup_with_manager(mgr, cfg.reconcile_concurrency)
    return reconciler


#: main.go's controllers after RayCluster, in order: (name, module). A module registers itself by
#: defining ``setup(mgr: Manager, ctx: OperatorContext) -> object``; until it exists, its entry
#: is skipped; a ``setup`` returning None was gated off. (NetworkPolicy is not emulated.)
CONTROLLER_HOOKS: tuple[tuple[str, str], ...] = (
    ("RayClusterMTLS", "emu.kuberay.raycluster_mtls"),
    ("RayService", "emu.kuberay.rayservice"),
    ("RayJob", "emu.kuberay.rayjob"),
    ("RayCronJob", "emu.kuberay.raycronjob"),
)


def setup_controllers(mgr: Manager, ctx: OperatorContext) -> dict[str, Any]:
    """Register every controller, in main.go's order; returns name → reconciler."""
    out: dict[str, Any] = {"RayCluster": setup_ray_cluster_controller(mgr, ctx)}
    for name, module_name in CONTROLLER_HOOKS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name == module_name:
                continue
            raise
        setup = getattr(module, "setup", None)
        if setup is not None:
            reconciler = setup(mgr, ctx)
            if reconciler is not None:  # None: its feature gate is off
                out[name] = reconciler
    return out


def operator_config(config: Configuration, gates: FeatureGates, *,
                    env: Mapping[str, str] | None = None, pod_namespace: str | None = None,
                    seed: int = 0, hostname: str | None = None,
                    on_setup: Callable[[Manager, dict[str, Any]], None] | None = None,
                    cert_manager_available: bool = False) -> OperatorConfig:
    """The `emu.runtime.OperatorConfig` main.go's manager options amount to.

    The lock namespace is ``leaderElectionNamespace``, else ``pod_namespace`` (the service
    account's namespace file, which only a Pod has); with neither, the manager fails to build as
    controller-runtime does."""
    ctx = OperatorContext(config, gates, dict(env or {}), seed,
                          cert_manager_available=cert_manager_available)

    def setup(mgr: Manager, _cfg: OperatorConfig) -> None:
        reconcilers = setup_controllers(mgr, ctx)
        if on_setup is not None:
            on_setup(mgr, reconcilers)

    return OperatorConfig(
        setup=setup,
        leader_election=config.enable_leader_election,
        leader_election_id=LEADER_ELECTION_ID,
        leader_election_namespace=config.leader_election_namespace or pod_namespace or "",
        watch_namespaces=config.watch_namespace,
        reconcile_concurrency=config.reconcile_concurrency,
        cache_selectors=dict(CACHE_SELECTORS),
        hostname=hostname,
    )


def k8s_version_at_least(git_version: str, major: int, minor: int, patch: int) -> bool:
    """``utils.IsK8sVersionAtLeast``: apimachinery's ``ParseGeneric`` (``v`` optional, two or
    three numbers, anything after them ignored) compared with ``AtLeast``; ``ValueError`` when
    the text is not a version."""
    import re

    m = re.match(r"^v?(\d+(?:\.\d+)+)", git_version.strip())
    if m is None:
        raise ValueError(f'could not parse "{git_version}" as version')
    parts = [int(p) for p in m.group(1).split(".")]
    if len(parts) > 3:
        raise ValueError(f'could not parse "{git_version}" as version')
    parts += [0] * (3 - len(parts))
    return tuple(parts) >= (major, minor, patch)


async def check_kubernetes_version(client: Client, gates: FeatureGates) -> str | None:
    """main.go's guard before the manager is built: with the SidecarSubmitterRestart gate on,
    the API server's version must be v1.35 or later (the submitter container's per-container
    restart rules are beta there). The error main.go exits 1 with, or None to go on."""
    from .utils.features import SIDECAR_SUBMITTER_RESTART

    if not gates.enabled(SIDECAR_SUBMITTER_RESTART):
        return None
    try:
        git_version = str((await client.server_version()).get("gitVersion", ""))
    except Exception as err:  # any failure to ask is main.go's first exit
        return ("SidecarSubmitterRestart feature gate enabled but unable to detect K8s version. "
                f"Feature requires K8s 1.35+.: {err}")
    try:
        at_least = k8s_version_at_least(git_version, 1, 35, 0)
    except ValueError as err:
        return f"Failed to compare K8s version.: {err}"
    if not at_least:
        return (f"SidecarSubmitterRestart feature gate requires K8s 1.35+: current version "
                f"{git_version} is below 1.35")
    return None


# ---------------------------------------------------------------------------------------------
# The operator image's program
# ---------------------------------------------------------------------------------------------


@attrs.define
class OperatorReplica:
    """One running operator process and what it built."""

    process: Any
    manager: Manager | None = None
    reconcilers: dict[str, Any] = attrs.field(factory=dict)


def _read_mounted_file(ctx: Any, path: str) -> str:
    """Read ``path`` in the container: from a directory-backed volume, else from the ConfigMap
    mounted there (read through the API server, as the kubelet would have projected it)."""
    for candidate in ctx.host_paths(path):
        if candidate.exists():
            return candidate.read_text()
    raise FileNotFoundError(f"open {path}: no such file or directory")


async def _config_map_file(ctx: Any, path: str) -> str | None:
    spec = ctx.pod.get("spec") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for mount in ctx.container.get("volumeMounts") or []:
        mount_path = str(mount.get("mountPath", "")).rstrip("/")
        if not path.startswith(mount_path + "/"):
            continue
        config_map = (volumes.get(mount.get("name")) or {}).get("configMap")
        if not config_map:
            continue
        client = Client(ctx.network, process=ctx.process)
        try:
            cm = await client.get("ConfigMap", config_map["name"], ctx.namespace)
        except ApiError:
            return None
        key = path[len(mount_path) + 1:]
        data = cm.get("data") or {}
        return str(data[key]) if key in data else None
    return None


async def operator_cert_manager_check(client: Client, gates: FeatureGates) -> bool:
    """main.go's ``certManagerAPIAvailable(restConfig)`` before the manager starts. Go asks
    discovery on every start; its answer is used only with the RayClusterMTLS gate on, so the
    emulated operator asks only then (a gate-off start sends no extra request)."""
    if not gates.enabled(C_RAY_CLUSTER_MTLS):
        return False
    from .raycluster_mtls import cert_manager_api_available

    return await cert_manager_api_available(client)


def metrics_port(addr: str) -> int | None:
    """The port of a ``--metrics-addr`` (``":8080"``, ``"0.0.0.0:8080"``); None for ``"0"``
    (controller-runtime's "metrics server disabled") or an address without a port."""
    if addr in ("", "0"):
        return None
    _, _, port = addr.rpartition(":")
    return int(port) if port.isdigit() and int(port) > 0 else None


def serve_metrics(ctx: Any, addr: str) -> None:
    """controller-runtime's metrics server, which ``mgr.Start`` starts on every replica before
    leader election: ``GET /metrics`` answers 200 (the Helm chart's liveness and readiness
    probes target it, so the operator's Pod becomes Ready and its Deployment Available)."""
    port = metrics_port(addr)
    if port is None:
        return

    async def handle(payload: Any, info: Any) -> dict[str, Any]:
        path = str((payload or {}).get("path", "")) if isinstance(payload, dict) else ""
        if path.split("?", 1)[0] == "/metrics":
            return {"status": 200, "headers": {"Content-Type": "text/plain; version=0.0.4"},
                    "body": "# controller-runtime metrics\n"}
        return {"status": 404, "headers": {}, "body": "404 page not found\n"}

    ctx.listen(port, handle)
    ctx.set_ready(True)


def make_operator_program(on_replica: Callable[[OperatorReplica], None] | None = None
                          ) -> Callable[[Any], Any]:
    """The container program of the operator image; ``on_replica`` hears of each replica."""

    async def operator_program(ctx: Any) -> int:
        """main.go as a container: parse ``args`` and ``env``, build the manager, run it.

        A bad flag or config exits 1 before anything starts (``exitOnError``)."""
        args = [str(a) for a in ctx.container.get("args") or []]
        env = dict(ctx.env or {})
        replica = OperatorReplica(ctx.process)
        try:
            flags = parse_flags(args)
            preloaded: dict[str, str] = {}
            if flags.config:
                try:
                    preloaded[flags.config] = _read_mounted_file(ctx, flags.config)
                except OSError:
                    text = await _config_map_file(ctx, flags.config)
                    if text is not None:
                        preloaded[flags.config] = text

            def read_file(path: str) -> str:
                if path in preloaded:
                    return preloaded[path]
                raise FileNotFoundError(f"open {path}: no such file or directory")

            config, gates = load_configuration(flags, env, read_file)
        except FlagError as err:
            ctx.process.log("operator_exit", error=str(err), code=1)
            return 1
        refused = await check_kubernetes_version(Client(ctx.network, process=ctx.process), gates)
        if refused is not None:
            ctx.process.log("operator_exit", error=refused, code=1)
            return 1

        def on_setup(mgr: Manager, reconcilers: dict[str, Any]) -> None:
            replica.process = mgr.process
            replica.manager = mgr
            replica.reconcilers = reconcilers

        cert_manager = await operator_cert_manager_check(
            Client(ctx.network, process=ctx.process), gates)
        op_config = operator_config(config, gates, env=env, pod_namespace=ctx.namespace,
                                    seed=ctx.rng.randrange(2**31), hostname=ctx.hostname,
                                    on_setup=on_setup, cert_manager_available=cert_manager)
        if on_replica is not None:
            on_replica(replica)
        world = SimpleNamespace(network=ctx.network, rng=ctx.rng)
        main = operator_main(cast(Any, world), op_config)
        serve_metrics(ctx, config.metrics_addr)
        code = await main(ctx.process)
        return int(code or 0)

    return operator_program


#: The program registered for the operator image when nothing needs to watch the replicas.
operator_program = make_operator_program()


# ---------------------------------------------------------------------------------------------
# install_kuberay
# ---------------------------------------------------------------------------------------------


class KubeRayInstall:
    """An installed operator: its replicas, which one leads, the rendered manifests."""

    def __init__(self, sim: Any, *, namespace: str, direct: bool, manifests: list[dict[str, Any]],
                 leader_election: bool) -> None:
        self.sim = sim
        self.namespace = namespace
        self.direct = direct
        self.manifests = manifests
        self.leader_election = leader_election
        self.replica_records: list[OperatorReplica] = []

    def __repr__(self) -> str:
        mode = "direct" if self.direct else "deployment"
        return f"<KubeRayInstall {mode} ns={self.namespace} replicas={len(self.replicas())}>"

    def _add(self, replica: OperatorReplica) -> None:
        self.replica_records.append(replica)

    def replicas(self) -> list[Any]:
        """The live operator processes, in start order."""
        return [r.process for r in self.replica_records
                if r.process is not None and r.process.alive]

    def managers(self) -> list[Manager]:
        return [r.manager for r in self.replica_records
                if r.manager is not None and r.process.alive]

    def lease(self) -> dict[str, Any] | None:
        """The ``ray-operator-leader`` Lease as the API server has it (an observer's read)."""
        try:
            lease: dict[str, Any] = self.sim.api.get("Lease", LEADER_ELECTION_ID, self.namespace)
        except ApiError:
            return None
        return lease

    def leader(self) -> Any | None:
        """The process whose identity holds the Lease (None when nobody does, or the holder is
        gone); with election off, the first live replica (every replica reconciles)."""
        if not self.leader_election:
            live = self.replicas()
            return live[0] if live else None
        lease = self.lease()
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        if not holder:
            return None
        for r in self.replica_records:
            if r.manager is not None and r.manager.identity == holder and r.process.alive:
                return r.process
        return None

    def reconciler(self, name: str = "RayCluster") -> Any | None:
        """The named reconciler of the current leader (tests look inside with it)."""
        leader = self.leader()
        for r in self.replica_records:
            if r.process is leader:
                return r.reconcilers.get(name)
        return None

    async def wait_for_leader(self, timeout: float = 60.0) -> Any:
        """Wait (virtual time) until some replica leads and has started its controllers."""
        def led() -> bool:
            proc = self.leader()
            return any(r.process is proc and r.manager is not None and r.manager.is_leader
                       for r in self.replica_records)

        await self.sim.wait_until(led, timeout=timeout, every=0.5, what="a KubeRay leader")
        return self.leader()


def _values(*, replicas: int, leader_election: bool, configuration: Mapping[str, Any] | None,
            feature_gates: Mapping[str, bool] | None, reconcile_concurrency: int,
            watch_namespace: str | Sequence[str] | None, image: str,
            env: Mapping[str, str] | Sequence[Mapping[str, Any]] | None,
            extra: Mapping[str, Any]) -> dict[str, Any]:
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    values: dict[str, Any] = {"replicas": replicas, "leaderElectionEnabled": leader_election,
                              "reconcileConcurrency": reconcile_concurrency,
                              "image": {"repository": repo, "tag": tag or "nightly"}}
    if configuration is not None:
        values["configuration"] = {"enabled": True, **dict(configuration)}
    if watch_namespace:
        values["watchNamespace"] = ([watch_namespace] if isinstance(watch_namespace, str)
                                    else list(watch_namespace))
    if feature_gates:
        gates = [dict(g) for g in helm.DEFAULT_VALUES["featureGates"]]
        for name, enabled in feature_gates.items():
            for g in gates:
                if g["name"] == name:
                    g["enabled"] = bool(enabled)
                    break
            else:
                gates.append({"name": name, "enabled": bool(enabled)})
        values["featureGates"] = gates
    if env:
        values["env"] = env
    return helm.merge_values(values, extra)


async def install_kuberay(sim: Any, *, replicas: int = 1, leader_election: bool = True,
                          namespace: str = "default",
                          configuration: Mapping[str, Any] | None = None,
                          feature_gates: Mapping[str, bool] | None = None,
                          reconcile_concurrency: int = 1,
                          watch_namespace: str | Sequence[str] | None = None,
                          image: str = f"{OPERATOR_IMAGE}:nightly",
                          env: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None,
                          direct: bool | None = None, release_name: str = "kuberay-operator",
                          **values: Any) -> KubeRayInstall:
    """``helm install kuberay-operator`` into ``sim``.

    The chart's values are the keyword arguments (``configuration`` turns on the config-file path
    with those keys; ``feature_gates`` overrides or adds entries of the chart's list; other chart
    values go in ``values``). When the world runs Deployments (``emu.kube`` installed) the
    manifests are applied and the operator runs as the Deployment's Pods; otherwise (or with
    ``direct=True``) each replica is started as a process with the same arguments. Either way the
    operator image's program is registered in ``sim.programs``."""
    chart_values = _values(replicas=replicas, leader_election=leader_election,
                           configuration=configuration, feature_gates=feature_gates,
                           reconcile_concurrency=reconcile_concurrency,
                           watch_namespace=watch_namespace, image=image, env=env, extra=values)
    manifests = helm.render(chart_values, release_name=release_name, namespace=namespace)
    if direct is None:
        direct = sim.processes.find("deployment-controller") is None
    install = KubeRayInstall(sim, namespace=namespace, direct=direct, manifests=manifests,
                             leader_election=bool(chart_values.get("leaderElectionEnabled")))
    sim.programs.register(OPERATOR_IMAGE_PATTERN, make_operator_program(install._add))
    rbac_on = _enable_rbac(sim, manifests, direct=direct)
    if not direct:
        for manifest in manifests:
            try:
                await sim.apply(manifest)
            except ApiError as err:
                if err.code == 404 and manifest.get("kind") in ("Role", "RoleBinding"):
                    continue  # the emulated API server serves no RBAC kinds
                raise
        return install
    if rbac_on:  # the replicas' identity and its rules, which the Deployment path applies
        for manifest in manifests:
            if manifest["kind"] in _RBAC_MANIFEST_KINDS:
                await sim.apply(manifest)
    await _start_direct(sim, install, manifests, namespace)
    return install


_RBAC_MANIFEST_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                        "ClusterRoleBinding")


def _enable_rbac(sim: Any, manifests: list[dict[str, Any]], *, direct: bool) -> bool:
    """RBAC is on in a world KubeRay is installed into (unless it was built with
    ``rbac=False``): the chart's RBAC decides what the operator may do. Replicas started as
    plain processes act as the chart's ServiceAccount, as its Pods would."""
    rbac = getattr(sim, "rbac", None)
    if rbac is None or getattr(sim, "rbac_option", None) is False:
        return False
    rbac.enable()
    if direct:
        deployment = next(m for m in manifests if m["kind"] == "Deployment")
        meta = deployment["metadata"]
        sa = deployment["spec"]["template"]["spec"].get("serviceAccountName") or "default"
        for i in range(int(deployment["spec"]["replicas"])):
            rbac.assign(f"{meta['name']}-{i}",
                        rbac.service_account_user(meta["namespace"], sa))
    return True


async def _start_direct(sim: Any, install: KubeRayInstall, manifests: list[dict[str, Any]],
                        namespace: str) -> None:
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [str(a) for a in container.get("args") or []]
    env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or []}
    config_map = next((m for m in manifests if m["kind"] == "ConfigMap"), None)
    files = {helm.CONFIG_FILE: config_map["data"]["config.yaml"]} if config_map else {}

    def read_file(path: str) -> str:
        if path in files:
            return files[path]
        raise FileNotFoundError(f"open {path}: no such file or directory")

    config, gates = load_configuration(parse_flags(args), env, read_file)
    refused = await check_kubernetes_version(sim.client("kuberay-operator"), gates)
    if refused is not None:  # every replica would exit 1 at once
        raise FlagError(refused)
    cert_manager = await operator_cert_manager_check(sim.client("kuberay-operator"), gates)
    name = deployment["metadata"]["name"]
    for i in range(int(deployment["spec"]["replicas"])):
        replica = OperatorReplica(None)
        install._add(replica)

        def on_setup(mgr: Manager, reconcilers: dict[str, Any],
                     replica: OperatorReplica = replica) -> None:
            replica.process = mgr.process  # a restarted replica is a new process
            replica.manager = mgr
            replica.reconcilers = reconcilers

        op_config = operator_config(config, gates, env=env, pod_namespace=namespace, seed=i,
                                    on_setup=on_setup, cert_manager_available=cert_manager)
        replica.process = start_operator(sim, f"{name}-{i}", op_config)
