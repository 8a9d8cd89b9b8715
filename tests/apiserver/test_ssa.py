"""Server-side apply against structured-merge-diff's own merge cases and kube's apply behaviour.

The cases of ``CASES`` are sigs.k8s.io/structured-merge-diff's ``merge`` tests (set_test,
leaf_test, nested_test, multiple_appliers_test) that use only Apply operations, written here as
data: a sequence of applies on a small type, the object expected and each manager's field set.
The type: ``list`` a set of strings (``sets``), ``keyed`` a list keyed by ``name``, ``listOfLists``
keyed by ``name`` whose ``value`` is a set, ``atomicMap`` an atomic map, everything else structs
and atomic lists.
"""

from __future__ import annotations

from typing import Any

import pytest

from emu.apiserver import smd
from emu.apiserver.errors import ApiError
from emu.apiserver.kinds import KindInfo
from emu.apiserver.server import APIServer
from emu.apiserver.ssa import merge_applied
from emu.kernel.rng import SimRandom


class _Types:
    def __call__(self, names: tuple[str, ...]) -> smd.ListType:
        if names in (("list",), ("listOfLists", "value")):
            return smd.SET
        if names in (("keyed",), ("listOfLists",)):
            return ("map", ("name",))
        return smd.ATOMIC

    def atomic_map(self, names: tuple[str, ...]) -> bool:
        return names == ("atomicMap",)


INFO = KindInfo("", "v1", "Thing", "things", list_types=_Types())


def K(name: str) -> str:  # a keyed item's step (SMD's _KBF)
    return 'k:{"name":"' + name + '"}'


def V(value: str) -> str:  # a set item's step (SMD's _V)
    return f'v:"{value}"'


def P(*steps: str) -> tuple[str, ...]:  # a path (SMD's _P)
    return tuple(s if s[:2] in ("k:", "v:") else "f:" + s for s in steps)


Apply = tuple[str, dict[str, Any]]

CASES: dict[str, tuple[list[Apply], dict[str, Any], dict[str, set[tuple[str, ...]]]]] = {
    "set/apply_twice": (
        [("default", {"list": ["a", "c"]}), ("default", {"list": ["a", "b", "c", "d"]})],
        {"list": ["a", "b", "c", "d"]},
        {"default": {P("list", V(x)) for x in "abcd"}}),
    "set/apply_twice_reorder": (
        [("default", {"list": ["a", "b", "c", "d"]}), ("default", {"list": ["a", "d", "c", "b"]})],
        {"list": ["a", "d", "c", "b"]},
        {"default": {P("list", V(x)) for x in "abcd"}}),
    "set/apply_twice_remove": (
        [("default", {"list": ["a", "b", "c", "d"]}), ("default", {"list": ["a", "c"]})],
        {"list": ["a", "c"]},
        {"default": {P("list", V("a")), P("list", V("c"))}}),
    "leaf/apply_twice_remove": (
        [("default", {"numeric": 1, "string": "string", "bool": False}),
         ("default", {"string": "new string"})],
        {"string": "new string"},
        {"default": {P("string")}}),
    "leaf/apply_remove_empty_set": (
        [("default", {"string": "string"}), ("default", {})],
        {},
        {}),
    "nested/struct_apply_remove_all": (
        [("default", {"struct": {"name": "a", "value": 1}}), ("default", {})],
        {},
        {}),
    "nested/struct_apply_remove_dangling": (  # null is not stored (typed encoding omits it)
        [("default", {"struct": {"name": "a"}}), ("default", {"struct": None})],
        {},
        {"default": {P("struct")}}),
    "multiple/same_value_no_conflict": (
        [("apply-one", {"keyed": [{"name": "a", "value": 0}]}),
         ("apply-two", {"keyed": [{"name": "a", "value": 0}]})],
        {"keyed": [{"name": "a", "value": 0}]},
        {m: {P("keyed", K("a")), P("keyed", K("a"), "name"), P("keyed", K("a"), "value")}
         for m in ("apply-one", "apply-two")}),
    "multiple/remove_one_keep_one": (
        [("apply-one", {"keyed": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
         ("apply-two", {"keyed": [{"name": "c"}, {"name": "d"}]}),
         ("apply-one", {"keyed": [{"name": "a"}]})],
        {"keyed": [{"name": "a"}, {"name": "c"}, {"name": "d"}]},
        {"apply-one": {P("keyed", K("a")), P("keyed", K("a"), "name")},
         "apply-two": {P("keyed", K(x)) for x in "cd"} | {P("keyed", K(x), "name")
                                                            for x in "cd"}}),
    "multiple/unset_complex_sole_owner": (
        [("apply-one", {"struct": {"name": "a", "complexField": {"name": "b"}}}),
         ("apply-one", {"struct": {"name": "a"}})],
        {"struct": {"name": "a"}},
        {"apply-one": {P("struct", "name")}}),
    "multiple/unset_complex_shared_with_applier": (
        [("apply-one", {"struct": {"name": "a", "complexField": {"name": "b"}}}),
         ("apply-two", {"struct": {"complexField": {"name": "b"}}}),
         ("apply-one", {"struct": {"name": "a"}})],
        {"struct": {"name": "a", "complexField": {"name": "b"}}},
        {"apply-one": {P("struct", "name")},
         "apply-two": {P("struct", "complexField", "name")}}),
    "multiple/remove_one_keep_one_with_two_sub_items": (
        [("apply-one", {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
         ("apply-two", {"listOfLists": [{"name": "b", "value": ["d"]}]}),
         ("apply-one", {"listOfLists": [{"name": "a"}]})],
        {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["d"]}]},
        {"apply-one": {P("listOfLists", K("a")), P("listOfLists", K("a"), "name")},
         "apply-two": {P("listOfLists", K("b")), P("listOfLists", K("b"), "name"),
                       P("listOfLists", K("b"), "value", V("d"))}}),
    "empty map, then a key in it": (  # kube issue: the key was recorded but not stored
        [("m", {"data": {}}), ("m", {"data": {"k": "v"}})],
        {"data": {"k": "v"}},
        {"m": {P("data", "k")}}),
    "a key, then the empty map": (
        [("m", {"data": {"k": "v"}}), ("m", {"data": {}})],
        {},
        {"m": {P("data")}}),
    "atomic list replaced whole": (
        [("m", {"args": ["a", "b"]}), ("m", {"args": ["c"]})],
        {"args": ["c"]},
        {"m": {P("args")}}),
}


def _run(applies: list[Apply], force: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "t"}}
    for i, (manager, body) in enumerate(applies):
        applied = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, **body}
        obj = merge_applied(INFO, obj, applied, manager, force, f"2026-01-01T00:00:0{i}Z")
    return obj


@pytest.mark.parametrize("name", sorted(CASES))
def test_structured_merge_diff_case(name: str) -> None:
    applies, want, managed = CASES[name]
    obj = _run(applies)
    meta = obj.pop("metadata")
    obj.pop("apiVersion", None)
    obj.pop("kind", None)
    assert obj == want
    got = {e["manager"]: smd.from_fields_v1(e["fieldsV1"]) for e in meta["managedFields"]}
    assert got == managed


def test_changing_anothers_value_conflicts_with_kubes_message() -> None:
    """multiple_appliers_test ``change_value_yes_conflict``; message as kube's conflict.go."""
    with pytest.raises(ApiError) as err:
        _run([("apply-one", {"keyed": [{"name": "a", "value": 0}]}),
              ("apply-two", {"keyed": [{"name": "a", "value": 1}]})])
    assert err.value.code == 409
    assert err.value.message == ('Apply failed with 1 conflict: conflict with "apply-one": '
                                 '.keyed[name="a"].value')
    assert err.value.status["details"] == {"causes": [{
        "reason": "FieldManagerConflict", "message": 'conflict with "apply-one"',
        "field": '.keyed[name="a"].value'}]}


def test_several_conflicts_are_grouped_by_manager() -> None:
    with pytest.raises(ApiError) as err:
        _run([("b", {"x": 1}), ("a", {"y": 1, "z": 1}), ("c", {"x": 2, "y": 2, "z": 2})])
    assert err.value.message == ('Apply failed with 3 conflicts: conflicts with "a":\n- .y\n'
                                 '- .z\nconflicts with "b":\n- .x')


def test_an_atomic_map_conflicts_whole_and_force_replaces_it() -> None:
    """multiple_appliers_test ``force``."""
    first = [("apply-one", {"atomicMap": {"field1": "a"}}),
             ("apply-two", {"atomicMap": {"field2": "b"}})]
    with pytest.raises(ApiError) as err:
        _run(first)
    assert err.value.message == ('Apply failed with 1 conflict: conflict with "apply-one": '
                                 ".atomicMap")
    obj = _run(first, force=True)
    assert obj["atomicMap"] == {"field2": "b"}
    got = {e["manager"]: smd.from_fields_v1(e["fieldsV1"]) for e in obj["metadata"]["managedFields"]}
    assert got == {"apply-two": {P("atomicMap")}}


def test_a_deployments_selector_is_atomic(api: APIServer) -> None:
    """``metav1.LabelSelector`` is ``+structType=atomic``: the applier owns it whole."""
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    out = _apply(api, "Deployment", body)
    assert out["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:selector"] == {}


def test_force_takes_the_fields_and_the_other_manager_keeps_the_rest() -> None:
    obj = _run([("one", {"x": 1, "y": 1}), ("two", {"x": 2})], force=True)
    assert (obj["x"], obj["y"]) == (2, 1)
    got = {e["manager"]: smd.from_fields_v1(e["fieldsV1"]) for e in obj["metadata"]["managedFields"]}
    assert got == {"one": {P("y")}, "two": {P("x")}}


def test_fields_v1_marks_a_member_with_children_with_a_dot() -> None:
    paths = {P("keyed", K("a")), P("keyed", K("a"), "name"), P("data", "k")}
    assert smd.to_fields_v1(paths) == {"f:data": {"f:k": {}},
                                       "f:keyed": {K("a"): {".": {}, "f:name": {}}}}
    assert smd.from_fields_v1(smd.to_fields_v1(paths)) == paths


def test_a_keyed_item_without_its_key_is_400() -> None:
    with pytest.raises(ApiError) as err:
        _run([("m", {"keyed": [{"value": 1}]})])
    assert err.value.code == 400
    assert 'omits key field "name"' in err.value.message


# -- through the API server, on built-in kinds ---------------------------------------------------


@pytest.fixture
def api() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(1))


def _apply(api: APIServer, kind: str, body: dict[str, Any], manager: str = "m",
           force: bool = False) -> dict[str, Any]:
    return api.patch(kind, body["metadata"]["name"], body, namespace="default",
                     patch_type="apply", field_manager=manager, force=force)


@pytest.mark.parametrize("field", ["data", "labels"])
def test_an_empty_map_then_a_key_keeps_the_key(api: APIServer, field: str) -> None:
    def cm(content: dict[str, str]) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "c"}
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
        if field == "labels":
            meta["labels"] = content
        else:
            body["data"] = content
        return body

    _apply(api, "ConfigMap", cm({}))
    out = _apply(api, "ConfigMap", cm({"k": "v"}))
    stored = api.get("ConfigMap", "c", "default")
    where = stored["metadata"] if field == "labels" else stored
    assert where[field] == {"k": "v"} and out == stored
    fields = stored["metadata"]["managedFields"][0]["fieldsV1"]
    assert (fields["f:metadata"]["f:labels"] if field == "labels" else fields["f:data"]) == \
        {"f:k": {}}


def test_container_lists_merge_by_name_and_ports_by_port_and_protocol(api: APIServer) -> None:
    def deployment(containers: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                    "metadata": {"labels": {"a": "b"}}, "spec": {"containers": containers}}}}

    _apply(api, "Deployment", deployment(
        [{"name": "a", "image": "x", "ports": [{"containerPort": 80}]}]), "one")
    out = _apply(api, "Deployment", deployment([{"name": "b", "image": "y"}]), "two")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["a", "b"]
    fields = {e["manager"]: e["fieldsV1"] for e in out["metadata"]["managedFields"]}
    ports = fields["one"]["f:spec"]["f:template"]["f:spec"]["f:containers"][K("a")]["f:ports"]
    assert ports == {'k:{"containerPort":80,"protocol":"TCP"}': {
        ".": {}, "f:containerPort": {}}}
    with pytest.raises(ApiError) as err:
        _apply(api, "Deployment", deployment([{"name": "a", "image": "z"}]), "two")
    assert err.value.message == ('Apply failed with 1 conflict: conflict with "one": '
                                 '.spec.template.spec.containers[name="a"].image')


def test_finalizers_are_a_set_shared_by_appliers(api: APIServer) -> None:
    def cm(finalizers: list[str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "finalizers": finalizers}}

    _apply(api, "ConfigMap", cm(["x/a"]), "one")
    _apply(api, "ConfigMap", cm(["x/b"]), "two")
    out = _apply(api, "ConfigMap", cm([]), "one")
    assert out["metadata"]["finalizers"] == ["x/b"]


def test_apply_to_status_is_its_own_manager_entry(api: APIServer) -> None:
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"replicas": 5}}
    out = _apply(api, "Deployment", body)
    assert "f:status" not in out["metadata"]["managedFields"][0]["fieldsV1"]
    assert out.get("status", {}).get("replicas") != 5
    out = api.patch("Deployment", "d", {"apiVersion": "apps/v1", "kind": "Deployment",
                                         "metadata": {"name": "d"},
                                         "status": {"observedGeneration": 7}},
                    namespace="default", patch_type="apply", field_manager="m",
                    subresource="status")
    entries = [(e["manager"], e.get("subresource")) for e in out["metadata"]["managedFields"]]
    assert entries == [("m", None), ("m", "status")]
    assert out["status"]["observedGeneration"] == 7


def test_a_crd_schema_gives_list_and_map_types() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["port", "protocol"],
                  "items": {"type": "object"}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                 "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "sel": {"type": "object", "x-kubernetes-map-type": "atomic"},
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}
    types = smd.schema_list_types(schema)
    assert types(("spec", "ports")) == ("map", ("port", "protocol"))
    assert types(("spec", "tags")) == smd.SET
    assert types(("spec", "args")) == smd.ATOMIC
    assert types(("spec", "undeclared")) == smd.ATOMIC
    assert types.atomic_map(("spec", "sel")) and not types.atomic_map(("spec",))
    # below an open node, and in metadata, the built-in types' rules apply
    assert types(("spec", "template", "spec", "containers")) == ("map", ("name",))
    assert types(("metadata", "finalizers")) == smd.SET


# -- kube's own apply integration cases (test/integration/apiserver/apply) -----------------------


def test_apply_remove_container_port(api: APIServer) -> None:
    """``TestApplyRemoveContainerPort``: applying the Deployment again without the port removes
    it."""
    def deployment(ports: list[dict[str, Any]] | None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "nginx", "image": "nginx:latest"}
        if ports is not None:
            container["ports"] = ports
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "deployment", "labels": {"app": "nginx"}},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
                         "template": {"metadata": {"labels": {"app": "nginx"}},
                                      "spec": {"containers": [container]}}}}

    _apply(api, "Deployment", deployment([{"containerPort": 80, "protocol": "TCP"}]),
           "apply_test")
    out = _apply(api, "Deployment", deployment(None), "apply_test")
    assert "ports" not in out["spec"]["template"]["spec"]["containers"][0]


def test_apply_removes_empty_managed_fields(api: APIServer) -> None:
    """``TestApplyRemovesEmptyManagedFields``: an apply that sets nothing beyond the object's
    name leaves no managedFields."""
    out = _apply(api, "ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "test-cm", "namespace": "default"}},
                 "apply_test")
    assert "managedFields" not in out["metadata"]


# -- Update operations on an applied object ------------------------------------------------------


def _cm(data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}


def _managers(obj: dict[str, Any]) -> dict[tuple[str, str], set[tuple[str, ...]]]:
    return {(e["manager"], e["operation"]): smd.from_fields_v1(e["fieldsV1"])
            for e in obj["metadata"].get("managedFields") or []}


def test_apply_update_apply_with_conflict(api: APIServer) -> None:
    """leaf_test ``apply_update_apply_with_conflict``: a controller's update takes the field;
    the applier's next apply of its old value conflicts with the controller."""
    _apply(api, "ConfigMap", _cm({"numeric": "1", "string": "string"}), "default")
    live = api.get("ConfigMap", "c", "default")
    live["data"] = {"numeric": "1", "string": "controller string", "bool": "true"}
    out = api.update(live, field_manager="controller")
    assert _managers(out) == {("default", "Apply"): {P("data", "numeric")},
                              ("controller", "Update"): {P("data", "string"),
                                                         P("data", "bool")}}
    with pytest.raises(ApiError) as err:
        _apply(api, "ConfigMap", _cm({"numeric": "2", "string": "user string"}), "default")
    assert err.value.message == ('Apply failed with 1 conflict: conflict with "controller" '
                                 f"using v1 at {out['metadata']['managedFields'][1]['time']}: "
                                 ".data.string")
    forced = _apply(api, "ConfigMap", _cm({"numeric": "2", "string": "user string"}),
                    "default", force=True)
    assert forced["data"] == {"numeric": "2", "string": "user string", "bool": "true"}
    assert _managers(forced)[("controller", "Update")] == {P("data", "bool")}


def test_updates_of_objects_never_applied_record_nothing(api: APIServer) -> None:
    created = api.create({**_cm({"a": "1"}), "metadata": {"name": "c", "namespace": "default"}})
    created["data"] = {"a": "2"}
    out = api.update(created, field_manager="controller")
    assert "managedFields" not in out["metadata"]
