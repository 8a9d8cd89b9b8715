"""Regression tests for the kube-apiserver contract violations an independent fuzzer found
(issue 16): each failed before its fix."""

from __future__ import annotations

import pytest
from conformance_objects import cm, pod

from emu.apiserver.errors import BadRequest, Conflict
from emu.kernel.clock import parse_time


def drain(stream):
    out = []
    while stream.pending:
        coro = stream.__anext__()
        try:
            coro.send(None)
        except StopIteration as done:
            out.append(done.value)
    return out


# -- an update that removes the last finalizer ------------------------------------------------------


def test_emptying_finalizers_deletes_the_stored_object_not_the_updates_content(api):
    api.create(cm("a", labels={"app": "web"}, finalizers=["x.io/f"]))
    api.delete("ConfigMap", "a", "default")
    stored = api.get("ConfigMap", "a", "default")
    watch = api.watch("ConfigMap", "default", label_selector="app=web",
                      resource_version=str(api.resource_version))
    update = api.get("ConfigMap", "a", "default")
    update["metadata"]["finalizers"] = []
    update["metadata"]["labels"] = {"app": "other"}
    update["data"] = {"k": "never stored"}
    out = api.update(update)
    assert out["data"] == {"k": "v"} and out["metadata"]["labels"] == {"app": "web"}
    assert out["metadata"]["finalizers"] == stored["metadata"]["finalizers"]
    events = drain(watch)
    assert [e["type"] for e in events] == ["DELETED"]
    assert events[0]["object"]["metadata"]["labels"] == {"app": "web"}
    assert events[0]["object"]["data"] == {"k": "v"}
    assert events[0]["object"]["metadata"]["resourceVersion"] == str(api.resource_version)


# -- re-deleting a terminating Pod ------------------------------------------------------------------


@pytest.fixture
def terminating(api, clock):
    """A scheduled Pod deleted with a 60 s grace period at t=10."""
    api.create(pod("p", node="n1", labels={"app": "x"}))
    clock.advance(10)
    api.delete("Pod", "p", "default", grace_period_seconds=60)
    return api.get("Pod", "p", "default")


def test_only_an_explicit_shorter_grace_shortens_and_the_deadline_moves_by_the_difference(
        api, clock, terminating):
    gen = terminating["metadata"]["generation"]
    clock.advance(20)
    out = api.delete("Pod", "p", "default", grace_period_seconds=30)
    assert out["metadata"]["deletionGracePeriodSeconds"] == 30
    # kube: new deadline = old deadline - old grace + new grace (not now + new grace)
    assert parse_time(out["metadata"]["deletionTimestamp"]) == 10 + 60 - 60 + 30
    assert out["metadata"]["generation"] == gen  # no second generation bump


def test_a_longer_or_absent_grace_changes_nothing(api, clock, terminating):
    rev = api.resource_version
    clock.advance(5)
    assert api.delete("Pod", "p", "default", grace_period_seconds=90) == terminating
    assert api.delete("Pod", "p", "default") == terminating  # spec default 30 < 60: still nothing
    assert api.resource_version == rev


def test_a_finished_terminating_pod_is_not_removed_by_a_delete_without_grace(api, terminating):
    obj = api.get("Pod", "p", "default")
    obj["status"] = {"phase": "Succeeded"}
    api.update_status(obj)
    api.delete("Pod", "p", "default")
    assert api.get("Pod", "p", "default")["metadata"]["deletionGracePeriodSeconds"] == 60
    api.delete("Pod", "p", "default", grace_period_seconds=0)
    with pytest.raises(Exception, match="not found"):
        api.get("Pod", "p", "default")


@pytest.mark.parametrize("policy", ["Orphan", "Foreground"])
def test_propagation_policy_adds_no_finalizer_while_graceful_deletion_is_pending(
        api, terminating, policy):
    rev = api.resource_version
    out = api.delete("Pod", "p", "default", propagation_policy=policy)
    assert "finalizers" not in out["metadata"] and api.resource_version == rev


# -- no-op writes and pruning ----------------------------------------------------------------------


@pytest.mark.parametrize("meta", [{"labels": {}}, {"finalizers": []}, {"annotations": {}},
                                  {"ownerReferences": []}])
def test_empty_metadata_equals_absent_and_is_a_no_op(api, meta):
    api.create(cm("a"))
    rev = api.resource_version
    obj = api.get("ConfigMap", "a", "default")
    obj["metadata"].update(meta)
    out = api.update(obj)
    assert api.resource_version == rev and out["metadata"]["resourceVersion"] == str(rev)
    assert not set(meta) & set(out["metadata"])
    api.patch("ConfigMap", "a", {"metadata": meta}, namespace="default")
    assert api.resource_version == rev


def test_unknown_fields_of_a_built_in_kind_are_pruned_and_writing_them_is_a_no_op(api):
    created = api.create({**cm("a"), "status": {"x": 1}, "spek": 2})
    assert "status" not in created and "spek" not in created
    rev = api.resource_version
    obj = api.get("ConfigMap", "a", "default")
    obj["status"] = {"phase": "whatever"}
    api.update(obj)
    api.patch("ConfigMap", "a", {"status": {"y": 2}}, namespace="default")
    assert api.resource_version == rev
    assert "status" not in api.get("ConfigMap", "a", "default")


def test_field_validation_strict_refuses_unknown_fields_and_writes_nothing(api):
    rev = api.resource_version
    # in the body's order, as kube's decoder meets them (metadata keeps cm's position)
    with pytest.raises(BadRequest, match='strict decoding error: unknown field '
                                         '"metadata.colour", unknown field "status"'):
        api.create({**cm("a"), "status": {}, "metadata": {**cm("a")["metadata"],
                                                          "colour": "red"}},
                   field_validation="Strict")
    with pytest.raises(BadRequest, match="fieldValidation"):
        api.create(cm("a"), field_validation="Loud")
    assert api.resource_version == rev
    api.create(cm("a"), field_validation="Strict")
    with pytest.raises(BadRequest, match="unknown field"):
        api.patch("ConfigMap", "a", {"stauts": 1}, namespace="default", field_validation="Strict")


# -- dry run ---------------------------------------------------------------------------------------


def test_dry_run_answers_carry_no_future_resource_version(api):
    rev = api.resource_version
    created = api.create(cm("a"), dry_run=True)
    assert "resourceVersion" not in created["metadata"] and api.resource_version == rev
    api.create(cm("a", finalizers=["x.io/f"]))
    rev = api.resource_version
    obj = api.get("ConfigMap", "a", "default")
    obj["data"] = {"k": "w"}
    assert api.update(obj, dry_run=True)["metadata"]["resourceVersion"] == str(rev)
    patched = api.patch("ConfigMap", "a", {"data": {"k": "z"}}, namespace="default", dry_run=True)
    assert patched["metadata"]["resourceVersion"] == str(rev) and patched["data"] == {"k": "z"}
    deleting = api.delete("ConfigMap", "a", "default", dry_run=True)
    assert deleting["metadata"]["resourceVersion"] == str(rev)
    assert "deletionTimestamp" in deleting["metadata"]
    assert api.resource_version == rev
    assert "deletionTimestamp" not in api.get("ConfigMap", "a", "default")["metadata"]


# -- update_status and the uid precondition --------------------------------------------------------


def test_update_status_checks_the_uid_precondition(api):
    api.create(pod("p"))
    old = api.get("Pod", "p", "default")
    api.delete("Pod", "p", "default")
    api.create(pod("p"))
    rev = api.resource_version
    old["metadata"].pop("resourceVersion")
    old["status"] = {"phase": "Failed"}
    with pytest.raises(Conflict, match="Precondition failed: UID in precondition"):
        api.update_status(old)
    assert api.resource_version == rev
    assert api.get("Pod", "p", "default").get("status", {}).get("phase") != "Failed"


# -- a Job's default propagation --------------------------------------------------------------------


def test_a_batch_v1_job_orphans_its_dependents_by_default(api):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox"}]}}}}
    api.create(job)
    out = api.delete("Job", "j", "default")
    assert out["metadata"]["finalizers"] == ["orphan"]
    api.create({**job, "metadata": {"name": "k"}})
    with pytest.raises(Exception, match="not found"):
        api.delete("Job", "k", "default", propagation_policy="Background")
        api.get("Job", "k", "default")


def test_background_removes_gc_finalizers_from_an_object_being_deleted(api):
    api.create(cm("a", finalizers=["x.io/f"]))
    api.delete("ConfigMap", "a", "default", propagation_policy="Orphan")
    assert api.get("ConfigMap", "a", "default")["metadata"]["finalizers"] == ["x.io/f", "orphan"]
    api.delete("ConfigMap", "a", "default", propagation_policy="Background")
    assert api.get("ConfigMap", "a", "default")["metadata"]["finalizers"] == ["x.io/f"]


# -- metadata sent to /status ----------------------------------------------------------------------


def test_status_of_a_pod_writes_labels_and_annotations_but_not_owner_references(api):
    api.create(pod("p", labels={"a": "1"}))
    obj = api.get("Pod", "p", "default")
    obj["metadata"]["labels"] = {"a": "2"}
    obj["metadata"]["annotations"] = {"n": "x"}
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "n",
                                           "uid": "u"}]
    obj["spec"]["nodeName"] = "ignored"
    obj["status"] = {"phase": "Running"}
    out = api.update_status(obj)
    assert out["metadata"]["labels"] == {"a": "2"} and out["metadata"]["annotations"] == {"n": "x"}
    assert "ownerReferences" not in out["metadata"] and "nodeName" not in out["spec"]
    assert out["status"] == {"phase": "Running"}


def test_status_of_a_deployment_keeps_labels_and_of_a_custom_resource_keeps_all_metadata(api):
    from conformance_objects import deployment, raycluster
    api.create(deployment("d"))
    obj = api.get("Deployment", "d", "default")
    labels = obj["metadata"].get("labels")
    obj["metadata"]["labels"] = {"new": "x"}
    obj["metadata"]["annotations"] = {"n": "x"}
    out = api.update_status(obj)
    assert out["metadata"].get("labels") == labels and out["metadata"]["annotations"] == {"n": "x"}
    api.create(raycluster("rc"))
    rc = api.get("RayCluster", "rc", "default")
    rc["metadata"]["labels"] = {"new": "x"}
    rc["status"] = {"state": "ready"}
    out = api.update_status(rc)
    assert "new" not in (out["metadata"].get("labels") or {})


def test_status_cannot_add_finalizers_while_deleting_and_validates_labels(api):
    api.create(pod("p", node="n1", finalizers=["x.io/f"]))
    api.delete("Pod", "p", "default")
    obj = api.get("Pod", "p", "default")
    obj["metadata"]["finalizers"] = ["x.io/f", "y.io/g"]
    with pytest.raises(Exception, match="no new finalizers can be added"):
        api.update_status(obj)
    obj["metadata"]["finalizers"] = ["x.io/f"]
    obj["metadata"]["labels"] = {"bad key!": "v"}
    with pytest.raises(Exception, match="Invalid value"):
        api.update_status(obj)
