"""KubeRay recovery bugs fixed upstream, put back into the port by monkeypatching the ported
function (emu/kuberay/ itself is never changed): a small explore budget reports a finding the
unmodified port, same seed and budget, does not have. (#715 is in test_explore_search.py.)

Each search names the plan it needs by what it is (`budget_to_reach`), narrowed to the plan
family a user suspecting that kind of fault would pick (`Workload.families`), so the budget
stays small and the test survives changes to the generators' order.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from explore_worlds import budget_to_reach

import emu.kuberay.common.job as job_builders
import emu.kuberay.raycluster as raycluster
import emu.kuberay.rayjob as rayjob
import emu.kuberay.rayservice as rayservice
from emu.explore.faults import LoseRayPod, LoseSubmitter
from emu.explore.runner import RunResult, RunSpec
from emu.explore.search import explore
from emu.explore.workload import Knob, Workload, builtin
from emu.faults import FailServeDeployment
from emu.invariants import (
    EventuallySteady,
    InitializingTimeoutHonoured,
    OneJobRunPerAttempt,
    RayJobStatusConsistent,
    SuspendedClusterHasNoPods,
)
from emu.runtime import Result


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

    def before_1420(cached: str, serve_config_v2: str, serve_applications: Any
                    ) -> tuple[bool, str]:
        if cached == "":
            return True, "Nothing has been cached for the cluster."
        if cached != serve_config_v2:
            return True, "Current V2 Serve config doesn't match cached Serve config."
        return False, "Current V2 Serve config matches cached Serve config."

    monkeypatch.setattr(rayservice, "check_if_need_submit_serve_applications", before_1420)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #1420 put back ({budget} runs)"
    [(invariant, plan), *_] = sorted(new)
    assert invariant == "eventually-steady"
    assert "LoseRayPod(" in plan and "node_type='head'" in plan
    assert any("RayService default/rs not steady" in f.message
               for f in buggy.findings if repr(f.plan) == plan)


def _sidecar_rayjob() -> Workload:
    """The built-in RayJob in SidecarMode (the submitter is a container of the head Pod)."""
    wl = builtin("rayjob")
    knobs = tuple(attrs.evolve(k, values=("SidecarMode", "K8sJobMode"))
                  if k.name == "submissionMode" else k for k in wl.knobs)
    return attrs.evolve(wl, manifests=wl.manifests_for({"submissionMode": "SidecarMode"}),
                        knobs=knobs, families=("pod-loss",))


def test_kuberay_4141_sidecar_mode_head_recreated_runs_the_job_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # KubeRay #4130, fixed by PRs #4141 and #4234: in SidecarMode the submitter is a container
    # of the head Pod and submits without asking whether the job exists, so a recreated head
    # (empty GCS) ran the job again. The fix marks the RayJob's cluster with the annotation
    # ray.io/disable-provisioned-head-restart, and reconcilePods no longer recreates a
    # provisioned cluster's head (shouldSkipHeadPodRestart, raycluster_controller.go); the
    # RayJob fails instead ("Ray head pod not found."). Put the old behaviour back.
    wl = _sidecar_rayjob()

    def head_deleted_while_job_runs(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        return any(isinstance(f, LoseRayPod) and (f.node_type, f.how) == ("head", "delete")
                   and f.at >= _running_at(actions, "RayJob") + 1.0
                   and not spec.knob_map for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, head_deleted_while_job_runs)
    assert budget <= 30
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[OneJobRunPerAttempt()])
    explore(wl, out=tmp_path / "port", **search)
    monkeypatch.setattr(raycluster, "should_skip_head_pod_restart", lambda instance: False)
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

    running = rayjob.RayJobReconciler._running

    async def before_4080(self: Any, instance: Any, mode: str, now: float) -> Any:
        saved = copy.deepcopy(instance.get("status"))
        result, err, done = await running(self, instance, mode, now)
        if (instance.get("status") or {}).get("message") == \
                "Submitter completed but Ray job not found in RayCluster.":
            instance["status"] = saved  # the BadRequest only requeued
            return result, None, False
        return result, err, done

    monkeypatch.setattr(rayjob.RayJobReconciler, "_running", before_4080)
    monkeypatch.setattr(rayjob, "check_submitter_finished_timeout_and_update_status_if_needed",
                        lambda *args: False)
    monkeypatch.setattr(rayjob, "check_job_status_check_timeout_and_update_status_if_needed",
                        lambda *args: False)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #3903 put back ({budget} runs)"
    plans = {plan for invariant, plan in new if invariant == "eventually-steady"}
    assert any("node_type='head'" in plan and "how='delete'" in plan for plan in plans)
    assert any("RayJob default/demo-job not steady" in f.message
               and "jobDeploymentStatus Running" in f.message for f in buggy.findings)


def before_2579(ray_job: Any, submission_mode: str, gates: Any = job_builders.DEFAULTS
                ) -> list[str]:
    """`build_job_submit_command` as it was before KubeRay PR #2579: K8sJobMode submits
    blocking (``ray job submit`` follows the logs itself), without asking ``ray job status``
    first, so a retried submitter submits the same submission id again."""
    cmd = FIXED_SUBMIT_COMMAND(ray_job, submission_mode, gates)
    if "if" not in cmd:
        return cmd
    cmd = cmd[:cmd.index("if")] + cmd[cmd.index("then") + 1:]
    cmd.remove("--no-wait")
    return cmd[:cmd.index("fi")]


FIXED_SUBMIT_COMMAND = job_builders.build_job_submit_command


def test_kuberay_2579_a_retried_submitter_submits_the_job_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay PR #2579 (BuildJobSubmitCommand, job.go): the K8sJobMode submitter asks
    # `ray job status` first and submits only when the job is unknown, then follows its logs.
    # Before, it always ran `ray job submit --submission-id <id>`: a submitter Pod lost after
    # the job was submitted is retried by the Job controller, the retry's submit fails (the
    # id exists), every retry fails the same way, the Job fails, and the RayJob ends Failed
    # (SubmissionFailed) while its Ray job runs on and SUCCEEDS.
    wl = attrs.evolve(builtin("rayjob"), families=("pod-loss",))

    def submitter_lost_after_submitting(spec: RunSpec, actions: list[dict[str, Any]]) -> bool:
        running = min(a["t"] for a in actions if a["type"] == "transition"
                      and a["kind"] == "RayJob" and "RUNNING" in a["state"])
        return not spec.knob_map and any(
            isinstance(f, LoseSubmitter) and f.how == "pod" and f.at >= running
            for f in spec.plan.faults)

    budget = budget_to_reach(wl, 1, submitter_lost_after_submitting)
    assert budget <= 60
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[RayJobStatusConsistent()])
    port = explore(wl, **search)
    monkeypatch.setattr(job_builders, "build_job_submit_command", before_2579)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #2579 put back ({budget} runs)"
    assert any(invariant == "rayjob-status-consistent" and "LoseSubmitter(" in plan
               for invariant, plan in new)
    assert any("Failed (reason SubmissionFailed) with jobStatus SUCCEEDED" in f.message
               for f in buggy.findings)


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
    should_delete_pod = raycluster.should_delete_pod

    def before_2217(pod: Any, node_type: str) -> tuple[bool, str]:
        if ((pod.get("spec") or {}).get("restartPolicy") or "Always") == "Always":
            return False, "restartPolicy Always: KubeRay will not delete the Pod"
        return should_delete_pod(pod, node_type)

    monkeypatch.setattr(raycluster, "should_delete_pod", before_2217)
    buggy = explore(wl, **search)
    new = _findings(buggy) - _findings(port)
    assert new, f"the explorer found nothing new with #2217 put back ({budget} runs)"
    assert any(invariant == "eventually-steady" and "how='evict'" in plan
               for invariant, plan in new)
    assert any("RayCluster default/raycluster not steady" in f.message
               and "head not Ready" in f.message for f in buggy.findings)


def _toggling_raycluster() -> Workload:
    """The built-in RayCluster suspended at 30 s, resumed at 60 s and suspended again at 63 s,
    while the resumed Pods start (a queue admitting, then preempting): the toggles are the
    defaults, so every run makes them."""
    wl = builtin("raycluster")
    toggles = {"suspend": True, "unsuspend": False, "resuspend": True}
    knobs = tuple(attrs.evolve(k, values=(toggles[k.name], None)) if k.name in toggles else k
                  for k in wl.knobs)
    return attrs.evolve(wl, knobs=knobs, families=("outages",))


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
    wl = _toggling_raycluster()
    budget = budget_to_reach(wl, 1, lambda spec, _: not spec.knob_map)
    assert budget <= 2
    search = dict(budget=budget, seed=1, shrink_budget=0, export=False,
                  invariants=[SuspendedClusterHasNoPods()])
    port = explore(wl, **search)
    assert not port.findings
    reconcile = raycluster.RayClusterReconciler.ray_cluster_reconcile

    async def before_1741(self: Any, instance: Any) -> Any:
        if (instance.get("spec") or {}).get("suspend") and \
                (instance.get("status") or {}).get("state") == "suspended":
            return Result(), None
        return await reconcile(self, instance)

    monkeypatch.setattr(raycluster.RayClusterReconciler, "ray_cluster_reconcile", before_1741)
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
    wl = builtin("rayservice")
    manifests = copy.deepcopy(list(wl.manifests))
    manifests[0]["metadata"]["annotations"] = {"ray.io/initializing-timeout": "60s"}
    wl = attrs.evolve(wl, manifests=manifests, families=("serve-failures",), knobs=(
        *wl.knobs, Knob("suspend", "RayService", "spec.suspend", (True, None), at=50.0),
        Knob("unsuspend", "RayService", "spec.suspend", (False, None), at=80.0)))
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
    handle_suspend = rayservice.RayServiceReconciler.handle_suspend

    async def before_4894(self: Any, instance: Any) -> Any:
        conditions = (instance.get("status") or {}).get("conditions") or []
        kept = {c["type"]: copy.deepcopy(c) for c in conditions
                if c.get("type") in ("Ready", "UpgradeInProgress")}
        suspended = any(c.get("type") == "Suspended" and c.get("status") == "True"
                        for c in conditions)
        result, err = await handle_suspend(self, instance)
        if suspended and not (instance.get("spec") or {}).get("suspend"):
            status = instance["status"]
            status["conditions"] = [kept.get(c.get("type"), c) for c in status["conditions"]]
        return result, err

    monkeypatch.setattr(rayservice.RayServiceReconciler, "handle_suspend", before_4894)
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
