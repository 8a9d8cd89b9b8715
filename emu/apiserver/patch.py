"""Patches: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic merge.

Each function takes the stored object (a fresh dict the server owns) and the patch, and returns
the patched object, or raises 400 BadRequest (a patch that can't be read) or 422 Invalid-like
errors (a patch that can't be applied), as kube-apiserver's ``patcher`` does. Nothing is stored
here: the server runs the result through its normal update path.

Strategic merge follows k8s.io/apimachinery/pkg/util/strategicpatch for what KubeRay and the
built-in controllers send: lists with a ``patchMergeKey`` merge element by element (containers by
name, ports by containerPort/port, conditions by type, ownerReferences by uid), primitive lists
with strategy ``merge`` (finalizers) merge as sets, and the ``$patch: replace|delete`` and
``$deleteFromPrimitiveList/<field>`` directives apply; every other list is replaced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer
import orjson

from .errors import ApiError, BadRequest


def decode_patch(patch: Any) -> Any:
    """A patch given as JSON text or bytes, decoded; other values pass through."""
    if isinstance(patch, str | bytes | bytearray):
        try:
            return orjson.loads(patch)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"error decoding patch: {exc}") from None
    return patch


def _unprocessable(message: str) -> ApiError:
    return ApiError(message, code=422, reason="Invalid")


# -- RFC 7386 ----------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 ``MergePatch(Target, Patch)``; ``target`` may be changed in place."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            target[key] = merge_patch(target.get(key), value)
        else:
            target[key] = value
    return target


def apply_merge_patch(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    patch = decode_patch(patch)
    if not isinstance(patch, dict):
        raise BadRequest("error decoding patch: a merge patch must be a JSON object, not "
                         f"{type(patch).__name__}")
    result = merge_patch(obj, patch)
    assert isinstance(result, dict)
    return result


# -- RFC 6902 ----------------------------------------------------------------------------------------


def apply_json_patch(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    patch = decode_patch(patch)
    if not isinstance(patch, list):
        raise BadRequest("error decoding patch: a JSON patch must be a list of operations")
    try:
        ops = jsonpatch.JsonPatch(patch)
    except (jsonpatch.InvalidJsonPatch, TypeError, AttributeError) as exc:
        raise BadRequest(f"error decoding patch: {exc}") from None
    try:
        result = ops.apply(obj, in_place=True)
    except jsonpatch.JsonPatchTestFailed as exc:
        # jsonpatch names Python types ("1 (<class 'str'>) is not equal to ..."): dropped
        detail = re.sub(r" \(<class '[^']*'>\)", "", str(exc))
        raise _unprocessable(f"the server rejected our request due to an error in our request: "
                             f"testing value failed: {detail}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError,
            IndexError, TypeError) as exc:
        raise _unprocessable(f"the server rejected our request due to an error in our request: "
                             f"{exc}") from None
    if not isinstance(result, dict):
        raise BadRequest("the patched object must be a JSON object")
    return result


# -- strategic merge -----------------------------------------------------------------------------

_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def strategic_merge(target: Any, patch: Any, keys: Mapping[str, tuple[str, ...]]) -> Any:
    """Apply a strategic merge patch map to ``target`` (changed in place when a dict)."""
    if not isinstance(patch, dict):
        return patch
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive is not None:
        raise BadRequest(f'unknown patch type "{directive}" in map')
    if not isinstance(target, dict):
        target = {}
    deletes: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            deletes[key[len(_DELETE_PRIMITIVE):]] = value if isinstance(value, list) else []
            continue
        if key.startswith(_SET_ORDER) or key == "$retainKeys":
            continue
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(target.get(key), value, keys)
            if merged is None:
                target.pop(key, None)
            else:
                target[key] = merged
        elif isinstance(value, list) and key in keys:
            target[key] = _merge_list(target.get(key), value, keys[key], keys)
        else:
            target[key] = value
    for key, gone in deletes.items():
        if isinstance(target.get(key), list):
            target[key] = [item for item in target[key] if item not in gone]
    return target


def _merge_list(current: Any, patch: list[Any], candidates: tuple[str, ...],
                keys: Mapping[str, tuple[str, ...]]) -> list[Any]:
    cur: list[Any] = list(current) if isinstance(current, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [p for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if not candidates:  # primitive list, merged as a set in order
        for item in patch:
            if item not in cur:
                cur.append(item)
        return cur
    for item in patch:
        if not isinstance(item, dict):
            raise BadRequest(f"strategic merge patch: list element {item!r} is not an object")
        key = next((k for k in candidates if k in item), None)
        if key is None:
            raise BadRequest(
                f"map: {item} does not contain declared merge key: {candidates[0]}")
        index = next((i for i, c in enumerate(cur)
                      if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del cur[index]
            continue
        if index is None:
            cur.append(strategic_merge({}, item, keys))
        else:
            cur[index] = strategic_merge(cur[index], item, keys)
    return cur


def apply_strategic_merge_patch(obj: dict[str, Any], patch: Any,
                                keys: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    patch = decode_patch(patch)
    if not isinstance(patch, dict):
        raise BadRequest("error decoding patch: a strategic merge patch must be a JSON object")
    result = strategic_merge(obj, patch, keys)
    if not isinstance(result, dict):
        raise BadRequest("a strategic merge patch can't delete the whole object")
    return result
