"""Runs that start where they diverge: a plan armed late (`RunSpec.arm_at`) is played from a
fork of one shared run without faults, and that is the very run a fresh world plays."""

from __future__ import annotations

import attrs
import pytest

import emu.explore.runner as runner
from emu.explore import plans
from emu.explore.faults import AtCall
from emu.explore.runner import ForkServer, RunSpec, run_one
from emu.explore.shrink import _rearmed
from emu.explore.workload import builtin
from emu.faults import Crash, Outage

_REFERENCES: dict[str, object] = {}


def reference(name: str):
    if name not in _REFERENCES:
        _REFERENCES[name] = run_one(builtin(name), RunSpec(), seed=1, record=True)
    return _REFERENCES[name]


def outcome(r) -> tuple:
    return (r.digest, r.violations, r.performed, r.unperformed, r.error, r.virtual)


@pytest.mark.parametrize("name", ["rayjob", "raycluster", "rayservice"])
def test_a_run_from_the_shared_prefix_is_the_run_from_scratch(name: str) -> None:
    wl = builtin(name)
    by_at: dict[float, RunSpec] = {}
    for s in plans.candidates(wl, reference(name).actions, 1, 200):
        if s.arm_at is not None:
            by_at.setdefault(s.arm_at, s)
    # a sample that spans the instants: the earliest, the latest and two between
    instants = sorted(by_at)
    assert len(instants) >= 4
    sample = [by_at[instants[i * (len(instants) - 1) // 3]] for i in range(4)]
    shared = list(ForkServer(wl, 1).run(sample))  # one worker: a shared run, forked
    for spec, got in zip(sample, shared, strict=True):
        fresh = run_one(wl, spec, seed=1)
        assert got.spec == spec
        assert fresh.digest and fresh.error == ""
        assert outcome(got) == outcome(fresh), spec


def test_the_worker_plays_armed_plans_from_forks_and_the_rest_fresh(monkeypatch,
                                                                    tmp_path) -> None:
    wl = builtin("raycluster")
    actions = reference("raycluster").actions
    armed = plans.arm_times(wl, actions, [
        RunSpec(plan=[Outage(at=at, endpoint="apiserver", duration=10.0)]) for at in (8.0, 20.0)])
    assert [s.arm_at for s in armed] == [7.5, 19.5]
    plain = RunSpec({"workers": 2}, [Outage(at=5.0, endpoint="apiserver", duration=10.0)])
    specs = [armed[0], plain, armed[1]]
    log = tmp_path / "log"
    real_fork, real_fresh = runner._Branches.fork, runner._run_fresh

    def fork(self, sim, at):  # runs in the worker: it leaves a line in a file
        with log.open("a") as f:
            f.write(f"fork {at}\n")
        return real_fork(self, sim, at)

    def fresh(workload, seed, spec, *args):
        with log.open("a") as f:
            f.write(f"fresh {spec.arm_at}\n")
        return real_fresh(workload, seed, spec, *args)

    monkeypatch.setattr(runner._Branches, "fork", fork)
    monkeypatch.setattr(runner, "_run_fresh", fresh)
    results = list(ForkServer(wl, 1).run(specs))
    assert [r.spec for r in results] == specs
    assert all(r.digest and not r.error for r in results)
    lines = log.read_text().splitlines()
    assert lines.count("fresh None") == 1  # the knobbed plan only
    assert sorted(line for line in lines if line.startswith("fork")) == sorted(
        {f"fork {s.arm_at}" for s in armed})
    # and with sharing off, every run is fresh, with the same results
    monkeypatch.setattr(runner, "SHARE_PREFIXES", False)
    again = list(ForkServer(wl, 1).run(specs))
    assert [outcome(r) for r in again] == [outcome(r) for r in results]


def test_an_atcall_armed_late_counts_the_calls_made_before_it() -> None:
    # Armed at 20 s, the AtCall must act after the same call as when armed at the start: the
    # run's call counter gives it the matching calls made before.
    wl = builtin("raycluster")
    actions = reference("raycluster").actions
    writes = [a for a in actions if a["type"] == "call" and a["verb"] == "update_status"
              and a["kind"] == "RayCluster"]
    late = writes[-1]
    fault = AtCall(n=len(writes), then=Crash(), verb="update_status", kind="RayCluster",
                   name=late["name"], caller=wl.setup.operator)
    spec = plans.arm_times(wl, actions, [RunSpec(plan=[fault])])[0]
    assert spec.arm_at is not None and spec.arm_at > 5.0
    at_start = run_one(wl, attrs.evolve(spec, arm_at=None), seed=1)
    armed = run_one(wl, spec, seed=1)
    crashes = [[p for p in r.performed if p.startswith("Crash(")] for r in (at_start, armed)]
    assert crashes[0] and crashes[0] == crashes[1]


def test_an_atcall_whose_call_came_before_the_arming_says_so() -> None:
    wl = builtin("raycluster")
    spec = RunSpec(plan=[AtCall(n=1, then=Crash(), verb="create", kind="Pod",
                                caller=wl.setup.operator)], arm_at=40.0)
    result = run_one(wl, spec, seed=1)
    assert result.idle
    [missed] = result.unperformed
    assert "its call came before the plan was armed" in missed["why"]


def test_arm_times_come_strictly_before_the_first_fault_and_only_at_default_knobs() -> None:
    wl = builtin("raycluster")
    actions = reference("raycluster").actions
    [timed, knobbed, at_zero] = plans.arm_times(wl, actions, [
        RunSpec(plan=[Outage(at=12.0, endpoint="apiserver", duration=10.0)]),
        RunSpec({"workers": 2}, [Outage(at=12.0, endpoint="apiserver", duration=10.0)]),
        RunSpec(plan=[Outage(at=0.0, endpoint="apiserver", duration=10.0)])])
    assert timed.arm_at == 11.5
    assert knobbed.arm_at is None and at_zero.arm_at is None
    # the spec's key and its JSON carry the arming; a spec without it reads back as before
    assert RunSpec.from_dict(timed.to_dict()) == timed
    assert "arm_at" not in RunSpec(plan=timed.plan).to_dict()


def test_a_shrunk_plan_whose_fault_moved_before_the_arming_arms_at_the_start() -> None:
    spec = RunSpec(plan=[Outage(at=12.0, endpoint="apiserver", duration=10.0)], arm_at=11.5)
    earlier = attrs.evolve(spec, plan=[Outage(at=6.0, endpoint="apiserver", duration=10.0)])
    shorter = attrs.evolve(spec, plan=[Outage(at=12.0, endpoint="apiserver", duration=5.0)])
    assert _rearmed(earlier, spec).arm_at is None
    assert _rearmed(shorter, spec).arm_at == 11.5
