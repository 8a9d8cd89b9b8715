"""An RPC whose caller is gone (its process crashed mid-call, as a raylet's does when its Pod
is deleted) still runs to its end in the server; its error is nobody's to report, and it must
not surface as asyncio's "Task exception was never retrieved" on stderr."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import emu
from emu.ray.net import RpcError, run_in


def test_an_rpc_error_after_the_caller_left_is_not_an_unretrieved_task_exception():
    unretrieved: list[str] = []

    async def main(sim: emu.Simulation) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: unretrieved.append(
            f"{ctx.get('message')}: {ctx.get('exception')!r}"))
        server = sim.processes.start("gcs", lambda process: sim.sleep(10**6))

        async def heartbeat() -> dict[str, Any]:
            await asyncio.sleep(1.0)
            raise RpcError("NOT_FOUND", "node n1 is not alive in this GCS")

        caller = asyncio.ensure_future(run_in(server, heartbeat(), "10.0.0.1:6379"))
        await sim.sleep(0.5)
        caller.cancel()  # the raylet's process crashed while waiting for the answer
        await sim.sleep(2.0)
        assert caller.cancelled()
        del caller
        gc.collect()
        await sim.sleep(0.1)

    emu.run(main, seed=1)
    gc.collect()
    assert unretrieved == []


def test_an_rpc_error_is_still_the_waiting_callers():
    async def main(sim: emu.Simulation) -> str:
        server = sim.processes.start("gcs", lambda process: sim.sleep(10**6))

        async def heartbeat() -> dict[str, Any]:
            raise RpcError("NOT_FOUND", "node n1 is not alive in this GCS")

        try:
            await run_in(server, heartbeat(), "10.0.0.1:6379")
        except RpcError as err:
            return err.code
        return "answered"

    assert emu.run(main, seed=1) == "NOT_FOUND"
