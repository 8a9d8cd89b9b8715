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
from . import discovery, k8s_openapi
from .wire import HttpRequest, HttpResponse

Obj = dict[str, Any]

#: what kubectl asks ``/openapi/v2`` for (gnostic's ``openapi_v2.Document``: the Accept header
#: says ``spec.v2@v1.0+protobuf``, the answer's Content-Type, as kube-openapi's, ``.v1.0``)
_V2_ASKED = "application/com.github.proto-openapi.spec.v2"
_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


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


def _builtin_name(info: KindInfo, server_version: str) -> str | None:
    """kube's definition of a built-in kind (none for custom kinds, even in a built-in
    group)."""
    if info.custom or info.group == "ray.io":
        return None
    return k8s_openapi.definition_name(server_version, info.group, info.version, info.kind)


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


def _operation(info: KindInfo, action: str, with_validation: bool, ref: str,
               v3: bool = True) -> Obj:
    params: list[Obj] = []
    if with_validation:
        for name, desc in (("fieldValidation", "Ignore, Warn or Strict"),
                           ("fieldManager", ""), ("dryRun", "")):
            param: Obj = {"name": name, "in": "query"}
            if v3:
                param["schema"] = {"type": "string"}
            else:
                param["type"] = "string"
            if desc:
                param["description"] = desc
            params.append(param)
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    target = {"$ref": ref}
    ok: Obj = {"description": "OK", "content": {"application/json": {"schema": target}}} \
        if v3 else {"description": "OK", "schema": target}
    return {"operationId": f"{action}{info.kind}", "parameters": params,
            "responses": {"200": ok},
            "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}


def _paths(info: KindInfo, ref: str, v3: bool) -> Obj:
    prefix = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    scope = f"{prefix}/namespaces/{{namespace}}/{info.plural}" if info.namespaced \
        else f"{prefix}/{info.plural}"

    def op(action: str, with_validation: bool) -> Obj:
        return _operation(info, action, with_validation, ref, v3)

    paths: Obj = {scope: {"get": op("list", False), "post": op("post", True)},
                  f"{scope}/{{name}}": {"get": op("get", False), "put": op("put", True),
                                        "patch": op("patch", True),
                                        "delete": op("delete", False)}}
    if info.has_status:
        paths[f"{scope}/{{name}}/status"] = {"get": op("get", False), "put": op("put", True),
                                             "patch": op("patch", True)}
    return paths


def _own_schema(info: KindInfo, crds: dict[tuple[str, str], Obj]) -> Obj:
    schema = _crd_schema(crds, info) or _ray_schema(info) or _open_schema(info)
    schema["x-kubernetes-group-version-kind"] = [
        {"group": info.group, "version": info.version, "kind": info.kind}]
    return schema


def group_version_doc(kinds: KindRegistry, group: str, version: str,
                      crds: dict[tuple[str, str], Obj], server_version: str = "") -> Obj:
    """The OpenAPI v3 document of one group-version; ``server_version`` is the API server's
    ``gitVersion`` (``info.version``, as kube-apiserver writes its own) and chooses the
    built-in kinds' schemas (`emu.http.k8s_openapi`; without it they get the open schema)."""
    paths: Obj = {}
    schemas: Obj = {}
    builtin = k8s_openapi.definitions(server_version, True) if server_version else {}
    for info in discovery.served(kinds, group, version):
        name = _builtin_name(info, server_version) if server_version else None
        if name is not None:
            for dep in k8s_openapi.closure(server_version, name):
                schemas[dep] = builtin[dep]
        else:
            name = _schema_name(info)
            schemas[name] = _own_schema(info, crds)
        paths.update(_paths(info, f"#/components/schemas/{name}", True))
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes (kuberay-emu)",
                     "version": server_version},
            "paths": paths, "components": {"schemas": dict(sorted(schemas.items()))}}


def swagger_doc(kinds: KindRegistry, crds: dict[tuple[str, str], Obj],
                server_version: str) -> Obj:
    """The OpenAPI v2 (Swagger 2.0) document: every definition of the built-in API of
    ``server_version``'s release (as kube-apiserver's, whether or not the emulator serves the
    kind), the custom kinds' schemas reduced to v2 (`k8s_openapi.crd_schema_v2`), and a path
    per served resource."""
    definitions: Obj = dict(k8s_openapi.definitions(server_version, False))
    paths: Obj = {}
    for info in kinds.all():
        name = _builtin_name(info, server_version)
        if name is None:
            name = _schema_name(info)
            schema = k8s_openapi.crd_schema_v2(_own_schema(info, crds))
            schema["x-kubernetes-group-version-kind"] = [
                {"group": info.group, "version": info.version, "kind": info.kind}]
            definitions[name] = schema
        paths.update(_paths(info, f"#/definitions/{name}", False))
    return {"swagger": "2.0", "info": {"title": "Kubernetes (kuberay-emu)",
                                       "version": server_version},
            "paths": dict(sorted(paths.items())), "definitions": dict(sorted(definitions.items()))}


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
    crds = _crds(crd_list or [])
    if parts == ["v2"]:
        doc = swagger_doc(kinds, crds, server_version)
        if _V2_ASKED in req.header("accept"):
            return HttpResponse(200, k8s_openapi.encode_v2(doc, server_version), _V2_PROTOBUF)
        return HttpResponse.json(doc)
    if parts[:1] != ["v3"]:
        raise _not_found()
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
