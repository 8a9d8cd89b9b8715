"""one-job-run-per-attempt, rayjob-status-consistent, retry-attempts-fenced and
rayjob-submitter-recovered."""

from __future__ import annotations

from invariant_worlds import create, delete, pod, raycluster, rayjob, set_status

from emu.invariants import (
    Monitors,
    OneJobRunPerAttempt,
    RayJobStatusConsistent,
    RetryAttemptsFenced,
    SubmitterLossRecovered,
    Violation,
)

DASHBOARD = "default/rj-a-head-x/ray-head/dashboard"


def submitted(sim, sid, status=200, dashboard=DASHBOARD):
    sim.trace.emit(dashboard, "job_submission_received", submission_id=sid, status=status)


async def test_a_submission_id_started_twice_in_one_attempt_is_a_violation(sim):
    monitors = Monitors.attach(sim, [OneJobRunPerAttempt()])
    create(sim, rayjob("rj", jobId="rj-abcde", jobDeploymentStatus="Running"))
    submitted(sim, "rj-abcde")
    await sim.sleep(30)
    submitted(sim, "rj-abcde", dashboard="default/rj-b-head-y/ray-head/dashboard")
    assert await monitors.finish(sim) == [Violation(
        "one-job-run-per-attempt",
        "RayJob default/rj: Ray job rj-abcde started 2 times (t=0.000s on default/rj-a-head-x, "
        "t=30.000s on default/rj-b-head-y) with 0 retries or resumes asked for",
        30.0, ("RayJob/default/rj", "Pod/default/rj-a-head-x", "Pod/default/rj-b-head-y"))]


async def test_a_rerun_a_retry_asked_for_and_a_rejected_duplicate_are_not_violations(sim):
    monitors = Monitors.attach(sim, [OneJobRunPerAttempt()])
    create(sim, rayjob("rj", jobId="pinned", jobDeploymentStatus="Running"))
    submitted(sim, "pinned")
    submitted(sim, "pinned", status=500)   # the dashboard refused the duplicate: no run
    submitted(sim, "someone-elses-job")
    submitted(sim, "someone-elses-job")    # not a RayJob's id: not KubeRay's contract
    set_status(sim, "RayJob", "rj", jobDeploymentStatus="Retrying")
    set_status(sim, "RayJob", "rj", jobDeploymentStatus="Running")
    submitted(sim, "pinned")
    await monitors.assert_ok(sim)


async def test_complete_with_a_running_jobstatus_is_reported_after_the_bound(sim):
    monitors = Monitors.attach(sim, [RayJobStatusConsistent()])
    create(sim, rayjob("rj", jobDeploymentStatus="Running", jobStatus="RUNNING"))
    await sim.sleep(10)
    set_status(sim, "RayJob", "rj", jobDeploymentStatus="Complete")
    await sim.sleep(3)
    assert monitors.violations() == []   # within the bound of 5 s
    await sim.sleep(30)
    assert await monitors.finish(sim) == [Violation(
        "rayjob-status-consistent",
        "RayJob default/rj had jobDeploymentStatus Complete with jobStatus RUNNING, from "
        "t=10.000s (longer than the bound of 5s)", 15.0, ("RayJob/default/rj",))]


async def test_failed_beside_succeeded_and_a_running_job_left_running_are_reported(sim):
    monitors = Monitors.attach(sim, [RayJobStatusConsistent(running_bound=100.0)])
    create(sim, rayjob("a", jobDeploymentStatus="Failed", jobStatus="SUCCEEDED",
                       reason="SubmissionFailed"))
    create(sim, rayjob("b", jobDeploymentStatus="Running", jobStatus="SUCCEEDED"))
    await sim.sleep(200)
    found = await monitors.finish(sim)
    assert [(v.at, v.message) for v in found] == [
        (5.0, "RayJob default/a had jobDeploymentStatus Failed (reason SubmissionFailed) with "
              "jobStatus SUCCEEDED, from t=0.000s (longer than the bound of 5s)"),
        (100.0, "RayJob default/b stayed Running with jobStatus SUCCEEDED, from t=0.000s "
                "(longer than the bound of 100s)"),
    ]


async def test_failed_for_a_deadline_with_a_running_job_is_the_contract_not_a_violation(sim):
    monitors = Monitors.attach(sim, [RayJobStatusConsistent()])
    create(sim, rayjob("a", jobDeploymentStatus="Failed", jobStatus="RUNNING",
                       reason="DeadlineExceeded"))
    create(sim, rayjob("b", jobDeploymentStatus="Complete", jobStatus="STOPPED"))
    create(sim, rayjob("c", jobDeploymentStatus="Running", jobStatus="SUCCEEDED"))
    await sim.sleep(100)
    set_status(sim, "RayJob", "c", jobDeploymentStatus="Complete")
    await sim.sleep(1000)
    await monitors.assert_ok(sim)


def attempt(sim, job, cluster):
    create(sim, raycluster(cluster, labels={"ray.io/originated-from-crd": "RayJob",
                                            "ray.io/originated-from-cr-name": job}))


async def test_a_next_attempt_running_beside_the_previous_one_is_a_violation(sim):
    monitors = Monitors.attach(sim, [RetryAttemptsFenced()])
    attempt(sim, "rj", "rj-a")
    create(sim, pod("rj-a-head", cluster="rj-a"))
    create(sim, pod("rj-a-worker", cluster="rj-a", node_type="worker"))
    await sim.sleep(20)
    delete(sim, "RayCluster", "rj-a")
    delete(sim, "Pod", "rj-a-head")      # the worker is still terminating
    attempt(sim, "rj", "rj-b")
    await sim.sleep(1)
    create(sim, pod("rj-b-head", cluster="rj-b"))
    assert await monitors.finish(sim) == [Violation(
        "retry-attempts-fenced",
        "RayJob default/rj had Pods of attempt 1 (RayCluster rj-a: rj-a-worker) and attempt 2 "
        "(RayCluster rj-b: rj-b-head) running at once, from t=21.000s",
        21.0, ("RayJob/default/rj", "RayCluster/default/rj-a", "RayCluster/default/rj-b"))]


async def test_a_next_attempt_after_the_previous_pods_are_gone_is_fenced(sim):
    monitors = Monitors.attach(sim, [RetryAttemptsFenced()])
    attempt(sim, "rj", "rj-a")
    attempt(sim, "other", "other-a")
    create(sim, pod("rj-a-head", cluster="rj-a"))
    create(sim, pod("other-a-head", cluster="other-a"))
    await sim.sleep(20)
    delete(sim, "Pod", "rj-a-head")
    delete(sim, "RayCluster", "rj-a")
    attempt(sim, "rj", "rj-b")
    create(sim, pod("rj-b-head", cluster="rj-b"))
    await monitors.assert_ok(sim)


async def test_a_pinned_id_rerun_after_a_resume_is_not_a_violation(sim):
    monitors = Monitors.attach(sim, [OneJobRunPerAttempt()])
    create(sim, rayjob("rj", jobId="pinned", jobDeploymentStatus="Running"))
    submitted(sim, "pinned")
    set_status(sim, "RayJob", "rj", jobDeploymentStatus="Suspending")
    set_status(sim, "RayJob", "rj", jobDeploymentStatus="Suspended")
    set_status(sim, "RayJob", "rj", jobDeploymentStatus="Running")
    submitted(sim, "pinned")
    assert monitors.violations() == []
    submitted(sim, "pinned")
    assert [v.message for v in monitors.violations()] == [
        "RayJob default/rj: Ray job pinned started 3 times (t=0.000s on default/rj-a-head-x, "
        "t=0.000s on default/rj-a-head-x, t=0.000s on default/rj-a-head-x) with 1 retries or "
        "resumes asked for"]


async def test_a_previous_attempts_pod_on_an_unready_node_is_named_with_its_node(sim):
    monitors = Monitors.attach(sim, [RetryAttemptsFenced()])
    create(sim, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
                 "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    attempt(sim, "rj", "rj-a")
    old = pod("rj-a-head", cluster="rj-a")
    old["spec"]["nodeName"] = "node-1"
    create(sim, old)
    delete(sim, "RayCluster", "rj-a")
    attempt(sim, "rj", "rj-b")
    create(sim, pod("rj-b-head", cluster="rj-b"))
    [found] = await monitors.finish(sim)
    assert found.message == (
        "RayJob default/rj had Pods of attempt 1 (RayCluster rj-a: rj-a-head on Node node-1 "
        "(Ready Unknown)) and attempt 2 (RayCluster rj-b: rj-b-head) running at once, from "
        "t=0.000s")


def submitter_job(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "ray-job-submitter", "image": "rayproject/ray:2.46.0"}]}}}}


def delete_job(sim, name: str) -> None:
    """``kubectl delete job``: background propagation (the API's default for a Job orphans)."""
    sim.api.delete("Job", name, "default", caller="test", propagation_policy="Background")


async def test_a_running_rayjob_left_without_its_submitter_job_is_reported_after_the_bound(sim):
    monitors = Monitors.attach(sim, [SubmitterLossRecovered()])
    create(sim, submitter_job("rj"))
    create(sim, rayjob("rj", jobDeploymentStatus="Running", jobStatus="RUNNING"))
    await sim.sleep(10)
    delete_job(sim, "rj")
    await sim.sleep(59)
    assert monitors.violations() == []   # within the bound of 60 s
    await sim.sleep(30)
    assert await monitors.finish(sim) == [Violation(
        "rayjob-submitter-recovered",
        "RayJob default/rj (jobDeploymentStatus Running, jobStatus RUNNING) had no submitter Job "
        "default/rj, from t=10.000s (longer than the bound of 60s)", 70.0,
        ("RayJob/default/rj", "Job/default/rj"))]


async def test_a_recreated_submitter_a_terminal_rayjob_or_another_mode_is_not_a_violation(sim):
    monitors = Monitors.attach(sim, [SubmitterLossRecovered(bound=20.0)])
    for name in ("again", "ends"):
        create(sim, submitter_job(name))
        create(sim, rayjob(name, jobDeploymentStatus="Running", jobStatus="RUNNING"))
    http = rayjob("http", jobDeploymentStatus="Running", jobStatus="RUNNING")
    http["spec"]["submissionMode"] = "HTTPMode"
    create(sim, http)                       # no submitter Job at all: HTTPMode has none
    create(sim, rayjob("early", jobDeploymentStatus="Initializing"))  # Job not created yet
    await sim.sleep(5)
    delete_job(sim, "again")
    delete_job(sim, "ends")
    await sim.sleep(15)
    create(sim, submitter_job("again"))     # the submitter is back within the bound
    set_status(sim, "RayJob", "ends", jobDeploymentStatus="Failed", reason="AppFailed",
               jobStatus="FAILED")          # or the RayJob ends within it
    await sim.sleep(100)
    await monitors.assert_ok(sim)
