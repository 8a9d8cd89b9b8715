"""Kubernetes' own OpenAPI schemas of the built-in kinds, from the ``kubernetes-validate``
package: what ``/openapi`` serves (`emu.http.openapi`, `emu.http.k8s_openapi`) and what
``fieldValidation=Strict`` checks a built-in kind's nested fields against (`unknown_fields`).

The package ships, per Kubernetes minor version, the definitions of kube-apiserver's OpenAPI
document converted to JSON Schema (draft 2020-12: ``$defs``, ``"type": [T, "null"]``, ``oneOf``
for int-or-string and quantities). They are converted back at first use, once per process and
minor version, as kube-openapi publishes them: one ``type``, ``$ref`` to
``#/components/schemas/NAME`` (v3, wrapped in ``allOf`` when the reference carries a
description, as kube does) or ``#/definitions/NAME`` (v2), ``IntOrString`` and ``Quantity`` as
``oneOf`` their types (v3) or a string (v2), and no ``enum`` on ``apiVersion``/``kind`` (the
JSON Schema conversion adds it). The extensions kube publishes (``x-kubernetes-group-version-
kind``, list types and map keys, patch strategies and merge keys, map types, unions) are in the
package's definitions and kept as they are. The package is read as data, never imported.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

import orjson

from .schema import _path

Obj = dict[str, Any]

_V3_PREFIX = "#/components/schemas/"
_V2_PREFIX = "#/definitions/"
_PACKAGE = "kubernetes_validate"


def _schema_root() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the built-in kinds' OpenAPI schemas need the kubernetes-validate "
                           "package (pip install 'kubernetes-validate>=1.33')")
    return Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"


def _minor(version: str) -> tuple[int, int]:
    found = re.match(r"v?(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a Kubernetes version: {version!r} (expected like v1.33.0)")
    return int(found.group(1)), int(found.group(2))


@functools.cache
def schema_version(server_version: str) -> str:
    """The shipped schema folder for ``server_version`` (``v1.33.0`` → ``v1.33.0-local``): the
    same minor version, else the newest one below it, else the oldest shipped."""
    want = _minor(server_version)
    shipped: dict[tuple[int, int], str] = {}
    for entry in _schema_root().iterdir():
        found = re.fullmatch(r"v(\d+)\.(\d+)\.0-local", entry.name)
        if found is not None:
            shipped[(int(found.group(1)), int(found.group(2)))] = entry.name
    if not shipped:
        raise RuntimeError(f"kubernetes-validate ships no schemas under {_schema_root()}")
    below = [v for v in shipped if v <= want]
    return shipped[max(below) if below else min(shipped)]


@functools.cache
def _raw_definitions(folder: str) -> dict[str, Obj]:
    data = orjson.loads((_schema_root() / folder / "_definitions.json").read_bytes())
    defs = data.get("$defs")
    if not isinstance(defs, dict):
        raise RuntimeError(f"{folder}/_definitions.json has no $defs")
    return defs


def _convert(node: Any, prefix: str, v3: bool) -> Any:
    if isinstance(node, list):
        return [_convert(item, prefix, v3) for item in node]
    if not isinstance(node, dict):
        return node
    out: Obj = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if kinds:
                out["type"] = kinds[0]
        elif key == "$ref" and isinstance(value, str):
            out["$ref"] = prefix + value.rsplit("/", 1)[-1]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(prop, prefix, v3) for name, prop in value.items()}
        elif key in ("items", "additionalProperties", "allOf", "oneOf", "anyOf"):
            out[key] = _convert(value, prefix, v3)
        else:
            out[key] = value
    if v3 and "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


def _definition(name: str, raw: Obj, prefix: str, v3: bool) -> Obj:
    # kube-openapi publishes these two with their OpenAPIV3OneOfTypes in v3 and their
    # OpenAPISchemaType/Format in v2
    if name.endswith(".util.intstr.IntOrString"):
        desc = raw.get("description", "IntOrString is a type that can hold an int32 or a string.")
        return {"description": desc, "oneOf": [{"type": "integer"}, {"type": "string"}]} if v3 \
            else {"description": desc, "type": "string", "format": "int-or-string"}
    if name.endswith(".api.resource.Quantity"):
        desc = raw.get("description", "Quantity is a fixed-point representation of a number.")
        return {"description": desc, "oneOf": [{"type": "string"}, {"type": "number"}]} if v3 \
            else {"description": desc, "type": "string"}
    out = _convert(raw, prefix, v3)
    if "x-kubernetes-group-version-kind" in raw:
        for field in ("apiVersion", "kind"):
            prop = (out.get("properties") or {}).get(field)
            if isinstance(prop, dict):
                prop.pop("enum", None)
    return out


@functools.cache
def definitions(server_version: str, v3: bool) -> dict[str, Obj]:
    """Every definition of the built-in API of ``server_version``'s minor release, by kube's
    name (``io.k8s.api.apps.v1.Deployment``), converted for OpenAPI v3 or v2. Shared: copy
    before changing."""
    raw = _raw_definitions(schema_version(server_version))
    prefix = _V3_PREFIX if v3 else _V2_PREFIX
    return {name: _definition(name, body, prefix, v3) for name, body in sorted(raw.items())}


@functools.cache
def _gvk_index(server_version: str) -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, body in _raw_definitions(schema_version(server_version)).items():
        for gvk in body.get("x-kubernetes-group-version-kind") or []:
            key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
            # a kind also listed under another name (meta's DeleteOptions, WatchEvent) keeps
            # its own group's definition
            if key not in out or name.startswith("io.k8s.api."):
                out[key] = name
    return out


def definition_name(server_version: str, group: str, version: str, kind: str) -> str | None:
    """kube's definition name of a built-in kind, or None when the package has none."""
    return _gvk_index(server_version).get((group, version, kind))


def _refs(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.append(value.rsplit("/", 1)[-1])
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _refs(item, found)


@functools.cache
def closure(server_version: str, name: str) -> tuple[str, ...]:
    """``name`` and every definition it references, transitively, sorted."""
    defs = definitions(server_version, True)
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        found: list[str] = []
        _refs(defs[current], found)
        todo.extend(found)
    return tuple(sorted(seen))


_ROOT_SKIP = ("apiVersion", "kind", "metadata")


def unknown_fields(server_version: str, group: str, version: str, kind: str,
                   obj: Obj) -> list[str]:
    """The fields of ``obj`` (a built-in kind's body) that kube's schema of the kind does not
    declare, named as kube's strict decoder names them (``spec.template.spec.containers[0].x``),
    sorted; ``apiVersion``, ``kind`` and ``metadata`` are left to the caller. Empty when the
    package has no schema of the kind."""
    name = definition_name(server_version, group, version, kind)
    if name is None:
        return []
    defs = definitions(server_version, True)
    out: list[str] = []
    root = defs[name]
    props = root.get("properties") or {}
    for key, value in obj.items():
        if key in _ROOT_SKIP:
            continue
        if key not in props:
            out.append(key)
        elif value is not None:
            _unknown(defs, value, props[key], [key], out)
    return sorted(out)


def _resolve(defs: dict[str, Obj], schema: Any) -> Any:
    while isinstance(schema, dict):
        if "$ref" in schema:
            schema = defs.get(schema["$ref"].rsplit("/", 1)[-1])
        elif "properties" not in schema and len(schema.get("allOf") or ()) == 1:
            schema = schema["allOf"][0]
        else:
            return schema
    return schema


def _unknown(defs: dict[str, Obj], value: Any, schema: Any, parts: list[Any],
             out: list[str]) -> None:
    schema = _resolve(defs, schema)
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and not isinstance(extra, dict):
            return  # a map of anything (RawExtension, FieldsV1, ...)
        for key, item in value.items():
            sub = (props or {}).get(key, extra if isinstance(extra, dict) else None)
            if sub is None:
                out.append(_path([*parts, key]))
            elif item is not None:
                _unknown(defs, item, sub, [*parts, key], out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if item is not None:
                _unknown(defs, item, schema.get("items"), [*parts, i], out)
