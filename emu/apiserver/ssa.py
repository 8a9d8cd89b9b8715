"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml``, field managers and conflicts.

What kube-apiserver does (k8s.io/apiserver ``fieldmanager``, structured-merge-diff), reduced to
what a client can observe:

- the applied configuration is a partial object; the fields it sets form the manager's *field
  set*, recorded in ``metadata.managedFields`` as ``FieldsV1`` (``f:<key>`` for map keys,
  ``k:{"name":..}`` for items of keyed lists, ``.`` for the item itself) with ``operation:
  Apply``;
- applying sets those fields; a field the same manager applied before and no longer sets is
  removed, unless another manager also owns it;
- setting a field another manager owns to a *different* value is a 409 ``Conflict`` listing each
  field (``Apply failed with N conflict(s): conflict with "m": .data.k``), unless ``force`` is
  given, which takes the field away from the other manager; setting it to the same value shares
  ownership;
- applying to an object that does not exist creates it.

Differences from kube (also in docs/deviations.md): lists of objects whose items all have a
``name`` are keyed by ``name`` (kube reads ``x-kubernetes-list-map-keys`` from the schema, which is
``name`` for containers, env, volumes and ports of the Pod template and most KubeRay lists); other
lists are atomic. Only Apply operations are tracked: ordinary writes (create, update, patch) keep
``managedFields`` as they are instead of adding ``Update`` entries, so they never cause apply
conflicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import yaml

from .errors import ApiError, BadRequest, NotFound, StatusCause
from .kinds import KindInfo

if TYPE_CHECKING:
    from .server import APIServer

Obj = dict[str, Any]
Path = tuple[str, ...]

#: metadata fields the server owns or that name the object: never part of a field set.
_UNMANAGED_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation",
                             "creationTimestamp", "deletionTimestamp",
                             "deletionGracePeriodSeconds", "managedFields", "selfLink"})
_MISSING: Any = object()


def decode_applied(patch: Any) -> Obj:
    """The applied configuration: a dict, or YAML/JSON text or bytes."""
    if isinstance(patch, (bytes, bytearray)):
        patch = bytes(patch).decode()
    if isinstance(patch, str):
        try:
            patch = yaml.safe_load(patch)
        except yaml.YAMLError as exc:
            raise BadRequest(f"error decoding YAML: {exc}") from None
    if not isinstance(patch, dict):
        raise BadRequest("an apply patch must be an object (YAML or JSON), not "
                         f"{type(patch).__name__}")
    return patch


def _item_key(item: Any) -> str | None:
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return "k:" + orjson.dumps({"name": item["name"]}).decode()
    return None


def _keyed(items: list[Any]) -> bool:
    return bool(items) and all(_item_key(i) is not None for i in items)


def field_set(obj: Obj) -> set[Path]:
    """Every path the applied object sets (leaves, keyed-list items and their ``.``)."""
    out: set[Path] = set()

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, dict) and value:
            for key, child in value.items():
                if len(path) == 1 and path[0] == "f:metadata" and key in _UNMANAGED_META:
                    continue
                walk(child, (*path, f"f:{key}"))
        elif isinstance(value, list) and _keyed(value):
            for item in value:
                key = _item_key(item)
                assert key is not None
                item_path = (*path, key)
                out.add((*item_path, "."))
                walk({k: v for k, v in item.items()}, item_path)
        else:
            out.add(path)

    for key, child in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        walk(child, (f"f:{key}",))
    return out


def to_fields_v1(paths: set[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for step in path:
            node = node.setdefault(step, {})
    return root


def from_fields_v1(doc: Any) -> set[Path]:
    out: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, dict) or not node:
            if path:
                out.add(path)
            return
        for key, child in node.items():
            if key == ".":
                out.add((*path, "."))
            else:
                walk(child, (*path, key))

    walk(doc, ())
    return out


def value_at(obj: Any, path: Path) -> Any:
    cur = obj
    for step in path:
        if step == ".":
            return cur
        if step.startswith("f:"):
            if not isinstance(cur, dict) or step[2:] not in cur:
                return _MISSING
            cur = cur[step[2:]]
        elif step.startswith("k:"):
            if not isinstance(cur, list):
                return _MISSING
            cur = next((i for i in cur if _item_key(i) == step), _MISSING)
            if cur is _MISSING:
                return _MISSING
        else:
            return _MISSING
    return cur


def _merge(live: Any, applied: Any) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for key, value in applied.items():
            out[key] = _merge(live.get(key, _MISSING), value) if key in live else value
        return out
    if isinstance(live, list) and isinstance(applied, list) and _keyed(applied) \
            and all(_item_key(i) is not None for i in live):
        by_key = {_item_key(i): i for i in applied}
        out_list = []
        for item in live:
            key = _item_key(item)
            out_list.append(_merge(item, by_key.pop(key)) if key in by_key else item)
        out_list.extend(by_key.values())
        return out_list
    return applied


def _remove(obj: Any, path: Path) -> None:
    """Remove the field at ``path`` (and an emptied keyed-list item)."""
    if not path:
        return
    *parents, last = path
    if last == ".":
        if not parents:
            return
        *grand, item = parents
        container = value_at(obj, tuple(grand))
        if isinstance(container, list):
            container[:] = [i for i in container if _item_key(i) != item]
        return
    parent = value_at(obj, tuple(parents))
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)


def _entries(meta: Obj) -> list[Obj]:
    found = meta.get("managedFields")
    return [dict(e) for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def _dotted(path: Path) -> str:
    return "".join("." + s[2:] if s.startswith("f:") else f"[{s[2:]}]" if s.startswith("k:")
                   else "" for s in path)


def apply_conflict(info: KindInfo, name: str, conflicts: list[tuple[str, Path]]) -> ApiError:
    """kube's message: one conflict inline, several as a list."""
    lines = [f'conflict with "{m}" using {info.api_version}: {_dotted(p)}' for m, p in conflicts]
    if len(lines) == 1:
        message = f"Apply failed with 1 conflict: {lines[0]}"
    else:
        message = f"Apply failed with {len(lines)} conflicts:\n" + \
            "\n".join(f"- {line}" for line in lines)
    causes = [StatusCause("FieldManagerConflict", f'conflict with "{m}" using '
                          f"{info.api_version}", _dotted(p)).to_dict() for m, p in conflicts]
    return ApiError.from_status({"code": 409, "reason": "Conflict", "message": message,
                                 "details": {"name": name, "group": info.group,
                                             "kind": info.plural, "causes": causes}})


def merge_applied(info: KindInfo, live: Obj, applied: Obj, manager: str, force: bool,
                  now: str) -> Obj:
    """The object after ``manager`` applies ``applied`` to ``live``: merged fields, removed
    fields, and ``managedFields`` updated; `Conflict` when another manager owns a field being
    changed (and ``force`` is not set)."""
    mine = field_set(applied)
    meta = live.get("metadata") or {}
    entries = _entries(meta)
    conflicts: list[tuple[str, Path]] = []
    others: list[tuple[Obj, set[Path]]] = []
    my_index = len(entries)
    previous: set[Path] = set()
    previous_time = None
    for entry in entries:
        owned = from_fields_v1(entry.get("fieldsV1"))
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            previous, previous_time = owned, entry.get("time")
            my_index = len(others)
            continue
        others.append((entry, owned))
        for path in sorted(mine & owned):
            if path[-1] == ".":
                continue
            if value_at(live, path) != value_at(applied, path):
                conflicts.append((str(entry.get("manager", "")), path))
    if conflicts and not force:
        raise apply_conflict(info, str(meta.get("name", "")), conflicts)
    taken = {p for _, p in conflicts}
    merged: Obj = _merge(live, {k: v for k, v in applied.items()
                               if k not in ("apiVersion", "kind")})
    still_owned: set[Path] = set()
    new_entries: list[Obj] = []
    before = 0  # where this manager's entry goes: its old place among the kept entries
    for index, (entry, owned) in enumerate(others):
        owned = owned - taken
        still_owned |= owned
        if index < my_index:
            before += 1 if owned else 0
        if owned:
            entry["fieldsV1"] = to_fields_v1(owned)
            new_entries.append(entry)
    for path in sorted(previous - mine - still_owned, key=lambda p: (-len(p), p)):
        _remove(merged, path)
    # An apply that changes nothing keeps its entry's time, so the write is a no-op (no new
    # resourceVersion), as in kube.
    unchanged = previous == mine and previous_time is not None and not taken and merged == live
    mine_entry = {"manager": manager, "operation": "Apply", "apiVersion": info.api_version,
                  "time": previous_time if unchanged else now, "fieldsType": "FieldsV1",
                  "fieldsV1": to_fields_v1(mine)}
    new_entries.insert(before, mine_entry)
    merged_meta = dict(merged.get("metadata") or {})
    merged_meta["managedFields"] = new_entries
    for key in ("name", "namespace", "uid", "resourceVersion"):
        if key in meta:
            merged_meta[key] = meta[key]
    merged["metadata"] = merged_meta
    return merged


def server_side_apply(api: APIServer, info: KindInfo, ns: str, name: str, patch: Any, *,
                      field_manager: str | None, force: bool, subresource: str | None,
                      caller: str, dry_run: bool, field_validation: str | None = None) -> Obj:
    """``PATCH ...?fieldManager=M[&force=true]`` with an apply patch: create or merge."""
    if not field_manager:
        raise BadRequest("PATCH /apply requests require a non-empty fieldManager")
    applied = decode_applied(patch)
    if applied.get("kind") not in (None, info.kind) or \
            applied.get("apiVersion") not in (None, info.api_version):
        raise BadRequest(f"the applied object's kind and apiVersion "
                         f"({applied.get('apiVersion')}, {applied.get('kind')}) do not match "
                         f"the request ({info.api_version}, {info.kind})")
    ameta = applied.get("metadata")
    if ameta is not None and not isinstance(ameta, dict):
        raise BadRequest("metadata of an applied object must be an object")
    ameta = dict(ameta or {})
    if ameta.get("name") not in (None, name):
        raise BadRequest(f"the name of the object ({ameta.get('name')}) does not match the "
                         f"name on the URL ({name})")
    if info.namespaced and ameta.get("namespace") not in (None, ns):
        raise BadRequest("the namespace of the provided object does not match the namespace "
                         "sent on the request")
    applied = {**applied, "apiVersion": info.api_version, "kind": info.kind,
               "metadata": {**ameta, "name": name}}
    now = api._now()
    try:
        live = api.get(info.kind, name, ns, api_version=info.api_version)
    except NotFound:
        if subresource:
            raise
        obj = merge_applied(info, {"metadata": {"name": name}}, applied, field_manager, force,
                            now)
        obj["apiVersion"], obj["kind"] = info.api_version, info.kind
        if info.namespaced:
            obj["metadata"]["namespace"] = ns
        return api.create(obj, caller=caller, dry_run=dry_run, namespace=ns,
                          field_validation=field_validation)
    want_rv = ameta.get("resourceVersion")
    merged = merge_applied(info, live, applied, field_manager, force, now)
    merged["metadata"]["resourceVersion"] = str(want_rv) if want_rv else live["metadata"][
        "resourceVersion"]
    if subresource == "status":
        return api.update_status(merged, caller=caller, dry_run=dry_run, namespace=ns,
                                 field_validation=field_validation)
    return api.update(merged, caller=caller, dry_run=dry_run, namespace=ns,
                      field_validation=field_validation)
