"""Ports of ``rayjob_controller_test.go`` (the envtest suite): the RayCluster and RayJob
controllers run, the fake dashboard answers job status, and the test plays the kubelet and the Job
controller by writing statuses. Each test names the Go ``Describe`` it ports; the Go ``It`` steps
are its body, in order."""

from __future__ import annotations

import pytest
from test_raycluster_support import NS, set_pod_status
from test_rayjob_support import (
    FakeRayDashboardClient,
    consistently_status,
    events,
    get_or_none,
    get_rayjob,
    job_info,
    make_cluster_ready,
    rayjob,
    start_kuberay,
    to_running,
    update_k8s_job_to_complete,
    wait_status,
)

from emu.apiserver.errors import BadRequest
from emu.kuberay.raycluster import rfc3339


async def test_submitter_config_backoff_limit_defaults_to_two_and_can_be_overridden(sim):
    """Describe("RayJob SubmitterConfig BackoffLimit")."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-default"))
    await sim.client().create(rayjob("rayjob-non-default", submitterConfig={"backoffLimit": 88}))
    for name, limit in (("rayjob-default", 2), ("rayjob-non-default", 88)):
        await to_running(sim, name)
        job = await sim.client().get("Job", name, NS)
        assert job["spec"]["backoffLimit"] == limit


async def test_successful_k8s_job_mode_runs_new_initializing_running_complete(sim):
    """Describe("Successful RayJob in K8sJobMode"): New → Initializing → Running → Complete; with
    shutdownAfterJobFinishes the RayCluster is deleted and the submitter Job kept."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob())
    rj = await wait_status(sim, "rayjob-test", "Initializing", timeout=3)
    status = rj["status"]
    assert status["rayClusterName"].startswith("rayjob-test-")
    assert status["jobId"].startswith("rayjob-test-")
    assert status["startTime"]
    assert rj["metadata"]["finalizers"] == ["ray.io/rayjob-finalizer"]

    # In Initializing state, the RayCluster should eventually be created.
    cluster_name = status["rayClusterName"]
    rc = await sim.wait_for("RayCluster", cluster_name, timeout=3)
    spec = rj["spec"]["rayClusterSpec"]
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == spec["workerGroupSpecs"][0]["replicas"]
    assert rc["spec"]["rayVersion"] == spec["rayVersion"]
    assert rc["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "rayjob-test"
    assert rc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert rc["metadata"]["labels"]["ray.io/job-submission-mode"] == "K8sJobMode"
    assert rc["metadata"]["annotations"] == {"foo": "bar"}
    owner = rc["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayJob", "rayjob-test", True)

    # In Initializing state, the JobStatus should show the RayCluster status.
    await sim.sleep(1)
    head = next(iter(await sim.client().list(
        "Pod", NS, label_selector=f"ray.io/cluster={cluster_name},ray.io/node-type=head")))
    await set_pod_status(sim, head, "Running", ready=False)
    rj = await sim.wait_for("RayJob", "rayjob-test", lambda o: len(
        (o["status"].get("rayClusterStatus") or {}).get("conditions") or []) > 0, timeout=5)
    assert rj["status"]["jobDeploymentStatus"] == "Initializing"
    assert await get_or_none(sim, "Job", "rayjob-test") is None

    # Make RayCluster.Status.State ready; Initializing → Running.
    await make_cluster_ready(sim, cluster_name)
    rj = await wait_status(sim, "rayjob-test", "Running", timeout=5)
    assert rj["status"]["dashboardURL"] == \
        f"{cluster_name}-head-svc.default.svc.cluster.local:8265"
    job = await sim.client().get("Job", "rayjob-test", NS)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["RAY_JOB_SUBMISSION_ID"] == rj["status"]["jobId"]
    assert env["RAY_DASHBOARD_ADDRESS"] == rj["status"]["dashboardURL"]

    # Running → Complete only once the submitter Job is complete too.
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await consistently_status(sim, "rayjob-test", "Running")
    await update_k8s_job_to_complete(sim, "rayjob-test")
    rj = await wait_status(sim, "rayjob-test", "Complete", timeout=5)
    assert rj["status"]["jobStatus"] == "SUCCEEDED"
    assert rj["status"]["endTime"]
    assert rj["status"]["succeeded"] == 1 and rj["status"]["failed"] == 0

    # shutdownAfterJobFinishes: the RayCluster goes, the submitter Job stays.
    await sim.sleep(3)
    assert await get_or_none(sim, "RayCluster", cluster_name) is None
    assert await get_or_none(sim, "Job", "rayjob-test") is not None
    reasons = [e["reason"] for e in await events(sim, "rayjob-test")]
    assert reasons == ["CreatedRayCluster", "CreatedRayJobSubmitter", "CreatedService",
                       "DeletedRayCluster"]


async def test_rayjob_with_a_maximum_length_name_gets_its_cluster(sim):
    """Describe("Successful RayJob in K8sJobMode with a maximum name"): 47 characters."""
    name = "a" * 47
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob(name))
    rj = await wait_status(sim, name, "Initializing", timeout=3)
    rc = await sim.wait_for("RayCluster", rj["status"]["rayClusterName"], timeout=3)
    assert len(rc["metadata"]["name"]) == 53


async def test_invalid_submitter_template_records_failed_to_create_event(sim):
    """Describe("Invalid RayJob in K8sJobMode"): a submitter template without restartPolicy is
    refused by the API server; the RayJob stays Initializing and says why in an event."""
    template = {"spec": {"containers": [{
        "name": "ray-job-submitter", "image": "rayproject/ray:2.46.0",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                      "requests": {"cpu": "500m", "memory": "200Mi"}}}]}}
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-invalid-test", submitterPodTemplate=template))
    rj = await wait_status(sim, "rayjob-invalid-test", "Initializing", timeout=3)
    await make_cluster_ready(sim, rj["status"]["rayClusterName"])
    await sim.sleep(3)
    notes = [e["message"] for e in await events(sim, "rayjob-invalid-test")
             if e["reason"] == "FailedToCreateRayJobSubmitter"]
    assert notes and notes[0].startswith(
        "Failed to create new Kubernetes Job default/rayjob-invalid-test")
    assert (await get_rayjob(sim, "rayjob-invalid-test"))["status"]["jobDeploymentStatus"] == \
        "Initializing"


async def test_delete_rayjob_cr_after_job_finishes_env_deletes_the_rayjob(sim):
    """Describe("Successful RayJob in K8sjobMode with DELETE_RAYJOB_CR_AFTER_JOB_FINISHES")."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake, env={"DELETE_RAYJOB_CR_AFTER_JOB_FINISHES": "true"})
    await sim.client().create(rayjob("rayjob-test-delete"))
    await to_running(sim, "rayjob-test-delete")
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await consistently_status(sim, "rayjob-test-delete", "Running")
    await update_k8s_job_to_complete(sim, "rayjob-test-delete")
    await sim.sleep(10)
    assert await get_or_none(sim, "RayJob", "rayjob-test-delete") is None


async def test_delete_rayjob_cr_env_is_case_insensitive_in_the_controller(sim):
    """**Quirk**: main.go compares the variable with "true" exactly, handleShutdownAfterJobFinishes
    lowercases it first, so "TRUE" still deletes the RayJob."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake, env={"DELETE_RAYJOB_CR_AFTER_JOB_FINISHES": "TRUE"})
    await sim.client().create(rayjob("rayjob-upper"))
    await to_running(sim, "rayjob-upper")
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await update_k8s_job_to_complete(sim, "rayjob-upper")
    await sim.sleep(10)
    assert await get_or_none(sim, "RayJob", "rayjob-upper") is None


async def test_active_deadline_fails_an_initializing_rayjob_with_deadline_exceeded(sim):
    """Describe("RayJob has passed the ActiveDeadlineSeconds"): 3 s, the cluster never ready."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-deadline", activeDeadlineSeconds=3))
    rj = await wait_status(sim, "rayjob-deadline", "Initializing", timeout=3)
    assert rj["status"]["jobId"] and rj["status"]["rayClusterName"] and rj["status"]["startTime"]
    rj = await wait_status(sim, "rayjob-deadline", "Failed", timeout=5)
    assert rj["status"]["reason"] == "DeadlineExceeded"
    assert rj["status"]["message"] == (
        "The RayJob has passed the activeDeadlineSeconds. StartTime: "
        f"{rj['status']['startTime'].replace('T', ' ').rstrip('Z')} +0000 UTC. "
        "ActiveDeadlineSeconds: 3")


async def test_retrying_rayjob_gets_a_new_cluster_and_counts_success_and_failure(sim):
    """Describe("Retrying RayJob in K8sJobMode"): backoffLimit 1; Running → Retrying → New →
    Initializing with a new cluster name and id, the old cluster and submitter Job deleted; the
    second attempt completes: succeeded 1, failed 1."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rayjob-retry-test", backoffLimit=1))
    first = await to_running(sim, "rayjob-retry-test")
    fake.get_job_info_mock = job_info("FAILED", sim)
    await consistently_status(sim, "rayjob-retry-test", "Running")
    await update_k8s_job_to_complete(sim, "rayjob-retry-test")
    old_cluster, old_id = first["status"]["rayClusterName"], first["status"]["jobId"]
    rj = await sim.wait_for("RayJob", "rayjob-retry-test", lambda o: o["status"].get(
        "rayClusterName", old_cluster) != old_cluster, timeout=15)
    fake.get_job_info_mock = None
    assert rj["status"]["jobDeploymentStatus"] == "Initializing"
    assert rj["status"]["jobId"] != old_id
    assert rj["status"]["failed"] == 1
    assert await get_or_none(sim, "RayCluster", old_cluster) is None
    await sim.sleep(3)

    await make_cluster_ready(sim, rj["status"]["rayClusterName"])
    await wait_status(sim, "rayjob-retry-test", "Running", timeout=5)
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await consistently_status(sim, "rayjob-retry-test", "Running")
    await update_k8s_job_to_complete(sim, "rayjob-retry-test")
    rj = await wait_status(sim, "rayjob-retry-test", "Complete", timeout=5)
    assert (rj["status"]["succeeded"], rj["status"]["failed"]) == (1, 1)


async def test_interactive_mode_waits_for_spec_job_id_then_runs(sim):
    """Context("RayJob in InteractiveMode"): no jobId until the user sets ``spec.jobId``."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-test-none-mode", submissionMode="InteractiveMode"))
    rj = await wait_status(sim, "rayjob-test-none-mode", "Initializing", timeout=3)
    assert "jobId" not in rj["status"]
    assert rj["status"]["rayClusterName"] and rj["status"]["startTime"]
    await make_cluster_ready(sim, rj["status"]["rayClusterName"])
    await wait_status(sim, "rayjob-test-none-mode", "Waiting", timeout=5)
    assert await get_or_none(sim, "Job", "rayjob-test-none-mode") is None
    rj = await get_rayjob(sim, "rayjob-test-none-mode")
    rj["spec"]["jobId"] = "fake-id"
    await sim.client().update(rj)
    rj = await wait_status(sim, "rayjob-test-none-mode", "Running", timeout=5)
    assert rj["status"]["jobId"] == "fake-id"


# -- Describe("RayJob with DeletionStrategy") ---------------------------------------------------


async def _finish(sim, fake, name: str, outcome: str) -> dict:
    await to_running(sim, name)
    fake.get_job_info_mock = job_info(outcome, sim)
    await update_k8s_job_to_complete(sim, name)
    want = "Complete" if outcome == "SUCCEEDED" else "Failed"
    return await wait_status(sim, name, want, timeout=5)


def _legacy(on_success: str, on_failure: str) -> dict:
    return {"onSuccess": {"policy": on_success}, "onFailure": {"policy": on_failure}}


def _rule(policy: str, ttl: int, job_status: str) -> dict:
    return {"policy": policy, "condition": {"jobStatus": job_status, "ttlSeconds": ttl}}


@pytest.mark.parametrize("outcome", ["SUCCEEDED", "FAILED"])
@pytest.mark.parametrize("policy", ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"])
@pytest.mark.parametrize("style", ["legacy", "rule"])
async def test_deletion_strategy_applies_the_policy_of_the_outcome(sim, style, policy, outcome):
    """It("Delete cluster|workers|self|none on success|failure") and It("Should delete ... when a
    single '<policy>' rule is set"): the matching policy acts, the other outcome's does nothing."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    name = f"rj-{style}-{policy.lower()}-{outcome.lower()}"
    if style == "legacy":
        strategy = _legacy(policy, "DeleteNone") if outcome == "SUCCEEDED" \
            else _legacy("DeleteNone", policy)
    else:
        strategy = {"deletionRules": [_rule(policy, 0, outcome)]}
    await sim.client().create(rayjob(name, shutdownAfterJobFinishes=False, deletionStrategy=strategy))
    rj = await _finish(sim, fake, name, outcome)
    cluster = rj["status"]["rayClusterName"]
    await sim.sleep(5)
    rc = await get_or_none(sim, "RayCluster", cluster)
    if policy == "DeleteCluster":
        assert rc is None
        assert await get_or_none(sim, "RayJob", name) is not None
        assert await get_or_none(sim, "Job", name) is not None
    elif policy == "DeleteWorkers":
        assert rc is not None
        assert [g.get("suspend") for g in rc["spec"]["workerGroupSpecs"]] == [True]
        workers = list(await sim.client().list(
            "Pod", NS, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=worker"))
        assert workers == []
        assert any(e["reason"] == "UpdatedRayCluster" for e in await events(sim, name))
    elif policy == "DeleteSelf":
        assert await get_or_none(sim, "RayJob", name) is None
    else:
        assert rc is not None and await get_or_none(sim, "RayJob", name) is not None
        assert not any(g.get("suspend") for g in rc["spec"]["workerGroupSpecs"])


@pytest.mark.parametrize("outcome", ["SUCCEEDED", "FAILED"])
async def test_all_rules_overdue_executes_only_the_most_impactful_delete_self(sim, outcome):
    """It("Should execute MOST impactful rule (DeleteSelf) when all rules are overdue on ...")."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    name = f"rj-impactful-{outcome.lower()}"
    rules = [_rule(p, 0, outcome) for p in ("DeleteWorkers", "DeleteCluster", "DeleteSelf",
                                             "DeleteNone")]
    await sim.client().create(rayjob(name, shutdownAfterJobFinishes=False,
                           deletionStrategy={"deletionRules": rules}))
    rj = await _finish(sim, fake, name, outcome)
    await sim.sleep(5)
    assert await get_or_none(sim, "RayJob", name) is None
    # Only DeleteSelf ran: the cluster was never touched by the RayJob controller.
    rc = await get_or_none(sim, "RayCluster", rj["status"]["rayClusterName"])
    assert rc is not None and not any(g.get("suspend") for g in rc["spec"]["workerGroupSpecs"])


@pytest.mark.parametrize("outcome", ["SUCCEEDED", "FAILED"])
async def test_multi_stage_deletion_runs_workers_then_cluster_then_self(sim, outcome):
    """It("Should process multi-stage deletions in order on ...: Workers, then Cluster, then
    Self"): TTLs 0, 5 and 10 s after endTime."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    name = f"rj-multistage-{outcome.lower()}"
    rules = [_rule("DeleteWorkers", 0, outcome), _rule("DeleteCluster", 5, outcome),
             _rule("DeleteSelf", 10, outcome)]
    await sim.client().create(rayjob(name, shutdownAfterJobFinishes=False,
                           deletionStrategy={"deletionRules": rules}))
    rj = await _finish(sim, fake, name, outcome)
    cluster = rj["status"]["rayClusterName"]
    end = rj["status"]["endTime"]
    await sim.sleep(2)
    rc = await get_or_none(sim, "RayCluster", cluster)
    assert rc is not None and rc["spec"]["workerGroupSpecs"][0]["suspend"] is True
    await sim.wait_until(lambda: sim.api.list("RayCluster", NS)["items"] == [], timeout=10)
    assert sim.now >= _seconds(end) + 5
    assert await get_or_none(sim, "RayJob", name) is not None
    await sim.wait_until(lambda: not sim.api.list("RayJob", NS)["items"], timeout=10)
    assert sim.now >= _seconds(end) + 10


def _seconds(text: str) -> float:
    from emu.kuberay.raycluster import parse_time
    return parse_time(text)


# -- Context("RayJob job status query timeout") -------------------------------------------------


def _refused(_job_id: str) -> dict:
    raise ConnectionRefusedError("connection refused")


async def test_k8s_job_mode_persists_the_status_check_failure_time_then_times_out(sim):
    """Describe("K8sJobMode"): the first failing status check persists
    ``jobStatusCheckFailureStartTime``; one 10 minutes old fails the RayJob with
    JobStatusCheckTimeoutExceeded (not retried)."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rayjob-query-timeout-k8s"))
    await to_running(sim, "rayjob-query-timeout-k8s")
    fake.get_job_info_mock = _refused
    rj = await sim.wait_for("RayJob", "rayjob-query-timeout-k8s", lambda o: o["status"].get(
        "jobStatusCheckFailureStartTime") is not None, timeout=10)
    rj["status"]["jobStatusCheckFailureStartTime"] = rfc3339(sim.now - 600)
    rj["status"]["jobStatus"] = "RUNNING"
    await sim.client().update_status(rj)
    rj = await wait_status(sim, "rayjob-query-timeout-k8s", "Failed", timeout=5)
    assert rj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"
    assert rj["status"]["message"].endswith("; exceeded timeout of 300s")


async def test_http_mode_status_check_timeout_fires_from_the_env_value(sim):
    """Describe("HTTPMode"): ``RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS=1`` fails it organically."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake, env={"RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "1"})
    await sim.client().create(rayjob("rayjob-query-timeout-http", submissionMode="HTTPMode"))
    await to_running(sim, "rayjob-query-timeout-http")
    fake.get_job_info_mock = _refused
    rj = await wait_status(sim, "rayjob-query-timeout-http", "Failed", timeout=15)
    assert rj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"
    assert rj["status"]["message"].endswith("; exceeded timeout of 1s")


async def test_http_mode_resubmission_clears_the_failure_timer(sim):
    """Describe("HTTPMode recovery"): GetJobInfo's BadRequest (job unknown) makes HTTPMode submit
    again with the same id; the success clears the timer and the RayJob keeps Running."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rayjob-recover-timer-http", submissionMode="HTTPMode"))
    rj = await to_running(sim, "rayjob-recover-timer-http")

    def not_found(job_id: str) -> dict:
        raise BadRequest("job not found")

    fake.get_job_info_mock = not_found
    rj = await get_rayjob(sim, "rayjob-recover-timer-http")
    rj["status"]["jobStatusCheckFailureStartTime"] = rfc3339(sim.now - 30)
    rj["status"]["jobStatus"] = "RUNNING"
    await sim.client().update_status(rj)
    rj = await sim.wait_for("RayJob", "rayjob-recover-timer-http", lambda o: o["status"].get(
        "jobStatusCheckFailureStartTime") is None, timeout=10)
    await consistently_status(sim, "rayjob-recover-timer-http", "Running")
    assert set(fake.submitted) == {rj["status"]["jobId"]}


# -- Beyond the Go file: deletion finalizer, validation, clusterSelector, timers on failover -----


async def test_deleting_a_running_rayjob_stops_the_ray_job_then_drops_the_finalizer(sim):
    """SPEC §3.1: a non-terminal RayJob being deleted gets a best-effort StopJob for its id; the
    finalizer goes whatever the answer."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rayjob-delete-running"))
    rj = await to_running(sim, "rayjob-delete-running")
    await sim.client().delete("RayJob", "rayjob-delete-running", NS)
    await sim.sleep(5)
    assert await get_or_none(sim, "RayJob", "rayjob-delete-running") is None
    assert fake.stopped == [rj["status"]["jobId"]]


async def test_deleting_a_finished_rayjob_does_not_stop_anything(sim):
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    await sim.client().create(rayjob("rayjob-delete-done", shutdownAfterJobFinishes=False))
    await to_running(sim, "rayjob-delete-done")
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await update_k8s_job_to_complete(sim, "rayjob-delete-done")
    await wait_status(sim, "rayjob-delete-done", "Complete", timeout=5)
    await sim.client().delete("RayJob", "rayjob-delete-done", NS)
    await sim.sleep(5)
    assert await get_or_none(sim, "RayJob", "rayjob-delete-done") is None
    assert fake.stopped == []


async def test_invalid_rayjob_is_validation_failed_and_stays_so_when_fixed(sim):
    """SPEC §3.5: validation failure → ValidationFailed with the message and an
    InvalidRayJobSpec event, no requeue; fixing the spec later hits the switch's default branch,
    which only requeues (**quirk**)."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-invalid-spec", suspend=True,
                                     shutdownAfterJobFinishes=False))
    rj = await wait_status(sim, "rayjob-invalid-spec", "ValidationFailed", timeout=3)
    message = ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
               "is not allowed to be suspended")
    assert (rj["status"]["reason"], rj["status"]["message"]) == ("ValidationFailed", message)
    assert [(e["type"], e["reason"], e["message"]) for e in await events(
        sim, "rayjob-invalid-spec")] == [
        ("Warning", "InvalidRayJobSpec", f"default/rayjob-invalid-spec: {message}")]
    rj["spec"]["suspend"] = False
    await sim.client().update(rj)
    await sim.sleep(10)
    assert (await get_rayjob(sim, "rayjob-invalid-spec"))["status"]["jobDeploymentStatus"] == \
        "ValidationFailed"
    assert list(await sim.client().list("RayCluster", NS)) == []


async def test_cluster_selector_uses_the_named_cluster_and_never_deletes_it(sim):
    """SPEC §3.4/§3.10: a missing selected cluster is an error with a RayClusterNotFound event;
    once it exists the RayJob runs on it (no head Service of its own) and, finished, leaves it."""
    from test_raycluster_support import raycluster

    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake)
    spec = {"clusterSelector": {"ray.io/cluster": "shared"}, "shutdownAfterJobFinishes": False}
    body = rayjob("rayjob-selector", **spec)
    del body["spec"]["rayClusterSpec"]
    await sim.client().create(body)
    rj = await wait_status(sim, "rayjob-selector", "Initializing", timeout=3)
    assert rj["status"]["rayClusterName"] == "shared"
    await sim.sleep(3)
    assert any(e["reason"] == "RayClusterNotFound" and e["message"] ==
               "RayCluster default/shared set in the clusterSelector is not found. It must be "
               "created manually" for e in await events(sim, "rayjob-selector"))
    await sim.client().create(raycluster("shared", replicas=1))
    await make_cluster_ready(sim, "shared")
    await wait_status(sim, "rayjob-selector", "Running", timeout=10)
    assert await get_or_none(sim, "Service", "rayjob-selector-head-svc") is None
    fake.get_job_info_mock = job_info("SUCCEEDED", sim)
    await update_k8s_job_to_complete(sim, "rayjob-selector")
    await wait_status(sim, "rayjob-selector", "Complete", timeout=5)
    await sim.sleep(10)
    assert await get_or_none(sim, "RayCluster", "shared") is not None


async def test_status_check_timeout_counts_from_the_persisted_start_across_an_operator_restart(
        sim):
    """SPEC §3.7/§7.4: the failure timer is a persisted timestamp, so an operator restarted in
    the middle of a dashboard outage fails the RayJob 300 s after the first failure, not 300 s
    after it came back."""
    fake = FakeRayDashboardClient()
    start_kuberay(sim, fake, name="op-a")
    await sim.client().create(rayjob("rayjob-timer-failover"))
    await to_running(sim, "rayjob-timer-failover")
    fake.get_job_info_mock = _refused
    rj = await sim.wait_for("RayJob", "rayjob-timer-failover", lambda o: o["status"].get(
        "jobStatusCheckFailureStartTime") is not None, timeout=10)
    started = _seconds(rj["status"]["jobStatusCheckFailureStartTime"])
    await sim.sleep(200)
    sim.faults.crash("op-a")
    start_kuberay(sim, fake, name="op-b")
    rj = await wait_status(sim, "rayjob-timer-failover", "Failed", timeout=200)
    assert rj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"
    assert started + 300 <= sim.now <= started + 304
