"""Built-in kinds of kube 1.33's discovery that are stored and validated here.

PodDisruptionBudget, HorizontalPodAutoscaler, the storage.k8s.io kinds (StorageClass, CSIDriver,
CSINode, CSIStorageCapacity, VolumeAttachment), the admissionregistration.k8s.io kinds
(Validating/MutatingWebhookConfiguration, ValidatingAdmissionPolicy and its Binding),
PriorityClass, CertificateSigningRequest, APIService, ResourceQuota and LimitRange: a Helm chart
or a client's test that creates them gets kube's scope, short names, defaults (the
``SetDefaults_*`` functions of each group's ``v1``/``v2`` package) and the main checks of each
kind's ``Validate*`` function (pkg/apis/<group>/validation), with kube's messages. Some are
not acted on: no autoscaler reads HPAs, no provisioner reads StorageClasses
(docs/deviations.md). ResourceQuota and LimitRange are enforced by
`emu.apiserver.admission`, the webhook configurations by `emu.apiserver.webhooks`,
ValidatingAdmissionPolicy and its Binding by `emu.apiserver.policies`, PodDisruptionBudgets
by the eviction API (`emu.apiserver.disruption`).
"""

from __future__ import annotations

import re
from typing import Any

from . import validation as v
from .errors import StatusCause
from .kinds import BUILTIN_MERGE_KEYS, KindInfo, _own

Obj = dict[str, Any]

_PERCENT = re.compile(r"^[0-9]+%$")


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _int_or_percent(field: str, value: Any) -> list[StatusCause]:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int | str):
        return [v.invalid(field, value, "must be an integer or percentage (e.g '5%')")]
    if isinstance(value, int):
        return [v.invalid(field, value, "must be greater than or equal to 0")] if value < 0 else []
    if not _PERCENT.match(value):
        return [v.invalid(field, value, "a valid percent string must be a numeric string "
                                        "followed by an ending '%' (e.g. '1%',  or '93%', regex "
                                        "used for validation is '[0-9]+%')")]
    if int(value[:-1]) > 100:
        return [v.invalid(field, value, "must not be greater than 100%")]
    return []


# -- policy/v1 PodDisruptionBudget -------------------------------------------------------------------


def default_pdb(obj: Obj, old: Obj | None) -> None:
    """The status kube sends for a new PDB: its counts are non-``omitempty`` int32s."""
    if old is None or not isinstance(obj.get("status"), dict):
        status = _own(obj, "status")
        for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
            status.setdefault(key, 0)


def validate_pdb(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidatePodDisruptionBudgetSpec``."""
    spec = _spec(obj)
    causes: list[StatusCause] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(v.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both "
                                              "set"))
    causes += _int_or_percent("spec.minAvailable", spec.get("minAvailable"))
    causes += _int_or_percent("spec.maxUnavailable", spec.get("maxUnavailable"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("AlwaysAllow", "IfHealthyBudget"):
        causes.append(v.not_supported("spec.unhealthyPodEvictionPolicy", policy,
                                      ("AlwaysAllow", "IfHealthyBudget")))
    return causes


# -- autoscaling/v2 HorizontalPodAutoscaler -----------------------------------------------------------


def default_hpa(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_HorizontalPodAutoscaler`` (v2): minReplicas 1, and CPU at 80% utilization
    when no metric is given; the status's ``desiredReplicas`` is always sent."""
    if isinstance(obj.get("spec"), dict):
        spec = _own(obj, "spec")
        spec.setdefault("minReplicas", 1)
        if not spec.get("metrics"):
            spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
                "type": "Utilization", "averageUtilization": 80}}}]
    if old is None or not isinstance(obj.get("status"), dict):
        _own(obj, "status").setdefault("desiredReplicas", 0)


def validate_hpa(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``validateHorizontalPodAutoscalerSpec``: the target reference, the replica bounds."""
    spec = _spec(obj)
    causes: list[StatusCause] = []
    ref = spec.get("scaleTargetRef")
    ref = ref if isinstance(ref, dict) else {}
    if not ref.get("kind"):
        causes.append(v.required("spec.scaleTargetRef.kind"))
    if not ref.get("name"):
        causes.append(v.required("spec.scaleTargetRef.name"))
    low = spec.get("minReplicas", 1)
    if isinstance(low, int) and low < 1:
        causes.append(v.invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    high = spec.get("maxReplicas")
    if high is None:
        causes.append(v.required("spec.maxReplicas"))
    elif isinstance(high, int) and isinstance(low, int) and high < low:
        causes.append(v.invalid("spec.maxReplicas", high,
                                "must be greater than or equal to `minReplicas`"))
    return causes


# -- storage.k8s.io/v1 ---------------------------------------------------------------------------------


def default_storage_class(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_StorageClass``: reclaim Delete, bind Immediate."""
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def admit_default_storage_class(pvc: Obj, classes: Any) -> None:
    """The DefaultStorageClass admission plugin (``GetDefaultClass``): a claim created without
    ``spec.storageClassName`` gets the default class, the newest of those annotated
    ``storageclass.kubernetes.io/is-default-class: "true"`` (by creation time, then name).
    ``classes`` is the StorageClass table's entries (read only when a claim needs them)."""
    spec = pvc.get("spec")
    if not isinstance(spec, dict) or spec.get("storageClassName") is not None:
        return
    import orjson

    best: tuple[str, str] | None = None
    for key in sorted(classes):
        sc = orjson.loads(classes[key].data)
        meta = sc.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if annotations.get("storageclass.kubernetes.io/is-default-class") != "true" and \
                annotations.get("storageclass.beta.kubernetes.io/is-default-class") != "true":
            continue
        cand = (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))
        if best is None or cand[0] > best[0] or (cand[0] == best[0] and cand[1] < best[1]):
            best = cand
    if best is not None:
        spec["storageClassName"] = best[1]


def validate_storage_class(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidateStorageClass`` and ``ValidateStorageClassUpdate``."""
    causes: list[StatusCause] = []
    if not obj.get("provisioner"):
        causes.append(v.required("provisioner"))
    if obj.get("reclaimPolicy") not in ("Delete", "Retain"):
        causes.append(v.not_supported("reclaimPolicy", obj.get("reclaimPolicy"),
                                      ("Delete", "Retain")))
    if obj.get("volumeBindingMode") not in ("Immediate", "WaitForFirstConsumer"):
        causes.append(v.not_supported("volumeBindingMode", obj.get("volumeBindingMode"),
                                      ("Immediate", "WaitForFirstConsumer")))
    if old is not None:
        for name in ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"):
            if obj.get(name) != old.get(name):
                causes.append(v.forbidden(name, f"updates to {name} are forbidden."))
    return causes


def default_csi_driver(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_CSIDriver``."""
    spec = _own(obj, "spec")
    spec.setdefault("attachRequired", True)
    spec.setdefault("podInfoOnMount", False)
    spec.setdefault("storageCapacity", False)
    spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
    spec.setdefault("requiresRepublish", False)
    spec.setdefault("seLinuxMount", False)
    spec.setdefault("volumeLifecycleModes", ["Persistent"])


def validate_csi_driver(obj: Obj, old: Obj | None) -> list[StatusCause]:
    causes: list[StatusCause] = []
    for i, mode in enumerate(_spec(obj).get("volumeLifecycleModes") or ()):
        if mode not in ("Persistent", "Ephemeral"):
            causes.append(v.not_supported(f"spec.volumeLifecycleModes[{i}]", mode,
                                          ("Ephemeral", "Persistent")))
    if old is not None:
        for name in ("attachRequired", "podInfoOnMount", "volumeLifecycleModes"):
            if _spec(obj).get(name) != _spec(old).get(name):
                causes.append(v.immutable(f"spec.{name}", _spec(obj).get(name)))
    return causes


def validate_csi_node(obj: Obj, old: Obj | None) -> list[StatusCause]:
    causes: list[StatusCause] = []
    seen: set[str] = set()
    for i, driver in enumerate(_spec(obj).get("drivers") or ()):
        name = driver.get("name") if isinstance(driver, dict) else None
        if not name:
            causes.append(v.required(f"spec.drivers[{i}].name"))
        elif name in seen:
            causes.append(v.duplicate(f"spec.drivers[{i}].name", name))
        else:
            seen.add(name)
        if isinstance(driver, dict) and not driver.get("nodeID"):
            causes.append(v.required(f"spec.drivers[{i}].nodeID"))
    return causes


def validate_storage_capacity(obj: Obj, old: Obj | None) -> list[StatusCause]:
    return [] if obj.get("storageClassName") else [v.required("storageClassName")]


def validate_volume_attachment(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidateVolumeAttachment``; the spec is immutable."""
    spec = _spec(obj)
    causes: list[StatusCause] = []
    if not spec.get("attacher"):
        causes.append(v.required("spec.attacher"))
    source = spec.get("source") if isinstance(spec.get("source"), dict) else {}
    assert isinstance(source, dict)
    if bool(source.get("persistentVolumeName")) == bool(source.get("inlineVolumeSpec")):
        causes.append(v.required("spec.source", "must specify exactly one of "
                                                "persistentVolumeName and inlineVolumeSpec"))
    if not spec.get("nodeName"):
        causes.append(v.required("spec.nodeName"))
    if old is not None and spec != _spec(old):
        causes.append(v.invalid("spec", spec, "field is immutable"))
    return causes


# -- admissionregistration.k8s.io/v1 --------------------------------------------------------------


def _default_rules(rules: Any) -> Any:
    if not isinstance(rules, list):
        return rules
    return [{**r, "scope": r.get("scope", "*")} if isinstance(r, dict) else r for r in rules]


def _default_webhooks(mutating: bool) -> Any:
    def default(obj: Obj, old: Obj | None) -> None:
        """``SetDefaults_ValidatingWebhook`` / ``_MutatingWebhook``, ``SetDefaults_Rule``,
        ``SetDefaults_ServiceReference``."""
        hooks = obj.get("webhooks")
        if not isinstance(hooks, list):
            return
        out = []
        for hook in hooks:
            if not isinstance(hook, dict):
                out.append(hook)
                continue
            hook = {**hook}
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            hook.setdefault("timeoutSeconds", 10)
            if mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            if "rules" in hook:
                hook["rules"] = _default_rules(hook["rules"])
            client = hook.get("clientConfig")
            if isinstance(client, dict) and isinstance(client.get("service"), dict):
                hook["clientConfig"] = {**client, "service": {"port": 443, **client["service"]}}
            out.append(hook)
        obj["webhooks"] = out

    return default


def validate_webhooks(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``validateWebhook``: names (a domain of three segments or more, unique), the client
    config, sideEffects and admissionReviewVersions (required in v1), the timeout."""
    causes: list[StatusCause] = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or ()):
        where = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            causes.append(v.invalid(where, hook, "must be an object"))
            continue
        name = hook.get("name") or ""
        if not name:
            causes.append(v.required(f"{where}.name"))
        else:
            causes += v.qualified_name(f"{where}.name", name) if "/" in name else []
            if len(name.split(".")) < 3:
                causes.append(v.invalid(f"{where}.name", name,
                                        "should be a domain with at least three segments "
                                        "separated by dots"))
            if name in seen:
                causes.append(v.duplicate(f"{where}.name", name))
            seen.add(name)
        client = hook.get("clientConfig") if isinstance(hook.get("clientConfig"), dict) else {}
        assert isinstance(client, dict)
        if bool(client.get("url")) == bool(client.get("service")):
            causes.append(v.required(f"{where}.clientConfig",
                                     "exactly one of url or service is required"))
        side = hook.get("sideEffects")
        if side not in ("None", "NoneOnDryRun"):
            causes.append(v.not_supported(f"{where}.sideEffects", side, ("None", "NoneOnDryRun"))
                          if side is not None else
                          v.required(f"{where}.sideEffects",
                                     "must specify one of None, NoneOnDryRun"))
        versions = hook.get("admissionReviewVersions")
        if not versions:
            causes.append(v.required(f"{where}.admissionReviewVersions",
                                     "must specify one of v1, v1beta1"))
        timeout = hook.get("timeoutSeconds", 10)
        if isinstance(timeout, int) and not 1 <= timeout <= 30:
            causes.append(v.invalid(f"{where}.timeoutSeconds", timeout,
                                    "the timeout value must be between 1 and 30 seconds"))
        policy = hook.get("failurePolicy")
        if policy not in ("Fail", "Ignore"):
            causes.append(v.not_supported(f"{where}.failurePolicy", policy, ("Fail", "Ignore")))
    return causes


def default_admission_policy(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_ValidatingAdmissionPolicySpec`` and ``_MatchResources``."""
    if not isinstance(obj.get("spec"), dict):
        return
    spec = _own(obj, "spec")
    spec.setdefault("failurePolicy", "Fail")
    match = spec.get("matchConstraints")
    if isinstance(match, dict):
        match = {**match}
        match.setdefault("matchPolicy", "Equivalent")
        match.setdefault("namespaceSelector", {})
        match.setdefault("objectSelector", {})
        if "resourceRules" in match:
            match["resourceRules"] = _default_rules(match["resourceRules"])
        spec["matchConstraints"] = match


def validate_admission_policy(obj: Obj, old: Obj | None) -> list[StatusCause]:
    spec = _spec(obj)
    causes: list[StatusCause] = []
    if not spec.get("validations") and not spec.get("auditAnnotations"):
        causes.append(v.required("spec.validations",
                                 "validations or auditAnnotations must contain at least one "
                                 "item"))
    for i, rule in enumerate(spec.get("validations") or ()):
        if not isinstance(rule, dict) or not rule.get("expression"):
            causes.append(v.required(f"spec.validations[{i}].expression"))
    if spec.get("failurePolicy") not in ("Fail", "Ignore"):
        causes.append(v.not_supported("spec.failurePolicy", spec.get("failurePolicy"),
                                      ("Fail", "Ignore")))
    return causes


def validate_policy_binding(obj: Obj, old: Obj | None) -> list[StatusCause]:
    spec = _spec(obj)
    causes: list[StatusCause] = []
    if not spec.get("policyName"):
        causes.append(v.required("spec.policyName"))
    actions = spec.get("validationActions")
    if not actions:
        causes.append(v.required("spec.validationActions",
                                 "at least one validation action is required"))
    for i, action in enumerate(actions or ()):
        if action not in ("Deny", "Warn", "Audit"):
            causes.append(v.not_supported(f"spec.validationActions[{i}]", action,
                                          ("Audit", "Deny", "Warn")))
    return causes


# -- scheduling, certificates, apiregistration, core ------------------------------------------------

_HIGHEST_USER_PRIORITY = 1_000_000_000


def default_priority_class(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_PriorityClass``: PreemptLowerPriority."""
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def validate_priority_class(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidatePriorityClass`` / ``ValidatePriorityClassUpdate``."""
    causes: list[StatusCause] = []
    name = str((obj.get("metadata") or {}).get("name", ""))
    value = obj.get("value", 0)
    if name.startswith("system-") and old is None:
        causes.append(v.forbidden("metadata.name", "priority class names with 'system-' prefix "
                                                   "are reserved"))
    if isinstance(value, int) and value > _HIGHEST_USER_PRIORITY:
        causes.append(v.forbidden("value", f"maximum allowed value of a user defined priority "
                                           f"is {_HIGHEST_USER_PRIORITY}"))
    policy = obj.get("preemptionPolicy")
    if policy not in ("PreemptLowerPriority", "Never"):
        causes.append(v.not_supported("preemptionPolicy", policy,
                                      ("Never", "PreemptLowerPriority")))
    if old is not None:
        if value != old.get("value", 0):
            causes.append(v.forbidden("value", "may not be changed in an update."))
        if policy != old.get("preemptionPolicy"):
            causes.append(v.immutable("preemptionPolicy", policy))
    return causes


def validate_csr(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidateCertificateRequest`` (its checks that need no PEM parsing)."""
    spec = _spec(obj)
    causes: list[StatusCause] = []
    if not spec.get("request"):
        causes.append(v.required("spec.request"))
    if not spec.get("signerName"):
        causes.append(v.required("spec.signerName"))
    elif old is None and spec.get("signerName") == "kubernetes.io/legacy-unknown":
        causes.append(v.invalid("spec.signerName", spec["signerName"],
                                "the legacy signerName is not allowed via this API version"))
    if not spec.get("usages"):
        causes.append(v.required("spec.usages"))
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and seconds < 600:
        causes.append(v.invalid("spec.expirationSeconds", seconds,
                                "may not specify a duration less than 600 seconds (10 minutes)"))
    if old is not None and spec != _spec(old):
        causes.append(v.invalid("spec", spec, "field is immutable"))
    return causes


def validate_api_service(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidateAPIService``: named ``<version>.<group>``, the priorities' ranges."""
    spec = _spec(obj)
    causes: list[StatusCause] = []
    name = str((obj.get("metadata") or {}).get("name", ""))
    group, version = spec.get("group", ""), spec.get("version", "")
    if not version:
        causes.append(v.required("spec.version"))
    want = f"{version}.{group}" if group else version
    if version and name != want:
        causes.append(v.invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: '
                                                       f'"{want}"'))
    low = spec.get("groupPriorityMinimum", 0)
    if not isinstance(low, int) or not 0 < low <= 20000:
        causes.append(v.invalid("spec.groupPriorityMinimum", low,
                                "must be positive and less than 20000"))
    prio = spec.get("versionPriority", 0)
    if not isinstance(prio, int) or not 0 < prio <= 1000:
        causes.append(v.invalid("spec.versionPriority", prio,
                                "must be positive and less than 1000"))
    return causes


def default_limit_range(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_LimitRangeItem``: a Container limit's default from its max, its default
    request from its default, then from its min."""
    limits = _spec(obj).get("limits")
    if not isinstance(limits, list):
        return
    out = []
    for item in limits:
        if isinstance(item, dict) and item.get("type") == "Container":
            default = dict(item.get("default") or {})
            for key, value in (item.get("max") or {}).items():
                default.setdefault(key, value)
            request = dict(item.get("defaultRequest") or {})
            for key, value in (*default.items(), *(item.get("min") or {}).items()):
                request.setdefault(key, value)
            item = {**item}
            if default:
                item["default"] = default
            if request:
                item["defaultRequest"] = request
        out.append(item)
    _own(obj, "spec")["limits"] = out


def validate_limit_range(obj: Obj, old: Obj | None) -> list[StatusCause]:
    causes: list[StatusCause] = []
    for i, item in enumerate(_spec(obj).get("limits") or ()):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in ("Pod", "Container", "PersistentVolumeClaim"):
            causes.append(v.not_supported(f"spec.limits[{i}].type", kind,
                                          ("Container", "PersistentVolumeClaim", "Pod")))
    return causes


def stored_builtin_kinds() -> list[KindInfo]:
    """The kinds above, with kube's scope, status subresource and short names."""
    smp = BUILTIN_MERGE_KEYS
    adm, sto = "admissionregistration.k8s.io", "storage.k8s.io"
    return [
        KindInfo("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", has_status=True,
                 has_generation=True, defaulter=default_pdb, validator=validate_pdb,
                 merge_keys=smp, short_names=("pdb",)),
        KindInfo("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                 has_status=True, has_generation=True, defaulter=default_hpa,
                 validator=validate_hpa, merge_keys=smp, short_names=("hpa",)),
        KindInfo(sto, "v1", "StorageClass", "storageclasses", namespaced=False,
                 defaulter=default_storage_class, validator=validate_storage_class,
                 merge_keys=smp, return_deleted_object=True, short_names=("sc",)),
        KindInfo(sto, "v1", "CSIDriver", "csidrivers", namespaced=False,
                 defaulter=default_csi_driver, validator=validate_csi_driver, merge_keys=smp,
                 return_deleted_object=True),
        KindInfo(sto, "v1", "CSINode", "csinodes", namespaced=False,
                 validator=validate_csi_node, merge_keys=smp),
        KindInfo(sto, "v1", "CSIStorageCapacity", "csistoragecapacities",
                 validator=validate_storage_capacity, merge_keys=smp),
        KindInfo(sto, "v1", "VolumeAttachment", "volumeattachments", namespaced=False,
                 has_status=True, validator=validate_volume_attachment, merge_keys=smp),
        KindInfo(adm, "v1", "ValidatingWebhookConfiguration",
                 "validatingwebhookconfigurations", namespaced=False, has_generation=True,
                 defaulter=_default_webhooks(False), validator=validate_webhooks,
                 merge_keys=smp),
        KindInfo(adm, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                 namespaced=False, has_generation=True, defaulter=_default_webhooks(True),
                 validator=validate_webhooks, merge_keys=smp),
        KindInfo(adm, "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
                 namespaced=False, has_status=True, has_generation=True,
                 defaulter=default_admission_policy, validator=validate_admission_policy,
                 merge_keys=smp),
        KindInfo(adm, "v1", "ValidatingAdmissionPolicyBinding",
                 "validatingadmissionpolicybindings", namespaced=False, has_generation=True,
                 validator=validate_policy_binding, merge_keys=smp),
        KindInfo("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses",
                 namespaced=False, defaulter=default_priority_class,
                 validator=validate_priority_class, merge_keys=smp, short_names=("pc",)),
        KindInfo("certificates.k8s.io", "v1", "CertificateSigningRequest",
                 "certificatesigningrequests", namespaced=False, has_status=True,
                 validator=validate_csr, merge_keys=smp, short_names=("csr",)),
        KindInfo("apiregistration.k8s.io", "v1", "APIService", "apiservices",
                 namespaced=False, has_status=True, validator=validate_api_service,
                 merge_keys=smp),
        KindInfo("", "v1", "ResourceQuota", "resourcequotas", has_status=True,
                 merge_keys=smp, short_names=("quota",)),
        KindInfo("", "v1", "LimitRange", "limitranges", defaulter=default_limit_range,
                 validator=validate_limit_range, merge_keys=smp, short_names=("limits",)),
    ]
