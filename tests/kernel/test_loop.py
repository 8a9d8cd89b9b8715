from __future__ import annotations

import asyncio

import anyio
import pytest

from emu.kernel import loop as loop_module
from emu.kernel.clock import freeze_while
from emu.kernel.loop import Deadlock, VirtualTimeLoop


def test_sleep_jumps_virtual_time_exactly_to_the_timer_deadline(run):
    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)
        fired = []
        loop.call_at(0.7, lambda: fired.append(loop.time()))
        await asyncio.sleep(1)
        return loop.time(), fired

    now, fired = run(main)
    assert fired == [0.7]
    assert now == pytest.approx(1.3, abs=1e-12)


def test_timers_with_equal_deadlines_fire_in_the_order_they_were_scheduled(run):
    async def main():
        loop = asyncio.get_running_loop()
        order = []
        for i in range(50):
            loop.call_at(5.0, order.append, i)
        await asyncio.sleep(6)
        return order

    assert run(main) == list(range(50))


def test_twenty_thousand_one_second_sleeps_advance_twenty_thousand_virtual_seconds(run):
    async def main():
        for _ in range(20_000):
            await asyncio.sleep(1)
        return asyncio.get_running_loop().time()

    assert run(main) == 20_000.0


def test_deadlock_names_every_task_by_the_line_it_is_stuck_on(run):
    async def stuck():
        await asyncio.Event().wait()

    async def main():
        asyncio.get_running_loop().create_task(stuck(), name="worker-a")
        await asyncio.sleep(3)
        await asyncio.Event().wait()

    with pytest.raises(Deadlock) as info:
        run(main)
    lines = str(info.value).splitlines()
    assert lines[0] == ("Deadlock at t=3.000000s: no task can ever run again (nothing is ready, "
                        "no timer is pending, no outside work is awaited); 2 task(s) wait forever:")
    assert sorted(lines[1:])[1] == (
        "  worker-a: stuck at tests/kernel/test_loop.py:51 in "
        "test_deadlock_names_every_task_by_the_line_it_is_stuck_on.<locals>.stuck: "
        "await asyncio.Event().wait()  (waiting in Event.wait)")
    assert sorted(lines[1:])[0].endswith(
        "stuck at tests/kernel/test_loop.py:56 in "
        "test_deadlock_names_every_task_by_the_line_it_is_stuck_on.<locals>.main: "
        "await asyncio.Event().wait()  (waiting in Event.wait)")
    assert info.value.now == 3.0


def test_a_timer_marked_unref_does_not_keep_the_world_alive(run):
    async def main():
        loop = asyncio.get_running_loop()
        loop.unref(loop.call_later(3600, lambda: None))
        await asyncio.sleep(5)  # an ordinary timer: time jumps to it
        await asyncio.Event().wait()  # only the unref'ed timer is left: deadlock at once

    with pytest.raises(Deadlock) as info:
        run(main)
    assert info.value.now == 5.0


def test_anyio_task_groups_cancel_scopes_and_memory_streams_run_on_virtual_time(run):
    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        async with anyio.create_task_group() as tg:
            for d in (3, 1, 2):
                tg.start_soon(anyio.sleep, d)
        seen.append(loop.time())
        with anyio.move_on_after(5) as scope:
            await anyio.sleep(1000)
        seen.append((loop.time(), scope.cancelled_caught))
        with pytest.raises(TimeoutError):
            with anyio.fail_after(2):
                await anyio.sleep(10)
        seen.append(loop.time())
        send, recv = anyio.create_memory_object_stream[int](5)

        async def produce():
            async with send:
                for i in range(3):
                    await anyio.sleep(10)
                    await send.send(i)

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            async with recv:
                async for item in recv:
                    seen.append((item, loop.time()))
        return seen

    assert run(main) == [3.0, (8.0, True), 10.0, (0, 20.0), (1, 30.0), (2, 40.0)]


def test_freeze_while_keeps_virtual_time_still_while_a_thread_works(run):
    async def main():
        loop = asyncio.get_running_loop()
        timer = loop.create_task(asyncio.sleep(5))
        result = await freeze_while(loop.run_in_executor(None, lambda: sum(range(200_000))))
        frozen_at = loop.time()
        await timer
        return result, frozen_at, loop.time()

    result, frozen_at, after = run(main)
    assert result == sum(range(200_000))
    assert frozen_at == 0.0
    assert after == 5.0


def test_thread_work_without_freeze_while_is_reported_as_a_deadlock(run):
    import threading

    gate = threading.Event()

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, gate.wait)
        try:
            await fut
        finally:
            gate.set()

    with pytest.raises(Deadlock):
        run(main)


def test_wall_clock_mode_follows_the_machine_clock():
    async def main():
        loop = asyncio.get_running_loop()
        a = loop.time()
        await asyncio.sleep(0)
        return a, loop.time(), loop.wall_clock

    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(wall_clock=True)) as runner:
        a, b, wall = runner.run(main())
    assert wall is True
    assert 0.0 <= a <= b < 5.0


def test_wait_for_runs_its_awaitable_inline_on_every_python(run):
    # Python 3.11's asyncio.wait_for ran the awaitable in a task of its own, so "other" ran
    # first; since 3.12 it runs inline. The virtual loop pins 3.12's order on every version.
    async def main():
        order = []

        async def other():
            order.append("other")

        async def inner():
            order.append("inner")
            return 7

        asyncio.get_running_loop().create_task(other())
        result = await asyncio.wait_for(inner(), 5)
        order.append("after")
        await asyncio.sleep(0)
        return result, order

    assert run(main) == (7, ["inner", "after", "other"])


def test_wait_for_times_out_at_its_exact_virtual_deadline_and_cancels_the_awaitable(run):
    async def main():
        loop = asyncio.get_running_loop()
        cancelled = []

        async def slow():
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                cancelled.append(loop.time())
                raise

        with pytest.raises(TimeoutError):
            await asyncio.wait_for(slow(), 2.5)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(1), 0)
        return loop.time(), cancelled

    assert run(main) == (2.5, [2.5])


def test_wait_for_on_an_ordinary_asyncio_loop_is_the_standard_one():
    async def main():
        return await asyncio.wait_for(asyncio.sleep(0, "done"), 1)

    VirtualTimeLoop().close()  # the pin is installed
    assert asyncio.run(main()) == "done"
    assert asyncio.wait_for.__doc__ == loop_module._STD_WAIT_FOR.__doc__
    assert asyncio.iscoroutinefunction(asyncio.wait_for)


def test_outside_io_is_seen_within_a_bounded_number_of_steps_while_work_is_ready(run):
    """The loop asks the real selector only once every `_POLL_EVERY` ready steps: a socket that
    becomes readable while tasks keep yielding is still served after at most that many."""
    import socket

    async def main():
        loop = asyncio.get_running_loop()
        reader, writer = socket.socketpair()
        seen_at = []
        steps = 0
        loop.add_reader(reader.fileno(), lambda: seen_at.append(steps))
        try:
            writer.send(b"x")
            while not seen_at and steps < 10 * loop_module._POLL_EVERY:
                await asyncio.sleep(0)
                steps += 1
        finally:
            loop.remove_reader(reader.fileno())
            reader.close()
            writer.close()
        return seen_at, loop.time()

    seen_at, now = run(main)
    assert seen_at and seen_at[0] <= loop_module._POLL_EVERY
    assert now == 0.0
