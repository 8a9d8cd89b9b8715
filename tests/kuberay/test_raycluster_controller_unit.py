"""Ports of ``raycluster_controller_unit_test.go``: objects in the API server, one reconciler
function called (as the Go tests call ``reconcilePods`` on a fake client) or the operator run,
then assertions on the objects, statuses, conditions and events."""

from __future__ import annotations

import pytest
from test_raycluster_support import (
    NS,
    condition,
    events,
    get_cluster,
    head_pods,
    raycluster,
    reconciler,
    set_pod_status,
    set_pods_running,
    start_kuberay,
    worker_pods,
)

from emu.kernel import clock
from emu.kuberay.raycluster import (
    VIRTUAL_EPOCH,
    go_duration,
    should_delete_pod,
    should_skip_head_pod_restart,
)
from emu.kuberay.utils.features import FeatureGates


async def _created(sim, obj):
    return await sim.client().create(obj)


async def _cluster_with_pods(sim, *, workers: int = 5, **kw):
    """``testRayCluster`` (3 replicas) with a head and ``workers`` worker Pods named pod1.."""
    rc = await _created(sim, raycluster(**kw))
    r = reconciler(sim)
    head = r.build_head_pod(rc)
    head["metadata"]["name"] = "headnode"
    head["metadata"].pop("generateName", None)
    await sim.client().create(head)
    for i in range(1, workers + 1):
        pod = r.build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], "", 0, 0)
        pod["metadata"]["name"] = f"pod{i}"
        pod["metadata"].pop("generateName", None)
        await sim.client().create(pod)
    return rc


def test_default_clock_epoch_is_the_kernel_epoch():
    assert VIRTUAL_EPOCH == clock.EPOCH


@pytest.mark.parametrize("to_delete,random_deletes", [
    (["pod1", "pod2"], 0), (["pod3", "pod4"], 0), (["pod1", "pod5"], 0),
    (["pod2", "NonExistentPod"], 1), (["NonExistentPod1", "NonExistentPod2"], 2)])
async def test_reconcile_remove_workers_to_delete_random_delete(sim, to_delete, random_deletes):
    """TestReconcile_RemoveWorkersToDelete_RandomDelete: autoscaling on and
    ENABLE_RANDOM_POD_DELETE=true: workersToDelete go first, then the list's first Pods."""
    rc = await _cluster_with_pods(sim, enableInTreeAutoscaling=True)
    rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": to_delete}
    r = reconciler(sim, env={"ENABLE_RANDOM_POD_DELETE": "true"})
    await r.reconcile_pods(rc)
    left = {p["metadata"]["name"] for p in await worker_pods(sim)
            if not p["metadata"].get("deletionTimestamp")}
    assert len(left) == 3
    assert not left & set(to_delete)
    existing = {f"pod{i}" for i in range(1, 6)}
    assert len(existing - left - set(to_delete)) == random_deletes


@pytest.mark.parametrize("to_delete,remaining", [
    (["pod1", "pod2"], 3), (["pod3", "pod4"], 3), (["pod2", "NonExistentPod"], 4),
    (["NonExistentPod1", "NonExistentPod2"], 5)])
async def test_reconcile_remove_workers_to_delete_no_random_delete(sim, to_delete, remaining):
    """TestReconcile_RemoveWorkersToDelete_NoRandomDelete: with autoscaling and no flag only the
    named Pods go; the autoscaler alone decides the rest."""
    rc = await _cluster_with_pods(sim, enableInTreeAutoscaling=True)
    rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": to_delete}
    await reconciler(sim).reconcile_pods(rc)
    left = [p for p in await worker_pods(sim) if not p["metadata"].get("deletionTimestamp")]
    assert len(left) == remaining


async def test_reconcile_random_delete_ok(sim):
    """TestReconcile_RandomDelete_OK: without autoscaling, 5 Pods for 3 replicas → the first two
    of the list are deleted."""
    rc = await _cluster_with_pods(sim)
    await reconciler(sim).reconcile_pods(rc)
    left = sorted(p["metadata"]["name"] for p in await worker_pods(sim)
                  if not p["metadata"].get("deletionTimestamp"))
    assert left == ["pod3", "pod4", "pod5"]


async def test_reconcile_pod_deleted_diff0_ok(sim):
    """TestReconcile_PodDeleted_Diff0_OK: 3 Pods for 3 replicas → nothing created or deleted."""
    rc = await _cluster_with_pods(sim, workers=3)
    await reconciler(sim).reconcile_pods(rc)
    assert sorted(p["metadata"]["name"] for p in await worker_pods(sim)) == [
        "pod1", "pod2", "pod3"]


async def test_reconcile_diff0_workers_to_delete_ok(sim):
    """TestReconcile_Diff0_WorkersToDelete_OK: with autoscaling off, deleting a named worker at
    diff 0 leaves 2 Pods this round (the new one comes next round)."""
    rc = await _cluster_with_pods(sim, workers=3)
    rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["pod1"]}
    await reconciler(sim).reconcile_pods(rc)
    left = sorted(p["metadata"]["name"] for p in await worker_pods(sim)
                  if not p["metadata"].get("deletionTimestamp"))
    assert len(left) == 3  # pod1 deleted, one new Pod created: diff = 3 - 2
    assert "pod1" not in left


async def test_reconcile_pod_evicted_diff_less0_ok(sim):
    """TestReconcile_PodEvicted_DiffLess0_OK: a Failed (evicted) worker is deleted and the
    round ends with an error, creating nothing."""
    rc = await _cluster_with_pods(sim, workers=3)
    pod1 = next(p for p in await worker_pods(sim) if p["metadata"]["name"] == "pod1")
    await set_pod_status(sim, pod1, "Failed")
    with pytest.raises(RuntimeError) as err:
        await reconciler(sim).reconcile_pods(rc)
    assert str(err.value) == "delete 1 unhealthy worker Pods"
    names = sorted(p["metadata"]["name"] for p in await worker_pods(sim))
    assert names == ["pod2", "pod3"]


async def test_reconcile_head_service_duplicate_is_an_error(sim):
    """TestReconcileHeadService: one head Service is kept; two are an error."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await sim.sleep(3)
    svc = await sim.client().get("Service", "raycluster-sample-head-svc", NS)
    copy_ = {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "dup", "namespace": NS, "labels": svc["metadata"]["labels"]},
             "spec": {"ports": [{"port": 80}], "selector": svc["spec"]["selector"]}}
    await sim.client().create(copy_)
    rc = await get_cluster(sim)
    with pytest.raises(RuntimeError) as err:
        await reconciler(sim).reconcile_head_service(rc)
    assert str(err.value).startswith("2 head service found")


def test_should_delete_pod():
    """Test_ShouldDeletePod: terminal phases delete; a terminated Ray container deletes only
    under restartPolicy Never."""
    def pod(phase, policy="Always", terminated=False):
        state = {"terminated": {"exitCode": 1}} if terminated else {"running": {}}
        return {"metadata": {"name": "p"},
                "spec": {"restartPolicy": policy, "containers": [{"name": "ray-head"}]},
                "status": {"phase": phase,
                           "containerStatuses": [{"name": "ray-head", "state": state}]}}

    assert should_delete_pod(pod("Failed"), "head")[0] is True
    assert should_delete_pod(pod("Succeeded"), "worker")[0] is True
    assert should_delete_pod(pod("Running", "Never", True), "head")[0] is True
    assert should_delete_pod(pod("Running", "Always", True), "head")[0] is False
    assert should_delete_pod(pod("Running", "OnFailure", True), "head")[0] is False
    assert should_delete_pod(pod("Running"), "head")[0] is False
    assert should_delete_pod(pod("Pending"), "worker") == (False, (
        "KubeRay does not need to delete the worker Pod p. The Pod status is Pending, and the "
        "Ray container terminated status is nil."))
    assert should_delete_pod(pod("Failed"), "head")[1] == (
        "The head Pod p status is Failed which is a terminal state. KubeRay will delete the Pod "
        "and create new Pods in the next reconciliation if necessary.")


async def test_terminated_head_restart_policy(sim):
    """Test_TerminatedHead_RestartPolicy: a head whose Ray container exited under Always stays;
    under Never it is deleted and the round fails with the reason."""
    rc = await _cluster_with_pods(sim, workers=3)
    head = (await head_pods(sim))[0]
    await set_pod_status(sim, head, "Running", terminated={"exitCode": 1})
    await reconciler(sim).reconcile_pods(rc)
    assert [p["metadata"]["name"] for p in await head_pods(sim)] == ["headnode"]

    live = await sim.client().get("Pod", "headnode", NS)
    await sim.client().delete("Pod", "headnode", NS, grace_period_seconds=0)
    live["spec"]["restartPolicy"] = "Never"
    for key in ("resourceVersion", "uid", "creationTimestamp"):
        live["metadata"].pop(key, None)
    live.pop("status", None)
    await sim.client().create(live)
    head = (await head_pods(sim))[0]
    await set_pod_status(sim, head, "Running", terminated={"exitCode": 1})
    with pytest.raises(RuntimeError) as err:
        await reconciler(sim).reconcile_pods(rc)
    assert "so KubeRay will delete it." in str(err.value)
    assert await head_pods(sim) == []


async def test_terminated_workers_no_autoscaler(sim):
    """Test_TerminatedWorkers_NoAutoscaler: Failed workers are deleted (error), then recreated."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await sim.sleep(3)
    for pod in await worker_pods(sim):
        await set_pod_status(sim, pod, "Failed")
    before = {p["metadata"]["name"] for p in await worker_pods(sim)}
    await sim.sleep(5)
    after = {p["metadata"]["name"] for p in await worker_pods(sim)}
    assert len(after) == 3
    assert not after & before
    deleted = await events(sim, "DeletedWorkerPod")
    assert len(deleted) == 3


async def test_calculate_status(sim):
    """TestCalculateStatus: counters, desired resources, endpoints and head info."""
    rc = await _cluster_with_pods(sim, workers=3)
    r = reconciler(sim)
    await r.reconcile_head_service(rc)
    await set_pods_running(sim)
    new = await r.calculate_status(rc, None)
    st = new["status"]
    assert (st["readyWorkerReplicas"], st["availableWorkerReplicas"],
            st["desiredWorkerReplicas"], st["minWorkerReplicas"], st["maxWorkerReplicas"]) == (
        3, 3, 3, 0, 4)
    assert st["state"] == "ready"
    assert st["desiredCPU"] == "1"
    assert st["desiredMemory"] == "2Gi"
    assert st["endpoints"]["dashboard"] == "8265"
    assert st["head"] == {"podIP": "10.0.0.1", "podName": "headnode", "serviceIP": "10.0.0.1",
                          "serviceName": "raycluster-sample-head-svc"}
    assert "state" not in rc.get("status", {})  # the input is not changed


async def test_calculate_status_with_reconcile_error_back_and_forth(sim):
    """TestCalculateStatusWithReconcileErrorBackAndForth: a typed error sets ReplicaFailure; a
    clean round removes it; the sticky ``ready`` state survives the error."""
    from emu.kuberay.utils import constant as C

    rc = await _cluster_with_pods(sim, workers=3)
    r = reconciler(sim)
    await r.reconcile_head_service(rc)
    await set_pods_running(sim)
    ok = await r.calculate_status(rc, None)
    assert ok["status"]["state"] == "ready"
    err = RuntimeError("boom")
    err.__cause__ = C.ERR_FAILED_CREATE_WORKER_POD
    failed = await r.calculate_status(ok, err)
    assert condition(failed, "ReplicaFailure")["reason"] == "FailedCreateWorkerPod"
    assert failed["status"]["state"] == "ready"
    clean = await r.calculate_status(failed, None)
    assert condition(clean, "ReplicaFailure") is None


async def test_ray_cluster_provisioned_condition(sim):
    """TestRayClusterProvisionedCondition: False while Pods are not all ready, True once, then
    sticky even when a Pod becomes un-Ready."""
    rc = await _cluster_with_pods(sim, workers=3)
    r = reconciler(sim)
    await r.reconcile_head_service(rc)
    first = await r.calculate_status(rc, None)
    assert condition(first, "RayClusterProvisioned")["status"] == "False"
    await set_pods_running(sim)
    second = await r.calculate_status(first, None)
    assert condition(second, "RayClusterProvisioned")["status"] == "True"
    await set_pod_status(sim, (await worker_pods(sim))[0], "Running", ready=False)
    third = await r.calculate_status(second, None)
    assert condition(third, "RayClusterProvisioned")["status"] == "True"


async def test_state_transition_times_no_state_change(sim):
    """TestStateTransitionTimes_NoStateChange: the time is stamped only when the state changes."""
    rc = await _cluster_with_pods(sim, workers=3)
    r = reconciler(sim)
    await r.reconcile_head_service(rc)
    await set_pods_running(sim)
    first = await r.calculate_status(rc, None)
    stamp = first["status"]["stateTransitionTimes"]["ready"]
    await sim.sleep(60)
    second = await r.calculate_status(first, None)
    assert second["status"]["stateTransitionTimes"]["ready"] == stamp
    assert second["status"]["lastUpdateTime"] != stamp


async def test_events_failed_pod_creation(sim):
    """TestEvents_FailedPodCreation: failed head and worker creates are Warning events."""
    sim.faults.fail_requests(verb="create", kind="Pod", code=500, count=1)
    rc = await _created(sim, raycluster())
    r = reconciler(sim)
    with pytest.raises(RuntimeError):
        await r.reconcile_pods(rc)
    await r.recorder.flush()
    [event] = await events(sim, "FailedToCreateHeadPod")
    assert event["type"] == "Warning"
    # The Pod has only a generateName, so Go prints an empty name too.
    assert event["message"] == "Failed to create head Pod default/, Internal error occurred"


async def test_reconcile_managed_by(sim):
    """Test_ReconcileManagedBy: another manager's cluster is left alone; KubeRay's is not."""
    start_kuberay(sim)
    await sim.apply(raycluster("external", managedBy="kueue.x-k8s.io/multikueue"))
    await sim.apply(raycluster("ours", managedBy="ray.io/kuberay-operator"))
    await sim.sleep(5)
    assert await worker_pods(sim, "external") == []
    assert len(await worker_pods(sim, "ours")) == 3


async def test_invalid_metadata_is_reported_as_an_event_and_nothing_is_created(sim):
    """The validation path of ``rayClusterReconcile``: a Warning ``InvalidRayClusterSpec``
    event and no children (here: a worker group without containers)."""
    start_kuberay(sim)
    bad = raycluster()
    bad["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = []
    await sim.apply(bad)
    await sim.sleep(5)
    [event] = await events(sim, "InvalidRayClusterSpec")
    assert event["message"].startswith("The RayCluster spec is invalid default/raycluster-sample: ")
    assert await head_pods(sim) == []


async def test_reconcile_replicas_optional(sim):
    """TestReconcile_Replicas_Optional: without ``replicas`` the group runs minReplicas."""
    start_kuberay(sim)
    await sim.apply(raycluster(replicas=None, min_replicas=2))
    await sim.sleep(5)
    assert len(await worker_pods(sim)) == 2


async def test_disable_provisioned_head_restart_skips_head_recreation(sim):
    """The ``ray.io/disable-provisioned-head-restart`` rule: once Provisioned, a lost head is
    not recreated; without the annotation it is."""
    start_kuberay(sim)
    await sim.apply(raycluster("skip", annotations={
        "ray.io/disable-provisioned-head-restart": "true"}))
    await sim.apply(raycluster("restart"))
    await sim.sleep(3)
    for name in ("skip", "restart"):
        await set_pods_running(sim, name)
        await sim.wait_for("RayCluster", name, lambda o: (
            condition(o, "RayClusterProvisioned") or {}).get("status") == "True", timeout=10)
        head = (await head_pods(sim, name))[0]
        await sim.client().delete("Pod", head["metadata"]["name"], NS, grace_period_seconds=0)
    await sim.sleep(5)
    assert await head_pods(sim, "skip") == []
    assert len(await head_pods(sim, "restart")) == 1
    skip = await get_cluster(sim, "skip")
    assert condition(skip, "HeadPodReady")["reason"] == "HeadPodNotFound"
    assert skip["status"]["state"] == "ready"  # sticky
    assert should_skip_head_pod_restart(skip) is True


async def test_update_status_observed_generation(sim):
    """TestUpdateStatusObservedGeneration: observedGeneration follows metadata.generation."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await sim.sleep(3)
    await sim.apply(raycluster(replicas=2))
    rc = await sim.wait_for("RayCluster", "raycluster-sample",
                            lambda o: o["status"].get("observedGeneration") == 2, timeout=10)
    assert rc["metadata"]["generation"] == 2


def test_go_duration_formats_like_go():
    assert [go_duration(s) for s in (300, 301.5, 3600, 0.5)] == ["5m0s", "5m1.5s", "1h0m0s",
                                                                  "0.5s"]


async def test_feature_gate_multi_host_indexing_labels_workers_with_replica_index(sim):
    """With RayMultiHostIndexing on (default) workers get the lowest free replica index."""
    start_kuberay(sim)
    await sim.apply(raycluster())
    await sim.sleep(3)
    indices = sorted(p["metadata"]["labels"]["ray.io/worker-group-replica-index"]
                     for p in await worker_pods(sim))
    assert indices == ["0", "1", "2"]
    assert FeatureGates().enabled("RayMultiHostIndexing") is True


async def test_scale_expectations_create_until_seen_or_30s_delete_until_gone(sim):
    """scale_expectations_test.go: a create counts once the Pod is readable or 30 s later; a
    delete only once the Pod is gone; Delete forgets a cluster's records."""
    from emu.kuberay.expectations import CREATE, DELETE, RayClusterScaleExpectation

    c = sim.client()
    exp = RayClusterScaleExpectation(c)
    exp.expect_scale_pod(NS, "rc", "g", "missing", CREATE)
    assert await exp.is_satisfied(NS, "rc", "g") is False
    await sim.sleep(31)
    assert await exp.is_satisfied(NS, "rc", "g") is True
    await c.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    exp.expect_scale_pod(NS, "rc", "g", "p", DELETE)
    await sim.sleep(3600)
    assert await exp.is_satisfied(NS, "rc", "g") is False
    assert await exp.is_satisfied(NS, "rc", "other") is True
    exp.delete("rc", NS)
    assert await exp.is_satisfied(NS, "rc", "g") is True
    assert len(exp) == 0
