"""The Job controller removes its tracking finalizer from Pods whose Job is gone.

The bug: the ``batch.kubernetes.io/job-tracking`` finalizer was only removed while the Job
existed, so the Pods of a Job deleted before they finished (Background propagation, the
default: the garbage collector deletes them after the Job) stayed Terminating for good. The real
Job controller queues such "orphan" Pods (``enqueueOrphanPod`` from its Pod and Job delete
handlers) and removes the finalizer (``syncOrphanPod``), as it does for Pods released with
``propagationPolicy: Orphan`` and for Pods it finds orphaned after a restart.
"""

from __future__ import annotations

from kube_helpers import is_true, ready_after, template

import emu.kube.cluster as kc
from emu.kube.jobs import JOB_TRACKING_FINALIZER


def job(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": template("example/long", {}, "Never")}}


async def running_pod(sim, name: str) -> dict:
    await sim.apply(job(name))
    await sim.wait_for("Job", name, lambda j: (j.get("status") or {}).get("ready") == 1)
    [pod] = await sim.client().list("Pod", "default", label_selector=f"job-name={name}")
    assert JOB_TRACKING_FINALIZER in pod["metadata"]["finalizers"]
    return pod


async def gone(sim, pod: dict) -> None:
    name = pod["metadata"]["name"]

    async def deleted() -> bool:
        return await sim.get("Pod", name) is None

    await sim.wait_until(deleted, timeout=60, what=f"Pod {name} deleted")


async def test_pods_of_a_job_deleted_in_the_background_go_away(sim):
    sim.programs.register("example/long", ready_after(0))
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    pod = await running_pod(sim, "j")
    await sim.client().delete("Job", "j", "default", propagation_policy="Background")
    await gone(sim, pod)


async def test_pods_orphaned_by_a_job_deletion_lose_the_finalizer_and_keep_running(sim):
    sim.programs.register("example/long", ready_after(0))
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    pod = await running_pod(sim, "j")
    await sim.client().delete("Job", "j", "default", propagation_policy="Orphan")
    left = await sim.wait_for("Pod", pod["metadata"]["name"],
                              lambda p: not p["metadata"].get("finalizers"), timeout=60)
    assert not left["metadata"].get("ownerReferences")
    assert is_true("Ready")(left)


async def test_a_restarted_job_controller_cleans_up_pods_of_a_job_deleted_while_it_was_down(sim):
    sim.programs.register("example/long", ready_after(0))
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    pod = await running_pod(sim, "j")
    sim.faults.crash("job-controller")
    await sim.client().delete("Job", "j", "default", propagation_policy="Background")
    await sim.sleep(30)
    held = await sim.get("Pod", pod["metadata"]["name"])
    assert held["metadata"].get("deletionTimestamp")
    assert held["metadata"]["finalizers"] == [JOB_TRACKING_FINALIZER]
    cluster.restart("job-controller")
    await gone(sim, pod)
