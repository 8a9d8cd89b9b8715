"""The ``scale`` subresource: an ``autoscaling/v1`` Scale read from and written to an object.

Deployments, ReplicaSets and StatefulSets scale ``.spec.replicas`` with their
``.spec.selector.matchLabels``; a CustomResourceDefinition that declares
``subresources.scale`` names its own ``specReplicasPath``, ``statusReplicasPath`` and
``labelSelectorPath`` (simple dotted paths), read from the CRD object as kube does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..apiserver.errors import ApiError
from ..apiserver.kinds import KindInfo
from .tables import json_path

if TYPE_CHECKING:
    from ..simulation import Simulation

Obj = dict[str, Any]

#: Built-in kinds with a scale subresource, by (group, kind).
BUILTIN = frozenset({("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")})


@attrs.frozen
class ScalePaths:
    spec: str = ".spec.replicas"
    status: str = ".status.replicas"
    #: a path to a selector string (CRDs), or None: the built-ins' ``spec.selector.matchLabels``
    selector: str | None = None


def _crd_scale(crd: Obj, version: str) -> Obj | None:
    spec = crd.get("spec") or {}
    for ver in spec.get("versions") or []:
        if ver.get("name") == version:
            found = (ver.get("subresources") or {}).get("scale")
            if isinstance(found, dict):
                return found
    found = (spec.get("subresources") or {}).get("scale")
    return found if isinstance(found, dict) else None


def scale_paths(sim: Simulation, info: KindInfo) -> ScalePaths | None:
    """Where ``info``'s replicas live, or None when it has no scale subresource."""
    if (info.group, info.kind) in BUILTIN:
        return ScalePaths()
    if not info.group or (info.group, info.kind) in _NOT_CRD:
        return None
    try:
        crd = sim.api.get("CustomResourceDefinition", f"{info.plural}.{info.group}")
    except ApiError:
        return None
    found = _crd_scale(crd, info.version)
    if found is None or not found.get("specReplicasPath"):
        return None
    return ScalePaths(found["specReplicasPath"], found.get("statusReplicasPath") or "",
                      found.get("labelSelectorPath") or "")


#: Built-in groups that are never CRDs (no lookup needed).
_NOT_CRD = frozenset({("batch", "Job"), ("coordination.k8s.io", "Lease"),
                      ("discovery.k8s.io", "EndpointSlice"), ("events.k8s.io", "Event"),
                      ("apiextensions.k8s.io", "CustomResourceDefinition")})


def scalable(sim: Simulation) -> set[tuple[str, str]]:
    """(group, kind) of every kind with a scale subresource now (for discovery)."""
    out = set(BUILTIN)
    for crd in sim.api.list("CustomResourceDefinition")["items"]:
        spec = crd.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        if kind and any(_crd_scale(crd, v.get("name", "")) for v in spec.get("versions") or []):
            out.add((spec.get("group", ""), kind))
    return out


def scale_of(obj: Obj, paths: ScalePaths) -> Obj:
    meta = obj["metadata"]
    out: Obj = {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                   "creationTimestamp") if k in meta}}
    replicas = json_path(obj, paths.spec)
    status = json_path(obj, paths.status) if paths.status else None
    out["spec"] = {"replicas": replicas if isinstance(replicas, int) else
                   (1 if paths.selector is None else 0)}
    out["status"] = {"replicas": status if isinstance(status, int) else 0}
    if paths.selector is None:
        selector = (obj.get("spec") or {}).get("selector") or {}
        labels = selector.get("matchLabels") if isinstance(selector, dict) else None
        if labels:
            out["status"]["selector"] = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    elif paths.selector:
        found = json_path(obj, paths.selector)
        if isinstance(found, str) and found:
            out["status"]["selector"] = found
    return out


def replicas_patch(paths: ScalePaths, replicas: int) -> Obj:
    """A merge patch that sets the replicas at ``paths.spec`` (``.spec.replicas`` →
    ``{"spec": {"replicas": n}}``)."""
    keys = [k for k in paths.spec.split(".") if k]
    patch: Any = replicas
    for key in reversed(keys):
        patch = {key: patch}
    assert isinstance(patch, dict)
    return patch
