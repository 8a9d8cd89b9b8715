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


def test_a_head_lost_mid_job_without_gcs_ft_runs_the_same_submission_twice():
    # The new head's GCS is empty; the submitter Pod's retry finds no job under the id and
    # submits it again (BuildJobSubmitCommand's `ray job status || ray job submit`).
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
        await sim.wait_for("RayJob", "rj", lambda o: (o.get("status") or {}).get(
            "jobDeploymentStatus") in ("Complete", "Failed"), timeout=900)
        box["sid"] = rj["status"]["jobId"]
        box["found"] = await monitors.finish(sim)

    emu.run(main, seed=1, cluster=kube())
    found = box["found"]
    assert [v.invariant for v in found] == ["one-job-run-per-attempt"]
    assert found[0].message.startswith(f"RayJob default/rj: Ray job {box['sid']} started 2 times")
    assert found[0].message.endswith("with 0 retries or resumes asked for")


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
