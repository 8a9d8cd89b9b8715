"""The autoscaler sidecar (enableInTreeAutoscaling): an actor no node can place scales its worker
group up through the RayCluster; an idle worker is scaled down through workersToDelete."""

from __future__ import annotations

import asyncio

from emu.kube import cluster as kube_cluster
from emu.ray.autoscaler import group_shape
from emu.ray.workloads import RayClient

CLUSTER = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "auto", "namespace": "default"},
    "spec": {
        "enableInTreeAutoscaling": True,
        "autoscalerOptions": {"idleTimeoutSeconds": 30},
        "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {
            "containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0",
                            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
        "workerGroupSpecs": [{
            "groupName": "big", "replicas": 0, "minReplicas": 0, "maxReplicas": 3,
            "rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-worker", "image": "rayproject/ray:2.52.0",
                 "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}}]}}}],
    },
}


class Trainer:
    def ping(self) -> str:
        return "pong"


def worker_pods(sim):
    return sorted(p["metadata"]["name"] for p in sim.api.list(
        "Pod", "default", label_selector="ray.io/group=big")["items"]
        if not p["metadata"].get("deletionTimestamp"))


async def test_pending_actor_scales_up_then_idle_worker_scales_down(sim):
    kube = kube_cluster.install(sim, nodes=2)
    await kube.wait_ready()
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=120)
    await sim.apply(CLUSTER)
    await sim.wait_for("RayCluster", "auto",
                       lambda c: (c.get("status") or {}).get("state") == "ready", timeout=300)
    assert worker_pods(sim) == []
    driver = RayClient(sim.network, "auto-head-svc.default.svc.cluster.local:6379",
                       caller="driver")
    await driver.connect()
    create = asyncio.ensure_future(driver.create_actor(Trainer, num_cpus=4, name="trainer"))
    rc = await sim.wait_for("RayCluster", "auto", lambda c: c["spec"]["workerGroupSpecs"][0][
        "replicas"] == 1, timeout=120)
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 1
    handle = await asyncio.wait_for(create, 300)
    assert await handle.call("ping") == "pong"
    assert len(worker_pods(sim)) == 1
    await driver.kill(handle)
    rc = await sim.wait_for("RayCluster", "auto", lambda c: c["spec"]["workerGroupSpecs"][0][
        "replicas"] == 0, timeout=300)
    await sim.wait_until(lambda: worker_pods(sim) == [], timeout=120)


def test_group_shape_reads_ray_start_params_and_limits():
    group = {"rayStartParams": {"resources": '"{\\"TPU\\": 4}"'},
             "template": {"spec": {"containers": [{"resources": {"limits": {
                 "cpu": "1500m", "nvidia.com/gpu": "2"}}}]}}}
    assert group_shape(group) == {"CPU": 2.0, "GPU": 2.0, "TPU": 4.0}
    assert group_shape({"rayStartParams": {"num-cpus": "8"}}) == {"CPU": 8.0}
