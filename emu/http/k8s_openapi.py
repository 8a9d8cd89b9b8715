"""Kubernetes' own schemas of the built-in kinds, for ``/openapi/v3`` and ``/openapi/v2``.

The schemas come from the ``kubernetes-validate`` package, which ships, per Kubernetes minor
version, the definitions of kube-apiserver's OpenAPI document converted to JSON Schema (draft
2020-12: ``$defs``, ``"type": [T, "null"]``, ``oneOf`` for int-or-string and quantities). They
are converted back at first use, once per process and minor version, as kube-openapi publishes
them: one ``type``, ``$ref`` to ``#/components/schemas/NAME`` (v3, wrapped in ``allOf`` when
the reference carries a description, as kube does) or ``#/definitions/NAME`` (v2),
``IntOrString`` and ``Quantity`` as ``oneOf`` their types (v3) or a string (v2), and no
``enum`` on ``apiVersion``/``kind`` (the JSON Schema conversion adds it). The extensions kube
publishes (``x-kubernetes-group-version-kind``, list types and map keys, patch strategies and
merge keys, map types, unions) are in the package's definitions and kept as they are.

`encode_v2` writes the v2 document as gnostic's ``openapi_v2.Document`` protobuf, which is what
kubectl asks ``/openapi/v2`` for (its client-side validation of a ``kind: List``).
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import orjson

from ..apiserver.builtin_fields import raw_definitions, shipped_releases

Obj = dict[str, Any]

_V3_PREFIX = "#/components/schemas/"
_V2_PREFIX = "#/definitions/"


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
    shipped = {_minor(name): name for name in shipped_releases()}
    below = [v for v in shipped if v <= want]
    return shipped[max(below) if below else min(shipped)]


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
    raw = raw_definitions(schema_version(server_version))
    prefix = _V3_PREFIX if v3 else _V2_PREFIX
    return {name: _definition(name, body, prefix, v3) for name, body in sorted(raw.items())}


@functools.cache
def _gvk_index(server_version: str) -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, body in raw_definitions(schema_version(server_version)).items():
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


_V2_CRD_KEYS = frozenset({"type", "format", "description", "required", "properties", "items",
                          "additionalProperties", "x-kubernetes-group-version-kind"})


def crd_schema_v2(schema: Any) -> Any:
    """A CustomResourceDefinition's ``openAPIV3Schema`` as kube publishes it in v2: the
    keywords v2 knows, with nodes that keep unknown fields or mix types reduced to what kubectl
    checks (an object of anything, or any value)."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("x-kubernetes-int-or-string") or any(k in schema for k in ("anyOf", "oneOf")):
        return {k: v for k, v in schema.items() if k == "description"}
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        out = {k: v for k, v in schema.items() if k in ("description", "type")}
        out.setdefault("type", "object")
        return out
    out = {}
    for key, value in schema.items():
        if key not in _V2_CRD_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: crd_schema_v2(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = crd_schema_v2(value) if isinstance(value, dict) else value
        else:
            out[key] = copy.deepcopy(value)
    return out


# --- gnostic openapi_v2 protobuf ---------------------------------------------------------------

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _field(number, text.encode())


def _any(value: Any) -> bytes:
    """gnostic's ``Any``: the value as YAML (JSON is YAML)."""
    return _string(2, orjson.dumps(value).decode())


def _schema_pb(schema: Obj) -> bytes:
    out = bytearray()
    if isinstance(schema.get("$ref"), str):
        out += _string(1, schema["$ref"])
    if isinstance(schema.get("format"), str):
        out += _string(2, schema["format"])
    if isinstance(schema.get("description"), str):
        out += _string(4, schema["description"])
    for name in schema.get("required") or []:
        out += _string(19, str(name))
    for value in schema.get("enum") or []:
        out += _field(20, _any(value))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out += _field(21, _field(1, _schema_pb(extra)))
    elif isinstance(extra, bool):
        out += _field(21, _varint(2 << 3) + _varint(int(extra)))
    kind = schema.get("type")
    if isinstance(kind, str):
        out += _field(22, _string(1, kind))
    items = schema.get("items")
    if isinstance(items, dict):
        out += _field(23, _field(1, _schema_pb(items)))
    for part in schema.get("allOf") or []:
        if isinstance(part, dict):
            out += _field(24, _schema_pb(part))
    props = schema.get("properties")
    if isinstance(props, dict):
        named = b"".join(_field(1, _string(1, name) + _field(2, _schema_pb(prop)))
                         for name, prop in props.items() if isinstance(prop, dict))
        out += _field(25, named)
    for key, value in schema.items():
        if key.startswith("x-"):
            out += _field(31, _string(1, key) + _field(2, _any(value)))
    return bytes(out)


def _named_pb(name: str, schema: Obj) -> bytes:
    return _field(1, _string(1, name) + _field(2, _schema_pb(schema)))


@functools.cache
def _builtin_pb(server_version: str, name: str) -> bytes:
    return _named_pb(name, definitions(server_version, False)[name])


def encode_v2(doc: Obj, server_version: str = "") -> bytes:
    """``doc`` (a Swagger 2.0 document) as gnostic's ``openapi_v2.Document``: swagger, info and
    definitions (kubectl reads only these; paths are in the JSON form). The definitions that
    are `definitions`' own (the same objects) of ``server_version`` are encoded once per
    process."""
    out = bytearray(_string(1, str(doc.get("swagger", "2.0"))))
    info = doc.get("info") or {}
    out += _field(2, _string(1, str(info.get("title", ""))) + _string(2, str(info.get("version",
                                                                                      ""))))
    builtin = definitions(server_version, False) if server_version else {}
    named = b"".join(_builtin_pb(server_version, name) if builtin.get(name) is schema
                     else _named_pb(name, schema)
                     for name, schema in (doc.get("definitions") or {}).items())
    out += _field(9, named)
    return bytes(out)
