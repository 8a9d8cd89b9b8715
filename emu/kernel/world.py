"""The kernel's world: clock, randomness, processes, network and trace, wired together.

`World` is what the kernel offers the layers above it; `emu.Simulation` extends it with the API
server, clients and the Kubernetes and Ray parts. It holds only time, randomness, processes, the
network and the trace — world state stays inside the components that own it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from . import clock
from .loop import VirtualTimeLoop
from .network import Network
from .process import MainFn, Process, ProcessTable
from .programs import ProgramRegistry
from .rng import SimRandom
from .trace import Trace


class World:
    """Time, seeded randomness, processes, network and trace for one run."""

    def __init__(self, *, seed: int = 0, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.seed = seed
        self.rng = SimRandom(seed)
        self.trace = Trace(self.loop.time)
        self.processes = ProcessTable(self.loop, self.trace)
        self.network = Network(self.loop.time, self.trace)
        self.processes.on_exit(self.network.process_gone)
        #: Image → program: what a container runs (emu.ray and tests register programs).
        self.programs = ProgramRegistry()
        self._background: list[asyncio.Future[Any]] = []

    @property
    def now(self) -> float:
        """Virtual seconds since the start of the run."""
        return self.loop.time()

    @property
    def virtual(self) -> bool:
        return isinstance(self.loop, VirtualTimeLoop) and not self.loop.wall_clock

    def timestamp(self, seconds: float | None = None) -> str:
        """``metav1.Time`` text for a virtual time (now when omitted)."""
        return clock.rfc3339(self.now if seconds is None else seconds)

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass (instantly, unless something happens meanwhile)."""
        await asyncio.sleep(seconds)

    def start_process(self, name: str, main: MainFn, *, host: str | None = None) -> Process:
        """Start ``main(process)`` as a new process named ``name``."""
        return self.processes.start(name, main, host=host)

    def log(self, event: str, **fields: Any) -> None:
        """Record an event from the test itself (process ``test``)."""
        self.trace.emit("test", event, **fields)

    def spawn_background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task of the world itself (no process): a fault's own I/O."""
        task = self.loop.create_task(coro)
        self._background.append(task)
        return task

    def call_later(self, delay: float, fn: Callable[[], Any]) -> asyncio.TimerHandle:
        """Run ``fn()`` after ``delay`` virtual seconds (a coroutine result is scheduled as a task)."""

        def fire() -> None:
            result = fn()
            if isinstance(result, Awaitable):
                self._background.append(asyncio.ensure_future(result))

        return self.loop.call_later(delay, fire)
