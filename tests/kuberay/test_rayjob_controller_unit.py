"""Ports of ``rayjob_controller_unit_test.go``: single functions of the RayJob reconciler, called
directly on a plain client (Go's fake client), with API failures injected as network faults
(Go's interceptors). The batch-scheduler and metrics cases are not ported (neither is emulated)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from test_raycluster_support import NS
from test_rayjob_support import FakeRayDashboardClient, rayjob

from emu.faults import FailRequests
from emu.kuberay.raycluster import EventRecorder, rfc3339
from emu.kuberay.rayjob import (
    RayJobReconciler,
    RayJobReconcilerOptions,
    check_is_restart_count_exceeded,
    check_job_status_check_timeout_and_update_status_if_needed,
    check_submitter_finished_timeout_and_update_status_if_needed,
    check_transition_grace_period_and_update_status_if_needed,
    get_job_status_check_timeout_seconds,
    get_submitter_template,
    init_ray_job_status_if_need,
    record_job_status_check_failure,
    select_most_impactful_rule,
    update_status_to_suspending_if_needed,
)


async def _idle(process: Any) -> None:
    await asyncio.Event().wait()


def reconciler(sim: Any, fake: FakeRayDashboardClient | None = None,
               env: dict[str, str] | None = None) -> RayJobReconciler:
    """A reconciler on a plain client from its own process (its Events are written by it)."""
    proc = sim.processes.find("rayjob-controller")
    if proc is None or not proc.alive:
        proc = sim.start_process("rayjob-controller", _idle)
    client = sim.client(process=proc)
    dashboard = fake or FakeRayDashboardClient()
    return RayJobReconciler(client, RayJobReconcilerOptions(env=env or {}),
                            dashboard_client_func=lambda _c, _u: dashboard,
                            recorder=EventRecorder(client, "rayjob-controller", spawn=proc.spawn))


async def _events(sim: Any, r: RayJobReconciler) -> list[str]:
    await r.recorder.flush()
    items = sorted(sim.api.list("Event", NS)["items"],
                   key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [f"{e['type']} {e['reason']} {e['message']}" for e in items]


async def _stored(sim: Any, obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = await sim.client().create(obj)
    return out


def _cluster() -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "test-raycluster", "namespace": NS},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}}


async def test_create_k8s_job_if_need_keeps_an_existing_job_and_creates_a_missing_one(sim):
    """TestCreateRayJobSubmitterIfNeed."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    existing = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "test-rayjob", "namespace": NS},
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox"}]}}}}
    await sim.client().create(existing)
    assert await r.create_k8s_job_if_need(rj, _cluster()) is None
    job = await sim.client().get("Job", "test-rayjob", NS)
    assert "labels" not in job["metadata"]  # untouched

    await sim.client().delete("Job", "test-rayjob", NS, propagation_policy="Background")
    await sim.sleep(1)
    assert await r.create_k8s_job_if_need(rj, _cluster()) is None
    job = await sim.client().get("Job", "test-rayjob", NS)
    assert job["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "test-rayjob"
    assert job["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/created-by"] == \
        "kuberay-operator"


def test_get_submitter_template_uses_the_user_template_and_fills_the_default_command():
    """TestGetSubmitterTemplate: a user command is kept; an empty one gets KubeRay's script; the
    env carries the dashboard address and submission id from status."""
    rj = rayjob("test-rayjob")
    rj["status"] = {"dashboardURL": "test-url", "jobId": "test-job-id"}
    cluster = {"metadata": {"name": "c"}, "spec": rj["spec"]["rayClusterSpec"]}
    default = get_submitter_template(rj, cluster)
    container = default["spec"]["containers"][0]
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    assert "ray job submit --address http://test-url --no-wait" in container["args"][0]
    assert "--submission-id test-job-id -- sleep 999 ;" in container["args"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"PYTHONUNBUFFERED": "1", "RAY_DASHBOARD_ADDRESS": "test-url",
                   "RAY_JOB_SUBMISSION_ID": "test-job-id"}
    rj["spec"]["submitterPodTemplate"] = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "s", "image": "img", "command": ["user-command"]}]}}
    user = get_submitter_template(rj, cluster)
    assert user["spec"]["containers"][0]["command"] == ["user-command"]
    assert "args" not in user["spec"]["containers"][0]


@pytest.mark.parametrize(("restarts", "exit_code", "expected"), [
    (1, 1, False),   # restart count below limit of 2
    (2, 1, True),    # restart count at limit of 2
    (3, 0, False),   # successful exit should not trigger failure
])
def test_check_is_restart_count_exceeded(restarts, exit_code, expected):
    """TestCheckIsRestartCountExceeded."""
    pod = {"status": {"containerStatuses": [{
        "name": "ray-job-submitter", "restartCount": restarts,
        "lastState": {"terminated": {"exitCode": 1}},
        "state": {"terminated": {"exitCode": exit_code}}}]}}
    exceeded, status = check_is_restart_count_exceeded(pod, 2)
    assert exceeded is expected
    assert (status is not None) is (exit_code != 0)


@pytest.mark.parametrize(("suspend", "status", "expected"), [
    (False, "Running", False),      # Suspend is false
    (True, "Suspended", False),     # status not allowed to transition to suspending
    (True, "Running", True),        # allowed
    (True, "Initializing", True),
])
def test_update_status_to_suspending_if_needed(suspend, status, expected):
    """TestUpdateStatusToSuspendingIfNeeded."""
    rj = {"spec": {"suspend": suspend}, "status": {"jobDeploymentStatus": status}}
    assert update_status_to_suspending_if_needed(rj) is expected
    assert rj["status"]["jobDeploymentStatus"] == ("Suspending" if expected else status)


@pytest.mark.parametrize("changed", [False, True])
async def test_update_ray_job_status_writes_only_when_the_deployment_status_changes(sim, changed):
    """TestUpdateRayJobStatus: other fields (here the message) ride along only with a change of
    jobStatus, jobDeploymentStatus, cluster status or failure timer."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    rj["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    rj = await sim.client().update_status(rj)
    new = dict(rj, status=dict(rj["status"], message="new message"))
    if changed:
        new["status"]["jobDeploymentStatus"] = "Complete"
    assert await r.update_ray_job_status(rj, new) is None
    stored = await sim.client().get("RayJob", "test-rayjob", NS)
    assert stored["status"].get("message") == ("new message" if changed else None)
    assert ("endTime" in stored["status"]) is changed  # Complete is terminal


async def test_update_ray_job_status_persists_then_clears_the_failure_start_time(sim):
    """TestUpdateRayJobStatusPersistsJobStatusCheckFailureStartTime and
    TestUpdateRayJobStatusClearsJobStatusCheckFailureStartTime: the timer alone is a change."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    rj["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    rj = await sim.client().update_status(rj)
    new = dict(rj, status=dict(rj["status"], jobStatusCheckFailureStartTime=rfc3339(sim.now)))
    assert await r.update_ray_job_status(rj, new) is None
    stored = await sim.client().get("RayJob", "test-rayjob", NS)
    assert stored["status"]["jobStatusCheckFailureStartTime"] == rfc3339(sim.now)
    cleared = dict(stored, status=dict(stored["status"], jobStatusCheckFailureStartTime=None))
    assert await r.update_ray_job_status(stored, cleared) is None
    stored = await sim.client().get("RayJob", "test-rayjob", NS)
    assert "jobStatusCheckFailureStartTime" not in stored["status"]


async def test_failed_to_create_ray_job_submitter_event(sim):
    """TestFailedToCreateRayJobSubmitterEvent: a failing Create returns the error and warns."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    sim.faults.do(FailRequests(verb="create", kind="Job", caller="rayjob-controller",
                                  code=500))
    template = {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "ray-submit", "image": "rayproject/ray"}]}}
    err = await r.create_new_k8s_job(rj, template)
    assert err is not None
    assert (await _events(sim, r))[0].startswith(
        "Warning FailedToCreateRayJobSubmitter Failed to create new Kubernetes Job "
        "default/test-rayjob: ")


async def test_failed_create_ray_cluster_event(sim):
    """TestFailedCreateRayClusterEvent."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    rj["status"] = {"rayClusterName": "test-raycluster"}
    sim.faults.do(FailRequests(verb="create", kind="RayCluster", caller="rayjob-controller",
                                  code=500))
    cluster, err = await r.get_or_create_ray_cluster_instance(rj)
    assert cluster is None and err is not None
    assert (await _events(sim, r))[0].startswith(
        "Warning FailedToCreateRayCluster Failed to create RayCluster default/test-raycluster: ")


async def test_failed_delete_ray_job_submitter_event(sim):
    """TestFailedDeleteRayJobSubmitterEvent."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    await sim.client().create({"apiVersion": "batch/v1", "kind": "Job",
                               "metadata": {"name": "test-rayjob", "namespace": NS},
                               "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                              "containers": [{"name": "c",
                                                                              "image": "b"}]}}}})
    sim.faults.do(FailRequests(verb="delete", kind="Job", caller="rayjob-controller",
                                  code=500))
    deleted, err = await r.delete_submitter_job(rj)
    assert not deleted and err is not None
    assert (await _events(sim, r))[0].startswith(
        "Warning FailedToDeleteRayJobSubmitter Failed to delete submitter K8s Job "
        "default/test-rayjob: ")


async def test_failed_delete_ray_cluster_event(sim):
    """TestFailedDeleteRayClusterEvent."""
    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    rj["status"] = {"rayClusterName": "test-raycluster"}
    await sim.client().create(_cluster())
    sim.faults.do(FailRequests(verb="delete", kind="RayCluster", caller="rayjob-controller",
                                  code=500))
    deleted, err = await r.delete_cluster_resources(rj)
    assert not deleted and err is not None
    assert (await _events(sim, r))[0].startswith(
        "Warning FailedToDeleteRayCluster Failed to delete cluster default/test-raycluster: ")


def test_get_job_status_check_timeout_seconds():
    """TestGetJobStatusCheckTimeoutSeconds: the env value, else 300 (unparsable, unset, ≤ 0)."""
    assert get_job_status_check_timeout_seconds({"RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "120"}) \
        == 120
    assert get_job_status_check_timeout_seconds(
        {"RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "invalid"}) == 300
    assert get_job_status_check_timeout_seconds({}) == 300
    assert get_job_status_check_timeout_seconds({"RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "0"}) \
        == 300


def test_record_job_status_check_failure_stamps_only_the_first_failure():
    """TestRecordJobStatusCheckFailure."""
    rj: dict[str, Any] = {"status": {"jobId": "test-job"}}
    assert record_job_status_check_failure(rj, 10.0) is True
    assert rj["status"]["jobStatusCheckFailureStartTime"] == rfc3339(10.0)
    assert record_job_status_check_failure(rj, 20.0) is False
    assert rj["status"]["jobStatusCheckFailureStartTime"] == rfc3339(10.0)


def test_check_job_status_check_timeout_and_update_status_if_needed():
    """TestCheckJobStatusCheckTimeoutAndUpdateStatusIfNeeded."""
    rj: dict[str, Any] = {"status": {"jobId": "test-job"}}
    assert not check_job_status_check_timeout_and_update_status_if_needed(rj, 100.0, {})
    rj["status"]["jobStatusCheckFailureStartTime"] = rfc3339(100.0)
    assert not check_job_status_check_timeout_and_update_status_if_needed(rj, 100.0, {})
    env = {"RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "1"}
    rj["status"]["jobStatusCheckFailureStartTime"] = rfc3339(98.0)
    assert check_job_status_check_timeout_and_update_status_if_needed(rj, 100.0, env)
    assert rj["status"]["jobDeploymentStatus"] == "Failed"
    assert rj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"
    assert rj["status"]["message"] == ("Job status checks have been failing since "
                                       "2026-01-01 00:01:38; exceeded timeout of 1s")


# -- Beyond the Go file: the remaining pure functions of SPEC §3.3 and §3.7 ----------------------


def test_init_ray_job_status_generates_ids_except_in_interactive_mode():
    rng = random.Random(1)
    rj: dict[str, Any] = {"metadata": {"name": "demo-job"}, "spec": {}}
    init_ray_job_status_if_need(rj, 5.0, rng)
    assert rj["status"]["jobId"].startswith("demo-job-") and len(rj["status"]["jobId"]) == 14
    assert rj["status"]["rayClusterName"].startswith("demo-job-")
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["startTime"]) == (
        "Initializing", rfc3339(5.0))
    interactive: dict[str, Any] = {"metadata": {"name": "i"}, "spec": {
        "submissionMode": "InteractiveMode", "clusterSelector": {"ray.io/cluster": "shared"}}}
    init_ray_job_status_if_need(interactive, 5.0, rng)
    assert "jobId" not in interactive["status"]
    assert interactive["status"]["rayClusterName"] == "shared"


def test_transition_grace_period_completes_a_running_rayjob_300_s_after_ray_ended():
    rj: dict[str, Any] = {"status": {"jobDeploymentStatus": "Running", "jobStatus": "FAILED",
                                     "rayJobInfo": {"endTime": rfc3339(10.0)}}}
    assert not check_transition_grace_period_and_update_status_if_needed(rj, 309.0, {})
    assert check_transition_grace_period_and_update_status_if_needed(rj, 310.0, {})
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["reason"]) == (
        "Failed", "JobDeploymentStatusTransitionGracePeriodExceeded")


def test_submitter_finished_timeout_fails_after_30_s():
    rj: dict[str, Any] = {"status": {"jobDeploymentStatus": "Running"}}
    assert not check_submitter_finished_timeout_and_update_status_if_needed(rj, None, 1000.0)
    assert not check_submitter_finished_timeout_and_update_status_if_needed(rj, 100.0, 129.0)
    assert check_submitter_finished_timeout_and_update_status_if_needed(rj, 100.0, 130.0)
    assert rj["status"]["message"] == ("The RayJob submitter finished at 2026-01-01 00:01:40 "
                                       "but the ray job did not reach terminal state within 30s")
    assert rj["status"]["jobStatus"] == "FAILED"


def test_select_most_impactful_rule_prefers_delete_self_then_cluster_then_workers():
    rules = [{"policy": p} for p in ("DeleteNone", "DeleteWorkers", "DeleteCluster")]
    assert select_most_impactful_rule(rules)["policy"] == "DeleteCluster"
    assert select_most_impactful_rule([*rules, {"policy": "DeleteSelf"}])["policy"] == \
        "DeleteSelf"
