"""`LoseSubmitter`: the RayJob's submitter Pod (or its Job) lost, found when the fault fires."""

from __future__ import annotations

import pytest

from emu.explore import plans
from emu.explore.faults import LoseSubmitter
from emu.explore.known import classify
from emu.explore.runner import RunSpec, run_one
from emu.explore.workload import builtin


def test_an_unknown_way_to_lose_the_submitter_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="LoseSubmitter.how is pod, job or hang, not 'node'"):
        LoseSubmitter(owner="demo-job", how="node").apply(None)  # type: ignore[arg-type]


def test_the_submitter_pod_is_found_when_the_fault_fires_and_nothing_happens_without_one() -> None:
    wl = builtin("rayjob")
    # the job runs from ~20 s: its submitter follows the logs, and its Pod is deleted
    ran = run_one(wl, RunSpec(plan=[LoseSubmitter(at=25.0, owner="demo-job")]))
    assert [p.split("(")[0] for p in ran.performed] == ["LoseSubmitter", "DeletePod"]
    assert "name='demo-job-" in ran.performed[1]
    assert not ran.violations  # the retried submitter asks `ray job status` first (#2579)
    # before the submitter Job exists (the RayJob initializes until ~17 s): nothing to lose
    early = run_one(wl, RunSpec(plan=[LoseSubmitter(at=5.0, owner="demo-job", how="job")]))
    assert early.performed == ()
    assert early.unperformed[0]["why"] == "no submitter Job 'demo-job'"


def test_the_pod_loss_family_deletes_the_submitter_job_and_the_stuck_rayjob_is_f8() -> None:
    wl = builtin("rayjob")
    ref = run_one(wl, RunSpec(), seed=1, record=True)
    deletions = [p for p in plans.pod_loss_at_transitions(wl, list(ref.actions))
                 if any(isinstance(f, LoseSubmitter) and f.how == "job" for f in p)]
    assert deletions, "the pod-loss family generates no deletion of the submitter Job"
    # the first transition after the Job exists: the RayJob is Running, the job runs
    plan = next(p for p in deletions if 17.5 < p.faults[0].at < 40.0)
    ran = run_one(wl, RunSpec(plan=plan), seed=1)
    broken = [v for v in ran.violations if v["invariant"] == "rayjob-submitter-recovered"]
    assert broken, ran.violations
    assert {v["invariant"] for v in ran.violations} == {
        "rayjob-submitter-recovered", "eventually-steady", "workload-goal"}
    for v in ran.violations:  # the stuck RayJob's liveness reports are the same finding
        verdict = classify(wl, {}, plan, v["invariant"], v, ran.violations, ran.emulator)
        assert (verdict.known, verdict.klass) == ("F8", "kuberay"), (v, verdict)
