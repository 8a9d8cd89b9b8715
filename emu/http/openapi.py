"""OpenAPI v3 for the served kinds: what ``kubectl apply`` checks and ``kubectl explain`` reads.

``/openapi/v3`` lists one document per group-version; each document has a path per resource
whose operations carry ``x-kubernetes-group-version-kind`` and the ``fieldValidation`` query
parameter (kubectl sees it and leaves validation to the server), and a schema per kind. Schemas
are those of CustomResourceDefinitions applied at run time (their ``openAPIV3Schema``); KubeRay's
kinds, before their CRDs are applied, get the structural schemas the API server validates them
with (`emu.apiserver.rayschemas`: every ``spec`` field, so ``kubectl explain rayclusters.spec
--recursive`` lists them); the built-ins get an open schema (``apiVersion``, ``kind``,
``metadata``, ``spec``, ``status`` with any fields), so ``kubectl explain`` names their top-level
fields only.
``/openapi/v2`` is not served (kubectl falls back to v3).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import orjson

from ..apiserver.errors import ApiError
from ..apiserver.kinds import KindInfo, KindRegistry
from . import discovery
from .wire import HttpRequest, HttpResponse

Obj = dict[str, Any]


def _not_found() -> ApiError:
    return ApiError.from_status({"code": 404, "reason": "NotFound",
                                 "message": "the server could not find the requested resource"})


def _gv_paths(kinds: KindRegistry) -> dict[str, tuple[str, str]]:
    """``api/v1`` / ``apis/ray.io/v1`` → (group, version)."""
    out: dict[str, tuple[str, str]] = {}
    for info in kinds.all():
        key = f"apis/{info.group}/{info.version}" if info.group else f"api/{info.version}"
        out.setdefault(key, (info.group, info.version))
    return dict(sorted(out.items()))


def _schema_name(info: KindInfo) -> str:
    group = ".".join(reversed(info.group.split("."))) if info.group else "io.k8s.api.core"
    return f"{group}.{info.version}.{info.kind}"


def _crd_schema(crds: dict[tuple[str, str], Obj], info: KindInfo) -> Obj | None:
    crd = crds.get((info.group, info.kind))
    if crd is None:
        return None
    for ver in (crd.get("spec") or {}).get("versions") or []:
        if ver.get("name") == info.version:
            schema = (ver.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                return dict(schema)
    return None


def _ray_schema(info: KindInfo) -> Obj | None:
    """The schema a ray.io kind is validated with before its CRD is applied, with the open
    schema's descriptions of the top-level fields (the derived schemas carry none)."""
    if info.group != "ray.io":
        return None
    return ray_schema(info)


def ray_schema(info: KindInfo) -> Obj | None:
    """`emu.apiserver.rayschemas`'s schema of ``info``'s kind, described (also what ``emu
    serve --kuberay`` puts in the CRDs it applies)."""
    from ..apiserver.rayschemas import RAY_SCHEMAS

    found = RAY_SCHEMAS.get(info.kind)
    if found is None:
        return None
    schema = copy.deepcopy(found)
    base = _open_schema(info)
    schema["description"] = base["description"]
    props = schema.setdefault("properties", {})
    for key, prop in base["properties"].items():
        if key in props and "description" not in props[key]:
            # a copy: the derived schemas share one dict between fields of one type
            props[key] = {**props[key], "description": prop["description"]}
    return schema


def _open_schema(info: KindInfo) -> Obj:
    props: Obj = {
        "apiVersion": {"type": "string", "description": "APIVersion defines the versioned "
                       "schema of this representation of an object."},
        "kind": {"type": "string", "description": "Kind is a string value representing the "
                 "REST resource this object represents."},
        "metadata": {"type": "object", "description": "Standard object's metadata.",
                     "x-kubernetes-preserve-unknown-fields": True},
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "description": f"The desired state of the {info.kind}."},
    }
    if info.has_status:
        props["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                           "description": f"The observed state of the {info.kind}."}
    return {"type": "object", "description": f"{info.kind} ({info.api_version}), served by "
            "kuberay-emu.", "properties": props, "x-kubernetes-preserve-unknown-fields": True}


def _operation(info: KindInfo, action: str, with_validation: bool) -> Obj:
    params: list[Obj] = []
    if with_validation:
        params.append({"name": "fieldValidation", "in": "query", "schema": {"type": "string"},
                       "description": "Ignore, Warn or Strict"})
        params.append({"name": "fieldManager", "in": "query", "schema": {"type": "string"}})
        params.append({"name": "dryRun", "in": "query", "schema": {"type": "string"}})
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    ref = {"$ref": f"#/components/schemas/{_schema_name(info)}"}
    return {"operationId": f"{action}{info.kind}", "parameters": params,
            "responses": {"200": {"description": "OK",
                                  "content": {"application/json": {"schema": ref}}}},
            "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}


def group_version_doc(kinds: KindRegistry, group: str, version: str,
                      crds: dict[tuple[str, str], Obj], server_version: str = "") -> Obj:
    """The OpenAPI v3 document of one group-version; ``server_version`` is the API server's
    ``gitVersion`` (``info.version``, as kube-apiserver writes its own)."""
    paths: Obj = {}
    schemas: Obj = {}
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    for info in discovery.served(kinds, group, version):
        gvk = [{"group": info.group, "version": info.version, "kind": info.kind}]
        schema = _crd_schema(crds, info) or _ray_schema(info) or _open_schema(info)
        schema["x-kubernetes-group-version-kind"] = gvk
        schemas[_schema_name(info)] = schema
        scope = f"{prefix}/namespaces/{{namespace}}/{info.plural}" if info.namespaced \
            else f"{prefix}/{info.plural}"
        paths[scope] = {"get": _operation(info, "list", False),
                        "post": _operation(info, "post", True)}
        paths[f"{scope}/{{name}}"] = {"get": _operation(info, "get", False),
                                      "put": _operation(info, "put", True),
                                      "patch": _operation(info, "patch", True),
                                      "delete": _operation(info, "delete", False)}
        if info.has_status:
            paths[f"{scope}/{{name}}/status"] = {"get": _operation(info, "get", False),
                                                 "put": _operation(info, "put", True),
                                                 "patch": _operation(info, "patch", True)}
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes (kuberay-emu)",
                     "version": server_version},
            "paths": paths, "components": {"schemas": schemas}}


def _crds(crd_list: list[Obj]) -> dict[tuple[str, str], Obj]:
    out: dict[tuple[str, str], Obj] = {}
    for crd in crd_list:
        spec = crd.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        if kind:
            out[(spec.get("group", ""), kind)] = crd
    return out


def serve(kinds: KindRegistry, parts: list[str], req: HttpRequest,
          crd_list: list[Obj] | None = None, server_version: str = "") -> HttpResponse:
    """Answer ``/openapi/...``: ``parts`` is the path after ``openapi``; ``server_version`` as
    `group_version_doc`'s."""
    if parts[:1] != ["v3"]:
        raise _not_found()
    crds = _crds(crd_list or [])
    gvs = _gv_paths(kinds)
    if len(parts) == 1:
        index: Obj = {}
        for key, (group, version) in gvs.items():
            body = orjson.dumps(group_version_doc(kinds, group, version, crds,
                                                   server_version))
            digest = hashlib.sha256(body).hexdigest()[:32].upper()
            index[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
        return HttpResponse.json({"paths": index})
    key = "/".join(parts[1:])
    if key not in gvs:
        raise _not_found()
    group, version = gvs[key]
    return HttpResponse.json(group_version_doc(kinds, group, version, crds, server_version))
