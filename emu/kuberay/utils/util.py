"""Naming, counting, hashing and condition helpers the KubeRay controllers share.

Port of ``ray-operator/controllers/ray/utils/util.go`` (and of apimachinery's ``meta`` condition
helpers and controller-runtime's ``SetControllerReference``, which KubeRay calls from everywhere).
It is over 500 lines because util.go is one 1,200-line file of small functions; they stay together
so a reader can find each by its Go name.

Conventions for the whole ``emu.kuberay`` package:
- objects are JSON-shaped dicts in the wire format (camelCase, as KubeRay's CRDs and samples);
  a Go nil pointer is an absent key (or ``None``), a Go zero value is an absent key or its zero;
- what Go reads from ``os.Getenv`` is read from ``env``, the operator process's environment
  (a mapping, empty by default), and feature gates come from a `FeatureGates` value: several
  emulated operators share one Python process, so nothing here reads ``os.environ``;
- randomness is a ``random.Random`` passed in (the simulation's seeded stream); time is a string
  (RFC 3339) passed in by the caller.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import orjson

from . import constant as C
from .features import DEFAULTS, RAY_CLUSTER_MTLS, RAY_SERVICE_INCREMENTAL_UPGRADE, FeatureGates

Obj = dict[str, Any]
EMPTY_ENV: Mapping[str, str] = {}
R = TypeVar("R")

#: k8s.io/apimachinery ``util/rand`` alphabet: no vowels, no confusable digits.
_RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_INT32 = 2**31 - 1
_MIN_INT32 = -(2**31)


# ---------------------------------------------------------------------------------------------
# Small accessors (Go reads struct fields; we walk dicts)
# ---------------------------------------------------------------------------------------------


def deep_copy(obj: Any) -> Any:
    """Go's generated ``DeepCopy`` for API objects (nested dicts and lists of JSON scalars).

    A dict or list is copied by one orjson round trip (about 2.5 times faster than walking it in
    Python, which was itself three times faster than `copy.deepcopy`): the result is equal, and
    shares nothing, for anything an API object holds. What orjson refuses (a subclass of str,
    int, dict or list such as an ``IntEnum`` or ``StrEnum``, a non-string key, an integer past 64
    bits, a lone surrogate) is walked instead, and anything that is not JSON-shaped is handed to
    `copy.deepcopy`. Objects are JSON documents (the API server stores orjson bytes), so what
    orjson converts does not occur in them: a plain ``Enum`` would come back as its value, a
    ``UUID`` as a string, NaN as null and a tuple as a list (and `content_key`
    would not tell them from those)."""
    t = type(obj)
    if t is dict or t is list:
        try:
            return _loads(_dumps(obj, option=_STRICT, default=_refuse))
        except _EncodeError:
            return _walk_copy(obj)
    return _walk_copy(obj)


def _walk_copy(obj: Any) -> Any:
    t = type(obj)
    if t is dict:
        return {k: _walk_copy(v) for k, v in obj.items()}
    if t is list:
        return [_walk_copy(v) for v in obj]
    if t is str or t is int or t is float or t is bool or obj is None:
        return obj
    return copy.deepcopy(obj)


def _refuse(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


#: orjson serialises subclasses of str, int, dict and list and dataclasses by default; refusing
#: them sends such values to the walk, which keeps their types as Go's DeepCopy keeps a type.
_STRICT = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
           | orjson.OPT_PASSTHROUGH_DATETIME)
_dumps = orjson.dumps
_loads = orjson.loads
_EncodeError = orjson.JSONEncodeError


def content_key(obj: Any) -> bytes | None:
    """``obj``'s content as orjson bytes with sorted keys, or None where orjson refuses it (see
    `deep_copy`): equal content, equal key, whatever the dicts' order; distinct JSON content,
    distinct key (``1``, ``1.0`` and ``true`` differ)."""
    try:
        return _dumps(obj, option=_STRICT | orjson.OPT_SORT_KEYS, default=_refuse)
    except _EncodeError:
        return None


class ContentMemo(Generic[R]):
    """A pure function of one JSON document, memoised by `content_key`.

    For what a reconcile recomputes from an object that rarely changes (a RayCluster spec's hash,
    its desired resources): a hit costs one orjson encode. At most ``bound`` results are kept, all
    dropped when full (a world with more distinct inputs recomputes, as without the memo); an
    input orjson refuses is computed every time; an exception is never cached. Callers must not
    mutate what they get (return immutable values, or copy)."""

    def __init__(self, fn: Callable[[Any], R], bound: int = 4096) -> None:
        self.fn = fn
        self.bound = bound
        self._results: dict[bytes, R] = {}

    def __call__(self, obj: Any) -> R:
        key = content_key(obj)
        if key is None:
            return self.fn(obj)
        results = self._results
        found = results.get(key, _MISSING)
        if found is _MISSING:
            if len(results) >= self.bound:
                results.clear()
            found = results[key] = self.fn(obj)
        return found


_MISSING: Any = object()


def dig(obj: Any, *path: str | int) -> Any:
    """The value at ``path`` inside nested dicts/lists, or None where anything is missing."""
    cur = obj
    for key in path:
        if type(cur) is dict and type(key) is str:  # the common case, one test
            cur = cur.get(key)
        elif isinstance(key, int):
            if not isinstance(cur, list) or key >= len(cur) or key < -len(cur):
                return None
            cur = cur[key]
        else:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(key)
        if cur is None:
            return None
    return cur


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` or an empty dict (not a copy)."""
    return dig(obj, "metadata", "labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.annotations`` or an empty dict (not a copy)."""
    return dig(obj, "metadata", "annotations") or {}


def head_container(spec: Mapping[str, Any]) -> Obj:
    """The Ray container of a RayClusterSpec's head template (``Containers[RayContainerIndex]``)."""
    containers = dig(spec, "headGroupSpec", "template", "spec", "containers") or []
    return containers[C.RAY_CONTAINER_INDEX] if containers else {}


def _truthy(value: Any) -> bool:
    return value is True


# ---------------------------------------------------------------------------------------------
# CRD type, domain, pods
# ---------------------------------------------------------------------------------------------


def get_crd_type(key: str | None) -> str:
    """Port of `GetCRDType` (util.go): RayJob or RayService, anything else counts as RayCluster."""
    if key in (C.RAY_CLUSTER_CRD, C.RAY_JOB_CRD, C.RAY_SERVICE_CRD):
        return key
    return C.RAY_CLUSTER_CRD


def get_cluster_domain_name(env: Mapping[str, str] = EMPTY_ENV) -> str:
    """Port of `GetClusterDomainName` (util.go): ``CLUSTER_DOMAIN`` or ``cluster.local``."""
    domain = env.get(C.CLUSTER_DOMAIN_ENV_KEY, "")
    return domain if domain else C.DEFAULT_DOMAIN_NAME


def is_created(pod: Mapping[str, Any]) -> bool:
    """Port of `IsCreated` (util.go): the API server has given the Pod a phase."""
    return bool(dig(pod, "status", "phase"))


def _first_not_ready_container_status(pod: Mapping[str, Any]) -> tuple[str, str, bool]:
    for status in dig(pod, "status", "containerStatuses") or []:
        state = status.get("state") or {}
        if state.get("waiting") is not None:
            waiting = state["waiting"]
            return waiting.get("reason", ""), f"{status.get('name', '')}: {waiting.get('message', '')}", True
        if state.get("terminated") is not None:
            term = state["terminated"]
            return term.get("reason", ""), f"{status.get('name', '')}: {term.get('message', '')}", True
    return "", "", False


def find_head_pod_ready_condition(head_pod: Mapping[str, Any]) -> Obj:
    """Port of `FindHeadPodReadyCondition` (util.go).

    Mirrors the Pod's PodReady condition as ``HeadPodReady`` (False/``Unknown`` without one); a True
    condition without reason gets ``HeadPodRunningAndReady``; ``ContainersNotReady`` is replaced by
    the first waiting/terminated container's reason, its message appended after "; ".
    The result has no ``lastTransitionTime``: `set_status_condition` supplies it.
    """
    cond: Obj = {"type": C.HEAD_POD_READY, "status": "False", "reason": C.UNKNOWN_REASON, "message": ""}
    for pod_cond in dig(head_pod, "status", "conditions") or []:
        if pod_cond.get("type") != "Ready":
            continue
        cond["status"] = pod_cond.get("status", "")
        cond["message"] = pod_cond.get("message", "")
        reason = pod_cond.get("reason", "")
        if pod_cond.get("status") == "True" and reason == "":
            reason = C.HEAD_POD_RUNNING_AND_READY
        if reason != "":
            cond["reason"] = reason
        if reason == C.CONTAINERS_NOT_READY:
            c_reason, c_message, ok = _first_not_ready_container_status(head_pod)
            if ok:
                if cond["message"] != "":
                    cond["message"] += "; "
                cond["message"] += c_message
                cond["reason"] = c_reason
        break
    return cond


def find_ray_cluster_suspend_status(instance: Mapping[str, Any]) -> str:
    """Port of `FindRayClusterSuspendStatus` (util.go): the first True of Suspending/Suspended, or ""."""
    for cond in dig(instance, "status", "conditions") or []:
        if cond.get("type") in (C.RAY_CLUSTER_SUSPENDING, C.RAY_CLUSTER_SUSPENDED) and \
                cond.get("status") == "True":
            return str(cond["type"])
    return ""


def is_running_and_ready(pod: Mapping[str, Any]) -> bool:
    """Port of `IsRunningAndReady` (util.go): phase Running and PodReady True."""
    if dig(pod, "status", "phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in dig(pod, "status", "conditions") or [])


def check_all_pods_running(pods: Iterable[Mapping[str, Any]]) -> bool:
    """Port of `CheckAllPodsRunning` (util.go).

    At least one Pod, every Pod Running, and none with PodReady explicitly not True (a Pod without a
    PodReady condition counts as running).
    """
    pods = list(pods)
    if not pods:
        return False
    for pod in pods:
        if dig(pod, "status", "phase") != "Running":
            return False
        for cond in dig(pod, "status", "conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") != "True":
                return False
    return True


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------


def pod_name(prefix: str, node_type: str, is_generate_name: bool) -> str:
    """Port of `PodName` (util.go).

    ``<prefix[:50]>-<type>`` lower-cased, with a trailing "-" when used as ``generateName`` (the API
    server then appends 5 random characters): ``rc-head-``, ``rc-group-worker-``; or the fixed
    ``rc-head`` with ``ENABLE_DETERMINISTIC_HEAD_POD_NAME``.
    """
    max_prefix_length = 50  # 63 - ("-worker-" + 5 generated characters)
    result = (prefix[:max_prefix_length] + C.DASH_SYMBOL + node_type).lower()
    if is_generate_name:
        result += C.DASH_SYMBOL
    return result


def _is_punct(ch: str) -> bool:
    # Go's unicode.IsPunct for the ASCII range: every printable non-alphanumeric except the
    # symbols ($+<=>^`|~).
    return ch in "!\"#%&'()*,-./:;?@[\\]_{}"


def check_name(s: str) -> str:
    """Port of `CheckName` (util.go).

    Keeps the *last* 50 characters of a longer name, then replaces a leading digit or punctuation
    with "r". (Go panics on an empty name; this returns it.)
    """
    max_length = 50
    if len(s) > max_length:
        s = s[len(s) - max_length:]
    if s and s[0].isdigit():
        s = "r" + s[1:]
    if s and _is_punct(s[0]):
        s = "r" + s[1:]
    return s


def check_label(s: str) -> str:
    """Port of `CheckLabel` (util.go): the last 63 characters, no leading punctuation."""
    max_length = 63
    if len(s) > max_length:
        s = s[len(s) - max_length:]
    if s and _is_punct(s[0]):
        s = "r" + s[1:]
    return s


def trim_job_name(job_name: str) -> str:
    """Port of `TrimJobName` (util.go): `check_label` applied to a Job name."""
    return check_label(job_name)


def check_route_name(s: str, namespace: str) -> str:
    """Port of `CheckRouteName` (util.go): at most ``51 - len(namespace)`` characters, then `check_name`."""
    max_length = 51 - len(namespace)
    if len(s) > max_length:
        s = s[:max_length]
    return check_name(s)


def safe_int64_to_int32(n: int) -> int:
    """Port of `SafeInt64ToInt32` (util.go): clamp into int32."""
    return max(_MIN_INT32, min(_MAX_INT32, n))


def get_namespace(metadata: Mapping[str, Any]) -> str:
    """Port of `GetNamespace` (util.go): the namespace, or "default"."""
    return metadata.get("namespace") or "default"


def generate_head_service_name(crd_type: str, cluster_spec: Mapping[str, Any] | None, owner_name: str) -> str:
    """Port of `GenerateHeadServiceName` (util.go).

    ``<owner>-head-svc``. For a RayCluster, a name set in ``headGroupSpec.headService.metadata.name``
    wins; RayJob and RayService head Services always use their own CR's name. Unknown CRD types
    raise ``ValueError("unknown CRD type: X")``.
    """
    if crd_type in (C.RAY_SERVICE_CRD, C.RAY_JOB_CRD):
        return f"{owner_name}-{C.HEAD_NODE}-svc"
    if crd_type == C.RAY_CLUSTER_CRD:
        name = f"{owner_name}-{C.HEAD_NODE}-svc"
        custom = dig(cluster_spec or {}, "headGroupSpec", "headService", "metadata", "name")
        return custom if custom else name
    raise ValueError(f"unknown CRD type: {crd_type}")


def generate_fqdn_service_name(cluster: Mapping[str, Any], namespace: str,
                               env: Mapping[str, str] = EMPTY_ENV) -> str:
    """Port of `GenerateFQDNServiceName` (util.go): ``<head-svc>.<ns>.svc.<cluster domain>``."""
    head_svc = generate_head_service_name(C.RAY_CLUSTER_CRD, cluster.get("spec"),
                                          dig(cluster, "metadata", "name") or "")
    return f"{head_svc}.{namespace}.svc.{get_cluster_domain_name(env)}"


def extract_ray_ip_from_fqdn(fqdn_ray_ip: str) -> str:
    """Port of `ExtractRayIPFromFQDN` (util.go): the head Service name, the FQDN's first label."""
    return fqdn_ray_ip.split(".")[0]


def generate_serve_service_name(service_name: str) -> str:
    """Port of `GenerateServeServiceName` (util.go): ``<name>-serve-svc``."""
    return f"{service_name}-{C.SERVE_NAME}-svc"


def generate_serve_service_label(service_name: str) -> str:
    """Port of `GenerateServeServiceLabel` (util.go): ``<name>-serve``."""
    return f"{service_name}-{C.SERVE_NAME}"


def generate_ingress_name(cluster_name: str) -> str:
    """Port of `GenerateIngressName` (util.go): ``<cluster>-head-ingress``."""
    return f"{cluster_name}-{C.HEAD_NODE}-ingress"


def generate_route_name(cluster_name: str) -> str:
    """Port of `GenerateRouteName` (util.go): ``<cluster>-head-route``."""
    return f"{cluster_name}-{C.HEAD_NODE}-route"


def rand_string(rng: random.Random, n: int) -> str:
    """apimachinery ``rand.String``: ``n`` characters from its vowel-free alphabet, drawn from ``rng``."""
    return "".join(rng.choice(_RAND_ALPHABET) for _ in range(n))


def generate_ray_cluster_name(service_name: str, rng: random.Random) -> str:
    """Port of `GenerateRayClusterName` (util.go): ``<rayjob-or-rayservice>-<5 random>``."""
    return f"{service_name}-{rand_string(rng, 5)}"


def generate_ray_job_id(rayjob: str, rng: random.Random) -> str:
    """Port of `GenerateRayJobId` (util.go): the submission id ``<rayjob>-<5 random>``."""
    return f"{rayjob}-{rand_string(rng, 5)}"


def generate_ray_worker_replica_group_name(worker_group_name: str, rng: random.Random) -> str:
    """Port of `GenerateRayWorkerReplicaGroupName` (util.go): ``<group>-<5 random>``."""
    return f"{worker_group_name}-{rand_string(rng, 5)}"


def generate_identifier(cluster_name: str, node_type: str) -> str:
    """Port of `GenerateIdentifier` (util.go): ``<cluster>-<head|worker>``."""
    return f"{cluster_name}-{node_type}"


# ---------------------------------------------------------------------------------------------
# Replica arithmetic
# ---------------------------------------------------------------------------------------------


def _num_of_hosts(group: Mapping[str, Any]) -> int:
    # The CRD defaults numOfHosts to 1; a dict that skipped defaulting means 1 as well.
    value = group.get("numOfHosts")
    return 1 if value is None else int(value)


def get_worker_group_desired_replicas(group: Mapping[str, Any]) -> int:
    """Port of `GetWorkerGroupDesiredReplicas` (util.go).

    0 for a suspended group; else ``replicas`` clamped into [minReplicas (default 0), maxReplicas
    (default int32 max)] with a missing ``replicas`` meaning minReplicas, times ``numOfHosts``.
    """
    min_replicas = group.get("minReplicas")
    min_replicas = 0 if min_replicas is None else int(min_replicas)
    max_replicas = group.get("maxReplicas")
    max_replicas = _MAX_INT32 if max_replicas is None else int(max_replicas)
    if _truthy(group.get("suspend")):
        return 0
    replicas = group.get("replicas")
    if replicas is None or int(replicas) < min_replicas:
        worker_replicas = min_replicas
    elif int(replicas) > max_replicas:
        worker_replicas = max_replicas
    else:
        worker_replicas = int(replicas)
    return worker_replicas * _num_of_hosts(group)


def calculate_desired_replicas(cluster: Mapping[str, Any]) -> int:
    """Port of `CalculateDesiredReplicas` (util.go): the sum over worker groups."""
    return sum(get_worker_group_desired_replicas(g) for g in dig(cluster, "spec", "workerGroupSpecs") or [])


def calculate_min_replicas(cluster: Mapping[str, Any]) -> int:
    """Port of `CalculateMinReplicas` (util.go): minReplicas x numOfHosts over non-suspended groups."""
    total = 0
    for group in dig(cluster, "spec", "workerGroupSpecs") or []:
        if _truthy(group.get("suspend")):
            continue
        total += int(group.get("minReplicas") or 0) * _num_of_hosts(group)
    return total


def calculate_max_replicas(cluster: Mapping[str, Any]) -> int:
    """Port of `CalculateMaxReplicas` (util.go): like the min, saturating at int32 max."""
    total = 0
    for group in dig(cluster, "spec", "workerGroupSpecs") or []:
        if _truthy(group.get("suspend")):
            continue
        max_replicas = group.get("maxReplicas")
        max_replicas = _MAX_INT32 if max_replicas is None else int(max_replicas)
        total += max_replicas * _num_of_hosts(group)
    return safe_int64_to_int32(total)


def _is_worker(pod: Mapping[str, Any]) -> bool:
    return labels_of(pod).get(C.RAY_NODE_TYPE_LABEL_KEY) == C.WORKER_NODE


def calculate_ready_replicas(pods: Iterable[Mapping[str, Any]]) -> int:
    """Port of `CalculateReadyReplicas` (util.go): worker Pods Running with PodReady True."""
    return sum(1 for p in pods if _is_worker(p) and is_running_and_ready(p))


def calculate_available_replicas(pods: Iterable[Mapping[str, Any]]) -> int:
    """Port of `CalculateAvailableReplicas` (util.go): worker Pods in phase Running."""
    return sum(1 for p in pods if _is_worker(p) and dig(p, "status", "phase") == "Running")


def get_head_group_service_account_name(cluster: Mapping[str, Any]) -> str:
    """Port of `GetHeadGroupServiceAccountName` (util.go): the head template's, else the cluster name."""
    name = dig(cluster, "spec", "headGroupSpec", "template", "spec", "serviceAccountName")
    return name if name else dig(cluster, "metadata", "name") or ""


# ---------------------------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------------------------


def _prune(value: Any) -> Any:
    """Drop None, {} and [] recursively, the way omitempty makes absent and empty look alike."""
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def compare_json_struct(a: Any, b: Any) -> bool:
    """Port of `CompareJsonStruct` (util.go): equal after a JSON round trip."""
    try:
        return bool(json.loads(json.dumps(a)) == json.loads(json.dumps(b)))
    except (TypeError, ValueError):
        return False


def generate_json_hash(obj: Any) -> str:
    """Port of `GenerateJsonHash` (util.go): SHA-1 of the JSON, base32hex (Go's ``HexEncoding``).

    The JSON is this package's stable form (sorted keys, no spaces, empties pruned), so the hash is
    stable across dict order and runs but is *not* byte-equal to Go's, which serialises typed
    structs in field order. Hashes are only ever compared with hashes made here.
    """
    text = json.dumps(_prune(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).digest()
    return base64.b32hexencode(digest).decode()


def generate_hash_without_replicas_and_workers_to_delete(ray_cluster_spec: Mapping[str, Any]) -> str:
    """Port of `GenerateHashWithoutReplicasAndWorkersToDelete` (util.go).

    Masks what must not cause a new cluster: head and worker templates' ``tolerations`` and
    ``schedulingGates`` (Kueue injects them), every group's ``replicas``, ``minReplicas``,
    ``maxReplicas`` and ``scaleStrategy.workersToDelete`` (the autoscaler writes them), and
    ``upgradeStrategy``. Everything else (images, env, rayStartParams, ``suspend``, group names
    and order) counts.
    """
    # A pure function of the spec's content, which a cluster keeps across its reconciles.
    return _hash_without_replicas_memo(ray_cluster_spec)


def _hash_without_replicas_and_workers_to_delete(ray_cluster_spec: Mapping[str, Any]) -> str:
    spec: Obj = json.loads(json.dumps(ray_cluster_spec))
    head_pod_spec = dig(spec, "headGroupSpec", "template", "spec")
    if isinstance(head_pod_spec, dict):
        head_pod_spec.pop("tolerations", None)
        head_pod_spec.pop("schedulingGates", None)
    for group in spec.get("workerGroupSpecs") or []:
        for key in ("replicas", "maxReplicas", "minReplicas"):
            group.pop(key, None)
        if isinstance(group.get("scaleStrategy"), dict):
            group["scaleStrategy"].pop("workersToDelete", None)
        pod_spec = dig(group, "template", "spec")
        if isinstance(pod_spec, dict):
            pod_spec.pop("tolerations", None)
            pod_spec.pop("schedulingGates", None)
    spec.pop("upgradeStrategy", None)
    return generate_json_hash(spec)


_hash_without_replicas_memo = ContentMemo(_hash_without_replicas_and_workers_to_delete)


# ---------------------------------------------------------------------------------------------
# Containers, env, volumes
# ---------------------------------------------------------------------------------------------


def find_container_port(container: Mapping[str, Any], port_name: str, default_port: int) -> int:
    """Port of `FindContainerPort` (util.go): the containerPort named ``port_name``, else the default."""
    for port in container.get("ports") or []:
        if port.get("name") == port_name:
            return int(port.get("containerPort", 0))
    return default_port


def env_var_exists(env_name: str, env_vars: Sequence[Mapping[str, Any]] | None) -> bool:
    """Port of `EnvVarExists` (util.go)."""
    return any(e.get("name") == env_name for e in env_vars or [])


def env_var_by_name(env_name: str, env_vars: Sequence[Mapping[str, Any]] | None) -> tuple[Obj, bool]:
    """Port of `EnvVarByName` (util.go): the first entry with that name, and whether there was one."""
    for env in env_vars or []:
        if env.get("name") == env_name:
            return dict(env), True
    return {}, False


def volume_mount_exists(mount_name: str, volume_mounts: Sequence[Mapping[str, Any]] | None) -> bool:
    """Port of `VolumeMountExists` (util.go)."""
    return any(m.get("name") == mount_name for m in volume_mounts or [])


def volume_exists(volume_name: str, volumes: Sequence[Mapping[str, Any]] | None) -> bool:
    """Port of `VolumeExists` (util.go)."""
    return any(v.get("name") == volume_name for v in volumes or [])


def get_container_command(additional_options: Sequence[str] = (),
                          env: Mapping[str, str] = EMPTY_ENV) -> list[str]:
    """Port of `GetContainerCommand` (util.go): ``["/bin/bash", "-c<opts>[l]", "--"]``.

    The ``l`` (login shell) is added only with ``ENABLE_LOGIN_SHELL=true``.
    """
    options = "c" + "".join(additional_options)
    if env.get(C.ENABLE_LOGIN_SHELL, "").lower() == "true":
        options += "l"
    return ["/bin/bash", "-" + options, "--"]


def is_deterministic_head_pod_name_enabled(env: Mapping[str, str] = EMPTY_ENV) -> bool:
    """Port of `IsDeterministicHeadPodNameEnabled` (util.go): ``ENABLE_DETERMINISTIC_HEAD_POD_NAME=true``."""
    return env.get(C.ENABLE_DETERMINISTIC_HEAD_POD_NAME, "").lower() == "true"


def is_job_finished(job: Mapping[str, Any]) -> tuple[str, bool]:
    """Port of `IsJobFinished` (util.go): ("Complete"|"Failed", True) once a batch Job has ended.

    FailureTarget=True counts as Failed (it precedes Failed by tens of seconds on deadline).
    """
    for cond in dig(job, "status", "conditions") or []:
        ctype, status = cond.get("type"), cond.get("status")
        if ctype in ("Complete", "Failed") and status == "True":
            return str(ctype), True
        if ctype == "FailureTarget" and status == "True":
            return "Failed", True
    return "", False


# ---------------------------------------------------------------------------------------------
# Spec predicates
# ---------------------------------------------------------------------------------------------


def managed_by_external_controller(controller_name: str | None) -> str | None:
    """Port of `ManagedByExternalController` (util.go): the name when it is not this operator."""
    if controller_name is not None and controller_name != C.KUBE_RAY_CONTROLLER:
        return controller_name
    return None


def is_autoscaling_enabled(spec: Mapping[str, Any] | None) -> bool:
    """Port of `IsAutoscalingEnabled` (util.go): ``enableInTreeAutoscaling: true``."""
    return spec is not None and _truthy(spec.get("enableInTreeAutoscaling"))


def is_autoscaling_v2_enabled(spec: Mapping[str, Any] | None) -> bool:
    """Port of `IsAutoscalingV2Enabled` (util.go): ``autoscalerOptions.version: v2``."""
    return spec is not None and dig(spec, "autoscalerOptions", "version") == C.AUTOSCALER_VERSION_V2


def is_autoscaling_v1_enabled(spec: Mapping[str, Any] | None) -> bool:
    """Port of `IsAutoscalingV1Enabled` (util.go): ``autoscalerOptions.version: v1``."""
    return spec is not None and dig(spec, "autoscalerOptions", "version") == C.AUTOSCALER_VERSION_V1


def is_gcs_fault_tolerance_enabled(spec: Mapping[str, Any], annotations: Mapping[str, str] | None) -> bool:
    """Port of `IsGCSFaultToleranceEnabled` (util.go).

    The legacy annotation ``ray.io/ft-enabled`` equal to "true" (any case), or
    ``gcsFaultToleranceOptions`` present.
    """
    legacy = (annotations or {}).get(C.RAY_FT_ENABLED_ANNOTATION_KEY)
    if legacy is not None and legacy.lower() == "true":
        return True
    return spec.get("gcsFaultToleranceOptions") is not None


def get_gcs_fault_tolerance_backend(options: Mapping[str, Any] | None) -> str:
    """Port of `GetGcsFaultToleranceBackend` (util.go): ``options.backend``, "redis" when unset."""
    if options is None or not options.get("backend"):
        return C.GCS_FT_BACKEND_REDIS
    return str(options["backend"])


def is_gcs_fault_tolerance_embedded(options: Mapping[str, Any] | None) -> bool:
    """Port of `IsGCSFaultToleranceEmbedded` (util.go): options present with backend rocksdb."""
    return options is not None and get_gcs_fault_tolerance_backend(options) == C.GCS_FT_BACKEND_ROCKS_DB


def get_gcs_storage_pvc_name(instance: Mapping[str, Any]) -> str:
    """Port of `GetGCSStoragePVCName` (util.go): ``storage.claimName`` or ``<cluster>-gcs-pvc``."""
    claim = dig(instance, "spec", "gcsFaultToleranceOptions", "storage", "claimName")
    if claim:
        return str(claim)
    return (dig(instance, "metadata", "name") or "") + C.GCS_STORAGE_PVC_SUFFIX


def is_auth_enabled(spec: Mapping[str, Any]) -> bool:
    """Port of `IsAuthEnabled` (util.go): ``authOptions.mode: token``."""
    return dig(spec, "authOptions", "mode") == C.AUTH_MODE_TOKEN


def is_k8s_auth_enabled(auth_options: Mapping[str, Any] | None) -> bool:
    """Port of `IsK8sAuthEnabled` (util.go): ``authOptions.enableK8sTokenAuth: true``."""
    return auth_options is not None and _truthy(auth_options.get("enableK8sTokenAuth"))


def is_tls_enabled(spec: Mapping[str, Any] | None, gates: FeatureGates = DEFAULTS) -> bool:
    """Port of `IsTLSEnabled` (util.go): gate RayClusterMTLS on and ``tlsOptions.enabled: true``."""
    if not gates.enabled(RAY_CLUSTER_MTLS):
        return False
    return spec is not None and _truthy(dig(spec, "tlsOptions", "enabled"))


def get_tls_secret_name(cluster_name: str, node_type: str) -> str:
    """Port of `GetTLSSecretName` (util.go)."""
    prefix = C.RAY_HEAD_SECRET_PREFIX if node_type == C.HEAD_NODE else C.RAY_WORKER_SECRET_PREFIX
    return f"{prefix}-{cluster_name}"


def get_ca_secret_name(cluster_name: str, cluster_uid: str) -> str:
    """Port of `GetCASecretName` (util.go): ``<cluster>-ca-secret-<first 8 chars of the UID>``,
    so a cluster recreated under the same name gets a new CA."""
    return f"{cluster_name}-{C.RAY_CA_SECRET_PREFIX}-{cluster_uid[:8]}"


def get_tls_cert_name(cluster_name: str, node_type: str) -> str:
    """Port of `GetTLSCertName` (util.go)."""
    prefix = C.RAY_HEAD_CERT_PREFIX if node_type == C.HEAD_NODE else C.RAY_WORKER_CERT_PREFIX
    return f"{prefix}-{cluster_name}"


def get_self_signed_issuer_name(cluster_name: str) -> str:
    """Port of `GetSelfSignedIssuerName` (util.go)."""
    return f"{C.RAY_SELF_SIGNED_ISSUER_PREFIX}-{cluster_name}"


def get_ca_cert_name(cluster_name: str) -> str:
    """Port of `GetCACertName` (util.go)."""
    return f"{C.RAY_CA_CERTIFICATE_PREFIX}-{cluster_name}"


def get_ca_issuer_name(cluster_name: str) -> str:
    """Port of `GetCAIssuerName` (util.go)."""
    return f"{C.RAY_CA_ISSUER_PREFIX}-{cluster_name}"


def get_ray_cluster_name_from_service(svc: Mapping[str, Any] | None) -> str:
    """Port of `GetRayClusterNameFromService` (util.go): the Service's ``ray.io/cluster`` selector."""
    if svc is None:
        return ""
    return (dig(svc, "spec", "selector") or {}).get(C.RAY_CLUSTER_LABEL_KEY, "")


def is_incremental_upgrade_enabled(spec: Mapping[str, Any] | None, gates: FeatureGates = DEFAULTS) -> bool:
    """Port of `IsIncrementalUpgradeEnabled` (util.go): gate on and type NewClusterWithIncrementalUpgrade."""
    if not gates.enabled(RAY_SERVICE_INCREMENTAL_UPGRADE):
        return False
    return spec is not None and \
        dig(spec, "upgradeStrategy", "type") == C.RAY_SERVICE_NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE


def get_ray_service_cluster_upgrade_options(spec: Mapping[str, Any] | None) -> Obj | None:
    """Port of `GetRayServiceClusterUpgradeOptions` (util.go)."""
    if spec is None:
        return None
    options = dig(spec, "upgradeStrategy", "clusterUpgradeOptions")
    return options if isinstance(options, dict) else None


def is_incremental_upgrade_complete(ray_service: Mapping[str, Any], pending_cluster: Any) -> bool:
    """Port of `IsIncrementalUpgradeComplete` (util.go): active capacity 0 and pending traffic 100."""
    active_capacity = dig(ray_service, "status", "activeServiceStatus", "targetCapacity")
    pending_traffic = dig(ray_service, "status", "pendingServiceStatus", "trafficRoutedPercent")
    return pending_cluster is not None and active_capacity == 0 and pending_traffic == 100


def has_submitter(ray_job: Mapping[str, Any]) -> bool:
    """Port of `HasSubmitter` (util.go): K8sJobMode and SidecarMode run a submitter.

    Reads ``spec.submissionMode`` as stored; the CRD defaults it to K8sJobMode, so an absent value
    counts as K8sJobMode here.
    """
    mode = dig(ray_job, "spec", "submissionMode") or C.K8S_JOB_MODE
    return mode in (C.K8S_JOB_MODE, C.SIDECAR_MODE)


def ray_http_client_timeout(use_kubernetes_proxy: bool) -> float:
    """Port of `rayHTTPClientTimeout` (util.go): 10 s through the API server proxy, else 2 s."""
    if use_kubernetes_proxy:
        return float(C.RAY_HTTP_CLIENT_PROXY_TIMEOUT_SECONDS)
    return float(C.RAY_HTTP_CLIENT_DIRECT_TIMEOUT_SECONDS)


class _Getter(Protocol):
    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...


async def fetch_head_service_url(cli: _Getter, ray_cluster: Mapping[str, Any], default_port_name: str,
                                 env: Mapping[str, str] = EMPTY_ENV) -> str:
    """Port of `FetchHeadServiceURL` (util.go).

    GETs the cluster's head Service and returns ``<svc>.<ns>.svc.<domain>:<port>`` for the port named
    ``default_port_name``; the client's errors (NotFound, ...) propagate; a missing port raises
    ``ValueError("<name> port is not found")``.
    """
    name = generate_head_service_name(C.RAY_CLUSTER_CRD, ray_cluster.get("spec"),
                                      dig(ray_cluster, "metadata", "name") or "")
    svc = await cli.get("Service", name, namespace=dig(ray_cluster, "metadata", "namespace"))
    port = -1
    for svc_port in dig(svc, "spec", "ports") or []:
        if svc_port.get("name") == default_port_name:
            port = int(svc_port.get("port", -1))
            break
    if port == -1:
        raise ValueError(f"{default_port_name} port is not found")
    meta = svc.get("metadata", {})
    return f"{meta.get('name')}.{meta.get('namespace')}.svc.{get_cluster_domain_name(env)}:{port}"


# ---------------------------------------------------------------------------------------------
# Conditions (apimachinery pkg/api/meta/conditions.go)
# ---------------------------------------------------------------------------------------------


def find_status_condition(conditions: Sequence[Obj] | None, condition_type: str) -> Obj | None:
    """Port of `meta.FindStatusCondition` (conditions.go): the condition itself (mutable), or None."""
    for cond in conditions or []:
        if cond.get("type") == condition_type:
            return cond
    return None


def set_status_condition(conditions: list[Obj], new_condition: Mapping[str, Any], now: str) -> bool:
    """Port of `meta.SetStatusCondition` (conditions.go); returns whether anything changed.

    A new type is appended, with ``lastTransitionTime`` = the condition's own or ``now``. An
    existing one gets the new status (and ``lastTransitionTime`` = the given one or ``now``) only if
    the status differs; reason, message and observedGeneration are always overwritten.
    """
    existing = find_status_condition(conditions, str(new_condition["type"]))
    if existing is None:
        cond = dict(new_condition)
        if not cond.get("lastTransitionTime"):
            cond["lastTransitionTime"] = now
        cond.setdefault("reason", "")
        cond.setdefault("message", "")
        conditions.append(cond)
        return True
    changed = False
    if existing.get("status") != new_condition.get("status"):
        existing["status"] = new_condition.get("status")
        existing["lastTransitionTime"] = new_condition.get("lastTransitionTime") or now
        changed = True
    for key, zero in (("reason", ""), ("message", ""), ("observedGeneration", 0)):
        new_value = new_condition.get(key, zero)
        if existing.get(key, zero) != new_value:
            existing[key] = new_value
            changed = True
    return changed


def remove_status_condition(conditions: list[Obj], condition_type: str) -> bool:
    """Port of `meta.RemoveStatusCondition` (conditions.go): removes in place; True if it was there."""
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.get("type") != condition_type]
    return len(conditions) != before


def is_status_condition_present_and_equal(conditions: Sequence[Obj] | None, condition_type: str,
                                          status: str) -> bool:
    """Port of `meta.IsStatusConditionPresentAndEqual` (conditions.go)."""
    cond = find_status_condition(conditions, condition_type)
    return cond is not None and cond.get("status") == status


def is_status_condition_true(conditions: Sequence[Obj] | None, condition_type: str) -> bool:
    """Port of `meta.IsStatusConditionTrue` (conditions.go)."""
    return is_status_condition_present_and_equal(conditions, condition_type, "True")


def is_status_condition_false(conditions: Sequence[Obj] | None, condition_type: str) -> bool:
    """Port of `meta.IsStatusConditionFalse` (conditions.go)."""
    return is_status_condition_present_and_equal(conditions, condition_type, "False")


# ---------------------------------------------------------------------------------------------
# Owner references (controller-runtime controllerutil)
# ---------------------------------------------------------------------------------------------


class AlreadyOwnedError(ValueError):
    """controller-runtime's ``AlreadyOwnedError``: the object has another controller owner."""


def set_controller_reference(owner: Mapping[str, Any], obj: Obj) -> None:
    """Port of `controllerutil.SetControllerReference` (controller-runtime controllerutil.go).

    Adds (or refreshes) ``owner`` as the controlling owner reference of ``obj``, with
    ``blockOwnerDeletion: true``. Another controller owner raises `AlreadyOwnedError` with
    controller-runtime's text.
    """
    meta = obj.setdefault("metadata", {})
    refs: list[Obj] = meta.setdefault("ownerReferences", [])
    owner_meta = owner.get("metadata", {})
    api_version = owner.get("apiVersion", "")
    group = api_version.split("/")[0] if "/" in api_version else ""
    ref: Obj = {
        "apiVersion": api_version, "kind": owner.get("kind", ""), "name": owner_meta.get("name", ""),
        "uid": owner_meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True,
    }
    for existing in refs:
        if existing.get("controller") is True:
            existing_group = existing.get("apiVersion", "").split("/")[0] if "/" in existing.get(
                "apiVersion", "") else ""
            same = (existing_group == group and existing.get("kind") == ref["kind"]
                    and existing.get("name") == ref["name"])
            if not same:
                raise AlreadyOwnedError(
                    f"Object {meta.get('namespace', '')}/{meta.get('name', '')} is already owned by "
                    f"another {existing.get('kind')} controller {existing.get('name')}")
    for i, existing in enumerate(refs):
        existing_group = existing.get("apiVersion", "").split("/")[0] if "/" in existing.get(
            "apiVersion", "") else ""
        if existing_group == group and existing.get("kind") == ref["kind"] and \
                existing.get("name") == ref["name"]:
            refs[i] = ref
            return
    refs.append(ref)
