"""The same seed gives the same history: a busy head-loss run twice, byte for byte."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ray_actors import Counter
from raytestworld import HEAD_SVC, RayTestWorld

from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.world import World


async def scenario(rw: RayTestWorld) -> None:
    await rw.redis().wait_ready()
    env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "uid-1"}
    head = rw.head("head", env=env)
    workers = [rw.worker(f"worker-{i}", env={"RAY_gcs_rpc_server_reconnect_timeout_s": "600"})
               for i in range(2)]
    await head.wait_ready()
    dash = f"{HEAD_SVC}:8265"
    await rw.http(dash, "POST", "/api/jobs/", {"entrypoint": "sleep 500"})
    await rw.http(dash, "PUT", "/api/serve/applications/",
                  {"applications": [{"name": "a", "import_path": "a.b", "route_prefix": "/a"}]})
    driver = rw.driver()
    await driver.connect()
    actor = await driver.create_actor(Counter, name="c", detached=True, max_restarts=-1)
    await actor.call("incr")
    await rw.sleep(10)
    head.crash()
    workers[0].crash()
    await rw.sleep(5)
    await head.replace("head-b").wait_ready()
    await rw.sleep(40)


def run_once(tmp: Path) -> str:
    async def main() -> str:
        world = World(seed=7)
        try:
            await scenario(RayTestWorld(world, tmp))
        finally:
            world.processes.crash_all()
        return world.trace.digest()

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())


def test_same_seed_same_trace_digest(tmp_path):
    assert run_once(tmp_path / "a") == run_once(tmp_path / "b")
