"""RayJob behaviour pinned against rayjob_controller.go, found unpinned by a mutation sample
(scripts/mutation.py): deadlines, the submitter-finished timeout, deletion timers counted from
``endTime``, and retries of failed cleanup. Each test states the Go behaviour it holds."""

from __future__ import annotations

from typing import Any

import pytest
from test_raycluster_support import NS
from test_rayjob_support import (
    FakeRayDashboardClient,
    consistently_status,
    get_or_none,
    get_rayjob,
    job_info,
    rayjob,
    start_kuberay,
    to_running,
    update_k8s_job_to_complete,
    wait_status,
)

from emu.faults import FailRequests
from emu.kernel.clock import parse_time
from emu.kuberay.raycluster import rfc3339
from emu.kuberay.rayjob import (
    DEFAULT_SUBMITTER_FINISHED_TIMEOUT,
    check_active_deadline_and_update_status_if_needed,
    check_pre_running_deadline_and_update_status_if_needed,
    check_submitter_finished_timeout_and_update_status_if_needed,
    requeue_delay_for,
)


def test_pre_running_deadline_fires_at_start_plus_deadline_not_before() -> None:
    """checkPreRunningDeadlineAndUpdateStatusIfNeeded: ``time.Now().Before(start + d)`` is
    false from start + d on."""
    rj: dict[str, Any] = {"spec": {"preRunningDeadlineSeconds": 5},
                          "status": {"startTime": rfc3339(100.0),
                                     "jobDeploymentStatus": "Initializing"}}
    assert not check_pre_running_deadline_and_update_status_if_needed(rj, 104.999)
    assert rj["status"]["jobDeploymentStatus"] == "Initializing"
    assert check_pre_running_deadline_and_update_status_if_needed(rj, 105.0)
    assert rj["status"]["jobDeploymentStatus"] == "Failed"
    assert rj["status"]["reason"] == "PreRunningDeadlineExceeded"
    assert rj["status"]["message"] == (
        "The RayJob has passed the preRunningDeadlineSeconds. StartTime: "
        "2026-01-01 00:01:40 +0000 UTC. PreRunningDeadlineSeconds: 5")
    unset: dict[str, Any] = {"spec": {}, "status": {"startTime": rfc3339(0.0)}}
    assert not check_pre_running_deadline_and_update_status_if_needed(unset, 1e9)


def test_active_deadline_fires_at_start_plus_deadline_not_before() -> None:
    rj: dict[str, Any] = {"spec": {"activeDeadlineSeconds": 7},
                          "status": {"startTime": rfc3339(10.0), "jobDeploymentStatus": "Running"}}
    assert not check_active_deadline_and_update_status_if_needed(rj, 16.999)
    assert rj["status"]["jobDeploymentStatus"] == "Running"
    assert check_active_deadline_and_update_status_if_needed(rj, 17.0)
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["reason"]) == (
        "Failed", "DeadlineExceeded")
    assert not check_active_deadline_and_update_status_if_needed(
        {"spec": {}, "status": {"startTime": rfc3339(0.0)}}, 1e9)


def test_submitter_finished_timeout_is_30_s_and_fails_the_deployment() -> None:
    """checkSubmitterFinishedTimeoutAndUpdateStatusIfNeeded: jobStatus FAILED, deployment
    Failed, reason JobDeploymentStatusTransitionGracePeriodExceeded."""
    assert DEFAULT_SUBMITTER_FINISHED_TIMEOUT == 30.0
    rj: dict[str, Any] = {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}}
    assert not check_submitter_finished_timeout_and_update_status_if_needed(rj, 100.0, 129.999)
    assert rj["status"] == {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    assert check_submitter_finished_timeout_and_update_status_if_needed(rj, 100.0, 130.0)
    assert rj["status"]["jobDeploymentStatus"] == "Failed"
    assert rj["status"]["jobStatus"] == "FAILED"
    assert rj["status"]["reason"] == "JobDeploymentStatusTransitionGracePeriodExceeded"


def test_requeue_delay_for_waits_until_the_deadline_plus_2_s() -> None:
    assert requeue_delay_for(110.0, 100.0) == 12.0


async def test_a_rayjob_whose_cluster_never_becomes_ready_fails_at_its_pre_running_deadline(sim: Any) -> None:
    """The cluster's Pods never run: Initializing until startTime + preRunningDeadlineSeconds,
    then Failed/PreRunningDeadlineExceeded (and it stays Failed)."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rj-prerun", preRunningDeadlineSeconds=4))
    rj = await wait_status(sim, "rj-prerun", "Initializing", timeout=3)
    start = parse_time(rj["status"]["startTime"])
    rj = await wait_status(sim, "rj-prerun", "Failed", timeout=10)
    assert rj["status"]["reason"] == "PreRunningDeadlineExceeded"
    failed_at = sim.now
    assert start + 4 <= failed_at <= start + 4 + 3.5  # the next 3 s requeue after the deadline
    await consistently_status(sim, "rj-prerun", "Failed", seconds=5)


async def test_a_running_rayjob_past_its_active_deadline_fails_and_stays_failed(sim: Any) -> None:
    """Running: checkActiveDeadline wins before the dashboard is asked again, so a Ray job still
    RUNNING does not bring the RayJob back."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rj-active", activeDeadlineSeconds=20,
                                      shutdownAfterJobFinishes=False))
    rj = await to_running(sim, "rj-active")
    start = parse_time(rj["status"]["startTime"])
    assert sim.now < start + 20
    rj = await wait_status(sim, "rj-active", "Failed", timeout=30)
    assert rj["status"]["reason"] == "DeadlineExceeded"
    assert start + 20 <= sim.now <= start + 20 + 3.5
    await consistently_status(sim, "rj-active", "Failed", seconds=10)
    rj = await get_rayjob(sim, "rj-active")
    assert rj["status"]["reason"] == "DeadlineExceeded"


async def test_a_submitter_finished_with_the_ray_job_still_running_fails_after_30_s(sim: Any) -> None:
    """K8sJobMode: the submitter Job completed but the dashboard still says RUNNING: the RayJob
    stays Running for 30 s from the Job's finish, then Failed."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rj-submitter", shutdownAfterJobFinishes=False))
    await to_running(sim, "rj-submitter")
    fake.get_job_info_mock = job_info("RUNNING", sim)
    await update_k8s_job_to_complete(sim, "rj-submitter")
    finished = sim.now + 1  # update_k8s_job_to_complete stamps the finish 1 s ahead
    await sim.sleep(25)
    assert (await get_rayjob(sim, "rj-submitter"))["status"]["jobDeploymentStatus"] == "Running"
    rj = await wait_status(sim, "rj-submitter", "Failed", timeout=15)
    assert finished + 30 <= sim.now <= finished + 30 + 3.5
    assert rj["status"]["jobStatus"] == "FAILED"
    assert rj["status"]["reason"] == "JobDeploymentStatusTransitionGracePeriodExceeded"


async def _gone(sim: Any, kind: str, name: str, timeout: float) -> None:
    async def absent() -> bool:
        return await get_or_none(sim, kind, name) is None

    await sim.wait_until(absent, timeout=timeout, every=0.25, what=f"{kind} {name} deleted")


async def _finish(sim: Any, fake: FakeRayDashboardClient, name: str) -> dict[str, Any]:
    await to_running(sim, name)
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await update_k8s_job_to_complete(sim, name)
    return await wait_status(sim, name, "Complete", timeout=5)


async def test_deletion_rule_ttl_counts_from_end_time(sim: Any) -> None:
    """handleDeletionRules: deletionTime = status.endTime + ttlSeconds; before it, requeue."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake, gates="RayJobDeletionPolicy=true")
    rule = {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 20}}
    await sim.client().create(rayjob("rj-ttl", shutdownAfterJobFinishes=False,
                                      deletionStrategy={"deletionRules": [rule]}))
    rj = await _finish(sim, fake, "rj-ttl")
    end = parse_time(rj["status"]["endTime"])
    cluster = rj["status"]["rayClusterName"]
    await sim.sleep(end + 19.5 - sim.now)
    assert await get_or_none(sim, "RayCluster", cluster) is not None
    await _gone(sim, "RayCluster", cluster, 5)
    assert end + 20 <= sim.now <= end + 20 + 2.5


async def test_shutdown_after_job_finishes_ttl_counts_from_end_time(sim: Any) -> None:
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rj-shutdown", ttlSecondsAfterFinished=15))
    rj = await _finish(sim, fake, "rj-shutdown")
    end = parse_time(rj["status"]["endTime"])
    cluster = rj["status"]["rayClusterName"]
    await sim.sleep(end + 14.5 - sim.now)
    assert await get_or_none(sim, "RayCluster", cluster) is not None
    await _gone(sim, "RayCluster", cluster, 5)
    assert end + 15 <= sim.now <= end + 15 + 2.5


async def test_a_failed_cluster_delete_after_the_job_finished_is_retried(sim: Any) -> None:
    """handleShutdownAfterJobFinishes returns the error with a 3 s requeue: once the API server
    accepts deletes again, the cluster goes."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rj-retry"))
    await to_running(sim, "rj-retry")
    sim.faults.do(FailRequests(verb="delete", kind="RayCluster", caller="kuberay-operator",
                               code=500, duration=20))
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await update_k8s_job_to_complete(sim, "rj-retry")
    rj = await wait_status(sim, "rj-retry", "Complete", timeout=5)
    cluster = rj["status"]["rayClusterName"]
    await sim.sleep(10)
    assert await get_or_none(sim, "RayCluster", cluster) is not None
    await _gone(sim, "RayCluster", cluster, 30)
    assert sim.now >= 20
    assert await get_or_none(sim, "Job", "rj-retry") is not None  # kept for its logs
    assert (await get_rayjob(sim, "rj-retry"))["metadata"]["namespace"] == NS


async def test_delete_cluster_resources_reports_each_outcome(sim: Any) -> None:
    """deleteClusterResources: NotFound = deleted; a terminating cluster = not yet; any other
    error (an unreachable API server included) = (false, err); clusterSelector = nothing to do."""
    from test_rayjob_controller_unit import _cluster, _stored, reconciler

    from emu.kernel.network import NetworkError

    r = reconciler(sim)
    rj = await _stored(sim, rayjob("test-rayjob"))
    rj["status"] = {"rayClusterName": "test-raycluster"}
    assert await r.delete_cluster_resources({**rj, "spec": {"clusterSelector": {"a": "b"}}}) == (
        True, None)
    assert await r.delete_cluster_resources(rj) == (True, None)  # no such cluster
    sim.faults.outage("apiserver", duration=1)
    deleted, err = await r.delete_cluster_resources(rj)
    assert not deleted and isinstance(err, NetworkError)
    await sim.sleep(2)
    cluster = _cluster()
    cluster["metadata"]["finalizers"] = ["test/hold"]
    await sim.client().create(cluster)
    assert await r.delete_cluster_resources(rj) == (False, None)  # deleted now, not yet gone
    assert await r.delete_cluster_resources(rj) == (False, None)  # terminating: no new delete
    stored = await sim.client().get("RayCluster", "test-raycluster", NS)
    assert stored["metadata"].get("deletionTimestamp")


def test_check_k8s_job_status_finds_the_failed_condition() -> None:
    from emu.kuberay.rayjob import check_k8s_job_status

    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
    job = {"status": {"conditions": [{"type": "FailureTarget", "status": "True"}, failed]}}
    assert check_k8s_job_status(job) == (True, failed)
    assert check_k8s_job_status({"status": {"conditions": [
        {"type": "Failed", "status": "False"}, {"type": "Complete", "status": "True"}]}}) == (
        False, None)
    assert check_k8s_job_status({}) == (False, None)


async def test_a_failed_submitter_job_fails_the_rayjob_with_submission_failed(sim: Any) -> None:
    """K8sJobMode: the submitter Job's Failed condition ends the RayJob while the Ray job is
    still RUNNING: Failed/SubmissionFailed with the condition's reason and message."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rj-subfail", shutdownAfterJobFinishes=False))
    await to_running(sim, "rj-subfail")
    await update_k8s_job_to_complete(sim, "rj-subfail", failed=True)
    rj = await wait_status(sim, "rj-subfail", "Failed", timeout=5)
    assert rj["status"]["reason"] == "SubmissionFailed"
    assert rj["status"]["message"] == (
        "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the "
        "specified backoff limit")


def test_check_sidecar_container_status_fails_on_a_nonzero_exit_only() -> None:
    from emu.kuberay.rayjob import check_sidecar_container_status

    def head(state: dict[str, Any]) -> dict[str, Any]:
        return {"status": {"containerStatuses": [
            {"name": "ray-head", "state": {"terminated": {"exitCode": 3}}},
            {"name": "ray-job-submitter", "state": state}]}}

    failed = head({"terminated": {"exitCode": 1}})
    ok, cs = check_sidecar_container_status(failed)
    assert ok and cs is not None and cs["name"] == "ray-job-submitter"
    assert check_sidecar_container_status(head({"terminated": {"exitCode": 0}})) == (False, None)
    assert check_sidecar_container_status(head({"running": {}})) == (False, None)
    assert check_sidecar_container_status({"status": {}}) == (False, None)


async def test_reconcile_raises_the_error_of_a_pass(sim: Any) -> None:
    """Reconcile returns (result, err): controller-runtime then backs off and ignores the
    result; the port raises the error."""
    from test_rayjob_controller_unit import reconciler

    from emu.apiserver.errors import ApiError
    from emu.runtime.reconcile import Request

    r = reconciler(sim)
    await sim.client().create(rayjob("rj-err"))
    sim.faults.do(FailRequests(verb="get", kind="RayJob", caller="rayjob-controller", code=500,
                               duration=5))
    with pytest.raises(ApiError) as err:
        await r.reconcile(Request(NS, "rj-err"))
    assert err.value.code == 500


async def test_cluster_selector_mode_creates_no_head_service_of_its_own(sim: Any) -> None:
    from test_rayjob_controller_unit import _cluster, reconciler

    r = reconciler(sim)
    rj = await sim.client().create(rayjob("rj-sel", clusterSelector={"ray.io/cluster": "c"}))
    cluster = await sim.client().create(_cluster())
    assert await r.reconcile_services(rj, cluster) is None
    assert [s["metadata"]["name"] for s in await sim.client().list("Service", NS)] == []


async def test_suspending_a_running_rayjob_clears_what_its_cluster_reported(sim: Any) -> None:
    """Suspending → Suspended: the cluster and submitter are deleted and the status forgets
    them: rayClusterStatus {}, rayClusterName/dashboardURL/jobId/message/reason "", rayJobInfo
    {}, jobStatus "" (JobStatusNew)."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rj-susp"))
    rj = await to_running(sim, "rj-susp")
    assert rj["status"]["rayClusterName"]
    await sim.sleep(3)
    rj = await get_rayjob(sim, "rj-susp")
    assert rj["status"].get("rayClusterStatus")  # mirrored while Running
    rj["spec"]["suspend"] = True
    await sim.client().update(rj)
    rj = await wait_status(sim, "rj-susp", "Suspended", timeout=30)
    st = rj["status"]
    assert st.get("rayClusterStatus", {}) == {} and st.get("rayJobInfo", {}) == {}
    for key in ("rayClusterName", "dashboardURL", "jobId", "message", "reason", "jobStatus"):
        assert st.get(key, "") == "", key


async def test_a_rayjob_managed_by_another_controller_is_left_alone(sim: Any) -> None:
    """Reconcile: spec.managedBy naming another controller (MultiKueue) → no finalizer, no
    status, no cluster."""
    from test_rayjob_controller_unit import reconciler

    from emu.runtime.reconcile import Request

    r = reconciler(sim)
    await sim.client().create(rayjob("rj-ext", managedBy="kueue.x-k8s.io/multikueue"))
    await r.reconcile(Request(NS, "rj-ext"))
    rj = await get_rayjob(sim, "rj-ext")
    assert "status" not in rj and not rj["metadata"].get("finalizers")
    assert list(await sim.client().list("RayCluster", NS)) == []
    await sim.client().create(rayjob("rj-own", managedBy="ray.io/kuberay-operator"))
    await r.reconcile(Request(NS, "rj-own"))
    assert (await get_rayjob(sim, "rj-own"))["metadata"].get("finalizers")


async def test_sidecar_mode_fails_only_on_a_terminated_nonzero_submitter(sim: Any) -> None:
    """checkSubmitterAndUpdateStatusIfNeeded, SidecarMode (gate off): a running submitter
    container changes nothing; one terminated with a non-zero exit code → Failed/
    SubmissionFailed."""
    from test_rayjob_controller_unit import _cluster, _stored, reconciler

    r = reconciler(sim)
    rj = await _stored(sim, rayjob("rj-side", submissionMode="SidecarMode"))
    await sim.client().create(_cluster())
    rj["status"] = {"rayClusterName": "test-raycluster", "jobDeploymentStatus": "Running"}
    pod = await sim.client().create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "head", "namespace": NS, "labels": {
            "ray.io/cluster": "test-raycluster", "ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "ray-head", "image": "ray"},
                                {"name": "ray-job-submitter", "image": "ray"}]}})

    async def submitter(state: dict[str, Any]) -> None:
        nonlocal pod
        pod["status"] = {"phase": "Running", "containerStatuses": [
            {"name": "ray-head", "state": {"running": {}}},
            {"name": "ray-job-submitter", "state": state}]}
        pod = await sim.client().update_status(pod)

    await submitter({"running": {}})
    assert await r.check_submitter_and_update_status_if_needed(rj) == (False, None, None)
    assert rj["status"]["jobDeploymentStatus"] == "Running"
    await submitter({"terminated": {"exitCode": 2, "reason": "Error",
                                    "finishedAt": rfc3339(sim.now)}})
    should_update, _finished, err = await r.check_submitter_and_update_status_if_needed(rj)
    assert should_update and err is None
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["reason"]) == (
        "Failed", "SubmissionFailed")
    assert rj["status"]["message"] == (
        "Ray head pod container ray-job-submitter terminated with exit code 2: Error")


async def test_a_validation_failed_rayjob_is_not_requeued(sim: Any) -> None:
    """Reconcile: an invalid spec → ValidationFailed written, then ``ctrl.Result{}, nil``."""
    from test_rayjob_controller_unit import reconciler

    from emu.runtime.reconcile import Request

    r = reconciler(sim)
    await sim.client().create(rayjob("rj-bad", suspend=True, shutdownAfterJobFinishes=False))
    result = await r.reconcile(Request(NS, "rj-bad"))
    assert not result.requeue and not result.requeue_after
    rj = await get_rayjob(sim, "rj-bad")
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["reason"]) == (
        "ValidationFailed", "ValidationFailed")


async def test_a_running_rayjob_whose_cluster_get_fails_returns_the_error(sim: Any) -> None:
    """Running: getOrCreateRayClusterInstance fails → the error is returned (backoff), the
    status is not written."""
    from test_rayjob_controller_unit import reconciler

    from emu.apiserver.errors import ApiError
    from emu.runtime.reconcile import Request

    r = reconciler(sim)
    body = rayjob("rj-get")
    body["metadata"]["finalizers"] = ["ray.io/rayjob-finalizer"]
    rj = await sim.client().create(body)
    rj["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                    "rayClusterName": "rj-get-abcde", "jobId": "rj-get-x",
                    "dashboardURL": "rj-get-head-svc.default.svc.cluster.local:8265",
                    "startTime": rfc3339(sim.now)}
    rj = await sim.client().update_status(rj)
    sim.faults.do(FailRequests(verb="get", kind="RayCluster", caller="rayjob-controller",
                               code=500, duration=5))
    with pytest.raises(ApiError) as err:
        await r.reconcile(Request(NS, "rj-get"))
    assert err.value.code == 500
    after = await get_rayjob(sim, "rj-get")
    assert after["metadata"]["resourceVersion"] == rj["metadata"]["resourceVersion"]
