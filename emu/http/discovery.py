"""Discovery documents: ``/version``, ``/api``, ``/apis``, the per-group-version resource lists,
and OpenAPI v3 for the served kinds.

Computed from the API server's kind registry on every request, so a CustomResourceDefinition
applied a moment ago is served at once (kube reports it once Established). Aggregated discovery
(``apidiscovery.k8s.io/v2``, one document with every resource) is served at ``/api`` and
``/apis`` to clients that ask for it first, as kubectl does.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..apiserver.kinds import KindInfo, KindRegistry
from . import reviews

Obj = dict[str, Any]

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
#: Kinds ``kubectl get all`` shows (the ``all`` category), by (group, kind).
ALL_CATEGORY = frozenset({("", "Pod"), ("", "Service"), ("apps", "Deployment"),
                          ("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("batch", "Job"),
                          ("autoscaling", "HorizontalPodAutoscaler"),
                          ("ray.io", "RayCluster"), ("ray.io", "RayJob"),
                          ("ray.io", "RayService")})
#: Kinds of the ``api-extensions`` category (``kubectl get api-extensions``), by (group, kind).
API_EXTENSIONS_CATEGORY = frozenset({
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService")})


def categories(info: KindInfo) -> list[str]:
    """The categories discovery lists for a kind (none for most)."""
    key = (info.group, info.kind)
    if key in ALL_CATEGORY:
        return ["all"]
    return ["api-extensions"] if key in API_EXTENSIONS_CATEGORY else []
#: The kind with an ``approval`` subresource.
APPROVABLE = ("certificates.k8s.io", "CertificateSigningRequest")
#: Built-in kinds served with a scale subresource (CRDs add theirs: `emu.http.scale`).
_SCALABLE = frozenset({("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")})


def core_versions(server_url: str = "") -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_url.split("://")[-1]}]}


def _groups(kinds: KindRegistry) -> dict[str, list[str]]:
    """Group name → its versions, in registration order (core excluded); the groups of the
    create-only reviews (`emu.http.reviews`) too."""
    out: dict[str, list[str]] = {g: list(v) for g, v in reviews.groups().items()}
    for info in kinds.all():
        if info.group:
            versions = out.setdefault(info.group, [])
            for version in (info.version, *info.also_served):
                if version not in versions:
                    versions.append(version)
    return out


def _group_doc(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": gvs,
            "preferredVersion": gvs[0]}


def group_list(kinds: KindRegistry) -> Obj:
    groups = _groups(kinds)
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_doc(name, versions) for name, versions in sorted(groups.items())]}


def group(kinds: KindRegistry, name: str) -> Obj | None:
    versions = _groups(kinds).get(name)
    return _group_doc(name, versions) if versions else None


def served(kinds: KindRegistry, group_name: str, version_name: str) -> list[KindInfo]:
    """The kinds discovery lists at ``group/version``: served there, or listed there only
    (`KindInfo.also_served`)."""
    return sorted((i for i in kinds.all() if i.group == group_name and (
        i.version == version_name or version_name in i.also_served)), key=lambda i: i.plural)


def resource_list(kinds: KindRegistry, group_name: str, version_name: str,
                  scalable: Collection[tuple[str, str]] = _SCALABLE) -> Obj | None:
    infos = served(kinds, group_name, version_name)
    resources: list[Obj] = reviews.resources(group_name, version_name)
    if not infos and not resources:
        return None
    for info in infos:
        entry: Obj = {"name": info.plural, "singularName": info.kind.lower(),
                      "namespaced": info.namespaced, "kind": info.kind, "verbs": VERBS}
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        found = categories(info)
        if found:
            entry["categories"] = found
        resources.append(entry)
        if info.has_status:
            resources.append({"name": f"{info.plural}/status", "singularName": "",
                              "namespaced": info.namespaced, "kind": info.kind,
                              "verbs": ["get", "patch", "update"]})
        if (info.group, info.kind) in scalable:
            resources.append({"name": f"{info.plural}/scale", "singularName": "",
                              "namespaced": info.namespaced, "kind": "Scale",
                              "group": "autoscaling", "version": "v1",
                              "verbs": ["get", "patch", "update"]})
        if info.kind == "Pod" and not info.group:
            resources.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                              "group": "policy", "version": "v1", "kind": "Eviction",
                              "verbs": ["create"]})
            resources.append({"name": "pods/log", "singularName": "", "namespaced": True,
                              "kind": "Pod", "verbs": ["get"]})
        if info.kind == "ServiceAccount" and not info.group:
            resources.append({"name": "serviceaccounts/token", "singularName": "",
                              "namespaced": True, "group": "authentication.k8s.io",
                              "version": "v1", "kind": "TokenRequest", "verbs": ["create"]})
        if (info.group, info.kind) == APPROVABLE:
            resources.append({"name": f"{info.plural}/approval", "singularName": "",
                              "namespaced": False, "kind": info.kind,
                              "verbs": ["get", "patch", "update"]})
    gv = f"{group_name}/{version_name}" if group_name else version_name
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}


#: The content type of aggregated discovery (``apidiscovery.k8s.io/v2``).
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str) -> bool:
    """Whether the client asked for aggregated discovery first (kubectl ≥ 1.26 does)."""
    first = accept.split(",")[0].replace(" ", "").lower()
    return "as=apigroupdiscoverylist" in first and "v=v2;" in first + ";"


def _resource_discovery(info: KindInfo, scalable: Collection[tuple[str, str]],
                        version: str) -> Obj:
    gvk = {"group": info.group, "version": version, "kind": info.kind}
    entry: Obj = {"resource": info.plural, "responseKind": gvk,
                  "scope": "Namespaced" if info.namespaced else "Cluster",
                  "singularResource": info.kind.lower(), "verbs": VERBS}
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    found = categories(info)
    if found:
        entry["categories"] = found
    subs: list[Obj] = []
    if info.has_status:
        subs.append({"subresource": "status", "responseKind": gvk,
                     "verbs": ["get", "patch", "update"]})
    if (info.group, info.kind) in scalable:
        subs.append({"subresource": "scale",
                     "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                     "verbs": ["get", "patch", "update"]})
    if info.kind == "Pod" and not info.group:
        subs.append({"subresource": "eviction", "responseKind": {
            "group": "policy", "version": "v1", "kind": "Eviction"}, "verbs": ["create"]})
        subs.append({"subresource": "log", "responseKind": {"group": "", "version": "v1",
                                                             "kind": "Pod"}, "verbs": ["get"]})
    if info.kind == "ServiceAccount" and not info.group:
        subs.append({"subresource": "token", "responseKind": {
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
            "verbs": ["create"]})
    if (info.group, info.kind) == APPROVABLE:
        subs.insert(0, {"subresource": "approval", "responseKind": gvk,
                        "verbs": ["get", "patch", "update"]})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(kinds: KindRegistry, core: bool,
               scalable: Collection[tuple[str, str]] = _SCALABLE) -> Obj:
    """``APIGroupDiscoveryList`` for ``/api`` (core) or ``/apis`` (every named group)."""
    by_group: dict[str, dict[str, list[KindInfo]]] = {}
    for info in kinds.all():
        if (info.group == "") == core:
            for version in (info.version, *info.also_served):
                by_group.setdefault(info.group, {}).setdefault(version, []).append(info)
    if not core:
        for name, group_versions in reviews.groups().items():
            for version in group_versions:
                by_group.setdefault(name, {}).setdefault(version, [])
    items = []
    for name in sorted(by_group):
        versions: list[Obj] = []
        for version, infos in by_group[name].items():
            resources = [_resource_discovery(i, scalable, version)
                         for i in sorted(infos, key=lambda i: i.plural)]
            resources += reviews.aggregated_resources(name, version)
            versions.append({"version": version, "resources": resources,
                             "freshness": "Current"})
        items.append({"metadata": {"name": name} if name else {}, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}
