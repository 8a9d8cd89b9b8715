"""The virtual-time asyncio event loop.

asyncio asks its selector to wait ``timeout`` seconds for I/O whenever nothing is ready. This loop
answers that question instead of the operating system: nothing in the emulated world does real I/O,
so "wait until the next timer" becomes "jump the clock to that timer's deadline" — exactly, with no
drift, because the clock is set to the timer's own ``when`` rather than advanced by a difference.

When nothing is ready and no timer exists the world can never move again: that is a `Deadlock`,
raised with the names of the tasks still waiting, the way SimPy reports an ``until`` event that can
never trigger.

Two ways out of virtual time:
- wall-clock mode (``VirtualTimeLoop(wall_clock=True)``) behaves like a normal loop, for the HTTP
  facade and interactive use;
- `freeze_while` (in ``clock.py``) freezes virtual time while a coroutine awaits outside work (a real
  Redis server, a thread): the selector then really waits, and the clock stands still.

One history on every Python: asyncio's own scheduling changed between versions, and the loop
must not let that reach a run. ``asyncio.wait_for`` ran its awaitable in a new task up to 3.11 (two
extra loop iterations before it starts and after it ends) and runs it inline since 3.12, which
reordered events at one virtual instant in five of the fifteen scenarios. While a virtual-time loop
runs, ``asyncio.wait_for`` is the kernel's `wait_for` (3.12's inline behaviour on every version);
other loops keep the standard one. See `pin_asyncio`.

Prior art: looptime (a fake-time loop for pytest), trio's ``MockClock(autojump_threshold=0)``,
SimPy's ``Environment.step``.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import itertools
import selectors
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

#: asyncio never asks the selector to wait longer than this (BaseEventLoop's MAXIMUM_SELECT_TIMEOUT).
_MAX_SELECT = 24 * 3600
#: How long one real wait lasts while virtual time is frozen; the loop then looks again.
_FROZEN_POLL = 0.5
#: The cyclic GC's youngest-generation threshold while a loop runs (Python's default is 700).
#: A world of N clusters interleaves N clusters' work, so a transient object (a decoded
#: response held across an await) lives through more allocations as N grows; at 700 ever more of
#: them survive into the old generation and force full collections of a heap that also grows
#: with N: 40% of a 1,000-cluster run went to the collector, against 25% at 100.
GC_GEN0_THRESHOLD = 50_000


class Deadlock(RuntimeError):
    """Nothing is ready, no timer is pending, and no outside work is awaited: the world is stuck."""

    def __init__(self, now: float, waiting: list[str]) -> None:
        self.now = now
        self.waiting = waiting
        shown = "\n  ".join(waiting) if waiting else "(no tasks)"
        super().__init__(
            f"No scheduled events left at t={now:.6f}s but {len(waiting)} task(s) are still waiting "
            f"and nothing can wake them:\n  {shown}"
        )


class _SeqTimerHandle(asyncio.TimerHandle):
    """A TimerHandle ordered by (deadline, creation sequence): equal deadlines fire in FIFO order."""

    __slots__ = ("_seq",)

    def __init__(self, when: float, seq: int, callback: Callable[..., object], args: tuple[Any, ...],
                 loop: asyncio.AbstractEventLoop, context: Any = None) -> None:
        super().__init__(when, callback, args, loop, context=context)
        self._seq = seq

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _SeqTimerHandle):
            return (self.when(), self._seq) < (other.when(), other._seq)
        return super().__lt__(other)  # type: ignore[operator]


class _VirtualSelector:
    """Wraps the real selector; where asyncio would block, it moves the virtual clock instead."""

    def __init__(self, loop: VirtualTimeLoop, real: selectors.BaseSelector) -> None:
        self._loop = loop
        self._real = real

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self._loop
        if loop._wall_clock:
            return self._real.select(timeout)
        if loop._frozen:
            # Outside work is in flight: really wait for it, and keep the clock still.
            wait = _FROZEN_POLL if timeout is None else min(timeout, _FROZEN_POLL)
            return self._real.select(wait if timeout != 0 else 0)
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            if loop._closing_executor:
                return self._real.select(_FROZEN_POLL)
            raise Deadlock(loop._now, loop._describe_waiting())
        scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
        if scheduled and timeout < _MAX_SELECT:
            deadline = scheduled[0].when()
            if deadline > loop._now:
                loop._now = deadline
        else:
            loop._now += timeout
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose ``time()`` is virtual and jumps to the next timer when idle.

    ``start`` is the virtual time at creation (seconds). In wall-clock mode ``time()`` follows
    the machine's monotonic clock from that same starting value.
    """

    def __init__(self, *, wall_clock: bool = False, start: float = 0.0) -> None:
        super().__init__()
        pin_asyncio()
        self._wall_clock = wall_clock
        self._now = float(start)
        self._wall_origin = time.monotonic() - float(start)
        self._frozen = 0
        self._closing_executor = False
        self._timer_seq = itertools.count()
        self._clock_resolution = 1e-9
        real: selectors.BaseSelector = self._selector  # type: ignore[has-type]
        self._selector = _VirtualSelector(self, real)

    # -- time ------------------------------------------------------------------------------------

    def time(self) -> float:
        if self._wall_clock:
            return time.monotonic() - self._wall_origin
        return self._now

    @property
    def wall_clock(self) -> bool:
        return self._wall_clock

    @property
    def frozen(self) -> bool:
        """True while some coroutine awaits outside work under `freeze_while`."""
        return self._frozen > 0

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                context: Any = None) -> asyncio.TimerHandle:
        self._check_closed()  # type: ignore[attr-defined]
        timer = _SeqTimerHandle(when, next(self._timer_seq), callback, args, self, context=context)
        if timer._source_traceback:  # type: ignore[attr-defined]
            del timer._source_traceback[-1]  # type: ignore[attr-defined]
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def run_forever(self) -> None:
        """Run with a raised young-generation GC threshold (`GC_GEN0_THRESHOLD`), restored after;
        collection timing never reaches the trace (nothing here has a behaviour-bearing
        finalizer), only the wall time."""
        saved = gc.get_threshold()
        if saved[0] and saved[0] < GC_GEN0_THRESHOLD:
            gc.set_threshold(GC_GEN0_THRESHOLD, *saved[1:])
        try:
            super().run_forever()
        finally:
            gc.set_threshold(*saved)

    async def shutdown_default_executor(self, *args: Any) -> None:
        # Joining the executor's threads is outside work: really wait for it.
        self._closing_executor = True
        try:
            await super().shutdown_default_executor(*args)
        finally:
            self._closing_executor = False

    # -- diagnostics -----------------------------------------------------------------------------

    def _describe_waiting(self) -> list[str]:
        lines = []
        for task in sorted(asyncio.all_tasks(self), key=lambda t: t.get_name()):
            where = ""
            stack = task.get_stack(limit=1)
            if stack:
                frame = stack[-1]
                where = f" at {frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"
            coro = task.get_coro()
            qual = getattr(coro, "__qualname__", repr(coro))
            lines.append(f"{task.get_name()}: {qual}{where}")
        return lines


# -- asyncio behaviour pinned across Python versions ---------------------------------------------

_STD_WAIT_FOR = asyncio.wait_for


async def wait_for(aw: Awaitable[_T], timeout: float | None) -> _T:
    """``asyncio.wait_for`` as Python 3.12 runs it, on every version: the awaitable runs inline in
    the caller's task under `asyncio.timeout` (no task of its own, so no extra loop iterations),
    and a timeout cancels it and raises `TimeoutError`."""
    if timeout is not None and timeout <= 0:
        fut = asyncio.ensure_future(aw)
        if fut.done():
            return fut.result()
        fut.cancel()
        try:
            await fut
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc
        return fut.result()
    async with asyncio.timeout(timeout):
        return await aw


async def _dispatch_wait_for(aw: Awaitable[_T], timeout: float | None) -> _T:
    if isinstance(asyncio._get_running_loop(), VirtualTimeLoop):
        return await wait_for(aw, timeout)
    return await _STD_WAIT_FOR(aw, timeout)


_dispatch_wait_for.__doc__ = _STD_WAIT_FOR.__doc__


def pin_asyncio() -> None:
    """Make ``asyncio.wait_for`` the kernel's `wait_for` on virtual-time loops (and the standard
    one on any other loop). Idempotent; called when a `VirtualTimeLoop` is created. Code that
    imported ``wait_for`` by name before that keeps the standard function."""
    if asyncio.wait_for is not _dispatch_wait_for:
        asyncio.wait_for = _dispatch_wait_for  # type: ignore[assignment]
        asyncio.tasks.wait_for = _dispatch_wait_for  # type: ignore[assignment]


def new_loop(*, wall_clock: bool = False) -> VirtualTimeLoop:
    """A fresh virtual-time loop (the ``loop_factory`` for `asyncio.Runner`)."""
    return VirtualTimeLoop(wall_clock=wall_clock)
