"""World snapshot and restore, orchestrated: `Simulation.snapshot` and `snapshot_world`.

The kernel (`emu.kernel.snapshot`) parks a forked copy of the process and forks restores from it;
this module decides *when* that copy is a copy of the world, adding what the layers above the
kernel know: an open RocksDB GCS store or files in the run's work directory live on disk, where a
fork does not copy them, so every restore would share (and corrupt) them.

A snapshot is taken at the *end* of the current virtual instant: `take` first lets every task that
is runnable now run until it waits for time or a message, so the parked world is the state at
``t`` with no half-done step in it (``settle=False`` forks at once, inside the step, as the
explorer's fork server does). A restored ``main`` runs in the very task step the snapshot call
returned in, so it continues the world exactly as the snapshotting ``main``'s own continuation
does: the same trace digest.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .kernel import snapshot as _kernel
from .kernel.snapshot import NotQuiescent, RestoredRunError, Snapshot, SnapshotError

if TYPE_CHECKING:
    from .simulation import Simulation

__all__ = ["NotQuiescent", "Restored", "RestoredRunError", "Snapshot", "SnapshotError",
           "snapshot_world"]

T = TypeVar("T")

#: Loop iterations `take` allows the current instant to settle in before giving up.
SETTLE_ROUNDS = 100_000


class Restored(BaseException):
    """Raised by `Simulation.snapshot` in a restored child once the restored ``main`` returned:
    it carries the result past the snapshotting ``main``'s own continuation to `emu.run`, which
    ends the run with it. A BaseException so ordinary ``except Exception`` code lets it pass."""

    def __init__(self, value: Any) -> None:
        super().__init__("restored run finished")
        self.value = value


def _runnable_now(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether some callback can still run at this virtual instant (other than the caller)."""
    if getattr(loop, "_ready", None):
        return True
    now = loop.time()
    scheduled = getattr(loop, "_scheduled", [])
    if scheduled and scheduled[0].when() <= now:
        return any(not h.cancelled() and h.when() <= now for h in scheduled)
    return False


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """Yield until nothing else can run at this instant (the clock does not move meanwhile)."""
    start = loop.time()
    for _ in range(SETTLE_ROUNDS):
        if not _runnable_now(loop):
            return
        await asyncio.sleep(0)
        if loop.time() != start:  # cannot happen while something is ready; kept honest
            break
    raise NotQuiescent([f"the instant t={start:.6f}s never ends: tasks kept each other runnable "
                        f"for {SETTLE_ROUNDS} loop iterations (a busy loop without a sleep)"])


def layer_blockers(sim: Simulation) -> list[str]:
    """What the layers above the kernel hold outside the process's memory."""
    reasons = []
    rocks = sys.modules.get("emu.backends.rocksdb")
    holders = dict(getattr(rocks, "_HOLDERS", {}) or {})
    if holders:
        shown = ", ".join(f"{path} ({who})" for path, who in sorted(holders.items()))
        reasons.append("RocksDB GCS storage is open on disk, which a fork does not copy (every "
                       f"restore would write the same files): {shown}")
    workdir: Path | None = getattr(sim, "_workdir", None)
    if workdir is None:
        return reasons
    files = [Path(root, name) for root, _, names in os.walk(workdir) for name in names]
    if files:
        shown = ", ".join(str(f.relative_to(workdir)) for f in sorted(files)[:3])
        reasons.append(f"the run's work directory {workdir} holds files ({shown}"
                       f"{', ...' if len(files) > 3 else ''}), which a fork does not copy: "
                       "every restore would share them")
    return reasons


def _tree(sim: Simulation) -> list[str]:
    """The work directory's folders (it holds no files when a snapshot is taken)."""
    workdir = getattr(sim, "_workdir", None)
    if workdir is None or not workdir.exists():
        return []
    return sorted(os.path.relpath(root, workdir) for root, _, _ in os.walk(workdir))


def _own_workdir(sim: Simulation, tree: list[str]) -> None:
    """In a restored child: its own copy of the work directory's folders, removed when the
    restored run ends (the snapshot's is the caller's, and may already be gone)."""
    if getattr(sim, "_workdir", None) is None:
        return
    fresh = Path(tempfile.mkdtemp(prefix="emu-restored-"))
    for rel in tree:
        (fresh / rel).mkdir(parents=True, exist_ok=True)
    sim._workdir = fresh
    sim._own_workdir = True


async def take(sim: Simulation, *, settle: bool = True) -> Snapshot:
    """`Simulation.snapshot`'s body; in a restored child it runs the restored ``main`` instead
    of returning (see `Restored`)."""
    loop = sim.loop
    if asyncio.current_task() is None:
        raise SnapshotError("sim.snapshot() must be awaited from a task of the world's loop")
    if settle and sim.virtual:  # on the wall clock the instant never ends (refused below)
        await _settle(loop)
    before = getattr(sim, "_sockets_at_start", ())
    reasons = _kernel.blockers(loop, sockets_before=before) + layer_blockers(sim)
    if reasons:
        raise NotQuiescent(reasons)
    tree = _tree(sim)
    got = _kernel.park(loop, at=sim.now, seed=sim.seed, digest=sim.trace.digest(),
                       source=getattr(sim, "_source", "a world"))
    if isinstance(got, Snapshot):
        return got
    # A restored child: the restored main continues the world from here.
    under_run = getattr(sim, "_under_run", False)
    try:
        _own_workdir(sim, tree)
        if got.faults:
            from .faults import FaultPlan

            plan = got.faults if isinstance(got.faults, FaultPlan) else FaultPlan(got.faults)
            sim.faults.schedule(plan)
        value = await got.main(sim)
    except BaseException as exc:
        if not under_run:
            _kernel.finish(("raised", exc))
        raise
    if not under_run:
        _kernel.finish(("ok", value))
    raise Restored(value)


def snapshot_world(prepare: Callable[[Simulation], Awaitable[Any]], seed: int = 0,
                   **options: Any) -> Snapshot:
    """Build a world once — ``prepare(sim)`` in `emu.run` with ``seed`` and ``options`` — and
    park it: the `Snapshot` runs any number of mains from the instant ``prepare`` returned
    (``snap.run(main)`` or ``emu.run(main, restore=snap)``). Close it when done (``with``)."""
    from .simulation import run

    async def main(sim: Simulation) -> Snapshot:
        await prepare(sim)
        sim._source = getattr(prepare, "__qualname__", repr(prepare))  # type: ignore[attr-defined]
        return await sim.snapshot()

    return run(main, seed=seed, **options)


def restore_run(snap: Snapshot, main: Callable[[Simulation], Awaitable[T]], *, seed: int | None,
                faults: Any, options: dict[str, Any]) -> T:
    """`emu.run(main, restore=snap)`: checks that nothing asks for a different world."""
    if not isinstance(snap, Snapshot):
        raise TypeError(f"restore= takes a Snapshot (from sim.snapshot() or "
                        f"emu.snapshot_world), not {type(snap).__name__}")
    if options or (seed is not None and seed != snap.seed):
        given = sorted(options) + (["seed"] if seed is not None and seed != snap.seed else [])
        raise ValueError(f"a restored run continues the snapshot's world (seed {snap.seed} and "
                         f"its options): drop {', '.join(given)} from emu.run(..., restore=...)")
    result: T = snap.run(main, faults=faults)
    return result

