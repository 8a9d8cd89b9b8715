"""World snapshots (emu.kernel.snapshot, emu.snapshots) on a bare world: a restore continues the
world exactly, restores are independent, every refusal says why and changes nothing, and no
zygote outlives its caller. The KubeRay world is in tests/client/test_snapshot_kuberay.py."""

from __future__ import annotations

import asyncio
import functools
import os
import select
import socket
import threading
from typing import Any

import pytest

import emu
from emu import snapshots
from emu.kernel import snapshot as kernel_snapshot

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "base", "namespace": "default"},
      "data": {"n": "0"}}


async def ticker(sim: emu.Simulation, process: Any) -> None:
    """A process with state only in its coroutine: counts in a ConfigMap every 2 s."""
    client = sim.client(process=process)
    n = 0
    while True:
        await asyncio.sleep(2.0)
        n += 1
        cur = await client.get("ConfigMap", "base", "default")
        cur["data"]["n"] = str(n)
        await client.update(cur)


async def prepare(sim: emu.Simulation) -> None:
    await sim.apply(dict(CM))
    sim.start_process("ticker", functools.partial(ticker, sim))
    await sim.sleep(5.0)


async def continuation(sim: emu.Simulation) -> tuple[float, str, str]:
    await sim.sleep(7.0)
    cm = await sim.get("ConfigMap", "base")
    assert cm is not None
    return sim.now, cm["data"]["n"], sim.trace.digest()


async def prepare_and_snapshot(sim: emu.Simulation) -> tuple[emu.Snapshot, Any]:
    await prepare(sim)
    snap = await sim.snapshot()
    return snap, await continuation(sim)


async def create_extra(sim: emu.Simulation) -> list[str]:
    await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "extra", "namespace": "default"}})
    return names(sim)


async def list_names(sim: emu.Simulation) -> list[str]:
    return names(sim)


def names(sim: emu.Simulation) -> list[str]:
    return sorted(o["metadata"]["name"] for o in sim.api.list("ConfigMap", "default")["items"])


async def return_lambda(sim: emu.Simulation) -> Any:
    return lambda: None


class Picky(Exception):
    def __init__(self, *, code: int) -> None:
        super().__init__(f"picky {code}")


async def raise_value_error(sim: emu.Simulation) -> None:
    await sim.sleep(1.0)
    raise ValueError(f"boom at {sim.now}")


async def raise_picky(sim: emu.Simulation) -> None:
    raise Picky(code=3)


async def spin(sim: emu.Simulation) -> None:
    while True:  # virtual time never moves: only the wall-clock limit ends this
        await asyncio.sleep(0)


async def crashed_ticker(sim: emu.Simulation) -> list[str]:
    await sim.sleep(10.0)
    return [repr(f) for f in sim.faults.performed()]


def zygote_alive(snap: emu.Snapshot) -> bool:
    try:
        pid, _ = os.waitpid(snap.pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return pid == 0


@pytest.fixture(scope="module")
def snap() -> Any:
    with emu.snapshot_world(prepare, seed=3) as made:
        yield made


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_restored_run_has_the_uninterrupted_runs_digest(seed: int) -> None:
    snap, direct = emu.run(prepare_and_snapshot, seed=seed)
    with snap:
        assert snap.at == 5.0 and snap.seed == seed
        assert snap.run(continuation) == direct
        assert emu.run(continuation, restore=snap) == direct
        assert direct[1] == "5"  # the ticker's count, kept in its coroutine, went on


def test_restores_are_independent(snap: emu.Snapshot) -> None:
    assert snap.run(create_extra) == ["base", "extra"]
    assert snap.run(list_names) == ["base"]
    first = snap.run(continuation)
    assert [snap.run(continuation) for _ in range(3)] == [first] * 3


def test_a_restored_exception_comes_back_with_its_type_and_notes(snap: emu.Snapshot) -> None:
    with pytest.raises(ValueError, match="boom at 6.0") as info:
        snap.run(raise_value_error)
    notes = "\n".join(info.value.__notes__)
    assert "in the restored run:" in notes and "raise_value_error" in notes
    assert "restored run #" in notes and "replay:" not in notes
    assert snap.run(list_names) == ["base"]  # the snapshot is still there


def test_an_exception_that_does_not_pickle_comes_back_as_restored_run_error(
        snap: emu.Snapshot) -> None:
    with pytest.raises(emu.RestoredRunError, match="Picky: picky 3"):
        snap.run(raise_picky)


def test_a_main_that_cannot_be_sent_is_refused_and_changes_nothing(snap: emu.Snapshot) -> None:
    async def local(sim: emu.Simulation) -> None:
        return None

    restores = snap.restores
    with pytest.raises(emu.SnapshotError, match="define it at module level"):
        snap.run(local)
    assert snap.restores == restores
    assert snap.run(list_names) == ["base"]


def test_a_result_that_cannot_be_sent_is_an_error(snap: emu.Snapshot) -> None:
    with pytest.raises(emu.SnapshotError, match="result cannot be sent"):
        snap.run(return_lambda)
    assert snap.run(list_names) == ["base"]


def test_a_restore_past_its_wall_limit_is_killed_and_reported(snap: emu.Snapshot) -> None:
    with pytest.raises(emu.SnapshotError, match="wall-clock limit of 0.3s"):
        snap.run(spin, limit=0.3)
    assert snap.run(list_names) == ["base"]


def test_faults_of_a_restored_run_run_on_the_snapshots_clock(snap: emu.Snapshot) -> None:
    performed = snap.run(crashed_ticker, faults=[emu.Crash(at=8.0, process="ticker")])
    assert len(performed) == 1 and "ticker" in performed[0] and "at=8.0" in performed[0]


def test_restore_refuses_other_world_options(snap: emu.Snapshot) -> None:
    with pytest.raises(ValueError, match="drop cluster"):
        emu.run(list_names, restore=snap, cluster=True)
    with pytest.raises(ValueError, match="drop seed"):
        emu.run(list_names, seed=4, restore=snap)
    with pytest.raises(TypeError, match="takes a Snapshot"):
        emu.run(list_names, restore="nope")
    with pytest.raises(emu.SnapshotError, match="cannot be pickled"):
        import pickle

        pickle.dumps(snap)


def test_close_ends_the_zygote() -> None:
    made = emu.snapshot_world(prepare, seed=1)
    assert zygote_alive(made)
    made.close()
    assert made.closed and not zygote_alive(made)
    made.close()  # idempotent
    with pytest.raises(emu.SnapshotError, match="is closed"):
        made.run(list_names)


def _orphan_zygote(keep_w: int) -> None:
    """In a forked helper: take a snapshot, never close it, exit (as a crashed caller would)."""
    made = emu.snapshot_world(prepare, seed=1)
    os.write(keep_w, str(made.pid).encode())
    os._exit(0)


def test_a_zygote_ends_when_its_caller_dies() -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _orphan_zygote(w)
        finally:
            os._exit(1)
    os.close(w)
    os.waitpid(pid, 0)
    # The zygote inherited the pipe's write end: end-of-file here means it has exited.
    chunks = []
    while True:
        ready, _, _ = select.select([r], [], [], 10.0)
        assert ready, "the orphaned zygote did not exit within 10 s"
        chunk = os.read(r, 64)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    assert int(b"".join(chunks)) > 0


async def snapshot_with_thread(sim: emu.Simulation) -> str:
    done = threading.Event()
    thread = threading.Thread(target=done.wait, name="stray-worker")
    thread.start()
    try:
        await sim.snapshot()
    except emu.NotQuiescent as exc:
        return str(exc)
    finally:
        done.set()
        thread.join()
    return ""


async def snapshot_with_socket(sim: emu.Simulation) -> str:
    a, b = socket.socketpair()
    try:
        await sim.snapshot()
    except emu.NotQuiescent as exc:
        return str(exc)
    finally:
        a.close()
        b.close()
    return ""


async def snapshot_with_files(sim: emu.Simulation) -> str:
    (sim.workdir / "volume.bin").write_bytes(b"x")
    try:
        await sim.snapshot()
    except emu.NotQuiescent as exc:
        return str(exc)
    return ""


async def snapshot_busy(sim: emu.Simulation) -> str:
    async def busy() -> None:
        while True:
            await asyncio.sleep(0)

    task = asyncio.ensure_future(busy())
    try:
        await sim.snapshot()
    except emu.NotQuiescent as exc:
        return str(exc)
    finally:
        task.cancel()
    return ""


def test_not_quiescent_names_what_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "other threads are alive" in emu.run(snapshot_with_thread)
    assert "stray-worker" in emu.run(snapshot_with_thread)
    assert "real sockets are open" in emu.run(snapshot_with_socket)
    assert "work directory" in emu.run(snapshot_with_files)
    monkeypatch.setattr(snapshots, "SETTLE_ROUNDS", 200)
    assert "never ends" in emu.run(snapshot_busy)


def test_wall_clock_worlds_and_forkless_platforms_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def just_snapshot(sim: emu.Simulation) -> None:
        await sim.snapshot()

    with pytest.raises(emu.NotQuiescent, match="wall clock"):
        emu.run(just_snapshot, wall_clock=True)
    monkeypatch.delattr(os, "fork")
    assert "has no os.fork" in kernel_snapshot.blockers(asyncio.new_event_loop())[0]


async def settle_then_snapshot(sim: emu.Simulation) -> tuple[emu.Snapshot, list[str]]:
    seen: list[str] = []
    sim.loop.call_soon(seen.append, "ready-before")
    snap = await sim.snapshot()
    return snap, seen


def test_a_snapshot_lets_the_instant_finish_first() -> None:
    snap, seen = emu.run(settle_then_snapshot)
    with snap:
        assert seen == ["ready-before"] and snap.at == 0.0


def test_sockets_open_before_the_world_began_are_not_its_own() -> None:
    a, b = socket.socketpair()  # another test's leftovers, say
    try:
        snap, _ = emu.run(settle_then_snapshot)
        with snap:
            assert snap.run(list_names) == []
    finally:
        a.close()
        b.close()


async def two_snapshots(sim: emu.Simulation) -> tuple[emu.Snapshot, emu.Snapshot]:
    await prepare(sim)
    early = await sim.snapshot()
    await sim.sleep(4.0)
    return early, await sim.snapshot()


async def count(sim: emu.Simulation) -> tuple[float, str]:
    cm = await sim.get("ConfigMap", "base")
    assert cm is not None
    return sim.now, cm["data"]["n"]


def test_two_snapshots_of_one_run_are_two_instants() -> None:
    early, late = emu.run(two_snapshots, seed=5)
    with early, late:
        assert early.run(count) == (5.0, "2")
        assert late.run(count) == (9.0, "4")
        late.close()  # one zygote's end leaves the other serving
        assert early.run(count) == (5.0, "2")


async def at_a_busy_instant(sim: emu.Simulation) -> None:
    await prepare(sim)
    sim.loop.call_soon(sim.log, "runnable at this instant")


async def logged_continuation(sim: emu.Simulation) -> Any:
    sim.log("continued")  # before or after the runnable callback: the digest tells
    return await continuation(sim)


async def fresh_without_snapshot(sim: emu.Simulation) -> Any:
    await at_a_busy_instant(sim)
    return await logged_continuation(sim)


async def settled_snapshot(sim: emu.Simulation) -> tuple[emu.Snapshot, Any]:
    await at_a_busy_instant(sim)
    snap = await sim.snapshot()
    return snap, await logged_continuation(sim)


async def snapshot_in_the_step(sim: emu.Simulation) -> emu.Snapshot:
    await at_a_busy_instant(sim)
    return await sim.snapshot(settle=False)


def test_settle_false_forks_inside_the_step_leaving_the_schedule_alone() -> None:
    """The explorer's way: a run that never snapshots equals a restore of one that did."""
    fresh = emu.run(fresh_without_snapshot, seed=4)
    with emu.run(snapshot_in_the_step, seed=4) as snap:
        assert snap.at == 5.0
        assert snap.run(logged_continuation) == fresh
    settled, direct = emu.run(settled_snapshot, seed=4)
    with settled:  # settling ran the callback first: another history, continued exactly
        assert settled.run(logged_continuation) == direct != fresh


def test_a_snapshot_serves_only_the_process_that_took_it(snap: emu.Snapshot) -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a forked copy of the caller holds the handle too, but may not use it
        try:
            snap.run(list_names)
            os.write(w, b"ran")
        except emu.SnapshotError as exc:
            os.write(w, str(exc).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    said = os.read(r, 4096).decode()
    os.close(r)
    assert "serves the process that took it" in said
    assert snap.run(list_names) == ["base"]
