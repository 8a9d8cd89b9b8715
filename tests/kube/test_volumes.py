"""PersistentVolumeClaims: binding, a directory that outlives Pods, reclaim policies."""

from __future__ import annotations

import pytest
from kube_helpers import phase_is, pod

import emu
import emu.kube.cluster as kc


def pvc(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}, **spec}}


def pod_with_claim(name: str, claim: str) -> dict:
    manifest = pod(name, "example/store", restart_policy="Never")
    manifest["spec"]["volumes"] = [{"name": "data",
                                    "persistentVolumeClaim": {"claimName": claim}}]
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "data",
                                                          "mountPath": "/data/gcs"}]
    return manifest


async def store(ctx) -> int:
    """Append this Pod's name to /data/gcs/log and exit."""
    path = ctx.volumes["/data/gcs"] / "log"
    previous = path.read_text() if path.exists() else ""
    path.write_text(previous + ctx.pod_name + "\n")
    return 0


async def test_a_claims_directory_survives_pod_deletion_and_is_mounted_again(sim):
    sim.programs.register("example/store", store)
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pvc("data"))
    bound = await sim.wait_for("PersistentVolumeClaim", "data", phase_is("Bound"))
    volume = bound["spec"]["volumeName"]
    assert volume == f"pvc-{bound['metadata']['uid']}"
    assert bound["status"]["capacity"] == {"storage": "1Gi"}
    await sim.apply(pod_with_claim("first", "data"))
    await sim.wait_for("Pod", "first", phase_is("Succeeded"))
    await sim.client().delete("Pod", "first", "default")
    await sim.sleep(1)
    assert await sim.get("Pod", "first") is None
    await sim.apply(pod_with_claim("second", "data"))
    await sim.wait_for("Pod", "second", phase_is("Succeeded"))
    directory = cluster.workdir / "volumes" / volume
    assert (directory / "log").read_text() == "first\nsecond\n"
    pv = await sim.get("PersistentVolume", volume, namespace=None)
    assert pv["status"]["phase"] == "Bound"
    assert pv["spec"]["claimRef"]["name"] == "data"


async def test_deleting_the_claim_deletes_a_delete_policy_volume_and_its_directory(sim):
    sim.programs.register("example/store", store)
    cluster = kc.install(sim, provisioned_reclaim_policy="Delete")
    await cluster.wait_ready()
    await sim.apply(pvc("data"))
    await sim.apply(pod_with_claim("writer", "data"))
    await sim.wait_for("Pod", "writer", phase_is("Succeeded"))
    volume = (await sim.get("PersistentVolumeClaim", "data"))["spec"]["volumeName"]
    directory = cluster.workdir / "volumes" / volume
    assert directory.exists()
    await sim.client().delete("PersistentVolumeClaim", "data", "default")
    await sim.sleep(1)
    assert await sim.get("PersistentVolume", volume, namespace=None) is None
    assert not directory.exists()


async def test_a_retained_volume_is_released_and_keeps_its_data(sim):
    sim.programs.register("example/store", store)
    cluster = kc.install(sim, provisioned_reclaim_policy="Retain", standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pvc("data"))
    await sim.apply(pod_with_claim("writer", "data"))
    await sim.wait_for("Pod", "writer", phase_is("Succeeded"))
    volume = (await sim.get("PersistentVolumeClaim", "data"))["spec"]["volumeName"]
    await sim.client().delete("PersistentVolumeClaim", "data", "default")
    released = await sim.wait_for("PersistentVolume", volume, phase_is("Released"),
                                  namespace=None)
    assert released["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert (cluster.workdir / "volumes" / volume / "log").read_text() == "writer\n"


async def test_a_pod_with_a_missing_claim_is_unschedulable(sim):
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pod_with_claim("p", "nope"))
    p = await sim.wait_for("Pod", "p", lambda p: any(
        c["type"] == "PodScheduled" for c in p["status"].get("conditions") or []))
    [cond] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["message"] == ('0/3 nodes are available: 3 persistentvolumeclaim "nope" '
                               'not found.')


@pytest.fixture
def fresh_scratch_root():
    # scratch_root is decided once per process: forget it around a test that changes its inputs
    from emu.simulation import scratch_root

    scratch_root.cache_clear()
    yield
    scratch_root.cache_clear()


def test_an_owned_workdir_goes_where_emu_tmpdir_says_and_is_removed(tmp_path, monkeypatch,
                                                                      fresh_scratch_root):
    monkeypatch.setenv("EMU_TMPDIR", str(tmp_path))
    seen = []

    async def main(sim):
        seen.append(sim.workdir)

    emu.run(main, seed=1)
    assert seen[0].parent == tmp_path
    assert not seen[0].exists()


def test_a_small_memory_filesystem_is_not_used_for_workdirs(monkeypatch, fresh_scratch_root):
    # a container's default 64 MiB /dev/shm would fill with RocksDB files: below 1 GiB free the
    # system's temporary directory is used instead
    import emu.simulation as simulation

    class Small:
        f_bavail, f_frsize = 64 * 256, 4096

    monkeypatch.delenv("EMU_TMPDIR", raising=False)
    monkeypatch.setattr(simulation.os, "statvfs", lambda path: Small())
    assert simulation.scratch_root() is None
