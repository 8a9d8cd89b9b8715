"""Nodes and their Pods come back after the API server or a kubelet was unreachable.

The bug: after an outage longer than the Node monitor grace period the node lifecycle controller
marked every Node ``Ready=Unknown`` and nothing ever set it back (the kubelet only renewed its
Lease; it posted its Node's status once, at registration), so the ``unreachable`` taints stayed
and no new Pod could schedule. Real kubelets post NodeStatus every 10 s when it changed (and
every 5 min regardless); the controller removes the taints once Ready is True again, and the
kubelet re-posts the Pod Ready condition the controller set to False.
"""

from __future__ import annotations

from kube_helpers import condition, is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.faults import Outage, Partition

UNREACHABLE = "node.kubernetes.io/unreachable"


def node_ready(status: str):
    return lambda n: (condition(n, "Ready") or {}).get("status") == status


def untainted(n):
    return not any(t["key"] == UNREACHABLE for t in n["spec"].get("taints") or [])


async def test_nodes_are_ready_and_untainted_again_after_a_long_api_server_outage(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=2)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-1"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    sim.faults.do(Outage(duration=120))
    await sim.sleep(120)
    # the controller sees no renewal for longer than the grace period: Unknown, then tainted
    await sim.wait_for("Node", "node-1", node_ready("Unknown"), namespace=None, timeout=60)
    # ...and the kubelets, reachable again, report Ready within a round; the taints go
    for name in ("node-1", "node-2"):
        node = await sim.wait_for("Node", name, lambda n: node_ready("True")(n) and untainted(n),
                                  namespace=None, timeout=60)
        assert condition(node, "Ready")["reason"] == "KubeletReady"
        assert all(condition(node, c)["status"] == "False"
                   for c in ("MemoryPressure", "DiskPressure", "PIDPressure"))
    await sim.wait_for("Pod", "p", is_true("Ready"), timeout=30)
    # and it lasts: new Pods schedule and run
    await sim.sleep(300)
    assert all(node_ready("True")(n) and untainted(n)
               for n in await sim.client().list("Node"))
    await sim.apply(pod("q"))
    await sim.wait_for("Pod", "q", is_true("Ready"), timeout=30)


async def test_a_partitioned_kubelet_reposts_node_and_pod_readiness_when_it_reconnects(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=2)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-1"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    healed = sim.now + 90
    sim.faults.do(Partition(a="kubelet-node-1", b="apiserver", duration=90))
    await sim.wait_for("Node", "node-1", lambda n: not untainted(n), namespace=None, timeout=90)
    p = await sim.wait_for("Pod", "p", lambda p: condition(p, "Ready")["status"] == "False")
    assert p["status"]["phase"] == "Running"
    assert node_ready("True")(await sim.get("Node", "node-2", namespace=None))
    await sim.sleep(healed - sim.now)
    node = await sim.wait_for("Node", "node-1", lambda n: node_ready("True")(n) and untainted(n),
                              namespace=None, timeout=60)
    assert node["metadata"]["uid"]
    await sim.wait_for("Pod", "p", is_true("Ready"), timeout=30)
    assert cluster.container_process("default", "p", "app").alive


async def test_the_kubelet_reports_node_status_every_five_minutes_when_nothing_changed(sim):
    cluster = kc.install(sim, nodes=1, standard_cluster=False)
    await cluster.wait_ready()
    beats = []
    watch = await sim.client().watch("Node")
    async for event in watch:
        beats.append((sim.now, condition(event["object"], "Ready")["lastHeartbeatTime"]))
        if len(beats) == 3:
            break
    # the first event is the watch's ADDED; then two reports five minutes apart
    assert round(beats[2][0] - beats[1][0]) == 300
    assert len({b[1] for b in beats}) == 3


async def test_a_pod_created_after_an_outage_just_under_the_grace_period_schedules(sim):
    # the explorer's case: 45 s without the API server is up to 55 s without a renewal seen,
    # so the Nodes are marked Unknown and tainted as the controller catches up; the kubelets'
    # next report must clear both, or the Pod stays Pending behind the NoSchedule taint
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=3)
    await cluster.wait_ready()
    await sim.sleep(5.5)
    sim.faults.do(Outage(duration=45))
    await sim.sleep(45)
    await sim.wait_until(lambda: any(not untainted(n) for n in sim.api.list("Node")["items"]),
                         timeout=30, every=0.1, what="a Node tainted unreachable")
    await sim.apply(pod("q"))
    await sim.wait_for("Pod", "q", is_true("Ready"), timeout=60)
