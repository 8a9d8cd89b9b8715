"""The runner: one run is a pure function of (workload, knobs, plan, seed), forked or fresh."""

from __future__ import annotations

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
    forked = list(ForkServer(wl, 3).run([spec, spec]))
    assert fresh.error == "" and fresh.digest
    assert [r.digest for r in forked] == [fresh.digest, fresh.digest]
    assert [r.violations for r in forked] == [fresh.violations] * 2
    assert [r.performed for r in forked] == [fresh.performed] * 2
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
