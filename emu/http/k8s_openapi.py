"""The built-in kinds' OpenAPI as ``/openapi/v2`` needs it: a CustomResourceDefinition's schema
reduced to v2 (`crd_schema_v2`), and the Swagger 2.0 document as gnostic's
``openapi_v2.Document`` protobuf (`encode_v2`), which is what kubectl asks ``/openapi/v2`` for
(its client-side validation of a ``kind: List``). The schemas themselves come from
`emu.apiserver.k8s_schemas`.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import orjson

from ..apiserver.k8s_schemas import closure, definition_name, definitions, schema_version

__all__ = ["closure", "crd_schema_v2", "definition_name", "definitions", "encode_v2",
           "schema_version"]

Obj = dict[str, Any]


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
