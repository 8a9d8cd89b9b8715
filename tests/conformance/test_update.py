"""Update and update_status: optimistic concurrency, generation, status subresource, immutability."""

from __future__ import annotations

import pytest
from conformance_objects import cm, deployment, job, pod, raycluster, service

from emu.apiserver.errors import ApiError


def test_update_with_stale_resource_version_is_409_conflict(api):
    first = api.create(cm())
    api.update({**first, "data": {"k": "v2"}})
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.update({**first, "data": {"k": "v3"}})
    assert (err.value.code, err.value.reason) == (409, "Conflict")
    assert err.value.message == (
        'Operation cannot be fulfilled on configmaps "c": the object has been modified; please '
        "apply your changes to the latest version and try again")
    assert api.resource_version == rv
    assert api.get("ConfigMap", "c")["data"] == {"k": "v2"}


def test_conflict_message_names_the_group_for_crds(api):
    first = api.create(raycluster())
    api.update(first)  # no change: no new revision
    changed = api.update({**first, "spec": {**first["spec"], "rayVersion": "2.10.0"}})
    with pytest.raises(ApiError) as err:
        api.update(first)
    assert err.value.message.startswith('Operation cannot be fulfilled on rayclusters.ray.io "rc"')
    assert changed["metadata"]["generation"] == 2


def test_update_without_resource_version_is_unconditional_for_built_in_kinds(api):
    api.create(cm())
    obj = cm(data={"k": "forced"})
    out = api.update(obj)
    assert out["data"] == {"k": "forced"}


def test_update_without_resource_version_is_invalid_for_custom_resources(api):
    api.create(raycluster())
    with pytest.raises(ApiError) as err:
        api.update(raycluster(replicas=3))
    assert err.value.message == ('RayCluster.ray.io "rc" is invalid: metadata.resourceVersion: '
                                 "Invalid value: 0x0: must be specified for an update")


def test_update_of_a_missing_object_is_404(api):
    with pytest.raises(ApiError) as err:
        api.update(cm("ghost"))
    assert (err.value.code, err.value.message) == (404, 'configmaps "ghost" not found')


def test_each_write_gets_a_strictly_greater_resource_version(api):
    obj = api.create(cm())
    seen = [int(obj["metadata"]["resourceVersion"])]
    for i in range(5):
        obj["data"]["k"] = str(i)
        obj = api.update(obj)
        seen.append(int(obj["metadata"]["resourceVersion"]))
    assert seen == sorted(set(seen))
    assert api.resource_version == seen[-1]


def test_an_update_that_changes_nothing_keeps_the_resource_version(api, trace):
    obj = api.create(cm())
    writes = len(trace.events)
    out = api.update(obj)
    assert out["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert len(trace.events) == writes


def test_generation_bumps_only_on_spec_changes(api):
    obj = api.create(raycluster())
    obj["metadata"]["labels"] = {"team": "a"}
    obj["metadata"]["annotations"] = {"note": "x"}
    obj = api.update(obj)
    assert obj["metadata"]["generation"] == 1
    obj["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    obj = api.update(obj)
    assert obj["metadata"]["generation"] == 2


def test_generation_ignores_key_order_of_an_equal_spec(api):
    obj = api.create(raycluster())
    obj["spec"] = dict(reversed(list(obj["spec"].items())))
    obj["metadata"]["labels"] = {"x": "y"}
    assert api.update(obj)["metadata"]["generation"] == 1


def test_client_cannot_set_generation(api):
    obj = api.create(raycluster())
    obj["metadata"]["generation"] = 99
    obj["metadata"]["labels"] = {"a": "b"}
    assert api.update(obj)["metadata"]["generation"] == 1


def test_update_ignores_status_for_kinds_with_a_status_subresource(api):
    obj = api.create(raycluster())
    obj["status"] = {"state": "ready"}
    obj["spec"]["rayVersion"] = "2.10.0"
    out = api.update(obj)
    assert "status" not in out
    assert out["spec"]["rayVersion"] == "2.10.0"


def test_update_status_changes_only_status(api):
    obj = api.create(raycluster())
    obj["status"] = {"state": "ready"}
    obj["spec"]["rayVersion"] = "9.9.9"
    obj["metadata"]["labels"] = {"ignored": "yes"}
    out = api.update_status(obj)
    assert out["status"] == {"state": "ready"}
    assert out["spec"]["rayVersion"] == "2.9.0"
    assert "labels" not in out["metadata"]
    assert out["metadata"]["generation"] == 1
    assert int(out["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])


def test_update_status_with_stale_resource_version_is_409(api):
    obj = api.create(raycluster())
    api.update_status({**obj, "status": {"state": "a"}})
    with pytest.raises(ApiError) as err:
        api.update_status({**obj, "status": {"state": "b"}})
    assert err.value.reason == "Conflict"


def test_update_status_on_a_kind_without_status_subresource_is_404(api):
    obj = api.create(cm())
    with pytest.raises(ApiError) as err:
        api.update_status(obj)
    assert (err.value.code, err.value.message) == (
        404, "the server could not find the requested resource")


def test_status_of_kinds_without_subresource_is_written_by_update(api):
    lease = api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": "l", "namespace": "default"},
                        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    lease["spec"]["holderIdentity"] = "b"
    assert api.update(lease)["spec"]["holderIdentity"] == "b"


def test_uid_is_immutable(api):
    obj = api.create(cm())
    obj["metadata"]["uid"] = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.reason == "Conflict"
    assert err.value.message.endswith(
        "Precondition failed: UID in precondition: 00000000-0000-4000-8000-000000000000, UID in "
        f"object meta: {api.get('ConfigMap', 'c')['metadata']['uid']}")


def test_creation_timestamp_is_kept_from_the_stored_object(api, clock):
    obj = api.create(cm())
    clock.advance(100)
    obj["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    obj["data"] = {"k": "new"}
    assert api.update(obj)["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"


def test_pod_spec_is_immutable_except_image(api):
    obj = api.create(pod())
    obj["spec"]["containers"][0]["image"] = "busybox:1.37"
    obj = api.update(obj)
    assert obj["spec"]["containers"][0]["image"] == "busybox:1.37"
    obj["spec"]["restartPolicy"] = "Never"
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.code == 422
    assert err.value.message == (
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
        "`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)")


def test_pod_tolerations_may_only_be_added(api):
    obj = pod()
    obj["spec"]["tolerations"] = [{"key": "a", "operator": "Exists"}]
    obj = api.create(obj)
    obj["spec"]["tolerations"].append({"key": "b", "operator": "Exists"})
    obj = api.update(obj)
    obj["spec"]["tolerations"] = [{"key": "b", "operator": "Exists"}]
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.message.startswith('Pod "p" is invalid: spec: Forbidden: pod updates')


def test_pod_node_name_can_be_set_once_by_the_scheduler(api):
    obj = api.create(pod())
    obj["spec"]["nodeName"] = "node-1"
    obj = api.update(obj)
    assert obj["spec"]["nodeName"] == "node-1"
    obj["spec"]["nodeName"] = "node-2"
    with pytest.raises(ApiError):
        api.update(obj)


def test_job_template_is_immutable(api):
    obj = api.create(job())
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.code == 422
    assert err.value.details["causes"][0]["field"] == "spec.template"
    assert err.value.details["causes"][0]["message"].endswith(": field is immutable")


def test_job_selector_is_immutable(api):
    obj = api.create(job())
    obj["spec"]["selector"] = {"matchLabels": {"other": "x"}}
    with pytest.raises(ApiError) as err:
        api.update(obj)
    fields = [c["field"] for c in err.value.details["causes"]]
    assert fields == ["spec.template.metadata.labels", "spec.selector"]


def test_job_parallelism_can_change(api):
    obj = api.create(job())
    obj["spec"]["parallelism"] = 3
    out = api.update(obj)
    assert (out["spec"]["parallelism"], out["metadata"]["generation"]) == (3, 2)


def test_deployment_selector_is_immutable(api):
    obj = api.create(deployment())
    obj["spec"]["selector"] = {"matchLabels": {"app": "d", "x": "y"}}
    obj["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.details["causes"][0]["field"] == "spec.selector"


def test_service_cluster_ip_is_kept_when_the_client_leaves_it_out(api):
    created = api.create(service())
    desired = service()
    desired["spec"]["ports"] = [{"port": 8080}]
    out = api.update(desired)
    assert out["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    desired["spec"]["clusterIP"] = "10.0.0.99"
    with pytest.raises(ApiError) as err:
        api.update(desired)
    assert err.value.message == ('Service "s" is invalid: spec.clusterIP: Invalid value: '
                                 '"10.0.0.99": field is immutable')


def test_a_rejected_update_changes_nothing(api, trace):
    obj = api.create(pod())
    rv, writes = api.resource_version, len(trace.events)
    obj["spec"]["containers"][0]["image"] = ""
    with pytest.raises(ApiError):
        api.update(obj)
    assert api.resource_version == rv and len(trace.events) == writes
    assert api.get("Pod", "p")["spec"]["containers"][0]["image"] == "busybox:1.36"


def test_update_does_not_mutate_the_callers_object(api):
    obj = api.create(pod())
    del obj["spec"]["restartPolicy"]
    snapshot = {**obj, "spec": dict(obj["spec"])}
    api.update(obj)
    assert obj == snapshot


def test_trace_records_each_write_with_its_caller(api, trace):
    obj = api.create(cm(), caller="operator-1")
    obj["data"] = {"k": "v2"}
    api.update(obj, caller="operator-2")
    assert trace.events[-2:] == [
        ("write", {"verb": "create", "kind": "ConfigMap", "ns": "default", "name": "c",
                   "rv": int(obj["metadata"]["resourceVersion"]), "caller": "operator-1"}),
        ("write", {"verb": "update", "kind": "ConfigMap", "ns": "default", "name": "c",
                   "rv": api.resource_version, "caller": "operator-2"}),
    ]
