"""What a search reports must let a user act on it: a failure that needs no fault is not blamed
on one, a run whose plan did nothing is not counted as a tested plan, a run that raised names
its plan and knobs and fails the command, an option that would be ignored is refused, and an
exported test says whether it replayed the explorer's run exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from explore_worlds import UNREACHABLE_YAML, reachable, unreachable

import emu.explore.runner as runner
import emu.explore.search as search
from emu import cli
from emu.explore.runner import RunSpec, run_one
from emu.explore.search import explore

ROOT = Path(__file__).resolve().parents[2]


def _json(out: str) -> dict[str, Any]:
    return orjson.loads(out.strip().splitlines()[-1])


def test_a_violation_without_any_fault_is_one_finding_with_an_empty_plan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The goal is never reached, faults or not. The finding used to be shrunk from the first
    # failing plan and printed with that plan's fault, as if the fault caused it.
    shrunk: list[Any] = []
    real_shrink = search.shrink

    def spy(*args: Any, **kwargs: Any) -> Any:
        shrunk.append(args[1])
        return real_shrink(*args, **kwargs)

    monkeypatch.setattr(search, "shrink", spy)
    result = explore(unreachable(), budget=6, seed=1, shrink_budget=4, export=False)
    [finding] = result.findings
    assert finding.invariant == "workload-goal" and finding.without_faults
    assert not finding.plan.faults and finding.knobs == {}
    assert "never reached data.k in ['2']" in finding.message
    assert not shrunk  # nothing to shrink: every failing run is explained by it
    failing = [u for u in result.unshrunk if u.invariant == "workload-goal"]
    assert failing and all(u.explained == 1 for u in failing)


def test_the_command_line_says_a_finding_needs_no_fault(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML)
    assert cli.main(["explore", "-f", str(wl), "--budget", "2", "--seed", "1",
                     "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert ("plan:   [] (no fault: the reference run, at the default knobs, already breaks it"
            in out)
    assert "  seed:   1  (trace digest " in out
    assert "2 runs of seed 1 (0 from " in out


def test_runs_whose_plan_did_nothing_are_counted_apart_with_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No controller holds a Lease in this world, so every PauseLeader or CrashLeader plan
    # finds nobody to act on: those runs tested nothing, and the user is told so.
    result = explore(reachable(), budget=12, seed=1, shrink_budget=0, export=False,
                     invariants=[])
    assert result.idle and not result.findings
    for _, r in result.idle:
        assert r.spec.plan.faults and not r.performed and r.unperformed
        assert all(u["why"] for u in r.unperformed)
    reasons = dict(result.idle_reasons())
    assert reasons.get("CrashLeader: no live process held the Lease", 0) >= 1
    performed = [r for r in (run_one(reachable(), RunSpec({}, [f]), seed=1, invariants=[])
                             for f in (result.idle[0][1].spec.plan.faults))]
    assert all(not r.performed for r in performed)


def test_the_command_line_prints_the_idle_runs_and_lists_them_in_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "fine.yaml"
    wl.write_text(UNREACHABLE_YAML.replace('states: ["2"]', 'states: ["1", "3"]'))
    argv = ["explore", "-f", str(wl), "--budget", "12", "--seed", "1",
            "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "runs performed no fault of their plan (it found nothing to act on)" in out
    assert "x CrashLeader: no live process held the Lease" in out
    assert cli.main([*argv, "--json"]) == 0
    data = _json(capsys.readouterr().out)
    assert data["seed"] == 1 and data["idle"]
    item = data["idle"][0]
    assert set(item) == {"run", "plan", "knobs", "unperformed"}
    assert item["unperformed"][0]["why"]


def _raising_play(real: Any) -> Any:
    async def play(sim: Any, workload: Any, spec: RunSpec, *args: Any, **kwargs: Any) -> Any:
        if any(type(f).__name__ == "Outage" for f in spec.plan.faults):
            raise RuntimeError("the world broke")
        return await real(sim, workload, spec, *args, **kwargs)
    return play


def test_a_run_that_raised_names_its_plan_and_knobs_and_fails_the_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "play", _raising_play(runner.play))
    wl = tmp_path / "fine.yaml"
    wl.write_text(UNREACHABLE_YAML.replace('states: ["2"]', 'states: ["1", "3"]'))
    argv = ["explore", "-f", str(wl), "--budget", "8", "--seed", "1", "--no-fork"]
    assert cli.main([*argv, "--out", str(tmp_path / "a"), "--json"]) == 1
    data = _json(capsys.readouterr().out)
    assert data["findings"] == [] and data["errors"]
    for e in data["errors"]:
        assert e["error"] == "RuntimeError: the world broke"
        assert "Outage(" in e["plan"] and isinstance(e["knobs"], dict) and e["run"] >= 1
    assert cli.main([*argv, "--out", str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    first = data["errors"][0]
    assert f"run error: run {first['run']}: RuntimeError: the world broke\n  plan:   " \
           f"{first['plan']}" in out
    assert f"0 distinct finding(s), {len(data['errors'])} run error(s)" in out


def test_a_reference_run_that_raises_exits_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "broken.yaml"
    wl.write_text(UNREACHABLE_YAML.replace("explore_worlds:no_controller",
                                           "explore_worlds:no_such_function"))
    assert cli.main(["explore", "-f", str(wl), "--budget", "2",
                     "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("emu explore: the reference run of 'broken' (no fault, default "
                          "knobs, seed 0) raised: AttributeError: Setup.install "
                          "'explore_worlds:no_such_function': module 'explore_worlds' has no "
                          "'no_such_function' (give module:function)")
    assert not (tmp_path / "out").exists()  # refused before any run: nothing left behind


@pytest.mark.parametrize(("argv", "message"), [
    (["explore", "worker-loss", "--seeds", "2", "--json"],
     "emu explore: --seeds (the legacy seed sweep of a scenario) does not take --json; "
     "leave out --seeds to explore"),
    (["explore", "worker-loss", "--seeds", "2", "--budget", "5", "--out", "x"],
     "emu explore: --seeds (the legacy seed sweep of a scenario) does not take --budget, "
     "--out;"),
    (["explore", "rayjob", "--start", "3"],
     "emu explore: --start is the first seed of --seeds; the explorer takes --seed"),
    (["explore", "rayjob", "--ray-cpus", "2"],
     "emu explore: --ray-cpus sets the CPUs of a local Ray started by --ray; add --ray"),
    (["explore", "rayjob", "--ray", "ray://head:10001", "--ray-cpus", "2"],
     "emu explore: --ray-cpus sets the CPUs of a local Ray; the cluster at ray://head:10001 "
     "has its own"),
])
def test_an_option_the_mode_would_ignore_is_refused(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith(message)


def test_an_exported_test_replays_the_explorers_run_exactly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML)
    assert cli.main(["explore", "-f", str(wl), "--budget", "2", "--seed", "1",
                     "--out", str(tmp_path / "out"), "--json"]) == 1
    [finding] = _json(capsys.readouterr().out)["findings"]
    source = Path(finding["test_file"]).read_text()
    assert f"DIGEST = {finding['digest']!r}" in source
    # the digest the search's runner gives the same run (the HTML showed another one: the
    # digest after the world's teardown)
    from emu.explore.workload import from_file

    same = run_one(from_file(wl), RunSpec(finding["knobs"], []), seed=1)
    assert same.digest == finding["digest"]
    assert finding["digest"] in Path(finding["html"]).read_text()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(ROOT), str(Path(__file__).parent))))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           finding["test_file"]], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"the explorer's run exactly (trace digest {finding['digest'][:16]})" in proc.stdout


def test_a_single_fault_the_reference_run_shows_would_do_nothing_is_not_run_alone() -> None:
    # About one systematic plan in six used to be run alone to no effect: a Pod lost before
    # there is one, the standby replica's (absent) informers perturbed.
    from emu.explore import plans
    from emu.explore.runner import ForkServer
    from emu.explore.workload import builtin

    wl = builtin("raycluster")
    reference = run_one(wl, RunSpec(), seed=1, record=True)
    pool = plans.systematic(wl, reference.actions)
    idle = [p for p in pool if plans.idle_alone(p, reference.actions)]
    kinds = {type(p.faults[0]).__name__ for p in idle}
    assert {"LoseRayPod", "CoalesceEvents", "InformerLag"} <= kinds
    results = list(ForkServer(wl, 1).run([RunSpec({}, p) for p in idle]))
    assert all(r.spec.plan.faults and not r.performed and r.unperformed for r in results), [
        repr(r.spec.plan) for r in results if r.performed]
    specs = plans.candidates(wl, reference.actions, 1, 2 * len(pool))
    # the systematic plans alternate with random combinations
    run_alone = [s.plan for s in specs[0:2 * (len(pool) - len(idle)):2]]
    assert [repr(p) for p in run_alone] == [repr(p) for p in pool if p not in idle]
    # still in the random combinations' pool, where another fault can make them act
    assert set(map(repr, idle)) <= set(map(repr, pool))


def test_knobs_that_break_the_invariant_alone_shrink_to_an_empty_plan() -> None:
    # The goal wants data.k "1": the knob's other value breaks it whatever the plan. The
    # shrinker never dropped a plan's last fault, so the finding blamed one that played no part.
    import attrs

    from emu.explore.workload import Goal

    wl = attrs.evolve(reachable(), name="knobbed",
                      goal=Goal("ConfigMap", "data.k", ("1",), horizon=5.0, delete=False))
    result = explore(wl, budget=12, seed=1, shrink_budget=10, export=False)
    assert result.findings
    for finding in result.findings:
        assert finding.without_faults and finding.knobs == {"value": "3"}, finding
    assert all(u.explained for u in result.unshrunk)


def test_a_finding_of_your_own_invariants_exports_a_test_that_checks_them(
        tmp_path: Path) -> None:
    # The exported file replayed with kuberay_invariants(): a finding of your own invariant
    # gave a test that passed (and a digest of another run).
    from explore_worlds import Untouched

    result = explore(reachable(), budget=4, seed=1, shrink_budget=4, out=tmp_path,
                     invariants=[Untouched()])
    [finding, *_] = result.findings
    assert finding.invariant == "untouched"
    source = Path(finding.test_file).read_text()
    assert "from explore_worlds import Untouched" in source
    assert "INVARIANTS = [Untouched()]" in source
    assert "await replay(sim, WORKLOAD, KNOBS, PLAN, INVARIANTS)" in source
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(ROOT), str(Path(__file__).parent))))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           finding.test_file], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "a fault fired: " in proc.stdout
    assert f"the explorer's run exactly (trace digest {finding.digest[:16]})" in proc.stdout


def test_families_narrow_a_built_in_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from emu.explore.store import Store

    argv = ["explore", "raycluster", "--families", "pod-loss", "--budget", "4", "--seed", "1",
            "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    store = Store(tmp_path, workload="raycluster", seed=1)
    assert len(store.results) == 4
    assert all(f.__class__.__name__ == "LoseRayPod"
               for r in store.results.values() for f in r.spec.plan.faults)
    capsys.readouterr()
    assert cli.main(argv) == 0  # all four from the store: no rate made of reused runs
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"4 runs of seed 1 (4 from {tmp_path}) in ") and "runs/s" not in last


@pytest.mark.parametrize(("families", "message"), [
    ("pod-los", "emu explore: --families: no plan family 'pod-los'; families: "
                "crash-after-writes, pause-before-writes,"),
    ("pod-loss", "emu explore: no plan to run: the plan families (pod-loss) generate none for "
                 "'unreachable', whose reference run had 0 call(s) by a process named like "
                 "'kuberay-operator' and 1 state transition(s)"),
])
def test_families_that_give_nothing_to_run_exit_2(
        families: str, message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a search of no run used to report "0 runs ... 0 distinct finding(s)" and exit 0
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML)
    assert cli.main(["explore", "-f", str(wl), "--families", families, "--budget", "3",
                     "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().startswith(message)


def test_a_workload_whose_families_generate_no_plan_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML.replace("kind: KnobSpace\n",
                                           "kind: KnobSpace\nfamilies: [pod-loss]\n"))
    assert cli.main(["explore", "-f", str(wl), "--budget", "3",
                     "--out", str(tmp_path / "out")]) == 2
    assert "no plan to run: the plan families (pod-loss) generate none for 'unreachable'" \
        in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_controller_the_reference_run_never_saw_call_is_noted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Setup.operator names no process of this world: four plan families were empty, silently
    wl = tmp_path / "fine.yaml"
    wl.write_text(UNREACHABLE_YAML.replace('states: ["2"]', 'states: ["1", "3"]'))
    assert cli.main(["explore", "-f", str(wl), "--budget", "2", "--seed", "1",
                     "--out", str(tmp_path / "out")]) == 0
    assert ("note: the reference run recorded no call by a process named like "
            "'kuberay-operator', so the crash-after-writes, pause-before-writes, lose-responses, "
            "perturbations families have no plan: check Setup.operator") \
        in capsys.readouterr().out
    from emu.explore.workload import builtin

    assert not explore(builtin("raycluster"), budget=1, seed=1, shrink_budget=0,
                       export=False).notes


def test_a_controller_module_not_on_the_path_says_where_it_is_looked_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "mine.yaml"
    wl.write_text(UNREACHABLE_YAML.replace("explore_worlds:no_controller", "mymod:install"))
    assert cli.main(["explore", "-f", str(wl), "--budget", "2",
                     "--out", str(tmp_path / "out")]) == 2
    assert ("raised: ModuleNotFoundError: Setup.install 'mymod:install': No module named "
            "'mymod' (it is imported from sys.path: add the folder that holds it to PYTHONPATH)"
            ) in capsys.readouterr().err


def test_a_finding_whose_shrink_ran_out_of_budget_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML.replace('states: ["2"]', 'states: ["1"]'))
    argv = ["explore", "-f", str(wl), "--budget", "12", "--seed", "1", "--shrink-budget", "1",
            "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 1  # knob value "3" breaks the goal
    out = capsys.readouterr().out
    assert "  shrunk: 1 runs, all of --shrink-budget: a larger one may shrink it further" in out
    assert cli.main([*argv[:-4], "--shrink-budget", "30", "--out", str(tmp_path / "o2")]) == 1
    assert "shrunk:" not in capsys.readouterr().out


def test_an_exported_test_is_ruff_clean_whatever_its_imports(tmp_path: Path) -> None:
    # A plan importing only from emu.faults leaves the imports sorted: the header's I001
    # exemption was then unused, and ruff (RUF100) failed the file once it was committed.
    import shutil

    from emu.explore.export import export_finding
    from emu.faults import Outage

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    spec = RunSpec({}, [Outage(at=1.0, endpoint="apiserver", duration=10.0)])
    paths = export_finding(tmp_path, unreachable(), spec, 1, "workload-goal", "never", 6.0)
    proc = subprocess.run([ruff, "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                           paths["test_file"]], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
