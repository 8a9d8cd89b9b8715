"""GCS fault tolerance in the RayCluster controller: ports of the Redis cleanup cases of
``raycluster_controller_unit_test.go`` (Test_RedisCleanup*, TestEvents_RedisCleanup, the
finalizer-timeout Describe of ``raycluster_controller_test.go``) and of
``gcs_ft_controller_unit_test.go`` (TestReconcileGCSStoragePVC)."""

from __future__ import annotations

import pytest
from test_raycluster_support import (
    NS,
    events,
    head_pods,
    raycluster,
    reconciler,
    start_kuberay,
    worker_pods,
)

from emu.kuberay.utils.features import parse_feature_gates
from emu.runtime import Request

FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"

def redis_cluster(name: str = "raycluster-sample", **kw):
    return raycluster(name, gcsFaultToleranceOptions={"redisAddress": "redis:6379"}, **kw)


def rocksdb_cluster(name: str = "raycluster-sample", storage=None, **kw):
    options = {"backend": "rocksdb"}
    if storage is not None:
        options["storage"] = storage
    return raycluster(name, gcsFaultToleranceOptions=options, **kw)


async def _job_finished(sim, name: str, condition: str) -> None:
    c = sim.client("job-controller")
    job = await c.get("Job", name, NS)
    job["status"] = {"conditions": [{"type": condition, "status": "True"}]}
    await c.update_status(job)


async def test_redis_ft_adds_the_finalizer_before_creating_pods(sim):
    """Test_RedisCleanupFeatureFlag (enabled): the finalizer is persisted first; Pods follow."""
    start_kuberay(sim)
    await sim.apply(redis_cluster())
    rc = await sim.wait_for("RayCluster", "raycluster-sample",
                            lambda o: FINALIZER in (o["metadata"].get("finalizers") or []),
                            timeout=5)
    assert rc["metadata"]["finalizers"] == [FINALIZER]
    await sim.sleep(5)
    head = (await head_pods(sim))[0]
    env = {e["name"]: e.get("value") for e in head["spec"]["containers"][0]["env"]}
    assert env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert env["RAY_external_storage_namespace"] == rc["metadata"]["uid"]
    worker = (await worker_pods(sim))[0]
    wenv = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert wenv["RAY_gcs_rpc_server_reconnect_timeout_s"] == "600"


async def test_redis_cleanup_feature_flag_disabled_adds_no_finalizer(sim):
    """Test_RedisCleanupFeatureFlag (ENABLE_GCS_FT_REDIS_CLEANUP=false)."""
    start_kuberay(sim, env={"ENABLE_GCS_FT_REDIS_CLEANUP": "false"})
    await sim.apply(redis_cluster())
    await sim.sleep(5)
    rc = await sim.client().get("RayCluster", "raycluster-sample", NS)
    assert not rc["metadata"].get("finalizers")
    assert len(await head_pods(sim)) == 1


async def test_redis_cleanup_skipped_for_embedded_backend(sim):
    """Test_RedisCleanupSkippedForEmbeddedBackend: RocksDB gets no Redis finalizer."""
    start_kuberay(sim, gates="GCSFaultToleranceEmbeddedStorage=true")
    await sim.apply(rocksdb_cluster())
    await sim.sleep(5)
    rc = await sim.client().get("RayCluster", "raycluster-sample", NS)
    assert not rc["metadata"].get("finalizers")


@pytest.mark.parametrize("outcome", ["Complete", "Failed"])
async def test_redis_cleanup_job_runs_after_the_head_is_gone_and_ends_the_finalizer(sim, outcome):
    """Test_RedisCleanup / TestEvents_RedisCleanup: deletion removes the Pods, the cleanup Job is
    created only once no head Pod is listed, and its end (success or failure) drops the
    finalizer, so the RayCluster disappears."""
    start_kuberay(sim)
    await sim.apply(redis_cluster())
    await sim.sleep(5)
    await sim.client().delete("RayCluster", "raycluster-sample", NS)
    job = await sim.wait_for("Job", "raycluster-sample-redis-cleanup", timeout=30)
    assert await head_pods(sim) == []
    labels = job["metadata"]["labels"]
    assert labels["ray.io/node-type"] == "redis-cleanup"
    assert labels["app.kubernetes.io/created-by"] == "kuberay-operator"
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (0, 300)
    [created] = await events(sim, "CreatedRedisCleanupJob")
    assert created["message"] == \
        "Created Redis cleanup Job default/raycluster-sample-redis-cleanup"
    assert (await sim.client().get("RayCluster", "raycluster-sample", NS))["metadata"][
        "finalizers"] == [FINALIZER]
    await _job_finished(sim, "raycluster-sample-redis-cleanup", outcome)
    await sim.sleep(5)
    assert await sim.get("RayCluster", "raycluster-sample") is None


async def test_redis_cleanup_waits_for_a_terminating_head_pod(sim):
    """The head-Pod wait: while a head Pod is still listed (terminating), no Job is created and
    the reconcile requeues every 10 s."""
    start_kuberay(sim)
    await sim.apply(redis_cluster())
    await sim.sleep(5)
    head = (await head_pods(sim))[0]
    c = sim.client("kubelet")
    head["metadata"].setdefault("finalizers", []).append("test/hold")
    await c.update(head)
    await sim.client().delete("RayCluster", "raycluster-sample", NS)
    await sim.sleep(60)
    assert await sim.get("Job", "raycluster-sample-redis-cleanup") is None
    live = (await head_pods(sim))[0]
    assert live["metadata"].get("deletionTimestamp")
    live["metadata"]["finalizers"] = []
    await c.update(live)
    await sim.wait_for("Job", "raycluster-sample-redis-cleanup", timeout=15)


async def test_stuck_gcs_ft_finalizer_is_force_removed_after_the_annotation_timeout(sim):
    """Describe("Auto-deletion for clusters with stuck GCS FT finalizer"): not before the
    timeout; after it, the finalizer goes with a ForceDeletedStuckCluster Warning."""
    start_kuberay(sim)
    await sim.apply(redis_cluster(annotations={"ray.io/gcs-ft-deletion-timeout": "30"}))
    await sim.sleep(5)
    await sim.client().delete("RayCluster", "raycluster-sample", NS)
    deleted_at = sim.now
    await sim.sleep(20)
    assert await sim.get("RayCluster", "raycluster-sample") is not None
    await sim.sleep(20)
    assert await sim.get("RayCluster", "raycluster-sample") is None
    [event] = await events(sim, "ForceDeletedStuckCluster")
    assert event["type"] == "Warning"
    assert event["message"].startswith("Force-removed GCS FT finalizer after ")
    assert event["message"].endswith(
        'due to Redis cleanup timeout; Redis storage namespace "" may need manual cleanup')
    assert sim.now - deleted_at >= 30


async def test_stale_redis_cleanup_finalizer_removed_for_embedded_backend(sim):
    """Test_StaleRedisCleanupFinalizerRemovedForEmbeddedBackend."""
    start_kuberay(sim, gates="GCSFaultToleranceEmbeddedStorage=true")
    rc = rocksdb_cluster()
    rc["metadata"]["finalizers"] = [FINALIZER]
    await sim.apply(rc)
    await sim.sleep(3)
    await sim.client().delete("RayCluster", "raycluster-sample", NS)
    await sim.sleep(3)
    assert await sim.get("RayCluster", "raycluster-sample") is None


# -- TestReconcileGCSStoragePVC (gcs_ft_controller_unit_test.go) -------------------------------


async def _reconcile_pvc(sim, cluster):
    rc = await sim.client().create(cluster)
    r = reconciler(sim, gates=parse_feature_gates("GCSFaultToleranceEmbeddedStorage=true"))
    await r.reconcile_gcs_storage_pvc(rc)
    await r.recorder.flush()
    return rc


async def test_reconcile_gcs_storage_pvc_creates_an_owned_pvc(sim):
    rc = await _reconcile_pvc(sim, rocksdb_cluster())
    pvc = await sim.client().get("PersistentVolumeClaim", "raycluster-sample-gcs-pvc", NS)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == rc["metadata"]["uid"]
    [event] = await events(sim, "CreatedPVC")
    assert event["message"] == "Created GCS storage PVC default/raycluster-sample-gcs-pvc"


async def test_reconcile_gcs_storage_pvc_retain_has_no_owner(sim):
    await _reconcile_pvc(sim, rocksdb_cluster(storage={"deletionPolicy": "Retain",
                                                       "size": "5Gi"}))
    pvc = await sim.client().get("PersistentVolumeClaim", "raycluster-sample-gcs-pvc", NS)
    assert not pvc["metadata"].get("ownerReferences")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"


async def test_reconcile_gcs_storage_pvc_adopts_and_reports_drift(sim):
    await sim.client().create({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "raycluster-sample-gcs-pvc", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}})
    rc = await _reconcile_pvc(sim, rocksdb_cluster())
    pvc = await sim.client().get("PersistentVolumeClaim", "raycluster-sample-gcs-pvc", NS)
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == rc["metadata"]["uid"]
    [event] = await events(sim, "FailedToCreatePVC")
    assert event["message"] == (
        "GCS storage PVC default/raycluster-sample-gcs-pvc already exists and cannot be "
        "reconfigured in place (requested size 1Gi != current 2Gi); delete the PVC to recreate "
        "it with the new settings")


async def test_reconcile_gcs_storage_pvc_missing_user_claim_is_a_warning(sim):
    await _reconcile_pvc(sim, rocksdb_cluster(storage={"claimName": "my-claim"}))
    [event] = await events(sim, "FailedToCreatePVC")
    assert event["message"] == (
        'GcsFaultToleranceOptions.Storage.ClaimName "my-claim" not found in namespace default; '
        "the head Pod will not start until it exists")
    assert await sim.get("PersistentVolumeClaim", "raycluster-sample-gcs-pvc") is None


async def test_rocksdb_without_its_feature_gate_is_an_invalid_spec(sim):
    """validateGcsFaultToleranceBackend: rocksdb needs GCSFaultToleranceEmbeddedStorage."""
    start_kuberay(sim)
    await sim.apply(rocksdb_cluster())
    await sim.sleep(3)
    [event] = await events(sim, "InvalidRayClusterSpec")
    assert "GCSFaultToleranceEmbeddedStorage" in event["message"]
    assert await head_pods(sim) == []


async def test_rocksdb_head_pod_mounts_the_operator_pvc(sim):
    start_kuberay(sim, gates="GCSFaultToleranceEmbeddedStorage=true")
    await sim.apply(rocksdb_cluster())
    await sim.sleep(3)
    head = (await head_pods(sim))[0]
    volumes = {v["name"]: v for v in head["spec"]["volumes"]}
    assert volumes["gcs-storage"]["persistentVolumeClaim"]["claimName"] == \
        "raycluster-sample-gcs-pvc"
    env = {e["name"]: e.get("value") for e in head["spec"]["containers"][0]["env"]}
    assert (env["RAY_gcs_storage"], env["RAY_gcs_storage_path"]) == ("rocksdb", "/data/gcs")


async def test_reconcile_of_a_missing_cluster_is_a_no_op(sim):
    r = reconciler(sim)
    result = await r.reconcile(Request(NS, "nothing-here"))
    assert result.is_zero()
