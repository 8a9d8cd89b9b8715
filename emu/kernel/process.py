"""Processes: everything that runs in the emulated world.

An operator replica, a kubelet, a GCS, a raylet, the garbage collector: each is a `Process` with a
name, a host and its own tasks. Every task created while a process's code runs belongs to that
process (a loop task factory reads the current process from a context variable), in creation
order, so the verbs below act on all of them in an order that never depends on addresses:

- `Process.crash`: abrupt. Tasks are cancelled in creation order, the network refuses anything the
  process still tries to send, and nothing it held in memory survives. Undo: start a new process.
- `Process.pause`: the process stops at its next network call or sleep and stays there (a zombie
  leader that still believes it leads). Undo: `Process.resume`; its in-flight work then continues.
- A restart is a *new* process (`ProcessTable.restart`): same name and host, a new incarnation, a
  fresh start of its main function; nothing carries over.

A process that recovers from a bug in its own code (a controller's reconcile panic) reports it
with `Process.report_panic`: the `Panic` keeps the traceback beside the trace, not in it (its file
paths differ between machines, and the digest must not), so a failing test can show it.

Prior art: turmoil's ``Host`` (crash, bounce), madsim's node handles.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .trace import Trace

_current: contextvars.ContextVar[Process | None] = contextvars.ContextVar(
    "emu_current_process", default=None
)

MainFn = Callable[["Process"], Awaitable[Any]]

#: The reason given to processes still running when a run ends.
STOPPED_AT_END = "simulation ended"

#: Exit code of a process killed abruptly (SIGKILL, as a container runtime reports it).
EXIT_KILLED = 137


class ProcessState(enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"
    EXITED = "exited"
    CRASHED = "crashed"


class ProcessGone(Exception):
    """The process has crashed or exited; it can do nothing more."""


@attrs.frozen
class Panic:
    """A bug a process recovered from: an unexpected exception in, e.g., a controller's reconcile.

    ``source`` says what was running (``controller rayjob``), ``subject`` what it worked on
    (``RayJob default/demo``); ``at`` is the innermost ``file:line``; ``traceback`` is the full
    text, as Python prints it.
    """

    t: float
    process: str
    source: str
    subject: str
    error: str
    at: str
    traceback: str
    exception: BaseException = attrs.field(eq=False, repr=False)

    def summary(self) -> str:
        """One line: ``t=12.000s controller rayjob on RayJob default/demo: KeyError: 'x' at f.py:3``."""
        return (f"t={self.t:.3f}s {self.source} on {self.subject}: {self.error}"
                f"{' at ' + self.at if self.at else ''}")


#: How many recent errors `ProcessTable.recent_errors` keeps per subject.
RECENT_ERRORS = 5


@attrs.frozen
class ErrorNote:
    """An error a process met while working on a subject (a failed reconcile): a warning, kept
    so a test that times out can say what the controllers of its object last complained of."""

    t: float
    process: str
    source: str
    subject: str
    error: str


def current_process() -> Process | None:
    """The process whose code is running now (None for the test's own code)."""
    return _current.get()


class Process:
    """A named unit of execution with an ordered task registry."""

    def __init__(self, table: ProcessTable, name: str, host: str, main: MainFn,
                 incarnation: int, pid: int) -> None:
        self.table = table
        self.name = name
        self.host = host
        self.main = main
        self.incarnation = incarnation
        self.pid = pid
        self.state = ProcessState.RUNNING
        self.exit_code: int | None = None
        self.exit_reason: str | None = None
        self.started_at = table.loop.time()
        self._tasks: dict[int, asyncio.Task[Any]] = {}
        self._task_seq = 0
        self._gate = asyncio.Event()
        self._gate.set()
        self._exited = asyncio.Event()
        self._exit_callbacks: list[Callable[[Process], None]] = []
        self._main_task: asyncio.Task[Any] | None = None

    def __repr__(self) -> str:
        return f"<Process {self.name}#{self.incarnation} {self.state.value} on {self.host}>"

    # -- state -----------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """Running or paused: not crashed, not exited."""
        return self.state in (ProcessState.RUNNING, ProcessState.PAUSED)

    @property
    def paused(self) -> bool:
        return self.state is ProcessState.PAUSED

    @property
    def trace(self) -> Trace:
        return self.table.trace

    def log(self, event: str, **fields: Any) -> None:
        """Record a trace event from this process."""
        self.table.trace.emit(self.name, event, **fields)

    # -- tasks -----------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        """Start a task that belongs to this process, whoever calls this."""
        if not self.alive:
            coro.close()
            raise ProcessGone(f"process {self.name} is {self.state.value}; it can start nothing")
        ctx = contextvars.copy_context()
        ctx.run(_current.set, self)
        return self.table.loop.create_task(coro, name=name or f"{self.name}:task", context=ctx)

    def _register(self, task: asyncio.Task[Any]) -> None:
        self._task_seq += 1
        key = self._task_seq
        self._tasks[key] = task

        def forget(_task: asyncio.Task[Any]) -> None:
            self._tasks.pop(key, None)

        task.add_done_callback(forget)

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """Live tasks in creation order."""
        return list(self._tasks.values())

    # -- cooperation points ----------------------------------------------------------------------

    async def checkpoint(self) -> None:
        """Where a paused process stops: before and after every network call, after every sleep."""
        if self.state is ProcessState.RUNNING:
            return
        if not self.alive:
            raise ProcessGone(f"process {self.name} is {self.state.value}")
        await self._gate.wait()
        if not self.alive:
            raise ProcessGone(f"process {self.name} is {self.state.value}")

    async def sleep(self, seconds: float) -> None:
        """Sleep in virtual time; a paused process does not wake until resumed."""
        await asyncio.sleep(seconds)
        await self.checkpoint()

    async def wait_exited(self) -> int | None:
        """Wait until the process has crashed or exited; its exit code."""
        await self._exited.wait()
        return self.exit_code

    def report_panic(self, source: str, subject: str, exc: BaseException) -> Panic:
        """Record a bug this process recovered from (see `Panic`); the world's panic listeners
        hear of it at once (``sim.fail_on_panic`` is one)."""
        frames = traceback.extract_tb(exc.__traceback__)
        at = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
        panic = Panic(self.table.loop.time(), self.name, source, subject,
                      f"{type(exc).__name__}: {exc}", at,
                      "".join(traceback.format_exception(exc)), exc)
        self.table._on_panic(panic)
        return panic

    def report_error(self, source: str, subject: str, error: str) -> None:
        """Note an error met while working on ``subject`` (kept: the last few per subject)."""
        notes = self.table.recent_errors.setdefault(subject, [])
        notes.append(ErrorNote(self.table.loop.time(), self.name, source, subject, error))
        del notes[:-RECENT_ERRORS]

    def on_exit(self, callback: Callable[[Process], None]) -> None:
        """Call ``callback(process)`` when it crashes or exits (at once if it already has)."""
        if not self.alive:
            callback(self)
        else:
            self._exit_callbacks.append(callback)

    # -- verbs -----------------------------------------------------------------------------------

    def crash(self, reason: str = "crash") -> None:
        """Kill abruptly: cancel every task in creation order; memory is gone. Undo: restart."""
        if not self.alive:
            return
        self._finish(ProcessState.CRASHED, EXIT_KILLED, reason)

    def exit(self, code: int = 0, reason: str = "exit") -> None:
        """End the process with an exit code (what ``os.Exit`` does): its tasks are cancelled."""
        if not self.alive:
            return
        self._finish(ProcessState.EXITED, code, reason)

    def pause(self) -> None:
        """Freeze at the next cooperation point (a zombie). Undo: `resume`."""
        if self.state is ProcessState.RUNNING:
            self.state = ProcessState.PAUSED
            self._gate.clear()
            self.log("process_paused")

    def resume(self) -> None:
        """Continue a paused process where each of its tasks stopped."""
        if self.state is ProcessState.PAUSED:
            self.state = ProcessState.RUNNING
            self._gate.set()
            self.log("process_resumed")

    def _finish(self, state: ProcessState, code: int, reason: str) -> None:
        self.state = state
        self.exit_code = code
        self.exit_reason = reason
        if reason == STOPPED_AT_END:
            self.log("process_stopped")
        else:
            self.log("process_crashed" if state is ProcessState.CRASHED else "process_exited",
                     code=code, reason=reason)
        me = asyncio.current_task()
        for task in list(self._tasks.values()):
            if task is not me:
                task.cancel()
        self._gate.set()  # wake paused tasks so they observe the end
        self._exited.set()
        callbacks, self._exit_callbacks = self._exit_callbacks, []
        for cb in callbacks:
            cb(self)
        self.table._on_finished(self)

    async def _run_main(self) -> None:
        try:
            result = await self.main(self)
        except asyncio.CancelledError:
            if self.alive:  # cancelled from outside the process verbs: treat as killed
                self._finish(ProcessState.CRASHED, EXIT_KILLED, "cancelled")
            raise
        except ProcessGone:
            return
        except Exception as exc:  # the program failed: exit 1, as an uncaught error would
            if self.alive:
                self.log("process_failed", error=f"{type(exc).__name__}: {exc}")
                self._finish(ProcessState.EXITED, 1, f"{type(exc).__name__}: {exc}")
            return
        if self.alive:
            code = result if isinstance(result, int) and not isinstance(result, bool) else 0
            self._finish(ProcessState.EXITED, code, "exit")


class ProcessTable:
    """All processes of a world, by name (the current incarnation) and in start order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, trace: Trace) -> None:
        self.loop = loop
        self.trace = trace
        self._by_name: dict[str, Process] = {}
        self._incarnations: dict[str, int] = {}
        self._pid = 0
        self._exit_listeners: list[Callable[[Process], None]] = []
        #: Every `Panic` reported by a process of this world, in order.
        self.panics: list[Panic] = []
        self._panic_listeners: list[Callable[[Panic], None]] = []
        #: Subject (``RayJob default/demo``) → its last `ErrorNote`s, oldest first.
        self.recent_errors: dict[str, list[ErrorNote]] = {}
        self._previous_factory = loop.get_task_factory()
        loop.set_task_factory(self._task_factory)  # type: ignore[arg-type]

    def _task_factory(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
                      **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        ctx = kwargs.get("context")
        owner = ctx.get(_current) if ctx is not None else _current.get()
        if owner is not None:
            owner._register(task)
        return task

    def start(self, name: str, main: MainFn, *, host: str | None = None) -> Process:
        """Start a process running ``main(process)``. A name can be reused only once it ended."""
        existing = self._by_name.get(name)
        if existing is not None and existing.alive:
            raise ValueError(f"process {name!r} is already running (incarnation "
                             f"{existing.incarnation}); crash or stop it first")
        self._pid += 1
        incarnation = self._incarnations.get(name, 0) + 1
        self._incarnations[name] = incarnation
        proc = Process(self, name, host or name, main, incarnation, self._pid)
        self._by_name[name] = proc
        self.trace.emit(name, "process_started", host=proc.host, incarnation=incarnation)
        ctx = contextvars.copy_context()
        ctx.run(_current.set, proc)
        proc._main_task = self.loop.create_task(proc._run_main(), name=f"{name}:main", context=ctx)
        return proc

    def restart(self, name: str) -> Process:
        """Crash the named process if it still runs, then start its main again as a new process."""
        old = self.get(name)
        if old.alive:
            old.crash("restart")
        return self.start(name, old.main, host=old.host)

    def get(self, name: str) -> Process:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise KeyError(f"no process named {name!r} (known: {known})") from None

    def find(self, name: str) -> Process | None:
        return self._by_name.get(name)

    def all(self) -> list[Process]:
        """Current incarnation of every process, in start order."""
        return sorted(self._by_name.values(), key=lambda p: p.pid)

    def on_exit(self, listener: Callable[[Process], None]) -> None:
        self._exit_listeners.append(listener)

    def on_panic(self, listener: Callable[[Panic], None]) -> None:
        """Call ``listener(panic)`` for every later `Panic`."""
        self._panic_listeners.append(listener)

    def _on_panic(self, panic: Panic) -> None:
        self.panics.append(panic)
        for listener in self._panic_listeners:
            listener(panic)

    def _on_finished(self, proc: Process) -> None:
        for listener in self._exit_listeners:
            listener(proc)

    def crash_all(self) -> None:
        """End every live process (in start order): used when a run finishes. The loop gets
        back the task factory it had before this world, so a loop that outlives the world (a
        shared pytest-asyncio loop) neither registers tasks with it nor keeps it in memory."""
        for proc in self.all():
            if proc.alive:
                proc.crash(STOPPED_AT_END)
        if getattr(self.loop.get_task_factory(), "__self__", None) is self:
            self.loop.set_task_factory(self._previous_factory)
