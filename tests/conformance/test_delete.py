"""Delete: finalizers, graceful Pod deletion, propagation policies, preconditions, namespaces."""

from __future__ import annotations

import pytest
from conformance_objects import cm, pod, raycluster

from emu.apiserver.errors import ApiError


def test_delete_without_finalizers_removes_at_once_and_returns_a_success_status(api):
    created = api.create(cm())
    out = api.delete("ConfigMap", "c")
    assert out == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "details": {"name": "c", "kind": "configmaps",  # Go omits the empty group
                               "uid": created["metadata"]["uid"]}}
    with pytest.raises(ApiError) as err:
        api.get("ConfigMap", "c")
    assert err.value.message == 'configmaps "c" not found'


def test_delete_of_a_missing_object_is_404(api):
    with pytest.raises(ApiError) as err:
        api.delete("RayCluster", "nope")
    assert (err.value.code, err.value.message) == (404, 'rayclusters.ray.io "nope" not found')


def test_delete_with_finalizers_sets_deletion_timestamp_and_keeps_the_object(api, clock):
    api.create(cm(finalizers=["example.com/cleanup"]))
    clock.advance(5)
    out = api.delete("ConfigMap", "c")
    assert out["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:05Z"
    assert out["metadata"]["deletionGracePeriodSeconds"] == 0
    assert api.get("ConfigMap", "c")["metadata"]["finalizers"] == ["example.com/cleanup"]


def test_removing_the_last_finalizer_of_a_deleting_object_deletes_it(api):
    api.create(cm(finalizers=["a.io/x", "b.io/y"]))
    obj = api.delete("ConfigMap", "c")
    obj["metadata"]["finalizers"] = ["b.io/y"]
    obj = api.update(obj)
    assert api.get("ConfigMap", "c")["metadata"]["finalizers"] == ["b.io/y"]
    obj["metadata"]["finalizers"] = []
    api.update(obj)
    with pytest.raises(ApiError):
        api.get("ConfigMap", "c")


def test_adding_a_finalizer_to_a_deleting_object_is_forbidden(api):
    api.create(cm(finalizers=["a.io/x"]))
    obj = api.delete("ConfigMap", "c")
    obj["metadata"]["finalizers"] = ["a.io/x", "b.io/new"]
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.code == 422
    assert err.value.message == (
        'ConfigMap "c" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added '
        'if the object is being deleted, found new finalizers []string{"b.io/new"}')


def test_deleting_an_already_deleting_object_is_idempotent(api, trace):
    api.create(cm(finalizers=["a.io/x"]))
    first = api.delete("ConfigMap", "c")
    writes = len(trace.events)
    again = api.delete("ConfigMap", "c")
    assert again == first
    assert len(trace.events) == writes


def test_deletion_timestamp_cannot_be_changed_by_update(api):
    api.create(cm(finalizers=["a.io/x"]))
    obj = api.delete("ConfigMap", "c")
    stamp = obj["metadata"]["deletionTimestamp"]
    del obj["metadata"]["deletionTimestamp"]
    obj["data"] = {"k": "changed"}
    assert api.update(obj)["metadata"]["deletionTimestamp"] == stamp


def test_bound_pod_delete_is_graceful_until_the_kubelet_deletes_with_grace_zero(api, clock):
    api.create(pod(node="node-1"))
    out = api.delete("Pod", "p")
    assert out["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    assert out["metadata"]["deletionGracePeriodSeconds"] == 30
    assert api.get("Pod", "p")["metadata"]["deletionGracePeriodSeconds"] == 30
    gone = api.delete("Pod", "p", grace_period_seconds=0, caller="kubelet")
    assert gone["kind"] == "Pod"  # pods return the deleted object
    with pytest.raises(ApiError):
        api.get("Pod", "p")


def test_pod_grace_period_comes_from_the_request_or_the_spec(api):
    obj = pod(node="n")
    obj["spec"]["terminationGracePeriodSeconds"] = 5
    api.create(obj)
    assert api.delete("Pod", "p")["metadata"]["deletionGracePeriodSeconds"] == 5
    api.create(pod("q", node="n"))
    assert api.delete("Pod", "q", grace_period_seconds=2)["metadata"][
        "deletionGracePeriodSeconds"] == 2


def test_unbound_pod_is_deleted_at_once(api):
    api.create(pod())
    out = api.delete("Pod", "p")
    assert out["metadata"]["name"] == "p" and "deletionTimestamp" not in out["metadata"]
    with pytest.raises(ApiError):
        api.get("Pod", "p")


def test_finished_pods_are_deleted_at_once(api):
    obj = api.create(pod(node="n"))
    obj["status"] = {"phase": "Succeeded"}
    api.update_status(obj)
    api.delete("Pod", "p")
    with pytest.raises(ApiError):
        api.get("Pod", "p")


def test_pod_with_finalizers_waits_for_both_grace_and_finalizers(api):
    api.create(pod(node="n", finalizers=["x.io/f"]))
    obj = api.delete("Pod", "p")
    obj["metadata"]["finalizers"] = []
    obj = api.update(obj)
    assert obj["metadata"]["deletionGracePeriodSeconds"] == 30  # still there: grace pending
    api.delete("Pod", "p", grace_period_seconds=0)
    with pytest.raises(ApiError):
        api.get("Pod", "p")


def test_foreground_propagation_adds_the_foreground_finalizer(api):
    api.create(raycluster())
    out = api.delete("RayCluster", "rc", propagation_policy="Foreground")
    assert out["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert "deletionTimestamp" in out["metadata"]


def test_orphan_propagation_adds_the_orphan_finalizer(api):
    api.create(raycluster())
    out = api.delete("RayCluster", "rc", propagation_policy="Orphan")
    assert out["metadata"]["finalizers"] == ["orphan"]


def test_background_propagation_deletes_at_once(api):
    api.create(raycluster())
    out = api.delete("RayCluster", "rc", propagation_policy="Background")
    assert out["status"] == "Success"
    with pytest.raises(ApiError):
        api.get("RayCluster", "rc")


def test_unknown_propagation_policy_is_invalid(api):
    api.create(cm())
    with pytest.raises(ApiError) as err:
        api.delete("ConfigMap", "c", propagation_policy="Sideways")
    assert err.value.message == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"Sideways": supported values: "Foreground", "Background", "Orphan"')


def test_uid_precondition_mismatch_is_409(api):
    created = api.create(cm())
    with pytest.raises(ApiError) as err:
        api.delete("ConfigMap", "c", preconditions={"uid": "other"})
    assert err.value.code == 409
    assert err.value.message == (
        'Operation cannot be fulfilled on configmaps "c": Precondition failed: UID in '
        f'precondition: other, UID in object meta: {created["metadata"]["uid"]}')
    api.get("ConfigMap", "c")


def test_resource_version_precondition_mismatch_is_409(api):
    created = api.create(cm())
    rv = created["metadata"]["resourceVersion"]
    with pytest.raises(ApiError) as err:
        api.delete("ConfigMap", "c", preconditions={"resourceVersion": "1"})
    assert err.value.message == (
        'Operation cannot be fulfilled on configmaps "c": Precondition failed: ResourceVersion in '
        f"precondition: 1, ResourceVersion in object meta: {rv}")
    api.delete("ConfigMap", "c", preconditions={"resourceVersion": rv,
                                                "uid": created["metadata"]["uid"]})


def test_namespace_delete_terminates_its_contents_then_itself(api):
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    api.create(cm("a", "team"))
    api.create(cm("b", "team", finalizers=["x.io/hold"]))
    out = api.delete("Namespace", "team")
    assert out["status"]["phase"] == "Terminating"
    assert [o["metadata"]["name"] for o in api.list("ConfigMap", "team")["items"]] == ["b"]
    with pytest.raises(ApiError) as err:
        api.create(cm("c", "team"))
    assert (err.value.code, err.value.message) == (
        403, 'configmaps "c" is forbidden: unable to create new content in namespace team because '
             "it is being terminated")
    held = api.get("ConfigMap", "b", "team")
    held["metadata"]["finalizers"] = []
    api.update(held)
    with pytest.raises(ApiError):
        api.get("Namespace", "team")


def test_delete_collection_deletes_matching_objects_only(api):
    api.create(cm("a", labels={"app": "x"}))
    api.create(cm("b", labels={"app": "y"}))
    out = api.delete_collection("ConfigMap", "default", label_selector="app=x")
    assert out["kind"] == "ConfigMapList" and len(out["items"]) == 1
    assert [o["metadata"]["name"] for o in api.list("ConfigMap")["items"]] == ["b"]


def test_dependents_follow_owner_references(api):
    owner = api.create(raycluster())
    ref = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
           "uid": owner["metadata"]["uid"], "controller": True}
    api.create(pod("head", ownerReferences=[ref]))
    api.create(cm("cfg", ownerReferences=[ref]))
    api.create(cm("other"))
    deps = api.dependents(owner["metadata"]["uid"])
    assert [(d["kind"], d["metadata"]["name"]) for d in deps] == [("ConfigMap", "cfg"),
                                                                  ("Pod", "head")]
    api.delete("ConfigMap", "cfg")
    assert [d["metadata"]["name"] for d in api.dependents(owner["metadata"]["uid"])] == ["head"]


def test_owner_references_need_uid_kind_name_and_api_version(api):
    with pytest.raises(ApiError) as err:
        api.create(cm(ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "x"}]))
    assert err.value.message == ('ConfigMap "c" is invalid: metadata.ownerReferences.uid: '
                                 'Invalid value: "": uid must not be empty')


def test_marking_an_object_as_deleting_bumps_its_generation():
    import emu

    async def main(sim):
        c = sim.client()
        rc = await c.create({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                             "metadata": {"name": "rc", "namespace": "default",
                                          "finalizers": ["ray.io/gcs-ft-redis-cleanup-finalizer"]},
                             "spec": {"headGroupSpec": {"template": {"spec": {"containers": [
                                 {"name": "ray-head", "image": "rayproject/ray"}]}}}}})
        deleting = await c.delete("RayCluster", "rc", "default")
        again = await c.delete("RayCluster", "rc", "default")
        return rc["metadata"]["generation"], deleting["metadata"]["generation"], \
            again["metadata"]["generation"]

    assert emu.run(main) == (1, 2, 2)
