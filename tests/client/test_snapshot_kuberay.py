"""Snapshots of a KubeRay world: Kubernetes built-ins, the operator's two replicas with a leader.
A restored run equals the uninterrupted one (digest, states, times) under several seeds; one
prepared world serves many tests (the module fixture); faults and the pytest plugin work on
restored runs. The bare-world mechanics are in tests/kernel/test_snapshot.py."""

from __future__ import annotations

from typing import Any

import pytest

import emu
from emu.scenarios import _common


async def kuberay_ready(sim: emu.Simulation) -> None:
    await _common.start(sim, replicas=2)


async def job_runs(sim: emu.Simulation) -> tuple[str, str, float, str]:
    """A RayJob from submission to completion; its end state, the time and the digest."""
    await sim.apply(_common.rayjob(seconds=10))
    job = await sim.wait_for("RayJob", _common.DEMO, _common.rayjob_done, timeout=600)
    status = job["status"]
    return status["jobDeploymentStatus"], status.get("jobStatus", ""), sim.now, sim.trace.digest()


async def cluster_ready(sim: emu.Simulation) -> tuple[float, list[str]]:
    await sim.apply(_common.raycluster("rc", workers=2))
    await sim.wait_for("RayCluster", "rc", _common.cluster_ready, timeout=600)
    return sim.now, _common.names(_common.ray_pods(sim, "rc", "worker"))


async def whole(sim: emu.Simulation) -> tuple[emu.Snapshot, Any]:
    await kuberay_ready(sim)
    snap = await sim.snapshot()
    return snap, await job_runs(sim)


async def leader_after_crash(sim: emu.Simulation) -> tuple[str, list[str]]:
    await sim.sleep(60.0)
    lease = await sim.get("Lease", _common.LEASE)
    assert lease is not None
    return lease["spec"]["holderIdentity"], [repr(f) for f in sim.faults.performed()]


async def holder(sim: emu.Simulation) -> str:
    lease = await sim.get("Lease", _common.LEASE)
    assert lease is not None
    return str(lease["spec"]["holderIdentity"])


@pytest.fixture(scope="module")
def kuberay() -> Any:
    with emu.snapshot_world(kuberay_ready, seed=1, cluster=_common.kube()) as snap:
        yield snap


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_restored_kuberay_world_runs_a_job_exactly_as_the_uninterrupted_one(seed: int) -> None:
    snap, direct = emu.run(whole, seed=seed, cluster=_common.kube())
    with snap:
        assert direct[0] == "Complete" and direct[1] == "SUCCEEDED"
        assert snap.run(job_runs) == direct
        assert snap.run(job_runs) == direct  # and again: the zygote never moved


def test_one_prepared_world_serves_different_runs(kuberay: emu.Snapshot) -> None:
    t, workers = kuberay.run(cluster_ready)
    assert t > kuberay.at and len(workers) == 2
    state, job_status, _, _ = kuberay.run(job_runs)
    assert (state, job_status) == ("Complete", "SUCCEEDED")
    # neither run left anything behind: the RayCluster of the first is not in the world
    assert kuberay.run(cluster_ready) == (t, workers)


def test_a_fault_in_a_restored_run_hands_leadership_over(kuberay: emu.Snapshot) -> None:
    first = kuberay.run(holder)
    pod = first.split("_")[0]
    who, performed = kuberay.run(leader_after_crash, faults=[
        emu.Crash(at=kuberay.at + 5.0, process=f"default/{pod}/kuberay-operator")])
    assert performed and who and who != first
    assert kuberay.run(holder) == first  # the snapshot's own leader is untouched


async def test_a_snapshot_taken_inside_a_plugin_test(sim: emu.Simulation) -> None:
    await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "inside", "namespace": "default"}})
    with await sim.snapshot() as snap:
        assert snap.run(configmaps) == ["inside"]
        assert emu.run(configmaps, restore=snap) == ["inside"]


async def configmaps(sim: emu.Simulation) -> list[str]:
    return sorted(o["metadata"]["name"] for o in sim.api.list("ConfigMap", "default")["items"])


@pytest.mark.emu(restore="kuberay")
async def test_the_plugin_runs_a_test_body_in_a_restored_world(sim: emu.Simulation) -> None:
    assert sim.now == pytest.approx(1.1) and sim.fail_on_panic
    assert len(await _holder_pods(sim)) == 2
    await sim.apply(_common.raycluster("rc", workers=1))
    await sim.wait_for("RayCluster", "rc", _common.cluster_ready, timeout=600)


@pytest.mark.emu(restore="kuberay")
async def test_each_plugin_test_gets_its_own_restore(sim: emu.Simulation) -> None:
    assert await sim.get("RayCluster", "rc") is None


async def _holder_pods(sim: emu.Simulation) -> list[str]:
    return _common.names(_common.operator_pods(sim))


async def redis_cluster_ready(sim: emu.Simulation) -> None:
    await _common.start(sim, redis=True)
    await sim.apply(_common.raycluster("ft", storage="redis"))
    await sim.wait_for("RayCluster", "ft", _common.cluster_ready, timeout=600)


async def head_lost(sim: emu.Simulation) -> tuple[float, list[str], str]:
    """The head Pod deleted: the new GCS reloads the cluster's tables from the Redis."""
    from emu.kube.faults import DeletePod

    head = _common.names(_common.ray_pods(sim, "ft", "head"))[0]
    sim.faults.do(DeletePod(name=head))
    await sim.sleep(1.0)
    await sim.wait_for("RayCluster", "ft", _common.cluster_ready, timeout=600)
    await sim.sleep(30.0)
    pods = _common.names(_common.ray_pods(sim, "ft", "head"))
    return sim.now, pods, sim.trace.digest()


async def redis_whole(sim: emu.Simulation) -> tuple[emu.Snapshot, Any]:
    await redis_cluster_ready(sim)
    snap = await sim.snapshot()
    return snap, await head_lost(sim)


def test_a_restored_world_keeps_its_gcs_storage_in_the_emulated_redis() -> None:
    snap, direct = emu.run(redis_whole, seed=2, cluster=_common.kube())
    with snap:
        assert snap.run(head_lost) == direct
        assert len(direct[1]) == 1
