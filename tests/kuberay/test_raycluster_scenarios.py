"""End-to-end RayCluster scenarios: kubelets run the Pods the operator creates, the Ray image's
programs start GCS and raylets from the Pod specs, and the operator runs as its Deployment's
Pods. Nothing is wired by hand between the controller and the fake Ray."""

from __future__ import annotations

import pytest
from test_raycluster_support import NS, condition, head_pods, raycluster, worker_pods

from emu.kube import cluster as kube_cluster
from emu.kuberay.operator import install_kuberay
from emu.ray.images import register_ray_programs

REDIS = [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "redis", "namespace": NS, "labels": {"app": "redis"}},
     "spec": {"containers": [{"name": "redis", "image": "redis:7.4",
                              "ports": [{"containerPort": 6379}]}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "redis", "namespace": NS},
     "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379, "targetPort": 6379}]}},
]


async def _world(sim, **install):
    kube = kube_cluster.install(sim, nodes=3)
    register_ray_programs(sim.programs)
    await kube.wait_ready()
    kuberay = await install_kuberay(sim, **install)
    await kuberay.wait_for_leader(timeout=120)
    return kube, kuberay


def _ready(obj) -> bool:
    return obj.get("status", {}).get("state") == "ready" and (
        condition(obj, "HeadPodReady") or {}).get("status") == "True"


def _restarts(pod) -> int:
    return sum(s.get("restartCount", 0) for s in pod.get("status", {}).get(
        "containerStatuses") or [])


async def test_operator_runs_as_deployment_pods_and_the_cluster_becomes_ready(sim):
    _, kuberay = await _world(sim, replicas=2)
    assert not kuberay.direct
    operators = list(await sim.client().list(
        "Pod", NS, label_selector="app.kubernetes.io/name=kuberay-operator"))
    assert len(operators) == 2
    await sim.apply(raycluster(replicas=2))
    rc = await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    assert rc["status"]["readyWorkerReplicas"] == 2
    assert condition(rc, "RayClusterProvisioned")["status"] == "True"


async def test_lost_worker_pod_is_replaced_and_the_cluster_is_ready_again(sim):
    await _world(sim)
    await sim.apply(raycluster(replicas=2))
    await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    victim = (await worker_pods(sim))[0]["metadata"]["name"]
    await sim.client().delete("Pod", victim, NS)
    await sim.sleep(60)
    names = {p["metadata"]["name"] for p in await worker_pods(sim)}
    assert victim not in names
    assert len(names) == 2
    rc = await sim.wait_for("RayCluster", "raycluster-sample",
                            lambda o: o["status"].get("readyWorkerReplicas") == 2, timeout=300)
    assert rc["status"]["state"] == "ready"


@pytest.mark.parametrize("storage", ["memory", "redis", "rocksdb"])
async def test_head_pod_loss_new_head_and_which_workers_survive(sim, storage):
    """Memory: the new head starts an empty GCS; workers lose it for more than Ray's 60 s and
    their raylets exit (containers restart). Redis and RocksDB (on the operator's PVC): the new
    head reloads the tables, and workers reconnect within KubeRay's 600 s without restarting."""
    gates = {"GCSFaultToleranceEmbeddedStorage": True} if storage == "rocksdb" else None
    await _world(sim, feature_gates=gates)
    spec: dict[str, object] = {}
    if storage == "rocksdb":
        spec["gcsFaultToleranceOptions"] = {"backend": "rocksdb"}
    if storage == "redis":
        for obj in REDIS:
            await sim.apply(obj)
        spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    await sim.apply(raycluster(replicas=2, **spec))
    await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    old_head = (await head_pods(sim))[0]["metadata"]["name"]
    await sim.client().delete("Pod", old_head, NS)
    rc = await sim.wait_for("RayCluster", "raycluster-sample", lambda o: (
        condition(o, "HeadPodReady") or {}).get("reason") == "HeadPodNotFound" or (
        condition(o, "HeadPodReady") or {}).get("status") == "False", timeout=120)
    assert rc["status"]["state"] == "ready"  # sticky
    await sim.sleep(300)
    heads = await head_pods(sim)
    assert len(heads) == 1 and heads[0]["metadata"]["name"] != old_head
    rc = await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    assert condition(rc, "RayClusterProvisioned")["status"] == "True"
    restarts = [_restarts(p) for p in await worker_pods(sim)]
    if storage == "memory":
        assert all(r >= 1 for r in restarts), restarts
    else:
        assert restarts == [0, 0]


async def test_disable_provisioned_head_restart_leaves_the_cluster_headless(sim):
    """Redis FT keeps the workers inside their 600 s window for the whole test, so what is
    observed is only the operator's rule: a provisioned cluster's lost head is not recreated."""
    await _world(sim)
    for obj in REDIS:
        await sim.apply(obj)
    await sim.apply(raycluster(replicas=1, annotations={
        "ray.io/disable-provisioned-head-restart": "true"},
        gcsFaultToleranceOptions={"redisAddress": "redis:6379"}))
    await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    await sim.client().delete("Pod", (await head_pods(sim))[0]["metadata"]["name"], NS)
    await sim.sleep(120)
    assert await head_pods(sim) == []
    rc = await sim.client().get("RayCluster", "raycluster-sample", NS)
    assert condition(rc, "HeadPodReady")["reason"] == "HeadPodNotFound"


async def test_deleting_a_redis_ft_cluster_runs_the_cleanup_job_after_the_head_is_gone(sim):
    """The cleanup Job (the Ray image's cleanup-redis role) deletes the storage namespace in
    Redis; its completion removes the finalizer. (Until the API server bumps generation on
    deletion the controller notices the deletion at its periodic requeue, hence the timeout.)"""
    await _world(sim)
    for obj in REDIS:
        await sim.apply(obj)
    await sim.apply(raycluster(replicas=1, gcsFaultToleranceOptions={
        "redisAddress": "redis:6379"}))
    await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    await sim.client().delete("RayCluster", "raycluster-sample", NS)
    job = await sim.wait_for("Job", "raycluster-sample-redis-cleanup", timeout=600)
    assert await head_pods(sim) == []
    assert job["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    done = await sim.wait_for("Job", "raycluster-sample-redis-cleanup", lambda j: any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in j.get("status", {}).get("conditions") or []), timeout=300)
    assert [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"][-1] == \
        "Complete"
    await sim.sleep(10)
    assert await sim.get("RayCluster", "raycluster-sample") is None


async def test_operator_with_configuration_file_reads_its_mounted_config_map(sim):
    """``configuration.enabled``: the Pods run ``--config /etc/kuberay/config.yaml`` from the
    chart's ConfigMap, and its defaultPodLabels reach the Ray Pods."""
    _, kuberay = await _world(sim, configuration={"defaultPodLabels": {"team": "ml"}})
    args = kuberay.manifests[-1]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["--config", "/etc/kuberay/config.yaml"]
    await sim.apply(raycluster(replicas=1))
    await sim.wait_for("RayCluster", "raycluster-sample", _ready, timeout=300)
    assert all(p["metadata"]["labels"]["team"] == "ml" for p in await worker_pods(sim))
