"""`block_on`: outside work with the world stopped (no task runs, no virtual time passes)."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from emu.kernel.outside import OnOutsideLoop, block_on, outside_loop


async def _outside_work(value: int) -> int:
    """Answers ``value`` once another thread (gone by then) says so."""
    loop = asyncio.get_running_loop()
    answered = asyncio.Event()
    threading.Thread(target=loop.call_soon_threadsafe, args=(answered.set,)).start()
    await answered.wait()
    return value


def test_nothing_in_the_world_moves_while_outside_work_is_awaited(run):
    async def main():
        loop = asyncio.get_running_loop()
        ran: list[str] = []

        async def other() -> None:
            ran.append("other task")

        loop.create_task(other())  # ready, but the world is blocked
        timer = loop.create_task(asyncio.sleep(0))
        got = block_on(_outside_work(7), timeout=5)  # answered from another thread
        stood = (loop.time(), list(ran), timer.done())
        await timer
        return got, stood, ran

    got, stood, ran = run(main)
    assert got == 7
    assert stood == (0.0, [], False)  # no task ran and the clock stood still meanwhile
    assert ran == ["other task"]


def test_the_outside_work_runs_on_its_own_loop_and_thread(run):
    async def where() -> tuple[asyncio.AbstractEventLoop, str]:
        return asyncio.get_running_loop(), threading.current_thread().name

    async def main():
        return asyncio.get_running_loop(), block_on(where(), timeout=5)

    world_loop, (loop, thread) = run(main)
    assert loop is outside_loop() and loop is not world_loop
    assert thread == "emu-outside-io"
    # the thread lives as long as the call: none is left that would stop a snapshot's fork
    assert [t.name for t in threading.enumerate() if t.name == "emu-outside-io"] == []


def test_an_exception_of_the_outside_work_reaches_the_caller():
    async def fails() -> None:
        raise ConnectionRefusedError("nobody listens")

    with pytest.raises(ConnectionRefusedError, match="nobody listens"):
        block_on(fails(), timeout=5)


def test_outside_work_that_takes_too_long_is_cancelled_and_a_timeout_raised():
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match="did not finish within 0.05 s"):
        block_on(forever(), timeout=0.05)
    assert cancelled.wait(5)


def test_a_client_on_the_outside_loop_is_called_from_the_world_through_the_proxy(run):
    class Client:
        calls = 0

        async def get(self, key: str) -> tuple[str, str]:
            Client.calls += 1
            return key, threading.current_thread().name

        name = "client-1"

    proxy = OnOutsideLoop(Client(), timeout=5)

    async def main():
        return await proxy.get("k")

    assert run(main) == ("k", "emu-outside-io")
    assert proxy.name == "client-1"  # attributes pass through as they are


def test_a_forked_child_gets_an_outside_loop_of_its_own():
    async def answer() -> int:
        return 42

    assert block_on(answer(), timeout=5) == 42  # the parent's thread runs
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread was not copied
        try:
            os.write(write, str(block_on(answer(), timeout=5)).encode())
        finally:
            os._exit(0)
    os.close(write)
    got = os.read(read, 16)
    os.waitpid(pid, 0)
    os.close(read)
    assert got == b"42"
