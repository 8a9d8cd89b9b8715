"""The Job controller: success, backoff exhaustion, deadline, OnFailure restarts."""

from __future__ import annotations

from kube_helpers import condition, exits, is_true, template

import emu.kube.cluster as kc


def job(name: str, *, restart_policy: str = "Never", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": template("example/task", {}, restart_policy), **spec}}


async def job_pods(sim, name: str) -> list[dict]:
    return list(await sim.client().list("Pod", "default", label_selector=f"job-name={name}"))


async def test_job_whose_pod_exits_zero_is_complete_with_counts_and_times(sim):
    sim.programs.register("example/task", exits(0, after=5.0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(job("ok"))
    done = await sim.wait_for("Job", "ok", is_true("Complete"))
    status = done["status"]
    assert status["succeeded"] == 1 and "failed" not in status and "active" not in status
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert condition(done, "Complete")["reason"] == "CompletionsReached"
    assert condition(done, "Complete")["message"] == "Reached expected number of succeeded pods"
    assert status["startTime"] <= status["completionTime"]
    [p] = await job_pods(sim, "ok")
    assert p["status"]["phase"] == "Succeeded"
    assert p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "ok"
    assert p["metadata"]["labels"]["controller-uid"] == done["metadata"]["uid"]
    assert p["metadata"]["ownerReferences"][0]["controller"] is True
    assert not p["metadata"].get("finalizers"), "the tracking finalizer is removed once counted"


async def test_job_with_failing_pods_creates_a_pod_per_attempt_until_backoff_limit(sim):
    sim.programs.register("example/task", exits(1, after=1.0))
    cluster = kc.install(sim, image_pull_delay=0.0, container_start_delay=0.0)
    await cluster.wait_ready()
    await sim.apply(job("bad", backoffLimit=2))
    target = await sim.wait_for("Job", "bad", is_true("FailureTarget"), timeout=300)
    assert condition(target, "FailureTarget")["reason"] == "BackoffLimitExceeded"
    failed = await sim.wait_for("Job", "bad", is_true("Failed"))
    cond = condition(failed, "Failed")
    assert (cond["reason"], cond["message"]) == ("BackoffLimitExceeded",
                                                 "Job has reached the specified backoff limit")
    assert failed["status"]["failed"] == 3
    pods = await job_pods(sim, "bad")
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Failed" for p in pods)
    created = sorted(p["metadata"]["creationTimestamp"] for p in pods)
    # each Pod fails 1 s after it is created; the next waits the pod failure back-off:
    # 10 s after the first failure, 20 s after the second
    assert created == ["2026-01-01T00:00:00Z", "2026-01-01T00:00:11Z",
                       "2026-01-01T00:00:32Z"]


async def test_job_past_its_active_deadline_fails_and_its_pod_is_deleted(sim):
    sim.programs.register("example/task", exits(0, after=1000.0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(job("slow", activeDeadlineSeconds=30))
    target = await sim.wait_for("Job", "slow", is_true("FailureTarget"), timeout=100)
    # startTime is written in whole seconds (00:00:00 for a start at 0.1), as in Kubernetes
    assert sim.now == 30.0
    failed = await sim.wait_for("Job", "slow", is_true("Failed"))
    cond = condition(failed, "Failed")
    assert (cond["reason"], cond["message"]) == ("DeadlineExceeded",
                                                 "Job was active longer than specified deadline")
    assert condition(target, "FailureTarget")["reason"] == "DeadlineExceeded"
    await sim.sleep(1)
    assert await job_pods(sim, "slow") == []


async def test_job_with_on_failure_restarts_in_place_and_restarts_count_toward_backoff(sim):
    sim.programs.register("example/task", exits(1))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(job("flaky", restart_policy="OnFailure", backoffLimit=2))
    failed = await sim.wait_for("Job", "flaky", is_true("Failed"), timeout=300)
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"
    assert await job_pods(sim, "flaky") == []
    assert "failed" not in failed["status"] or failed["status"]["failed"] == 1
