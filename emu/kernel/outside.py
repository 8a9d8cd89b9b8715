"""Outside work the world waits for with everything in it stopped: `block_on`.

`emu.kernel.clock.freeze_while` stops virtual time while real I/O is in flight, but the loop keeps
running the world's other ready tasks meanwhile, as many steps as the outside takes: which of two
tasks sees the other's write then depends on a real server's latency, and two runs of one seed can
differ. `block_on` runs the outside coroutine on a loop of its own, in a thread that lives as long
as the call, and blocks the world's loop until it is done: no task moves and no timer fires, so
the history is the same however long the outside took. The real-server Redis storage
(`emu.backends.redis`) runs every command this way.

A coroutine run here must not touch the world (it runs on another loop, in another thread): it is
for a client's own I/O, such as a ``redis.asyncio`` client whose connections then belong to the
outside loop for good.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


class _OutsideLoop:
    """An event loop of this process for outside work, run only while a `block_on` waits."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()


_outside: _OutsideLoop | None = None
_lock = threading.Lock()


def outside_loop() -> asyncio.AbstractEventLoop:
    """The process's outside loop, made on first use (and again in a forked child: the parent's
    holds the parent's sockets)."""
    global _outside
    with _lock:
        if _outside is None or _outside.pid != os.getpid():
            _outside = _OutsideLoop()
        return _outside.loop


def block_on(awaitable: Awaitable[T], timeout: float) -> T:
    """Run ``awaitable`` on the outside loop and block the calling thread (the world's loop)
    until it finishes; its result, or its exception. After ``timeout`` wall-clock seconds it is
    cancelled and `TimeoutError` is raised.

    The outside loop runs in a thread of its own that lives only as long as the call: between
    calls the process has no extra thread, so a world that used a real server can still be
    snapshotted (`emu.kernel.snapshot` forks only a single-threaded process)."""
    loop = outside_loop()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = loop.run_until_complete(_awaited(awaitable))
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="emu-outside-io", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        loop.call_soon_threadsafe(_cancel_all, loop)
        thread.join()
        raise TimeoutError(f"the outside work did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class OnOutsideLoop:
    """A client whose every awaitable-returning method runs under `block_on`: what the world
    hands out of a client that lives on the outside loop, so code on the world's loop can still
    call it (``await proxy.keys("*")``)."""

    def __init__(self, client: Any, timeout: float) -> None:
        self._client = client
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if inspect.isawaitable(result):
                return block_on(result, self._timeout)
            return result

        return call

    def __repr__(self) -> str:
        return f"OnOutsideLoop({self._client!r})"
