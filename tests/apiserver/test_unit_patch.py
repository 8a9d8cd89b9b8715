"""Patch functions: RFC 7386 examples, JSON patch errors, strategic merge directives."""

from __future__ import annotations

import pytest

from emu.apiserver.errors import ApiError
from emu.apiserver.kinds import BUILTIN_MERGE_KEYS
from emu.apiserver.patch import (
    apply_json_patch,
    apply_strategic_merge_patch,
    decode_patch,
    merge_patch,
)


@pytest.mark.parametrize(("target", "patch", "result"), [  # RFC 7386 appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_follows_rfc_7386(target, patch, result):
    assert merge_patch(target, patch) == result


def test_decode_patch_rejects_bad_json_with_400():
    with pytest.raises(ApiError) as err:
        decode_patch("{nope")
    assert err.value.code == 400 and err.value.message.startswith("error decoding patch: ")


def test_json_patch_with_unknown_op_is_400():
    with pytest.raises(ApiError) as err:
        apply_json_patch({"a": 1}, [{"op": "frobnicate", "path": "/a"}])
    assert err.value.code == 400


def test_json_patch_move_and_copy():
    out = apply_json_patch({"a": {"x": 1}, "b": {}}, [
        {"op": "copy", "from": "/a/x", "path": "/b/y"},
        {"op": "move", "from": "/a", "path": "/c"}])
    assert out == {"b": {"y": 1}, "c": {"x": 1}}


def test_strategic_merge_env_by_name_and_volume_mounts_by_path():
    target = {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}],
                              "volumeMounts": [{"mountPath": "/a", "name": "v"}]}]}
    patch = {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"},
                                                   {"name": "A", "value": "9"}],
                             "volumeMounts": [{"mountPath": "/b", "name": "w"}]}]}
    out = apply_strategic_merge_patch(target, patch, BUILTIN_MERGE_KEYS)
    c = out["containers"][0]
    assert c["env"] == [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}]
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/a", "/b"]


def test_strategic_merge_map_replace_and_delete_directives():
    target = {"spec": {"a": 1, "b": {"c": 2}}, "keep": 1}
    out = apply_strategic_merge_patch(target, {"spec": {"$patch": "replace", "z": 0}},
                                      BUILTIN_MERGE_KEYS)
    assert out == {"spec": {"z": 0}, "keep": 1}
    out = apply_strategic_merge_patch(out, {"spec": {"$patch": "delete"}}, BUILTIN_MERGE_KEYS)
    assert out == {"keep": 1}


def test_strategic_merge_lists_without_merge_key_are_replaced():
    out = apply_strategic_merge_patch({"args": ["a", "b"]}, {"args": ["c"]}, BUILTIN_MERGE_KEYS)
    assert out == {"args": ["c"]}


def test_strategic_merge_element_without_its_merge_key_is_400():
    with pytest.raises(ApiError) as err:
        apply_strategic_merge_patch({"containers": []}, {"containers": [{"image": "x"}]},
                                    BUILTIN_MERGE_KEYS)
    assert err.value.code == 400
    assert err.value.message == ("map: {'image': 'x'} does not contain declared merge key: "
                                 "name")


def test_strategic_merge_owner_references_merge_by_uid():
    target = {"ownerReferences": [{"uid": "1", "name": "a"}]}
    out = apply_strategic_merge_patch(target, {"ownerReferences": [{"uid": "2", "name": "b"}]},
                                      BUILTIN_MERGE_KEYS)
    assert [r["uid"] for r in out["ownerReferences"]] == ["1", "2"]
