"""Printer columns of the stored-only built-in kinds (`emu.apiserver.storedkinds`), as kube's
``pkg/printers/internalversion/printers.go`` prints them: ``kubectl get pdb,hpa,sc,...``."""

from __future__ import annotations

from typing import Any

from .tables import Cells, Column, _age_only, _meta, _sp, _st, format_selector

Obj = dict[str, Any]
_S, _I = "string", "integer"


def _or_na(value: Any) -> Any:
    return "N/A" if value is None else value


def _pdb(obj: Obj, now: float) -> list[Any]:
    spec = _sp(obj)
    return [_or_na(spec.get("minAvailable")), _or_na(spec.get("maxUnavailable")),
            _st(obj).get("disruptionsAllowed", 0), _age_only(obj, now)]


def _hpa_targets(obj: Obj) -> str:
    """``formatHPAMetrics``, for Resource metrics (the others print as ``<unknown>``)."""
    current = {(m.get("resource") or {}).get("name"): (m.get("resource") or {}).get("current")
               for m in _st(obj).get("currentMetrics") or [] if isinstance(m, dict)}
    out = []
    for metric in _sp(obj).get("metrics") or []:
        res = metric.get("resource") if isinstance(metric, dict) else None
        if not isinstance(res, dict):
            out.append("<unknown>/<unknown>")
            continue
        target = res.get("target") or {}
        now_value = current.get(res.get("name")) or {}
        if target.get("type") == "Utilization":
            have = now_value.get("averageUtilization")
            shown = f"{have}%" if have is not None else "<unknown>"
            out.append(f"{res.get('name')}: {shown}/{target.get('averageUtilization')}%")
        else:
            want = target.get("averageValue") or target.get("value")
            have = now_value.get("averageValue") or now_value.get("value")
            out.append(f"{res.get('name')}: {have or '<unknown>'}/{want}")
    if not out:
        return "<none>"
    if len(out) > 2:
        return f"{out[0]}, {out[1]} + {len(out) - 2} more..."
    return ", ".join(out)


def _hpa(obj: Obj, now: float) -> list[Any]:
    spec = _sp(obj)
    ref = spec.get("scaleTargetRef") or {}
    return [f"{ref.get('kind', '')}/{ref.get('name', '')}", _hpa_targets(obj),
            spec.get("minReplicas", "<unset>"), spec.get("maxReplicas", 0),
            _st(obj).get("currentReplicas", 0), _age_only(obj, now)]


def _storage_class(obj: Obj, now: float) -> list[Any]:
    return [obj.get("provisioner", ""), obj.get("reclaimPolicy", "Delete"),
            obj.get("volumeBindingMode", "Immediate"), bool(obj.get("allowVolumeExpansion")),
            _age_only(obj, now)]


def _csi_driver(obj: Obj, now: float) -> list[Any]:
    spec = _sp(obj)
    tokens = ",".join(str(t.get("audience", "")) if t.get("audience") else "<unset>"
                      for t in spec.get("tokenRequests") or [] if isinstance(t, dict))
    return [spec.get("attachRequired", True), spec.get("podInfoOnMount", False),
            spec.get("storageCapacity", False), tokens or "<unset>",
            spec.get("requiresRepublish", False),
            ",".join(spec.get("volumeLifecycleModes") or []), _age_only(obj, now)]


def _volume_attachment(obj: Obj, now: float) -> list[Any]:
    spec = _sp(obj)
    return [spec.get("attacher", ""), (spec.get("source") or {}).get("persistentVolumeName", ""),
            spec.get("nodeName", ""), bool(_st(obj).get("attached")), _age_only(obj, now)]


def _policy_binding(obj: Obj, now: float) -> list[Any]:
    spec = _sp(obj)
    ref = spec.get("paramRef")
    param = "<unset>"
    if isinstance(ref, dict):
        name = ref.get("name") or (format_selector(ref.get("selector")) if ref.get("selector")
                                   else "*")
        param = f"{ref['namespace']}/{name}" if ref.get("namespace") else str(name)
    return [spec.get("policyName", ""), param, _age_only(obj, now)]


def _param_kind(obj: Obj) -> str:
    kind = _sp(obj).get("paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


def _csr(obj: Obj, now: float) -> list[Any]:
    spec = _sp(obj)
    conditions = [c.get("type") for c in _st(obj).get("conditions") or []
                  if isinstance(c, dict) and c.get("type")]
    if _st(obj).get("certificate") and "Approved" in conditions:
        conditions.append("Issued")
    seconds = spec.get("expirationSeconds")
    return [_age_only(obj, now), spec.get("signerName", ""), spec.get("username", ""),
            f"{seconds // 60}m" if isinstance(seconds, int) else "<none>",
            ",".join(str(c) for c in conditions) or "Pending"]


def _api_service(obj: Obj, now: float) -> list[Any]:
    svc = _sp(obj).get("service")
    where = f"{svc.get('namespace', '')}/{svc.get('name', '')}" if isinstance(svc, dict) \
        else "Local"
    available = next((c for c in _st(obj).get("conditions") or []
                      if isinstance(c, dict) and c.get("type") == "Available"), None)
    shown = "Unknown"
    if available is not None:
        shown = "True" if available.get("status") == "True" else \
            f"{available.get('status')} ({available.get('reason', '')})"
    return [where, shown, _age_only(obj, now)]


def _quota(obj: Obj, now: float) -> list[Any]:
    hard = _sp(obj).get("hard") or {}
    used = _st(obj).get("used") or {}
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        cell = f"{name}: {used.get(name, '0')}/{hard[name]}"
        (limits if name.startswith("limits.") else requests).append(cell)
    return [_age_only(obj, now), ", ".join(requests), ", ".join(limits)]


STORED_COLUMNS: dict[tuple[str, str], tuple[list[Column], Cells]] = {
    ("policy", "PodDisruptionBudget"): (
        [("Min Available", _S, 0), ("Max Unavailable", _S, 0), ("Allowed Disruptions", _I, 0),
         ("Age", _S, 0)], _pdb),
    ("autoscaling", "HorizontalPodAutoscaler"): (
        [("Reference", _S, 0), ("Targets", _S, 0), ("MinPods", _S, 0), ("MaxPods", _I, 0),
         ("Replicas", _I, 0), ("Age", _S, 0)], _hpa),
    ("storage.k8s.io", "StorageClass"): (
        [("Provisioner", _S, 0), ("ReclaimPolicy", _S, 0), ("VolumeBindingMode", _S, 0),
         ("AllowVolumeExpansion", _S, 0), ("Age", _S, 0)], _storage_class),
    ("storage.k8s.io", "CSIDriver"): (
        [("AttachRequired", "boolean", 0), ("PodInfoOnMount", "boolean", 0),
         ("StorageCapacity", "boolean", 0), ("TokenRequests", _S, 0),
         ("RequiresRepublish", "boolean", 0), ("Modes", _S, 0), ("Age", _S, 0)], _csi_driver),
    ("storage.k8s.io", "CSINode"): (
        [("Drivers", _I, 0), ("Age", _S, 0)],
        lambda o, now: [len(_sp(o).get("drivers") or []), _age_only(o, now)]),
    ("storage.k8s.io", "CSIStorageCapacity"): (
        [("StorageClassName", _S, 0), ("Capacity", _S, 0)],
        lambda o, now: [o.get("storageClassName", ""), o.get("capacity", "")]),
    ("storage.k8s.io", "VolumeAttachment"): (
        [("Attacher", _S, 0), ("PV", _S, 0), ("Node", _S, 0), ("Attached", "boolean", 0),
         ("Age", _S, 0)], _volume_attachment),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        [("Webhooks", _I, 0), ("Age", _S, 0)],
        lambda o, now: [len(o.get("webhooks") or []), _age_only(o, now)]),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (
        [("Webhooks", _I, 0), ("Age", _S, 0)],
        lambda o, now: [len(o.get("webhooks") or []), _age_only(o, now)]),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): (
        [("Validations", _I, 0), ("ParamKind", _S, 0), ("Age", _S, 0)],
        lambda o, now: [len(_sp(o).get("validations") or []), _param_kind(o),
                        _age_only(o, now)]),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): (
        [("PolicyName", _S, 0), ("ParamRef", _S, 0), ("Age", _S, 0)], _policy_binding),
    ("scheduling.k8s.io", "PriorityClass"): (
        [("Value", _I, 0), ("Global-Default", "boolean", 0), ("Age", _S, 0),
         ("PreemptionPolicy", _S, 0)],
        lambda o, now: [o.get("value", 0), bool(o.get("globalDefault")), _age_only(o, now),
                        o.get("preemptionPolicy", "PreemptLowerPriority")]),
    ("certificates.k8s.io", "CertificateSigningRequest"): (
        [("Age", _S, 0), ("SignerName", _S, 0), ("Requestor", _S, 0),
         ("RequestedDuration", _S, 0), ("Condition", _S, 0)], _csr),
    ("apiregistration.k8s.io", "APIService"): (
        [("Service", _S, 0), ("Available", _S, 0), ("Age", _S, 0)], _api_service),
    ("", "ResourceQuota"): (
        [("Age", _S, 0), ("Request", _S, 0), ("Limit", _S, 0)], _quota),
    ("", "LimitRange"): (
        [("Created At", "date", 0)],
        lambda o, now: [_meta(o).get("creationTimestamp")]),
}
