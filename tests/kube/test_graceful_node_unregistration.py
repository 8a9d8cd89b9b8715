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


async def test_before_ray_2_33_bash_ignores_sigterm_and_the_pod_runs_its_grace_period(
        sim: Simulation) -> None:
    # ray-project/ray#64181: up to the 2.32 images, bash stays PID 1 under KubeRay's
    # `bash -c "ulimit ...; ray start ... --block"` and ignores SIGTERM, so a deleted Ray Pod
    # runs on (its raylet still registered, its GCS still answering) until the kubelet's
    # SIGKILL at the end of terminationGracePeriodSeconds (kuberay#503: 30 s)
    old = "rayproject/ray:2.32.0"
    CLUSTER_OLD = {**CLUSTER, "spec": {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
            "terminationGracePeriodSeconds": 20, "containers": [
                {"name": "ray-head", "image": old}]}}},
        "workerGroupSpecs": [{**CLUSTER["spec"]["workerGroupSpecs"][0], "template": {"spec": {
            "containers": [{"name": "ray-worker", "image": old}]}}}]}}
    kube = kube_cluster.install(sim, nodes=2)
    await kube.wait_ready()
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=120)
    await sim.apply(CLUSTER_OLD)
    await sim.wait_for("RayCluster", "rc",
                       lambda c: (c.get("status") or {}).get("state") == "ready", timeout=300)
    [head] = sim.api.list("Pod", "default", label_selector="ray.io/node-type=head")["items"]
    name = head["metadata"]["name"]
    deleted_at = sim.now
    await sim.client().delete("Pod", name, "default")
    await sim.sleep(19.5)
    assert sim.api.get("Pod", name, "default")["metadata"].get("deletionTimestamp")
    assert [e for e in sim.trace.select(event="sigterm_ignored")
            if e.process.startswith(f"default/{name}/")]
    assert not sim.trace.select(event="raylet_unregistered")
    await sim.wait_until(lambda: not [p for p in sim.api.list("Pod", "default")["items"]
                                      if p["metadata"]["name"] == name], timeout=30)
    assert sim.now - deleted_at == pytest.approx(20.0, abs=0.5)
    # SIGKILL: no handler ran, the raylet never unregistered
    assert not sim.trace.select(event="raylet_unregistered")


def test_which_containers_get_sigterm_through_to_ray_start() -> None:
    from emu.ray.config import RayConfig
    from emu.ray.images import sigterm_reaches_ray

    def reaches(image: str, command: list[str]) -> bool:
        ctx: Any = _Ctx({"image": image, "command": command})
        return sigterm_reaches_ray(ctx, RayConfig())

    kuberay = ["/bin/bash", "-c", "--", "ulimit -n 65536; ray start --head --block"]
    assert not reaches("rayproject/ray:2.32.0", kuberay)
    assert not reaches("rayproject/ray:2.9.0-py310", kuberay)
    assert reaches("rayproject/ray:2.33.0", kuberay)
    assert reaches("rayproject/ray:2.46.0", kuberay)
    assert reaches("rayproject/ray", kuberay)  # untagged: RayConfig.ray_version (2.46.0)
    assert reaches("rayproject/ray:2.32.0", ["/bin/bash", "-c", "ray start --head --block"])
    assert reaches("rayproject/ray:2.32.0", ["ray", "start", "--head", "--block"])


class _Ctx:
    """What `sigterm_reaches_ray` reads of a container context."""

    def __init__(self, container: dict[str, Any]) -> None:
        self.container = container
        self.env: dict[str, str] = {}
