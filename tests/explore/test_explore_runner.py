"""The runner: one run is a pure function of (workload, knobs, plan, seed), forked or fresh."""

from __future__ import annotations

import os

import attrs
from explore_worlds import unreachable

from emu.explore.faults import AtCall, CrashLeader
from emu.explore.runner import ForkServer, RunSpec, run_one
from emu.explore.workload import builtin
from emu.faults import Crash


def test_a_forked_run_is_the_same_run_as_a_fresh_one() -> None:
    wl = builtin("raycluster")
    spec = RunSpec({"workers": 2}, [CrashLeader(at=3.0),
                                    AtCall(n=1, verb="create", kind="Pod", then=Crash())])
    fresh = run_one(wl, spec, seed=3)
    forked = list(ForkServer(wl, 3, fork=True).run([spec, spec]))
    worker = list(ForkServer(wl, 3).run([spec, spec]))  # the default: fresh worlds in a worker
    assert fresh.error == "" and fresh.digest
    for results in (forked, worker):
        assert [r.digest for r in results] == [fresh.digest, fresh.digest]
        assert [r.violations for r in results] == [fresh.violations] * 2
        assert [r.performed for r in results] == [fresh.performed] * 2
    assert any("Crash(" in p for p in fresh.performed)


def test_the_reference_run_records_the_operators_writes_and_the_state_transitions() -> None:
    ref = run_one(builtin("raycluster"), RunSpec(), seed=1, record=True)
    calls = {(a["verb"], a["kind"]) for a in ref.actions if a["type"] == "call"}
    assert {("create", "Pod"), ("create", "Service"), ("update_status", "RayCluster")} <= calls
    states = [a["state"] for a in ref.actions
              if a["type"] == "transition" and a["kind"] == "RayCluster"]
    assert "('ready',)" in states
    assert [a for a in ref.actions if a["type"] == "operator"]


def test_a_goal_never_reached_is_a_workload_goal_violation_naming_the_object() -> None:
    [result] = ForkServer(unreachable(), 0).run([RunSpec()])
    [v] = result.violations
    assert v["invariant"] == "workload-goal"
    assert v["objects"] == ["ConfigMap/default/settings"]
    assert "{'settings': '1'} never reached data.k in ['2']" in v["message"]


# -- livelocks and the early end of a quiet settle -------------------------------------------


def echo_controller(sim) -> None:
    """A controller that writes the ConfigMap again each time it sees it change — at zero
    latency, so virtual time never moves once it has started (``Setup.install``)."""

    async def main(proc) -> None:
        client = sim.client("echo")
        while True:
            try:
                cur = await client.get("ConfigMap", "settings", "default")
            except Exception:
                await proc.sleep(1.0)
                continue
            cur["data"]["n"] = str(int(cur["data"].get("n", "0")) + 1)
            await client.update(cur)

    sim.processes.start("echo", main)


def _echo_workload():
    from explore_worlds import CONFIGMAP

    from emu.explore.workload import Goal, Knob, Setup, Workload

    return Workload("echo", [CONFIGMAP], [Knob("value", "ConfigMap", "data.k", ("1", "3"))],
                    setup=Setup(nodes=1, install="test_explore_runner:echo_controller", lease=""),
                    goal=Goal("ConfigMap", "data.k", ("1",), horizon=5.0, delete=False))


def test_a_livelock_is_reported_at_the_same_instant_forked_and_fresh() -> None:
    wl = _echo_workload()
    fresh = run_one(wl, RunSpec(), seed=2)
    [forked] = ForkServer(wl, 2, fork=True).run([RunSpec()])
    worker = list(ForkServer(wl, 2).run([RunSpec(), RunSpec({"value": "3"})]))
    assert fresh.error.startswith("Livelock: virtual time stood still at t=")
    assert forked.error == fresh.error == worker[0].error
    assert (fresh.violations, fresh.digest) == ((), "")
    assert worker[1].error.startswith("Livelock")  # the worker went on with the next run


def test_a_quiet_settle_ends_early_with_the_same_findings_as_the_full_one(monkeypatch) -> None:
    import emu.explore.runner as runner

    wl = builtin("rayjob")
    specs = [RunSpec(), RunSpec({"entrypoint": wl.knob("entrypoint").values[1]},
                                [CrashLeader(at=20.0)])]
    early = list(ForkServer(wl, 5).run(specs))
    monkeypatch.setattr(runner, "EARLY_STOP", False)
    full = list(ForkServer(wl, 5).run(specs))
    assert [r.violations for r in early] == [r.violations for r in full]
    assert [r.performed for r in early] == [r.performed for r in full]
    # the full settle runs to 300 s after the last fault; the quiet world stops long before
    assert all(e.virtual < f.virtual - 100 for e, f in zip(early, full, strict=True))
    assert all(f.virtual >= 300 for f in full)


def test_a_settle_never_ends_early_while_an_object_is_unsteady() -> None:
    # a RayJob that cannot finish (its head is never Ready: no Node fits it) stays unsteady,
    # so the run keeps the full settle and eventual liveness still fails
    wl = builtin("rayjob")
    big = wl.manifests[0]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    big["containers"][0]["resources"] = {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}}
    [result] = ForkServer(wl, 1).run([RunSpec()])
    assert result.virtual >= 300
    assert "eventually-steady" in {v["invariant"] for v in result.violations}


_WORLDS_BUILT = [0]


def dies_in_its_second_world(sim) -> None:
    """No controller; the process that builds its second world with this dies at once."""
    _WORLDS_BUILT[0] += 1
    if _WORLDS_BUILT[0] == 2:
        os._exit(7)


def test_a_worker_that_dies_costs_its_run_only_and_a_new_worker_plays_the_rest() -> None:
    from emu.explore.workload import Setup

    wl = attrs.evolve(unreachable(), setup=Setup(
        nodes=1, install="test_explore_runner:dies_in_its_second_world", lease=""))
    specs = [RunSpec(), RunSpec({"value": "3"}), RunSpec()]
    results = list(ForkServer(wl, 1).run(specs))
    assert [r.spec for r in results] == specs
    assert "the run's worker died (wait status" in results[1].error
    assert results[0].violations and results[0].digest == results[2].digest
    assert _WORLDS_BUILT == [0]  # every world was built in a worker, none here


def test_a_small_search_gives_every_worker_a_batch() -> None:
    from emu.explore.search import Executor, explore

    class TwoWorkers(Executor):
        jobs = 2

        def __init__(self) -> None:
            super().__init__(fork=False)
            self.sizes: list[int] = []

        def map(self, workload, seed, batches):
            self.sizes += [len(b) for b in batches]
            return super().map(workload, seed, batches)

    two = TwoWorkers()
    result = explore(unreachable(), budget=6, seed=1, executor=two, shrink_budget=0,
                     export=False)
    assert two.sizes == [3, 3]
    one = explore(unreachable(), budget=6, seed=1, executor=Executor(fork=False),
                  shrink_budget=0, export=False)
    assert [(f.invariant, repr(f.plan)) for f in result.findings] == \
        [(f.invariant, repr(f.plan)) for f in one.findings]


def test_a_kuberay_hot_loop_on_a_stale_cache_is_not_mistaken_for_a_livelock() -> None:
    # docs/findings.md E2: with its RayCluster watch lagging, a paused-then-resumed leader keeps
    # recreating the head Service the garbage collector deletes; the runtime charges the
    # repeated reconciles virtual time after 100 passes, so the clock moves and the run ends —
    # the watchdog must leave room for those passes (this run was a "Livelock" at 1,000)
    from emu.explore.faults import PauseLeader
    from emu.faults import InformerLag

    wl = builtin("rayjob")
    spec = RunSpec({"backoffLimit": 2, "ttlSecondsAfterFinished": 10,
                    "entrypoint": "python -c 'import sys, time; time.sleep(20); sys.exit(1)'"},
                   [InformerLag(at=0.0, kind="RayCluster", seconds=30.0, duration=120.0,
                                process="default/kuberay-operator-qzcxtfbltw-w4b8d/"
                                        "kuberay-operator"),
                    PauseLeader(at=47.1, duration=30.0)])
    result = run_one(wl, spec, seed=1)
    assert result.error == ""
    assert any("InformerLag(" in p for p in result.performed)


def never_yields(sim: object) -> None:
    """An install function stuck in a busy loop: the world never gets the loop back."""
    while True:
        pass


def test_a_run_stopped_at_the_wall_clock_limit_is_not_called_a_livelock(monkeypatch) -> None:
    # The message said "virtual time stopped advancing: a livelock in the world", which the
    # watchdog reports itself; a run stopped by the wall clock is stuck in code that never
    # yields (or on a far slower machine), and the user is told how to tell.
    import emu.explore.runner as runner
    from emu.explore.workload import Setup

    monkeypatch.setattr(runner, "WALL_LIMIT", 0.3)
    wl = attrs.evolve(unreachable(), setup=Setup(nodes=1, lease="",
                                                 install="test_explore_runner:never_yields"))
    [result] = list(ForkServer(wl, 0).run([RunSpec()]))
    assert result.error.startswith("the run exceeded its wall-clock limit of 0.3s and was "
                                   "stopped: code in the world that never yields")
    assert "livelock at one virtual instant would have been reported as one" in result.error


def test_a_run_has_the_same_digest_under_any_hash_seed() -> None:
    # A Ray worker or a -j process started afresh has its own PYTHONHASHSEED: a set or dict
    # ordered by string hashes anywhere in the world would give it another run.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("from emu.explore.runner import RunSpec, run_one\n"
            "from emu.explore.workload import builtin\n"
            "from emu.explore.faults import CrashLeader, LoseRayPod\n"
            "r = run_one(builtin('rayjob'), RunSpec({'submissionMode': 'HTTPMode'}, "
            "[CrashLeader(at=20.0), LoseRayPod(at=30.0, owner='demo-job', how='kill')]), "
            "seed=3)\n"
            "print(r.digest, len(r.performed), r.error)\n")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=root, timeout=300,
                           env=dict(os.environ, PYTHONHASHSEED=h, PYTHONPATH=str(root))
                           ).stdout for h in ("0", "1", "4242")}
    assert len(outs) == 1, outs
    [out] = outs
    digest, performed = out.split()[:2]
    assert len(digest) >= 16 and int(performed) >= 2
