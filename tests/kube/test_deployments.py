"""Deployments through ReplicaSets: Recreate ordering, rolling updates, replacements."""

from __future__ import annotations

from kube_helpers import is_true, ready_after, template

import emu.kube.cluster as kc
from emu.kube.faults import DeletePod, KillContainer


def deployment(name: str, image: str, replicas: int, strategy: dict) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "strategy": strategy, "template": template(image, labels)}}


async def pods_of(sim, app: str) -> list[dict]:
    return list(await sim.client().list("Pod", "default", label_selector=f"app={app}"))


def available(n: int):
    return lambda d: (d.get("status") or {}).get("availableReplicas") == n and \
        (d.get("status") or {}).get("updatedReplicas") == n and \
        (d.get("status") or {}).get("replicas") == n


async def test_recreate_removes_every_old_pod_before_any_new_pod_exists(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, container_stop_delay=5.0)
    await cluster.wait_ready()
    await sim.apply(deployment("op", "example/app:1", 2, {"type": "Recreate"}))
    ready = await sim.wait_for("Deployment", "op", available(2))
    assert ready["status"]["observedGeneration"] == 1
    old = {p["metadata"]["name"] for p in await pods_of(sim, "op")}
    events = []
    watch = await sim.client().watch("Pod", "default")

    async def record():
        async for e in watch:
            events.append((e["type"], e["object"]["metadata"]["name"], sim.now))

    import asyncio
    task = asyncio.ensure_future(record())
    await sim.apply(deployment("op", "example/app:2", 2, {"type": "Recreate"}))
    done = await sim.wait_for("Deployment", "op", lambda d: available(2)(d) and
                              d["status"]["observedGeneration"] == 2, timeout=60)
    task.cancel()
    old_gone = max(t for kind, name, t in events if kind == "DELETED" and name in old)
    new_added = min(t for kind, name, t in events if kind == "ADDED" and name not in old)
    assert new_added >= old_gone
    assert old_gone >= 5.0, "old Pods took their stop delay to go"
    assert {p["metadata"]["name"] for p in await pods_of(sim, "op")}.isdisjoint(old)
    rsets = await sim.client().list("ReplicaSet", "default")
    assert sorted(rs["spec"]["replicas"] for rs in rsets) == [0, 2]
    assert {c["type"]: c["status"] for c in done["status"]["conditions"]} == {
        "Available": "True", "Progressing": "True"}


async def test_rolling_update_with_no_unavailability_keeps_every_replica_ready(sim):
    sim.programs.register("example/app", ready_after(2.0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    await sim.apply(deployment("web", "example/app:1", 3, strategy))
    await sim.wait_for("Deployment", "web", available(3))
    lowest = [3]

    def watch_ready(d):
        lowest[0] = min(lowest[0], (d.get("status") or {}).get("availableReplicas", 0))
        return available(3)(d) and d["status"]["observedGeneration"] == 2

    await sim.apply(deployment("web", "example/app:2", 3, strategy))
    await sim.wait_for("Deployment", "web", watch_ready, timeout=120)
    assert lowest == [3]
    images = {p["spec"]["containers"][0]["image"] for p in await pods_of(sim, "web")
              if not p["metadata"].get("deletionTimestamp")}
    assert images == {"example/app:2"}


async def test_a_deleted_pod_is_replaced_by_a_new_pod_with_a_new_process(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(deployment("op", "example/app:1", 1, {"type": "Recreate"}))
    await sim.wait_for("Deployment", "op", available(1))
    [first] = await pods_of(sim, "op")
    name = first["metadata"]["name"]
    proc = cluster.container_process("default", name, "app")
    sim.faults.do(DeletePod(name=name))
    await sim.wait_until(lambda: any(
        p["metadata"]["name"] != name and p["status"].get("phase") == "Running"
        for p in sim.api.list("Pod", "default")["items"]), every=0.1, timeout=30)
    assert not proc.alive
    [second] = [p for p in await pods_of(sim, "op") if p["metadata"]["name"] != name]
    assert second["metadata"]["name"].startswith("op-")
    new_proc = cluster.container_process("default", second["metadata"]["name"], "app")
    assert new_proc is not proc and new_proc.pid != proc.pid


async def test_a_killed_container_restarts_in_place_in_the_same_pod(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(deployment("op", "example/app:1", 1, {"type": "Recreate"}))
    await sim.wait_for("Deployment", "op", available(1))
    [first] = await pods_of(sim, "op")
    name = first["metadata"]["name"]
    sim.faults.do(KillContainer(pod=name))
    restarted = await sim.wait_for("Pod", name, lambda p: p["status"]["containerStatuses"][0]
                                   ["restartCount"] == 1 and is_true("Ready")(p))
    assert restarted["status"]["containerStatuses"][0]["lastState"]["terminated"][
        "exitCode"] == 137
    assert [p["metadata"]["name"] for p in await pods_of(sim, "op")] == [name]
