"""The real operator binary as processes of the world (`emu.http.real_replicas`): the world's
faults reach the OS processes. A crash is a SIGKILL and a restart as a new OS process; a pause is
SIGSTOP then SIGCONT; two replicas elect a leader on the world's Lease and ``CrashLeader`` kills
the one that holds it; an API outage makes the operator's requests fail (it loses its Lease and
exits, and is restarted as a Pod's container would be).

Each test runs a world in this process on a wall-clock-paced loop (the binary keeps wall time);
every OS process is killed by its pid at the end, also when the test fails."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from emu.explore.faults import CrashLeader
from emu.faults import Crash, Outage, Pause
from emu.http.real_operator import binary_version, kube_config, prepare_world
from emu.http.real_replicas import RealReplicas
from emu.kernel.paced import PacedLoop, real_now_as_virtual
from emu.simulation import Simulation

pytestmark = pytest.mark.external


def _state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``T``: stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def _until(what: str, cond: Callable[[], Any], timeout: float, real: RealReplicas) -> Any:
    """Poll ``cond`` (every 0.1 s, bounded by ``timeout`` paced seconds) until it is truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = cond()
        if got:
            return got
        if loop.time() >= deadline:
            tails = "\n".join(f"--- {r.name}:\n{r.operator.log_tail(8) if r.operator else ''}"
                              for r in real.replicas)
            raise AssertionError(f"{what}: not within {timeout:g} s\n{tails}")
        await asyncio.sleep(0.1)


def _run(binary: Path, tmp: Path, replicas: int,
         body: Callable[[Simulation, RealReplicas], Awaitable[None]]) -> None:
    async def main() -> None:
        sim = Simulation(seed=1, cluster=kube_config())
        real = RealReplicas(sim, binary, replicas=replicas, log_dir=tmp)
        try:
            await prepare_world(sim, version=binary_version(binary))
            await real.start()
            await real.wait_started(60)
            await _until("a replica leads", real.leader, 60, real)
            await body(sim, real)
        finally:
            await real.stop()
            sim.close()
        for replica in real.replicas:
            for pid in replica.pids:
                assert _gone(pid), f"{replica.name}'s pid {pid} still runs"

    loop = PacedLoop(speed=1.0, start=real_now_as_virtual())
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        runner.run(asyncio.wait_for(main(), 180))


def test_crash_kills_the_os_process_and_restarts_it(kuberay_binary: Path, tmp_path: Path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        first = replica.pid
        assert first is not None and not _gone(first)
        sim.faults.do(Crash(process=replica.process))
        assert _gone(first)  # SIGKILLed and reaped at once
        assert not sim.processes.get(replica.process).alive
        await _until("restarted", lambda: replica.pid != first and replica.pid, 10, real)
        assert sim.processes.get(replica.process).incarnation == 2
        await real.wait_started(60)
        assert replica.pids == [first, replica.pid]

    _run(kuberay_binary, tmp_path, 1, body)


def test_pause_stops_the_os_process_until_resumed(kuberay_binary: Path, tmp_path: Path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        pid = replica.pid
        assert pid is not None and _state(pid) != "T"
        sim.faults.do(Pause(process=replica.process, duration=2.0))
        await _until("stopped", lambda: _state(pid) == "T", 1, real)
        await asyncio.sleep(1.0)
        assert _state(pid) == "T"
        await _until("continued", lambda: _state(pid) != "T", 3, real)
        assert replica.pids == [pid]  # the same process, not a restart

    _run(kuberay_binary, tmp_path, 1, body)


def test_two_replicas_elect_a_leader_and_crash_leader_kills_it(kuberay_binary: Path,
                                                                 tmp_path: Path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        leader = real.leader()
        assert leader is not None
        other = next(r for r in real.replicas if r.name != leader)
        old_pid = real.replica(leader).pid
        assert old_pid is not None
        old_holder = real.lease_holder()
        assert old_holder is not None
        sim.faults.do(CrashLeader())
        assert _gone(old_pid)
        assert sim.processes.get(other.process).alive
        # A new identity takes the Lease once it expires (15 s, controller-runtime's): the other
        # replica, or the crashed one restarted (a new process with a new identity) when its retry
        # comes first; both are candidates, as with two real Pods.
        def new_leader() -> str | None:
            holder = real.lease_holder()
            return real.leader() if holder not in (None, old_holder) else None

        winner = await _until("a new leader", new_leader, 40, real)
        assert real.replica(leader).pid not in (None, old_pid)  # the crashed one was restarted
        assert real.replica(winner).pid != old_pid
        holder = real.lease_holder()
        assert holder is not None
        winning = real.replica(winner)
        assert sim.processes.get(winning.process).host == holder.rsplit("_", 1)[0]

        # from its log: the binary writes the line after its Lease write, and the line reaches
        # the trace at the next look at the log (a loaded machine can take a while)
        def leadership() -> list[tuple[str, str]]:
            return [(e.process, e.event) for e in sim.trace.events
                    if e.event in ("leader_acquired", "leader_lost")]

        await _until("the winner's leader_acquired from its log",
                     lambda: (winning.process, "leader_acquired") in leadership(), 30, real)
        assert leadership()[-1] == (winning.process, "leader_acquired"), leadership()

    _run(kuberay_binary, tmp_path, 2, body)


def test_an_api_outage_fails_its_requests(kuberay_binary: Path, tmp_path: Path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        pid = replica.pid
        sim.faults.do(Outage(endpoint="apiserver", duration=14.0))
        # it cannot renew its Lease (renew deadline 10 s), so it exits; then it is restarted
        await _until("exited on the lost Lease", lambda: replica.pid != pid, 20, real)
        log = replica.log_path.read_text(errors="replace")
        assert "leader election lost" in log or "failed to renew lease" in log, log[-2000:]
        lost = [e for e in sim.trace.events if e.event == "leader_lost"]
        assert [e.process for e in lost] == [replica.process]
        await _until("leads again", real.leader, 30, real)

    _run(kuberay_binary, tmp_path, 1, body)


def test_an_article_scenario_runs_with_the_real_operator(kuberay_binary: Path):
    """``emu run worker-loss --operator real``: the same expectations hold with KubeRay's own
    code replacing the lost worker Pod."""
    from emu.http.real_replicas import real_operator_options
    from emu.scenarios import get, run_scenario

    result = run_scenario("worker-loss", 0,
                          **real_operator_options(kuberay_binary, get("worker-loss").options))
    assert result.ok, [(e.claim, e.detail) for e in result.expectations if not e.ok]
    assert len(result.expectations) == 5
    real = result.sim.real_kuberay
    assert real is not None and real.version == binary_version(kuberay_binary)
    for replica in real.replicas:  # stopped at the end of the run
        assert replica.pids and all(_gone(pid) for pid in replica.pids)
    assert not any(proc.alive for proc in result.sim.processes.all())
