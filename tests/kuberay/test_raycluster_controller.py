"""Ports of ``raycluster_controller_test.go`` (the envtest suite): an operator replica runs, the
test plays the kubelet by writing Pod status, and asserts on Pods, Services, status and events."""

from __future__ import annotations

from test_raycluster_support import (
    NS,
    condition,
    events,
    get_cluster,
    head_pods,
    pods,
    raycluster,
    set_pod_status,
    set_pods_running,
    start_kuberay,
    with_replicas,
    worker_pods,
)


async def _settle(sim, seconds: float = 5.0) -> None:
    await sim.sleep(seconds)


async def test_static_raycluster_gets_one_headless_head_service_and_three_workers(sim):
    """Describe("Static RayCluster"): "Check head service", "Check the number of worker Pods"."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    svc = await sim.client().get("Service", "raycluster-sample-head-svc", NS)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"]["ray.io/node-type"] == "head"
    assert len(await worker_pods(sim)) == 3
    assert len(await head_pods(sim)) == 1
    owner = (await head_pods(sim))[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == (
        "RayCluster", "raycluster-sample", True)


async def test_static_raycluster_state_becomes_ready_shortly_after_all_pods_are_running(sim):
    """It("RayCluster's .status.state should be updated to 'ready' shortly after all Pods are
    Running"): the status is recomputed by the 2 s requeue, not by a Pod watch alone."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    assert (await get_cluster(sim))["status"].get("state", "") == ""
    await set_pods_running(sim)
    rc = await sim.wait_for("RayCluster", "raycluster-sample",
                            lambda o: o.get("status", {}).get("state") == "ready", timeout=10)
    assert rc["status"]["readyWorkerReplicas"] == 3
    assert rc["status"]["availableWorkerReplicas"] == 3
    assert rc["status"]["desiredWorkerReplicas"] == 3
    assert rc["status"]["head"]["serviceName"] == "raycluster-sample-head-svc"
    assert rc["status"]["head"]["serviceIP"] == "10.0.0.1"  # headless: the head Pod's IP


async def test_deleted_worker_pod_is_replaced_by_a_new_one(sim):
    """It("Delete a worker Pod, and KubeRay should create a new one")."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    before = {p["metadata"]["name"] for p in await worker_pods(sim)}
    victim = sorted(before)[0]
    await sim.client().delete("Pod", victim, NS, grace_period_seconds=0)
    await _settle(sim)
    after = {p["metadata"]["name"] for p in await worker_pods(sim)}
    assert len(after) == 3
    assert victim not in after
    assert len(after - before) == 1


async def test_increasing_replicas_past_max_replicas_creates_only_max_replicas(sim):
    """It("Increase replicas past maxReplicas"): replicas 5 with maxReplicas 4 → 4 workers."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    await sim.apply(with_replicas(raycluster(), 5))
    await _settle(sim)
    assert len(await worker_pods(sim)) == 4


async def test_suspend_with_condition_deletes_pods_then_reports_suspended_and_resumes(sim):
    """Describe("Suspend RayCluster") It("with Condition"): Suspending, Pods deleted, Suspended,
    state ``suspended``; unsuspend → Suspended False and Pods again."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    await sim.apply(raycluster(suspend=True))
    rc = await sim.wait_for("RayCluster", "raycluster-sample", lambda o: (
        condition(o, "RayClusterSuspended") or {}).get("status") == "True", timeout=30)
    assert await pods(sim, "ray.io/cluster=raycluster-sample") == []
    assert condition(rc, "RayClusterSuspending")["status"] == "False"
    assert condition(rc, "RayClusterProvisioned")["message"] == "RayCluster has been suspended"
    assert rc["status"]["state"] == "suspended"
    # Emitted on every Suspending round, whether or not a Pod was still active (as in Go).
    messages = {e["message"] for e in await events(sim, "DeletedPod")}
    assert messages == {"Deleted Pods for RayCluster default/raycluster-sample due to suspension"}
    await sim.apply(raycluster(suspend=False))
    await sim.wait_for("RayCluster", "raycluster-sample", lambda o: (
        condition(o, "RayClusterSuspended") or {}).get("status") == "False", timeout=30)
    await _settle(sim)
    assert len(await worker_pods(sim)) == 3


async def test_suspend_without_condition_gate_deletes_pods_directly(sim):
    """It("without Condition"): with RayClusterStatusConditions off, ``suspend`` deletes Pods
    and no suspend conditions are written."""
    start_kuberay(sim, gates="RayClusterStatusConditions=false")
    await sim.apply(raycluster())
    await _settle(sim)
    await sim.apply(raycluster(suspend=True))
    rc = await sim.wait_for("RayCluster", "raycluster-sample",
                            lambda o: o.get("status", {}).get("state") == "suspended", timeout=30)
    assert condition(rc, "RayClusterSuspending") is None
    assert await pods(sim, "ray.io/cluster=raycluster-sample") == []


async def test_suspended_worker_group_has_its_pods_deleted(sim):
    """It("worker group"): ``workerGroupSpecs[].suspend`` deletes only that group's Pods."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    suspended = raycluster()
    suspended["spec"]["workerGroupSpecs"][0]["suspend"] = True
    await sim.apply(suspended)
    await _settle(sim)
    assert await worker_pods(sim) == []
    assert len(await head_pods(sim)) == 1


async def test_head_pod_ready_and_provisioned_conditions_follow_the_pods(sim):
    """It("Should handle HeadPodReady and RayClusterProvisioned conditions correctly"):
    HeadPodReady mirrors the head's PodReady; Provisioned turns True once and stays True
    when a Pod later becomes un-Ready."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await _settle(sim)
    rc = await get_cluster(sim)
    assert condition(rc, "HeadPodReady")["status"] == "False"
    assert condition(rc, "RayClusterProvisioned")["reason"] == "RayClusterPodsProvisioning"
    await set_pods_running(sim)
    rc = await sim.wait_for("RayCluster", "raycluster-sample", lambda o: (
        condition(o, "RayClusterProvisioned") or {}).get("status") == "True", timeout=10)
    assert condition(rc, "HeadPodReady")["reason"] == "HeadPodRunningAndReady"
    assert condition(rc, "RayClusterProvisioned")["reason"] == "AllPodRunningAndReadyFirstTime"
    head = (await head_pods(sim))[0]
    await set_pod_status(sim, head, "Running", ready=False)
    rc = await sim.wait_for("RayCluster", "raycluster-sample", lambda o: (
        condition(o, "HeadPodReady") or {}).get("status") == "False", timeout=10)
    assert condition(rc, "RayClusterProvisioned")["status"] == "True"
    assert rc["status"]["state"] == "ready"


async def test_replica_failure_condition_is_set_when_pod_creation_fails(sim):
    """It("Should handle RayClusterReplicaFailure condition correctly")."""
    sim.faults.fail_requests(verb="create", kind="Pod", code=500)
    start_kuberay(sim)
    await sim.apply(raycluster())
    rc = await sim.wait_for("RayCluster", "raycluster-sample",
                            lambda o: condition(o, "ReplicaFailure") is not None, timeout=30)
    failure = condition(rc, "ReplicaFailure")
    assert failure["status"] == "True"
    assert failure["reason"] == "FailedCreateHeadPod"
    assert failure["message"].startswith("FailedCreateHeadPod\n")


async def test_maximum_length_name_gets_its_services_and_pods(sim):
    """Describe("RayCluster with a maximum name"): a 53-character name still works."""
    name = "r" * 53
    start_kuberay(sim)
    await sim.apply(raycluster(name))
    await _settle(sim)
    assert len(await worker_pods(sim, name)) == 3
    svc = await sim.client().get("Service", f"{name}-head-svc", NS)
    assert svc["metadata"]["labels"]["ray.io/cluster"] == name


async def test_manager_cache_holds_ray_pods_only(sim):
    """Describe("Manager cache Pod label selectors"): an unrelated Pod is invisible to the
    controller's cached reads, while the API server lists it."""
    seen: dict[str, object] = {}
    from emu.kuberay.operator import Configuration, operator_config
    from emu.kuberay.utils.features import FeatureGates
    from emu.runtime import start_operator

    def on_setup(mgr, reconcilers):
        seen["mgr"] = mgr

    start_operator(sim, "kuberay-operator", operator_config(
        Configuration(enable_leader_election=False), FeatureGates(), pod_namespace=NS,
        on_setup=on_setup))
    await sim.apply(raycluster())
    await sim.client().create({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "unrelated", "namespace": NS},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await _settle(sim)
    direct = {p["metadata"]["name"] for p in await pods(sim)}
    cached = {p["metadata"]["name"] for p in await seen["mgr"].get_client().list("Pod", NS)}
    assert "unrelated" in direct
    assert "unrelated" not in cached
    assert cached == direct - {"unrelated"}
