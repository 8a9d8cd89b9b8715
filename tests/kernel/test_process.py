from __future__ import annotations

import asyncio

import pytest

from emu.kernel.network import ConnectionRefused
from emu.kernel.process import EXIT_KILLED, ProcessState
from emu.kernel.world import World


def test_crash_cancels_a_processs_tasks_in_creation_order_and_reports_exit_137(run):
    async def main():
        world = World(seed=1)
        order = []

        async def child(i):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                order.append(i)
                raise

        async def prog(proc):
            for i in range(20):
                asyncio.ensure_future(child(i))
            await asyncio.Event().wait()

        proc = world.start_process("operator-0", prog)
        await asyncio.sleep(1)
        assert len(proc.tasks) == 21
        proc.crash()
        code = await proc.wait_exited()
        await asyncio.sleep(0)
        return order, code, proc.state, world.trace.select(event="process_crashed")

    order, code, state, events = run(main)
    assert order == list(range(20))
    assert code == EXIT_KILLED
    assert state is ProcessState.CRASHED
    assert [(e.process, e.fields["code"]) for e in events] == [("operator-0", 137)]


def test_a_crashed_process_can_send_nothing_more(run):
    async def main():
        world = World()
        calls = []

        async def handler(payload, info):
            calls.append((info.src, payload))
            return "ok"

        world.network.register("svc", handler)
        sent = asyncio.Event()

        async def prog(proc):
            try:
                await asyncio.Event().wait()
            finally:
                # cleanup code that tries to talk after a crash must not reach anyone
                try:
                    await world.network.call(proc, "svc", "goodbye")
                except BaseException as err:
                    sent.set()
                    calls.append(("blocked", type(err).__name__))

        proc = world.start_process("p", prog)
        await asyncio.sleep(0)
        proc.crash()
        await asyncio.sleep(1)
        return calls

    assert run(main) == [("blocked", "ProcessGone")]


def test_a_paused_process_stops_at_its_next_sleep_and_continues_when_resumed(run):
    async def main():
        world = World()
        ticks = []

        async def prog(proc):
            while True:
                await proc.sleep(1)
                ticks.append(world.now)

        proc = world.start_process("p", prog)
        await asyncio.sleep(2.5)
        proc.pause()
        await asyncio.sleep(10)
        paused_ticks = list(ticks)
        proc.resume()
        await asyncio.sleep(1.2)
        return paused_ticks, ticks

    paused, ticks = run(main)
    assert paused == [1.0, 2.0]
    assert ticks == [1.0, 2.0, 12.5, 13.5]


def test_a_paused_process_holds_its_request_until_resumed_then_it_lands(run):
    async def main():
        world = World()
        landed = []

        async def handler(payload, info):
            landed.append((world.now, payload))
            return "ok"

        world.network.register("apiserver", handler)

        async def prog(proc):
            await proc.sleep(1)
            return await world.network.call(proc, "apiserver", "update lease")

        proc = world.start_process("leader", prog)
        await asyncio.sleep(0.5)
        proc.pause()
        await asyncio.sleep(30)
        before = list(landed)
        proc.resume()
        await proc.wait_exited()
        return before, landed, proc.exit_code

    before, landed, code = run(main)
    assert before == []
    assert landed == [(30.5, "update lease")]
    assert code == 0


def test_restart_starts_a_new_incarnation_with_nothing_carried_over(run):
    async def main():
        world = World()
        memory = []

        async def prog(proc):
            memory.append(proc.incarnation)
            await asyncio.Event().wait()

        first = world.start_process("op", prog)
        await asyncio.sleep(1)
        second = world.processes.restart("op")
        await asyncio.sleep(1)
        return first, second, memory, (first.state, second.state)

    first, second, memory, states = run(main)
    assert states == (ProcessState.CRASHED, ProcessState.RUNNING)
    assert (first.incarnation, second.incarnation) == (1, 2)
    assert first.pid != second.pid
    assert memory == [1, 2]


def test_a_process_exit_code_is_its_return_value_and_an_uncaught_error_exits_1(run):
    async def main():
        world = World()

        async def ok(proc):
            return 3

        async def bad(proc):
            raise RuntimeError("boom")

        a = world.start_process("a", ok)
        b = world.start_process("b", bad)
        return await a.wait_exited(), await b.wait_exited(), b.exit_reason

    assert run(main) == (3, 1, "RuntimeError: boom")


def test_starting_a_process_whose_name_is_running_is_refused(run):
    async def main():
        world = World()

        async def prog(proc):
            await asyncio.Event().wait()

        world.start_process("op", prog)
        with pytest.raises(ValueError, match=r"^process 'op' is already running \(incarnation 1\); "
                                             r"crash or stop it first$"):
            world.start_process("op", prog)

    run(main)


def test_an_endpoint_owned_by_a_process_goes_down_with_it(run):
    async def main():
        world = World()

        async def handler(payload, info):
            return "pong"

        async def server(proc):
            world.network.register("gcs:6379", handler, process=proc)
            await asyncio.Event().wait()

        proc = world.start_process("gcs", server)
        await asyncio.sleep(0)
        assert await world.network.call(None, "gcs:6379", "ping") == "pong"
        proc.crash()
        with pytest.raises(ConnectionRefused, match="^dial gcs:6379: connection refused$"):
            await world.network.call(None, "gcs:6379", "ping")

    run(main)


def test_a_closed_world_gives_the_loop_its_task_factory_back():
    # a loop that outlives a world (pytest-asyncio's shared loop) must not keep registering
    # tasks with it, nor chain every later world to it through their saved factories
    import emu
    from emu.kernel.loop import VirtualTimeLoop

    loop = VirtualTimeLoop()
    try:
        def mine(loop, coro, **kwargs):
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(mine)

        async def two_worlds_in_turn():
            saved = []
            for seed in (1, 2):
                sim = emu.Simulation(seed=seed, loop=loop)
                assert loop.get_task_factory() is not mine
                saved.append(sim.processes._previous_factory)
                sim.close()
                assert loop.get_task_factory() is mine
            return saved

        assert loop.run_until_complete(two_worlds_in_turn()) == [mine, mine]
    finally:
        loop.close()
