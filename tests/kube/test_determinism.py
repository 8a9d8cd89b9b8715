"""The built-ins are deterministic: the same seed gives the same history, byte for byte."""

from __future__ import annotations

from kube_helpers import exits, is_true, pod, ready_after, template

import emu
import emu.kube.cluster as kc
from emu.kube.faults import DeletePod, FailNode, KillContainer


async def busy_cluster(sim: emu.Simulation) -> str:
    sim.programs.register("example/app", ready_after(1.0))
    sim.programs.register("example/task", exits(1, after=2.0))
    cluster = kc.install(sim, nodes=4)
    await cluster.wait_ready()
    await sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "web", "namespace": "default"},
                     "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}},
                              "template": template("example/app", {"app": "web"})}})
    await sim.apply({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "web", "namespace": "default"},
                     "spec": {"selector": {"app": "web"}, "ports": [{"port": 80,
                                                                     "targetPort": 8080}]}})
    await sim.apply({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": "task", "namespace": "default"},
                     "spec": {"backoffLimit": 2,
                              "template": template("example/task", {}, "Never")}})
    await sim.apply(pod("solo"))
    await sim.wait_for("Pod", "solo", is_true("Ready"))
    sim.faults.do(KillContainer(pod="solo"))
    sim.faults.do(DeletePod(name="solo", grace_period_seconds=0))
    sim.faults.do(FailNode(node="node-2", duration=120.0))
    await sim.wait_for("Job", "task", is_true("Failed"), timeout=600)
    await sim.sleep(200)
    return sim.trace.digest()


def test_the_same_seed_gives_the_same_trace_digest_and_another_seed_another():
    first = emu.run(busy_cluster, seed=11)
    again = emu.run(busy_cluster, seed=11)
    other = emu.run(busy_cluster, seed=12)
    assert first == again
    assert first != other


async def busy_standard_cluster(sim: emu.Simulation) -> str:
    """A standard cluster (`KubeConfig.standard_cluster`): its boot, a DaemonSet of the user's,
    a CoreDNS Pod deleted and replaced, the Events of it all."""
    cluster = kc.install(sim, nodes=3, standard_cluster=True)
    await cluster.wait_ready()
    await sim.apply({"apiVersion": "apps/v1", "kind": "DaemonSet",
                     "metadata": {"name": "agent", "namespace": "default"},
                     "spec": {"selector": {"matchLabels": {"app": "agent"}},
                              "template": template("example/agent", {"app": "agent"})}})
    dns = await sim.client().list("Pod", "kube-system", label_selector="k8s-app=kube-dns")
    sim.faults.do(DeletePod(name=dns[0]["metadata"]["name"], namespace="kube-system"))
    sim.faults.do(FailNode(node="node-2", duration=60.0))
    await sim.sleep(120)
    return sim.trace.digest()


def test_a_standard_cluster_gives_the_same_digest_for_the_same_seed():
    assert emu.run(busy_standard_cluster, seed=3) == emu.run(busy_standard_cluster, seed=3)
