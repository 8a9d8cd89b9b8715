"""World snapshots as a fork server: park a copy of the process at a quiescent instant, then run
each restore in a fresh fork of that copy.

Python cannot serialize a running coroutine, and a world is mostly running coroutines (every
process, informer and timer). A faithful snapshot of a live world is therefore a *process*:
`park` calls ``os.fork`` inside the running task's step; the forked copy (the *zygote*) never
returns to the loop but blocks on a pipe, holding the world exactly as it was — store, clock,
timers, processes, storage. Each restore sends the zygote a pickled ``main``; the zygote forks a
child, which leaves `park` as a restored world (see `RestoreRequest`), runs ``main`` in the very task step
the snapshot was taken in, and sends its outcome back. The zygote itself never moves, so every
restore starts from the identical state, and a restored run has the same trace digest as the
uninterrupted run from that instant.

Protocol (all pipes, length-prefixed pickles): the caller writes ``("run", payload, limit)`` or
``("close",)`` to the zygote; one frame answers each run, written by the restored child itself
(then it tells the zygote so on a pipe of its own) or, when the child died or ran too long, by
the zygote. A zygote ends when asked, or
when its request pipe reaches end-of-file (the caller closed it or died), so no zygote outlives its
caller. Waits are bounded: a restore that does not finish within ``limit`` wall seconds is killed
and reported, and a zygote that does not answer is killed.

One module, a little over 500 lines, because the caller's handle, the zygote's loop and the
child's exit share one pipe protocol and one set of descriptor rules: split, each half would be
unreadable without the other.

The kernel knows nothing of the layers above; `Simulation.snapshot` (emu.simulation) orchestrates,
adding the layers' own checks (open RocksDB storage, files in the work directory) to the kernel's
(`blockers`: wall-clock loop, outside work in flight, threads, sockets).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import os
import pickle
import select
import signal
import stat
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection
from typing import Any

#: Default wall seconds one restore may take before it is stopped and reported.
DEFAULT_RESTORE_LIMIT = 300.0
#: Wall seconds a closing zygote gets to exit before it is killed.
CLOSE_WAIT = 5.0

_HEADER = struct.Struct("!Q")
#: What a restored child tells its zygote once its answer is written.
_DONE = b"\x01"


class SnapshotError(RuntimeError):
    """A snapshot could not be taken or restored; the message says what was wrong."""


class NotQuiescent(SnapshotError):
    """A snapshot was asked for while the world was not at rest: ``reasons`` lists what still
    depends on the outside (a real socket, a thread, outside work in flight, ...)."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        shown = "\n  ".join(reasons)
        super().__init__("cannot snapshot the world now: a forked copy would not hold all of it;"
                         f"\n  {shown}")


class RestoredRunError(Exception):
    """A restored run raised an exception that cannot be sent back as itself (it does not
    pickle); this carries its type, message and traceback instead."""


def dumps(value: Any, what: str) -> bytes:
    """``value`` pickled (by ``cloudpickle`` when installed, so closures travel too)."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as first:
        try:
            import cloudpickle  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise SnapshotError(
                f"{what} cannot be sent to the snapshot's process: {type(first).__name__}: "
                f"{first} (pickle sends functions by name: define it at module level, or "
                "install cloudpickle to send closures)") from first
        try:
            data: bytes = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:
            raise SnapshotError(f"{what} cannot be sent to the snapshot's process: "
                                f"{type(err).__name__}: {err}") from err
        return data


# -- framing ------------------------------------------------------------------------------------


def _write_frame(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end-of-file; TimeoutError past ``deadline``."""
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: float | None = None) -> bytes | None:
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        return None
    (size,) = _HEADER.unpack(head)
    return _read_exact(fd, size, deadline)


# -- what blocks a snapshot ---------------------------------------------------------------------


def socket_fds() -> list[int]:
    """Open socket descriptors of this process (Linux; elsewhere none are seen). ~30 us."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    found = []
    for name in names:
        try:
            if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                found.append(int(name))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return sorted(found)


def _loop_own_fds(loop: asyncio.AbstractEventLoop) -> set[int]:
    own = set()
    for attr in ("_ssock", "_csock"):
        sock = getattr(loop, attr, None)
        if sock is not None and sock.fileno() >= 0:
            own.add(sock.fileno())
    return own


def blockers(loop: asyncio.AbstractEventLoop, *,
             sockets_before: Collection[int] = ()) -> list[str]:
    """Why a fork of this process now would not be a copy of the world (empty: it would be).
    ``sockets_before``: socket descriptors open before the world began, which are not its own
    (another test's leftovers)."""
    before = set(sockets_before)
    reasons: list[str] = []
    if not hasattr(os, "fork"):
        return [f"this platform ({sys.platform}) has no os.fork, which snapshots are made of"]
    if getattr(loop, "wall_clock", False):
        reasons.append("the loop runs on the wall clock: a snapshot needs virtual time")
    if getattr(loop, "frozen", False):
        reasons.append("outside work is in flight (virtual time is frozen under freeze_while: "
                       "a real Redis or a thread is being awaited)")
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if others:
        reasons.append("other threads are alive (a fork copies only this one): "
                       + ", ".join(sorted(t.name for t in others)))
    own = _loop_own_fds(loop)
    sockets = [fd for fd in socket_fds() if fd not in own and fd not in before]
    if sockets:
        reasons.append("real sockets are open (a real Redis connection or a server would be "
                       f"shared with every restore): fds {sockets}")
    return reasons


# -- the caller's handle ------------------------------------------------------------------------

#: Every open snapshot of this process: a fork closes the others' pipe ends, so a zygote sees
#: end-of-file exactly when its own caller lets go.
_OPEN: list[Snapshot] = []


class Snapshot:
    """A parked world, made by `Simulation.snapshot` or `emu.snapshot_world` (not directly):
    ``snap.run(main, *, faults=None, limit=300.0)`` runs ``main(sim)`` against a fresh fork of
    it and returns its result or raises its exception (as often as wanted; each run starts from
    the same instant); `close` ends it (or ``with``; also at interpreter exit).

    ``at`` is the virtual time of the snapshot, ``seed`` the world's seed, ``digest`` its trace
    digest then, ``source`` what built it (for messages).
    """

    def __init__(self, pid: int, requests: int, answers: int, *, at: float, seed: int,
                 digest: str, source: str) -> None:
        self.pid = pid
        self._requests = requests
        self._answers = answers
        self.at = at
        self.seed = seed
        self.digest = digest
        self.source = source
        self.closed = False
        self.restores = 0
        self._owner = os.getpid()
        _OPEN.append(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"zygote pid {self.pid}"
        return f"<Snapshot of {self.source} at t={self.at:.6f}s seed={self.seed} ({state})>"

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise SnapshotError(f"{self!r} cannot be pickled: it is a live process of this one")

    def run(self, main: Callable[..., Any], *, faults: Any = None,
            limit: float = DEFAULT_RESTORE_LIMIT) -> Any:
        """``main(sim)`` run against a fresh fork of the parked world; its result, or its
        exception (with the restored run's traceback as a note). ``faults`` (a plan, times in
        the world's virtual clock) is scheduled before ``main`` starts. A run longer than
        ``limit`` wall seconds is stopped with `SnapshotError`."""
        if self.closed:
            raise SnapshotError(f"{self!r} is closed: take a new snapshot")
        if os.getpid() != self._owner:
            raise SnapshotError(f"{self!r} serves the process that took it (pid {self._owner}), "
                                f"not pid {os.getpid()}")
        payload = dumps((main, faults), "main")
        try:
            _write_frame(self._requests, pickle.dumps(("run", payload, float(limit))))
        except OSError as err:
            self._dead()
            raise SnapshotError(f"{self!r}: its zygote is gone ({err})") from err
        try:
            data = _read_frame(self._answers, time.monotonic() + limit + 30.0)
        except TimeoutError:
            self._kill()
            raise SnapshotError(f"{self!r}: its zygote did not answer within {limit + 30:g}s; "
                                "it was killed") from None
        except BaseException:  # interrupted mid-run (Ctrl-C): an answer would be left behind
            self._kill()
            raise
        if data is None:
            status = self._dead()
            raise SnapshotError(f"{self!r}: its zygote exited ({status})")
        self.restores += 1
        try:
            outcome = pickle.loads(data)
        except Exception as err:
            raise SnapshotError(f"restored run #{self.restores} from {self!r}: its result "
                                f"cannot be loaded here: {type(err).__name__}: {err}") from err
        if outcome[0] == "ok":
            return outcome[1]
        if outcome[0] == "raised":
            exc: BaseException = outcome[1]
            exc.add_note(f"restored run #{self.restores} from {self!r}")
            raise exc
        raise SnapshotError(f"restored run #{self.restores} from {self!r}: {outcome[1]}")

    def close(self) -> None:
        """End the zygote (bounded wait, then kill) and free the pipes. Idempotent."""
        if self.closed:
            return
        try:
            _write_frame(self._requests, pickle.dumps(("close",)))
        except OSError:
            pass
        self._reap(CLOSE_WAIT)

    def _kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self._reap(CLOSE_WAIT)

    def _dead(self) -> str:
        return self._reap(CLOSE_WAIT)

    def _reap(self, wait: float) -> str:
        self.closed = True
        if self in _OPEN:
            _OPEN.remove(self)
        for fd in (self._requests, self._answers):
            try:
                os.close(fd)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        status = "gone"
        while True:
            try:
                pid, code = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return status
            if pid:
                return f"wait status {code}"
            if time.monotonic() >= deadline:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
                os.waitpid(self.pid, 0)
                return "killed"
            time.sleep(0.002)

    def __del__(self) -> None:
        if not getattr(self, "closed", True) and os.getpid() == _PID[0]:
            self.close()


_PID = [os.getpid()]


@atexit.register
def _close_all() -> None:
    for snap in list(_OPEN):
        if os.getpid() == _PID[0]:
            snap.close()


# -- the forked side ----------------------------------------------------------------------------


class RestoreRequest:
    """What a restored child was asked to do: run ``main`` (after scheduling ``faults``), then
    call `finish` with the outcome. Returned by `park` in the child only."""

    def __init__(self, main: Callable[..., Any], faults: Any, answer: int, done: int) -> None:
        self.main = main
        self.faults = faults
        self._answer = answer
        self._done = done


#: In a restored child: where its outcome goes (None elsewhere).
_CHILD: list[RestoreRequest] = []


def in_restored_child() -> bool:
    """Whether this process is a restored run (its `emu.run` reports to a zygote and exits)."""
    return bool(_CHILD)


def finish(outcome: tuple[str, Any]) -> None:
    """In a restored child: send ``("ok", value)`` or ``("raised", exc)`` to the zygote and
    exit at once (the world is not torn down: the process ends). Elsewhere: nothing."""
    if not _CHILD:
        return
    restore = _CHILD[0]
    code = 0
    try:
        data = _encode(outcome)
        _write_frame(restore._answer, data)
        os.write(restore._done, _DONE)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _encode(outcome: tuple[str, Any]) -> bytes:
    kind, value = outcome
    if kind == "raised":
        exc: BaseException = value
        text = "".join(traceback.format_exception(exc)).rstrip()
        try:
            data = pickle.dumps(("raised", exc))
            pickle.loads(data)  # an exception whose __init__ does not match its args fails here
        except Exception:
            stand_in = RestoredRunError(f"{type(exc).__qualname__}: {exc}")
            for note in getattr(exc, "__notes__", []):
                stand_in.add_note(note)
            exc = stand_in
        exc.add_note("in the restored run:\n" + text)
        return pickle.dumps(("raised", exc))
    try:
        return dumps(("ok", value), "the restored run's result")
    except SnapshotError as err:
        return pickle.dumps(("error", str(err)))


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _renew_self_pipe(loop: asyncio.AbstractEventLoop) -> None:
    """Give this copy of the loop its own selector and wake-up socketpair. A forked epoll
    descriptor is the *same* kernel object as the caller's, so registering anything in it would
    reach the caller's live loop (and every other copy): this copy gets a fresh one instead,
    and only closes its own descriptors of the old ones."""
    outer = getattr(loop, "_selector", None)
    if outer is None or not hasattr(loop, "_make_self_pipe"):
        return
    real = getattr(outer, "_real", outer)
    fresh = type(real)()
    real.close()  # this process's descriptor only: the instance lives on in the others
    lp: Any = loop
    if hasattr(outer, "_real"):
        outer._real = fresh
    else:
        lp._selector = fresh
    lp._close_self_pipe()  # not in the fresh selector: only closes the sockets
    lp._make_self_pipe()


def park(loop: asyncio.AbstractEventLoop, *, at: float, seed: int, digest: str,
         source: str) -> Snapshot | RestoreRequest:
    """Fork a zygote holding this process as it is now. In the caller: its `Snapshot`. In a
    restored child (possibly much later, in wall time): the `RestoreRequest` it is to run. Must be
    called from inside a task step, with nothing awaited: the zygote blocks right here. The
    caller checks `blockers` first."""
    sys.stdout.flush()
    sys.stderr.flush()
    req_r, req_w = os.pipe()
    ans_r, ans_w = os.pipe()
    others = [fd for s in _OPEN for fd in (s._requests, s._answers)]
    pid = os.fork()
    if pid:
        os.close(req_r)
        os.close(ans_w)
        return Snapshot(pid, req_w, ans_r, at=at, seed=seed, digest=digest, source=source)
    # The zygote.
    code = 0
    try:
        _close_fds([req_w, ans_r, *others])
        for inherited in _OPEN:  # the caller's handles: their descriptor numbers get reused
            inherited.closed = True
        _OPEN.clear()
        _PID[0] = os.getpid()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
        _renew_self_pipe(loop)
        gc.freeze()  # the parked heap is shared with every child: keep the collector off it
        restore = _serve(req_r, ans_w)
        if restore is not None:
            # A restored child: its main runs in this task step, as the caller's did.
            asyncio.events._set_running_loop(loop)
            _renew_self_pipe(loop)
            return restore
    except BaseException:
        code = 1
    os._exit(code)


def _serve(requests: int, answers: int) -> RestoreRequest | None:
    """The zygote's loop: one child per run request; None when told to close (or orphaned).

    Each child is forked ahead of its request (a *spare*, blocked on its own pipe), while the
    previous one runs, so a restore does not wait for ``fork``: on two cores the copy is made
    beside the run."""
    finished: list[int] = []  # children that answered, reaped when they are gone
    spare = _fork_spare([requests], answers)
    if isinstance(spare, RestoreRequest):
        return spare  # in the spare child, once its request came
    while True:
        pid, to_child, from_child = spare
        data = _read_frame(requests)
        message: tuple[Any, ...] = pickle.loads(data) if data is not None else ("close",)
        if message[0] != "run":
            os.close(to_child)  # the spare reads end-of-file and exits
            os.close(from_child)
            for child in [*finished, pid]:
                os.waitpid(child, 0)
            return None
        _, payload, limit = message
        _write_frame(to_child, payload)
        os.close(to_child)
        # the next spare is made while this one runs (the other core's work)
        spare = _fork_spare([requests, from_child], answers)
        if isinstance(spare, RestoreRequest):
            return spare
        if _relay(pid, from_child, limit, answers):
            finished.append(pid)
        finished = [p for p in finished if os.waitpid(p, os.WNOHANG)[0] == 0]


def _fork_spare(inherited: list[int], answers: int) -> tuple[int, int, int] | RestoreRequest:
    """In the zygote: (pid, pipe to the spare, pipe from it). In the spare: its request (the
    zygote's own descriptors, ``inherited``, closed). The spare answers the caller itself on
    ``answers`` (one hand-off fewer than a relay), then tells the zygote on its own pipe."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(down_r)
        os.close(up_w)
        return pid, down_w, up_r
    _close_fds([*inherited, down_w, up_r])
    _PID[0] = os.getpid()
    payload = _read_frame(down_r)
    os.close(down_r)
    if payload is None:
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        main, faults = pickle.loads(payload)
    except BaseException as err:
        _write_frame(answers, pickle.dumps(("error", "main could not be loaded in the "
                                                     f"snapshot's process: {type(err).__name__}: "
                                                     f"{err}")))
        os.write(up_w, _DONE)
        os._exit(1)
    restore = RestoreRequest(main, faults, answers, up_w)
    _CHILD.append(restore)
    return restore


def _relay(pid: int, fd: int, limit: float, answers: int) -> bool:
    """Wait for the child to say it answered the caller; when it does not (it died, or ran past
    ``limit``), answer for it. True when it answered and is yet to be reaped (the caller need
    not wait for its address space to go)."""
    reason = ""
    ready, _, _ = select.select([fd], [], [], max(0.0, limit))
    said = os.read(fd, 1) if ready else b""
    os.close(fd)
    if said == _DONE:
        return True
    if not ready:
        os.kill(pid, signal.SIGKILL)
        reason = (f"it exceeded its wall-clock limit of {limit:g}s and was killed (virtual time "
                  "stopped advancing, or the run is that long: raise limit=)")
    _, status = os.waitpid(pid, 0)
    _write_frame(answers, pickle.dumps(("error", reason or "the restored run's process died "
                                        f"(wait status {status}) before sending a result")))
    return False
