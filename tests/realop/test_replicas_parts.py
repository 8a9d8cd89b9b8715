"""The parts of `emu.http.real_replicas` and of the real-operator runs that need no Go: a stand-in
script plays the binary (it opens the probe port it is given and waits). Crash, restart, pause
and the kubelet-like restart of a binary that exits; the leader found from the replicas' own
Lease writes; the command line's checks; the differential table's rows."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

import emu
from emu.cli import main
from emu.differential import differential_row
from emu.explore.faults import CrashLeader
from emu.faults import Crash, Pause, Restart
from emu.http.real_operator import RealOperatorError, kube_config
from emu.http.real_replicas import LEASE_NAME, RealReplicas, install_real, real_operator_options
from emu.kernel.paced import PacedLoop, real_now_as_virtual
from emu.scenarios import Expectation
from emu.simulation import Simulation


def _stand_in(tmp_path: Path, *, exit_after: float | None = None) -> Path:
    """A stand-in for the binary: opens the probe port it is given, then waits to be killed (or
    exits with status 1 after ``exit_after`` seconds)."""
    path = tmp_path / "stand-in-operator"
    ending = "signal.pause()" if exit_after is None else f"time.sleep({exit_after})\nsys.exit(1)"
    path.write_text(f"""#!{sys.executable}
import signal, socket, sys, time
probe = next(a for a in sys.argv if a.startswith("--health-probe-bind-address="))
host, port = probe.split("=", 1)[1].rsplit(":", 1)
s = socket.socket()
s.bind((host, int(port)))
s.listen()
{ending}
""")
    path.chmod(0o755)
    return path


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def _until(cond, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "not within the time"
        await asyncio.sleep(0.05)


def _run(script: Path, tmp: Path, replicas: int, body, **kw) -> RealReplicas:
    box: dict[str, RealReplicas] = {}

    async def main_() -> None:
        sim = Simulation(seed=1)
        real = box["real"] = RealReplicas(sim, script, replicas=replicas, log_dir=tmp, **kw)
        try:
            await real.start()
            await real.wait_started(30)
            await body(sim, real)
        finally:
            await real.stop()
            sim.close()

    loop = PacedLoop(speed=1.0, start=real_now_as_virtual())
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        runner.run(asyncio.wait_for(main_(), 60))
    for replica in box["real"].replicas:
        for pid in replica.pids:
            assert _gone(pid), f"{replica.name}: pid {pid} still runs"
    return box["real"]


def test_crash_is_sigkill_then_a_restart_as_a_new_os_process(tmp_path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        first = replica.pid
        assert first is not None
        sim.faults.do(Crash(process=replica.process))
        assert _gone(first)  # killed and reaped within the crash itself
        await _until(lambda: replica.pid not in (None, first), 3)  # restart_delay 0.2 s
        assert sim.processes.get(replica.process).incarnation == 2
        sim.faults.do(Restart(process=replica.process))  # crash + start at once
        third = replica.pid
        await _until(lambda: replica.pid not in (None, third), 3)
        await asyncio.sleep(0.5)  # the crash's own delayed restart finds it running
        assert len(replica.pids) == 3
        assert sim.processes.get(replica.process).incarnation == 3

    _run(_stand_in(tmp_path), tmp_path, 1, body, restart_delay=0.2)


def test_pause_is_sigstop_and_resume_is_sigcont(tmp_path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        pid = real.replicas[0].pid
        assert pid is not None
        sim.faults.do(Pause(process=real.replicas[0].process, duration=0.6))
        await _until(lambda: _state(pid) == "T", 0.5)
        await _until(lambda: _state(pid) != "T", 1.5)
        assert real.replicas[0].pids == [pid]

    _run(_stand_in(tmp_path), tmp_path, 1, body)


def test_a_binary_that_exits_is_restarted_with_a_doubling_back_off(tmp_path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        await _until(lambda: len(replica.pids) >= 3, 60)
        proc = sim.processes.get(replica.process)
        assert proc.incarnation == 3 and replica.restarts == 2
        # The back-off is the time from a world process's end to its next start: 0.5 s, then
        # 1 s (a timer that fires up to 0.5 s late on a loaded machine still tells them apart).
        # Not from one binary start to the next, which adds how long the binary took to start
        # and run: that is what took longer than the test allowed in a run under load.
        mine = [e for e in sim.trace.events if e.process == replica.process
                and e.event in ("process_started", "process_exited", "process_crashed")]
        back_offs = [b.t - a.t for a, b in itertools.pairwise(mine)
                     if a.event != "process_started" and b.event == "process_started"]
        assert len(back_offs) >= 2, mine
        assert 0.5 <= back_offs[0] < 1.0 <= back_offs[1] < 2.0, back_offs

    _run(_stand_in(tmp_path, exit_after=0.3), tmp_path, 1, body, restart_delay=0.5)


def test_the_leader_is_the_replica_that_wrote_the_holder(tmp_path):
    """What the binary's leader election writes, sent here through each replica's endpoint:
    the replica whose write made the holder leads, its process takes the holder's hostname (so
    CrashLeader finds it), and CrashLeader kills its OS process."""

    async def body(sim: Simulation, real: RealReplicas) -> None:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": LEASE_NAME, "namespace": "default"},
                 "spec": {"holderIdentity": "machine_1234", "leaseDurationSeconds": 15}}
        path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
        assert real.leader() is None
        async with httpx.AsyncClient(base_url=real.replicas[1].server.url) as client:
            made = await client.post(path, json=lease)
            assert made.status_code == 201, made.text
        assert real.leader() == "kuberay-operator-1"
        op0, op1 = (r.process for r in real.replicas)
        assert op0 == "default/kuberay-operator-0/kuberay-operator"
        assert sim.processes.get(op1).host == "machine"
        assert sim.processes.get(op0).host == "kuberay-operator-0"
        async with httpx.AsyncClient(base_url=real.replicas[0].server.url) as client:
            current = (await client.get(f"{path}/{LEASE_NAME}")).json()
            current["spec"]["holderIdentity"] = "machine_5678"
            assert (await client.put(f"{path}/{LEASE_NAME}", json=current)).status_code == 200
        assert real.leader() == "kuberay-operator-0"
        assert sim.processes.get(op1).host == "kuberay-operator-1"
        pid = real.replicas[0].pid
        assert pid is not None
        sim.faults.do(CrashLeader())
        assert _gone(pid) and real.replicas[1].pid is not None
        assert not _gone(real.replicas[1].pid)
        assert real.leader() is None  # the crashed writer holds nothing any more

    _run(_stand_in(tmp_path), tmp_path, 2, body)


def test_the_real_operator_needs_a_paced_world(tmp_path):
    script = _stand_in(tmp_path)

    async def body(sim: Simulation) -> None:
        with pytest.raises(RealOperatorError, match="paced loop"):
            await install_real(sim, script)
        with pytest.raises(RealOperatorError, match="paced loop"):  # through its installer
            await sim.install_kuberay(replicas=2)

    options = real_operator_options(script)
    assert options.pop("paced") is True
    emu.run(body, seed=0, **options)


def test_real_operator_options_add_the_endpoints_controller_to_a_scenarios_cluster(tmp_path):
    from emu.scenarios import get

    cluster = get("worker-loss").options["cluster"]
    options = real_operator_options(tmp_path / "op", get("worker-loss").options)
    assert options["cluster"].controllers == (*cluster.controllers, "endpoints")
    assert options["cluster"].nodes == cluster.nodes
    assert real_operator_options(tmp_path / "op")["cluster"] == kube_config()


def test_replicas_and_restart_delay_are_checked(tmp_path):
    with pytest.raises(ValueError, match="replicas must be at least 1, got 0"):
        RealReplicas(None, tmp_path / "x", replicas=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="restart_delay must be 0 or more seconds, got -1"):
        RealReplicas(None, tmp_path / "x", restart_delay=-1)  # type: ignore[arg-type]


def test_run_and_differential_command_line_checks(tmp_path, capsys):
    binary = tmp_path / "op"
    binary.write_text("#!/bin/sh\n")
    assert main(["run", "worker-loss", "--operator", "real"]) == 2
    assert "--operator real needs --kuberay-binary PATH" in capsys.readouterr().err
    assert main(["run", "worker-loss", "--kuberay-binary", str(binary)]) == 2
    assert "--kuberay-binary needs --operator real" in capsys.readouterr().err
    assert main(["run", "worker-loss", "--operator", "real", "--kuberay-binary",
                 str(binary)]) == 2
    assert "not an executable file" in capsys.readouterr().err
    assert main(["differential", "--kuberay-binary", str(binary)]) == 2
    assert "not an executable file" in capsys.readouterr().err
    binary.chmod(0o755)
    assert main(["differential", "--kuberay-binary", str(binary), "no-such"]) == 2
    assert "no scenario named 'no-such'" in capsys.readouterr().err


def test_a_differential_row_names_each_expectation_that_differs():
    class Result:
        def __init__(self, ok: bool, *exps: Expectation) -> None:
            self.ok, self.expectations = ok, exps

    port = Result(True, Expectation("a", True), Expectation("b", True), Expectation("c", True))
    real = Result(False, Expectation("a", True), Expectation("b", False, "took 40 s"))
    row = differential_row("s", port, real)
    assert row == {"scenario": "s", "port": "ok 3/3", "real": "FAIL 1/2",
                   "differs": "b: fails (took 40 s); c: not reached"}
    row = differential_row("s", port, "error: TimeoutError: x")
    assert row["real"] == "error: TimeoutError: x" and row["differs"] == "error: TimeoutError: x"
    assert differential_row("s", port, port)["differs"] == ""


def test_stop_leaves_no_process(tmp_path):
    async def body(sim: Simulation, real: RealReplicas) -> None:
        os.kill(real.replicas[0].pid or 0, signal.SIGSTOP)  # even a stopped one dies of it

    _run(_stand_in(tmp_path), tmp_path, 2, body)


def test_what_the_binary_wrote_just_before_it_exited_reaches_the_trace(tmp_path, monkeypatch):
    """The log is read every 50 ms; a line written after the last look, just before the binary
    exits (controller-runtime's "leader election lost" is its last line), is still recorded."""
    import emu.http.real_replicas as rr

    class LastWords(rr.RealOperator):
        told = False

        @property
        def returncode(self) -> int | None:
            code = super().returncode
            if code is not None and not self.told:  # the line lands between two looks
                self.told = True
                assert self.log_path is not None
                with open(self.log_path, "a") as log:
                    log.write('{"msg":"leader election lost"}\n')
            return code

    monkeypatch.setattr(rr, "RealOperator", LastWords)

    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        await _until(lambda: len(replica.pids) >= 2, 60)
        lost = [e.process for e in sim.trace.events if e.event == "leader_lost"]
        assert lost[:1] == [replica.process], lost

    _run(_stand_in(tmp_path, exit_after=0.3), tmp_path, 1, body, restart_delay=0.2)


def _line(logger: str, rid: str, msg: str, **fields: object) -> str:
    import json

    kind = logger.removeprefix("controllers.")
    return json.dumps({"level": "info", "logger": logger, "msg": msg,
                       kind: {"name": "demo", "namespace": "default"}, "reconcileID": rid,
                       **fields})


def _talker(tmp_path: Path, lines: list[str], *, post_after: bool = False) -> Path:
    """A stand-in that, once the file ``go`` exists beside it, prints ``lines`` (its stdout is
    the replica's log) and, with ``post_after``, at once creates a ConfigMap through the API its
    KUBECONFIG names."""
    path = tmp_path / "talking-operator"
    go = tmp_path / "go"
    # everything prepared before the lines, so that the request follows them within a
    # millisecond or two, well before the replica's next 50 ms look at its log
    prepare = """
import json, os, re, urllib.request
server = re.search(r"server: (\\S+)", open(os.environ["KUBECONFIG"]).read()).group(1)
body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "held", "namespace": "default"}}).encode()
req = urllib.request.Request(server + "/api/v1/namespaces/default/configmaps", data=body,
                             headers={"Content-Type": "application/json"}, method="POST")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
""" if post_after else ""
    post = "opener.open(req, timeout=30).read()" if post_after else ""
    path.write_text(f"""#!{sys.executable}
import signal, socket, sys
probe = next(a for a in sys.argv if a.startswith("--health-probe-bind-address="))
host, port = probe.split("=", 1)[1].rsplit(":", 1)
s = socket.socket()
s.bind((host, int(port)))
s.listen()
import os, time
{prepare}
while not os.path.exists({str(go)!r}):
    time.sleep(0.02)
for line in {lines!r}:
    sys.stdout.write(line + "\\n")
sys.stdout.flush()
{post}
signal.pause()
""")
    path.chmod(0o755)
    return path


def test_the_binarys_reconciles_become_trace_events(tmp_path):
    """controller-runtime's reconcileID: its first line starts a reconcile; a "Reconciler error"
    line ends it with the error; the controller's next reconcile ends the previous one; a
    quiet process ends the rest. Lines without a reconcileID, and other loggers, are not
    reconciles."""
    import emu.http.real_replicas as rr

    lines = [
        "not json at all, with a \"reconcileID\" in it",
        '{"level":"info","logger":"setup","msg":"starting manager"}',
        _line("controllers.RayJob", "a", "RayJob", JobDeploymentStatus=""),
        _line("controllers.RayJob", "a", "Add a finalizer"),
        _line("controllers.RayJob", "b", "RayJob", JobDeploymentStatus="Initializing"),
        _line("controllers.RayJob", "b", "Reconciler error", error='jobs.batch "demo" already exists'),
        _line("controllers.RayCluster", "c", "Reconciling Ingress"),
    ]

    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]

        def mine(event: str) -> list[dict]:
            return [dict(e.fields) for e in sim.trace.events
                    if e.process == replica.process and e.event == event]

        (tmp_path / "go").touch()
        await _until(lambda: len(mine("reconcile_finished")) >= 3, 10)
        started = [(f["controller"], f["key"], f["reconcile_id"]) for f in mine("reconcile_started")]
        assert started == [("rayjob", "default/demo", "a"), ("rayjob", "default/demo", "b"),
                           ("raycluster", "default/demo", "c")]
        finished = [(f["reconcile_id"], f["outcome"], f.get("inferred"), f.get("error"))
                    for f in mine("reconcile_finished")]
        assert finished == [("a", "done", "next reconcile started", None),
                            ("b", "error", None, 'jobs.batch "demo" already exists'),
                            ("c", "done", "quiet", None)]
        ends = {e.fields["reconcile_id"]: e.t for e in sim.trace.events
                if e.event == "reconcile_finished"}
        begins = {e.fields["reconcile_id"]: e.t for e in sim.trace.events
                  if e.event == "reconcile_started"}
        assert ends["c"] - begins["c"] >= rr.IDLE_S - 0.1

    _run(_talker(tmp_path, lines), tmp_path, 1, body)


def test_a_pause_on_reconcile_started_holds_that_reconciles_first_request(tmp_path, monkeypatch):
    """The zombie-leader scenario's move: pause the replica when its log says a reconcile
    started. The binary sends the reconcile's request right after the line; reading the log
    before answering the request, and holding a paused replica's requests, makes the request
    wait for the resume, as a paused port replica's call does. Once the replica runs, its
    periodic look is slowed to 30 s, so that it is not what sees the line first."""
    import emu.http.real_replicas as rr

    async def body(sim: Simulation, real: RealReplicas) -> None:
        replica = real.replicas[0]
        proc = sim.processes.get(replica.process)
        box: dict[str, float] = {}

        def on_event(ev) -> None:
            if ev.event == "reconcile_started" and ev.process == replica.process \
                    and "paused" not in box:
                box["paused"] = sim.now
                sim.faults.pause(proc)
            elif ev.event == "write" and ev.fields.get("name") == "held":
                box["written"] = sim.now

        sim.trace.subscribe(on_event)
        monkeypatch.setattr(rr, "POLL_S", 30.0)
        await asyncio.sleep(0.2)  # the main's current 50 ms look is over
        (tmp_path / "go").touch()
        await _until(lambda: "paused" in box, 10)
        pid = replica.pid
        assert pid is not None
        await _until(lambda: _state(pid) == "T", 1)
        await asyncio.sleep(0.5)
        assert "written" not in box  # held while paused
        box["resumed"] = sim.now
        sim.faults.resume(proc)
        await _until(lambda: "written" in box, 5)
        assert box["written"] >= box["resumed"]

    lines = [_line("controllers.RayJob", "a", "RayJob", JobDeploymentStatus="Initializing")]
    _run(_talker(tmp_path, lines, post_after=True), tmp_path, 1, body)


def test_a_feature_gate_newer_than_the_binary_is_a_verdict_not_an_error():
    """head-loss-rocksdb turns on GCSFaultToleranceEmbeddedStorage, which v1.4 and v1.5 do not
    know: decided from the binary's version before anything starts."""
    from emu.http.real_operator import (
        NeedsNewerKubeRay,
        check_feature_gates,
        known_feature_gates,
        unknown_gate_in,
    )

    assert known_feature_gates("v1.4.0") == {"RayClusterStatusConditions",
                                             "RayJobDeletionPolicy"}
    assert "RayServiceIncrementalUpgrade" in (known_feature_gates("v1.5.1") or ())
    assert known_feature_gates("v9.9.9") is None and known_feature_gates(None) is None
    check_feature_gates("v1.5.0", {"RayJobDeletionPolicy": True})
    check_feature_gates("v9.9.9", {"Anything": True})  # the binary itself will say
    with pytest.raises(NeedsNewerKubeRay) as err:
        check_feature_gates("v1.5.0", {"GCSFaultToleranceEmbeddedStorage": True})
    assert err.value.gate == "GCSFaultToleranceEmbeddedStorage"
    assert str(err.value) == ("needs a KubeRay newer than v1.5.0: the feature gate "
                              "GCSFaultToleranceEmbeddedStorage is unknown to it")
    assert unknown_gate_in('E1207 setup.go:1] "msg" err="unrecognized feature gate: '
                           'FooBar"') == "FooBar"
    assert unknown_gate_in("flag provided but not defined: -qps") is None


def test_a_binary_that_refuses_a_gate_at_start_gives_an_na_row(tmp_path):
    """A binary of a release not known here, which exits on the gate: its own message says
    which gate; the differential row is "n/a", and nothing of it is left running."""
    from emu.differential import _run
    from emu.scenarios import get

    script = tmp_path / "old-operator"
    script.write_text("#!/bin/sh\necho 'unrecognized feature gate: "
                      "GCSFaultToleranceEmbeddedStorage' >&2\nexit 1\n")
    script.chmod(0o755)
    real = _run("head-loss-rocksdb", 0, {**real_operator_options(
        script, get("head-loss-rocksdb").options), "max_virtual_time": 120})
    assert real == ("n/a: needs a KubeRay newer than this binary: the feature gate "
                    "GCSFaultToleranceEmbeddedStorage is unknown to it")

    class Result:
        ok, expectations = True, (Expectation("a", True),)

    row = differential_row("head-loss-rocksdb", Result(), real)
    assert row["real"] == real and row["differs"] == ""
