"""Decoding the few protobuf bodies kubectl's typed generators send.

``kubectl create namespace|configmap|secret|serviceaccount`` build typed objects and send them as
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0`` and a ``runtime.Unknown`` envelope
(``typeMeta``, ``raw``) around the object's own message. This module reads that wire format for
those four kinds (field numbers from k8s.io/api ``generated.proto``) into the JSON-shaped dict the
API server takes. Other kinds in protobuf get 415, as before; responses are always JSON, which
client-go accepts.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from ..apiserver.errors import BadRequest, UnsupportedMediaType

MAGIC = b"k8s\x00"
Obj = dict[str, Any]
Fields = dict[int, list[Any]]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise BadRequest("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise BadRequest("protobuf varint too long")


def fields(data: bytes) -> Fields:
    """Field number → its values in order (varints as int, length-delimited as bytes)."""
    out: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise BadRequest("truncated protobuf field")
            value, pos = data[pos:pos + size], pos + size
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise BadRequest(f"unsupported protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _str(f: Fields, n: int) -> str | None:
    values = f.get(n)
    return values[-1].decode() if values else None


def _map(f: Fields, n: int, as_bytes: bool = False) -> dict[str, str] | None:
    if n not in f:
        return None
    out: dict[str, str] = {}
    for entry in f[n]:
        kv = fields(entry)
        key = _str(kv, 1) or ""
        raw = kv.get(2, [b""])[-1]
        out[key] = base64.b64encode(raw).decode() if as_bytes else raw.decode()
    return out


def _meta(data: bytes) -> Obj:
    f = fields(data)
    meta: Obj = {}
    for n, name in ((1, "name"), (2, "generateName"), (3, "namespace"), (5, "uid"),
                    (6, "resourceVersion")):
        value = _str(f, n)
        if value:
            meta[name] = value
    for n, name in ((11, "labels"), (12, "annotations")):
        found = _map(f, n)
        if found:
            meta[name] = found
    if 14 in f:
        meta["finalizers"] = [v.decode() for v in f[14]]
    refs = []
    for raw in f.get(13, []):
        rf = fields(raw)
        ref: Obj = {"apiVersion": _str(rf, 5) or "", "kind": _str(rf, 1) or "",
                    "name": _str(rf, 3) or "", "uid": _str(rf, 4) or ""}
        if 6 in rf:
            ref["controller"] = bool(rf[6][-1])
        if 7 in rf:
            ref["blockOwnerDeletion"] = bool(rf[7][-1])
        refs.append(ref)
    if refs:
        meta["ownerReferences"] = refs
    return meta


def _namespace(f: Fields, obj: Obj) -> None:
    if 2 in f:
        spec = fields(f[2][-1])
        if 1 in spec:
            obj["spec"] = {"finalizers": [v.decode() for v in spec[1]]}


def _configmap(f: Fields, obj: Obj) -> None:
    data, binary = _map(f, 2), _map(f, 3, as_bytes=True)
    if data is not None:
        obj["data"] = data
    if binary is not None:
        obj["binaryData"] = binary
    if 4 in f:
        obj["immutable"] = bool(f[4][-1])


def _secret(f: Fields, obj: Obj) -> None:
    data = _map(f, 2, as_bytes=True)
    if data is not None:
        obj["data"] = data
    kind = _str(f, 3)
    if kind:
        obj["type"] = kind
    string_data = _map(f, 4)
    if string_data is not None:
        obj["stringData"] = string_data
    if 5 in f:
        obj["immutable"] = bool(f[5][-1])


def _service_account(f: Fields, obj: Obj) -> None:
    if 4 in f:
        obj["automountServiceAccountToken"] = bool(f[4][-1])


KINDS: dict[tuple[str, str], Callable[[Fields, Obj], None]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "ServiceAccount"): _service_account,
}


def decode(body: bytes) -> Obj:
    """The object in a Kubernetes protobuf body; 415 for a kind this module does not read."""
    if not body.startswith(MAGIC):
        raise BadRequest("a protobuf body must start with the Kubernetes magic number")
    envelope = fields(body[len(MAGIC):])
    type_meta = fields(envelope.get(1, [b""])[-1])
    api_version, kind = _str(type_meta, 1) or "", _str(type_meta, 2) or ""
    reader = KINDS.get((api_version, kind))
    if reader is None:
        raise UnsupportedMediaType(
            f"the body of the request was in protobuf, which this server reads only for "
            f"{', '.join(k for _, k in KINDS)}; {api_version} {kind} must be sent as JSON "
            "(kubectl apply -f; Go clients: ContentType application/json on the rest.Config)")
    raw = fields(envelope.get(2, [b""])[-1])
    obj: Obj = {"apiVersion": api_version, "kind": kind,
                "metadata": _meta(raw[1][-1]) if 1 in raw else {}}
    reader(raw, obj)
    return obj
