"""The fields a built-in kind declares, from Kubernetes' own schemas: what kube-apiserver's
strict decoder (``fieldValidation``) finds unknown in a body of a built-in kind, at any depth.

kube-apiserver decodes a built-in kind's body into its Go struct with sigs.k8s.io/json's
``UnmarshalStrict``: a key no struct field declares is dropped, and reported as ``unknown
field "spec.template.spec.containers[0].imagePullPolicyy"`` (the path of the key, array indices
in brackets, in document order), which ``Strict`` refuses with a 400 and ``Warn`` and ``Ignore``
only drop. `unknown_fields` names them; `pruned` drops them.

The declared fields come from the ``kubernetes-validate`` package's definitions (kube-apiserver's
OpenAPI document converted to JSON Schema), read as data: the NEWEST release the package ships
that has the kind, not the release the server reports, because the emulator supports fields
newer than its reported release (``containers[].restartPolicyRules``, 1.34, which KubeRay's
``SidecarSubmitterRestart`` sets on its submitter); a field only a newer release declares is
therefore accepted (docs/deviations.md). A kind the package does not know (a custom resource,
the Gateway API's kinds) has nothing unknown here.

Each kind's schema is compiled once per process into a tree of `_Node`s (the ``$ref``s
resolved, leaves and open nodes collapsed away), and a body is first checked without building
any path (`_clean`: set inclusions of its keys); paths are built only for a body that has an
unknown field.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

import orjson

Obj = dict[str, Any]

_PACKAGE = "kubernetes_validate"
_REF = "#/$defs/"


class _Node:
    """A compiled schema node: an object's declared fields (``keys``, and ``kids``: the ones
    with anything below them to check), a map's values (``extra``) or a list's items
    (``items``). A node with none of them accepts anything (a leaf, an open object)."""

    __slots__ = ("extra", "items", "keys", "kid_items", "kids")

    def __init__(self) -> None:
        self.keys: frozenset[str] | None = None
        self.kids: dict[str, _Node] = {}
        #: ``kids``' items, to look up in a body (a body has more fields than kids)
        self.kid_items: tuple[tuple[str, _Node], ...] = ()
        self.extra: _Node | None = None
        self.items: _Node | None = None


#: Every leaf and open node (a string, an int-or-string, a RawExtension ...).
_LEAF = _Node()


def _schema_root() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("checking a built-in kind's fields needs the kubernetes-validate "
                           "package (pip install 'kubernetes-validate>=1.37')")
    return Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"


@functools.cache
def shipped_releases() -> tuple[str, ...]:
    """The shipped releases' folders, newest first (``v1.37.0-local``); also what
    `emu.http.k8s_openapi` serves from."""
    found: list[tuple[tuple[int, int], str]] = []
    for entry in _schema_root().iterdir():
        match = re.fullmatch(r"v(\d+)\.(\d+)\.0-local", entry.name)
        if match is not None:
            found.append(((int(match.group(1)), int(match.group(2))), entry.name))
    if not found:
        raise RuntimeError(f"kubernetes-validate ships no schemas under {_schema_root()}")
    return tuple(name for _, name in sorted(found, reverse=True))


@functools.cache
def raw_definitions(folder: str) -> dict[str, Obj]:
    """A release's ``$defs`` as shipped, cached and shared: never changed in place."""
    data = orjson.loads((_schema_root() / folder / "_definitions.json").read_bytes())
    defs = data.get("$defs")
    if not isinstance(defs, dict):
        raise RuntimeError(f"{folder}/_definitions.json has no $defs")
    return defs


@functools.cache
def _kinds(folder: str) -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, body in raw_definitions(folder).items():
        for gvk in body.get("x-kubernetes-group-version-kind") or ():
            key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
            # a kind listed under meta's names too (DeleteOptions) keeps its group's definition
            if key not in out or name.startswith("io.k8s.api."):
                out[key] = name
    return out


class _Compiler:
    """Compiles one release's definitions into `_Node`s, each definition once (the ones that
    refer to themselves, JSONSchemaProps, through the node being filled)."""

    def __init__(self, defs: dict[str, Obj]) -> None:
        self.defs = defs
        self.done: dict[str, _Node] = {}

    def definition(self, name: str) -> _Node:
        node = self.done.get(name)
        if node is None:
            raw = self.defs.get(name)
            if not isinstance(raw, dict) or not _structured(raw):
                node = _LEAF
                self.done[name] = node
            else:
                node = _Node()
                self.done[name] = node  # before filling: a definition may refer to itself
                self._fill(node, raw)
                if _empty(node):  # a map of strings, a list of leaves: nothing below to check
                    node = self.done[name] = _LEAF
        return node

    def node(self, raw: Any) -> _Node:
        if not isinstance(raw, dict):
            return _LEAF
        ref = raw.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            return self.definition(ref[len(_REF):])
        parts = raw.get("allOf")
        if isinstance(parts, list) and len(parts) == 1 and "properties" not in raw:
            return self.node(parts[0])
        if not _structured(raw):
            return _LEAF
        node = _Node()
        self._fill(node, raw)
        return _LEAF if _empty(node) else node

    def _fill(self, node: _Node, raw: Obj) -> None:
        props = raw.get("properties")
        if isinstance(props, dict):
            node.keys = frozenset(props)
            for key, sub in props.items():
                kid = self.node(sub)
                if kid is not _LEAF:
                    node.kids[key] = kid
            node.kid_items = tuple(node.kids.items())
            return
        extra = raw.get("additionalProperties")
        if isinstance(extra, dict):
            kid = self.node(extra)
            node.extra = None if kid is _LEAF else kid
        items = raw.get("items")
        if isinstance(items, dict):
            kid = self.node(items)
            node.items = None if kid is _LEAF else kid


def _empty(node: _Node) -> bool:
    return node.keys is None and node.extra is None and node.items is None


def _structured(raw: Obj) -> bool:
    """A schema node with fields to check below it (not a leaf, an int-or-string, a node that
    keeps unknown fields)."""
    if raw.get("x-kubernetes-preserve-unknown-fields") or "oneOf" in raw or "anyOf" in raw:
        return False
    return isinstance(raw.get("properties"), dict) or \
        isinstance(raw.get("additionalProperties"), dict) or isinstance(raw.get("items"), dict)


@functools.cache
def _compiler(folder: str) -> _Compiler:
    return _Compiler(raw_definitions(folder))


@functools.cache
def kind_node(group: str, version: str, kind: str) -> _Node | None:
    """The compiled schema of a built-in kind, from the newest shipped release that has it;
    None when none has (a custom resource's kind)."""
    for folder in shipped_releases():
        name = _kinds(folder).get((group, version, kind))
        if name is not None:
            node = _compiler(folder).definition(name)
            return None if node is _LEAF else node
    return None


def release_of(group: str, version: str, kind: str) -> str | None:
    """The shipped release (``v1.37.0-local``) whose schema `kind_node` uses."""
    for folder in shipped_releases():
        if (group, version, kind) in _kinds(folder):
            return folder
    return None


# -- walking a body --------------------------------------------------------------------------------

def _clean(node: _Node, value: Any) -> bool:
    """Whether ``value`` has no field ``node`` does not declare (builds no path)."""
    if type(value) is dict:
        keys = node.keys
        if keys is not None:
            if not keys.issuperset(value):
                return False
            for key, kid in node.kid_items:
                item = value.get(key)
                if item is not None and not _clean(kid, item):
                    return False
            return True
        extra = node.extra
        if extra is not None:
            for item in value.values():
                if item is not None and not _clean(extra, item):
                    return False
        return True
    if type(value) is list:
        items = node.items
        if items is not None:
            for item in value:
                if item is not None and not _clean(items, item):
                    return False
    return True


def _path(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _collect(node: _Node, value: Any, parts: list[Any], out: list[str]) -> None:
    if type(value) is dict:
        keys = node.keys
        if keys is not None:
            kids = node.kids
            for key, item in value.items():
                if key not in keys:
                    out.append(_path([*parts, key]))
                    continue
                kid = kids.get(key)
                if kid is not None and item is not None:
                    _collect(kid, item, [*parts, key], out)
        elif node.extra is not None:
            for key, item in value.items():
                if item is not None:
                    _collect(node.extra, item, [*parts, key], out)
    elif type(value) is list and node.items is not None:
        for i, item in enumerate(value):
            if item is not None:
                _collect(node.items, item, [*parts, i], out)


def unknown_fields(node: _Node, obj: Obj, old: Obj | None = None) -> list[str]:
    """The fields of ``obj`` (a whole body, or ``{"status": ...}``) that the kind's schema
    ``node`` does not declare, as kube's strict decoder names them, in document order; ``[]``
    for a body without any (the common case, checked without building a path). ``old``: the
    stored object an update replaces, whose top-level values the body repeats unchanged need
    no walk (it holds no unknown field: it was stored)."""
    if old is None:
        if _clean(node, obj):
            return []
    else:
        keys = node.keys
        if keys is not None and keys.issuperset(obj):
            for key, kid in node.kid_items:
                item = obj.get(key)
                if item is not None and item != old.get(key) and not _clean(kid, item):
                    break
            else:
                return []
    out: list[str] = []
    _collect(node, obj, [], out)
    return out


def _prune(node: _Node, value: Any) -> Any:
    """``value`` less the fields ``node`` does not declare: a copy along the changed paths
    only (what is unchanged is shared)."""
    if type(value) is dict:
        keys = node.keys
        if keys is not None:
            out: Obj = {}
            kids = node.kids
            for key, item in value.items():
                if key not in keys:
                    continue
                kid = kids.get(key)
                out[key] = item if kid is None or item is None or _clean(kid, item) \
                    else _prune(kid, item)
            return out
        extra = node.extra
        if extra is not None:
            return {k: item if item is None or _clean(extra, item) else _prune(extra, item)
                    for k, item in value.items()}
        return value
    if type(value) is list and node.items is not None:
        items = node.items
        return [item if item is None or _clean(items, item) else _prune(items, item)
                for item in value]
    return value


def prune_nested(node: _Node, obj: Obj) -> None:
    """Drop (in place, at ``obj``'s top level; the values below are copied where they change,
    never changed) the fields below ``obj``'s top-level fields that the kind's schema does not
    declare, as decoding into the Go struct drops them. ``apiVersion``, ``kind`` and
    ``metadata``'s own fields and the top-level fields are left to the caller."""
    kids = node.kids
    for key in list(obj):
        if key == "metadata":
            continue
        kid = kids.get(key)
        item = obj[key]
        if kid is not None and item is not None and not _clean(kid, item):
            obj[key] = _prune(kid, item)
