"""KubeRay recovery bugs fixed upstream, put back into the port by monkeypatching the ported
function (emu/kuberay/ itself is never changed): a small explore budget reports a finding the
unmodified port, same seed and budget, does not have. (#715 is in test_explore_search.py.) The
patches and workloads are `reintroduced`'s, which benchmarks/explore_bugs.py times too.

Each search names the plan it needs by what it is (`budget_to_reach`), narrowed to the plan
family a user suspecting that kind of fault would pick (`Workload.families`), so the budget
stays small and the test survives changes to the generators' order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import reintroduced
from explore_worlds import budget_to_reach

from emu.explore.faults import LoseRayPod, LoseSubmitter
from emu.explore.runner import RunResult, RunSpec
from emu.explore.search import explore
from emu.explore.traffic import NoRefusalAfterSwitch
from emu.explore.workload import builtin
from emu.faults import FailServeDeployment, SlowServeDeployment
from emu.invariants import (
    EventuallySteady,
    InitializingTimeoutHonoured,
    OneJobRunPerAttempt,
    RayJobStatusConsistent,
    SuspendedClusterHasNoPods,
)


def _findings(result: Any) -> set[tuple[str, str]]:
    return {(f.invariant, repr(f.plan)) for f in result.findings}


def _running_at(actions: list[dict[str, Any]], kind: str) -> float:
    return min(a["t"] for a in actions
               if a["type"] == "transition" and a["kind"] == kind and "Running" in a["state"])


def test_kuberay_1420_serve_apps_not_recreated_after_a_head_restart_without_gcs_ft(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay PR #1420: checkIfNeedSubmitServeApplications (rayservice_controller.go) asked
    # for a Serve submission only when nothing was cached for the cluster or the cached config
    # differed from serveConfigV2. A head Pod recreated without GCS FT comes back with no Serve
    # applications while the cache still matches, so nothing was ever submitted again and the
    # RayService never served again. The fix also submits when the cluster reports none.
    wl = attrs.evolve(builtin("rayservice"), families=("pod-loss",))

    def head_deleted_while_running(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        return any(isinstance(f, LoseRayPod) and (f.node_type, f.how) == ("head", "delete")
                   and f.at >= _running_at(actions, "RayService") for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, head_deleted_while_running)
    assert budget <= 30
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[EventuallySteady()])
    port = explore(wl, **search)

    reintroduced.put_back_1420(monkeypatch)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #1420 put back ({budget} runs)"
    [(invariant, plan), *_] = sorted(new)
    assert invariant == "eventually-steady"
    assert "LoseRayPod(" in plan and "node_type='head'" in plan
    assert any("RayService default/rs not steady" in f.message
               for f in buggy.findings if repr(f.plan) == plan)


def test_kuberay_4141_sidecar_mode_head_recreated_runs_the_job_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # KubeRay #4130, fixed by PRs #4141 and #4234: in SidecarMode the submitter is a container
    # of the head Pod and submits without asking whether the job exists, so a recreated head
    # (empty GCS) ran the job again. The fix marks the RayJob's cluster with the annotation
    # ray.io/disable-provisioned-head-restart, and reconcilePods no longer recreates a
    # provisioned cluster's head (shouldSkipHeadPodRestart, raycluster_controller.go); the
    # RayJob fails instead ("Ray head pod not found."). Put the old behaviour back.
    wl = reintroduced.sidecar_rayjob()

    def head_deleted_while_job_runs(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        return any(isinstance(f, LoseRayPod) and (f.node_type, f.how) == ("head", "delete")
                   and f.at >= _running_at(actions, "RayJob") + 1.0
                   and not spec.knob_map for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, head_deleted_while_job_runs)
    assert budget <= 30
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[OneJobRunPerAttempt()])
    explore(wl, out=tmp_path / "port", **search)
    reintroduced.put_back_4141(monkeypatch)
    buggy = explore(wl, out=tmp_path / "buggy", **search)
    assert buggy.findings, f"the explorer found nothing with #4141 put back ({budget} runs)"
    # the run that deletes the provisioned head: twice with the bug, once in the port
    twice = {_key(r) for r in _runs(tmp_path / "buggy") if r.violations}
    port_twice = {_key(r) for r in _runs(tmp_path / "port") if r.violations}
    new = twice - port_twice
    assert new, "no run broke one-job-run-per-attempt with the bug that did not without it"
    assert all("node_type='head'" in plan and "how='delete'" in plan for plan in new)


def test_kuberay_3903_rayjob_running_forever_after_its_head_pod_is_deleted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay #3860/#3903, fixed by PR #4080: in K8sJobMode a head Pod deleted while the job
    # ran comes back with an empty GCS; the submitter's log stream ends and the submitter Job
    # completes, GetJobInfo on the new head answers "not found" (BadRequest), and
    # RayJobReconciler.Reconcile (rayjob_controller.go, Running) only requeued: the RayJob
    # stayed Running and its RayCluster leaked. #4080 fails it ("Submitter completed but Ray
    # job not found in RayCluster."). Two later nets catch the same state too and did not
    # exist then: checkSubmitterFinishedTimeoutAndUpdateStatusIfNeeded (#4091, 30 s after the
    # submitter finished) and checkJobStatusCheckTimeoutAndUpdateStatusIfNeeded (#4916, 300 s
    # of failing status checks). Put the Running branch back as it was before #4080.
    wl = attrs.evolve(builtin("rayjob"), families=("pod-loss",))

    def head_deleted_while_job_runs(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        return not spec.knob_map and any(
            isinstance(f, LoseRayPod) and (f.node_type, f.how) == ("head", "delete")
            and f.at >= _running_at(actions, "RayJob") + 1.0 for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, head_deleted_while_job_runs)
    assert budget <= 30
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[EventuallySteady()])
    port = explore(wl, **search)

    reintroduced.put_back_3903(monkeypatch)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #3903 put back ({budget} runs)"
    plans = {plan for invariant, plan in new if invariant == "eventually-steady"}
    assert any("node_type='head'" in plan and "how='delete'" in plan for plan in plans)
    assert any("RayJob default/demo-job not steady" in f.message
               and "jobDeploymentStatus Running" in f.message for f in buggy.findings)


def _submitter_fault_once_running(how: str) -> Callable[[RunSpec, list[dict[str, Any]]], bool]:
    """The first knob-free plan with a ``LoseSubmitter(how=how)`` at or after the RayJob's
    RUNNING transition."""
    def reached(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        running = min(a["t"] for a in actions if a["type"] == "transition"
                      and a["kind"] == "RayJob" and "RUNNING" in a["state"])
        return not spec.knob_map and any(
            isinstance(f, LoseSubmitter) and f.how == how and f.at >= running
            for f in spec.plan.faults)
    return reached


def test_kuberay_2579_a_retried_submitter_submits_the_job_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay PR #2579 (BuildJobSubmitCommand, job.go): the K8sJobMode submitter asks
    # `ray job status` first and submits only when the job is unknown, then follows its logs.
    # Before, it always ran `ray job submit --submission-id <id>`: a submitter Pod lost after
    # the job was submitted is retried by the Job controller, the retry's submit fails (the
    # id exists), every retry fails the same way, the Job fails, and the RayJob ends Failed
    # (SubmissionFailed) while its Ray job runs on and SUCCEEDS.
    wl = attrs.evolve(builtin("rayjob"), families=("pod-loss",))

    budget = budget_to_reach(wl, 1, _submitter_fault_once_running("pod"))
    assert budget <= 60
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[RayJobStatusConsistent()])
    port = explore(wl, **search)
    reintroduced.put_back_2579(monkeypatch)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #2579 put back ({budget} runs)"
    assert any(invariant == "rayjob-status-consistent" and "LoseSubmitter(" in plan
               for invariant, plan in new)
    assert any("Failed (reason SubmissionFailed) with jobStatus SUCCEEDED" in f.message
               for f in buggy.findings)


def test_kuberay_3642_a_hung_submitter_keeps_a_finished_rayjob_running_for_ever(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay PR #3642 (checkTransitionGracePeriodAndUpdateStatusIfNeeded,
    # rayjob_controller.go): since PR #1919 a RayJob is Complete only once its submitter
    # finished too; a submitter that never exits after the Ray job ended (a hung
    # `ray job logs --follow`) kept it Running for ever. The fix ends it 300 s after Ray's end
    # time. Put the old Running back (no grace period); LoseSubmitter(how='hang') freezes the
    # submitter's processes, its Pod Running all the while.
    wl = attrs.evolve(builtin("rayjob"), families=("pod-loss",))

    budget = budget_to_reach(wl, 1, _submitter_fault_once_running("hang"))
    assert budget <= 60
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[RayJobStatusConsistent()])
    port = explore(wl, **search)
    reintroduced.put_back_3642(monkeypatch)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #3642 put back ({budget} runs)"
    assert any(invariant == "rayjob-status-consistent" and "how='hang'" in plan
               for invariant, plan in new)
    assert any("stayed Running with jobStatus SUCCEEDED" in f.message for f in buggy.findings)


def test_kuberay_2217_an_evicted_head_is_never_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay #2125, fixed by PR #2217: shouldDeletePod (raycluster_controller.go) returned
    # "keep" for every Pod whose restartPolicy is Always, trusting the kubelet to restart it.
    # A Pod the kubelet evicts (node pressure) is Failed for good whatever its restartPolicy,
    # so an evicted head (restartPolicy Always by default) was never deleted nor replaced:
    # the RayCluster stayed headless. The fix deletes Failed and Succeeded Pods first. Put
    # the old early return back. The explorer needed a fault it lacked for this:
    # LoseRayPod(how='evict'), in the pod-loss family.
    wl = attrs.evolve(builtin("raycluster"), families=("pod-loss",))

    def head_evicted_once_ready(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        ready = min(a["t"] for a in actions if a["type"] == "transition"
                    and a["kind"] == "RayCluster" and "ready" in a["state"])
        return not spec.knob_map and any(
            isinstance(f, LoseRayPod) and (f.node_type, f.how) == ("head", "evict")
            and f.at >= ready for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, head_evicted_once_ready)
    assert budget <= 40
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[EventuallySteady()])
    port = explore(wl, **search)
    reintroduced.put_back_2217(monkeypatch)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #2217 put back ({budget} runs)"
    assert any(invariant == "eventually-steady" and "how='evict'" in plan
               for invariant, plan in new)
    assert any("RayCluster default/raycluster not steady" in f.message
               and "head not Ready" in f.message for f in buggy.findings)


def test_kuberay_1741_a_quickly_undone_resume_leaves_pods_running_under_suspended(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay PR #1741 ("`suspend` is not a stateless operation"): RayClusterReconciler.
    # Reconcile (raycluster_controller.go) returned early when spec.suspend was true and
    # status.state was already suspended. Resume a suspended cluster (its Pods are created)
    # and suspend it again before the state leaves suspended: every later pass was skipped,
    # so the resumed Pods ran for good under a status saying suspended. The fix reconciles
    # anyway, and reconcilePods deletes them. Put the early return back. No fault is needed:
    # the knob space's toggles reach it, and `suspended-cluster-has-no-pods` notices (the
    # goal, state suspended, is reached, so eventual steadiness alone never would).
    wl = reintroduced.toggling_raycluster()
    budget = budget_to_reach(wl, 1, lambda spec, _: not spec.knob_map)
    assert budget <= 2
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[SuspendedClusterHasNoPods()])
    port = explore(wl, **search)
    assert not port.findings
    reintroduced.put_back_1741(monkeypatch)
    buggy = explore(wl, **search)
    assert buggy.findings, f"the explorer found nothing with #1741 put back ({budget} runs)"
    [finding, *_] = buggy.findings
    assert finding.invariant == "suspended-cluster-has-no-pods"
    assert "RayCluster default/raycluster says suspended" in finding.message
    assert "raycluster-head-" in finding.message
    # a bug no known finding describes is reported as new, KubeRay's as ported, with the
    # reconciler to start reading and no mitigation claimed
    assert finding.verdict is not None
    assert (finding.verdict.known, finding.verdict.klass) == ("new", "kuberay")
    assert finding.verdict.mitigation is None
    assert any("raycluster_controller.go" in go for go in finding.verdict.go)


TIMEOUT = "rayservice-initializing-timeout"


def test_kuberay_4894_a_resumed_rayservice_that_never_gets_ready_never_times_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay #4892, fixed by PR #4894: on resume (spec.suspend back to false),
    # RayServiceReconciler.handleSuspend (rayservice_controller.go) flipped Suspended to
    # False but left Ready at reason SuspendComplete; markFailedOnInitializingTimeout acts only
    # on reason Initializing, so a resumed RayService whose new cluster never became ready
    # (here its Serve application fails to deploy) waited forever despite
    # ray.io/initializing-timeout. The fix re-arms Ready (and UpgradeInProgress) as
    # Initializing. Put the old resume back: keep both conditions as they were.
    #
    # The built-in rayservice workload has no suspend toggles: its goal (serviceStatus
    # Running) cannot say "suspended", so a lone suspend would miss it in every run. A user
    # who suspects suspend/resume adds them, with the timeout annotation, and names the
    # opt-in family of Serve applications that fail to deploy.
    wl = reintroduced.timeout_rayservice()
    resume = 80.0

    def app_fails_before_the_resume(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        return not spec.knob_map and any(
            isinstance(f, FailServeDeployment)
            and _running_at(actions, "RayService") <= f.at < resume for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, app_fails_before_the_resume)
    assert budget <= 30
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[InitializingTimeoutHonoured()])
    port = explore(wl, **search)
    # a Serve application that never deploys misses the workload's goal in every run; the
    # port ends the initialization with InitializingTimeout, as the annotation asks
    assert TIMEOUT not in {f.invariant for f in port.findings}
    reintroduced.put_back_4894(monkeypatch)
    buggy = explore(wl, **search)
    found = [f for f in buggy.findings if f.invariant == TIMEOUT]
    assert found, f"the explorer found nothing with #4894 put back ({budget} runs)"
    [finding, *_] = found
    assert "RayService default/rs, resumed at" in finding.message
    assert "reason SuspendComplete" in finding.message
    assert "FailServeDeployment(" in repr(finding.plan)


def _runs(out: Path) -> list[RunResult]:
    lines = (out / "runs.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in lines]
    return [RunResult.from_dict(item) for item in items if "spec" in item]


def _key(r: RunResult) -> str:
    return repr(r.spec.plan) + repr(sorted(r.spec.knob_map.items()))


def test_kuberay_730_the_serve_service_switched_before_the_new_apps_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay PR #730: the serve Service is switched to the pending cluster only once
    # getAndCheckServeStatus (rayservice_controller.go) finds every Serve application RUNNING.
    # Before, a pending cluster whose applications were merely listed (still DEPLOYING) was
    # switched to and promoted: the users' requests went to a cluster that could not answer
    # while the old one still could. The built-in rayservice workload sends requests
    # (Setup.traffic); a slow deployment on the new cluster (the opt-in serve-failures family)
    # during a cluster spec change opens the window. A user who suspects upgrades makes the
    # upgrade the default (so the single-fault plans have it) and names that opt-in family.
    wl = reintroduced.upgrading_rayservice()

    def slow_deploy_during_an_upgrade(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        return not spec.knob_map and bool(spec.plan.faults) and all(
            isinstance(f, SlowServeDeployment)
            and _running_at(actions, "RayService") <= f.at <= 40.0 for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, slow_deploy_during_an_upgrade)
    assert budget <= 30
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[NoRefusalAfterSwitch()])
    port = explore(wl, **search)
    assert "rayservice-no-refused-requests-after-switch" not in {
        f.invariant for f in port.findings}
    reintroduced.put_back_730(monkeypatch)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #730 put back ({budget} runs)"
    assert {invariant for invariant, _ in new} == {"rayservice-no-refused-requests-after-switch"}
    assert any("(head Pod Ready)" in f.message and "which was still ready" in f.message
               for f in buggy.findings)
