"""Tasks and actors when a worker node is lost; the checkpoint hook; job ownership (FACTS §3)."""

from __future__ import annotations

import asyncio

import pytest
from ray_actors import CheckpointedCounter, Counter, Exploding

from emu.ray.faults import kill_raylet
from emu.ray.workloads import (
    ActorDiedError,
    ActorUnavailableError,
    RayTaskError,
    WorkerCrashedError,
)

HEAD = "raycluster-head-0"


async def cluster(rw, workers=2):
    head = rw.head(HEAD)
    pods = [rw.worker(f"worker-{i}") for i in range(workers)]
    for pod in (head, *pods):
        await pod.wait_ready()
    driver = rw.driver()
    await driver.connect()
    return head, pods, driver


async def node_ids(driver):
    return {n["node_name"]: n["node_id"] for n in await driver.nodes() if n["state"] == "ALIVE"}


async def slow_double(x):
    await asyncio.sleep(30)
    return 2 * x


async def test_task_is_retried_on_another_node_when_its_worker_node_dies(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw)
    ref = driver.remote(slow_double, 21)
    await rw.sleep(10)
    started = [e.process for e in rw.world.trace.events if e.event == "task_started"]
    assert len(started) == 1
    first_pod = started[0].split("/", 1)[0]
    kill_raylet(rw.world, first_pod)
    assert await ref == 42
    assert ref.attempts == 2
    assert rw.now >= 40, "the retry started over"
    started = [e.process for e in rw.world.trace.events if e.event == "task_started"]
    assert started[1].split("/", 1)[0] != first_pod


async def test_task_without_retries_fails_with_worker_crashed(ray_world):
    rw = ray_world
    _, pods, driver = await cluster(rw, workers=1)
    ref = driver.remote(slow_double, 1, max_retries=0)
    await rw.sleep(5)
    kill_raylet(rw.world, pods[0].name)
    with pytest.raises(WorkerCrashedError):
        await ref


async def test_application_error_is_not_retried_by_default(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw, workers=1)

    def bad():
        raise ValueError("no")

    ref = driver.remote(bad)
    with pytest.raises(RayTaskError) as err:
        await ref
    assert str(err.value) == "ValueError: no"
    assert ref.attempts == 1


async def test_actor_with_default_max_restarts_is_not_restarted_after_its_node_dies(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw)
    nodes = await node_ids(driver)
    actor = await driver.create_actor(Counter, name="c", node_id=nodes["worker-0"], soft=True)
    assert await actor.call("incr") == 1
    kill_raylet(rw.world, "worker-0")
    with pytest.raises(ActorUnavailableError):
        await actor.call("incr")  # the GCS doesn't know yet: it may or may not have run
    await rw.sleep(20)  # the node fails its health checks
    with pytest.raises(ActorDiedError) as err:
        await actor.call("incr")
    assert str(err.value) == ("The actor died because its node has died. Node Id: "
                              f"{nodes['worker-0']}\n\tthe actor's node was terminated "
                              "unexpectedly: health check failed due to missing too many "
                              "heartbeats")
    record = await actor.state()
    assert (record["state"], record["num_restarts"]) == ("DEAD", 0)


async def test_actor_with_a_restart_comes_back_elsewhere_with_fresh_memory(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw)
    nodes = await node_ids(driver)
    actor = await driver.create_actor(Counter, 10, name="c", node_id=nodes["worker-0"],
                                      soft=True, max_restarts=1, max_task_retries=1)
    assert await actor.call("incr") == 11
    kill_raylet(rw.world, "worker-0")
    assert await actor.call("incr") == 11, "the constructor ran again: its memory was lost"
    record = await actor.state()
    assert (record["state"], record["num_restarts"], record["node_id"]) == (
        "ALIVE", 1, nodes["worker-1"])


async def test_checkpointed_actor_loses_its_process_but_restores_its_progress(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw)
    nodes = await node_ids(driver)
    store = rw.config.checkpoint_store("s3-bucket")
    actor = await driver.create_actor(CheckpointedCounter, name="trainer", detached=True,
                                      node_id=nodes["worker-0"], soft=True, max_restarts=-1,
                                      max_task_retries=-1, checkpoint="s3-bucket")
    for _ in range(5):
        await actor.call("incr")
    kill_raylet(rw.world, "worker-0")
    assert await actor.call("get") == 5, "restored from the checkpoint"
    assert (await actor.state())["num_restarts"] == 1
    assert store.saves == 6 and store.loads == 1
    restored = [e for e in rw.world.trace.events if e.event == "actor_restored_from_checkpoint"]
    assert len(restored) == 1


async def test_non_detached_actor_dies_with_its_job_and_detached_one_does_not(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw, workers=1)
    owned = await driver.create_actor(Counter, name="owned")
    detached = await driver.create_actor(Counter, name="kept", detached=True)
    await driver.shutdown()
    with pytest.raises(ActorDiedError) as err:
        await owned.call("get")
    assert str(err.value) == (
        "The actor is dead because its owner has died. Owner Id: "
        f"{driver.job_id}{'ff' * 24} Owner Ip address:  Owner worker exit type: "
        "INTENDED_USER_EXIT Worker exit detail: Owner's worker process has crashed.")
    assert await detached.call("incr") == 1


async def test_actor_whose_constructor_raises_is_dead_with_the_error(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw, workers=1)
    with pytest.raises(ActorDiedError) as err:
        await driver.create_actor(Exploding)
    assert str(err.value) == ("The actor died because of an error raised in its creation task: "
                              "RuntimeError: constructor failed on purpose")


async def test_taken_actor_name_is_refused(ray_world):
    rw = ray_world
    _, _, driver = await cluster(rw, workers=1)
    await driver.create_actor(Counter, name="dup", detached=True)
    from emu.ray.net import RpcError

    with pytest.raises(RpcError) as err:
        await driver.create_actor(Counter, name="dup", detached=True)
    assert err.value.message == "Actor with name 'dup' already exists in the namespace "

