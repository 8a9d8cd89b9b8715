"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml``, field managers and conflicts.

What kube-apiserver does (k8s.io/apiserver ``fieldmanager``, structured-merge-diff), reduced to
what a client can observe:

- the applied configuration is a partial object; the fields it sets form the manager's *field
  set* (`emu.apiserver.smd`: leaves, atomic lists, empty maps, items of set and keyed lists),
  recorded in ``metadata.managedFields`` as ``FieldsV1`` with ``operation: Apply`` (a status
  apply is its own entry, ``subresource: status``); entries sorted as kube sorts them;
- the object becomes the merge of the stored object and the configuration; what the manager
  applied last time and no longer applies is removed unless another manager owns it (SMD's
  ``prune``), so ``data: {}`` then ``data: {k: v}`` keeps ``k``;
- changing a field another manager owns is a 409 ``Conflict`` naming each field
  (``Apply failed with 1 conflict: conflict with "m": .data.k``), unless ``force`` is given,
  which takes the field away from the other manager; setting it to the same value shares
  ownership; a field the apply removes leaves every manager's set;
- what the strategy resets (status on the main resource, spec on ``/status``) is neither
  applied nor owned;
- applying to an object that does not exist creates it.

Lists merge by their list type: built-in kinds by kube's ``+listType`` markers
(`emu.apiserver.smd.builtin_list_type`), custom resources by their schema's
``x-kubernetes-list-type``. Ordinary writes (update, patch, status) of an object that has
``managedFields`` add or extend the writer's ``Update`` entry (`track_update`), so a controller
that changes an applied field takes it and the next apply conflicts, as in kube. Differences
from kube (also in docs/deviations.md): an object never applied has no ``managedFields`` (kube
records its creator and every writer), so writes to it are not tracked and never cause apply
conflicts — kept off the write path of the objects controllers churn; maps other than label
selectors are treated as structs whose keys are all fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from . import smd
from .errors import ApiError, BadRequest, NotFound, StatusCause
from .kinds import KindInfo

if TYPE_CHECKING:
    from .server import APIServer

Obj = dict[str, Any]
Path = smd.Path

#: metadata fields the server owns or that name the object: never part of a field set.
_UNMANAGED_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation",
                             "creationTimestamp", "deletionTimestamp",
                             "deletionGracePeriodSeconds", "managedFields", "selfLink"})


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


def list_types(info: KindInfo) -> smd.ListTypes:
    """How ``info``'s lists merge: its CRD schema's list types, else the built-in types'."""
    return info.list_types or smd.BUILTIN_TYPES


def _entries(meta: Obj) -> list[Obj]:
    found = meta.get("managedFields")
    return [dict(e) for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def _entry_key(entry: Obj) -> tuple[str, str, str]:
    return (str(entry.get("manager", "")), str(entry.get("operation", "")),
            str(entry.get("subresource", "")))


def _print_manager(entry: Obj) -> str:
    """kube's ``printManager``: an Apply manager by name, an Update manager with its version
    and time; ``with subresource`` when it wrote one."""
    out = f'"{entry.get("manager", "")}"'
    if entry.get("subresource"):
        out += f' with subresource "{entry["subresource"]}"'
    if entry.get("operation") == "Update":
        out += f" using {entry.get('apiVersion', '')}"
        if entry.get("time"):
            out += f" at {entry['time']}"
    return out


def apply_conflict(conflicts: list[tuple[Obj, Path]]) -> ApiError:
    """kube's ``NewConflictError``: one conflict inline; several grouped by manager (managers
    sorted), each field on its own line; a cause per field and no other details."""
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {_print_manager(entry)}: "
                   f"{smd.dotted(path)}")
    else:
        by_manager: dict[tuple[str, str, str], list[tuple[Obj, Path]]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_entry_key(entry), []).append((entry, path))
        lines = []
        for key in sorted(by_manager):
            found = by_manager[key]
            lines.append(f"conflicts with {_print_manager(found[0][0])}:")
            lines.extend(f"- {smd.dotted(p)}" for _, p in found)
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    causes = [StatusCause("FieldManagerConflict", f"conflict with {_print_manager(e)}",
                          smd.dotted(p)).to_dict() for e, p in conflicts]
    return ApiError.from_status({"code": 409, "reason": "Conflict", "message": message,
                                 "details": {"causes": causes}})


def _stripped(path: Path) -> bool:
    """Fields an apply never owns, naming the object or written by the server (kube's
    ``stripMeta``)."""
    first = path[0]
    if first in ("f:apiVersion", "f:kind"):
        return True
    return first == "f:metadata" and (len(path) == 1 or path[1][2:] in _UNMANAGED_META)


def _reset_field(info: KindInfo, subresource: str | None) -> str | None:
    """What the request's strategy resets (kube's ``ResetFieldsFor``): status on the main
    resource of a kind with a status subresource, spec on the status subresource."""
    if subresource == "status":
        return "spec"
    return "status" if info.has_status else None


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _sort_key(entry: Obj) -> tuple[str, str, str, str, str]:
    """kube's order of managedFields: operation, time, manager, apiVersion, subresource."""
    return (str(entry.get("operation", "")), str(entry.get("time") or ""),
            str(entry.get("manager", "")), str(entry.get("apiVersion", "")),
            str(entry.get("subresource", "")))


def merge_applied(info: KindInfo, live: Obj, applied: Obj, manager: str, force: bool,
                  now: str, subresource: str | None = None) -> Obj:
    """The object after ``manager`` applies ``applied`` to ``live``, as structured-merge-diff's
    ``Updater.Apply`` computes it: the merge, the removal of what the manager applied last time
    and no longer applies (unless another manager owns it), conflicts with other managers
    (409, or taken from them with ``force``), and ``managedFields`` updated."""
    types = list_types(info)
    meta = live.get("metadata") or {}
    entries = _entries(meta)
    live_body = {**live, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    config = {**applied, "metadata": {k: v for k, v in (applied.get("metadata") or {}).items()
                                      if k != "managedFields"}}
    reset = _reset_field(info, subresource)
    applied_set = smd.to_field_set(config, types)
    if reset is not None:
        applied_set = {p for p in applied_set if p[0] != "f:" + reset}
    my_key = (manager, "Apply", subresource or "")
    mine = next((e for e in entries if _entry_key(e) == my_key), None)
    others = [(e, smd.from_fields_v1(e.get("fieldsV1"))) for e in entries if e is not mine]
    last = smd.from_fields_v1(mine.get("fieldsV1")) if mine is not None else set()
    merged = smd.merge(live_body, config, types)
    if last:
        merged = _prune(merged, last, applied_set, [owned for _, owned in others], types)
    merged = _drop_nulls(merged)
    if reset is not None:  # the strategy keeps the stored value
        merged.pop(reset, None)
        if reset in live_body:
            merged[reset] = live_body[reset]
    added, modified, removed = smd.compare(live_body, merged, types)
    changed = added | modified
    conflicts = [(entry, path) for entry, owned in others for path in sorted(owned & changed)]
    if conflicts and not force:
        raise apply_conflict(conflicts)
    taken = {id(e): {p for c, p in conflicts if c is e} for e, _ in others}
    new_entries: list[Obj] = []
    for entry, owned in others:
        kept = owned - taken[id(entry)] - removed
        if kept != owned:
            if not kept:
                continue
            entry["fieldsV1"] = smd.to_fields_v1(kept)
        new_entries.append(entry)
    recorded = {p for p in applied_set if not _stripped(p)}
    # An apply that changes nothing keeps its entry's time, so the write is a no-op (no new
    # resourceVersion), as in kube.
    unchanged = mine is not None and last == recorded and not conflicts and \
        merged == live_body
    mine_entry: Obj = {"manager": manager, "operation": "Apply",
                       "apiVersion": info.api_version,
                       "time": mine.get("time") if unchanged and mine else now,
                       "fieldsType": "FieldsV1", "fieldsV1": smd.to_fields_v1(recorded)}
    if subresource:
        mine_entry["subresource"] = subresource
    if recorded:  # a manager left owning nothing has no entry (kube's stripMeta)
        new_entries.append(mine_entry)
    new_entries.sort(key=_sort_key)
    merged_meta = dict(merged.get("metadata") or {})
    merged_meta["managedFields"] = new_entries
    for key in ("name", "namespace", "uid", "resourceVersion"):
        if key in meta:
            merged_meta[key] = meta[key]
    merged["metadata"] = merged_meta
    return merged


def track_update(info: KindInfo, old: Obj, new: Obj, manager: str, subresource: str | None,
                 now: str) -> list[Obj] | None:
    """The ``managedFields`` after an ordinary write (update, patch) of an applied object, as
    SMD's ``Updater.Update`` computes them: the writer's ``Update`` entry gains every field the
    write added or changed and loses those it removed; every other manager loses the fields the
    write changed or removed (an update takes them, no conflict). None when the write changes
    no field."""
    types = list_types(info)
    old_body = {**old, "metadata": {k: v for k, v in (old.get("metadata") or {}).items()
                                    if k != "managedFields"}}
    new_body = {**new, "metadata": {k: v for k, v in (new.get("metadata") or {}).items()
                                    if k != "managedFields"}}
    added, modified, removed = smd.compare(old_body, new_body, types)
    changed = {p for p in added | modified if not _stripped(p)}
    removed = {p for p in removed if not _stripped(p)}
    if not changed and not removed:
        return None
    entries = _entries(old.get("metadata") or {})
    key = (manager, "Update", subresource or "")
    mine = next((e for e in entries if _entry_key(e) == key), None)
    out: list[Obj] = []
    for entry in entries:
        if entry is mine:
            continue
        owned = smd.from_fields_v1(entry.get("fieldsV1"))
        kept = owned - changed - removed
        if kept != owned:
            if not kept:
                continue
            entry["fieldsV1"] = smd.to_fields_v1(kept)
        out.append(entry)
    owned = smd.from_fields_v1(mine.get("fieldsV1")) if mine is not None else set()
    owned = (owned - removed) | changed
    if owned:
        entry = {"manager": manager, "operation": "Update", "apiVersion": info.api_version,
                 "time": now, "fieldsType": "FieldsV1", "fieldsV1": smd.to_fields_v1(owned)}
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    out.sort(key=_sort_key)
    return out


def _prune(merged: Obj, last: set[Path], applied_set: set[Path],
           others: list[set[Path]], types: smd.ListTypes) -> Obj:
    """SMD's ``prune``: remove what the manager applied last time (``last``), add back every
    field some manager (this one included, as it applies now) owns, then add back whatever the
    removal took only because it sat under a removed field ("dangling" items)."""
    last_all = smd.ensure_fields(last)
    owned: set[Path] = set(applied_set)
    for found in others:
        owned |= found
    owned = smd.ensure_fields(owned)
    every = smd.every_node(merged, types)
    first = smd.remove_items(merged, last_all, types)
    pruned = smd.remove_items(merged, every - (smd.every_node(first, types) | owned), types)
    gone = (every - smd.every_node(pruned, types)) & last_all
    out = smd.remove_items(merged, gone, types)
    assert isinstance(out, dict)
    return out


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
                            now, subresource)
        obj["apiVersion"], obj["kind"] = info.api_version, info.kind
        if info.namespaced:
            obj["metadata"]["namespace"] = ns
        return api.create(obj, caller=caller, dry_run=dry_run, namespace=ns,
                          field_validation=field_validation)
    want_rv = ameta.get("resourceVersion")
    merged = merge_applied(info, live, applied, field_manager, force, now, subresource)
    merged["metadata"]["resourceVersion"] = str(want_rv) if want_rv else live["metadata"][
        "resourceVersion"]
    if subresource == "status":
        return api.update_status(merged, caller=caller, dry_run=dry_run, namespace=ns,
                                 field_validation=field_validation)
    return api.update(merged, caller=caller, dry_run=dry_run, namespace=ns,
                      field_validation=field_validation)
