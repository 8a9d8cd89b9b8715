"""Head and worker Pods for a RayCluster, built as KubeRay builds them.

Port of ``ray-operator/controllers/ray/common/pod.go`` and of ``RayClusterReconciler.buildHeadPod``
/ ``buildWorkerPod`` (raycluster_controller.go). Everything is a pure function over JSON-shaped dicts;
the entry points are `build_head_pod` and `build_worker_pod`. Over 500 lines because pod.go is one
1,700-line file whose pieces (labels, env, GCS FT, ``ray start`` flags, probes) must agree.

What the Pods carry that the emulated world reads (SPEC §2.3, §2.8, §2.11):
- names: ``generateName`` ``<cluster>-head-`` / ``<cluster>-<group>-worker-`` (deterministic head name
  ``<cluster>-head`` with ``ENABLE_DETERMINISTIC_HEAD_POD_NAME``), labels of `label_pod`;
- the Ray container's command ``/bin/bash -c -- "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536};
  ray start --head ... --block ..."`` (workers: ``ray start --address=<head FQDN>:6379 ...``);
- env: ``RAY_CLUSTER_NAME`` (a fieldRef to the ``ray.io/cluster`` label), ``RAY_PORT``, ``RAY_ADDRESS``,
  GCS FT env (``RAY_REDIS_ADDRESS``, ``REDIS_PASSWORD`` from the options' ``valueFrom``,
  ``RAY_external_storage_namespace``, ``RAY_gcs_storage``/``_path``; workers get
  ``RAY_gcs_rpc_server_reconnect_timeout_s=600`` only with FT);
- workers: the ``wait-gcs-ready`` init container that loops ``ray health-check`` against the head.
The kubelet must resolve ``fieldRef`` (``metadata.labels['…']``, ``metadata.name``,
``metadata.namespace``, ``status.podIP``) and ``secretKeyRef`` env values.

mTLS (gate ``RayClusterMTLS``, ``tlsOptions.enabled``): `configure_tls` mounts the cert-manager
Secret of the node type at ``/etc/ray/tls``, sets ``RAY_USE_TLS`` and the three file variables on
the Ray container, ``wait-gcs-ready`` and the autoscaler sidecar, and prepends the
``wait-for-tls-ip-san`` init container.

Not ported (the features are alpha-gated or out of scope, SPEC §7.3): the history-server collector
container, batch-scheduler metadata. With those features requested the Pods are built as if they
were off.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs

from ..utils import constant as C
from ..utils import util
from ..utils.features import DEFAULTS, RAY_MULTI_HOST_INDEXING, FeatureGates
from ..utils.util import EMPTY_ENV, Obj, dig

#: ``customAcceleratorToRayResourceMap``: the first non-zero such limit becomes a Ray resource.
_CUSTOM_ACCELERATOR_TO_RAY_RESOURCE = {
    "aws.amazon.com/neuroncore": "neuron_cores",
    "google.com/tpu": "TPU",
}
#: ``ray start`` flags that take an explicit boolean (``--flag=false``) instead of being a switch.
_SPECIAL_PARAMETER_OPTIONS = ("log-color", "include-dashboard", "include-log-monitor")


@attrs.frozen
class PodBuildOptions:
    """What the builders read from the operator process rather than from the RayCluster.

    The parts of ``RayClusterReconcilerOptions`` that reach Pods, the operator's environment (the
    variables Go reads with ``os.Getenv``) and its feature gates.
    """

    env: Mapping[str, str] = attrs.field(factory=dict)
    gates: FeatureGates = DEFAULTS
    default_container_envs: tuple[Obj, ...] = ()
    head_sidecar_containers: tuple[Obj, ...] = ()
    worker_sidecar_containers: tuple[Obj, ...] = ()
    default_pod_annotations: Mapping[str, str] = attrs.field(factory=dict)
    default_pod_labels: Mapping[str, str] = attrs.field(factory=dict)


DEFAULT_OPTIONS = PodBuildOptions()


# ---------------------------------------------------------------------------------------------
# Quantities (k8s resource.Quantity, only what the builders need)
# ---------------------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(value: Any) -> Fraction:
    """The exact value of a Kubernetes quantity ("500m", "2Gi", "1e3", 4); ValueError if malformed."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int | float):
        return Fraction(value)
    return _parse_quantity_text(str(value).strip())


@functools.lru_cache(maxsize=1024)
def _parse_quantity_text(text: str) -> Fraction:
    # Memoised: a world holds a few distinct quantity strings ("100m", "2Gi") that every
    # reconcile parses again; a Fraction is immutable, and a malformed string is not cached.
    match = _QUANTITY_RE.match(text)
    if match is None:
        raise ValueError("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix and suffix[0] in "eE":
        return number * Fraction(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]


def _quantity_value(value: Any) -> int:
    # resource.Quantity.Value(): rounded up to an integer.
    return math.ceil(parse_quantity(value))


def _go_float(f: float) -> str:
    # encoding/json's float64 form for the values that occur here: integers without ".0".
    if f == int(f) and abs(f) < 1e21:
        return str(int(f))
    return repr(f)


def _go_json_float_map(m: Mapping[str, float]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{_go_float(v)}" for k, v in sorted(m.items())) + "}"


def is_gpu_resource_key(key: str) -> bool:
    """Port of `IsGPUResourceKey` (resources.go): "...gpu" or an NVIDIA MIG slice."""
    return key.endswith("gpu") or _MIG_RE.search(key) is not None


_MIG_RE = re.compile(r"nvidia\.com/mig-\d+g\.\d+gb$")


# ---------------------------------------------------------------------------------------------
# GCS fault tolerance
# ---------------------------------------------------------------------------------------------


def get_head_port(head_start_params: Mapping[str, str]) -> str:
    """Port of `GetHeadPort` (pod.go): ``rayStartParams.port`` or "6379"."""
    if "port" in head_start_params:
        return str(head_start_params["port"])
    return str(C.DEFAULT_GCS_SERVER_PORT)


def _is_overwrite_ray_container_cmd(instance: Mapping[str, Any]) -> bool:
    value = util.annotations_of(instance).get(C.RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY)
    return value is not None and value.lower() == "true"


def init_template_annotations(instance: Mapping[str, Any], pod_template: Obj) -> None:
    """Port of `initTemplateAnnotations` (pod.go): carry ``ray.io/overwrite-container-cmd`` to the Pod."""
    annotations = pod_template.setdefault("metadata", {}).setdefault("annotations", {})
    if _is_overwrite_ray_container_cmd(instance):
        annotations[C.RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY] = "true"


def _ray_container(pod_template: Obj) -> Obj:
    container: Obj = pod_template["spec"]["containers"][C.RAY_CONTAINER_INDEX]
    return container


def configure_gcs_fault_tolerance(pod_template: Obj, instance: Obj, node_type: str) -> None:
    """Port of `configureGCSFaultTolerance` (pod.go).

    Head: annotation ``ray.io/ft-enabled`` "true"/"false" always. With FT: workers get
    ``RAY_gcs_rpc_server_reconnect_timeout_s=600`` unless set; the head gets the backend's settings
    (`configure_redis_ft` or `configure_embedded_ft`). Mutates ``pod_template`` and, like Go,
    ``instance``'s head ``rayStartParams``.
    """
    spec = instance.get("spec", {})
    ft_enabled = util.is_gcs_fault_tolerance_enabled(spec, util.annotations_of(instance))
    annotations = pod_template.setdefault("metadata", {}).setdefault("annotations", {})
    if node_type == C.HEAD_NODE:
        annotations[C.RAY_FT_ENABLED_ANNOTATION_KEY] = "true" if ft_enabled else "false"
    if not ft_enabled:
        return
    options = spec.get("gcsFaultToleranceOptions")
    container = _ray_container(pod_template)
    env = container.setdefault("env", [])
    if node_type == C.WORKER_NODE and not util.env_var_exists(C.RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S, env):
        # Ray's default is 60 s; a new GCS usually needs longer, so workers wait up to 600 s.
        env.append({"name": C.RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S,
                    "value": C.DEFAULT_WORKER_RAY_GCS_RECONNECT_TIMEOUT_S})
    if node_type == C.HEAD_NODE:
        if util.is_gcs_fault_tolerance_embedded(options):
            configure_embedded_ft(pod_template, instance, container)
        else:
            configure_redis_ft(pod_template, instance, options, container)


def get_external_storage_namespace(instance: Mapping[str, Any]) -> str:
    """The Redis storage namespace `configure_redis_ft` resolves (not a Go function of its own).

    The RayCluster UID, overridden by annotation ``ray.io/external-storage-namespace``, overridden by
    ``gcsFaultToleranceOptions.externalStorageNamespace``. Because the UID is the default, the same
    CR reuses its data across head restarts while a re-created CR starts empty.
    """
    storage_ns = str(dig(instance, "metadata", "uid") or "")
    annotations = util.annotations_of(instance)
    if C.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY in annotations:
        storage_ns = annotations[C.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY]
    configured = dig(instance, "spec", "gcsFaultToleranceOptions", "externalStorageNamespace")
    if configured:
        storage_ns = str(configured)
    return storage_ns


def _credential_env(name: str, credential: Mapping[str, Any]) -> Obj:
    env: Obj = {"name": name}
    if credential.get("value"):
        env["value"] = credential["value"]
    if credential.get("valueFrom") is not None:
        env["valueFrom"] = util.deep_copy(credential["valueFrom"])
    return env


def configure_redis_ft(pod_template: Obj, instance: Obj, options: Mapping[str, Any] | None,
                       container: Obj) -> None:
    """Port of `configureRedisFT` (pod.go).

    Storage namespace to the head annotation and ``RAY_external_storage_namespace`` (unless set).
    With options: ``RAY_REDIS_ADDRESS`` (appended even when empty), ``REDIS_USERNAME`` /
    ``REDIS_PASSWORD`` from the credential's value or valueFrom, and ``rayStartParams``
    ``redis-username``/``redis-password`` pointing at those env vars. Legacy annotation path: copy
    ``rayStartParams.redis-password`` into ``REDIS_PASSWORD`` for the cleanup Job.
    """
    storage_ns = get_external_storage_namespace(instance)
    pod_template["metadata"]["annotations"][C.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY] = storage_ns
    env = container.setdefault("env", [])
    if not util.env_var_exists(C.RAY_EXTERNAL_STORAGE_NS, env):
        env.append({"name": C.RAY_EXTERNAL_STORAGE_NS, "value": storage_ns})
    head_params = instance["spec"]["headGroupSpec"].setdefault("rayStartParams", {})
    if options is not None:
        env.append({"name": C.RAY_REDIS_ADDRESS, "value": options.get("redisAddress", "")})
        if options.get("redisUsername") is not None:
            head_params["redis-username"] = "$REDIS_USERNAME"
            env.append(_credential_env(C.REDIS_USERNAME, options["redisUsername"]))
        if options.get("redisPassword") is not None:
            head_params["redis-password"] = "$REDIS_PASSWORD"
            env.append(_credential_env(C.REDIS_PASSWORD, options["redisPassword"]))
    elif not util.env_var_exists(C.REDIS_PASSWORD, env) and "redis-password" in head_params:
        env.append({"name": C.REDIS_PASSWORD, "value": head_params["redis-password"]})


def configure_embedded_ft(pod_template: Obj, instance: Obj, container: Obj) -> None:
    """Port of `configureEmbeddedFT` (pod.go).

    ``RAY_gcs_storage=rocksdb`` and ``RAY_gcs_storage_path=/data/gcs`` unless set, and the PVC
    (``storage.claimName`` or ``<cluster>-gcs-pvc``) mounted at ``/data/gcs`` (with ``subPath``).
    """
    storage = dig(instance, "spec", "gcsFaultToleranceOptions", "storage")
    env = container.setdefault("env", [])
    if not util.env_var_exists(C.RAY_GCS_STORAGE, env):
        env.append({"name": C.RAY_GCS_STORAGE, "value": C.GCS_STORAGE_ROCKS_DB_VALUE})
    if not util.env_var_exists(C.RAY_GCS_STORAGE_PATH, env):
        env.append({"name": C.RAY_GCS_STORAGE_PATH, "value": C.GCS_STORAGE_MOUNT_PATH})
    mount: Obj = {"name": C.GCS_STORAGE_VOLUME_NAME, "mountPath": C.GCS_STORAGE_MOUNT_PATH}
    sub_path = (storage or {}).get("subPath", "")
    if sub_path:
        mount["subPath"] = sub_path
    container.setdefault("volumeMounts", []).append(mount)
    pod_template["spec"].setdefault("volumes", []).append({
        "name": C.GCS_STORAGE_VOLUME_NAME,
        "persistentVolumeClaim": {"claimName": util.get_gcs_storage_pvc_name(instance)},
    })


# ---------------------------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------------------------


def _add_metrics_port_if_missing(pod_template: Obj) -> None:
    container = _ray_container(pod_template)
    if util.find_container_port(container, C.METRICS_PORT_NAME, -1) == -1:
        container.setdefault("ports", []).append(
            {"name": C.METRICS_PORT_NAME, "containerPort": C.DEFAULT_METRICS_PORT})


def default_head_pod_template(instance: Obj, head_spec: Obj, pod_name: str, head_port: str,
                              options: PodBuildOptions = DEFAULT_OPTIONS) -> Obj:
    """Port of `DefaultHeadPodTemplate` (pod.go).

    The head group's template with name/generateName, the RayCluster's namespace, `label_pod`
    labels, completed ``rayStartParams`` (mutated in ``head_spec``, as Go does), the autoscaler
    sidecar when in-tree autoscaling is on, GCS FT settings, a metrics port and token-auth env.
    """
    template: Obj = util.deep_copy(head_spec.get("template") or {})
    meta = template.setdefault("metadata", {})
    if util.is_deterministic_head_pod_name_enabled(options.env):
        meta["name"] = pod_name
    else:
        meta["generateName"] = pod_name
    meta["namespace"] = dig(instance, "metadata", "namespace")
    params = head_spec.setdefault("rayStartParams", {})
    update_ray_start_params_resources(params, head_spec.get("resources"))
    update_ray_start_params_labels(params, head_spec.get("labels"))
    merged = merge_labels(dig(head_spec, "template", "metadata", "labels"), head_spec.get("labels"))
    cluster_name = dig(instance, "metadata", "name")
    meta["labels"] = label_pod(C.HEAD_NODE, cluster_name, C.RAY_NODE_HEAD_GROUP_LABEL_VALUE, merged)
    set_missing_ray_start_params(params, C.HEAD_NODE, head_port, "")
    init_template_annotations(instance, template)
    spec = instance.get("spec", {})
    if util.is_autoscaling_enabled(spec):
        params["no-monitor"] = "true"
        account = util.get_head_group_service_account_name(instance)
        template["spec"]["serviceAccountName"] = util.check_name(account)
        autoscaler = build_autoscaler_container(_ray_container(template).get("image", ""), options.env)
        if util.is_auth_enabled(spec):
            set_container_token_auth_env_vars(cluster_name, autoscaler, spec.get("authOptions"))
        if util.is_tls_enabled(spec, options.gates):
            set_container_tls_config(autoscaler)
        merge_autoscaler_overrides(autoscaler, spec.get("autoscalerOptions"))
        template["spec"]["containers"].append(autoscaler)
        if util.is_autoscaling_v2_enabled(spec):
            _ray_container(template).setdefault("env", []).append(
                {"name": C.RAY_ENABLE_AUTOSCALER_V2, "value": "true"})
            template["spec"]["restartPolicy"] = "Never"
        elif util.is_autoscaling_v1_enabled(spec):
            _ray_container(template).setdefault("env", []).append(
                {"name": C.RAY_ENABLE_AUTOSCALER_V2, "value": "false"})
    configure_gcs_fault_tolerance(template, instance, C.HEAD_NODE)
    _add_metrics_port_if_missing(template)
    if util.is_auth_enabled(spec):
        configure_token_auth(cluster_name, template, spec.get("authOptions"))
    configure_tls(template, instance, C.HEAD_NODE, options.gates)
    return template


@functools.lru_cache(maxsize=1024)
def _wait_gcs_ready_script(fqdn_ray_ip: str, head_port: str) -> str:
    # Memoised: each worker Pod of a cluster gets the same text.
    address = f"{fqdn_ray_ip}:{head_port}"
    lines = [
        "SECONDS=0",
        "while true; do",
        "\tif (( SECONDS <= 120 )); then",
        f"\t\tif ray health-check --address {address} > /dev/null 2>&1; then",
        '\t\t\techo "GCS is ready."',
        "\t\t\tbreak",
        "\t\tfi",
        '\t\techo "$SECONDS seconds elapsed: Waiting for GCS to be ready."',
        "\telse",
        f"\t\tif ray health-check --address {address}; then",
        '\t\t\techo "GCS is ready. Any error messages above can be safely ignored."',
        "\t\t\tbreak",
        "\t\tfi",
        '\t\techo "$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, '
        'refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html."',
        "\tfi",
        "\tsleep 5",
        "done",
    ]
    # Go's raw string keeps the source indentation: five tabs per line, four before the closing quote.
    return "\n" + "".join("\t" * 5 + line + "\n" for line in lines) + "\t" * 4


def build_wait_gcs_ready_init_container(ray_container: Mapping[str, Any], fqdn_ray_ip: str, head_port: str,
                                        env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """The ``wait-gcs-ready`` init container of `default_worker_pod_template` (pod.go).

    Loops ``ray health-check --address <head FQDN>:<port>`` every 5 s until it succeeds (quiet for
    the first 120 s), with the Ray container's image, env and mounts and fixed 200m/256Mi.
    """
    container: Obj = {
        "name": C.WAIT_GCS_READY_CONTAINER_NAME,
        "image": ray_container.get("image", ""),
        "command": util.get_container_command([], env),
        "args": [_wait_gcs_ready_script(fqdn_ray_ip, head_port)],
        "resources": {"limits": {"cpu": "200m", "memory": "256Mi"},
                      "requests": {"cpu": "200m", "memory": "256Mi"}},
    }
    if ray_container.get("imagePullPolicy"):
        container["imagePullPolicy"] = ray_container["imagePullPolicy"]
    if ray_container.get("securityContext") is not None:
        container["securityContext"] = util.deep_copy(ray_container["securityContext"])
    if ray_container.get("env"):
        container["env"] = util.deep_copy(ray_container["env"])
    if ray_container.get("volumeMounts"):
        container["volumeMounts"] = util.deep_copy(ray_container["volumeMounts"])
    return container


def default_worker_pod_template(instance: Obj, worker_spec: Obj, pod_name: str, fqdn_ray_ip: str,
                                head_port: str, replica_grp_name: str = "", replica_index: int = 0,
                                num_host_index: int = 0, options: PodBuildOptions = DEFAULT_OPTIONS) -> Obj:
    """Port of `DefaultWorkerPodTemplate` (pod.go).

    The group's template with ``generateName``, the ``wait-gcs-ready`` init container (unless
    ``ENABLE_INIT_CONTAINER_INJECTION=false``), labels (plus replica index labels with
    RayMultiHostIndexing), completed ``rayStartParams`` (``address`` = head FQDN:port), GCS FT
    settings (the 600 s reconnect timeout), metrics port, autoscaler-v2 restartPolicy, token auth.
    """
    template: Obj = util.deep_copy(worker_spec.get("template") or {})
    meta = template.setdefault("metadata", {})
    meta["generateName"] = pod_name
    meta["namespace"] = dig(instance, "metadata", "namespace")
    if options.env.get(C.ENABLE_INIT_CONTAINER_INJECTION_ENV_KEY, "").lower() != "false":
        init = build_wait_gcs_ready_init_container(_ray_container(template), fqdn_ray_ip, head_port,
                                                   options.env)
        template["spec"].setdefault("initContainers", []).append(init)
    meta.pop("name", None)  # several replicas: only generateName avoids conflicts
    params = worker_spec.setdefault("rayStartParams", {})
    update_ray_start_params_resources(params, worker_spec.get("resources"))
    update_ray_start_params_labels(params, worker_spec.get("labels"))
    merged = merge_labels(dig(worker_spec, "template", "metadata", "labels"), worker_spec.get("labels"))
    cluster_name = dig(instance, "metadata", "name")
    labels = label_pod(C.WORKER_NODE, cluster_name, worker_spec.get("groupName", ""), merged)
    if options.gates.enabled(RAY_MULTI_HOST_INDEXING):
        labels[C.RAY_WORKER_REPLICA_INDEX_KEY] = str(replica_index)
        if int(worker_spec.get("numOfHosts") or 1) > 1:
            labels[C.RAY_WORKER_REPLICA_NAME_KEY] = replica_grp_name
            labels[C.RAY_HOST_INDEX_KEY] = str(num_host_index)
    meta["labels"] = labels
    set_missing_ray_start_params(params, C.WORKER_NODE, head_port, fqdn_ray_ip)
    init_template_annotations(instance, template)
    configure_gcs_fault_tolerance(template, instance, C.WORKER_NODE)
    _add_metrics_port_if_missing(template)
    spec = instance.get("spec", {})
    if util.is_autoscaling_enabled(spec) and util.is_autoscaling_v2_enabled(spec):
        template["spec"]["restartPolicy"] = "Never"
    if util.is_auth_enabled(spec):
        configure_token_auth(cluster_name, template, spec.get("authOptions"))
    configure_tls(template, instance, C.WORKER_NODE, options.gates)
    return template


# ---------------------------------------------------------------------------------------------
# mTLS (configureTLS, SetContainerTLSConfig)
# ---------------------------------------------------------------------------------------------

#: The shell loop of ``wait-for-tls-ip-san`` (pod.go ``configureTLS``): until the mounted
#: certificate lists the Pod's IP as a SAN, every 5 s.
WAIT_FOR_TLS_IP_SAN_SCRIPT = """CERT="%s"
if [ -z "${POD_IP}" ]; then
  POD_IP=$(hostname -i 2>/dev/null | awk '{print $1}')
fi
if ! command -v openssl >/dev/null 2>&1; then
  echo "openssl not found; cannot verify IP SAN" >&2
  exit 1
fi
echo "Waiting for TLS cert to include IP SAN for ${POD_IP}..."
while true; do
  if openssl x509 -in "${CERT}" -noout -text 2>/dev/null | grep -qE "IP Address:${POD_IP}([^0-9.]|$)"; then
    echo "TLS cert now includes IP SAN for ${POD_IP}"
    exit 0
  fi
  echo "IP SAN for ${POD_IP} not yet in cert, retrying in 5s..."
  sleep 5
done"""


def configure_tls(pod_template: Obj, instance: Mapping[str, Any], node_type: str,
                  gates: FeatureGates = DEFAULTS) -> None:
    """Port of `configureTLS` (pod.go): with TLS on, the node type's cert-manager Secret as volume
    ``ray-tls`` (once), the TLS env and mount on the Ray container and on ``wait-gcs-ready`` (not
    on other init containers), and the ``wait-for-tls-ip-san`` init container prepended (once)."""
    if not util.is_tls_enabled(instance.get("spec"), gates):
        return
    spec = pod_template.setdefault("spec", {})
    secret_name = util.get_tls_secret_name(dig(instance, "metadata", "name") or "", node_type)
    volumes = spec.setdefault("volumes", [])
    if not any(v.get("name") == C.RAY_TLS_VOLUME_NAME for v in volumes):
        volumes.append({"name": C.RAY_TLS_VOLUME_NAME, "secret": {"secretName": secret_name}})
    ray = _ray_container(pod_template)
    set_container_tls_config(ray)
    inits = spec.setdefault("initContainers", [])
    for init in inits:
        if init.get("name") == C.WAIT_GCS_READY_CONTAINER_NAME:
            set_container_tls_config(init)
    wait: Obj = {
        "name": C.WAIT_FOR_TLS_IP_SAN_CONTAINER_NAME,
        "image": ray.get("image", ""),
        "command": ["sh", "-c"],
        "args": [WAIT_FOR_TLS_IP_SAN_SCRIPT % f"{C.RAY_TLS_CERT_MOUNT_PATH}/tls.crt"],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "volumeMounts": [{"name": C.RAY_TLS_VOLUME_NAME, "mountPath": C.RAY_TLS_CERT_MOUNT_PATH,
                          "readOnly": True}],
        "resources": {"limits": {"cpu": "50m", "memory": "64Mi"},
                      "requests": {"cpu": "50m", "memory": "64Mi"}},
    }
    if ray.get("imagePullPolicy"):
        wait["imagePullPolicy"] = ray["imagePullPolicy"]
    if ray.get("securityContext") is not None:
        wait["securityContext"] = util.deep_copy(ray["securityContext"])
    if any(init.get("name") == C.WAIT_FOR_TLS_IP_SAN_CONTAINER_NAME for init in inits):
        return
    inits.insert(0, wait)


def set_container_tls_config(container: Obj) -> None:
    """Port of `SetContainerTLSConfig` (pod.go): ``RAY_USE_TLS=1`` and the cert, key and CA paths
    under ``/etc/ray/tls`` (each only if the container does not set it), and the ``ray-tls``
    mount unless one has that name or path."""
    env = container.setdefault("env", [])
    present = {e.get("name") for e in env}
    mount_path = C.RAY_TLS_CERT_MOUNT_PATH
    for name, value in ((C.RAY_USE_TLS, "1"), (C.RAY_TLS_SERVER_CERT, f"{mount_path}/tls.crt"),
                        (C.RAY_TLS_SERVER_KEY, f"{mount_path}/tls.key"),
                        (C.RAY_TLS_CA_CERT, f"{mount_path}/ca.crt")):
        if name not in present:
            env.append({"name": name, "value": value})
    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("name") == C.RAY_TLS_VOLUME_NAME or m.get("mountPath") == mount_path
               for m in mounts):
        mounts.append({"name": C.RAY_TLS_VOLUME_NAME, "mountPath": mount_path, "readOnly": True})


# ---------------------------------------------------------------------------------------------
# Autoscaler and token auth
# ---------------------------------------------------------------------------------------------


def build_autoscaler_container(autoscaler_image: str, env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `BuildAutoscalerContainer` (pod.go): the ``autoscaler`` sidecar (500m/512Mi)."""
    start_cmd = ("ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
                 "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)")
    return {
        "name": C.AUTOSCALER_CONTAINER_NAME,
        "image": autoscaler_image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": C.RAY_CLUSTER_NAME,
             "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{C.RAY_CLUSTER_LABEL_KEY}']"}}},
            {"name": C.RAY_CLUSTER_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "RAY_HEAD_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            {"name": C.KUBERAY_GEN_AUTOSCALER_START_CMD, "value": start_cmd},
        ],
        "command": util.get_container_command([], env),
        "args": [start_cmd],
        "resources": {"limits": {"cpu": "500m", "memory": "512Mi"},
                      "requests": {"cpu": "500m", "memory": "512Mi"}},
    }


def merge_autoscaler_overrides(container: Obj, autoscaler_options: Mapping[str, Any] | None) -> None:
    """Port of `mergeAutoscalerOverrides` (pod.go): ``autoscalerOptions`` replace or extend fields."""
    if autoscaler_options is None:
        return
    for key in ("resources", "image", "imagePullPolicy", "securityContext"):
        if autoscaler_options.get(key) is not None:
            container[key] = util.deep_copy(autoscaler_options[key])
    for key in ("env", "envFrom", "volumeMounts"):
        if autoscaler_options.get(key):
            container.setdefault(key, []).extend(util.deep_copy(autoscaler_options[key]))
    for key in ("command", "args"):
        if autoscaler_options.get(key):
            container[key] = list(autoscaler_options[key])


def add_ray_token_volume(pod_spec: Obj) -> None:
    """Port of `AddRayTokenVolume` (pod.go): the projected service-account token volume, once."""
    volumes = pod_spec.setdefault("volumes", [])
    if util.volume_exists(C.RAY_TOKEN_VOLUME_NAME, volumes):
        return
    volumes.append({"name": C.RAY_TOKEN_VOLUME_NAME,
                    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}})


def set_container_token_auth_env_vars(cluster_name: str, container: Obj,
                                      auth_options: Mapping[str, Any] | None) -> None:
    """Port of `SetContainerTokenAuthEnvVars` (pod.go): ``RAY_AUTH_MODE=token`` and the token source."""
    env = container.setdefault("env", [])
    if not util.env_var_exists(C.RAY_AUTH_MODE_ENV_VAR, env):
        env.append({"name": C.RAY_AUTH_MODE_ENV_VAR, "value": C.AUTH_MODE_TOKEN})
    if util.is_k8s_auth_enabled(auth_options):
        if not util.env_var_exists(C.RAY_ENABLE_K8S_TOKEN_AUTH_ENV_VAR, env):
            env.append({"name": C.RAY_ENABLE_K8S_TOKEN_AUTH_ENV_VAR, "value": "true"})
        mounts = container.setdefault("volumeMounts", [])
        if not util.volume_mount_exists(C.RAY_TOKEN_VOLUME_NAME, mounts):
            mounts.append({"name": C.RAY_TOKEN_VOLUME_NAME, "mountPath": C.RAY_TOKEN_MOUNT_PATH,
                           "readOnly": True})
        return
    secret_name = util.check_name(cluster_name)
    if auth_options is not None and auth_options.get("secretName"):
        secret_name = auth_options["secretName"]
    if not util.env_var_exists(C.RAY_AUTH_TOKEN_ENV_VAR, env):
        env.append({"name": C.RAY_AUTH_TOKEN_ENV_VAR,
                    "valueFrom": {"secretKeyRef": {"name": secret_name, "key": C.RAY_AUTH_TOKEN_SECRET_KEY}}})


def configure_token_auth(cluster_name: str, pod_template: Obj,
                         auth_options: Mapping[str, Any] | None) -> None:
    """Port of `configureTokenAuth` (pod.go): the Ray container and ``wait-gcs-ready`` get the token env."""
    set_container_token_auth_env_vars(cluster_name, _ray_container(pod_template), auth_options)
    if util.is_k8s_auth_enabled(auth_options):
        add_ray_token_volume(pod_template["spec"])
    for init in pod_template["spec"].get("initContainers") or []:
        if init.get("name") == C.WAIT_GCS_READY_CONTAINER_NAME:
            set_container_token_auth_env_vars(cluster_name, init, auth_options)


# ---------------------------------------------------------------------------------------------
# BuildPod
# ---------------------------------------------------------------------------------------------


def build_pod(pod_template_spec: Obj, node_type: str, ray_start_params: Obj, head_port: str,
              enable_ray_autoscaler: bool, creator_crd_type: str, fqdn_ray_ip: str,
              default_container_envs: Sequence[Mapping[str, Any]] = (), ray_version: str = "",
              env: Mapping[str, str] = EMPTY_ENV, *, copy_template: bool = True) -> Obj:
    """Port of `BuildPod` (pod.go).

    Turns a template into a Pod: the ``ray.io/serve`` label for RayService clusters (workers "true",
    head "false"), ``/dev/shm``, the generated ``ulimit -n ...; ray start ...`` command (unless the
    overwrite annotation is set or the user's command already runs ``ray start``), init-container
    and Ray-container env, and probes (unless ``ENABLE_PROBES_INJECTION=false``).

    ``pod_template_spec`` is not modified, unless ``copy_template=False``: the Pod is then made of
    the template's own parts, as Go's (which takes the struct by value and shares its slices and
    maps); the builders pass a template they have just made and do not keep.
    """
    template = util.deep_copy(pod_template_spec) if copy_template else pod_template_spec
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    if creator_crd_type == C.RAY_SERVICE_CRD:
        labels[C.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY] = C.ENABLE_RAY_CLUSTER_SERVING_SERVICE_TRUE
        if node_type == C.HEAD_NODE:
            labels[C.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY] = C.ENABLE_RAY_CLUSTER_SERVING_SERVICE_FALSE
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}
    ray_container = pod["spec"]["containers"][C.RAY_CONTAINER_INDEX]

    if C.PLASMA_DIRECTORY_PARAM_KEY not in ray_start_params:
        _add_empty_dir(ray_container, pod, C.SHARED_MEMORY_VOLUME_NAME, C.SHARED_MEMORY_VOLUME_MOUNT_PATH,
                       "Memory")
    if node_type == C.HEAD_NODE and enable_ray_autoscaler:
        autoscaler = next(c for c in pod["spec"]["containers"]
                          if c.get("name") == C.AUTOSCALER_CONTAINER_NAME)
        _add_empty_dir(ray_container, pod, C.RAY_LOG_VOLUME_NAME, C.RAY_LOG_VOLUME_MOUNT_PATH, "")
        _add_empty_dir(autoscaler, pod, C.RAY_LOG_VOLUME_NAME, C.RAY_LOG_VOLUME_MOUNT_PATH, "")

    cmd = ""
    if ray_container.get("command"):
        cmd = _convert_cmd_to_string(ray_container["command"])
    if ray_container.get("args"):
        cmd += _convert_cmd_to_string(ray_container["args"])
    ulimit_cmd = f"ulimit -n ${{{C.RAY_START_ULIMIT_OPEN_FILES}:-65536}}"
    ray_start_cmd = generate_ray_start_command(node_type, ray_start_params,
                                               ray_container.get("resources") or {})
    template_annotations = dig(template, "metadata", "annotations") or {}
    overwrite = template_annotations.get(C.RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY)
    is_overwrite = overwrite is not None and overwrite.lower() == "true"
    if not is_overwrite and "ray start" not in cmd:
        generated = f"{ulimit_cmd}; {ray_start_cmd}"
        ray_container["command"] = util.get_container_command([], env)
        # `ray start --block` never returns, so the user's own command must run first.
        ray_container["args"] = [f"{cmd} && {generated}" if cmd else generated]

    for init in pod["spec"].get("initContainers") or []:
        set_init_container_env_vars(init, fqdn_ray_ip)
    set_container_env_vars(pod, node_type, fqdn_ray_ip, head_port, ray_start_cmd, creator_crd_type,
                           default_container_envs)
    if env.get(C.ENABLE_PROBES_INJECTION, "").lower() != "false":
        init_liveness_and_readiness_probe(ray_container, node_type, creator_crd_type, ray_start_params,
                                          ray_version)
    return pod


def _convert_cmd_to_string(cmd: Sequence[str]) -> str:
    return "".join(f" {part} " for part in cmd)


def _add_empty_dir(container: Obj, pod: Obj, volume_name: str, mount_path: str, medium: str) -> None:
    """Port of `addEmptyDir` (pod.go): an emptyDir (memory-sized for /dev/shm) mounted once."""
    mounts = container.setdefault("volumeMounts", [])
    if any(m.get("mountPath") == mount_path for m in mounts):
        return
    volumes = pod["spec"].setdefault("volumes", [])
    if not util.volume_exists(volume_name, volumes):
        empty_dir: Obj = {}
        if medium:
            empty_dir["medium"] = medium
        if medium == "Memory":
            resources = container.get("resources") or {}
            size = (resources.get("limits") or {}).get("memory")
            if size is None:
                size = (resources.get("requests") or {}).get("memory")
            if size is not None:
                empty_dir["sizeLimit"] = size
        volumes.append({"name": volume_name, "emptyDir": empty_dir})
    mounts.append({"mountPath": mount_path, "name": volume_name})


def label_pod(node_type: str, cluster_name: str, group_name: str,
              override_labels: Mapping[str, str] | None) -> Obj:
    """Port of `labelPod` (pod.go).

    The seven default labels (is-ray-node, cluster, node-type, group, identifier trimmed to 63,
    app name, created-by); user labels are merged but never override cluster, node-type or group.
    """
    labels: Obj = {
        C.RAY_NODE_LABEL_KEY: "yes",
        C.RAY_CLUSTER_LABEL_KEY: cluster_name,
        C.RAY_NODE_TYPE_LABEL_KEY: node_type,
        C.RAY_NODE_GROUP_LABEL_KEY: group_name,
        C.RAY_ID_LABEL_KEY: util.check_label(util.generate_identifier(cluster_name, node_type)),
        C.KUBERNETES_APPLICATION_NAME_LABEL_KEY: C.APPLICATION_NAME,
        C.KUBERNETES_CREATED_BY_LABEL_KEY: C.COMPONENT_NAME,
    }
    for key, value in (override_labels or {}).items():
        if key in (C.RAY_NODE_TYPE_LABEL_KEY, C.RAY_NODE_GROUP_LABEL_KEY, C.RAY_CLUSTER_LABEL_KEY):
            continue
        labels[key] = value
    return labels


def set_init_container_env_vars(container: Obj, fqdn_ray_ip: str) -> None:
    """Port of `setInitContainerEnvVars` (pod.go): ``FQ_RAY_IP`` and the deprecated ``RAY_IP``."""
    container.setdefault("env", []).extend([
        {"name": C.FQ_RAY_IP, "value": fqdn_ray_ip},
        {"name": C.RAY_IP, "value": util.extract_ray_ip_from_fqdn(fqdn_ray_ip)},
    ])


def _field_ref_env(name: str, field_path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def set_container_env_vars(pod: Obj, node_type: str, fqdn_ray_ip: str, head_port: str, ray_start_cmd: str,
                           creator_crd_type: str,
                           default_container_envs: Sequence[Mapping[str, Any]] = ()) -> None:
    """Port of `setContainerEnvVars` (pod.go).

    In order: the operator's default envs (if absent); workers ``FQ_RAY_IP``/``RAY_IP``;
    ``RAY_CLUSTER_NAME``, ``RAY_CLUSTER_NAMESPACE``, ``RAY_CLOUD_INSTANCE_ID``, ``RAY_NODE_TYPE_NAME``
    (fieldRefs); ``KUBERAY_GEN_RAY_START_CMD``; ``RAY_PORT``; for RayService clusters three timeouts;
    ``RAY_ADDRESS`` (``127.0.0.1:<port>`` on the head, ``<FQDN>:<port>`` on workers); usage stats;
    disk usage.
    """
    container = pod["spec"]["containers"][C.RAY_CONTAINER_INDEX]
    env: list[Obj] = container.setdefault("env", [])
    for default_env in default_container_envs:
        if not util.env_var_exists(default_env.get("name", ""), env):
            env.append(util.deep_copy(dict(default_env)))
    ip = C.LOCAL_HOST
    if node_type == C.WORKER_NODE:
        ip = fqdn_ray_ip
        env.append({"name": C.FQ_RAY_IP, "value": ip})
        env.append({"name": C.RAY_IP, "value": util.extract_ray_ip_from_fqdn(ip)})
    env.append(_field_ref_env(C.RAY_CLUSTER_NAME, f"metadata.labels['{C.RAY_CLUSTER_LABEL_KEY}']"))
    env.append(_field_ref_env(C.RAY_CLUSTER_NAMESPACE, "metadata.namespace"))
    env.append(_field_ref_env(C.RAY_CLOUD_INSTANCE_ID, "metadata.name"))
    env.append(_field_ref_env(C.RAY_NODE_TYPE_NAME, f"metadata.labels['{C.RAY_NODE_GROUP_LABEL_KEY}']"))
    env.append({"name": C.KUBERAY_GEN_RAY_START_CMD, "value": ray_start_cmd})
    if not util.env_var_exists(C.RAY_PORT, env):
        env.append({"name": C.RAY_PORT, "value": head_port})
    if creator_crd_type == C.RAY_SERVICE_CRD:
        for name, value in ((C.RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO, "0"),
                            (C.RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS, "5"),
                            (C.RAY_SERVE_KV_TIMEOUT_S, "5")):
            if not util.env_var_exists(name, env):
                env.append({"name": name, "value": value})
    if not util.env_var_exists(C.RAY_ADDRESS, env):
        env.append({"name": C.RAY_ADDRESS, "value": f"{ip}:{head_port}"})
    if not util.env_var_exists(C.RAY_USAGE_STATS_KUBERAY_IN_USE, env):
        env.append({"name": C.RAY_USAGE_STATS_KUBERAY_IN_USE, "value": "1"})
    if node_type == C.HEAD_NODE:
        env.append({"name": C.RAY_USAGE_STATS_EXTRA_TAGS,
                    "value": f"kuberay_version={C.KUBERAY_VERSION};kuberay_crd={creator_crd_type}"})
    if not util.env_var_exists(C.RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, env):
        env.append({"name": C.RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, "value": "1"})


# ---------------------------------------------------------------------------------------------
# rayStartParams and the `ray start` command
# ---------------------------------------------------------------------------------------------


def set_missing_ray_start_params(params: Obj, node_type: str, head_port: str, fqdn_ray_ip: str) -> Obj:
    """Port of `setMissingRayStartParams` (pod.go); mutates and returns ``params``.

    Workers: ``address=<FQDN>:<port>``; head: ``dashboard-host=0.0.0.0``; everyone:
    ``metrics-export-port=8080``, ``block=true`` (always), ``dashboard-agent-listen-port=52365``.
    """
    if node_type == C.WORKER_NODE and "address" not in params:
        params["address"] = f"{fqdn_ray_ip}:{head_port}"
    if node_type == C.HEAD_NODE and "dashboard-host" not in params:
        params["dashboard-host"] = "0.0.0.0"
    if "metrics-export-port" not in params:
        params["metrics-export-port"] = str(C.DEFAULT_METRICS_PORT)
    params["block"] = "true"
    if "dashboard-agent-listen-port" not in params:
        params["dashboard-agent-listen-port"] = str(C.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT)
    return params


def generate_ray_start_command(node_type: str, params: Obj, resources: Mapping[str, Any]) -> str:
    """Port of `generateRayStartCommand` (pod.go).

    Fills ``num-cpus`` (CPU limit, else request, rounded up), ``memory`` (memory limit in bytes) and
    GPU/accelerator resources when absent, then ``ray start --head <flags>`` or ``ray start <flags>``
    with the flags of `convert_param_map`. Mutates ``params``.
    """
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    if "num-cpus" not in params:
        cpu = limits.get("cpu")
        if cpu is not None and parse_quantity(cpu) != 0:
            params["num-cpus"] = str(_quantity_value(cpu))
        elif requests.get("cpu") is not None and parse_quantity(requests["cpu"]) != 0:
            params["num-cpus"] = str(_quantity_value(requests["cpu"]))
    if "memory" not in params:
        memory = limits.get("memory")
        if memory is not None and parse_quantity(memory) != 0:
            params["memory"] = str(_quantity_value(memory))
    _add_well_known_accelerator_resources(params, limits)
    if node_type == C.HEAD_NODE:
        return f"ray start --head {convert_param_map(params)}"
    return f"ray start {convert_param_map(params)}"


def _add_well_known_accelerator_resources(params: Obj, limits: Mapping[str, Any]) -> None:
    if not limits:
        return
    resources_map: dict[str, float] = {}
    if "resources" in params:
        try:
            resources_map = json.loads(str(params["resources"]).strip("'\"` "))
        except ValueError:
            resources_map = None  # type: ignore[assignment]
        if not isinstance(resources_map, dict):
            # getResourcesMap fails; generateRayStartCommand logs "failed to add accelerator
            # resources to rayStartParams" and builds the command anyway
            return
    custom_added = any(name in resources_map for name in _CUSTOM_ACCELERATOR_TO_RAY_RESOURCE.values())
    for key in sorted(limits):
        value = parse_quantity(limits[key])
        if "num-gpus" not in params and is_gpu_resource_key(key) and value != 0:
            params["num-gpus"] = str(math.ceil(value))
        if not custom_added and key in _CUSTOM_ACCELERATOR_TO_RAY_RESOURCE and value != 0:
            ray_name = _CUSTOM_ACCELERATOR_TO_RAY_RESOURCE[key]
            if ray_name not in resources_map:
                resources_map[ray_name] = float(value)
                params["resources"] = f"'{_go_json_float_map(resources_map)}'"
            custom_added = True


def convert_param_map(params: Mapping[str, str]) -> str:
    """Port of `convertParamMap` (pod.go): sorted ``" --key=value "`` / ``" --switch "`` flags.

    "true"/"false" values are switches (present only when true) except for the flags that take an
    explicit boolean (``log-color``, ``include-dashboard``, ``include-log-monitor``). The doubled
    spaces are KubeRay's.
    """
    out = []
    for option in sorted(params):
        argument = str(params[option])
        if argument.lower() in ("true", "false") and option not in _SPECIAL_PARAMETER_OPTIONS:
            if argument.lower() == "true":
                out.append(f" --{option} ")
        else:
            out.append(f" --{option}={argument} ")
    return "".join(out)


def update_ray_start_params_labels(params: Obj, group_labels: Mapping[str, str] | None) -> None:
    """Port of `updateRayStartParamsLabels` (pod.go): group ``labels`` become ``--labels k=v,...``."""
    if not group_labels:
        return
    params["labels"] = ",".join(f"{k}={group_labels[k]}" for k in sorted(group_labels))


def update_ray_start_params_resources(params: Obj, group_resources: Mapping[str, str] | None) -> None:
    """Port of `updateRayStartParamsResources` (pod.go): group ``resources`` override the flags.

    cpu → ``num-cpus``, memory → ``memory``, GPU keys → ``num-gpus``, the rest into ``--resources``
    JSON. Unparsable quantities are skipped.
    """
    if not group_resources:
        return
    custom: dict[str, float] = {}
    for name, quantity in group_resources.items():
        try:
            value = parse_quantity(quantity)
        except ValueError:
            continue
        normalized = name.lower()
        if normalized == "cpu":
            params["num-cpus"] = str(math.ceil(value))
        elif normalized == "memory":
            params["memory"] = str(math.ceil(value))
        elif is_gpu_resource_key(normalized):
            params["num-gpus"] = str(math.ceil(value))
        else:
            custom[name] = float(value)
    if custom:
        params["resources"] = f"'{_go_json_float_map(custom)}'"


def merge_labels(template_labels: Mapping[str, str] | None, group_labels: Mapping[str, str] | None) -> Obj:
    """Port of `mergeLabels` (pod.go): template labels, then the group's ``labels`` on top."""
    return {**(template_labels or {}), **(group_labels or {})}


# ---------------------------------------------------------------------------------------------
# Probes
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _parse_generic_version(text: str) -> tuple[int, ...] | None:
    # apimachinery version.ParseGeneric: optional "v", at least major.minor, numeric components.
    # Memoised: every Pod built parses its cluster's rayVersion again.
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if match is None:
        return None
    return tuple(int(g) for g in match.groups() if g is not None) + ((0,) if match.group(3) is None else ())


def supports_unified_health_check(ray_version: str) -> bool:
    """Port of `supportsUnifiedHealthCheck` (pod.go): Ray ≥ 2.53.0 has one HTTP ``/api/healthz``."""
    parsed = _parse_generic_version(ray_version)
    return parsed is not None and parsed >= (2, 53, 0)


def init_liveness_and_readiness_probe(container: Obj, node_type: str, creator_crd_type: str,
                                      params: Mapping[str, str], ray_version: str) -> None:
    """Port of `initLivenessAndReadinessProbe` (pod.go): probes the user did not define.

    Liveness: 30 s delay, 5 s period, threshold 120; readiness: 10 s, 5 s, threshold 10; timeouts
    2 s (head 5 s). Head checks raylet and GCS, workers the raylet; Ray ≥ 2.53 uses one httpGet on
    the agent port. RayService workers also check the Serve proxy and drop out after 1 failure.
    """
    def port(key: str, default: int) -> int:
        try:
            value = int(params[key])
        except (KeyError, ValueError):
            return default
        return value if -(2**31) <= value < 2**31 else default

    agent_port = port("dashboard-agent-listen-port", C.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT)
    http_check = supports_unified_health_check(ray_version)
    http_action = {"path": C.RAY_NODE_HEALTH_PATH, "port": agent_port}
    raylet_cmd = C.BASE_WGET_HEALTH_COMMAND.format(C.DEFAULT_READINESS_PROBE_TIMEOUT_SECONDS, agent_port,
                                                   C.RAY_AGENT_RAYLET_HEALTH_PATH)
    gcs_cmd = C.BASE_WGET_HEALTH_COMMAND.format(C.DEFAULT_READINESS_PROBE_FAILURE_THRESHOLD,
                                                port("dashboard-port", C.DEFAULT_DASHBOARD_PORT),
                                                C.RAY_DASHBOARD_GCS_HEALTH_PATH)
    commands = [raylet_cmd, gcs_cmd] if node_type == C.HEAD_NODE else [raylet_cmd]
    is_head = node_type == C.HEAD_NODE

    def action(probe: Obj, cmds: list[str]) -> None:
        if http_check:
            probe["httpGet"] = dict(http_action)
        else:
            probe["exec"] = {"command": ["bash", "-c", " && ".join(cmds)]}

    if container.get("livenessProbe") is None:
        liveness: Obj = {
            "initialDelaySeconds": C.DEFAULT_LIVENESS_PROBE_INITIAL_DELAY_SECONDS,
            "timeoutSeconds": C.DEFAULT_HEAD_LIVENESS_PROBE_TIMEOUT_SECONDS if is_head
            else C.DEFAULT_LIVENESS_PROBE_TIMEOUT_SECONDS,
            "periodSeconds": C.DEFAULT_LIVENESS_PROBE_PERIOD_SECONDS,
            "successThreshold": C.DEFAULT_LIVENESS_PROBE_SUCCESS_THRESHOLD,
            "failureThreshold": C.DEFAULT_LIVENESS_PROBE_FAILURE_THRESHOLD,
        }
        action(liveness, commands)
        container["livenessProbe"] = liveness
    if container.get("readinessProbe") is None:
        readiness: Obj = {
            "initialDelaySeconds": C.DEFAULT_READINESS_PROBE_INITIAL_DELAY_SECONDS,
            "timeoutSeconds": C.DEFAULT_HEAD_READINESS_PROBE_TIMEOUT_SECONDS if is_head
            else C.DEFAULT_READINESS_PROBE_TIMEOUT_SECONDS,
            "periodSeconds": C.DEFAULT_READINESS_PROBE_PERIOD_SECONDS,
            "successThreshold": C.DEFAULT_READINESS_PROBE_SUCCESS_THRESHOLD,
            "failureThreshold": C.DEFAULT_READINESS_PROBE_FAILURE_THRESHOLD,
        }
        action(readiness, commands)
        if creator_crd_type == C.RAY_SERVICE_CRD and node_type == C.WORKER_NODE:
            readiness["failureThreshold"] = C.SERVE_READINESS_PROBE_FAILURE_THRESHOLD
            serve_cmd = C.BASE_WGET_HEALTH_COMMAND.format(
                C.DEFAULT_READINESS_PROBE_INITIAL_DELAY_SECONDS,
                util.find_container_port(container, C.SERVING_PORT_NAME, C.DEFAULT_SERVING_PORT),
                C.RAY_SERVE_PROXY_HEALTH_PATH)
            readiness.pop("httpGet", None)
            readiness["exec"] = {"command": ["bash", "-c", " && ".join([*commands, serve_cmd])]}
        container["readinessProbe"] = readiness


# ---------------------------------------------------------------------------------------------
# RayClusterReconciler.buildHeadPod / buildWorkerPod
# ---------------------------------------------------------------------------------------------


def _apply_default_pod_metadata(template: Obj, options: PodBuildOptions) -> None:
    meta = template.setdefault("metadata", {})
    if options.default_pod_annotations:
        annotations = meta.setdefault("annotations", {})
        for key, value in options.default_pod_annotations.items():
            annotations.setdefault(key, value)
    if options.default_pod_labels:
        labels = meta.setdefault("labels", {})
        for key, value in options.default_pod_labels.items():
            labels.setdefault(key, value)


def get_creator_crd_type(instance: Mapping[str, Any]) -> str:
    """Port of `getCreatorCRDType` (raycluster_controller.go): from ``ray.io/originated-from-crd``."""
    return util.get_crd_type(util.labels_of(instance).get(C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY))


def build_head_pod(instance: Mapping[str, Any], options: PodBuildOptions = DEFAULT_OPTIONS) -> Obj:
    """Port of `RayClusterReconciler.buildHeadPod` (raycluster_controller.go).

    The complete head Pod (owner reference to the RayCluster included) from a RayCluster dict;
    ``instance`` is not modified.
    """
    cluster: Obj = util.deep_copy(dict(instance))
    name = dig(cluster, "metadata", "name") or ""
    namespace = dig(cluster, "metadata", "namespace") or ""
    head_spec = cluster["spec"]["headGroupSpec"]
    deterministic = util.is_deterministic_head_pod_name_enabled(options.env)
    pod_name_value = util.pod_name(name, C.HEAD_NODE, not deterministic)
    fqdn = util.generate_fqdn_service_name(cluster, namespace, options.env)
    head_port = get_head_port(head_spec.get("rayStartParams") or {})
    template = default_head_pod_template(cluster, head_spec, pod_name_value, head_port, options)
    template["spec"]["containers"].extend(util.deep_copy(list(options.head_sidecar_containers)))
    _apply_default_pod_metadata(template, options)
    pod = build_pod(template, C.HEAD_NODE, head_spec["rayStartParams"], head_port,
                    util.is_autoscaling_enabled(cluster.get("spec")), get_creator_crd_type(cluster), fqdn,
                    options.default_container_envs, cluster["spec"].get("rayVersion", ""), options.env,
                    copy_template=False)
    util.set_controller_reference(cluster, pod)
    return pod


def build_worker_pod(instance: Mapping[str, Any], worker: Mapping[str, Any], replica_grp_name: str = "",
                     replica_index: int = 0, host_index: int = 0,
                     options: PodBuildOptions = DEFAULT_OPTIONS) -> Obj:
    """Port of `RayClusterReconciler.buildWorkerPod` (raycluster_controller.go).

    One worker Pod of group ``worker`` (``generateName`` ``<cluster>-<group>-worker-``, owner
    reference to the RayCluster); neither argument is modified.
    """
    cluster: Obj = util.deep_copy(dict(instance))
    group: Obj = util.deep_copy(dict(worker))
    name = dig(cluster, "metadata", "name") or ""
    namespace = dig(cluster, "metadata", "namespace") or ""
    pod_name_value = util.pod_name(f"{name}-{group.get('groupName', '')}", C.WORKER_NODE, True)
    fqdn = util.generate_fqdn_service_name(cluster, namespace, options.env)
    head_port = get_head_port(dig(cluster, "spec", "headGroupSpec", "rayStartParams") or {})
    template = default_worker_pod_template(cluster, group, pod_name_value, fqdn, head_port, replica_grp_name,
                                           replica_index, host_index, options)
    template["spec"]["containers"].extend(util.deep_copy(list(options.worker_sidecar_containers)))
    _apply_default_pod_metadata(template, options)
    pod = build_pod(template, C.WORKER_NODE, group["rayStartParams"], head_port,
                    util.is_autoscaling_enabled(cluster.get("spec")), get_creator_crd_type(cluster), fqdn,
                    options.default_container_envs, cluster["spec"].get("rayVersion", ""), options.env,
                    copy_template=False)
    util.set_controller_reference(cluster, pod)
    return pod
