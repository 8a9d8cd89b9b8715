"""The node lifecycle controller stops evicting when every Node (or most of a small zone) is down.

The bug: every unreachable Node got the NoExecute taint and its Pods were evicted 300 s later,
even when all Nodes went quiet at once, which Kubernetes reads as its own fault (a control-plane
or network outage, ``handleDisruption``'s full disruption: taints removed, evictions stopped), and
when more than two Nodes and at least 55% of a zone of at most 50 are down (partial disruption:
the eviction rate in the zone drops to 0). The NoSchedule taint still follows each Node's Ready
condition. When a Node is Ready again every Node's grace period starts over.
"""

from __future__ import annotations

from kube_helpers import condition, is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.kube.faults import FailNode, RecoverNode

UNREACHABLE = "node.kubernetes.io/unreachable"


def unknown(n):
    return condition(n, "Ready")["status"] == "Unknown"


def effects(n):
    return sorted(t["effect"] for t in n["spec"].get("taints") or [] if t["key"] == UNREACHABLE)


async def test_with_every_node_down_nodes_get_no_noexecute_taint_and_pods_stay(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=2, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-1"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    sim.faults.do(FailNode(node="node-1"))
    sim.faults.do(FailNode(node="node-2"))
    for name in ("node-1", "node-2"):
        node = await sim.wait_for("Node", name, lambda n: unknown(n) and effects(n),
                                  namespace=None, timeout=120)
        assert effects(node) == ["NoSchedule"]
    await sim.sleep(600)
    assert not (await sim.get("Pod", "p"))["metadata"].get("deletionTimestamp")
    assert [effects(n) for n in await sim.client().list("Node")] == [["NoSchedule"]] * 2
    # node-2 is back: the cluster is only partly down; node-1's grace period starts over,
    # then it is tainted NoExecute and its Pod evicted after its toleration
    back = sim.now
    sim.faults.do(RecoverNode(node="node-2"))
    await sim.wait_for("Node", "node-2", lambda n: not effects(n), namespace=None, timeout=30)
    await sim.wait_for("Node", "node-1", lambda n: effects(n) == ["NoExecute", "NoSchedule"],
                       namespace=None, timeout=30)
    evicted = await sim.wait_for("Pod", "p", lambda p: bool(p["metadata"].get(
        "deletionTimestamp")), timeout=400)
    assert 299 <= sim.now - back <= 360  # timeAdded has whole seconds
    assert condition(evicted, "DisruptionTarget")["reason"] == "DeletionByTaintManager"


async def test_a_small_zone_mostly_down_taints_no_more_nodes(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=5, standard_cluster=False)
    await cluster.wait_ready()
    sim.faults.do(FailNode(node="node-1"))
    await sim.wait_for("Node", "node-1", lambda n: "NoExecute" in effects(n),
                       namespace=None, timeout=120)
    # three of five Nodes down (60%): partial disruption in a small cluster
    sim.faults.do(FailNode(node="node-2"))
    sim.faults.do(FailNode(node="node-3"))
    for name in ("node-2", "node-3"):
        node = await sim.wait_for("Node", name, lambda n: unknown(n) and effects(n),
                                  namespace=None, timeout=120)
        assert effects(node) == ["NoSchedule"]
    node1 = await sim.get("Node", "node-1", namespace=None)
    assert effects(node1) == ["NoExecute", "NoSchedule"], "a taint already there stays"
    # two down of five is normal again: the rest are tainted
    sim.faults.do(RecoverNode(node="node-3"))
    await sim.wait_for("Node", "node-2", lambda n: "NoExecute" in effects(n),
                       namespace=None, timeout=60)


async def test_a_node_excluded_from_disruption_checks_does_not_count_as_healthy(sim):
    # node-2 carries node.kubernetes.io/exclude-disruption: with node-1 down, the only Node
    # counted is down, so the cluster is fully disrupted and node-1 gets no NoExecute taint
    cluster = kc.install(sim, nodes=2, standard_cluster=False)
    await cluster.wait_ready()
    await sim.client().patch("Node", "node-2", {"metadata": {"labels": {
        "node.kubernetes.io/exclude-disruption": ""}}})
    sim.faults.do(FailNode(node="node-1"))
    node = await sim.wait_for("Node", "node-1", lambda n: unknown(n) and effects(n),
                              namespace=None, timeout=120)
    await sim.sleep(30)
    assert effects(await sim.get("Node", "node-1", namespace=None)) == ["NoSchedule"]
    assert effects(node) == ["NoSchedule"]
