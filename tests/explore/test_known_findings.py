"""The known findings shipped with the package (`emu.explore.known`) and the emulator's own
checks (`emu.explore.checks`): docs/findings.md says what the data says; a finding is classed
`emulator-suspect` when its run broke one of the checks, `kuberay` otherwise, `operator` for a
workload of your own; a shape no known finding has is `new`.

The docs/findings replays classifying as their ids is in test_findings_files.py (it replays
them anyway); a reintroduced bug reporting `new` is in test_reintroduced_bugs.py (#1741); the
--json fields are in test_explore_cli.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

import emu
from emu.explore.checks import EmulatorChecks, emulator_only
from emu.explore.export import pytest_source, replay_run
from emu.explore.faults import AtCall, CrashLeader, LoseRayPod, PauseLeader
from emu.explore.known import (
    KNOWN,
    by_id,
    classify,
    fault_roles,
    reported_status,
    world_facts,
)
from emu.explore.runner import RunSpec, world_options
from emu.explore.workload import builtin
from emu.faults import CoalesceEvents, Fault, LoseResponses, Pause

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _sections() -> dict[str, tuple[str, str]]:
    """docs/findings.md's ``## F<n>. title`` sections: id → (title, text)."""
    page = (DOCS / "findings.md").read_text()
    parts = re.split(r"^## (F\d+)\. (.*)$", page, flags=re.M)
    out = {}
    for i in range(1, len(parts), 3):
        text = parts[i + 2].split("\n## ", 1)[0]
        out[parts[i]] = (parts[i + 1], text)
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_page_and_the_data_list_the_same_findings_with_the_same_titles() -> None:
    sections = _sections()
    assert [k.id for k in KNOWN] == list(sections)
    for k in KNOWN:
        assert sections[k.id][0] == k.title, k.id


@pytest.mark.parametrize("known", KNOWN, ids=[k.id for k in KNOWN])
def test_a_known_findings_section_says_what_its_data_says(known: Any) -> None:
    text = _flat(_sections()[known.id][1])
    assert f"**What to do**: {known.mitigation}" in text
    for shape in known.shapes:
        if shape.mitigation:
            assert f"{shape.mitigation}" in text, (known.id, shape.variant)
    for go in known.go:
        path, _, rest = go.partition(" ")
        assert path.rsplit("/", 1)[-1] in text, (known.id, go)
        function = rest.split(" (", 1)[0].strip()
        if function and not function.startswith("("):
            assert function.rsplit(".", 1)[-1] in text, (known.id, go)
    for n in known.issues:
        assert f"#{n}" in text, (known.id, n)
    linked = set(re.findall(r"docs/findings/(test_\w+\.py)", text))
    assert linked == set(known.replays), known.id


@pytest.mark.parametrize("known", KNOWN, ids=[k.id for k in KNOWN])
def test_a_known_findings_section_gives_its_real_operator_verdict(known: Any) -> None:
    assert known.real, f"{known.id}: no verdict on the real operator in known.py"
    assert f"**On the real operator**: {known.real}" in _flat(_sections()[known.id][1])


def test_every_replay_file_belongs_to_exactly_one_known_finding() -> None:
    files = sorted(p.name for p in (DOCS / "findings").glob("test_*.py"))
    owners = [k.id for f in files for k in KNOWN if f in k.replays]
    assert len(owners) == len(files)
    assert sorted(f for k in KNOWN for f in k.replays) == files


def test_an_unknown_id_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no known finding 'F9'; the known ones: F1, F2"):
        by_id("F9")


def test_the_plans_faults_are_read_by_what_they_do() -> None:
    stall = AtCall(n=1, then=Pause(duration=30.0), verb="update_status", kind="RayJob",
                   caller="kuberay-operator")
    lost = AtCall(n=1, then=LoseResponses(verb="update_status", kind="RayCluster", count=1),
                  verb="update_status", kind="RayCluster")
    assert fault_roles([stall]) == {"operator-stall"}
    assert fault_roles([CrashLeader(), PauseLeader(at=3.0)]) == {"operator-crash",
                                                                 "operator-stall"}
    assert fault_roles([LoseRayPod(owner="j", how="node", duration=60.0)]) == {"head-loss",
                                                                               "node-loss"}
    assert fault_roles([lost, CoalesceEvents(kind="Pod")]) == {"lost-response", "watch-delay"}


def test_the_world_facts_follow_the_knobs_and_the_timed_changes() -> None:
    wl = builtin("rayjob")
    plain = world_facts(wl, {})
    assert plain["submissionMode"] == "K8sJobMode" and not plain["suspend"]
    assert plain["operatorReplicas"] == 2 and plain["kuberay"]
    facts = world_facts(wl, {"submissionMode": "SidecarMode", "backoffLimit": 1,
                             "activeDeadlineSeconds": 30, "suspend": True})
    assert facts["submissionMode"] == "SidecarMode" and facts["retries"]
    assert facts["activeDeadline"] and facts["suspend"]
    assert world_facts(builtin("raycluster"), {"gcsFaultTolerance": {
        "redisAddress": "redis:6379"}})["gcsFaultTolerance"]


def test_the_reported_status_is_read_from_the_invariants_and_the_goals_words() -> None:
    assert reported_status({"message": "RayJob default/j had jobDeploymentStatus Failed (reason "
                                       "AppFailed) with jobStatus SUCCEEDED, from t=40.100s"}) \
        == {"jobDeploymentStatus": "Failed", "reason": "AppFailed", "jobStatus": "SUCCEEDED"}
    assert reported_status({"message": "RayJob {'j': 'Initializing'} never reached "
                                       "status.jobDeploymentStatus in ['Complete']"}) \
        == {"jobDeploymentStatus": "Initializing"}


def _status_violation(reason: str, job_status: str) -> dict[str, Any]:
    return {"invariant": "rayjob-status-consistent", "at": 40.1,
            "objects": ["RayJob/default/demo-job"],
            "message": f"RayJob default/demo-job had jobDeploymentStatus Failed (reason {reason}) "
                       f"with jobStatus {job_status}, from t=40.100s"}


def test_the_same_invariant_is_told_apart_by_status_faults_and_facts() -> None:
    wl = builtin("rayjob")
    kill = [LoseRayPod(at=38.85, owner="demo-job", how="kill")]
    succeeded = _status_violation("AppFailed", "SUCCEEDED")
    running = _status_violation("AppFailed", "RUNNING")
    deadline = _status_violation("DeadlineExceeded", "SUCCEEDED")
    assert classify(wl, {}, kill, succeeded["invariant"], succeeded).known == "F4"
    assert classify(wl, {}, kill, running["invariant"], running).known == "F2"
    sidecar = classify(wl, {"submissionMode": "SidecarMode"}, kill, running["invariant"],
                       running)
    assert sidecar.known == "F2" and sidecar.mitigation and \
        sidecar.mitigation.startswith("None known")
    assert classify(wl, {"activeDeadlineSeconds": 30}, [], deadline["invariant"],
                    deadline).known == "F6"
    # the same report without the fault or the fact its known finding needs is new: a
    # status contradiction with no head lost is not F4, a deadline one without a deadline
    # is not F6; a new finding names where to start reading instead
    no_fault = classify(wl, {}, [], succeeded["invariant"], succeeded)
    assert (no_fault.known, no_fault.klass, no_fault.mitigation) == ("new", "kuberay", None)
    assert no_fault.go == ("ray-operator/controllers/ray/rayjob_controller.go "
                           "RayJobReconciler.Reconcile",)
    assert classify(wl, {}, [], deadline["invariant"], deadline).known == "new"


def test_a_steadiness_report_whose_run_had_two_heads_is_f1_not_f3() -> None:
    wl = builtin("rayjob")
    steady = {"invariant": "eventually-steady", "at": 100.0, "objects": ["RayJob/default/j"],
              "message": "RayJob default/j not steady at t=100.000s (jobDeploymentStatus "
                         "Initializing); expected ..."}
    heads = {"invariant": "one-live-head", "at": 64.0, "objects": ["RayCluster/default/j-x"],
             "message": "RayCluster default/j-x had 2 live head Pods"}
    knobs = {"submissionMode": "SidecarMode"}
    assert classify(wl, knobs, [PauseLeader(at=1.0)], "eventually-steady", steady,
                    [heads, steady]).known == "F1"
    assert classify(wl, knobs, [], "eventually-steady", steady, [steady]).known == "F3"


def test_a_run_that_broke_an_emulator_check_is_emulator_suspect_and_says_which() -> None:
    wl = builtin("rayjob")
    v = _status_violation("AppFailed", "SUCCEEDED")
    record = {"check": "loop-exception", "at": 3.0, "detail": "Exception in callback: boom"}
    verdict = classify(wl, {}, [LoseRayPod(owner="demo-job", how="kill")], v["invariant"], v,
                       [v], [record])
    assert (verdict.known, verdict.klass) == ("F4", "emulator-suspect")
    assert "loop-exception check: Exception in callback: boom" in verdict.basis
    assert verdict.to_json()["class"] == "emulator-suspect"


def test_a_workload_with_its_own_operator_is_classed_operator_and_never_kuberays() -> None:
    wl = builtin("rayjob")
    own = attrs.evolve(wl, setup=attrs.evolve(wl.setup, install="mine:start"))
    v = _status_violation("AppFailed", "SUCCEEDED")
    verdict = classify(own, {}, [LoseRayPod(owner="demo-job", how="kill")], v["invariant"], v)
    assert (verdict.known, verdict.klass, verdict.go) == ("new", "operator", ())
    assert "'mine:start'" in verdict.basis


@attrs.frozen
class _Skew(Fault):
    """A test's own fault type that models nothing real: flagged, so its findings are
    suspect."""

    emulator_only: ClassVar[str] = "the clock of one process runs backwards"

    def apply(self, sim: Any) -> None:
        return None


def test_a_fault_type_flagged_emulator_only_is_an_emulator_check() -> None:
    [record] = emulator_only([LoseRayPod(owner="j"), AtCall(then=_Skew())])
    assert record["check"] == "emulator-only-fault"
    assert "_Skew is emulator-only: the clock of one process runs backwards" in record["detail"]


def _checked_world(attach: bool) -> dict[str, Any]:
    from emu.runtime.controller import HOT_LOOP_RECONCILES

    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        checks = EmulatorChecks.attach(sim) if attach else None

        def boom() -> None:
            raise RuntimeError("a callback of the emulator broke")

        async def fails() -> None:
            raise RuntimeError("a task of the emulator failed")

        sim.loop.call_soon(boom)
        task: Any = sim.loop.create_task(fails())
        await sim.sleep(1.0)
        del task  # freed with its exception unread: reported by its destructor
        proc = sim.processes.start("ctl", lambda p: sim.sleep(100.0))
        try:
            {}["missing"]
        except KeyError as exc:
            proc.report_panic("controller c", "Thing default/x", exc)
        for i in range(HOT_LOOP_RECONCILES + 5):
            sim.trace.emit("ctl", "reconcile_started", controller="c", key="default/x",
                           worker=0)
            if i % 2:
                await sim.sleep(0.01)
        box["records"] = checks.finish() if checks is not None else []
        box["handler"] = sim.loop.get_exception_handler()
        box["digest"] = sim.trace.digest()

    emu.run(main, seed=1)
    return box


def test_the_checks_see_a_loop_exception_a_panic_and_a_hot_loop_without_changing_the_run(
        ) -> None:
    box = _checked_world(attach=True)
    checks = [r["check"] for r in box["records"]]
    assert checks == ["loop-exception", "reconcile-panic", "hot-loop", "loop-exception"], \
        box["records"]
    assert "a callback of the emulator broke" in box["records"][0]["detail"]
    assert "KeyError" in box["records"][1]["detail"]
    assert "controller c of ctl reconciled default/x over" in box["records"][2]["detail"]
    # a task's unread exception is placed at the run's end, whenever the collector saw it
    assert "Task exception was never retrieved" in box["records"][3]["detail"]
    assert "a task of the emulator failed" in box["records"][3]["detail"]
    assert box["records"][3]["at"] >= box["records"][2]["at"]
    assert box["handler"] is None  # given back
    assert box["digest"] == _checked_world(attach=False)["digest"]


def test_an_exported_test_says_its_known_id_class_and_what_to_do() -> None:
    wl = builtin("rayjob")
    v = _status_violation("AppFailed", "SUCCEEDED")
    plan = [LoseRayPod(at=38.85, owner="demo-job", how="kill")]
    verdict = classify(wl, {}, plan, v["invariant"], v)
    source = pytest_source(wl, RunSpec({}, plan), 1, v["invariant"], v["message"],
                           verdict=verdict)
    doc = _flat(source.split('"""')[1])
    assert "Known finding F4, class kuberay: A job that succeeded is reported Failed" in doc
    assert f"What to do: {by_id('F4').mitigation}" in doc
    compile(source, "exported.py", "exec")


def test_a_replay_with_a_broken_emulator_check_is_emulator_suspect_yet_still_f4() -> None:
    # F4's replay, with a fault of the plan whose callback raises inside the loop (as the
    # emulator's own bugs E3, E5 and E7 did): the same finding, now suspect
    module_plan = [LoseRayPod(at=38.85, owner="demo-job", node_type="head", how="kill")]

    @attrs.frozen
    class BrokenCallback(Fault):
        def apply(self, sim: Any) -> None:
            def boom() -> None:
                raise RuntimeError("the emulator's own callback failed")

            sim.loop.call_soon(boom)

    wl = builtin("rayjob")
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        box["found"], box["emulator"] = await replay_run(
            sim, wl, {}, [*module_plan, BrokenCallback(at=2.0)])

    emu.run(main, seed=1, **world_options(wl))
    [broken, *_] = [v for v in box["found"] if v["invariant"] == "rayjob-status-consistent"]
    verdict = classify(wl, {}, [*module_plan, BrokenCallback(at=2.0)], broken["invariant"],
                       broken, box["found"], box["emulator"])
    assert (verdict.known, verdict.klass) == ("F4", "emulator-suspect"), verdict
    assert "the emulator's own callback failed" in verdict.basis


def test_emu_explore_known_lists_every_known_finding_with_what_to_do(
        capsys: pytest.CaptureFixture[str]) -> None:
    import orjson

    from emu import cli

    assert cli.main(["explore", "--known"]) == 0
    text = capsys.readouterr().out
    for k in KNOWN:
        assert f"{k.id}. {k.title}\n" in text
        assert f"  avoid:  {k.mitigation}\n" in text
    assert cli.main(["explore", "--known", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["known"]
    assert [k["id"] for k in listed] == [k.id for k in KNOWN]
    assert listed[0]["links"] == list(KNOWN[0].links)
    assert cli.main(["explore", "--known", "rayjob", "--budget", "3"]) == 2
    assert ("--known lists the known findings and takes only --json, not --budget, WORKLOAD"
            in capsys.readouterr().err)


def test_the_text_report_says_known_class_and_what_to_do_in_three_lines() -> None:
    from emu.explore.cli import verdict_lines

    wl = builtin("rayjob")
    v = _status_violation("AppFailed", "SUCCEEDED")
    kill = [LoseRayPod(owner="demo-job", how="kill")]
    known = verdict_lines(classify(wl, {}, kill, v["invariant"], v))
    assert known == [
        "  known:  F4, Failed (AppFailed) beside SUCCEEDED after the head was lost "
        "(emu explore --known)",
        "  class:  kuberay (ray-operator/controllers/ray/rayjob_controller.go "
        "RayJobReconciler.Reconcile (Running: GetJobInfo not found with the submitter "
        "finished))",
        f"  avoid:  {by_id('F4').mitigation}"]
    record = {"check": "hot-loop", "at": 3.0, "detail": "controller raycluster ..."}
    suspect = verdict_lines(classify(wl, {}, kill, v["invariant"], v, [v], [record]))
    assert suspect[1] == ("  class:  emulator-suspect: the same run broke the emulator's "
                          "hot-loop check: controller raycluster ...")
    f5 = verdict_lines(classify(wl, {"backoffLimit": 1}, [], "retry-attempts-fenced", {
        "invariant": "retry-attempts-fenced", "message": "...", "objects": []}))
    assert f5[-1].startswith("  avoid:  None known in KubeRay's settings")


def test_a_real_hot_loop_breaks_the_hot_loop_check() -> None:
    # docs/findings.md E2's replay: the leader's RayCluster events coalesced for 20 s while the
    # RayJob finishes; its stale cache recreates what the garbage collector deletes, and the
    # emulator charges the loop virtual time (a documented deviation) until the events arrive
    from emu.faults import CoalesceEvents

    wl = builtin("rayjob")
    leader = "default/kuberay-operator-qzcxtfbltw-wg24z/kuberay-operator"
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        box["found"], box["emulator"] = await replay_run(
            sim, wl, {}, [CoalesceEvents(at=20.105, process=leader, kind="RayCluster",
                                         duration=20.0)])

    emu.run(main, seed=1, **world_options(wl))
    assert [r["check"] for r in box["emulator"]] == ["hot-loop"], box["emulator"]
    assert f"controller raycluster of {leader} reconciled default/demo-job-" \
        in box["emulator"][0]["detail"]


def test_attempts_overlapping_after_a_stalled_replica_are_f1_after_a_late_watch_f5() -> None:
    wl = builtin("rayjob")
    fenced = {"invariant": "retry-attempts-fenced", "at": 41.1, "objects": ["RayJob/default/j"],
              "message": "RayJob default/j had Pods of attempt 1 ... and attempt 2 ..."}
    stall = [AtCall(n=1, then=Pause(duration=30.0), verb="update_status", kind="RayJob")]
    late = [CoalesceEvents(at=1.1, kind="RayCluster", duration=20.0)]
    knobs = {"suspend": True, "unsuspend": False}
    assert classify(wl, knobs, stall, fenced["invariant"], fenced).known == "F1"
    assert classify(wl, knobs, late, fenced["invariant"], fenced).known == "F5"
