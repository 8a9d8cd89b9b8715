"""A recovery test against the ported KubeRay operator: leader failover during a RayJob.

Two operator replicas run as the Helm chart's Deployment. The leader creates the RayCluster and
then the submitter Job of ``demo-job``; the instant that Job is committed, the leader crashes,
before it writes the RayJob's status. The standby takes over once the Lease expires, finds the
Job by its fixed name instead of creating a second one, and the RayJob completes with one Ray
submission.

Run it with ``pytest examples/kuberay_recovery``; ``--emu-seeds=20`` runs it under 20 seeds.
"""

from __future__ import annotations

import pytest

import emu
from emu.kernel.trace import TraceEvent

RAY_IMAGE = "rayproject/ray:2.46.0"

DEMO_JOB = {
    "apiVersion": "ray.io/v1", "kind": "RayJob",
    "metadata": {"name": "demo-job", "namespace": "default"},
    "spec": {
        "entrypoint": "python -c 'import time; time.sleep(10)'",
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": RAY_IMAGE,
                 "ports": [{"name": "gcs-server", "containerPort": 6379},
                           {"name": "dashboard", "containerPort": 8265},
                           {"name": "client", "containerPort": 10001}]}]}}},
            "workerGroupSpecs": [{
                "groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker",
                                                      "image": RAY_IMAGE}]}}}],
        },
    },
}


def finished(rj: dict) -> bool:
    return (rj.get("status") or {}).get("jobDeploymentStatus") in ("Complete", "Failed")


@pytest.mark.emu(cluster=True)      # Nodes, kubelets, scheduler, Jobs, Deployments, ...
async def test_a_leader_lost_after_creating_the_submitter_job_leaves_one_job_and_one_submission(
        sim: emu.Simulation) -> None:
    await sim.cluster.wait_ready()
    kuberay = await sim.install_kuberay(replicas=2)     # the chart's Deployment, 2 Pods
    leader = await kuberay.wait_for_leader(timeout=120)

    seen: dict[str, object] = {}

    def crash_after_job_create(ev: TraceEvent) -> None:
        f = ev.fields
        if (ev.event, f.get("verb"), f.get("kind"), f.get("caller")) == (
                "write", "create", "Job", leader.name) and "status" not in seen:
            rj = sim.api.get("RayJob", "demo-job", "default")
            seen["status"] = (rj.get("status") or {}).get("jobDeploymentStatus")
            sim.loop.call_soon(sim.faults.crash, leader)

    sim.trace.subscribe(crash_after_job_create)
    await sim.apply(DEMO_JOB)
    rj = await sim.wait_for("RayJob", "demo-job", finished, timeout=900)

    assert seen["status"] == "Initializing"     # it died before writing Running
    # a new process leads: the standby, or the kubelet's restart of the crashed container (a
    # new incarnation, with a new Lease identity), whichever won the Lease
    assert kuberay.leader() not in (None, leader)
    jobs = [e for e in sim.trace.select("write")
            if (e.fields.get("verb"), e.fields.get("kind")) == ("create", "Job")]
    assert [e.fields["caller"] for e in jobs] == [leader.name]   # created once, found after
    status = rj["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    accepted = [s.submission_id for s in sim.ray_config.records.accepted()]
    assert accepted == [status["jobId"]]        # one Ray submission, under the persisted id
