"""The kind registry: what the API server knows about each resource type.

A `KindInfo` is one registered type (group/version/kind, plural, scope, status subresource,
defaulting, validation, strategic-merge keys, selectable fields). `KindRegistry` resolves what a
caller wrote (``"Pod"``, ``"pods"``, ``"po"``, ``"RayCluster"`` with ``"ray.io/v1"``) to one entry;
bare ``"Event"`` is core/v1, ``events.k8s.io/v1`` picks the other. A user CRD is added at runtime
with `KindRegistry.register`.

Defaulters run on a copy the server owns at the top level and in ``metadata`` only: they copy any
deeper dict or list before changing it (copy-on-write), so the caller's object is never mutated and
the hot path never deep-copies.

Custom resources (the built-in ray.io kinds and any applied CRD) are defaulted, pruned and
validated by their structural schema (`emu.apiserver.schema.compile_schema`); the helper kinds
samples create (StatefulSet, Ingress, NetworkPolicy, Gateway API, RBAC) have small validators.

Over 500 lines because it is the table of every built-in kind with its defaulting and validating
functions (SetDefaults_Pod, _Service, _Job, _Deployment, _StatefulSet, the helper kinds'
checks); each is short and they are read together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from . import rbac
from . import validation as v
from .errors import ApiError, StatusCause
from .smd import ListTypes

Obj = dict[str, Any]
Defaulter = Callable[[Obj, "Obj | None"], None]
Validator = Callable[[Obj, "Obj | None"], list[StatusCause]]


class Allocator(Protocol):
    """Server-side allocations a kind's create hook may need (cluster IPs, node ports)."""

    def next_cluster_ip(self) -> str: ...
    def claim_cluster_ip(self, ip: str) -> None: ...
    def next_node_port(self) -> int: ...


PrepareCreate = Callable[[Obj, Allocator], None]

#: patchMergeKey of the built-in types' lists, by field name (candidates, first present wins:
#: a container port merges on containerPort, a Service port on port).
BUILTIN_MERGE_KEYS: Mapping[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "imagePullSecrets": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "ports": ("containerPort", "port"),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey",),
    "finalizers": (),  # a primitive list merged as a set
}


@attrs.frozen
class KindInfo:
    """One resource type served by the API server."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    has_status: bool = False
    has_generation: bool = False
    #: create drops a client-sent status (most kinds with a status subresource; not Nodes).
    reset_status_on_create: bool = True
    #: ``subdomain`` (most kinds), ``label`` (Namespace), ``dns1035`` (Service), ``path``.
    name_format: str = "subdomain"
    defaulter: Defaulter | None = None
    #: The fields (dotted paths, sorted) of a body that the kind's structural schema does not
    #: declare and its defaulter would prune; what ``fieldValidation=Strict`` refuses.
    unknown_fields: Callable[[Obj], list[str]] | None = None
    prepare_create: PrepareCreate | None = None
    validator: Validator | None = None
    #: strategic-merge list keys; None means strategic merge patch is unsupported (CRDs).
    merge_keys: Mapping[str, tuple[str, ...]] | None = None
    #: selectable fields beyond metadata.name / metadata.namespace.
    field_getters: Mapping[str, Callable[[Obj], str]] = attrs.field(factory=dict)
    #: integer fields a decoder would type-check: (dotted path, Go struct field).
    int_fields: tuple[tuple[str, str], ...] = ()
    allow_unconditional_update: bool = True
    #: Pods: deletion is graceful (deletionTimestamp in the future, the kubelet finishes it).
    graceful_delete: bool = False
    #: delete of an object removed at once returns it rather than a Status (kube's registries
    #: with ``ReturnDeletedObject``: Pods, Services, ServiceAccounts, PVs, PVCs, StorageClasses,
    #: CSIDrivers).
    return_deleted_object: bool = False
    short_names: tuple[str, ...] = ()
    #: a custom resource (the ray.io kinds, a CRD's): core's built-in-only checks skip it.
    custom: bool = False
    #: server-side apply's list types (from a CRD schema); None: the built-in types'.
    list_types: ListTypes | None = attrs.field(default=None, eq=False)
    #: A CRD's other served versions: listed in discovery (clients such as envtest wait for
    #: every served version to appear), while requests at them get a 404 that says only
    #: ``version`` is served (no conversion between versions is emulated).
    also_served: tuple[str, ...] = ()
    api_version: str = attrs.field(init=False)
    resource: str = attrs.field(init=False)
    list_kind: str = attrs.field(init=False)
    selectable: frozenset[str] = attrs.field(init=False)
    extract_fields: Callable[[Obj], dict[str, str]] | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "api_version",
                           f"{self.group}/{self.version}" if self.group else self.version)
        object.__setattr__(self, "resource",
                           f"{self.plural}.{self.group}" if self.group else self.plural)
        object.__setattr__(self, "list_kind", f"{self.kind}List")
        object.__setattr__(self, "selectable", frozenset(
            ("metadata.name", "metadata.namespace", *self.field_getters)))
        object.__setattr__(self, "extract_fields", _extractor(self.field_getters))


def _not_found(message: str) -> ApiError:
    return ApiError.from_status({"reason": "NotFound", "code": 404, "message": message})


class KindRegistry:
    """Resolves kind names to `KindInfo`; built-in kinds are registered by `builtin_registry`."""

    def __init__(self) -> None:
        self._by_gk: dict[tuple[str, str], KindInfo] = {}
        self._names: dict[str, list[KindInfo]] = {}
        self._cache: dict[tuple[str, str | None], KindInfo] = {}
        #: bumped on every register, so callers may cache resolutions
        self.generation = 0
        #: called with each newly served kind, in registration order (discovery watchers: the
        #: garbage collector starts watching a CRD's kind when it is registered)
        self.listeners: list[Callable[[KindInfo], None]] = []

    def register(self, info: KindInfo) -> KindInfo:
        """Add (or replace) a kind; it is served at once."""
        old = self._by_gk.get((info.group, info.kind))
        self._by_gk[(info.group, info.kind)] = info
        for name in (info.kind, info.kind.lower(), info.plural, *info.short_names):
            entries = self._names.setdefault(name, [])
            if old is not None and old in entries:
                entries[entries.index(old)] = info
            elif info not in entries:
                entries.append(info)
        self._cache.clear()
        self.generation += 1
        if old is None:
            for listener in list(self.listeners):
                listener(info)
        return info

    def unregister(self, group: str, kind: str) -> KindInfo | None:
        """Stop serving a kind (its CustomResourceDefinition was deleted); the removed info."""
        info = self._by_gk.pop((group, kind), None)
        if info is None:
            return None
        for name in (info.kind, info.kind.lower(), info.plural, *info.short_names):
            entries = self._names.get(name)
            if entries and info in entries:
                entries.remove(info)
                if not entries:
                    del self._names[name]
        self._cache.clear()
        self.generation += 1
        return info

    def all(self) -> list[KindInfo]:
        return list(self._by_gk.values())

    def get(self, group: str, kind: str) -> KindInfo | None:
        return self._by_gk.get((group, kind))

    def resolve(self, name: str, api_version: str | None = None) -> KindInfo:
        """The kind a caller means; 404 NotFound when the server doesn't serve it."""
        try:
            return self._cache[(name, api_version)]
        except KeyError:
            pass
        candidates = self._names.get(name) or self._names.get(name.lower()) or []
        if not candidates:
            raise _not_found(f'the server doesn\'t have a resource type "{name}"')
        if api_version:
            if "/" in api_version or api_version.startswith("v"):
                found = [c for c in candidates if c.api_version == api_version]
            else:  # a bare group ("ray.io")
                found = [c for c in candidates if c.group == api_version]
            if not found:
                raise _not_found(f'no matches for kind "{name}" in version "{api_version}"')
            info = found[0]
        else:
            info = candidates[0]
        self._cache[(name, api_version)] = info
        return info


# -- defaulting ------------------------------------------------------------------------------------


def _own(parent: Obj, key: str) -> Obj:
    """``parent[key]`` as a dict this server owns (a shallow copy), created when missing."""
    child = parent.get(key)
    mine: Obj = dict(child) if isinstance(child, dict) else {}
    parent[key] = mine
    return mine


def default_pull_policy(image: str) -> str:
    """``SetDefaults_Container``: Always for ``:latest`` or an untagged image, else IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_containers(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out = []
    for c in items:
        if not isinstance(c, dict):
            out.append(c)
            continue
        need = ("imagePullPolicy" not in c or "terminationMessagePath" not in c
                or "terminationMessagePolicy" not in c)
        ports = c.get("ports")
        need_ports = isinstance(ports, list) and any(
            isinstance(p, dict) and "protocol" not in p for p in ports)
        if need or need_ports:
            c = dict(c)
            if "imagePullPolicy" not in c:
                image = c.get("image")
                c["imagePullPolicy"] = default_pull_policy(image if isinstance(image, str)
                                                           else "")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            if need_ports and isinstance(ports, list):
                c["ports"] = [{**p, "protocol": "TCP"} if isinstance(p, dict)
                              and "protocol" not in p else p for p in ports]
        out.append(c)
    return out


_POD_SPEC_DEFAULTS = ("restartPolicy", "dnsPolicy", "schedulerName",
                      "terminationGracePeriodSeconds", "securityContext")
_CONTAINER_DEFAULTS = ("imagePullPolicy", "terminationMessagePath", "terminationMessagePolicy")


def _pod_spec_defaulted(spec: Obj) -> bool:
    """Every default is already there (the common case on update): nothing to copy."""
    for fname in _POD_SPEC_DEFAULTS:
        if fname not in spec:
            return False
    for group in ("containers", "initContainers"):
        items = spec.get(group)
        if items is None:
            continue
        if not isinstance(items, list):
            return False
        for c in items:
            if not isinstance(c, dict):
                return False
            for fname in _CONTAINER_DEFAULTS:
                if fname not in c:
                    return False
            ports = c.get("ports")
            if ports and any(not isinstance(p, dict) or "protocol" not in p for p in ports):
                return False
    return True


def default_pod_spec(parent: Obj, key: str = "spec") -> None:
    """``SetDefaults_PodSpec`` and ``SetDefaults_Container`` for the fields controllers read."""
    cur = parent.get(key)
    if not isinstance(cur, dict):
        return
    if _pod_spec_defaulted(cur):
        return
    spec = _own(parent, key)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for group in ("containers", "initContainers"):
        if group in spec:
            spec[group] = _default_containers(spec[group])


def _default_template(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        return
    spec = _own(obj, "spec")
    template = _own(spec, "template")
    default_pod_spec(template)


def default_pod(obj: Obj, old: Obj | None) -> None:
    default_pod_spec(obj)
    status = obj.get("status")
    if not isinstance(status, dict) or "phase" not in status:
        status = _own(obj, "status")
        status["phase"] = "Pending"
        status.setdefault("qosClass", "BestEffort")


def default_service(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_Service``, and the ``status: {loadBalancer: {}}`` every Service is sent
    with (Go encodes the empty LoadBalancerStatus struct)."""
    status = obj.get("status")
    if not isinstance(status, dict):
        obj["status"] = {"loadBalancer": {}}
    elif "loadBalancer" not in status:
        obj["status"] = {"loadBalancer": {}, **status}
    if not isinstance(obj.get("spec"), dict):
        return
    spec = _own(obj, "spec")
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    ports = spec.get("ports")
    if isinstance(ports, list):
        new_ports = []
        for p in ports:
            if isinstance(p, dict) and ("protocol" not in p or "targetPort" not in p):
                p = dict(p)
                p.setdefault("protocol", "TCP")
                if "port" in p:
                    p.setdefault("targetPort", p["port"])
            new_ports.append(p)
        spec["ports"] = new_ports
    if old is not None:
        # PrepareForUpdate keeps allocated values the client left out.
        old_spec = old.get("spec") or {}
        for fname in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not spec.get(fname) and fname in old_spec:
                spec[fname] = old_spec[fname]
        old_ports = {p.get("port"): p for p in old_spec.get("ports") or [] if isinstance(p, dict)}
        if isinstance(spec.get("ports"), list) and any(
                isinstance(p, dict) and "nodePort" not in p
                and "nodePort" in old_ports.get(p.get("port"), {}) for p in spec["ports"]):
            spec["ports"] = [
                {**p, "nodePort": old_ports[p.get("port")]["nodePort"]}
                if isinstance(p, dict) and "nodePort" not in p
                and "nodePort" in old_ports.get(p.get("port"), {}) else p
                for p in spec["ports"]]


def prepare_service(obj: Obj, alloc: Allocator) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("type") == "ExternalName":
        return
    spec = _own(obj, "spec")
    if not spec.get("clusterIP"):
        spec["clusterIP"] = alloc.next_cluster_ip()
    elif spec["clusterIP"] != "None":
        alloc.claim_cluster_ip(str(spec["clusterIP"]))
    if spec["clusterIP"] != "None":
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    else:
        spec.setdefault("clusterIPs", ["None"])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if spec.get("type") in ("NodePort", "LoadBalancer") and isinstance(spec.get("ports"), list):
        spec["ports"] = [{**p, "nodePort": alloc.next_node_port()}
                         if isinstance(p, dict) and "nodePort" not in p else p
                         for p in spec["ports"]]


def default_job(obj: Obj, old: Obj | None) -> None:
    if not isinstance(obj.get("spec"), dict):
        return
    spec = _own(obj, "spec")
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    _default_template(obj)


def ray_kind(kind: str, plural: str) -> KindInfo:
    """A built-in ray.io kind, served with its derived schema (`emu.apiserver.rayschemas`)."""
    from .rayschemas import RAY_SCHEMAS
    from .schema import compile_schema
    from .smd import schema_list_types

    schema = compile_schema(RAY_SCHEMAS[kind])
    return KindInfo("ray.io", "v1", kind, plural, has_status=True, has_generation=True,
                    allow_unconditional_update=False, defaulter=schema.defaulter,
                    validator=schema.validator, unknown_fields=schema.unknown_fields,
                    list_types=schema_list_types(RAY_SCHEMAS[kind]), custom=True)


def default_crd_status(obj: Obj, old: Obj | None) -> None:
    """The status kube's apiextensions controllers give a CRD once it serves it (here at once,
    as the kind is served at once): ``acceptedNames``, the ``NamesAccepted`` and ``Established``
    conditions (what ``kubectl wait --for condition=established`` waits for) and
    ``storedVersions``. Conditions already there are kept."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
        return  # the validator reports it
    status = _own(obj, "status")
    names = spec["names"]
    kind = str(names.get("kind", ""))
    if not isinstance(status.get("acceptedNames"), dict):
        accepted = {"plural": names.get("plural", ""),
                    "singular": names.get("singular") or kind.lower(), "kind": kind,
                    "listKind": names.get("listKind") or f"{kind}List"}
        for extra in ("shortNames", "categories"):
            if names.get(extra):
                accepted[extra] = list(names[extra])
        status["acceptedNames"] = accepted
    conditions = status.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        when = (obj.get("metadata") or {}).get("creationTimestamp")
        status["conditions"] = [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": when,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": when,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}]
    stored = [str(v) for v in status.get("storedVersions") or [] if isinstance(v, str)]
    for ver in spec.get("versions") or []:
        if isinstance(ver, dict) and ver.get("storage") and ver.get("name") not in stored:
            stored.append(str(ver.get("name")))
    status["storedVersions"] = stored


def validate_crd(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """What the CRD validation a controller's test trips over: the names, scope and versions."""
    invalid, required = v.invalid, v.required
    causes: list[StatusCause] = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    assert isinstance(names, dict)
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    for value, path in ((group, "spec.group"), (plural, "spec.names.plural"),
                        (kind, "spec.names.kind")):
        if not value or not isinstance(value, str):
            causes.append(required(path, "Required value"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(invalid("spec.scope", spec.get("scope"),
                              'supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions or not all(
            isinstance(ver, dict) and ver.get("name") for ver in versions):
        causes.append(required("spec.versions", "must have exactly one version marked as "
                                                "storage version"))
    if isinstance(versions, list):
        for i, ver in enumerate(versions):
            openapi = ((ver or {}).get("schema") or {}).get("openAPIV3Schema") \
                if isinstance(ver, dict) else None
            if openapi is None:
                continue
            from .schema import compile_schema

            try:
                compile_schema(openapi)
            except Exception as err:  # jsonschema's SchemaError and bad shapes
                detail = str(getattr(err, "message", err)).splitlines()[0]
                causes.append(invalid(f"spec.versions[{i}].schema.openAPIV3Schema", "object",
                                      detail))
    name = (obj.get("metadata") or {}).get("name")
    if not causes and name != f"{plural}.{group}":
        causes.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    return causes


def crd_kind_info(crd: Obj) -> KindInfo:
    """The kind a CustomResourceDefinition serves: its storage version (or first served one),
    scope, plural, short names, and a status subresource when it declares one; its other served
    versions as ``also_served``."""
    spec = crd["spec"]
    versions = [ver for ver in spec["versions"] if ver.get("served", True)] or spec["versions"]
    chosen = next((ver for ver in versions if ver.get("storage")), versions[0])
    has_status = "status" in ((chosen.get("subresources") or {})
                              or (spec.get("subresources") or {}))
    names = spec["names"]
    from .schema import compile_schema, version_schema
    from .smd import schema_list_types

    openapi = version_schema(crd, chosen["name"])
    schema = compile_schema(openapi) if openapi is not None else None
    return KindInfo(spec["group"], chosen["name"], names["kind"], names["plural"],
                    namespaced=spec["scope"] == "Namespaced", has_status=has_status,
                    has_generation=True, allow_unconditional_update=False,
                    short_names=tuple(names.get("shortNames") or ()),
                    defaulter=schema.defaulter if schema is not None else None,
                    validator=schema.validator if schema is not None else None,
                    unknown_fields=schema.unknown_fields if schema is not None else None,
                    list_types=schema_list_types(openapi), custom=True,
                    also_served=tuple(ver["name"] for ver in versions if ver is not chosen
                                      and ver.get("served", True)))


def default_statefulset(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_StatefulSet`` (apps/v1): replicas 1, OrderedReady, RollingUpdate with
    partition 0, revisionHistoryLimit 10, the PVC retention policy Retain/Retain."""
    if not isinstance(obj.get("spec"), dict):
        return
    spec = _own(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                       "rollingUpdate": {"partition": 0}})
    spec.setdefault("persistentVolumeClaimRetentionPolicy",
                    {"whenDeleted": "Retain", "whenScaled": "Retain"})
    _default_template(obj)


def validate_statefulset(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidateStatefulSet``: a Deployment's checks (selector, template labels, Pod spec),
    a known podManagementPolicy, and everything but replicas, template, updateStrategy,
    minReadySeconds and the PVC retention policy immutable."""
    causes = v.validate_deployment(obj, old)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    policy = spec.get("podManagementPolicy")
    if policy is not None and policy not in ("OrderedReady", "Parallel"):
        causes.append(v.not_supported("spec.podManagementPolicy", policy,
                                      ("OrderedReady", "Parallel")))
    if old is not None:
        mutable = ("replicas", "template", "updateStrategy", "minReadySeconds", "ordinals",
                   "persistentVolumeClaimRetentionPolicy", "revisionHistoryLimit")
        old_spec = old.get("spec") or {}
        if {k: x for k, x in spec.items() if k not in mutable} != \
                {k: x for k, x in old_spec.items() if k not in mutable}:
            causes.append(v.forbidden(
                "spec", "updates to statefulset spec for fields other than 'replicas', "
                "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
    return causes


def _require(*paths: str) -> Validator:
    """A validator that only checks the given dotted fields are present (what the kinds stored
    for samples need: a helper object is kept, not acted on)."""

    def validate(obj: Obj, old: Obj | None) -> list[StatusCause]:
        causes: list[StatusCause] = []
        for path in paths:
            node: Any = obj
            for part in path.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is None or node == "" or node == []:
                causes.append(v.required(path))
        return causes

    return validate


def validate_ingress(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``ValidateIngressSpec``: a default backend or at least one rule; each HTTP path has a
    known pathType and a backend."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    causes: list[StatusCause] = []
    rules = spec.get("rules") or []
    if not spec.get("defaultBackend") and not rules:
        causes.append(v.invalid("spec.rules", rules,
                                "either `defaultBackend` or `rules` must be specified"))
    for i, rule in enumerate(rules):
        for j, path in enumerate(((rule or {}).get("http") or {}).get("paths") or []):
            where = f"spec.rules[{i}].http.paths[{j}]"
            kind = (path or {}).get("pathType")
            if kind is None:
                causes.append(v.required(f"{where}.pathType", "pathType must be specified"))
            elif kind not in ("Exact", "Prefix", "ImplementationSpecific"):
                causes.append(v.not_supported(f"{where}.pathType", kind,
                                              ("Exact", "ImplementationSpecific", "Prefix")))
            if not (path or {}).get("backend"):
                causes.append(v.required(f"{where}.backend"))
    return causes


def _stored_kinds() -> list[KindInfo]:
    """Kinds the samples and KubeRay create as helpers: stored and validated, not acted on
    (NetworkPolicy not applied, no Ingress or Gateway controller; the RBAC kinds are registered
    with the built-ins, enforced by emu.apiserver.rbac)."""
    smp = BUILTIN_MERGE_KEYS
    net, gw = "networking.k8s.io", "gateway.networking.k8s.io"
    return [
        KindInfo("apps", "v1", "StatefulSet", "statefulsets", has_status=True,
                 has_generation=True, defaulter=default_statefulset,
                 validator=validate_statefulset, merge_keys=smp, int_fields=_REPLICAS,
                 short_names=("sts",)),
        KindInfo(net, "v1", "Ingress", "ingresses", has_status=True, has_generation=True,
                 validator=validate_ingress, merge_keys=smp, short_names=("ing",)),
        KindInfo(net, "v1", "IngressClass", "ingressclasses", namespaced=False,
                 has_generation=True, merge_keys=smp),
        KindInfo(net, "v1", "NetworkPolicy", "networkpolicies", has_generation=True,
                 validator=_require("spec.podSelector"), merge_keys=smp, short_names=("netpol",)),
        KindInfo(gw, "v1", "GatewayClass", "gatewayclasses", namespaced=False, has_status=True,
                 has_generation=True, allow_unconditional_update=False,
                 validator=_require("spec.controllerName"), short_names=("gc",)),
        KindInfo(gw, "v1", "Gateway", "gateways", has_status=True, has_generation=True,
                 allow_unconditional_update=False,
                 validator=_require("spec.gatewayClassName", "spec.listeners"),
                 short_names=("gtw",)),
        KindInfo(gw, "v1", "HTTPRoute", "httproutes", has_status=True, has_generation=True,
                 allow_unconditional_update=False),
        # served so kubectl apply --prune's default allowlist and kubectl cluster-info dump
        # find every kind they ask for; no controller runs them
        KindInfo("", "v1", "ReplicationController", "replicationcontrollers", has_status=True,
                 has_generation=True, merge_keys=smp, int_fields=_REPLICAS,
                 short_names=("rc",)),
        KindInfo("apps", "v1", "DaemonSet", "daemonsets", has_status=True, has_generation=True,
                 merge_keys=smp, short_names=("ds",)),
        KindInfo("batch", "v1", "CronJob", "cronjobs", has_status=True, has_generation=True,
                 merge_keys=smp, short_names=("cj",)),
    ]


#: cert-manager's API group (the CRDs `cert_manager_crds` describes).
CERT_MANAGER_GROUP = "cert-manager.io"


def _open_object(**properties: Obj) -> Obj:
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            **({"properties": properties} if properties else {})}


def cert_manager_crds() -> list[Obj]:
    """The CustomResourceDefinitions cert-manager installs that KubeRay's mTLS uses:
    ``Certificate``, ``Issuer`` and ``ClusterIssuer`` (``cert-manager.io/v1``), with the parts of
    their schemas a caller trips over — a Certificate needs ``spec.secretName`` and
    ``spec.issuerRef.name``, and its SAN lists are string lists — and the rest kept open.
    Not served until applied (`emu.kube.certmanager.install_cert_manager`), as on a cluster
    without cert-manager."""
    strings = {"type": "array", "items": {"type": "string"}}
    certificate_spec = {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "required": ["issuerRef", "secretName"],
        "properties": {
            "secretName": {"type": "string"}, "commonName": {"type": "string"},
            "isCA": {"type": "boolean"}, "duration": {"type": "string"},
            "renewBefore": {"type": "string"}, "dnsNames": strings, "ipAddresses": strings,
            "usages": strings,
            "issuerRef": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "kind": {"type": "string"},
                "group": {"type": "string"}}}}}
    out = []
    for kind, plural, scope, short, spec in (
            ("Certificate", "certificates", "Namespaced", ["cert", "certs"], certificate_spec),
            ("Issuer", "issuers", "Namespaced", [], _open_object()),
            ("ClusterIssuer", "clusterissuers", "Cluster", [], _open_object())):
        schema = {"type": "object", "required": ["spec"], "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"}, "spec": spec, "status": _open_object()}}
        out.append({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{CERT_MANAGER_GROUP}",
                         "labels": {"app.kubernetes.io/name": "cert-manager"}},
            "spec": {"group": CERT_MANAGER_GROUP, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": f"{kind}List", "shortNames": short,
                               "categories": ["cert-manager"]},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema},
                                   "subresources": {"status": {}}}]}})
    return out


JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def prepare_job(obj: Obj, alloc: Allocator) -> None:
    """``generateSelector`` (pkg/registry/batch/job): labels and selector from the Job's uid."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") or spec.get("selector"):
        return
    if not isinstance(spec.get("template"), dict):
        return
    meta = obj["metadata"]
    uid, name = meta["uid"], meta.get("name", "")
    spec = _own(obj, "spec")
    template = _own(spec, "template")
    tmeta = _own(template, "metadata")
    labels = _own(tmeta, "labels")
    labels.update({JOB_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid,
                   "job-name": name})
    spec["selector"] = {"matchLabels": {JOB_UID_LABEL: uid}}


def default_deployment(obj: Obj, old: Obj | None) -> None:
    if not isinstance(obj.get("spec"), dict):
        return
    spec = _own(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    if "strategy" not in spec:
        spec["strategy"] = {"type": "RollingUpdate",
                            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    _default_template(obj)


def default_replicaset(obj: Obj, old: Obj | None) -> None:
    if not isinstance(obj.get("spec"), dict):
        return
    spec = _own(obj, "spec")
    spec.setdefault("replicas", 1)
    _default_template(obj)


def default_namespace(obj: Obj, old: Obj | None) -> None:
    meta = obj["metadata"]
    labels = meta.get("labels")
    name = meta.get("name", "")
    if not isinstance(labels, dict) or labels.get("kubernetes.io/metadata.name") != name:
        meta["labels"] = {**(labels if isinstance(labels, dict) else {}),
                          "kubernetes.io/metadata.name": name}
    spec = obj.get("spec")
    if not isinstance(spec, dict) or "finalizers" not in spec:
        _own(obj, "spec")["finalizers"] = ["kubernetes"]
    status = obj.get("status")
    if not isinstance(status, dict) or "phase" not in status:
        _own(obj, "status")["phase"] = "Active"


def default_pvc(obj: Obj, old: Obj | None) -> None:
    if isinstance(obj.get("spec"), dict) and "volumeMode" not in obj["spec"]:
        _own(obj, "spec")["volumeMode"] = "Filesystem"
    status = obj.get("status")
    if not isinstance(status, dict) or "phase" not in status:
        _own(obj, "status")["phase"] = "Pending"


def default_pv(obj: Obj, old: Obj | None) -> None:
    if isinstance(obj.get("spec"), dict) and "persistentVolumeReclaimPolicy" not in obj["spec"]:
        _own(obj, "spec")["persistentVolumeReclaimPolicy"] = "Retain"
    status = obj.get("status")
    if not isinstance(status, dict) or "phase" not in status:
        _own(obj, "status")["phase"] = "Pending"


def default_secret(obj: Obj, old: Obj | None) -> None:
    obj.setdefault("type", "Opaque")


# -- selectable fields -----------------------------------------------------------------------------


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class PathGetter:
    """A selectable field read by its dotted path (``spec.nodeName``)."""

    __slots__ = ("path",)

    def __init__(self, *path: str) -> None:
        self.path = path

    def __call__(self, obj: Obj) -> str:
        cur: Any = obj
        for part in self.path:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(part)
        return _field_text(cur)


def _event_source(obj: Obj) -> str:
    """An Event's ``source`` field selector: ``source.component``, else the reporting
    controller (``pkg/registry/core/event/strategy.go``)."""
    source = obj.get("source")
    component = source.get("component") if isinstance(source, dict) else None
    return _field_text(component or obj.get("reportingComponent") or "")


def _path_getter(*path: str) -> Callable[[Obj], str]:
    return PathGetter(*path)


def _extractor(getters: Mapping[str, Callable[[Obj], str]]
               ) -> Callable[[Obj], dict[str, str]] | None:
    """One function computing every selectable field of an object on each write; two-segment
    paths are grouped by their first segment so each top-level dict is looked up once."""
    if not getters:
        return None
    simple = all(isinstance(g, PathGetter) and len(g.path) == 2 for g in getters.values())
    if not simple:
        items = list(getters.items())
        return lambda obj: {name: g(obj) for name, g in items}
    groups: dict[str, list[tuple[str, str]]] = {}
    for name, g in getters.items():
        assert isinstance(g, PathGetter)
        groups.setdefault(g.path[0], []).append((name, g.path[1]))
    plan = list(groups.items())

    def extract(obj: Obj) -> dict[str, str]:
        out: dict[str, str] = {}
        for top, fields in plan:
            sub = obj.get(top)
            if isinstance(sub, dict):
                for name, key in fields:
                    value = sub.get(key)
                    out[name] = value if isinstance(value, str) else _field_text(value)
            else:
                for name, _key in fields:
                    out[name] = ""
        return out

    return extract


def _fields(*names: str) -> dict[str, Callable[[Obj], str]]:
    return {name: _path_getter(*name.split(".")) for name in names}


# -- the built-in kinds ----------------------------------------------------------------------------

_REPLICAS = (("spec.replicas", "spec.replicas"),)


def builtin_kinds() -> list[KindInfo]:
    """Every kind the API server serves from the start."""
    from .storedkinds import stored_builtin_kinds

    smp = BUILTIN_MERGE_KEYS
    core = ""
    return [
        KindInfo(core, "v1", "Namespace", "namespaces", namespaced=False, has_status=True,
                 name_format="label", defaulter=default_namespace, merge_keys=smp,
                 field_getters=_fields("status.phase"), short_names=("ns",)),
        KindInfo(core, "v1", "Node", "nodes", namespaced=False, has_status=True, merge_keys=smp,
                 reset_status_on_create=False,
                 field_getters=_fields("spec.unschedulable"), short_names=("no",)),
        KindInfo(core, "v1", "Pod", "pods", has_status=True, has_generation=True,
                 defaulter=default_pod, validator=v.validate_pod, merge_keys=smp,
                 field_getters=_fields("status.phase", "spec.nodeName", "spec.restartPolicy",
                                       "spec.schedulerName", "spec.serviceAccountName",
                                       "status.podIP", "status.nominatedNodeName"),
                 graceful_delete=True, return_deleted_object=True, short_names=("po",)),
        KindInfo(core, "v1", "Service", "services", has_status=True, name_format="dns1035",
                 defaulter=default_service, prepare_create=prepare_service,
                 validator=v.validate_service, merge_keys=smp, return_deleted_object=True,
                 short_names=("svc",)),
        KindInfo(core, "v1", "ConfigMap", "configmaps", merge_keys=smp, short_names=("cm",)),
        KindInfo(core, "v1", "Secret", "secrets", defaulter=default_secret, merge_keys=smp,
                 field_getters=_fields("type")),
        KindInfo(core, "v1", "ServiceAccount", "serviceaccounts", merge_keys=smp,
                 return_deleted_object=True, short_names=("sa",)),
        # RBAC kinds (rbac.authorization.k8s.io/v1); enforcement is emu.apiserver.rbac's.
        KindInfo(rbac.GROUP, "v1", "Role", "roles", validator=rbac.validate_role,
                 merge_keys=smp),
        KindInfo(rbac.GROUP, "v1", "ClusterRole", "clusterroles", namespaced=False,
                 validator=rbac.validate_role, merge_keys=smp),
        KindInfo(rbac.GROUP, "v1", "RoleBinding", "rolebindings", validator=rbac.validate_binding,
                 merge_keys=smp),
        KindInfo(rbac.GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings",
                 namespaced=False, validator=rbac.validate_binding, merge_keys=smp),
        KindInfo(core, "v1", "PersistentVolumeClaim", "persistentvolumeclaims", has_status=True,
                 defaulter=default_pvc, validator=v.validate_pvc, merge_keys=smp,
                 return_deleted_object=True, short_names=("pvc",)),
        KindInfo(core, "v1", "PersistentVolume", "persistentvolumes", namespaced=False,
                 has_status=True, defaulter=default_pv, merge_keys=smp,
                 return_deleted_object=True, short_names=("pv",)),
        KindInfo(core, "v1", "Event", "events", name_format="path", merge_keys=smp,
                 field_getters={**_fields("involvedObject.kind", "involvedObject.name",
                                          "involvedObject.namespace", "involvedObject.uid",
                                          "involvedObject.apiVersion",
                                          "involvedObject.resourceVersion",
                                          "involvedObject.fieldPath", "reason", "type",
                                          "reportingComponent"),
                                "source": _event_source},
                 short_names=("ev",)),
        KindInfo(core, "v1", "Endpoints", "endpoints", merge_keys=smp, short_names=("ep",)),
        KindInfo("apps", "v1", "Deployment", "deployments", has_status=True,
                 has_generation=True, defaulter=default_deployment,
                 validator=v.validate_deployment, merge_keys=smp, int_fields=_REPLICAS,
                 short_names=("deploy",)),
        KindInfo("apps", "v1", "ReplicaSet", "replicasets", has_status=True, has_generation=True,
                 defaulter=default_replicaset, validator=v.validate_replicaset, merge_keys=smp,
                 int_fields=_REPLICAS, short_names=("rs",)),
        KindInfo("batch", "v1", "Job", "jobs", has_status=True, has_generation=True,
                 defaulter=default_job, prepare_create=prepare_job, validator=v.validate_job,
                 merge_keys=smp, int_fields=(
                     ("spec.parallelism", "JobSpec.spec.parallelism"),
                     ("spec.completions", "JobSpec.spec.completions"),
                     ("spec.backoffLimit", "JobSpec.spec.backoffLimit"))),
        KindInfo("coordination.k8s.io", "v1", "Lease", "leases", validator=v.validate_lease,
                 merge_keys=smp),
        KindInfo("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", merge_keys=smp),
        KindInfo("events.k8s.io", "v1", "Event", "events", name_format="path", merge_keys=smp,
                 field_getters=_fields("regarding.kind", "regarding.name",
                                       "regarding.namespace", "reason", "type")),
        KindInfo("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                 "customresourcedefinitions", namespaced=False, has_status=True,
                 has_generation=True, validator=validate_crd, defaulter=default_crd_status,
                 short_names=("crd", "crds")),
        ray_kind("RayCluster", "rayclusters"),
        ray_kind("RayJob", "rayjobs"),
        ray_kind("RayService", "rayservices"),
        ray_kind("RayCronJob", "raycronjobs"),
        *_stored_kinds(),
        *stored_builtin_kinds(),
    ]


_BUILTINS: list[KindInfo] | None = None


def builtin_info(group: str, kind: str) -> KindInfo | None:
    """The built-in registration of a kind (KubeRay's are served without their CRD too)."""
    builtin_registry()  # fills _BUILTINS
    assert _BUILTINS is not None
    return next((i for i in _BUILTINS if i.group == group and i.kind == kind), None)


def builtin_registry() -> KindRegistry:
    """A registry with every built-in kind (the KindInfo values are shared: they're frozen)."""
    global _BUILTINS
    if _BUILTINS is None:
        _BUILTINS = builtin_kinds()
    reg = KindRegistry()
    for info in _BUILTINS:
        reg.register(info)
    return reg
