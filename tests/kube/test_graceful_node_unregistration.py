"""SIGTERM on Pod deletion: a gracefully stopped raylet unregisters its node from the GCS.

Ray's raylet handles SIGTERM by unregistering its node (``UnregisterSelf``, EXPECTED_TERMINATION,
"Node received SIGTERM; draining before shutdown."), so the GCS marks it DEAD at once. An abrupt
loss — the Node's machine gone, the container killed (SIGKILL) — runs no handler: the GCS finds
the node dead by its health checks (5 x (10 s timeout or refusal + 3 s period)).
"""

from __future__ import annotations

from typing import Any

import pytest

from emu import Simulation
from emu.kube import cluster as kube_cluster
from emu.kube.faults import FailNode, KillContainer
from emu.ray.gcs import HEALTH_CHECK_DEATH_REASON

CLUSTER = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "default"},
    "spec": {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}},
        "workerGroupSpecs": [{
            "groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
            "rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}}}],
    },
}


async def ready_worker(sim: Simulation) -> dict[str, Any]:
    kube = kube_cluster.install(sim, nodes=2)
    await kube.wait_ready()
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=120)
    await sim.apply(CLUSTER)
    await sim.wait_for("RayCluster", "rc",
                       lambda c: (c.get("status") or {}).get("state") == "ready", timeout=300)
    [worker] = sim.api.list("Pod", "default", label_selector="ray.io/group=w")["items"]
    await sim.wait_until(lambda: len(sim.trace.select(event="raylet_registered")) == 2,
                         timeout=60)
    return worker


def worker_deaths(sim: Simulation) -> list[Any]:
    return [e for e in sim.trace.select(event="node_dead") if not e.fields["name"].startswith(
        "rc-head")]


async def test_a_deleted_worker_pod_is_dead_in_the_gcs_at_once(sim: Simulation) -> None:
    worker = await ready_worker(sim)
    deleted_at = sim.now
    await sim.client().delete("Pod", worker["metadata"]["name"], "default")
    await sim.wait_until(lambda: worker_deaths(sim), timeout=120)
    [dead] = worker_deaths(sim)
    assert dead.fields["reason"] == "Node received SIGTERM; draining before shutdown."
    assert dead.t == pytest.approx(deleted_at, abs=0.01)
    [sigterm] = [e for e in sim.trace.select(event="sigterm")
                 if e.process.startswith(f"default/{worker['metadata']['name']}/")]
    assert sigterm.t == dead.t
    # the raylet exited by itself (0), then the container was killed as before
    [unregistered] = sim.trace.select(event="raylet_unregistered")
    assert unregistered.t == dead.t


async def test_a_lost_node_waits_for_the_health_checks(sim: Simulation) -> None:
    worker = await ready_worker(sim)
    lost_at = sim.now
    sim.faults.do(FailNode(node=worker["spec"]["nodeName"]))
    await sim.wait_until(lambda: worker_deaths(sim), timeout=300)
    [dead] = worker_deaths(sim)
    assert dead.fields["reason"] == HEALTH_CHECK_DEATH_REASON
    assert dead.t - lost_at > 30  # blackholed: each check waits its 10 s timeout
    assert not sim.trace.select(event="sigterm")


async def test_a_killed_container_waits_for_the_health_checks(sim: Simulation) -> None:
    worker = await ready_worker(sim)
    killed_at = sim.now
    sim.faults.do(KillContainer(pod=worker["metadata"]["name"]))
    await sim.wait_until(lambda: worker_deaths(sim), timeout=300)
    dead = worker_deaths(sim)[0]
    assert dead.fields["reason"] == HEALTH_CHECK_DEATH_REASON
    assert dead.t - killed_at > 10
    assert not sim.trace.select(event="sigterm")
