"""Ports of ``rayjob_controller_suspended_test.go``: creating suspended, resuming, the atomic
Suspending state, and the Suspended state's requeue rules (SPEC §3.9)."""

from __future__ import annotations

from test_raycluster_support import NS
from test_rayjob_controller_unit import reconciler
from test_rayjob_support import (
    FakeRayDashboardClient,
    get_or_none,
    get_rayjob,
    make_cluster_ready,
    rayjob,
    start_kuberay,
    to_running,
    wait_status,
)

from emu.runtime import Request, Result


async def test_rayjob_created_suspended_creates_nothing_until_resumed(sim):
    """Describe("When creating a rayjob with suspend == true"): Suspended, no RayCluster; after
    ``suspend: false`` the cluster is created, the submitter Job only once the cluster is ready
    and the dashboard URL known."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-suspend", suspend=True))
    rj = await wait_status(sim, "rayjob-suspend", "Suspended", timeout=3)
    await sim.sleep(3)
    assert list(await sim.client().list("RayCluster", NS)) == []
    rj = await get_rayjob(sim, "rayjob-suspend")
    rj["spec"]["suspend"] = False
    await sim.client().update(rj)
    rj = await sim.wait_for("RayJob", "rayjob-suspend", lambda o: o["status"].get(
        "rayClusterName"), timeout=5)
    cluster = rj["status"]["rayClusterName"]
    await sim.wait_for("RayCluster", cluster, timeout=3)
    await sim.sleep(3)
    assert await get_or_none(sim, "Job", "rayjob-suspend") is None
    await make_cluster_ready(sim, cluster)
    rj = await wait_status(sim, "rayjob-suspend", "Running", timeout=5)
    assert rj["status"]["dashboardURL"] == f"{cluster}-head-svc.default.svc.cluster.local:8265"
    assert await get_or_none(sim, "Job", "rayjob-suspend") is not None


async def test_suspend_is_atomic_once_suspending(sim):
    """Describe("RayJob suspend operation shoud be atomic"): a finalizer holds the RayCluster;
    flipping ``suspend`` back to false and true again leaves the RayJob Suspending; once the
    cluster is gone it becomes Suspended, its cluster name, job id and dashboard URL cleared."""
    start_kuberay(sim, FakeRayDashboardClient())
    await sim.client().create(rayjob("rayjob-atomic-suspend"))
    rj = await to_running(sim, "rayjob-atomic-suspend")
    cluster_name = rj["status"]["rayClusterName"]
    rc = await sim.client().get("RayCluster", cluster_name, NS)
    rc["metadata"]["finalizers"] = ["ray.io/deletion-blocker"]
    await sim.client().update(rc)

    rj = await get_rayjob(sim, "rayjob-atomic-suspend")
    rj["spec"]["suspend"] = True
    await sim.client().update(rj)
    await wait_status(sim, "rayjob-atomic-suspend", "Suspending", timeout=5)
    for flag in (False, True):
        rj = await get_rayjob(sim, "rayjob-atomic-suspend")
        rj["spec"]["suspend"] = flag
        await sim.client().update(rj)
        await sim.sleep(3)
        assert (await get_rayjob(sim, "rayjob-atomic-suspend"))["status"][
            "jobDeploymentStatus"] == "Suspending"

    rc = await sim.client().get("RayCluster", cluster_name, NS)
    rc["metadata"]["finalizers"] = []
    await sim.client().update(rc)
    rj = await wait_status(sim, "rayjob-atomic-suspend", "Suspended", timeout=10)
    for key in ("rayClusterName", "jobId", "dashboardURL", "jobStatus"):
        assert key not in rj["status"], key
    assert await get_or_none(sim, "Job", "rayjob-atomic-suspend") is None


async def test_suspended_rayjob_reconciles_without_requeue_or_status_change(sim):
    """Describe("When RayJob is suspended and should not requeue")."""
    r = reconciler(sim)
    rj = await sim.client().create(rayjob("suspended-job", suspend=True))
    rj["status"] = {"jobDeploymentStatus": "Suspended", "jobStatus": ""}
    rj = await sim.client().update_status(rj)
    result = await r.reconcile(Request(NS, "suspended-job"))
    assert result == Result()
    after = await get_rayjob(sim, "suspended-job")
    assert after["status"] == rj["status"]
    assert after["metadata"]["resourceVersion"] == rj["metadata"]["resourceVersion"]


async def test_suspended_rayjob_with_suspend_false_goes_new_and_requeues(sim):
    """Describe("When suspended RayJob transitions to New status")."""
    r = reconciler(sim)
    rj = await sim.client().create(rayjob("suspended-job-resume"))
    rj["status"] = {"jobDeploymentStatus": "Suspended", "jobStatus": ""}
    await sim.client().update_status(rj)
    result = await r.reconcile(Request(NS, "suspended-job-resume"))
    assert result == Result(requeue_after=3.0)
    after = await get_rayjob(sim, "suspended-job-resume")
    assert after["status"].get("jobDeploymentStatus", "") == ""
    assert after["status"].get("jobStatus", "") == ""
