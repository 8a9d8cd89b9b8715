"""A restarted built-in controller starts with nothing in memory, as a new process does.

The bug: `KubeCluster.restart` runs the controller's ``main`` again on the same object, and the
controllers kept what they had learnt before the crash. The garbage collector's graph still held
an owner deleted while it was down (its fresh informer never sees a delete event for an object
it never listed), so the owner's dependents were never collected; the node lifecycle
controller kept the times it had last seen each Node renew, so a Node gone quiet was marked
Unknown as if the controller had watched it all along, where a real restarted controller gives
every Node a full grace period from its first sight of it.
"""

from __future__ import annotations

from kube_helpers import condition, is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.kube.faults import FailNode


def cm(name: str, owner: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"]}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


async def test_dependents_of_an_owner_deleted_while_the_gc_was_down_are_collected(sim):
    cluster = kc.install(sim, nodes=0)
    client = sim.client()
    owner = await client.create(cm("owner"))
    await client.create(cm("child", owner))
    await sim.sleep(1)
    sim.faults.crash("garbage-collector")
    await client.delete("ConfigMap", "owner", "default")
    await sim.sleep(5)
    assert await sim.get("ConfigMap", "child") is not None, "nobody collects while it is down"
    cluster.restart("garbage-collector")
    await sim.sleep(5)
    assert await sim.get("ConfigMap", "child") is None


async def test_a_restarted_node_lifecycle_controller_gives_each_node_a_full_grace_period(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=2, node_monitor_grace_period=50.0)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-1"}))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    sim.faults.crash("node-lifecycle-controller")
    sim.faults.do(FailNode(node="node-1"))
    await sim.sleep(40)
    restarted = sim.now
    cluster.restart("node-lifecycle-controller")
    node = await sim.wait_for("Node", "node-1",
                              lambda n: condition(n, "Ready")["status"] == "Unknown",
                              namespace=None, timeout=120)
    assert sim.now - restarted >= 50.0
    assert condition(node, "Ready")["reason"] == "NodeStatusUnknown"
    assert condition(await sim.get("Node", "node-2", namespace=None), "Ready")["status"] == "True"
