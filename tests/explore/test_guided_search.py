"""The search guided by novelty: run signatures, the scheduler, and its determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from explore_worlds import reachable

import emu.explore.guide as guide
from emu import cli
from emu.explore.faults import CrashLeader
from emu.explore.guide import Guided, bucket
from emu.explore.runner import ForkServer, RunResult, RunSpec, run_one
from emu.explore.search import Executor, ProcessExecutor, explore
from emu.explore.workload import builtin
from emu.faults import Outage


def test_hit_counts_fall_in_afl_buckets() -> None:
    assert [bucket(n) for n in (1, 2, 3, 4, 7, 8, 15, 16, 100)] == [1, 2, 3, 4, 4, 8, 8, 16, 64]


def test_a_run_signature_shows_what_it_exercised_and_changes_nothing_in_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    wl = builtin("raycluster")
    spec = RunSpec(plan=[Outage(at=20.0, endpoint="apiserver", duration=30.0)])
    [seen] = list(ForkServer(wl, 1, fork=False).run([spec]))
    features = set(seen.signature)
    # the operator's writes, the cluster's states, the Ray Pods' phases, the fault itself
    assert any(f.startswith("w:create:Pod:") for f in features)
    assert any(f.startswith("s:RayCluster:") and ">state=ready" in f for f in features)
    assert any(f.startswith("s:Pod:head:") for f in features)
    assert any(f.startswith("e:faults:fault#") for f in features)
    # generated name parts are gone: the two replicas are one process
    assert not any("kuberay-operator-" in f for f in features)

    class Nothing:
        def __init__(self, sim, workload) -> None:
            pass

        def features(self, found=()):
            return ()

    monkeypatch.setattr(guide, "Signature", Nothing)
    blind = run_one(wl, spec, seed=1)
    assert blind.signature == ()
    assert (blind.digest, blind.violations) == (seen.digest, seen.violations)


def _result(spec: RunSpec, *features: str) -> RunResult:
    return RunResult(spec, digest="d", signature=features)


def test_the_scheduler_mutates_the_runs_that_reached_something_new() -> None:
    wl = builtin("raycluster")
    seeds = [RunSpec(plan=[Outage(at=float(10 + i), endpoint="apiserver", duration=10.0)])
             for i in range(40)]
    g = Guided(wl, [], seeds, seed=1)
    first = g.next(8)
    assert first == seeds[:8]  # nothing seen yet: the uniform order
    novel, *rest = first
    g.observe([_result(novel, "a#1", "b#1")] + [_result(s, "a#1") for s in rest])
    assert [e.spec for e in g.corpus] == [novel]  # the others reached nothing new
    second = g.next(8)
    assert second[6:] == seeds[8:10]  # a quarter continues the uniform order
    mutants = second[:6]
    # six plans never run before (a mutant may be a seed not reached yet, which is then not
    # run twice)
    assert len({m.key() for m in mutants}) == 6 and not set(mutants) & set(first)
    assert all(m.plan.faults for m in mutants)
    # the same seed and the same results give the same rounds
    again = Guided(wl, [], seeds, seed=1)
    again.next(8)
    again.observe([_result(novel, "a#1", "b#1")] + [_result(s, "a#1") for s in rest])
    assert again.next(8) == second


def test_a_run_that_raised_is_not_novel() -> None:
    spec = RunSpec(plan=[CrashLeader(at=1.0)])
    g = Guided(builtin("raycluster"), [], [spec], seed=0)
    g.observe([RunResult(spec, error="boom", signature=("x#1",))])
    assert not g.corpus


def test_a_guided_search_is_the_same_with_one_worker_or_two(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(guide, "ROUND", 6)
    wl = reachable()
    runs = {}
    for name, executor in (("one", Executor()), ("two", ProcessExecutor(2))):
        try:
            result = explore(wl, budget=14, seed=2, executor=executor, search="guided",
                             out=tmp_path / name, export=False, shrink_budget=0)
        finally:
            executor.close()
        assert result.runs == 14
        lines = (tmp_path / name / "runs.jsonl").read_text().splitlines()
        runs[name] = sorted(json.dumps(json.loads(line)["spec"], sort_keys=True)
                            for line in lines if '"spec"' in line)
    assert runs["one"] == runs["two"]
    # and it is not the uniform search: later rounds hold mutations
    uniform = explore(wl, budget=14, seed=2, search="uniform", out=tmp_path / "u",
                      export=False, shrink_budget=0)
    assert uniform.runs == 14
    lines = (tmp_path / "u" / "runs.jsonl").read_text().splitlines()
    assert sorted(json.dumps(json.loads(line)["spec"], sort_keys=True)
                  for line in lines if '"spec"' in line) != runs["one"]


def test_an_unknown_search_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="search is one of uniform, guided, not 'random'"):
        explore(reachable(), budget=1, search="random")


def test_the_cli_takes_search_guided_and_refuses_it_with_seeds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explore", "operator-failover", "--seeds", "1", "--search",
                     "guided"]) == 2
    assert "does not take --search" in capsys.readouterr().err
