"""Patch: JSON merge, JSON patch, strategic merge, status subresource, failures change nothing."""

from __future__ import annotations

import pytest
from conformance_objects import cm, deployment, pod, raycluster, service

from emu.apiserver.errors import ApiError


def test_merge_patch_sets_and_null_removes_keys(api):
    api.create(cm(data={"a": "1", "b": "2"}, labels={"x": "y"}))
    out = api.patch("ConfigMap", "c", {"data": {"a": None, "c": "3"},
                                       "metadata": {"labels": {"z": "w"}}})
    assert out["data"] == {"b": "2", "c": "3"}
    assert out["metadata"]["labels"] == {"x": "y", "z": "w"}


def test_merge_patch_replaces_lists_whole(api):
    api.create(deployment())
    out = api.patch("Deployment", "d", {"spec": {"template": {"spec": {"containers": [
        {"name": "other", "image": "nginx:2"}]}}}})
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["other"]


def test_merge_patch_accepts_json_text(api):
    api.create(cm())
    assert api.patch("ConfigMap", "c", '{"data": {"k": "t"}}')["data"] == {"k": "t"}


def test_json_patch_operations_apply_in_order(api):
    api.create(cm(data={"a": "1"}))
    out = api.patch("ConfigMap", "c", [
        {"op": "add", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/a", "value": "one"},
        {"op": "remove", "path": "/data/b"},
    ], patch_type="json")
    assert out["data"] == {"a": "one"}


def test_json_patch_failing_test_op_is_422_and_changes_nothing(api):
    api.create(cm())
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", [{"op": "test", "path": "/data/k", "value": "nope"},
                                     {"op": "replace", "path": "/data/k", "value": "x"}],
                  patch_type="json")
    assert err.value.code == 422
    assert api.resource_version == rv
    assert api.get("ConfigMap", "c")["data"] == {"k": "v"}


def test_json_patch_on_a_missing_path_is_422(api):
    api.create(cm())
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", [{"op": "remove", "path": "/data/missing"}],
                  patch_type="json")
    assert err.value.code == 422


def test_malformed_json_patch_is_400(api):
    api.create(cm())
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", {"op": "add"}, patch_type="json")
    assert (err.value.code, err.value.message) == (
        400, "error decoding patch: a JSON patch must be a list of operations")


def test_strategic_merge_merges_containers_by_name(api):
    api.create(deployment())
    out = api.patch("Deployment", "d", {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "nginx:2"},
        {"name": "side", "image": "envoy:1"}]}}}}, patch_type="strategic")
    containers = out["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "nginx:2"),
                                                            ("side", "envoy:1")]
    assert containers[0]["imagePullPolicy"] == "IfNotPresent"  # kept from the stored object
    assert out["metadata"]["generation"] == 2


def test_strategic_merge_delete_directive_removes_a_list_element(api):
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "envoy:1"})
    api.create(obj)
    out = api.patch("Deployment", "d", {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "$patch": "delete"}]}}}}, patch_type="strategic")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["main"]


def test_strategic_merge_replace_directive_replaces_a_list(api):
    api.create(service(ports=[{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]))
    out = api.patch("Service", "s", {"spec": {"ports": [
        {"$patch": "replace"}, {"port": 8080, "name": "alt"}]}}, patch_type="strategic")
    assert [p["port"] for p in out["spec"]["ports"]] == [8080]


def test_strategic_merge_service_ports_merge_by_port(api):
    api.create(service(ports=[{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]))
    out = api.patch("Service", "s", {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
                    patch_type="strategic")
    assert [(p["port"], p["targetPort"]) for p in out["spec"]["ports"]] == [(80, 80),
                                                                           (443, 8443)]


def test_strategic_merge_finalizers_merge_as_a_set(api):
    api.create(cm(finalizers=["a.io/x"]))
    out = api.patch("ConfigMap", "c", {"metadata": {"finalizers": ["b.io/y", "a.io/x"]}},
                    patch_type="strategic")
    assert out["metadata"]["finalizers"] == ["a.io/x", "b.io/y"]
    out = api.patch("ConfigMap", "c", {"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["a.io/x"]}}, patch_type="strategic")
    assert out["metadata"]["finalizers"] == ["b.io/y"]


def test_strategic_merge_status_conditions_merge_by_type(api):
    obj = api.create(pod())
    obj["status"]["conditions"] = [{"type": "Ready", "status": "False"},
                                   {"type": "Initialized", "status": "True"}]
    api.update_status(obj)
    out = api.patch("Pod", "p", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                    patch_type="strategic", subresource="status")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                           {"type": "Initialized", "status": "True"}]


def test_strategic_merge_on_a_custom_resource_is_415(api):
    api.create(raycluster())
    with pytest.raises(ApiError) as err:
        api.patch("RayCluster", "rc", {"spec": {}}, patch_type="strategic")
    assert (err.value.code, err.value.message) == (
        415, "the body of the request was in an unknown format - accepted media types include: "
             "application/json-patch+json, application/merge-patch+json, "
             "application/apply-patch+yaml")


def test_patch_of_a_missing_object_is_404(api):
    with pytest.raises(ApiError) as err:
        api.patch("Pod", "ghost", {"metadata": {"labels": {"a": "b"}}})
    assert (err.value.code, err.value.message) == (404, 'pods "ghost" not found')


def test_status_patch_changes_only_status(api):
    api.create(raycluster())
    out = api.patch("RayCluster", "rc", {"status": {"state": "ready"},
                                         "spec": {"rayVersion": "0"}}, subresource="status")
    assert out["status"] == {"state": "ready"}
    assert out["spec"]["rayVersion"] == "2.9.0"


def test_main_resource_patch_ignores_status(api):
    api.create(raycluster())
    out = api.patch("RayCluster", "rc", {"status": {"state": "ready"},
                                         "spec": {"rayVersion": "2.10.0"}})
    assert "status" not in out
    assert (out["spec"]["rayVersion"], out["metadata"]["generation"]) == ("2.10.0", 2)


def test_patch_with_a_stale_resource_version_is_409(api):
    obj = api.create(cm())
    api.patch("ConfigMap", "c", {"data": {"k": "2"}})
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", {"metadata": {"resourceVersion":
                                                  obj["metadata"]["resourceVersion"]},
                                     "data": {"k": "3"}})
    assert err.value.reason == "Conflict"


def test_patch_producing_an_invalid_object_is_422_and_changes_nothing(api):
    api.create(pod())
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.patch("Pod", "p", {"spec": {"restartPolicy": "Never"}})
    assert err.value.code == 422
    assert api.resource_version == rv


def test_patch_cannot_rename_the_object(api):
    api.create(cm())
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", {"metadata": {"name": "d"}})
    assert (err.value.code, err.value.message) == (
        400, "the name of the object (d) does not match the name on the URL (c)")


def test_unknown_patch_type_is_415(api):
    api.create(cm())
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", {}, patch_type="x-unknown")
    assert err.value.code == 415


def test_merge_patch_that_is_not_an_object_is_400(api):
    api.create(cm())
    with pytest.raises(ApiError) as err:
        api.patch("ConfigMap", "c", "[1, 2]")
    assert err.value.code == 400


def test_removing_a_finalizer_by_patch_finishes_a_deletion(api):
    api.create(cm(finalizers=["x.io/f"]))
    api.delete("ConfigMap", "c")
    api.patch("ConfigMap", "c", [{"op": "remove", "path": "/metadata/finalizers"}],
              patch_type="json")
    with pytest.raises(ApiError):
        api.get("ConfigMap", "c")
