"""Field sets, merge, removal and comparison of objects, as structured-merge-diff computes them.

Ports the behaviour of sigs.k8s.io/structured-merge-diff (``typed.ToFieldSet``, ``typed.Merge``,
``typed.RemoveItems``, ``typed.Compare``, ``fieldpath.Set.EnsureNamedFieldsAreMembers``) that
server-side apply (`emu.apiserver.ssa`) builds on, on plain dicts and lists.

A *path* is a tuple of steps written as FieldsV1 writes them: ``f:<field>`` for a map key,
``k:{"name":"c"}`` for an item of a list keyed by fields (key names sorted), ``v:<json>`` for an
item of a set list. A *field set* is a Python set of paths; each path is a member of the set
(FieldsV1 marks a member that also has children with ``"."``).

What a list is comes from a `ListTypes` resolver called with the field names leading to it (list
items skipped): ``("atomic", ())``, ``("set", ())`` or ``("map", keys)``; its ``atomic_map``
says which maps are one value (label selectors: ``+structType=atomic``, ``+mapType=atomic``).
Other maps are treated as structs whose keys are all named fields, which is what every built-in
map of scalars (labels, annotations, data, nodeSelector, resource quantities) behaves like.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import orjson

from .errors import BadRequest

Obj = dict[str, Any]
Path = tuple[str, ...]
Names = tuple[str, ...]
ListType = tuple[str, tuple[str, ...]]


class ListTypes(Protocol):
    """What a kind's lists and maps are, by the field names leading to them."""

    def __call__(self, names: Names) -> ListType: ...

    def atomic_map(self, names: Names) -> bool: ...


ATOMIC: ListType = ("atomic", ())
SET: ListType = ("set", ())

#: defaults of list-map key fields an item may omit (SMD reads them from the schema's defaults).
KEY_DEFAULTS: Mapping[str, Any] = {"protocol": "TCP"}

_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})

#: ``+listType=map`` lists of the built-in types, by field name (k8s.io/api markers and
#: patchMergeKeys, which kube's OpenAPI turns into associative lists).
BUILTIN_MAP_LISTS: Mapping[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "imagePullSecrets": ("name",),
    "resourceClaims": ("name",),
    "schedulingGates": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "hostAliases": ("ip",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
}


#: Maps and structs kube marks atomic, by field name: label selectors (``metav1.LabelSelector``
#: is ``+structType=atomic``, a Service's selector ``+mapType=atomic``).
BUILTIN_ATOMIC_MAPS = frozenset({"selector", "labelSelector", "namespaceSelector",
                                 "podSelector", "objectSelector"})


class _Builtin:
    """The built-in types' list and map types."""

    def __call__(self, names: Names) -> ListType:
        return builtin_list_type(names)

    def atomic_map(self, names: Names) -> bool:
        return bool(names) and names[-1] in BUILTIN_ATOMIC_MAPS


BUILTIN_TYPES: ListTypes = _Builtin()


def builtin_list_type(names: Names) -> ListType:
    """The list type of a built-in kind's list at ``names``; atomic unless kube marks it."""
    last = names[-1] if names else ""
    if last == "finalizers" and names == ("metadata", "finalizers"):
        return SET
    if last == "ports":
        if len(names) >= 2 and names[-2] in _CONTAINER_LISTS:
            return ("map", ("containerPort", "protocol"))
        if names == ("spec", "ports"):  # a Service's ports
            return ("map", ("port", "protocol"))
        return ATOMIC
    keys = BUILTIN_MAP_LISTS.get(last)
    return ("map", keys) if keys else ATOMIC


class _Schema:
    """List and map types from a CRD's structural schema (``x-kubernetes-list-type`` with
    ``x-kubernetes-list-map-keys``, ``x-kubernetes-map-type: atomic``; a list without a type is
    atomic, as in kube). Below a node the schema leaves open
    (``x-kubernetes-preserve-unknown-fields`` without properties: the embedded Pod templates of
    the built-in ray.io schemas) and in ``metadata`` the built-in types' apply."""

    def __init__(self, openapi: Obj | None) -> None:
        self.openapi = openapi
        self._lists: dict[Names, ListType] = {}
        self._maps: dict[Names, bool] = {}

    def __call__(self, names: Names) -> ListType:
        found = self._lists.get(names)
        if found is None:
            node = self._node(names)
            if isinstance(node, tuple):
                found = builtin_list_type(node)
            elif node is None:
                found = ATOMIC
            else:
                kind = node.get("x-kubernetes-list-type")
                found = SET if kind == "set" else ("map", tuple(
                    node.get("x-kubernetes-list-map-keys") or ())) if kind == "map" else ATOMIC
            self._lists[names] = found
        return found

    def atomic_map(self, names: Names) -> bool:
        found = self._maps.get(names)
        if found is None:
            node = self._node(names)
            if isinstance(node, tuple):
                found = BUILTIN_TYPES.atomic_map(node)
            else:
                found = node is not None and node.get("x-kubernetes-map-type") == "atomic"
            self._maps[names] = found
        return found

    def _node(self, names: Names) -> Obj | Names | None:
        """The schema node at ``names``; the names below an open node (to resolve as a
        built-in's); None when the schema does not declare the field."""
        node: Any = self.openapi
        for i, name in enumerate(names):
            if not isinstance(node, dict):
                return names
            if node.get("type") == "array" or "items" in node:
                node = node.get("items")
                if not isinstance(node, dict):
                    return names
            props = node.get("properties")
            if isinstance(props, dict) and name in props:
                node = props[name]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            elif i == 0 and name == "metadata":
                return names
            elif node.get("x-kubernetes-preserve-unknown-fields"):
                return names[i:]
            else:
                return None
        if isinstance(node, dict) and (node.get("type") == "array" or "items" in node):
            return node
        return node if isinstance(node, dict) else None


def schema_list_types(openapi: Obj | None) -> ListTypes:
    """The list and map types of a CRD's structural schema (`_Schema`)."""
    return _Schema(openapi)


# -- list items ------------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def item_step(item: Any, ltype: ListType, where: str) -> str:
    """The path element of a list item: ``k:{...}`` (keyed) or ``v:<json>`` (set)."""
    if ltype[0] == "set":
        return "v:" + _json(item)
    if not isinstance(item, dict):
        raise BadRequest(f"{where}: associative list with keys has an element that is not a "
                         f"map: {_json(item)}")
    key: Obj = {}
    for name in sorted(ltype[1]):
        if name in item:
            key[name] = item[name]
        elif name in KEY_DEFAULTS:
            key[name] = KEY_DEFAULTS[name]
        else:
            raise BadRequest(f"{where}: associative list with keys has an element that omits "
                             f'key field "{name}" (and doesn\'t have default value)')
    return "k:" + _json(key)


def _index(items: list[Any], ltype: ListType, where: str) -> list[str]:
    return [item_step(item, ltype, where) for item in items]


def _where(names: Names) -> str:
    return "." + ".".join(names)


# -- field sets -------------------------------------------------------------------------------------


def to_field_set(obj: Obj, types: ListTypes) -> set[Path]:
    """``ToFieldSet``: leaves, atomic lists, null and empty-map fields, and list items (with
    their leaves)."""
    out: set[Path] = set()

    def walk_map(value: Obj, path: Path, names: Names) -> None:
        for key, child in value.items():
            child_path = (*path, "f:" + key)
            walk(child, child_path, (*names, key))
            if child is None or (isinstance(child, dict) and not child):
                out.add(child_path)

    def walk(value: Any, path: Path, names: Names) -> None:
        if isinstance(value, dict):
            if types.atomic_map(names):
                out.add(path)
            else:
                walk_map(value, path, names)
        elif isinstance(value, list):
            ltype = types(names)
            if ltype[0] == "atomic":
                out.add(path)
                return
            steps = _index(value, ltype, _where(names))
            seen: set[str] = set()
            for step, item in zip(steps, value, strict=True):
                if step in seen:
                    continue
                seen.add(step)
                item_path = (*path, step)
                out.add(item_path)
                if isinstance(item, dict):
                    walk_map(item, item_path, names)
        elif value is not None:
            out.add(path)

    walk_map(obj, (), ())
    return out


def every_node(obj: Any, types: ListTypes) -> set[Path]:
    """``EnsureNamedFieldsAreMembers(ToFieldSet(obj))``: every field and list item below the
    root, atomic lists as one leaf."""
    out: set[Path] = set()

    def walk(value: Any, path: Path, names: Names) -> None:
        if isinstance(value, dict):
            if names and types.atomic_map(names):
                return
            for key, child in value.items():
                child_path = (*path, "f:" + key)
                out.add(child_path)
                walk(child, child_path, (*names, key))
        elif isinstance(value, list) and value:
            ltype = types(names)
            if ltype[0] == "atomic":
                return
            for step, item in zip(_index(value, ltype, _where(names)), value, strict=True):
                out.add((*path, step))
                if isinstance(item, dict):
                    walk(item, (*path, step), names)

    walk(obj, (), ())
    return out


def ensure_fields(paths: Iterable[Path]) -> set[Path]:
    """``EnsureNamedFieldsAreMembers``: each path's ancestors that are fields become members."""
    out: set[Path] = set()
    for path in paths:
        out.add(path)
        for end in range(1, len(path)):
            if path[end - 1].startswith("f:"):
                out.add(path[:end])
    return out


def _trie(paths: Iterable[Path]) -> Obj:
    """Paths as nested dicts; ``None`` under a step marks that step's path as a member."""
    root: Obj = {}
    for path in paths:
        node = root
        for step in path:
            node = node.setdefault(step, {})
        node[None] = True  # type: ignore[index]
    return root


def to_fields_v1(paths: Iterable[Path]) -> Obj:
    """FieldsV1: nested steps, ``"."`` for a member that has children, sorted as kube writes
    them (fields, then keys, then values)."""
    def render(node: Obj) -> Obj:
        out: Obj = {}
        if node.get(None) and len(node) > 1:  # type: ignore[call-overload]
            out["."] = {}
        for step in sorted(s for s in node if s is not None):
            out[step] = render(node[step])
        return out

    return render(_trie(paths))


def from_fields_v1(doc: Any) -> set[Path]:
    out: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, dict) or not node:
            if path:
                out.add(path)
            return
        for key, child in node.items():
            if key == ".":
                out.add(path)
            else:
                walk(child, (*path, key))

    walk(doc, ())
    return out


# -- merge -------------------------------------------------------------------------------------------


def merge(live: Any, config: Any, types: ListTypes, names: Names = ()) -> Any:
    """``Merge``: ``config`` over ``live``; maps merge key by key, set and keyed lists item by
    item (config's order for the items it names, live-only items kept where they were), atomic
    lists and scalars are replaced; empty or null on both sides stays as config has it."""
    if isinstance(config, dict) and isinstance(live, dict):
        if not config:
            return live if live else config
        if names and types.atomic_map(names):
            return config
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live[key], value, types, (*names, key)) if key in live else value
        return out
    if isinstance(config, list) and isinstance(live, list) and (config or live):
        ltype = types(names)
        if ltype[0] == "atomic":
            return config
        return _merge_items(live, config, ltype, types, names)
    return config


def _merge_items(live: list[Any], config: list[Any], ltype: ListType, types: ListTypes,
                 names: Names) -> list[Any]:
    where = _where(names)
    lsteps, rsteps = _index(live, ltype, where), _index(config, ltype, where)
    lby: dict[str, Any] = {}
    for step, item in zip(lsteps, live, strict=True):
        lby.setdefault(step, item)
    rby: dict[str, Any] = {}
    for step, item in zip(rsteps, config, strict=True):
        if step in rby:
            raise BadRequest(f"{where}: duplicate entries for key {step[2:]}")
        rby[step] = item

    def merged(step: str) -> Any:
        if step in lby and ltype[0] == "map":
            return merge(lby[step], rby[step], types, names)
        return rby[step]

    # Items config names come in config's order; an item only live has stays after the item it
    # followed. Walk both lists: a shared item that is not the next one config expects waits
    # for its turn in config's order.
    shared = [s for s in rsteps if s in lby]
    out: list[Any] = []
    done: set[str] = set()
    li = ri = 0
    while li < len(lsteps) or ri < len(rsteps):
        if li < len(lsteps):
            step = lsteps[li]
            if step not in rby:
                out.append(live[li])
                li += 1
                continue
            if step in done:
                li += 1
                continue
            if ri < len(rsteps) and rsteps[ri] == step:
                out.append(merged(step))
                done.add(step)
                li += 1
                ri += 1
                if shared and shared[0] == step:
                    shared.pop(0)
                continue
            if shared and shared[0] != step:
                li += 1  # its place is later, in config's order
                continue
        if ri < len(rsteps):
            step = rsteps[ri]
            ri += 1
            if step not in done:
                out.append(merged(step))
                done.add(step)
                if shared and shared[0] == step:
                    shared.pop(0)
        elif li < len(lsteps):
            li += 1
    return out


# -- removal -----------------------------------------------------------------------------------------

_GONE: Any = object()


def remove_items(value: Any, paths: Iterable[Path], types: ListTypes) -> Any:
    """``RemoveItems``: ``value`` without the fields and list items at ``paths`` (a map or list
    emptied by the removal goes too)."""
    trie = _trie(paths)
    if not trie:
        return value
    out = _remove(value, trie, types, ())
    return {} if out is _GONE else out


def _remove(value: Any, trie: Obj, types: ListTypes, names: Names) -> Any:
    if isinstance(value, dict):
        if not value or (names and types.atomic_map(names)):
            return value
        out: Obj = {}
        for key, child in value.items():
            sub = trie.get("f:" + key)
            if sub is None:
                out[key] = child
            elif sub.get(None):
                continue
            else:
                kept = _remove(child, sub, types, (*names, key))
                if kept is not _GONE:
                    out[key] = kept
        return out if out else _GONE
    if isinstance(value, list):
        if not value:
            return value
        ltype = types(names)
        if ltype[0] == "atomic":
            return value
        items = []
        for step, item in zip(_index(value, ltype, _where(names)), value, strict=True):
            sub = trie.get(step)
            if sub is None:
                items.append(item)
            elif not sub.get(None):
                kept = _remove(item, sub, types, names)
                if kept is not _GONE:
                    items.append(kept)
        return items if items else _GONE
    return value


# -- compare -----------------------------------------------------------------------------------------


def compare(lhs: Any, rhs: Any, types: ListTypes) -> tuple[set[Path], set[Path], set[Path]]:
    """``Compare``: the leaves (scalars, atomic lists, empty maps and lists) added, modified
    and removed from ``lhs`` to ``rhs``."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()

    def leaf(left: Any, right: Any, path: Path) -> None:
        if left is _GONE:
            added.add(path)
        elif right is _GONE:
            removed.add(path)
        elif left != right:
            modified.add(path)

    def walk(left: Any, right: Any, path: Path, names: Names) -> None:
        lmap = left if isinstance(left, dict) else None
        rmap = right if isinstance(right, dict) else None
        if (lmap is not None or rmap is not None) and (lmap or rmap) and not (
                names and types.atomic_map(names)):
            if (lmap is None and left is not _GONE) or (rmap is None and right is not _GONE):
                leaf(left, right, path)
                return
            lm, rm = lmap or {}, rmap or {}
            for key in (*lm, *(k for k in rm if k not in lm)):
                walk(lm.get(key, _GONE), rm.get(key, _GONE), (*path, "f:" + key),
                     (*names, key))
            return
        llist = left if isinstance(left, list) else None
        rlist = right if isinstance(right, list) else None
        if (llist or rlist) and (llist is not None or left is _GONE) and \
                (rlist is not None or right is _GONE):
            ltype = types(names)
            if ltype[0] != "atomic":
                where = _where(names)
                lby: dict[str, Any] = {}
                for step, item in zip(_index(llist or [], ltype, where), llist or [],
                                      strict=True):
                    lby.setdefault(step, item)
                rby: dict[str, Any] = {}
                for step, item in zip(_index(rlist or [], ltype, where), rlist or [],
                                      strict=True):
                    rby.setdefault(step, item)
                for step in (*lby, *(s for s in rby if s not in lby)):
                    item_path = (*path, step)
                    lit, rit = lby.get(step, _GONE), rby.get(step, _GONE)
                    if ltype[0] == "set":
                        leaf(lit, rit, item_path)
                    else:
                        walk(lit, rit, item_path, names)
                return
        leaf(left, right, path)

    walk(lhs, rhs, (), ())
    return added, modified, removed


def dotted(path: Path) -> str:
    """A path as SMD prints it: ``.spec.containers[name="c"].image``, ``[=value]`` for a set
    item."""
    out = []
    for step in path:
        if step.startswith("f:"):
            out.append("." + step[2:])
        elif step.startswith("k:"):
            key = orjson.loads(step[2:])
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in key.items()) + "]")
        elif step.startswith("v:"):
            out.append(f"[={step[2:]}]")
    return "".join(out)
