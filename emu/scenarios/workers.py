"""A worker Pod lost: KubeRay replaces the Pod; what Ray does with the work that was on it.

The article: KubeRay recreates worker Pods up to the desired count, but an actor's memory is not
recoverable that way — ``max_restarts`` defaults to 0, and even a restartable actor comes back
with fresh memory unless the application checkpoints its state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..faults import DeletePod
from ..ray.workloads import ActorDiedError, ActorUnavailableError, RayClient
from ..simulation import Simulation
from . import Report, scenario
from ._common import (
    CheckpointedCounter,
    Counter,
    Narrator,
    head_svc,
    kube,
    names,
    ray_pods,
    raycluster,
    start,
    workers_ready,
)

TASK_SECONDS = 20.0


async def _slow_double(x: int) -> int:
    """A task that computes for 20 virtual seconds."""
    await asyncio.sleep(TASK_SECONDS)
    return 2 * x


@scenario("worker-loss",
          "a worker Pod deleted: KubeRay replaces it; a task is retried elsewhere; an actor with "
          "max_restarts=0 is dead, one with restarts loses its memory, a checkpointed one "
          "restores it", cluster=kube())
async def worker_loss(sim: Simulation, report: Report) -> None:
    """A RayCluster of a head and two workers; a driver runs, on worker A: a 20 s task (three
    retries, Ray's default), an actor with the default ``max_restarts=0``, an actor with
    ``max_restarts=-1`` and no checkpoint, and one with restarts and the checkpoint hook (state
    saved to storage outside the cluster after every call). Each actor counts to 5; then worker
    A's Pod is deleted. Expectations:

    - KubeRay creates a new worker Pod and the cluster has two ready workers again;
    - the task is retried on another node and returns its value (two attempts);
    - the ``max_restarts=0`` actor is dead (ActorDiedError: its node died);
    - the restartable actor is alive on another node with its count back at 0 (memory lost);
    - the checkpointed actor is alive on another node with its count restored to 5.
    """
    Narrator(sim)
    await start(sim)
    await sim.apply(raycluster(workers=2))
    await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    victim = names(ray_pods(sim, "raycluster", "worker"))[0]
    driver = RayClient(sim.network, f"{head_svc('raycluster')}:6379", caller="driver")
    await driver.connect()
    node = {n["node_name"]: n["node_id"] for n in await driver.nodes()}[victim]
    sim.ray_config.checkpoint_store("bucket")
    task = driver.remote(_slow_double, 21, node_id=node, soft=True)
    plain = await driver.create_actor(Counter, name="plain", node_id=node, soft=True)
    restartable = await driver.create_actor(Counter, name="restartable", node_id=node,
                                            soft=True, max_restarts=-1, max_task_retries=-1)
    saved = await driver.create_actor(CheckpointedCounter, name="checkpointed", node_id=node,
                                      soft=True, max_restarts=-1, max_task_retries=-1,
                                      checkpoint="bucket")
    for actor in (plain, restartable, saved):
        for _ in range(5):
            await actor.call("incr")
    await sim.sleep(2)
    lost_at = sim.now
    sim.faults.do(DeletePod(name=victim))

    value = await task
    outcomes: dict[str, Any] = {}
    try:
        outcomes["plain"] = await plain.call("get")
    except ActorUnavailableError:  # the GCS has not declared the node dead yet
        await sim.sleep(30)
        try:
            outcomes["plain"] = await plain.call("get")
        except ActorDiedError as err:
            outcomes["plain"] = f"ActorDiedError: {err}"
    except ActorDiedError as err:
        outcomes["plain"] = f"ActorDiedError: {err}"
    outcomes["restartable"] = await restartable.call("get")
    outcomes["checkpointed"] = await saved.call("get")
    rc = await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    states = {a: await h.state() for a, h in (("plain", plain), ("restartable", restartable),
                                              ("checkpointed", saved))}

    workers = names(ray_pods(sim, "raycluster", "worker"))
    created = [e.t for e in sim.trace.select("write") if e.fields.get("kind") == "Pod"
               and e.fields.get("verb") == "create" and e.t >= lost_at]
    report.fact("worker_lost_at", round(lost_at, 3))
    report.fact("worker_recreated_at", round(created[0], 3) if created else None)
    report.fact("task_attempts", task.attempts)
    report.fact("actors", {a: (s["state"], s["num_restarts"], outcomes[a])
                           for a, s in states.items()})
    report.expect("KubeRay replaces the worker Pod: two ready workers again",
                  victim not in workers and len(workers) == 2 and workers_ready(2)(rc),
                  f"workers {workers}")
    report.expect("the task is retried on another node and returns its value",
                  value == 42 and task.attempts == 2, f"{value} after {task.attempts} attempts")
    report.expect("the actor with max_restarts=0 is dead: its node died",
                  states["plain"]["state"] == "DEAD" and str(outcomes["plain"]).startswith(
                      "ActorDiedError: The actor died because its node has died."),
                  str(outcomes["plain"]))
    report.expect("the restartable actor is back on another node, its memory lost",
                  states["restartable"]["state"] == "ALIVE"
                  and states["restartable"]["num_restarts"] == 1
                  and states["restartable"]["node_id"] != node
                  and outcomes["restartable"] == 0, f"count {outcomes['restartable']}")
    report.expect("the checkpointed actor is back on another node, its count restored",
                  states["checkpointed"]["state"] == "ALIVE"
                  and states["checkpointed"]["num_restarts"] == 1
                  and states["checkpointed"]["node_id"] != node
                  and outcomes["checkpointed"] == 5, f"count {outcomes['checkpointed']}")
