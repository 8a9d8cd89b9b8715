"""PriorityClass and preemption: the API server resolves a Pod's priority from its class, and
the scheduler evicts lower-priority Pods of a Node to fit a pending higher-priority Pod."""

from __future__ import annotations

from kube_helpers import condition, pod

import emu.kube.cluster as kc
from emu.apiserver.errors import ApiError


def priority_class(name: str, value: int, **extra) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, **extra}


def sized(name: str, cpu: str, klass: str | None = None, **spec) -> dict:
    manifest = pod(name, **spec)
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if klass:
        manifest["spec"]["priorityClassName"] = klass
    return manifest


async def test_a_higher_priority_pod_preempts_lower_ones(sim):
    cluster = kc.install(sim, nodes=2, node_cpu="4")
    await cluster.wait_ready()
    await sim.apply(priority_class("low", 10))
    await sim.apply(priority_class("high", 1000))
    for name, cpu in (("low-a", "3"), ("low-b", "3")):
        await sim.apply(sized(name, cpu, "low"))
    for name in ("low-a", "low-b"):
        await sim.wait_for("Pod", name, lambda p: p["spec"].get("nodeName"))
    low_a = sim.api.get("Pod", "low-a", "default")
    assert (low_a["spec"]["priority"], low_a["spec"]["preemptionPolicy"]) == (
        10, "PreemptLowerPriority")
    await sim.apply(sized("urgent", "2", "high"))
    urgent = await sim.wait_for("Pod", "urgent", lambda p: p["spec"].get("nodeName"),
                                timeout=120)
    node = urgent["spec"]["nodeName"]
    assert urgent["status"]["nominatedNodeName"] == node
    gone = [n for n in ("low-a", "low-b") if not any(
        p["metadata"]["name"] == n for p in sim.api.list("Pod", "default")["items"])]
    assert len(gone) == 1
    events = [e for e in sim.api.list("Event", "default")["items"]
              if e["reason"] == "Preempted"]
    assert [e["involvedObject"]["name"] for e in events] == gone
    assert events[0]["message"] == f"Preempted by pod {urgent['metadata']['uid']} on node {node}"


async def test_equal_or_never_preempting_pods_wait(sim):
    cluster = kc.install(sim, nodes=1, node_cpu="4")
    await cluster.wait_ready()
    await sim.apply(priority_class("same", 10))
    await sim.apply(priority_class("polite", 1000, preemptionPolicy="Never"))
    await sim.apply(sized("first", "3", "same"))
    await sim.wait_for("Pod", "first", lambda p: p["spec"].get("nodeName"))
    for name, klass in (("peer", "same"), ("nice", "polite")):
        await sim.apply(sized(name, "3", klass))
        waiting = await sim.wait_for("Pod", name, lambda p: condition(p, "PodScheduled"))
        assert condition(waiting, "PodScheduled")["reason"] == "Unschedulable"
    await sim.sleep(30)
    assert sim.api.get("Pod", "first", "default")["metadata"].get("deletionTimestamp") is None


async def test_priority_admission(sim):
    bare = await sim.apply(pod("bare"))  # no class in the world: nothing is added
    assert "priority" not in bare["spec"] and "preemptionPolicy" not in bare["spec"]
    await sim.apply(priority_class("default", 7, globalDefault=True))
    plain = await sim.apply(pod("plain"))
    assert (plain["spec"]["priorityClassName"], plain["spec"]["priority"]) == ("default", 7)
    system = await sim.apply(pod("sys", priorityClassName="system-node-critical"))
    assert system["spec"]["priority"] == 2000001000
    for manifest, message in (
            (pod("x", priorityClassName="nope"),
             'pods "x" is forbidden: no PriorityClass with name nope was found'),
            (pod("y", priority=5),
             'pods "y" is forbidden: the integer value of priority (5) must not be provided in '
             'pod spec; priority admission controller computed 7 from the given PriorityClass '
             'name')):
        try:
            sim.api.create(manifest)
        except ApiError as err:
            assert (err.code, err.message) == (403, message)
        else:
            raise AssertionError(f"{manifest['metadata']['name']} was admitted")
