"""Node pools with extended resources; the scheduler honours extended resources, node selectors,
required node affinity and tolerations, and a Pod that fits nowhere stays Pending with a
FailedScheduling Event."""

from __future__ import annotations

import pytest
from kube_helpers import condition, phase_is, pod

import emu
from emu.kube import cluster as kc
from emu.kube.config import KubeConfig, NodePool

GPU_POOL = NodePool("gpu", 2, labels={"cloud.google.com/gke-accelerator": "nvidia-l4"},
                    taints=[{"key": "nvidia.com/gpu", "value": "present",
                             "effect": "NoSchedule"}],
                    capacity={"nvidia.com/gpu": "4"})
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def gpu_pod(name, gpus, **spec):
    manifest = pod(name, tolerations=TOLERATE_GPU, **spec)
    manifest["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return manifest


def failed_scheduling(sim, name):
    return [e["message"] for e in sim.api.list("Event", "default")["items"]
            if e["involvedObject"]["name"] == name and e["reason"] == "FailedScheduling"]


async def test_pool_nodes_carry_labels_taints_and_extended_capacity(sim):
    cluster = kc.install(sim, KubeConfig(nodes=1, node_pools=(GPU_POOL,), standard_cluster=False))
    await cluster.wait_ready()
    node = sim.api.get("Node", "gpu-2", None)
    assert node["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present",
                                       "effect": "NoSchedule"}]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert sorted(n["metadata"]["name"] for n in sim.api.list("Node", None)["items"]) == [
        "gpu-1", "gpu-2", "node-1"]


async def test_gpu_pod_without_gpu_nodes_stays_pending_with_failed_scheduling(sim):
    cluster = kc.install(sim, nodes=3, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(gpu_pod("train", 1))
    stuck = await sim.wait_for("Pod", "train", lambda p: condition(p, "PodScheduled"))
    assert condition(stuck, "PodScheduled")["reason"] == "Unschedulable"
    await sim.sleep(1)
    assert failed_scheduling(sim, "train") == [
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."]
    assert stuck["status"]["phase"] == "Pending"


async def test_extended_resources_are_counted_per_node(sim):
    cluster = kc.install(sim, KubeConfig(nodes=1, node_pools=(GPU_POOL,), standard_cluster=False))
    await cluster.wait_ready()
    for i in range(3):
        await sim.apply(gpu_pod(f"p{i}", 3))
    for i in range(2):
        await sim.wait_for("Pod", f"p{i}", phase_is("Running"))
    nodes = {sim.api.get("Pod", f"p{i}", "default")["spec"]["nodeName"] for i in range(2)}
    assert nodes == {"gpu-1", "gpu-2"}  # 3 + 3 GPUs don't fit on one 4-GPU Node
    await sim.sleep(5)
    assert sim.api.get("Pod", "p2", "default")["status"]["phase"] == "Pending"
    # node-1 has no GPUs, each gpu Node has one left
    assert failed_scheduling(sim, "p2") == [
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."]
    await sim.client().delete("Pod", "p0", "default")
    await sim.wait_for("Pod", "p2", phase_is("Running"), timeout=120)


async def test_untolerated_taint_keeps_plain_pods_off_the_pool(sim):
    cluster = kc.install(sim, KubeConfig(nodes=0, node_pools=(GPU_POOL,), standard_cluster=False))
    await cluster.wait_ready()
    await sim.apply(pod("plain"))
    await sim.wait_for("Pod", "plain", lambda p: condition(p, "PodScheduled"))
    await sim.sleep(1)
    assert failed_scheduling(sim, "plain") == [
        "0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}."]


@pytest.mark.parametrize("expr,lands", [
    ({"key": "cloud.google.com/gke-tpu-topology", "operator": "In", "values": ["2x2x1"]}, True),
    ({"key": "cloud.google.com/gke-tpu-topology", "operator": "NotIn", "values": ["2x2x1"]},
     False),
    ({"key": "cloud.google.com/gke-tpu-topology", "operator": "Exists"}, True),
    ({"key": "cloud.google.com/gke-tpu-topology", "operator": "DoesNotExist"}, False),
    ({"key": "chips", "operator": "Gt", "values": ["3"]}, True),
    ({"key": "chips", "operator": "Lt", "values": ["3"]}, False),
])
async def test_required_node_affinity(sim, expr, lands):
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    cluster.add_node_pool("tpu", 1, labels={"cloud.google.com/gke-tpu-topology": "2x2x1",
                                            "chips": "4"}, capacity={"google.com/tpu": "4"})
    await cluster.wait_ready()
    manifest = pod("p", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}})
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"google.com/tpu": "4"}}
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", lambda p: condition(p, "PodScheduled"))
    p = sim.api.get("Pod", "p", "default")
    if lands:
        assert p["spec"].get("nodeName") == "tpu-1"
    else:
        assert not p["spec"].get("nodeName")
        assert condition(p, "PodScheduled")["reason"] == "Unschedulable"


def test_node_pool_values_are_checked():
    with pytest.raises(ValueError, match="lower-case DNS label"):
        NodePool("GPU")
    with pytest.raises(ValueError, match="effect"):
        NodePool("gpu", taints=[{"key": "k", "effect": "Sometimes"}])
    assert KubeConfig(node_pools=[{"name": "gpu", "count": 2}]).node_pools[0] == \
        NodePool("gpu", 2)


def test_node_pool_names_do_not_collide():
    async def main(sim):
        cluster = kc.install(sim, KubeConfig(nodes=1, node_pools=(GPU_POOL,)))
        with pytest.raises(ValueError, match="already exists"):
            cluster.add_node_pool("gpu", 1)

    emu.run(main)
