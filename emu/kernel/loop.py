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
import linecache
import os
import selectors
import sysconfig
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

_T = TypeVar("_T")

#: asyncio never asks the selector to wait longer than this (BaseEventLoop's MAXIMUM_SELECT_TIMEOUT).
_MAX_SELECT = 24 * 3600
#: How long one real wait lasts while virtual time is frozen; the loop then looks again.
_FROZEN_POLL = 0.5
#: With work ready, the real selector is polled once every this many loop steps (see
#: `_VirtualSelector.select`).
_POLL_EVERY = 64
#: The cyclic GC's youngest-generation threshold while a loop runs (Python's default is 700).
#: A world of N clusters interleaves N clusters' work, so a transient object (a decoded
#: response held across an await) lives through more allocations as N grows; at 700 ever more of
#: them survive into the old generation and force full collections of a heap that also grows
#: with N: 40% of a 1,000-cluster run went to the collector, against 25% at 100.
GC_GEN0_THRESHOLD = 50_000


class Deadlock(RuntimeError):
    """No task can ever run again: nothing is ready, no timer is pending (timers marked with
    `VirtualTimeLoop.unref`, such as a run's time limit, do not count) and no outside work is
    awaited. ``waiting`` names each waiting task by the line it is stuck on, the run's own task
    (the test) first."""

    def __init__(self, now: float, waiting: list[str]) -> None:
        self.now = now
        self.waiting = waiting
        shown = "\n  ".join(waiting) if waiting else "(no tasks)"
        super().__init__(
            f"Deadlock at t={now:.6f}s: no task can ever run again (nothing is ready, no timer "
            f"is pending, no outside work is awaited); {len(waiting)} task(s) wait forever:"
            f"\n  {shown}"
        )


class _SeqTimerHandle(asyncio.TimerHandle):
    """A TimerHandle ordered by (deadline, creation sequence): equal deadlines fire in FIFO order."""

    __slots__ = ("_seq", "_unref")

    def __init__(self, when: float, seq: int, callback: Callable[..., object], args: tuple[Any, ...],
                 loop: asyncio.AbstractEventLoop, context: Any = None) -> None:
        super().__init__(when, callback, args, loop, context=context)
        self._seq = seq
        self._unref = False

    def __lt__(self, other: object) -> bool:
        # (deadline, seq) order without building two tuples: the timer heap compares often
        if isinstance(other, _SeqTimerHandle):
            when = self._when  # type: ignore[attr-defined]
            other_when = other._when  # type: ignore[attr-defined]
            return when < other_when or (when == other_when and self._seq < other._seq)
        return super().__lt__(other)  # type: ignore[operator]


class _VirtualSelector:
    """Wraps the real selector; where asyncio would block, it moves the virtual clock instead."""

    def __init__(self, loop: VirtualTimeLoop, real: selectors.BaseSelector) -> None:
        self._loop = loop
        self._real = real
        self._skipped = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self._loop
        if loop._wall_clock:
            return self._real.select(timeout)
        if loop._frozen:
            # Outside work is in flight: really wait for it, and keep the clock still.
            wait = _FROZEN_POLL if timeout is None else min(timeout, _FROZEN_POLL)
            return self._real.select(wait if timeout != 0 else 0)
        if timeout == 0:
            # Work is ready, so this only asks whether outside I/O arrived too. Nothing in a
            # running (unfrozen) virtual world does I/O: only a thread's wake-up byte can be
            # there (its callback is already queued), so the system call is made once every
            # `_POLL_EVERY` steps rather than on each (a quarter of a request's hop).
            self._skipped += 1
            if self._skipped < _POLL_EVERY:
                return []
            self._skipped = 0
            return self._real.select(0)
        events = self._real.select(0)
        if events:
            return events
        scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
        if timeout is None or _only_unref(scheduled):
            if loop._closing_executor:
                return self._real.select(_FROZEN_POLL)
            raise Deadlock(loop._now, loop._describe_waiting())
        if scheduled and timeout < _MAX_SELECT:
            deadline = scheduled[0].when()
            if deadline > loop._now:
                loop._now = deadline
        else:
            loop._now += timeout
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _only_unref(scheduled: list[asyncio.TimerHandle]) -> bool:
    """Whether every live timer is unref'ed (looked at only when the earliest one is)."""
    head = scheduled[0] if scheduled else None
    if not isinstance(head, _SeqTimerHandle) or not head._unref:
        return False
    return not any(not h.cancelled() and not getattr(h, "_unref", False) for h in scheduled)


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
        #: The virtual time the loop started at: 0 in a virtual run, the real instant in a
        #: paced one (`emu.kernel.paced.PacedLoop`). A fault plan's times count from it.
        self.start = float(start)
        self._wall_origin = time.monotonic() - float(start)
        self._frozen = 0
        self._closing_executor = False
        self._timer_seq = itertools.count()
        #: The task whose code is "the test" (set by ``emu.run``): named first in a `Deadlock`.
        self.focus_task: asyncio.Task[Any] | None = None
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

    def unref(self, timer: asyncio.TimerHandle) -> asyncio.TimerHandle:
        """Let ``timer`` not keep the world alive (Node's ``unref``): when only such timers are
        left, nothing else can ever run, which is a `Deadlock` rather than a jump to them. A
        run's time limit is one."""
        if isinstance(timer, _SeqTimerHandle):
            timer._unref = True
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
        """Each waiting task by the line it is stuck on; the focus task (the test) first."""
        focus = self.focus_task
        tasks = sorted(asyncio.all_tasks(self), key=lambda t: (t is not focus, t.get_name()))
        return [describe_task(t, focus=t is focus) for t in tasks]


# -- where a task is stuck ----------------------------------------------------------------------

_LIBRARY_DIRS = tuple(sorted({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}))
#: The package of this distribution: frames in them are the world's code, not the test's.
_OWN_DIRS = (str(Path(__file__).resolve().parents[1]) + os.sep,)


def _await_chain(task: asyncio.Task[Any]) -> tuple[list[FrameType], object]:
    """The frames of a suspended task from its coroutine inward, and what the innermost awaits."""
    frames: list[FrameType] = []
    aw: object = task.get_coro()
    while aw is not None:
        frame = (getattr(aw, "cr_frame", None) or getattr(aw, "gi_frame", None)
                 or getattr(aw, "ag_frame", None))
        if frame is None:
            break
        frames.append(frame)
        aw = (getattr(aw, "cr_await", None) or getattr(aw, "gi_yieldfrom", None)
              or getattr(aw, "ag_await", None))
    return frames, aw


def _shown_path(filename: str) -> str:
    """A path as a reader finds the file: ``emu/...`` for this distribution's code, relative to
    the working directory when under it, else absolute."""
    for own in _OWN_DIRS:
        if filename.startswith(own):
            return os.path.relpath(filename, Path(own).parent)
    try:
        shown = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if shown.startswith("..") else shown


def describe_task(task: asyncio.Task[Any], *, focus: bool = False) -> str:
    """``name: stuck at path.py:12 in fn: <source line>``: the innermost frame outside the
    standard library and installed packages; for the ``focus`` task (the test), the innermost
    frame outside this distribution's own packages too (the test's own line)."""
    frames, awaited = _await_chain(task)
    ours = [f for f in frames if not f.f_code.co_filename.startswith(_LIBRARY_DIRS)]
    theirs = [f for f in ours if not f.f_code.co_filename.startswith(_OWN_DIRS)]
    chosen = (theirs if focus and theirs else ours or frames)
    label = f"{task.get_name()}{' (the test)' if focus else ''}"
    if not chosen:
        return f"{label}: {getattr(task.get_coro(), '__qualname__', repr(task.get_coro()))}"
    frame = chosen[-1]
    code = frame.f_code
    text = linecache.getline(code.co_filename, frame.f_lineno).strip()
    where = f"{label}: stuck at {_shown_path(code.co_filename)}:{frame.f_lineno} in {code.co_qualname}"
    if text:
        where += f": {text}"
    if frame is not frames[-1] or awaited is not None:
        inner = frames[-1].f_code.co_qualname if frame is not frames[-1] else type(awaited).__name__
        where += f"  (waiting in {inner})"
    return where


# -- asyncio behaviour pinned across Python versions ---------------------------------------------

_STD_WAIT_FOR = asyncio.wait_for


async def wait_for(fut: Awaitable[_T], timeout: float | None) -> _T:
    """``asyncio.wait_for`` (same parameters) as Python 3.12 runs it, on every version: the
    awaitable runs inline in the caller's task under `asyncio.timeout` (no task of its own, so
    no extra loop iterations), and a timeout cancels it and raises `TimeoutError`."""
    if timeout is not None and timeout <= 0:
        task = asyncio.ensure_future(fut)
        if task.done():
            return task.result()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc
        return task.result()
    async with asyncio.timeout(timeout):
        return await fut


async def _dispatch_wait_for(fut: Awaitable[_T], timeout: float | None) -> _T:
    if isinstance(asyncio._get_running_loop(), VirtualTimeLoop):
        return await wait_for(fut, timeout)
    return await _STD_WAIT_FOR(fut, timeout)


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
