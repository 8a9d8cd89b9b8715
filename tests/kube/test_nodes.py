"""Node failure: the node lifecycle controller, taint eviction and PodGC."""

from __future__ import annotations

from kube_helpers import condition, is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.kube.faults import FailNode, RecoverNode


async def test_failed_node_is_unknown_after_the_grace_period_and_its_pods_not_ready(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=2, node_monitor_grace_period=50.0,
                         node_lease_renew_interval=10.0)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-1"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    proc = cluster.container_process("default", "p", "app")
    t0 = sim.now
    sim.faults.do(FailNode(node="node-1"))
    assert not proc.alive
    node = await sim.wait_for("Node", "node-1",
                              lambda n: condition(n, "Ready")["status"] == "Unknown",
                              namespace=None, timeout=120)
    # the last renewal was observed at most one renew interval before the failure
    assert 40.0 <= sim.now - t0 <= 50.0
    ready = condition(node, "Ready")
    assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown",
                                                   "Kubelet stopped posting node status.")
    tainted = await sim.wait_for("Node", "node-1", lambda n: bool(n["spec"].get("taints")),
                                 namespace=None)
    assert sorted((t["key"], t["effect"]) for t in tainted["spec"]["taints"]) == [
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule")]
    p = await sim.wait_for("Pod", "p", lambda p: condition(p, "Ready")["status"] == "False")
    assert p["status"]["phase"] == "Running"


async def test_pods_on_a_lost_node_are_evicted_after_the_toleration_and_stay_terminating(sim):
    sim.programs.register("example/app", ready_after(0))
    # two Nodes: with every Node down the controller would stop evicting (full disruption)
    cluster = kc.install(sim, nodes=2, pod_eviction_timeout=300.0)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-1"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    sim.faults.do(FailNode(node="node-1"))
    tainted = await sim.wait_for("Node", "node-1", lambda n: bool(n["spec"].get("taints")),
                                 namespace=None, timeout=120)
    t_taint = sim.now
    evicted = await sim.wait_for("Pod", "p", lambda p: bool(p["metadata"].get(
        "deletionTimestamp")), timeout=600)
    assert round(sim.now - t_taint) == 300
    assert condition(evicted, "DisruptionTarget")["reason"] == "DeletionByTaintManager"
    await sim.sleep(600)
    assert (await sim.get("Pod", "p"))["metadata"]["deletionTimestamp"], \
        "nobody finishes the deletion while the kubelet is gone"
    sim.faults.do(RecoverNode(node="node-1"))
    await sim.sleep(5)
    assert await sim.get("Pod", "p") is None
    node = await sim.wait_for("Node", "node-1", lambda n: not n["spec"].get("taints"),
                              namespace=None, timeout=30)
    assert condition(node, "Ready")["status"] == "True"
    assert tainted["metadata"]["uid"] == node["metadata"]["uid"]


async def test_pods_bound_to_a_deleted_node_are_failed_and_force_deleted_by_pod_gc(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=2, pod_gc_quarantine=40.0)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-2"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    watch = await sim.client().watch("Pod", "default")
    sim.faults.do(FailNode(node="node-2", delete_node=True))
    t0 = sim.now
    seen = []
    async for event in watch:
        seen.append((event["type"], event["object"]["status"]["phase"],
                     (condition(event["object"], "DisruptionTarget") or {}).get("reason")))
        if event["type"] == "DELETED":
            break
    assert round(sim.now - t0) == 40
    assert seen[-2:] == [("MODIFIED", "Failed", "DeletionByPodGC"),
                         ("DELETED", "Failed", "DeletionByPodGC")]


async def test_a_restarted_kubelet_adopts_running_containers(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    await sim.apply(pod("p"))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    proc = cluster.container_process("default", "p", "app")
    sim.faults.crash("kubelet-node-1")
    await sim.sleep(5)
    cluster.restart("kubelet-node-1")
    await sim.sleep(5)
    assert proc.alive
    p = await sim.get("Pod", "p")
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    assert condition(p, "Ready")["status"] == "True"


async def test_overlapping_timed_losses_of_one_node_keep_it_down_until_the_last_ends(sim):
    cluster = kc.install(sim, nodes=2)
    await cluster.wait_ready()
    t0 = sim.now
    sim.faults.do(FailNode(node="node-1", duration=60.0))
    await sim.sleep(4)
    sim.faults.do(FailNode(node="node-1", duration=60.0))
    await sim.sleep(57)  # the first loss ended: the second still holds the machine down
    assert not cluster.node_is_up("node-1")
    await sim.sleep(4)
    assert cluster.node_is_up("node-1")
    assert [round(e.t - t0, 6) for e in sim.trace if e.event == "node_recovered"] == [64.0]
    await sim.wait_for("Node", "node-1", lambda n: condition(n, "Ready")["status"] == "True",
                       namespace=None, timeout=60)


async def test_recovering_a_node_that_is_up_is_reported_not_performed(sim):
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    # optional: a strict fault that does nothing fails the run at its end (tests/faults)
    sim.faults.do(RecoverNode(node="node-1", optional=True))
    assert cluster.node_is_up("node-1")
    [(fault, why)] = sim.faults.unperformed()
    assert isinstance(fault, RecoverNode) and why == "Node node-1 is up at t=" + (
        f"{sim.now:g}s: nothing to recover")


async def test_a_recovered_loss_does_not_hold_a_later_one_down_nor_end_an_untimed_one(sim):
    cluster = kc.install(sim, nodes=2)
    await cluster.wait_ready()
    sim.faults.do(FailNode(node="node-1", duration=100.0))
    await sim.sleep(50)
    sim.faults.do(RecoverNode(node="node-1"))  # ends the 100 s loss early
    await sim.sleep(10)
    sim.faults.do(FailNode(node="node-1", duration=10.0))
    await sim.sleep(11)
    assert cluster.node_is_up("node-1")  # at 71 s, not at the old loss's 100 s
    sim.faults.do(FailNode(node="node-2", duration=5.0))
    sim.faults.do(FailNode(node="node-2"))  # untimed: only RecoverNode ends it
    await sim.sleep(10)
    assert not cluster.node_is_up("node-2")
    sim.faults.do(RecoverNode(node="node-2"))
    assert cluster.node_is_up("node-2")
