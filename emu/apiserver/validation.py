"""Validation: the field errors kube-apiserver returns as 422 Invalid, and decode errors (400).

Messages follow k8s.io/apimachinery/pkg/util/validation (``field.Error.ErrorBody``) so that a test
can match the whole text: ``metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123
subdomain must consist of ...``. Each kind's validator takes the new object and, on update, the
stored one, and returns a list of `StatusCause`; an empty list means valid.

About 900 lines: one validator per kind, the decoder's type checks (metadata, ConfigMap and
Secret data with Go's base64 offsets, nested field shapes), unknown-field pruning and the list
option rules, each message a user-visible contract; kept in one module so the line between 400
(decoding) and 422 (validation) is drawn in one place.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from .errors import BadRequest, StatusCause

# -- field errors ----------------------------------------------------------------------------------


def go_value(value: Any) -> str:
    """How Go's ``%#v``-ish field errors print a value: strings quoted, numbers bare."""
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def invalid(field: str, value: Any, detail: str) -> StatusCause:
    return StatusCause("FieldValueInvalid", f"Invalid value: {go_value(value)}: {detail}", field)


def required(field: str, detail: str = "") -> StatusCause:
    return StatusCause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""),
                       field)


def not_supported(field: str, value: Any, supported: tuple[str, ...]) -> StatusCause:
    shown = ", ".join(f'"{s}"' for s in supported)
    return StatusCause("FieldValueNotSupported",
                       f"Unsupported value: {go_value(value)}: supported values: {shown}", field)


def forbidden(field: str, detail: str) -> StatusCause:
    return StatusCause("FieldValueForbidden", f"Forbidden: {detail}", field)


def duplicate(field: str, value: Any) -> StatusCause:
    return StatusCause("FieldValueDuplicate", f"Duplicate value: {go_value(value)}", field)


def too_long(field: str, value: Any, limit: int) -> StatusCause:
    return invalid(field, value, f"must be no more than {limit} characters")


def immutable(field: str, value: Any) -> StatusCause:
    return invalid(field, value, "field is immutable")


# -- names -----------------------------------------------------------------------------------------

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(f"^{DNS1123_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_RE = re.compile(f"^{DNS1035_LABEL_FMT}$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{DNS1123_SUBDOMAIN_FMT}')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    f"for validation is '{DNS1123_LABEL_FMT}')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    f"regex used for validation is '{DNS1035_LABEL_FMT}')"
)


def dns1123_subdomain(field: str, name: str) -> list[StatusCause]:
    out = []
    if len(name) > 253:
        out.append(too_long(field, name, 253))
    if not _SUBDOMAIN_RE.match(name):
        out.append(invalid(field, name, SUBDOMAIN_MSG))
    return out


def dns1123_label(field: str, name: str) -> list[StatusCause]:
    out = []
    if len(name) > 63:
        out.append(too_long(field, name, 63))
    if not _LABEL_RE.match(name):
        out.append(invalid(field, name, LABEL_MSG))
    return out


def dns1035_label(field: str, name: str) -> list[StatusCause]:
    out = []
    if len(name) > 63:
        out.append(too_long(field, name, 63))
    if not _DNS1035_RE.match(name):
        out.append(invalid(field, name, DNS1035_MSG))
    return out


def path_segment_name(field: str, name: str) -> list[StatusCause]:
    """Names that only need to be a valid path segment (Events, Leases' lenient peers)."""
    if name in (".", ".."):
        return [invalid(field, name, f'may not be "{name}"')]
    for bad in ("/", "%"):
        if bad in name:
            return [invalid(field, name, f"may not contain '{bad}'")]
    return []


NAME_CHECKS: dict[str, Callable[[str, str], list[StatusCause]]] = {
    "subdomain": dns1123_subdomain,
    "label": dns1123_label,
    "dns1035": dns1035_label,
    "path": path_segment_name,
}

# -- labels and annotations ------------------------------------------------------------------------

_QNAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QNAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
    "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


#: Keys `qualified_name` found valid (bounded): the same label and annotation keys come back on
#: nearly every write, and a valid key has no cause whatever the field.
_VALID_QNAMES: dict[str, None] = {}


def qualified_name(field: str, key: str) -> list[StatusCause]:
    if key in _VALID_QNAMES:
        return []
    out = _qualified_name(field, key)
    if not out:
        if len(_VALID_QNAMES) >= 4096:
            _VALID_QNAMES.clear()
        _VALID_QNAMES[key] = None
    return out


def _qualified_name(field: str, key: str) -> list[StatusCause]:
    prefix, _, name = key.rpartition("/")
    out = []
    if prefix:
        for cause in dns1123_subdomain(field, prefix):
            out.append(StatusCause(cause.type, cause.message.replace(
                "a lowercase RFC 1123 subdomain", "prefix part a lowercase RFC 1123 subdomain"),
                field))
    if not name:
        out.append(invalid(field, key, "name part must be non-empty"))
    else:
        if len(name) > 63:
            out.append(invalid(field, key, "name part must be no more than 63 characters"))
        if not _QNAME_RE.match(name):
            out.append(invalid(field, key, QNAME_MSG))
    return out


#: Label (key, value) pairs found valid (bounded like `_VALID_QNAMES`): controllers write the
#: same few labels on every object, and each pair is checked once rather than on every write.
_VALID_LABELS: dict[tuple[str, str], None] = {}


def validate_labels(labels: Mapping[str, str], field: str = "metadata.labels") -> list[StatusCause]:
    out: list[StatusCause] = []
    valid = _VALID_LABELS
    for pair in labels.items():
        if pair in valid:
            continue
        key, value = pair
        found = qualified_name(field, key)
        if len(value) > 63:
            found.append(too_long(field, value, 63))
        if not _LABEL_VALUE_RE.match(value):
            found.append(invalid(field, value, LABEL_VALUE_MSG))
        if found:
            out.extend(found)
        else:
            if len(valid) >= 4096:
                valid.clear()
            valid[pair] = None
    return out


def validate_annotations(annotations: Mapping[str, str]) -> list[StatusCause]:
    out: list[StatusCause] = []
    total = 0
    for key, value in annotations.items():
        out.extend(qualified_name("metadata.annotations", key.lower()))
        total += len(key) + len(value)
    if total > 256 * 1024:
        out.append(StatusCause("FieldValueTooLong",
                               f"Too long: must have at most {256 * 1024} bytes",
                               "metadata.annotations"))
    return out


#: ``IsStandardFinalizerName``: the finalizers a built-in kind may carry without a domain.
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def validate_finalizers(finalizers: list[str], builtin: bool) -> list[StatusCause]:
    """``ValidateFinalizers`` (apimachinery objectmeta.go): each name qualified, and not both
    ``orphan`` and ``foregroundDeletion``; for built-in kinds then core's
    ``validateKubeFinalizerName``: a name without a ``/`` must be a standard one."""
    out: list[StatusCause] = []
    for name in finalizers:
        out.extend(qualified_name("metadata.finalizers", name))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        out.append(invalid("metadata.finalizers", finalizers,
                           "finalizer orphan and foregroundDeletion cannot be both set"))
    if builtin:
        for i, name in enumerate(finalizers):
            if "/" not in name and name not in STANDARD_FINALIZERS:
                out.append(invalid(f"metadata.finalizers[{i}]", name, "name is neither a "
                                   "standard finalizer name nor is it fully qualified"))
    return out


# -- decode errors (400) ---------------------------------------------------------------------------

_GO_KIND = {str: "string", bool: "bool", int: "number", float: "number", list: "array",
            dict: "object", type(None): "null"}


def go_kind(value: Any) -> str:
    """What Go's JSON decoder calls a decoded value's kind in an unmarshal error."""
    return _GO_KIND.get(type(value), "value")


def decode_error(kind: str, api_version: str, detail: str) -> BadRequest:
    version = api_version.rsplit("/", 1)[-1]
    return BadRequest(f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')


def check_metadata_types(kind: str, api_version: str, meta: Mapping[str, Any],
                         old: Mapping[str, Any] | None = None) -> None:
    """What Go's JSON decoder would reject in ``metadata`` (labels must be string maps, ...).
    Fields equal to the stored object's (``old``) were checked when it was written."""
    if _plain_metadata(meta, old):
        return
    for fname in ("labels", "annotations"):
        value = meta.get(fname)
        if value is None or (old is not None and value == old.get(fname)):
            continue
        if not isinstance(value, dict):
            raise decode_error(kind, api_version, (
                f"json: cannot unmarshal {go_kind(value)} into Go struct field "
                f"ObjectMeta.metadata.{fname} of type map[string]string"))
        for v in value.values():
            if not isinstance(v, str):
                raise decode_error(kind, api_version, (
                    f"json: cannot unmarshal {go_kind(v)} into Go struct field "
                    f"ObjectMeta.metadata.{fname} of type string"))
    for fname in ("name", "generateName", "namespace", "resourceVersion", "uid"):
        value = meta.get(fname)
        if value is not None and not isinstance(value, str):
            raise decode_error(kind, api_version, (
                f"json: cannot unmarshal {go_kind(value)} into Go struct field "
                f"ObjectMeta.metadata.{fname} of type string"))
    fin = meta.get("finalizers")
    if fin is not None and (not isinstance(fin, list) or not all(isinstance(f, str) for f in fin)):
        raise decode_error(kind, api_version, (
            "json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type "
            "[]string"))
    owners = meta.get("ownerReferences")
    if owners is not None and (not isinstance(owners, list)
                               or not all(isinstance(o, dict) for o in owners)):
        raise decode_error(kind, api_version, (
            "json: cannot unmarshal into Go struct field ObjectMeta.metadata.ownerReferences of "
            "type []v1.OwnerReference"))


#: ObjectMeta's string fields.
_META_STRINGS = ("name", "generateName", "namespace", "resourceVersion", "uid")


def _plain_metadata(meta: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """`check_metadata_types`' common case, in one pass: labels and annotations are string maps
    (or as stored), the string fields are strings, no finalizers or owner references to look
    at. False sends it to the full check, which names what is wrong."""
    for fname in ("labels", "annotations"):
        value = meta.get(fname)
        if value is not None and (old is None or value != old.get(fname)):
            if type(value) is not dict:
                return False
            for item in value.values():
                if type(item) is not str:
                    return False
    for fname in _META_STRINGS:
        value = meta.get(fname)
        if value is not None and type(value) is not str:
            return False
    return "finalizers" not in meta and "ownerReferences" not in meta


def check_int_fields(kind: str, api_version: str, obj: Mapping[str, Any],
                     fields: tuple[tuple[str, str], ...]) -> None:
    """Integer fields (``spec.replicas`` ...): a non-integer is a decode error, as in Go."""
    for path, go_field in fields:
        cur: Any = obj
        for part in path.split("."):
            if not isinstance(cur, dict):
                cur = None
                break
            cur = cur.get(part)
        if cur is None:
            continue
        if isinstance(cur, bool) or not isinstance(cur, int):
            raise decode_error(kind, api_version, (
                f"json: cannot unmarshal {go_kind(cur)} into Go struct field {go_field} of type "
                "int32"))


# -- shared pieces ---------------------------------------------------------------------------------

PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")


def _nonneg(out: list[StatusCause], field: str, value: Any) -> None:
    if isinstance(value, int) and value < 0:
        out.append(invalid(field, value, "must be greater than or equal to 0"))


def validate_pod_spec(spec: Any, path: str) -> list[StatusCause]:
    """``ValidatePodSpec`` for the fields controllers touch."""
    out: list[StatusCause] = []
    if not isinstance(spec, dict):
        return [required(path)]
    containers = spec.get("containers")
    if not containers:
        out.append(required(f"{path}.containers"))
    names: dict[str, None] = {}
    for group in ("initContainers", "containers"):
        items = spec.get(group) or []
        if not isinstance(items, list):
            out.append(invalid(f"{path}.{group}", items, "must be a list"))
            continue
        for i, c in enumerate(items):
            cpath = f"{path}.{group}[{i}]"
            if not isinstance(c, dict):
                out.append(invalid(cpath, c, "must be an object"))
                continue
            name = c.get("name")
            if not name:
                out.append(required(f"{cpath}.name"))
            else:
                out.extend(dns1123_label(f"{cpath}.name", name))
                if name in names:
                    out.append(duplicate(f"{cpath}.name", name))
                names[name] = None
            if not c.get("image"):
                out.append(required(f"{cpath}.image"))
            policy = c.get("imagePullPolicy")
            if policy not in PULL_POLICIES:
                if not policy:
                    out.append(required(f"{cpath}.imagePullPolicy"))
                else:
                    out.append(not_supported(f"{cpath}.imagePullPolicy", policy, PULL_POLICIES))
            ports = c.get("ports") or []
            for j, p in enumerate(ports):
                cp = p.get("containerPort") if isinstance(p, dict) else None
                if not isinstance(cp, int) or not 1 <= cp <= 65535:
                    out.append(invalid(f"{cpath}.ports[{j}].containerPort", cp,
                                       "must be between 1 and 65535, inclusive"))
    restart = spec.get("restartPolicy")
    if restart not in RESTART_POLICIES:
        out.append(not_supported(f"{path}.restartPolicy", restart, RESTART_POLICIES))
    _nonneg(out, f"{path}.terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds"))
    ads = spec.get("activeDeadlineSeconds")
    if isinstance(ads, int) and ads <= 0:
        out.append(invalid(f"{path}.activeDeadlineSeconds", ads,
                           "must be between 1 and 2147483647, inclusive"))
    return out


def _template_spec(obj: Mapping[str, Any]) -> Any:
    template = (obj.get("spec") or {}).get("template")
    return template.get("spec") if isinstance(template, dict) else None


# -- per kind --------------------------------------------------------------------------------------

POD_UPDATE_MSG = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
    "to 1 if it was previously negative)"
)


def _mask_images(new: list[Any], old: list[Any]) -> list[Any]:
    if len(new) != len(old):
        return new
    out = []
    for n, o in zip(new, old, strict=True):
        if isinstance(n, dict) and isinstance(o, dict) and "image" in o:
            n = {**n, "image": o["image"]}
        out.append(n)
    return out


def validate_pod(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    spec = obj.get("spec")
    if old is None:
        return validate_pod_spec(spec, "spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    old_spec = old.get("spec") or {}
    if spec == old_spec:
        return []
    masked = dict(spec)
    for group in ("containers", "initContainers"):
        if group in masked and group in old_spec:
            masked[group] = _mask_images(masked[group], old_spec[group])
    if "activeDeadlineSeconds" in old_spec:
        masked["activeDeadlineSeconds"] = old_spec["activeDeadlineSeconds"]
    else:
        masked.pop("activeDeadlineSeconds", None)
    old_tol = old_spec.get("tolerations") or []
    new_tol = spec.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        if "tolerations" in old_spec:
            masked["tolerations"] = old_spec["tolerations"]
        else:
            masked.pop("tolerations", None)
    # Binding: the emulator has no pods/binding subresource, so setting spec.nodeName once (the
    # scheduler's bind) is allowed through update.
    if not old_spec.get("nodeName") and masked.get("nodeName"):
        masked.pop("nodeName")
        if "nodeName" in old_spec:
            masked["nodeName"] = old_spec["nodeName"]
    if masked != old_spec:
        return [forbidden("spec", POD_UPDATE_MSG)]
    # Only mutable fields changed: check just those.
    out: list[StatusCause] = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            if isinstance(c, dict) and not c.get("image"):
                out.append(required(f"spec.{group}[{i}].image"))
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None and (not isinstance(ads, int) or ads <= 0):
        out.append(invalid("spec.activeDeadlineSeconds", ads,
                           "must be between 1 and 2147483647, inclusive"))
    return out


JOB_RESTART = ("OnFailure", "Never")


def validate_job(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    out: list[StatusCause] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    template = spec.get("template")
    if not isinstance(template, dict) or not template:
        out.append(required("spec.template"))
    else:
        tspec = template.get("spec")
        pod_errs = validate_pod_spec(tspec, "spec.template.spec")
        out.extend(c for c in pod_errs if c.field != "spec.template.spec.restartPolicy")
        if isinstance(tspec, dict):
            restart = tspec.get("restartPolicy")
            if restart not in JOB_RESTART:
                out.append(not_supported("spec.template.spec.restartPolicy", restart,
                                         JOB_RESTART))
        selector = spec.get("selector") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        for k, v in (selector.get("matchLabels") or {}).items():
            if labels.get(k) != v:
                out.append(invalid("spec.template.metadata.labels", labels,
                                   "`selector` does not match template `labels`"))
                break
    for fname in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        _nonneg(out, f"spec.{fname}", spec.get(fname))
    if old is not None:
        old_spec = old.get("spec") or {}
        if spec.get("selector") != old_spec.get("selector"):
            out.append(immutable("spec.selector", spec.get("selector")))
        if spec.get("template") != old_spec.get("template"):
            out.append(immutable("spec.template", spec.get("template")))
    return out


def _validate_replicated(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    out: list[StatusCause] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    _nonneg(out, "spec.replicas", spec.get("replicas"))
    selector = spec.get("selector")
    if not selector:
        out.append(required("spec.selector"))
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and isinstance(selector, dict):
        for k, v in (selector.get("matchLabels") or {}).items():
            if labels.get(k) != v:
                out.append(invalid("spec.template.metadata.labels", labels,
                                   "`selector` does not match template `labels`"))
                break
    out.extend(validate_pod_spec(template.get("spec"), "spec.template.spec"))
    if old is not None and selector != (old.get("spec") or {}).get("selector"):
        out.append(immutable("spec.selector", selector))
    return out


validate_deployment = _validate_replicated
validate_replicaset = _validate_replicated

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def validate_service(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    out: list[StatusCause] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    stype = spec.get("type")
    if stype not in SERVICE_TYPES:
        out.append(not_supported("spec.type", stype, SERVICE_TYPES))
    ports = spec.get("ports") or []
    headless = spec.get("clusterIP") == "None"
    if not ports and not headless and stype != "ExternalName":
        out.append(required("spec.ports"))
    names: dict[str, None] = {}
    for i, p in enumerate(ports):
        if not isinstance(p, dict):
            out.append(invalid(f"spec.ports[{i}]", p, "must be an object"))
            continue
        name = p.get("name", "")
        if len(ports) > 1 and not name:
            out.append(required(f"spec.ports[{i}].name"))
        elif name:
            if name in names:
                out.append(duplicate(f"spec.ports[{i}].name", name))
            names[name] = None
        port = p.get("port")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            out.append(invalid(f"spec.ports[{i}].port", port,
                               "must be between 1 and 65535, inclusive"))
        proto = p.get("protocol")
        if proto not in PROTOCOLS:
            out.append(not_supported(f"spec.ports[{i}].protocol", proto, PROTOCOLS))
    if old is not None:
        old_ip = (old.get("spec") or {}).get("clusterIP")
        if old_ip and spec.get("clusterIP") != old_ip:
            out.append(immutable("spec.clusterIP", spec.get("clusterIP")))
    return out


def validate_pvc(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    out: list[StatusCause] = []
    if not spec.get("accessModes"):
        out.append(required("spec.accessModes", "at least 1 access mode is required"))
    return out


def validate_lease(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    out: list[StatusCause] = []
    spec = obj.get("spec") or {}
    lds = spec.get("leaseDurationSeconds")
    if lds is not None and (not isinstance(lds, int) or lds <= 0):
        out.append(invalid("spec.leaseDurationSeconds", lds, "must be greater than 0"))
    return out


# -- unknown fields (decoding into Go structs) -----------------------------------------------------

_OBJECT = ("apiVersion", "kind", "metadata")
_SPEC_STATUS = (*_OBJECT, "spec", "status")
#: Top-level fields of the built-in kinds' Go types; anything else is dropped on decode (or, with
#: ``fieldValidation=Strict``, refused). Kinds not listed here (custom resources, kinds added
#: later) are not pruned at the top level.
BUILTIN_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "Namespace"): frozenset(_SPEC_STATUS),
    ("", "Node"): frozenset(_SPEC_STATUS),
    ("", "Pod"): frozenset(_SPEC_STATUS),
    ("", "Service"): frozenset(_SPEC_STATUS),
    ("", "PersistentVolumeClaim"): frozenset(_SPEC_STATUS),
    ("", "PersistentVolume"): frozenset(_SPEC_STATUS),
    ("", "ConfigMap"): frozenset((*_OBJECT, "data", "binaryData", "immutable")),
    ("", "Secret"): frozenset((*_OBJECT, "data", "stringData", "type", "immutable")),
    ("", "ServiceAccount"): frozenset((*_OBJECT, "secrets", "imagePullSecrets",
                                       "automountServiceAccountToken")),
    ("", "Endpoints"): frozenset((*_OBJECT, "subsets")),
    ("", "Event"): frozenset((*_OBJECT, "involvedObject", "reason", "message", "source",
                              "firstTimestamp", "lastTimestamp", "count", "type", "eventTime",
                              "series", "action", "related", "reportingComponent",
                              "reportingInstance")),
    ("apps", "Deployment"): frozenset(_SPEC_STATUS),
    ("apps", "ReplicaSet"): frozenset(_SPEC_STATUS),
    ("batch", "Job"): frozenset(_SPEC_STATUS),
    ("coordination.k8s.io", "Lease"): frozenset((*_OBJECT, "spec")),
    ("discovery.k8s.io", "EndpointSlice"): frozenset((*_OBJECT, "addressType", "endpoints",
                                                      "ports")),
    ("events.k8s.io", "Event"): frozenset((*_OBJECT, "eventTime", "series", "reportingController",
                                           "reportingInstance", "action", "reason", "regarding",
                                           "related", "note", "type", "deprecatedSource",
                                           "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
                                           "deprecatedCount")),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): frozenset(_SPEC_STATUS),
    # the stored-only kinds (emu.apiserver.storedkinds)
    ("policy", "PodDisruptionBudget"): frozenset(_SPEC_STATUS),
    ("autoscaling", "HorizontalPodAutoscaler"): frozenset(_SPEC_STATUS),
    ("storage.k8s.io", "StorageClass"): frozenset((
        *_OBJECT, "provisioner", "parameters", "reclaimPolicy", "mountOptions",
        "allowVolumeExpansion", "volumeBindingMode", "allowedTopologies")),
    ("storage.k8s.io", "CSIDriver"): frozenset((*_OBJECT, "spec")),
    ("storage.k8s.io", "CSINode"): frozenset((*_OBJECT, "spec")),
    ("storage.k8s.io", "CSIStorageCapacity"): frozenset((
        *_OBJECT, "nodeTopology", "storageClassName", "capacity", "maximumVolumeSize")),
    ("storage.k8s.io", "VolumeAttachment"): frozenset(_SPEC_STATUS),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): frozenset((
        *_OBJECT, "webhooks")),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): frozenset((
        *_OBJECT, "webhooks")),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): frozenset(_SPEC_STATUS),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): frozenset((
        *_OBJECT, "spec")),
    ("scheduling.k8s.io", "PriorityClass"): frozenset((
        *_OBJECT, "value", "globalDefault", "description", "preemptionPolicy")),
    ("certificates.k8s.io", "CertificateSigningRequest"): frozenset(_SPEC_STATUS),
    ("apiregistration.k8s.io", "APIService"): frozenset(_SPEC_STATUS),
    ("", "ResourceQuota"): frozenset(_SPEC_STATUS),
    ("", "LimitRange"): frozenset((*_OBJECT, "spec")),
}
#: ``metav1.ObjectMeta``'s fields.
OBJECT_META_FIELDS = frozenset((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields"))
#: ObjectMeta fields serialized with ``omitempty``: an empty value is the same as none.
_OMIT_EMPTY_META = ("labels", "annotations", "ownerReferences", "finalizers", "managedFields")
FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


def check_field_validation(mode: Any) -> str:
    """The ``fieldValidation`` parameter: Ignore, Warn or Strict (default Warn, as kube's)."""
    if mode is None or mode == "":
        return "Warn"
    if mode not in FIELD_VALIDATION:
        raise BadRequest(f'fieldValidation parameter unsupported: "{mode}", must be one of '
                         '"Ignore", "Warn", "Strict"')
    return str(mode)


def prune_unknown(group: str, kind: str, obj: dict[str, Any], meta: dict[str, Any],
                  mode: str, api_version: str = "", schema_unknown: Sequence[str] = (),
                  warnings: list[str] | None = None) -> None:
    """Drop (in place) the fields a Go decoder would not keep: unknown top-level fields of a
    built-in kind and unknown ObjectMeta fields; and empty ``omitempty`` metadata (``labels:
    {}`` is no labels), so a write that differs only there changes nothing. ``mode`` Strict
    refuses unknown fields instead, with kube's 400 message (`strict_error`), counting too
    ``schema_unknown``: the fields a custom resource's structural schema would prune
    (`KindInfo.unknown_fields`, which the caller computes only for Strict); ``meta`` is
    ``obj["metadata"]``. ``warnings``: under Warn, where the dropped fields are named as
    kube-apiserver's warnings name them (``schema_unknown`` then computed for Warn too)."""
    known = BUILTIN_FIELDS.get((group, kind))
    if (known is None or known.issuperset(obj)) and OBJECT_META_FIELDS.issuperset(meta) \
            and not schema_unknown:
        # the common case: no unknown field, and only empty omitempty fields to drop (an empty
        # value is falsy: the equality tests run only then)
        for k in _OMIT_EMPTY_META:
            if k in meta and not meta[k]:
                value = meta[k]
                if value is None or value == {} or value == []:
                    del meta[k]
        return
    else:
        unknown = [k for k in obj if k not in known] if known is not None else []
        unknown_meta = [k for k in meta if k not in OBJECT_META_FIELDS]
    named = mode == "Strict" or (mode == "Warn" and warnings is not None)
    if named and (unknown or unknown_meta or schema_unknown):
        paths = unknown + [f"metadata.{k}" for k in unknown_meta]
        if known is None:  # a custom resource: kube-apiserver sorts the pruned paths
            paths = sorted([*paths, *schema_unknown])
        elif schema_unknown:  # a built-in's, from its schema: every depth, in document order
            paths = [*schema_unknown, *(p for p in paths if p not in schema_unknown)]
        problems = [f'unknown field "{p}"' for p in paths]
        if mode == "Strict":
            raise strict_error(kind, api_version or group, problems)
        assert warnings is not None
        warnings.extend(problems)
    for k in unknown:
        del obj[k]
    for k in unknown_meta:
        del meta[k]
    for k in _OMIT_EMPTY_META:
        if k in meta:
            value = meta[k]
            if value is None or value == {} or value == []:
                del meta[k]


def strict_error(kind: str, api_version: str, problems: Sequence[str]) -> BadRequest:
    """kube-apiserver's 400 for a body ``fieldValidation=Strict`` refuses: ``RayCluster in
    version "v1" cannot be handled as a RayCluster: strict decoding error: unknown field
    "spec.foo", duplicate field "replicas"``."""
    return decode_error(kind, api_version, "strict decoding error: " + ", ".join(problems))


# -- ConfigMap and Secret data ---------------------------------------------------------------------

#: ``core.MaxSecretSize``: the most data a ConfigMap or a Secret may hold.
MAX_DATA_BYTES = 1024 * 1024
_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_CONFIG_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
CONFIG_KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                  "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                  "is '[-._a-zA-Z0-9]+')")
_IMMUTABLE_SET = "field is immutable when `immutable` is set"


def base64_error(text: str) -> int | None:
    """Where Go's ``base64.StdEncoding`` fails on ``text`` (its ``CorruptInputError`` offset,
    following ``decodeQuantum``), or None when it decodes. Newlines are skipped, as Go does."""
    n = len(text)
    si = 0
    while True:
        j = 0
        while j < 4:
            if si == n:
                return None if j == 0 else si - j
            c = text[si]
            si += 1
            if c in "\r\n":
                continue
            if c in _B64_ALPHABET:
                j += 1
                continue
            if c != "=" or j < 2:
                return si - 1
            if j == 2:  # "==" expected: the second "=" must follow
                while si < n and text[si] in "\r\n":
                    si += 1
                if si == n:
                    return n
                if text[si] != "=":
                    return si - 1
                si += 1
            while si < n and text[si] in "\r\n":
                si += 1
            return si if si < n else None


def _map_types(kind: str, api_version: str, obj: Mapping[str, Any], field: str,
               value_type: str, old: Mapping[str, Any] | None) -> None:
    value = obj.get(field)
    if value is None:
        return
    if not isinstance(value, dict):
        raise decode_error(kind, api_version, (
            f"json: cannot unmarshal {go_kind(value)} into Go struct field {kind}.{field} of "
            f"type map[string]{value_type}"))
    before = old.get(field) if old is not None else None
    if before == value:
        return  # checked when it was stored
    items: Iterable[Any] = value.values()
    if isinstance(before, dict):  # only values that changed
        items = [item for key, item in value.items() if before.get(key) != item]
    for item in items:
        if not isinstance(item, str):
            raise decode_error(kind, api_version, (
                f"json: cannot unmarshal {go_kind(item)} into Go struct field {kind}.{field} "
                f"of type {value_type}"))
        if value_type == "[]uint8":
            at = base64_error(item)
            if at is not None:
                raise decode_error(kind, api_version, f"illegal base64 data at input byte {at}")


def check_data_types(kind: str, api_version: str, obj: dict[str, Any],
                     old: Mapping[str, Any] | None = None) -> None:
    """What Go's decoder refuses in a ConfigMap's or a Secret's fields (400): maps that are not
    string maps, bytes that are not base64, a non-boolean ``immutable``, a non-string Secret
    ``type``. A Secret's ``stringData`` is then merged into ``data`` (base64) and dropped, as
    the v1 conversion does."""
    if kind == "ConfigMap":
        data = obj.get("data")
        if type(data) is dict and data and "binaryData" not in obj and "immutable" not in obj:
            for item in data.values():
                if type(item) is not str:
                    break
            else:
                return  # the common case: string data and nothing else to look at
        _map_types(kind, api_version, obj, "data", "string", old)
        _map_types(kind, api_version, obj, "binaryData", "[]uint8", old)
    else:
        _map_types(kind, api_version, obj, "data", "[]uint8", old)
        _map_types(kind, api_version, obj, "stringData", "string", None)
        kind_of_type = obj.get("type")
        if kind_of_type is not None and not isinstance(kind_of_type, str):
            raise decode_error(kind, api_version, (
                f"json: cannot unmarshal {go_kind(kind_of_type)} into Go struct field "
                "Secret.type of type v1.SecretType"))
        string_data = obj.pop("stringData", None)
        if string_data:
            data = dict(obj.get("data") or {})
            for key, text in string_data.items():
                data[key] = base64.b64encode(text.encode()).decode()
            obj["data"] = data
    imm = obj.get("immutable")
    if imm is not None and not isinstance(imm, bool):
        raise decode_error(kind, api_version, (
            f"json: cannot unmarshal {go_kind(imm)} into Go struct field {kind}.immutable of "
            "type bool"))
    for field in ("data", "binaryData"):
        if field in obj and not obj[field]:
            del obj[field]  # omitempty: an empty map is no map


_VALID_CONFIG_KEY = re.compile(r"^(?!\.\.)[-._a-zA-Z0-9]{1,253}$")


#: Config keys found valid (bounded like `_VALID_QNAMES`): a ConfigMap rewritten keeps its keys.
_VALID_CONFIG_KEYS: dict[str, None] = {}


def _config_key(field: str, key: str) -> list[StatusCause]:
    if key in _VALID_CONFIG_KEYS:
        return []
    if _VALID_CONFIG_KEY.match(key) and key != ".":
        if len(_VALID_CONFIG_KEYS) >= 4096:
            _VALID_CONFIG_KEYS.clear()
        _VALID_CONFIG_KEYS[key] = None
        return []  # the common case, in one match
    msgs = []
    if len(key) > 253:
        msgs.append("must be no more than 253 characters")
    if not _CONFIG_KEY_RE.match(key):
        msgs.append(CONFIG_KEY_MSG)
    if key == ".":
        msgs.append("must not be '.'")
    elif key == "..":
        msgs.append("must not be '..'")
    elif key.startswith(".."):
        msgs.append("must not start with '..'")
    return [invalid(f"{field}[{key}]", key, m) for m in msgs]


def _immutable_causes(obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                      fields: tuple[str, ...]) -> list[StatusCause]:
    if old is None or not old.get("immutable"):
        return []
    out = [forbidden(f, _IMMUTABLE_SET) for f in fields if obj.get(f) != old.get(f)]
    if obj.get("immutable") is not True:
        out.append(forbidden("immutable", _IMMUTABLE_SET))
    return out


def validate_configmap(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    """``ValidateConfigMap`` / ``ValidateConfigMapUpdate``: keys, data and binaryData sharing
    no key, at most 1 MiB in all, nothing changed once immutable."""
    out: list[StatusCause] = []
    data = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    old_data = (old.get("data") or {}) if old is not None else {}
    known = _VALID_CONFIG_KEYS
    for key in data:  # keys already stored were checked when written
        if key not in known and key not in old_data:
            out.extend(_config_key("data", key))
    if binary:
        old_binary = (old.get("binaryData") or {}) if old is not None else {}
        for key in binary:
            if key not in old_binary:
                out.extend(_config_key("binaryData", key))
            if key in data:
                out.append(invalid(f"binaryData[{key}]", key,
                                   "duplicate of key present in data"))
    size = sum(map(len, data.values()))
    if binary:
        size += sum(map(len, binary.values()))
    if size * 4 > MAX_DATA_BYTES:  # characters bound the bytes: only a near miss is measured
        size = sum(len(value.encode()) for value in data.values()) + sum(
            len(base64.b64decode(value)) for value in binary.values())
    if size > MAX_DATA_BYTES:
        out.append(StatusCause("FieldValueTooLong",
                               f"Too long: must have at most {MAX_DATA_BYTES} bytes", "[]"))
    if old is not None and old.get("immutable"):
        out.extend(_immutable_causes(obj, old, ("data", "binaryData")))
    return out


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
}


def validate_secret(obj: dict[str, Any], old: dict[str, Any] | None) -> list[StatusCause]:
    """``ValidateSecret`` / ``ValidateSecretUpdate``: keys, at most 1 MiB of data, the keys a
    typed Secret requires, an immutable type, nothing changed once immutable."""
    out: list[StatusCause] = []
    data = obj.get("data") or {}
    old_data = (old.get("data") or {}) if old is not None else {}
    for key in data:
        if key not in old_data:
            out.extend(_config_key("data", key))
    size = sum(map(len, data.values()))
    if size > MAX_DATA_BYTES:  # base64 is longer than what it encodes: measure near misses
        size = sum(len(base64.b64decode(value)) for value in data.values())
    if size > MAX_DATA_BYTES:
        out.append(StatusCause("FieldValueTooLong",
                               f"Too long: must have at most {MAX_DATA_BYTES} bytes", "data"))
    for key in _SECRET_REQUIRED_KEYS.get(obj.get("type") or "", ()):
        if key not in data:
            out.append(required(f"data[{key}]"))
    if old is not None and (old.get("type") or "Opaque") != (obj.get("type") or "Opaque"):
        out.append(immutable("type", obj.get("type")))
    out.extend(_immutable_causes(obj, old, ("data",)))
    return out


#: Built-in kinds whose data fields are type-checked and validated beyond their `KindInfo`.
DATA_KINDS: dict[tuple[str, str], Callable[[dict[str, Any], dict[str, Any] | None],
                                           list[StatusCause]]] = {
    ("", "ConfigMap"): validate_configmap,
    ("", "Secret"): validate_secret,
}


#: Metadata a ``/status`` write of an older built-in kind may change.
STATUS_META_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")
#: Built-in kinds whose status strategy lets ``/status`` change metadata, with what each resets
#: (``podStatusStrategy`` keeps ownerReferences, ``deploymentStatusStrategy`` labels). Kinds not
#: listed (custom resources, newer kinds using ``ResetObjectMetaForStatus``) change only status.
STATUS_KEEPS_META: dict[tuple[str, str], frozenset[str]] = {
    ("", "Pod"): frozenset(("ownerReferences",)),
    ("", "Node"): frozenset(),
    ("", "Namespace"): frozenset(),
    ("", "Service"): frozenset(),
    ("", "PersistentVolumeClaim"): frozenset(),
    ("", "PersistentVolume"): frozenset(),
    ("apps", "Deployment"): frozenset(("labels",)),
    ("apps", "ReplicaSet"): frozenset(),
    ("batch", "Job"): frozenset(),
}


# -- nested field types of the built-in kinds (what Go's decoder refuses) -------------------------

#: A field's type: a Go scalar name ("string", "int32", "int64", "bool"), ("list", go_type,
#: element), ("map", go_type) of strings, or ("struct", go_type, {json name: field type}).
Shape = Any

_STR, _I32, _I64, _BOOL = "string", "int32", "int64", "bool"
_STR_LIST = ("list", "[]string", _STR)
_STR_MAP = ("map", "map[string]string")
_ENV = ("struct", "v1.EnvVar", {"name": _STR, "value": _STR})
_PORT = ("struct", "v1.ContainerPort", {"name": _STR, "containerPort": _I32, "hostPort": _I32,
                                        "protocol": "v1.Protocol"})
_MOUNT = ("struct", "v1.VolumeMount", {"name": _STR, "mountPath": _STR, "readOnly": _BOOL,
                                       "subPath": _STR})
_CONTAINER: Shape = ("struct", "v1.Container", {
    "name": _STR, "image": _STR, "command": _STR_LIST, "args": _STR_LIST, "workingDir": _STR,
    "ports": ("list", "[]v1.ContainerPort", _PORT), "env": ("list", "[]v1.EnvVar", _ENV),
    "envFrom": ("list", "[]v1.EnvFromSource", ("struct", "v1.EnvFromSource", {"prefix": _STR})),
    "resources": ("struct", "v1.ResourceRequirements", {}),
    "volumeMounts": ("list", "[]v1.VolumeMount", _MOUNT),
    "imagePullPolicy": "v1.PullPolicy"})
_POD_SPEC = ("struct", "v1.PodSpec", {
    "containers": ("list", "[]v1.Container", _CONTAINER),
    "initContainers": ("list", "[]v1.Container", _CONTAINER),
    "restartPolicy": "v1.RestartPolicy", "terminationGracePeriodSeconds": _I64,
    "activeDeadlineSeconds": _I64, "nodeName": _STR, "nodeSelector": _STR_MAP,
    "serviceAccountName": _STR, "hostname": _STR, "subdomain": _STR, "schedulerName": _STR,
    "priorityClassName": _STR,
    "volumes": ("list", "[]v1.Volume", ("struct", "v1.Volume", {"name": _STR}))})
_TEMPLATE = ("struct", "v1.PodTemplateSpec", {"spec": _POD_SPEC})
_SELECTOR = ("struct", "v1.LabelSelector", {"matchLabels": _STR_MAP})
_REPLICATED = {"replicas": _I32, "minReadySeconds": _I32, "selector": _SELECTOR,
               "template": _TEMPLATE}
#: Root shapes by (group, kind): the fields whose types are checked (see docs/deviations.md).
SHAPES: dict[tuple[str, str], tuple[str, dict[str, Shape]]] = {
    ("", "Pod"): ("Pod", {"spec": _POD_SPEC}),
    ("apps", "Deployment"): ("Deployment", {"spec": ("struct", "v1.DeploymentSpec", {
        **_REPLICATED, "revisionHistoryLimit": _I32, "paused": _BOOL,
        "progressDeadlineSeconds": _I32})}),
    ("apps", "ReplicaSet"): ("ReplicaSet", {"spec": ("struct", "v1.ReplicaSetSpec",
                                                     _REPLICATED)}),
    ("batch", "Job"): ("Job", {"spec": ("struct", "v1.JobSpec", {
        "parallelism": _I32, "completions": _I32, "backoffLimit": _I32,
        "activeDeadlineSeconds": _I64, "ttlSecondsAfterFinished": _I32, "suspend": _BOOL,
        "selector": _SELECTOR, "template": _TEMPLATE})}),
    ("", "Service"): ("Service", {"spec": ("struct", "v1.ServiceSpec", {
        "ports": ("list", "[]v1.ServicePort", ("struct", "v1.ServicePort", {
            "name": _STR, "port": _I32, "nodePort": _I32, "protocol": "v1.Protocol"})),
        "selector": _STR_MAP, "type": "v1.ServiceType", "clusterIP": _STR})}),
}
_INT_BOUNDS = {_I32: 2**31, _I64: 2**63}
#: The scalar shapes a string does not satisfy; any other scalar shape is a Go string type.
_NOT_TEXT = frozenset((*_INT_BOUNDS, _BOOL))


def _shape_error(value: Any, owner: str, path: str, go_type: str) -> str:
    what = go_kind(value)
    if what == "number" and go_type in _INT_BOUNDS:  # Go names the literal it could not fit
        what = f"number {value}"
    return f"json: cannot unmarshal {what} into Go struct field {owner}.{path} of type {go_type}"


_Failure = tuple[Any, str, list[str], str]  # (value, owner struct or "", path parts, go type)


def _flat_ok(item: dict[str, Any], fields: dict[str, Shape]) -> bool:
    """Whether every checked field of ``item`` is a scalar its shape takes (a string for a
    string type, an in-range int for an integer one, a bool for a bool), so `_check_shape`
    would find nothing; False when it has to look (a nested value, or a wrong one)."""
    for name, value in item.items():
        sub = fields.get(name)
        if sub is None:
            continue
        if sub.__class__ is not str:
            return False
        cls = value.__class__
        if cls is str:
            if sub in _NOT_TEXT:
                return False
        elif cls is int:
            bound = _INT_BOUNDS.get(sub)
            if bound is None or not -bound <= value < bound:
                return False
        elif cls is not bool or sub != _BOOL:
            return False
    return True


def _check_shape(value: Any, shape: Shape, old: Any = None) -> _Failure | None:
    """The first value in ``value`` that ``shape`` refuses, if any, as (value, the Go struct
    holding the field, its JSON path parts below here, the Go type); parts equal to ``old`` (the
    stored value there) were checked when they were written. The path is built only on failure:
    this runs on every write of a Pod."""
    if value is None or (old is not None and value == old):
        return None  # null is the zero value, as Go decodes it
    if isinstance(shape, str):
        if shape in _INT_BOUNDS:
            if isinstance(value, bool) or not isinstance(value, int | float) or (
                    isinstance(value, float) and not value.is_integer()) or \
                    not -_INT_BOUNDS[shape] <= value < _INT_BOUNDS[shape]:
                return value, "", [], shape
        elif shape == _BOOL:
            if not isinstance(value, bool):
                return value, "", [], shape
        elif not isinstance(value, str):
            return value, "", [], shape
        return None
    kind = shape[0]
    if kind == "map":
        if not isinstance(value, dict):
            return value, "", [], shape[1]
        for item in value.values():
            if not isinstance(item, str):
                return item, "", [], "string"
        return None
    if kind == "list":
        if not isinstance(value, list):
            return value, "", [], shape[1]
        old_items: list[Any] = old if isinstance(old, list) else []
        n_old = len(old_items)
        element = shape[2]
        plain = element.__class__ is str and element not in _NOT_TEXT
        efields = element[2] if element.__class__ is tuple and element[0] == "struct" else None
        for i, item in enumerate(value):
            if plain and item.__class__ is str:
                continue  # a string where a string-typed element is wanted: nothing to check
            if efields is not None and item.__class__ is dict and _flat_ok(item, efields):
                continue  # a struct of right scalars (an env var, a port): no call per item
            found = _check_shape(item, element, old_items[i] if i < n_old else None)
            if found:
                return found
        return None
    fields = shape[2]
    if not isinstance(value, dict):
        return value, "", [], shape[1]
    old_fields: dict[str, Any] = old if isinstance(old, dict) else {}
    for name, item in value.items():  # an object holds fewer keys than its type has fields
        sub = fields.get(name)
        if sub is None:
            continue  # unchecked
        if sub.__class__ is str:  # a scalar field: the common right answers, without a call
            cls = item.__class__
            if cls is str:
                if sub not in _NOT_TEXT:
                    continue  # a string where a string-typed field is wanted (most are)
            elif cls is int:
                bound = _INT_BOUNDS.get(sub)
                if bound is not None and -bound <= item < bound:
                    continue
            elif cls is bool and sub == _BOOL:
                continue
        found = _check_shape(item, sub, old_fields.get(name))
        if found:
            bad, owner, parts, go_type = found
            parts.insert(0, name)
            return bad, owner or shape[1].split(".", 1)[-1], parts, go_type
    return None


def check_shapes(group: str, kind: str, api_version: str, obj: Mapping[str, Any],
                 old: Mapping[str, Any] | None = None) -> None:
    """400 with Go's decoder message when a checked nested field of a built-in kind has the
    wrong JSON type (a string where ``spec.containers[].ports`` wants a list ...). A field equal
    to the stored object's (``old``) was checked when it was written."""
    root = SHAPES.get((group, kind))
    if root is None:
        return
    root_owner, fields = root
    for name, shape in fields.items():
        if name in obj:
            found = _check_shape(obj[name], shape, None if old is None else old.get(name))
            if found:
                bad, owner, parts, go_type = found
                path = ".".join([name, *parts])
                raise decode_error(kind, api_version,
                                   _shape_error(bad, owner or root_owner, path, go_type))
