"""Raylets and a lost GCS: the reconnect window, a new cluster id, a node declared dead
(FACTS §2.1, §2.2)."""

from __future__ import annotations

import asyncio

import pytest

HEAD = "raycluster-head-0"
REDIS_ENV = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "ns-1"}


def raylet_of(pod):
    return pod.child("raylet")


async def exit_time(rw, process):
    await process.wait_exited()
    return rw.now


@pytest.mark.parametrize(("env", "window"), [({}, 60.0),
                                             ({"RAY_gcs_rpc_server_reconnect_timeout_s": "600"},
                                              600.0)])
async def test_worker_raylet_exits_when_the_gcs_stays_away_past_its_reconnect_window(
        ray_world, env, window):
    rw = ray_world
    head = rw.head(HEAD)
    worker = rw.worker("worker-0", env=env)
    await head.wait_ready()
    await worker.wait_ready()
    raylet = raylet_of(worker)
    await rw.sleep(0.25)
    head.crash()
    lost_at = rw.now
    exited = asyncio.ensure_future(exit_time(rw, raylet))
    await rw.sleep(window - 1.5)
    assert raylet.alive, "still inside its reconnect window"
    await asyncio.wait_for(exited, 5.0)
    # the failed report that starts the window is the first one after the crash (once a second)
    assert lost_at + window <= exited.result() <= lost_at + window + 1.0
    assert raylet.exit_code == 1
    assert rw.world.trace.events and any(
        e.event == "raylet_fatal" and e.fields["message"].startswith(
            f"Failed to connect to GCS within {window:g} seconds.")
        for e in rw.world.trace.events)
    code = await worker.wait_exit(5.0)
    assert code == 1, "ray start --block exits when its raylet dies"


async def test_worker_with_600s_window_rejoins_a_gcs_restarted_from_redis_after_two_minutes(
        ray_world):
    rw = ray_world
    redis = rw.redis()
    await redis.wait_ready()
    head = rw.head(HEAD, env=REDIS_ENV)
    worker = rw.worker("worker-0", env={"RAY_gcs_rpc_server_reconnect_timeout_s": "600"})
    await head.wait_ready()
    await worker.wait_ready()
    raylet = raylet_of(worker)
    head.crash()
    await rw.sleep(120)
    new_head = head.replace(HEAD + "-b")
    await new_head.wait_ready()
    await rw.sleep(30)
    assert raylet.alive and worker.alive
    driver = rw.driver()
    states = {n["node_name"]: n["state"] for n in await driver.nodes()}
    assert states == {HEAD: "DEAD", HEAD + "-b": "ALIVE", "worker-0": "ALIVE"}
    assert any(e.event == "gcs_reconnected" and e.process == raylet.name
               for e in rw.world.trace.events)


async def test_worker_exits_when_the_gcs_comes_back_with_another_cluster_id(ray_world):
    rw = ray_world
    head = rw.head(HEAD)
    worker = rw.worker("worker-0")
    await head.wait_ready()
    await worker.wait_ready()
    raylet = raylet_of(worker)
    driver = rw.driver()
    old = (await driver.gcs.check_alive())["cluster_id"]
    head.restart()  # in-memory GCS: a new, empty GCS with a new cluster id
    await head.wait_ready()
    new = (await driver.gcs.check_alive())["cluster_id"]
    await asyncio.wait_for(raylet.wait_exited(), 5.0)
    fatal = [e.fields["message"] for e in rw.world.trace.events if e.event == "raylet_fatal"]
    assert old != new
    assert fatal == [f"The GCS has a different cluster ID: cluster ID mismatch: the client has "
                     f"{old}, this GCS is {new}. The program will terminate."]


async def test_partitioned_node_is_marked_dead_by_health_checks_then_exits_on_reconnect(
        ray_world):
    rw = ray_world
    head = rw.head(HEAD)
    worker = rw.worker("worker-0", env={"RAY_gcs_rpc_server_reconnect_timeout_s": "600"})
    await head.wait_ready()
    await worker.wait_ready()
    gcs = head.child("gcs_server")
    raylet = raylet_of(worker)
    net = rw.world.network
    net.partition("worker-0", gcs.name)
    net.partition(HEAD, raylet.name)
    cut = rw.now
    driver = rw.driver()

    async def dead() -> bool:
        return {n["node_name"]: n["state"] for n in await driver.nodes()}["worker-0"] == "DEAD"

    while not await dead():
        await rw.sleep(1.0)
    # every Health/Check times out (10 s): 5 s initial delay + 4 x (10 s + 3 s) + 10 s
    assert 66.0 <= rw.now - cut <= 69.0
    assert raylet.alive, "inside its 600 s window, it doesn't know yet"
    net.heal()
    await asyncio.wait_for(raylet.wait_exited(), 10.0)
    fatal = [e.fields["message"] for e in rw.world.trace.events if e.event == "raylet_fatal"]
    assert fatal == ["GCS consider this node to be dead. This may happen when GCS is not backed "
                     "by a DB and restarted or there is data loss in the DB."]
