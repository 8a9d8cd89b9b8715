"""The invariants on the ported operator itself, in worlds the scenarios do not cover."""

from __future__ import annotations

from typing import Any

import emu
from emu.faults import RedisDown
from emu.invariants import Monitors, kuberay_invariants
from emu.scenarios._common import kube, ray_pods, raycluster, rayjob, start, workers_ready


def retried_rayjob(stop_delay: float) -> tuple[Any, list[emu.invariants.Violation]]:
    """A RayJob whose job fails once and is retried (backoffLimit 1); containers take
    ``stop_delay`` seconds to stop on SIGTERM."""
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants())
        await start(sim)
        job = rayjob("rj", seconds=5)
        job["spec"]["entrypoint"] = "python -c 'import sys; sys.exit(1)'"
        job["spec"]["backoffLimit"] = 1
        await sim.apply(job)
        box["rj"] = await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobDeploymentStatus") in ("Complete", "Failed"), timeout=600)
        box["found"] = await monitors.finish(sim)

    emu.run(main, seed=1, cluster=kube(stop_delay=stop_delay))
    return box["rj"], box["found"]


def test_a_retry_whose_old_pods_stop_at_once_holds_every_invariant():
    rj, found = retried_rayjob(stop_delay=0.0)
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["failed"]) == ("Failed", 2)
    assert found == []


def test_a_retry_does_not_wait_for_the_old_attempts_pods_to_stop():
    # KubeRay's Retrying waits until the RayCluster object is gone, not its Pods: the garbage
    # collector deletes those after, and they take their grace period to stop (SPEC.md 3.5).
    _, found = retried_rayjob(stop_delay=5.0)
    assert [v.invariant for v in found] == ["retry-attempts-fenced"]
    assert "had Pods of attempt 1 (RayCluster rj-" in found[0].message
    assert "and attempt 2 (RayCluster rj-" in found[0].message


def test_a_head_lost_mid_job_without_gcs_ft_fails_the_rayjob_beside_a_running_job_status():
    # The new head's GCS is empty. The submitter's `ray job logs --follow` ends with its
    # dashboard and exits 0 (as the real CLI does), so the Job is not retried and the job is not
    # submitted again; KubeRay then finds no such job on the new head and writes Failed/AppFailed
    # while jobStatus stays RUNNING, its last value, for good.
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants())
        await start(sim)
        await sim.apply(rayjob("rj", seconds=60))
        rj = await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobStatus") == "RUNNING", timeout=600)
        await sim.sleep(5)
        head = ray_pods(sim, rj["status"]["rayClusterName"], "head")[0]["metadata"]["name"]
        await sim.client("kubectl").delete("Pod", head, "default", grace_period_seconds=0)
        box["rj"] = await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobDeploymentStatus") in ("Complete", "Failed"), timeout=900)
        await sim.sleep(10)  # past the invariant's 5 s bound
        box["found"] = await monitors.finish(sim)
        box["runs"] = len(sim.trace.select("job_submission_received"))

    emu.run(main, seed=1, cluster=kube())
    status = box["rj"]["status"]
    assert (status["jobDeploymentStatus"], status["reason"], status["jobStatus"]) == (
        "Failed", "AppFailed", "RUNNING")
    assert box["runs"] == 1
    assert [v.invariant for v in box["found"]] == ["rayjob-status-consistent"]
    assert box["found"][0].message.startswith(
        "RayJob default/rj had jobDeploymentStatus Failed (reason AppFailed) with non-terminal "
        "jobStatus RUNNING")


def test_sidecar_mode_fails_a_rayjob_whose_head_is_lost_beside_a_running_job_status():
    # KubeRay's intended SidecarMode path (checkSubmitterAndUpdateStatusIfNeeded, PR #4080):
    # the head Pod (restartPolicy Never) is gone, so the RayJob is Failed/AppFailed "Ray head pod
    # not found." The Ray job died with the head, yet jobStatus keeps its last value, RUNNING.
    # Kept as a violation (docs/findings.md F2): AppFailed says the app failed while jobStatus
    # says it runs, and clients that wait on jobStatus (KubeRay's python client's
    # wait_until_job_finished) wait for good. A deadline's Failed beside RUNNING is not one
    # (test_rayjob.py): that reason says nothing about the app.
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants())
        await start(sim)
        job = rayjob("rj", seconds=60)
        job["spec"]["submissionMode"] = "SidecarMode"
        await sim.apply(job)
        rj = await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobStatus") == "RUNNING", timeout=600)
        head = ray_pods(sim, rj["status"]["rayClusterName"], "head")[0]["metadata"]["name"]
        await sim.client("kubectl").delete("Pod", head, "default", grace_period_seconds=0)
        box["rj"] = await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobDeploymentStatus") in ("Complete", "Failed"), timeout=900)
        await sim.sleep(10)  # past the invariant's 5 s bound
        box["found"] = await monitors.finish(sim)

    emu.run(main, seed=1, cluster=kube())
    status = box["rj"]["status"]
    assert (status["jobDeploymentStatus"], status["reason"], status["message"],
            status["jobStatus"]) == ("Failed", "AppFailed", "Ray head pod not found.", "RUNNING")
    assert [v.invariant for v in box["found"]] == ["rayjob-status-consistent"]
    assert box["found"][0].message.startswith(
        "RayJob default/rj had jobDeploymentStatus Failed (reason AppFailed) with non-terminal "
        "jobStatus RUNNING")


def test_a_rayjob_deleted_while_its_submitter_runs_leaves_no_pod():
    # docs/findings.md E6: a deadline fails the RayJob and deletes its cluster; the RayJob is
    # deleted at that instant, while the submitter Pod (its log stream ending with the cluster)
    # still runs. The garbage collector deletes the Job, then the Pod; the Job controller must
    # still remove the Pod's job-tracking finalizer (syncOrphanPod), or the Pod stays for good.
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants())
        await start(sim)
        job = rayjob("rj", seconds=60)
        job["spec"]["activeDeadlineSeconds"] = 30
        await sim.apply(job)
        await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobDeploymentStatus") == "Failed", timeout=600)
        box["submitter"] = [p["status"].get("phase") for p in sim.api.list(
            "Pod", "default", label_selector="job-name=rj")["items"]]
        await sim.client("kubectl").delete("RayJob", "rj", "default")
        await sim.sleep(150)
        box["found"] = await monitors.finish(sim)

    emu.run(main, seed=1, cluster=kube())
    assert box["submitter"] == ["Running"]
    assert box["found"] == []


def test_redis_down_across_a_deletion_leaks_the_clusters_keys_once_its_cleanup_job_fails():
    # The cleanup Job cannot reach Redis and fails; KubeRay removes the finalizer anyway, so the
    # cluster goes and its GCS tables stay in Redis (SPEC.md 2.11).
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants())
        await start(sim, redis=True)
        await sim.apply(raycluster("a", storage="redis"))
        rc = await sim.wait_for("RayCluster", "a", workers_ready(1), timeout=300)
        box["uid"] = rc["metadata"]["uid"]
        sim.faults.do(RedisDown(address="redis:6379", duration=400.0))
        await sim.client("kubectl").delete("RayCluster", "a", "default")
        await sim.wait_until(lambda: sim.api.list("RayCluster", "default")["items"] == [],
                             timeout=300, every=1.0, what="RayCluster a gone")
        box["found"] = await monitors.finish(sim)

    emu.run(main, seed=1, cluster=kube(stop_delay=5))
    found = box["found"]
    assert [v.invariant for v in found] == ["cleanup-after-delete"]
    assert f"its storage namespace {box['uid']} still had 2 keys on Redis redis" in \
        found[0].message
