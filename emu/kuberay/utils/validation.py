"""Validation of RayCluster, RayJob and RayService objects, with KubeRay's exact messages.

Port of ``ray-operator/controllers/ray/utils/validation.go`` and of the apimachinery helpers it
calls (``IsDNS1035Label``, ``IsDNS1123Label``, ``IsQualifiedName``, ``IsValidLabelValue``,
``version.ParseGeneric``, ``time.ParseDuration``). Each ``validate_*`` returns None or raises
`ValidationError` whose ``str()`` is the text KubeRay puts into the event or condition message.
Over 500 lines because validation.go is: every branch is a user-visible message.

Deviations: Go iterates maps in a few places (group labels, deletion rules grouped by status); here
the order is sorted keys / first appearance, so with several errors the joined text is stable.
``ValidateRayCronJobSpec`` is not ported (RayCronJob is out of scope).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from . import constant as C
from . import util
from .features import (
    DEFAULTS,
    GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE,
    RAY_CLUSTER_HISTORY_SERVER,
    RAY_CLUSTER_MTLS,
    RAY_CLUSTER_NETWORK_POLICY,
    RAY_JOB_DELETION_POLICY,
    FeatureGates,
)
from .util import dig


class ValidationError(ValueError):
    """A validation failure; ``str(err)`` is KubeRay's message."""


# ---------------------------------------------------------------------------------------------
# apimachinery validation helpers (pkg/util/validation, pkg/api/validate/content)
# ---------------------------------------------------------------------------------------------

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_KEY_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{example}', "
    return out + f"regex used for validation is '{fmt}')"


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def is_dns1035_label(value: str) -> list[str]:
    """Port of `validation.IsDNS1035Label` (apimachinery)."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _full(_DNS1035_LABEL_FMT, value):
        errs.append(_regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character", _DNS1035_LABEL_FMT,
            "my-name", "abc-123"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    """Port of `validation.IsDNS1123Label` (apimachinery)."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 bytes")
    if not _full(_DNS1123_LABEL_FMT, value):
        if _full(_DNS1123_SUBDOMAIN_FMT, value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                "must start and end with an alphanumeric character", _DNS1123_LABEL_FMT,
                "my-name", "123-abc"))
    return errs


def _is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 bytes")
    if not _full(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(_regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character", _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Port of `validation.IsQualifiedName` (apimachinery ``content.IsLabelKey``)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _is_dns1123_subdomain(prefix))
    else:
        return ["a valid label key "
                + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _full(_LABEL_KEY_FMT, name):
        errs.append("name part "
                    + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """Port of `validation.IsValidLabelValue` (apimachinery ``content.IsLabelValue``)."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 bytes")
    if not _full(_LABEL_VALUE_FMT, value):
        errs.append(_regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and "
            "must start and end with an alphanumeric character", _LABEL_VALUE_FMT,
            "MyValue", "my_value", "12345"))
    return errs


def _go_list(errs: Sequence[str]) -> str:
    # fmt's %v of a []string.
    return "[" + " ".join(errs) + "]"


def _go_quote(text: str) -> str:
    # %q for the ASCII strings that occur here.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_generic_version(text: str) -> tuple[int, ...]:
    """Port of `version.ParseGeneric` (apimachinery): at least major.minor; ValueError with Go's text."""
    match = re.match(r"^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$", text, re.S)
    if match is None:
        raise ValueError(f"could not parse {_go_quote(text)} as version")
    components = match.group(1).split(".")
    if len(components) < 2:
        raise ValueError(f"illegal version string {_go_quote(text)}")
    if components[0].startswith("0") and components[0] != "0":
        raise ValueError(f"illegal zero-prefixed version component {_go_quote(components[0])} in "
                         f"{_go_quote(text)}")
    return tuple(int(c) for c in components)


def _version_less_than(version: tuple[int, ...], minimum: tuple[int, ...]) -> bool:
    width = max(len(version), len(minimum))
    return version + (0,) * (width - len(version)) < minimum + (0,) * (width - len(minimum))


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                   "h": 3600.0}
_DURATION_RE = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` in seconds ("1h30m", "-5s", "0"), or None when Go would refuse it."""
    s = text
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        return None
    total = 0.0
    pos = 0
    while pos < len(s):
        match = _DURATION_RE.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total


# ---------------------------------------------------------------------------------------------
# RayCluster
# ---------------------------------------------------------------------------------------------


def validate_ray_cluster_status(instance: Mapping[str, Any]) -> None:
    """Port of `ValidateRayClusterStatus` (validation.go): Suspending and Suspended never both True."""
    conditions = dig(instance, "status", "conditions") or []
    if util.is_status_condition_true(conditions, C.RAY_CLUSTER_SUSPENDING) and \
            util.is_status_condition_true(conditions, C.RAY_CLUSTER_SUSPENDED):
        raise ValidationError("invalid RayCluster State: rayv1.RayClusterSuspending and "
                              "rayv1.RayClusterSuspended "
                              "conditions should not be both true")


def validate_ray_cluster_metadata(metadata: Mapping[str, Any]) -> None:
    """Port of `ValidateRayClusterMetadata` (validation.go): name ≤ 53 characters and DNS-1035."""
    name = metadata.get("name") or ""
    if len(name) > C.MAX_RAY_CLUSTER_NAME_LENGTH:
        raise ValidationError(f"RayCluster name should be no more than {C.MAX_RAY_CLUSTER_NAME_LENGTH} "
                              "characters")
    errs = is_dns1035_label(name)
    if errs:
        raise ValidationError(f"RayCluster name should be a valid DNS1035 label: {_go_list(errs)}")


def validate_ray_cluster_upgrade_options(instance: Mapping[str, Any]) -> None:
    """Port of `ValidateRayClusterUpgradeOptions` (validation.go): Recreate or None, and only standalone."""
    upgrade_type = dig(instance, "spec", "upgradeStrategy", "type")
    if upgrade_type is None:
        return
    if upgrade_type not in (C.RAY_CLUSTER_RECREATE, C.RAY_CLUSTER_UPGRADE_NONE):
        raise ValidationError(
            f"The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value {upgrade_type} is invalid, "
            "valid "
            f"options are {C.RAY_CLUSTER_RECREATE} or {C.RAY_CLUSTER_UPGRADE_NONE}")
    creator = util.get_crd_type(util.labels_of(instance).get(C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY))
    if creator in (C.RAY_JOB_CRD, C.RAY_SERVICE_CRD):
        raise ValidationError(f"upgradeStrategy cannot be set when RayCluster is created by {creator}")


def _validate_ray_group_resources(group_name: str, params: Mapping[str, str] | None,
                                  resources: Mapping[str, str] | None) -> None:
    params = params or {}
    has_params = any(params.get(k) for k in ("num-cpus", "num-gpus", "memory", "resources"))
    if has_params and resources:
        raise ValidationError(f"resource fields should not be set in both rayStartParams and Resources for "
                              f"{group_name} group; please use only one")


def _validate_ray_group_labels(group_name: str, params: Mapping[str, str] | None,
                               labels: Mapping[str, str] | None) -> None:
    if "labels" in (params or {}):
        raise ValidationError(f"rayStartParams['labels'] is not supported for {group_name} group; please use "
                              "the "
                              "top-level Labels field instead")
    errs: list[str] = []
    for key in sorted(labels or {}):
        value = (labels or {})[key]
        errs += [f"invalid label key for {group_name} group: '{key}', error: {e}"
                 for e in is_qualified_name(key)]
        errs += [f"invalid label value for key '{key}' in {group_name} group: '{value}', error: {e}"
                 for e in is_valid_label_value(value)]
    if errs:
        raise ValidationError("; ".join(errs))


def _head_env(spec: Mapping[str, Any]) -> list[Any]:
    return util.head_container(spec).get("env") or []


def _env_value_is_true(spec: Mapping[str, Any], name: str) -> tuple[str, bool]:
    env, exists = util.env_var_by_name(name, _head_env(spec))
    value = env.get("value", "") if exists else ""
    return value, exists and value in ("1", "true")


def _validate_worker_group_idle_timeout(group: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    idle = group.get("idleTimeoutSeconds")
    if idle is None:
        return
    name = group.get("groupName", "")
    if idle < 0:
        raise ValidationError(f"worker group {name}: idleTimeoutSeconds must be non-negative, got {idle}")
    if util.is_autoscaling_v2_enabled(spec) or _env_value_is_true(spec, C.RAY_ENABLE_AUTOSCALER_V2)[1]:
        return
    raise ValidationError(
        f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set "
        f".spec.autoscalerOptions.version to 'v2' (or set {C.RAY_ENABLE_AUTOSCALER_V2} environment variable "
        "to "
        "'true' in the head pod if using KubeRay < 1.4.0)")


def _validate_worker_group_priority(group: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    priority = group.get("priority")
    if not priority:
        return
    name = group.get("groupName", "")
    ray_version = spec.get("rayVersion") or ""
    if not ray_version:
        raise ValidationError(f"worker group {name}: priority is set, but RayVersion was not specified. Ray "
                              "version 2.56.0 or later is required")
    try:
        parsed = parse_generic_version(ray_version)
    except ValueError as err:
        raise ValidationError(f"worker group {name}: priority is set, but RayVersion format is invalid: "
                              f"{ray_version}, {err}") from None
    if _version_less_than(parsed, (2, 56, 0)):
        raise ValidationError(f"worker group {name}: priority is set, but minimum Ray version is 2.56.0, got "
                              f"{ray_version}")
    if util.is_autoscaling_v2_enabled(spec) or _env_value_is_true(spec, C.RAY_ENABLE_AUTOSCALER_V2)[1]:
        return
    raise ValidationError(f"worker group {name}: priority is set to {priority}, but autoscaler v2 is not "
                          "enabled. "
                          "Priority is only supported with autoscaler v2 enabled")


def validate_ray_cluster_spec(spec: Mapping[str, Any], annotations: Mapping[str, str] | None,
                              gates: FeatureGates = DEFAULTS) -> None:
    """Port of `ValidateRayClusterSpec` (validation.go); the checks run in Go's order.

    Containers present; group resources/labels; min/max replicas (required without autoscaling,
    non-negative, min ≤ max); idle timeout and priority; GCS FT (legacy annotation with options,
    ``RAY_REDIS_ADDRESS`` without FT, password/address/namespace set outside the options, the
    backend rules); Redis username outside options; suspended groups; autoscaler v2 env/restart
    policies; autoscaler options; history server; auth; network policy; TLS.
    """
    annotations = annotations or {}
    head_pod_spec = dig(spec, "headGroupSpec", "template", "spec") or {}
    if not head_pod_spec.get("containers"):
        raise ValidationError("headGroupSpec should have at least one container")
    head_group = spec.get("headGroupSpec") or {}
    _validate_ray_group_resources("Head", head_group.get("rayStartParams"), head_group.get("resources"))
    _validate_ray_group_labels("Head", head_group.get("rayStartParams"), head_group.get("labels"))
    autoscaling = util.is_autoscaling_enabled(spec)
    groups = spec.get("workerGroupSpecs") or []
    for group in groups:
        name = group.get("groupName", "")
        if not dig(group, "template", "spec", "containers"):
            raise ValidationError("workerGroupSpec should have at least one container")
        min_r, max_r = group.get("minReplicas"), group.get("maxReplicas")
        if not autoscaling and (min_r is None or max_r is None):
            raise ValidationError(f"worker group {name} must set both minReplicas and maxReplicas when "
                                  "autoscaling is disabled")
        if min_r is not None and min_r < 0:
            raise ValidationError(f"worker group {name} has negative minReplicas {min_r}")
        if max_r is not None and max_r < 0:
            raise ValidationError(f"worker group {name} has negative maxReplicas {max_r}")
        if min_r is not None and max_r is not None and min_r > max_r:
            raise ValidationError(f"worker group {name} has minReplicas {min_r} greater than maxReplicas "
                                  f"{max_r}")
        _validate_ray_group_resources(name, group.get("rayStartParams"), group.get("resources"))
        _validate_ray_group_labels(name, group.get("rayStartParams"), group.get("labels"))
        _validate_worker_group_idle_timeout(group, spec)
        _validate_worker_group_priority(group, spec)

    options = spec.get("gcsFaultToleranceOptions")
    if annotations.get(C.RAY_FT_ENABLED_ANNOTATION_KEY) and options is not None:
        raise ValidationError(f"{C.RAY_FT_ENABLED_ANNOTATION_KEY} annotation and GcsFaultToleranceOptions "
                              "are both set. Please use only GcsFaultToleranceOptions to configure GCS fault "
                              "tolerance")
    head_env = _head_env(spec)
    if not util.is_gcs_fault_tolerance_enabled(spec, annotations) and \
            util.env_var_exists(C.RAY_REDIS_ADDRESS, head_env):
        raise ValidationError(f"{C.RAY_REDIS_ADDRESS} is set which implicitly enables GCS fault tolerance, "
                              "but "
                              "GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to "
                              "enable "
                              "GCS fault tolerance")
    head_params = head_group.get("rayStartParams") or {}
    if options is not None:
        if head_params.get("redis-password"):
            raise ValidationError("cannot set `redis-password` in rayStartParams when "
                                  "GcsFaultToleranceOptions is "
                                  "enabled - use GcsFaultToleranceOptions.RedisPassword instead")
        if util.env_var_exists(C.REDIS_PASSWORD, head_env):
            raise ValidationError("cannot set `REDIS_PASSWORD` env var in head Pod when "
                                  "GcsFaultToleranceOptions "
                                  "is enabled - use GcsFaultToleranceOptions.RedisPassword instead")
        if util.env_var_exists(C.RAY_REDIS_ADDRESS, head_env):
            raise ValidationError("cannot set `RAY_REDIS_ADDRESS` env var in head Pod when "
                                  "GcsFaultToleranceOptions is enabled - use "
                                  "GcsFaultToleranceOptions.RedisAddress "
                                  "instead")
        if annotations.get(C.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY):
            raise ValidationError("cannot set `ray.io/external-storage-namespace` annotation when "
                                  "GcsFaultToleranceOptions is enabled - use "
                                  "GcsFaultToleranceOptions.ExternalStorageNamespace instead")
        validate_gcs_fault_tolerance_backend(options, util.head_container(spec), head_pod_spec.get("volumes"),
                                             gates)
    if head_params.get("redis-username") or util.env_var_exists(C.REDIS_USERNAME, head_env):
        raise ValidationError("cannot set redis username in rayStartParams or environment variables - use "
                              "GcsFaultToleranceOptions.RedisUsername instead")

    if not gates.enabled(RAY_JOB_DELETION_POLICY):
        for group in groups:
            if group.get("suspend") is True:
                raise ValidationError(f"worker group {group.get('groupName', '')} can be suspended only when "
                                      "the "
                                      "RayJobDeletionPolicy feature gate is enabled")
    if not autoscaling:
        value, is_true = _env_value_is_true(spec, C.RAY_ENABLE_AUTOSCALER_V2)
        if is_true:
            raise ValidationError(f"environment variable {C.RAY_ENABLE_AUTOSCALER_V2} cannot be set to "
                                  f"'{value}' "
                                  "when enableInTreeAutoscaling is false. Please set "
                                  "enableInTreeAutoscaling: true "
                                  "to use autoscaler v2")
    else:
        for group in groups:
            if group.get("suspend") is True:
                raise ValidationError(f"worker group {group.get('groupName', '')} cannot be suspended with "
                                      "Autoscaler enabled")
        if dig(spec, "autoscalerOptions", "version") is not None and \
                util.env_var_exists(C.RAY_ENABLE_AUTOSCALER_V2, head_env):
            raise ValidationError(f"both .spec.autoscalerOptions.version and head Pod env var "
                                  f"{C.RAY_ENABLE_AUTOSCALER_V2} are set, please only use the former")
        if util.is_autoscaling_v2_enabled(spec):
            if head_pod_spec.get("restartPolicy") not in (None, "", "Never"):
                raise ValidationError("restartPolicy for head Pod should be Never or unset when using "
                                      "autoscaler V2")
            for group in groups:
                if dig(group, "template", "spec", "restartPolicy") not in (None, "", "Never"):
                    raise ValidationError(f"restartPolicy for worker group {group.get('groupName', '')} "
                                          "should be "
                                          "Never or unset when using autoscaler V2")
    idle = dig(spec, "autoscalerOptions", "idleTimeoutSeconds")
    if idle is not None and idle < 0:
        raise ValidationError(f"autoscalerOptions.idleTimeoutSeconds must be non-negative, got {idle}")
    if spec.get("autoscalerOptions") is not None and \
            util.env_var_exists(C.KUBERAY_GEN_AUTOSCALER_START_CMD, dig(spec, "autoscalerOptions", "env")):
        raise ValidationError(f"autoscalerOptions.env must not contain {C.KUBERAY_GEN_AUTOSCALER_START_CMD}: "
                              "it is "
                              "managed by KubeRay and injected automatically into the autoscaler container")
    _validate_history_server(spec, gates)
    _validate_auth(spec)
    if spec.get("networkPolicy") is not None and not gates.enabled(RAY_CLUSTER_NETWORK_POLICY):
        raise ValidationError("spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be "
                              "enabled")
    validate_network_policy(spec)
    if spec.get("tlsOptions") is not None and not gates.enabled(RAY_CLUSTER_MTLS):
        raise ValidationError("spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled")
    validate_tls_options(spec, gates)


def validate_gcs_fault_tolerance_backend(options: Mapping[str, Any], head_container: Mapping[str, Any],
                                         head_volumes: Sequence[Mapping[str, Any]] | None,
                                         gates: FeatureGates = DEFAULTS) -> None:
    """Port of `validateGcsFaultToleranceBackend` (validation.go).

    rocksdb: the gate must be on, no Redis fields, ``claimName`` excludes size/class/modes, and the
    user must not set ``RAY_gcs_storage``/``_path`` or a ``gcs-storage`` mount/volume. redis: no
    ``storage``.
    """
    if util.get_gcs_fault_tolerance_backend(options) == C.GCS_FT_BACKEND_ROCKS_DB:
        if not gates.enabled(GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE):
            raise ValidationError("the embedded RocksDB GCS fault tolerance backend "
                                  "(GcsFaultToleranceOptions."
                                  "Backend: 'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature "
                                  "gate "
                                  "to be enabled")
        if options.get("redisAddress"):
            raise ValidationError(
                "cannot set GcsFaultToleranceOptions.RedisAddress when backend is 'rocksdb'")
        if options.get("redisUsername") is not None:
            raise ValidationError("cannot set GcsFaultToleranceOptions.RedisUsername when backend is "
                                  "'rocksdb'")
        if options.get("redisPassword") is not None:
            raise ValidationError("cannot set GcsFaultToleranceOptions.RedisPassword when backend is "
                                  "'rocksdb'")
        if options.get("externalStorageNamespace"):
            raise ValidationError("cannot set GcsFaultToleranceOptions.ExternalStorageNamespace when backend "
                                  "is "
                                  "'rocksdb'")
        storage = options.get("storage")
        if storage is not None and storage.get("claimName") and (
                storage.get("size") is not None or storage.get("storageClassName") is not None
                or storage.get("accessModes")):
            raise ValidationError("GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with "
                                  "size, "
                                  "storageClassName, and accessModes")
        env = head_container.get("env")
        if util.env_var_exists(C.RAY_GCS_STORAGE, env) or util.env_var_exists(C.RAY_GCS_STORAGE_PATH, env):
            raise ValidationError(f"cannot set `{C.RAY_GCS_STORAGE}` or `{C.RAY_GCS_STORAGE_PATH}` env var "
                                  "in head "
                                  "Pod when the embedded GCS FT backend is used - these are managed by "
                                  "KubeRay")
        for mount in head_container.get("volumeMounts") or []:
            if mount.get("mountPath") == C.GCS_STORAGE_MOUNT_PATH or \
                    mount.get("name") == C.GCS_STORAGE_VOLUME_NAME:
                raise ValidationError(f'cannot set a volume mount named "{C.GCS_STORAGE_VOLUME_NAME}" or '
                                      f"mounted at "
                                      f"{C.GCS_STORAGE_MOUNT_PATH} in the head container when the embedded "
                                      "GCS FT "
                                      "backend is used - it is managed by KubeRay")
        for volume in head_volumes or []:
            if volume.get("name") == C.GCS_STORAGE_VOLUME_NAME:
                raise ValidationError(f'cannot set a volume named "{C.GCS_STORAGE_VOLUME_NAME}" in the head '
                                      "Pod when "
                                      "the embedded GCS FT backend is used - it is managed by KubeRay")
    elif options.get("storage") is not None:
        raise ValidationError("cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only "
                              "applies to the 'rocksdb' backend")


def _validate_history_server(spec: Mapping[str, Any], gates: FeatureGates) -> None:
    history = spec.get("historyServerOptions")
    if history is None:
        return
    if not gates.enabled(RAY_CLUSTER_HISTORY_SERVER):
        raise ValidationError("RayClusterHistoryServer feature gate is not enabled")
    collector = history.get("collectorOptions")
    if collector is None:
        raise ValidationError("historyServerOptions.collectorOptions must be set")
    validate_collector_options(collector)
    for container in dig(spec, "headGroupSpec", "template", "spec", "containers") or []:
        if container.get("name") == C.COLLECTOR_CONTAINER_NAME:
            raise ValidationError(f"head pod template must not define a container with name "
                                  f"'{C.COLLECTOR_CONTAINER_NAME}' when history server collector options are "
                                  "enabled")
    for group in spec.get("workerGroupSpecs") or []:
        for container in dig(group, "template", "spec", "containers") or []:
            if container.get("name") == C.COLLECTOR_CONTAINER_NAME:
                raise ValidationError(f"worker group {group.get('groupName', '')} pod template must not "
                                      "define a "
                                      f"container with name '{C.COLLECTOR_CONTAINER_NAME}' when history "
                                      "server "
                                      "collector options are enabled")


def validate_collector_options(collector: Mapping[str, Any]) -> None:
    """Port of `validateCollectorOptions` (validation.go): image, managed env names, storage backend env."""
    if not collector.get("image"):
        raise ValidationError("historyServerOptions.collectorOptions.image must be set")
    env = {e.get("name", ""): e for e in collector.get("env") or []}

    def has_value(name: str) -> bool:
        entry = env.get(name)
        return entry is not None and (bool(entry.get("value")) or entry.get("valueFrom") is not None)

    for name in (C.POD_IP, C.FQ_RAY_IP, C.RAY_CLUSTER_NAME, C.RAY_CLUSTER_NAMESPACE, C.RAY_ROLE, C.OWNER_KIND,
                 C.OWNER_NAME, C.EVENTS_PORT):
        if name in env:
            raise ValidationError(f"historyServerOptions.collectorOptions.env must not contain {name}: it is "
                                  "managed "
                                  "by KubeRay and injected automatically into the collector container")
    backend = (env.get(C.STORAGE_BACKEND) or {}).get("value", "")
    if not backend:
        raise ValidationError(f"{C.STORAGE_BACKEND} environment variable must be set with a literal string "
                              "value in "
                              "historyServerOptions.collectorOptions.env")
    backend = backend.upper()
    if backend == "GCS" and not has_value(C.GCS_BUCKET):
        raise ValidationError(f"{C.GCS_BUCKET} environment variable must be set when {C.STORAGE_BACKEND} is "
                              "GCS")
    if backend == "S3" and not has_value(C.S3_REGION):
        raise ValidationError(f"{C.S3_REGION} environment variable must be set when {C.STORAGE_BACKEND} "
                              "is S3")
    if backend == "AZUREBLOB":
        auth_mode = ((env.get(C.AZURE_STORAGE_AUTH_MODE) or {}).get("value") or "").strip().lower()
        if auth_mode == "connection_string":
            if not has_value(C.AZURE_STORAGE_CONNECTION_STRING):
                raise ValidationError(f"{C.AZURE_STORAGE_CONNECTION_STRING} environment variable must be set "
                                      "when "
                                      f"{C.STORAGE_BACKEND} is AZUREBLOB and {C.AZURE_STORAGE_AUTH_MODE} is "
                                      "connection_string")
        elif auth_mode in ("workload_identity", "default"):
            if not has_value(C.AZURE_STORAGE_ACCOUNT_URL):
                raise ValidationError(f"{C.AZURE_STORAGE_ACCOUNT_URL} environment variable must be set when "
                                      f"{C.STORAGE_BACKEND} is AZUREBLOB and {C.AZURE_STORAGE_AUTH_MODE} is "
                                      f"{auth_mode}")
        elif not has_value(C.AZURE_STORAGE_CONNECTION_STRING) and not has_value(C.AZURE_STORAGE_ACCOUNT_URL):
            raise ValidationError(f"either {C.AZURE_STORAGE_CONNECTION_STRING} or "
                                  f"{C.AZURE_STORAGE_ACCOUNT_URL} "
                                  f"environment variable must be set when {C.STORAGE_BACKEND} is AZUREBLOB")
    if backend == "ALIYUNOSS":
        for name in (C.ALIYUN_BUCKET, C.ALIYUN_ENDPOINT, C.ALIYUN_REGION):
            if not has_value(name):
                raise ValidationError(f"{name} environment variable must be set when {C.STORAGE_BACKEND} is "
                                      "ALIYUNOSS")


def _validate_auth(spec: Mapping[str, Any]) -> None:
    auth = spec.get("authOptions")
    if not util.is_auth_enabled(spec):
        if util.is_k8s_auth_enabled(auth):
            raise ValidationError("authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to "
                                  "'token'")
        return
    ray_version = spec.get("rayVersion") or ""
    if not ray_version:
        raise ValidationError("authOptions.mode is 'token' but RayVersion was not specified. Ray version "
                              "2.52.0 or "
                              "later is required")
    try:
        parsed = parse_generic_version(ray_version)
    except ValueError as err:
        raise ValidationError(f"authOptions.mode is 'token' but RayVersion format is invalid: {ray_version}, "
                              f"{err}") from None
    if _version_less_than(parsed, (2, 52, 0)):
        raise ValidationError("authOptions.mode is 'token' but minimum Ray version is 2.52.0, got "
                              f"{ray_version}")
    if util.is_k8s_auth_enabled(auth):
        if _version_less_than(parsed, (2, 55, 0)):
            raise ValidationError("authOptions.enableK8sTokenAuth is enabled but minimum Ray version is "
                                  "2.55.0, "
                                  f"got {ray_version}")
        if (auth or {}).get("secretName"):
            raise ValidationError("authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is "
                                  "also set")


def validate_network_policy(spec: Mapping[str, Any]) -> None:
    """Port of `validateNetworkPolicy` (validation.go): rules only for restricted directions, known groups."""
    np = spec.get("networkPolicy")
    if np is None:
        return
    mode = np.get("mode") or C.NETWORK_POLICY_DENY_ALL
    for part in ("head", "worker"):
        rules = np.get(part)
        if rules is None:
            continue
        if mode == C.NETWORK_POLICY_DENY_ALL_EGRESS and rules.get("ingressRules"):
            raise ValidationError(f'networkPolicy.{part}.ingressRules cannot be set when mode is "{mode}" '
                                  "(ingress "
                                  "is not restricted)")
        if mode == C.NETWORK_POLICY_DENY_ALL_INGRESS and rules.get("egressRules"):
            raise ValidationError(f'networkPolicy.{part}.egressRules cannot be set when mode is "{mode}" '
                                  "(egress is "
                                  "not restricted)")
    names = []
    for group in spec.get("workerGroupSpecs") or []:
        name = group.get("groupName", "")
        errs = is_dns1123_label(name)
        if errs:
            raise ValidationError(f"worker group name {_go_quote(name)} must be a valid DNS1123 label when "
                                  "networkPolicy is enabled (it is embedded in the NetworkPolicy name): "
                                  f"{_go_list(errs)}")
        names.append(name)
    for wg in np.get("workerGroups") or []:
        name = _go_quote(wg.get("groupName", ""))
        if mode == C.NETWORK_POLICY_DENY_ALL_EGRESS and wg.get("ingressRules"):
            raise ValidationError(f"networkPolicy.workerGroups[{name}].ingressRules cannot be set when "
                                  "mode is "
                                  f'"{mode}" (ingress is not restricted)')
        if mode == C.NETWORK_POLICY_DENY_ALL_INGRESS and wg.get("egressRules"):
            raise ValidationError(f"networkPolicy.workerGroups[{name}].egressRules cannot be set when "
                                  "mode is "
                                  f'"{mode}" (egress is not restricted)')
        if wg.get("groupName", "") not in names:
            raise ValidationError(f"networkPolicy.workerGroups[{name}] does not match any group name in "
                                  "workerGroupSpecs")


_TLS_ENV = (C.RAY_USE_TLS, C.RAY_TLS_SERVER_CERT, C.RAY_TLS_SERVER_KEY, C.RAY_TLS_CA_CERT)
_TLS_MANAGED = "- the operator manages TLS configuration automatically"


def _validate_no_conflicting_tls_volume_mount(container: Mapping[str, Any], location: str) -> None:
    for mount in container.get("volumeMounts") or []:
        if mount.get("name") == C.RAY_TLS_VOLUME_NAME:
            raise ValidationError(f'cannot use volume mount named "{C.RAY_TLS_VOLUME_NAME}" in {location} '
                                  "when "
                                  f"tlsOptions is set {_TLS_MANAGED}")
        if mount.get("mountPath") == C.RAY_TLS_CERT_MOUNT_PATH:
            raise ValidationError(f'cannot use volume mount at path "{C.RAY_TLS_CERT_MOUNT_PATH}" in '
                                  f"{location} "
                                  f"when tlsOptions is set {_TLS_MANAGED}")


def validate_tls_options(spec: Mapping[str, Any], gates: FeatureGates = DEFAULTS) -> None:
    """Port of `validateTLSOptions` (validation.go): no user-set TLS env or mounts when TLS is on."""
    if not util.is_tls_enabled(spec, gates):
        return
    head = util.head_container(spec)
    if head:
        for name in _TLS_ENV:
            if util.env_var_exists(name, head.get("env")):
                raise ValidationError(f"cannot set {name} environment variable in head Pod when tlsOptions "
                                      "is set "
                                      f"{_TLS_MANAGED}")
        _validate_no_conflicting_tls_volume_mount(head, "head Pod")
    for group in spec.get("workerGroupSpecs") or []:
        containers = dig(group, "template", "spec", "containers") or []
        if not containers:
            continue
        location = f"worker group {_go_quote(group.get('groupName', ''))}"
        for name in _TLS_ENV:
            if util.env_var_exists(name, containers[0].get("env")):
                raise ValidationError(f"cannot set {name} environment variable in {location} when tlsOptions "
                                      "is "
                                      f"set {_TLS_MANAGED}")
        _validate_no_conflicting_tls_volume_mount(containers[0], location)
    autoscaler = spec.get("autoscalerOptions")
    if autoscaler is not None:
        for name in _TLS_ENV:
            if util.env_var_exists(name, autoscaler.get("env")):
                raise ValidationError(f"cannot set {name} environment variable in autoscalerOptions.env when "
                                      "tlsOptions is set - the operator manages TLS configuration for the "
                                      "autoscaler "
                                      "automatically")
        _validate_no_conflicting_tls_volume_mount(autoscaler, "autoscalerOptions.volumeMounts")


# ---------------------------------------------------------------------------------------------
# RayJob
# ---------------------------------------------------------------------------------------------


def validate_ray_job_status(ray_job: Mapping[str, Any]) -> None:
    """Port of `ValidateRayJobStatus` (validation.go): Waiting only in InteractiveMode."""
    if dig(ray_job, "status", "jobDeploymentStatus") == C.JOB_DEPLOYMENT_STATUS_WAITING and \
            dig(ray_job, "spec", "submissionMode") != C.INTERACTIVE_MODE:
        raise ValidationError("The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when "
                              "SubmissionMode is not InteractiveMode")


def validate_ray_job_metadata(metadata: Mapping[str, Any]) -> None:
    """Port of `ValidateRayJobMetadata` (validation.go): name ≤ 47 characters and DNS-1035."""
    name = metadata.get("name") or ""
    if len(name) > C.MAX_RAY_JOB_NAME_LENGTH:
        raise ValidationError(f"The RayJob metadata is invalid: RayJob name should be no more than "
                              f"{C.MAX_RAY_JOB_NAME_LENGTH} characters")
    errs = is_dns1035_label(name)
    if errs:
        raise ValidationError(f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: "
                              f"{_go_list(errs)}")


def validate_ray_job_spec(ray_job: Mapping[str, Any], gates: FeatureGates = DEFAULTS) -> None:
    """Port of `ValidateRayJobSpec` (validation.go); checks in Go's order."""
    spec = ray_job.get("spec") or {}
    invalid = "The RayJob spec is invalid: "
    if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
        raise ValidationError(invalid + "a RayJob with shutdownAfterJobFinishes set to false is not allowed "
                                        "to be "
                              "suspended")
    if (spec.get("ttlSecondsAfterFinished") or 0) < 0:
        raise ValidationError(invalid + "TTLSecondsAfterFinished must be a non-negative integer")
    validate_deletion_configuration(ray_job, gates)
    selector_mode = bool(spec.get("clusterSelector"))
    if spec.get("suspend") and selector_mode:
        raise ValidationError(invalid + "the ClusterSelector mode doesn't support the suspend operation")
    if spec.get("rayClusterSpec") is None and not selector_mode:
        raise ValidationError(invalid + "one of RayClusterSpec or ClusterSelector must be set")
    mode = spec.get("submissionMode") or C.K8S_JOB_MODE
    backoff_limit = spec.get("backoffLimit")
    if selector_mode:
        if not spec["clusterSelector"].get(C.RAY_JOB_CLUSTER_SELECTOR_KEY):
            raise ValidationError("cluster name in ClusterSelector should not be empty")
        if mode == C.SIDECAR_MODE:
            raise ValidationError("ClusterSelector is not supported in SidecarMode")
        if backoff_limit is not None and backoff_limit > 0:
            raise ValidationError(invalid + "BackoffLimit is incompatible with ClusterSelector mode")
    if mode == C.INTERACTIVE_MODE and backoff_limit is not None and backoff_limit > 0:
        raise ValidationError(invalid + "BackoffLimit is incompatible with InteractiveMode")
    if mode == C.SIDECAR_MODE:
        if spec.get("submitterPodTemplate") is not None:
            raise ValidationError("Currently, SidecarMode doesn't support SubmitterPodTemplate")
        if spec.get("submitterConfig") is not None:
            raise ValidationError("Currently, SidecarMode doesn't support SubmitterConfig")
        restart = dig(spec, "rayClusterSpec", "headGroupSpec", "template", "spec", "restartPolicy")
        if restart not in (None, "", "Never"):
            raise ValidationError(
                "restartPolicy for head Pod should be Never or unset when using SidecarMode")
    cluster_spec = spec.get("rayClusterSpec")
    if cluster_spec is not None:
        if util.is_k8s_auth_enabled(cluster_spec.get("authOptions")):
            raise ValidationError(invalid + "K8s token auth mode is currently not supported for RayJob")
        try:
            validate_ray_cluster_spec(cluster_spec, util.annotations_of(ray_job), gates)
        except ValidationError as err:
            raise ValidationError(invalid + str(err)) from err
    runtime_env = spec.get("runtimeEnvYAML") or ""
    try:
        parsed = yaml.safe_load(runtime_env) if runtime_env else None
        if parsed is not None and not isinstance(parsed, dict):
            raise yaml.YAMLError(f"cannot unmarshal {type(parsed).__name__} into Go value of type "
                                 "types.RuntimeEnvType")
    except yaml.YAMLError as err:
        raise ValidationError(f"failed to unmarshal RuntimeEnvYAML: {runtime_env}: {err}") from err
    if spec.get("activeDeadlineSeconds") is not None and spec["activeDeadlineSeconds"] <= 0:
        raise ValidationError(invalid + "activeDeadlineSeconds must be a positive integer")
    if spec.get("preRunningDeadlineSeconds") is not None and spec["preRunningDeadlineSeconds"] <= 0:
        raise ValidationError(invalid + "preRunningDeadlineSeconds must be a positive integer")
    if backoff_limit is not None and backoff_limit < 0:
        raise ValidationError(invalid + "backoffLimit must be a positive integer")


def validate_deletion_configuration(ray_job: Mapping[str, Any], gates: FeatureGates = DEFAULTS) -> None:
    """Port of `validateDeletionConfiguration` (validation.go): TTL needs shutdown; strategy shapes."""
    spec = ray_job.get("spec") or {}
    invalid = "The RayJob spec is invalid: "
    if not spec.get("shutdownAfterJobFinishes") and (spec.get("ttlSecondsAfterFinished") or 0) > 0:
        raise ValidationError(invalid + "a RayJob with shutdownAfterJobFinishes set to false cannot have "
                              "TTLSecondsAfterFinished")
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return
    if not gates.enabled(RAY_JOB_DELETION_POLICY):
        raise ValidationError("RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy")
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = bool(strategy.get("deletionRules"))
    if rules and spec.get("shutdownAfterJobFinishes"):
        raise ValidationError(invalid + "spec.shutdownAfterJobFinishes and "
                                        "spec.deletionStrategy.deletionRules are "
                              "mutually exclusive")
    if rules and legacy:
        raise ValidationError(invalid + "Cannot use both legacy onSuccess/onFailure fields and deletionRules "
                              "simultaneously")
    if legacy:
        validate_legacy_deletion_policies(ray_job)
    elif rules:
        validate_deletion_rules(ray_job)
    else:
        raise ValidationError(invalid + "DeletionStrategy requires either BOTH onSuccess and onFailure, OR "
                                        "the "
                              "deletionRules field (cannot be empty)")


def _validate_deletion_condition(condition: Mapping[str, Any]) -> str | None:
    has_job_status = condition.get("jobStatus") is not None
    has_deployment_status = condition.get("jobDeploymentStatus") is not None
    if has_job_status and has_deployment_status:
        return "cannot set both JobStatus and JobDeploymentStatus at the same time"
    if not has_job_status and not has_deployment_status:
        return "exactly one of JobStatus and JobDeploymentStatus must be set"
    if (condition.get("ttlSeconds") or 0) < 0:
        return "TTLSeconds must be non-negative"
    return None


def _ttl_consistency_errors(policy_ttls: Mapping[str, int], condition_type: str, value: str) -> list[str]:
    errs = []
    prev: tuple[str, int] | None = None
    for policy in (C.DELETE_WORKERS, C.DELETE_CLUSTER, C.DELETE_SELF):
        if policy not in policy_ttls:
            continue
        ttl = policy_ttls[policy]
        if prev is not None and ttl < prev[1]:
            errs.append(f"for {condition_type} '{value}': {policy} TTL ({ttl}) must be >= {prev[0]} TTL "
                        f"({prev[1]})")
        prev = (policy, ttl)
    return errs


def validate_deletion_rules(ray_job: Mapping[str, Any]) -> None:
    """Port of `validateDeletionRules` (validation.go): all errors, joined by newlines (``errors.Join``)."""
    spec = ray_job.get("spec") or {}
    selector_mode = bool(spec.get("clusterSelector"))
    by_job_status: dict[str, dict[str, int]] = {}
    by_deployment_status: dict[str, dict[str, int]] = {}
    errs: list[str] = []
    for i, rule in enumerate(dig(spec, "deletionStrategy", "deletionRules") or []):
        condition = rule.get("condition") or {}
        policy = rule.get("policy", "")
        problem = _validate_deletion_condition(condition)
        if problem is not None:
            errs.append(f"deletionRules[{i}]: {problem}")
            continue
        if selector_mode and policy in (C.DELETE_CLUSTER, C.DELETE_WORKERS):
            errs.append(f"deletionRules[{i}]: DeletionPolicyType '{policy}' not supported when "
                        "ClusterSelector is set")
            continue
        if util.is_autoscaling_enabled(spec.get("rayClusterSpec")) and policy == C.DELETE_WORKERS:
            errs.append(f"deletionRules[{i}]: DeletionPolicyType 'DeleteWorkers' not supported with "
                        "autoscaling "
                        "enabled")
            continue
        ttl = int(condition.get("ttlSeconds") or 0)
        if condition.get("jobStatus") is not None:
            group = by_job_status.setdefault(condition["jobStatus"], {})
            if policy in group:
                errs.append(f"deletionRules[{i}]: duplicate rule for DeletionPolicyType '{policy}' and "
                            "JobStatus "
                            f"'{condition['jobStatus']}'")
                continue
        else:
            group = by_deployment_status.setdefault(condition["jobDeploymentStatus"], {})
            if policy in group:
                errs.append(f"deletionRules[{i}]: duplicate rule for DeletionPolicyType '{policy}' and "
                            f"JobDeploymentStatus '{condition['jobDeploymentStatus']}'")
                continue
        group[policy] = ttl
    for status, ttls in by_job_status.items():
        errs += _ttl_consistency_errors(ttls, "JobStatus", status)
    for status, ttls in by_deployment_status.items():
        errs += _ttl_consistency_errors(ttls, "JobDeploymentStatus", status)
    if errs:
        raise ValidationError("\n".join(errs))


def validate_legacy_deletion_policies(ray_job: Mapping[str, Any]) -> None:
    """Port of `validateLegacyDeletionPolicies` (validation.go): both policies, and their compatibility."""
    spec = ray_job.get("spec") or {}
    strategy = spec.get("deletionStrategy") or {}
    on_success, on_failure = strategy.get("onSuccess"), strategy.get("onFailure")
    if on_success is None or on_failure is None:
        raise ValidationError("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set "
                              "when using "
                              "the legacy deletion policy fields of DeletionStrategy")
    success_policy, failure_policy = on_success.get("policy"), on_failure.get("policy")
    if success_policy is None:
        raise ValidationError("the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset "
                              "when "
                              "DeletionStrategy is enabled")
    if failure_policy is None:
        raise ValidationError("the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset "
                              "when "
                              "DeletionStrategy is enabled")
    if spec.get("clusterSelector"):
        if success_policy in (C.DELETE_CLUSTER, C.DELETE_WORKERS):
            raise ValidationError("the ClusterSelector mode doesn't support "
                                  f"DeletionStrategy={success_policy} on "
                                  "success")
        if failure_policy in (C.DELETE_CLUSTER, C.DELETE_WORKERS):
            raise ValidationError("the ClusterSelector mode doesn't support "
                                  f"DeletionStrategy={failure_policy} on "
                                  "failure")
    if C.DELETE_WORKERS in (success_policy, failure_policy) and \
            util.is_autoscaling_enabled(spec.get("rayClusterSpec")):
        raise ValidationError("DeletionStrategy=DeleteWorkers currently does not support RayCluster with "
                              "autoscaling "
                              "enabled")
    if spec.get("shutdownAfterJobFinishes") and C.DELETE_NONE in (success_policy, failure_policy):
        raise ValidationError("The RayJob spec is invalid: shutdownAfterJobFinshes is set to 'true' while "
                              "deletion "
                              "policy is 'DeleteNone'")


# ---------------------------------------------------------------------------------------------
# RayService
# ---------------------------------------------------------------------------------------------


def validate_initializing_timeout(annotations: Mapping[str, str] | None) -> None:
    """Port of `validateInitializingTimeout` (validation.go): a positive Go duration or integer seconds."""
    value = (annotations or {}).get(C.RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION, "")
    if not value:
        return
    key = C.RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION
    duration = parse_go_duration(value)
    if duration is not None:
        if duration <= 0:
            raise ValidationError(f"annotation {key} must be a positive duration, got: {value}")
        return
    if re.fullmatch(r"[+-]?[0-9]+", value):
        if int(value) <= 0:
            raise ValidationError(f"annotation {key} must be a positive integer (seconds), got: {value}")
        return
    raise ValidationError(f"annotation {key} has invalid format: {value}. Expected Go duration format (e.g., "
                          "'5m', "
                          "'1h') or positive integer seconds")


def validate_ray_service_metadata(metadata: Mapping[str, Any]) -> None:
    """Port of `ValidateRayServiceMetadata` (validation.go): name ≤ 47, DNS-1035, initializing timeout."""
    name = metadata.get("name") or ""
    invalid = "The RayService metadata is invalid: "
    if len(name) > C.MAX_RAY_SERVICE_NAME_LENGTH:
        raise ValidationError(f"{invalid}RayService name should be no more than "
                              f"{C.MAX_RAY_SERVICE_NAME_LENGTH} "
                              "characters")
    errs = is_dns1035_label(name)
    if errs:
        raise ValidationError(f"{invalid}RayService name should be a valid DNS1035 label: {_go_list(errs)}")
    try:
        validate_initializing_timeout(metadata.get("annotations"))
    except ValidationError as err:
        raise ValidationError(f"{invalid}RayService annotations is invalid: {err}") from err


def validate_ray_service_spec(ray_service: Mapping[str, Any], gates: FeatureGates = DEFAULTS) -> None:
    """Port of `ValidateRayServiceSpec` (validation.go).

    No K8s token auth; a valid cluster spec; no ``headService`` name; upgrade type in
    {NewClusterWithIncrementalUpgrade, NewCluster, None}; non-negative deletion delay; incremental
    upgrade options when that type is used.
    """
    spec = ray_service.get("spec") or {}
    cluster_spec = spec.get("rayClusterConfig") or {}
    invalid = "The RayService spec is invalid: "
    if util.is_k8s_auth_enabled(cluster_spec.get("authOptions")):
        raise ValidationError(invalid + "K8s token auth mode is currently not supported for RayService")
    try:
        validate_ray_cluster_spec(cluster_spec, util.annotations_of(ray_service), gates)
    except ValidationError as err:
        raise ValidationError(invalid + str(err)) from err
    if dig(cluster_spec, "headGroupSpec", "headService", "metadata", "name"):
        raise ValidationError(invalid + "spec.rayClusterConfig.headGroupSpec.headService.metadata.name "
                                        "should not be "
                              "set")
    upgrade_type = dig(spec, "upgradeStrategy", "type")
    if upgrade_type is not None and upgrade_type not in (
            C.RAY_SERVICE_UPGRADE_NONE, C.RAY_SERVICE_NEW_CLUSTER,
            C.RAY_SERVICE_NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE):
        raise ValidationError(
            f"{invalid}Spec.UpgradeStrategy.Type value {upgrade_type} is invalid, valid options are "
            f"{C.RAY_SERVICE_NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE}, {C.RAY_SERVICE_NEW_CLUSTER}, or "
            f"{C.RAY_SERVICE_UPGRADE_NONE}")
    delay = spec.get("rayClusterDeletionDelaySeconds")
    if delay is not None and delay < 0:
        raise ValidationError(f"{invalid}Spec.RayClusterDeletionDelaySeconds should be a non-negative "
                              "integer, got "
                              f"{delay}")
    if util.is_incremental_upgrade_enabled(spec, gates):
        try:
            validate_cluster_upgrade_options(ray_service)
        except ValidationError as err:
            raise ValidationError(invalid + str(err)) from err


def validate_cluster_upgrade_options(ray_service: Mapping[str, Any]) -> None:
    """Port of `ValidateClusterUpgradeOptions` (validation.go): incremental upgrade prerequisites."""
    spec = ray_service.get("spec") or {}
    if not util.is_autoscaling_enabled(spec.get("rayClusterConfig")):
        raise ValidationError("Ray Autoscaler is required for NewClusterWithIncrementalUpgrade")
    options = dig(spec, "upgradeStrategy", "clusterUpgradeOptions")
    if options is None:
        raise ValidationError("ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade")
    max_surge = options.get("maxSurgePercent")
    max_surge = 100 if max_surge is None else max_surge  # CRD default
    if max_surge < 0 or max_surge > 100:
        raise ValidationError("maxSurgePercent must be between 0 and 100")
    step = options.get("stepSizePercent")
    if step is None or step < 0 or step > 100:
        raise ValidationError("stepSizePercent must be between 0 and 100")
    if step > max_surge:
        raise ValidationError("stepSizePercent must be less than or equal to maxSurgePercent")
    interval = options.get("intervalSeconds")
    if interval is None or interval <= 0:
        raise ValidationError("intervalSeconds must be greater than 0")
    if not options.get("gatewayClassName"):
        raise ValidationError("gatewayClassName is required for NewClusterWithIncrementalUpgrade")
