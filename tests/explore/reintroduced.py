"""Fixed KubeRay bugs put back into the port, as data: for each, the workload a user suspecting
that kind of fault would explore, the invariant that shows it, and the function that puts it
back (monkeypatching the ported function; emu/kuberay itself is never changed).

The one source of the patches: tests/explore/test_reintroduced_bugs.py (and #715 in
test_explore_search.py) check that a small search finds each, and benchmarks/explore_bugs.py
measures the CPU seconds to the first finding, uniform against guided (it puts this folder on
``sys.path``, as the benchmarks do for tests/kuberay).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import emu.kuberay.common.job as job_builders
import emu.kuberay.expectations as expectations
import emu.kuberay.raycluster as raycluster
import emu.kuberay.rayjob as rayjob
import emu.kuberay.rayservice as rayservice
from emu.explore.traffic import NoRefusalAfterSwitch
from emu.explore.workload import Knob, Setup, Workload, builtin
from emu.invariants import (
    EventuallySteady,
    InitializingTimeoutHonoured,
    OneJobRunPerAttempt,
    OneLiveHead,
    RayJobStatusConsistent,
    SuspendedClusterHasNoPods,
)
from emu.runtime import Result


@attrs.frozen
class Bug:
    name: str
    workload: Callable[[], Workload]
    invariant: Any
    put_back: Callable[[pytest.MonkeyPatch], None]


# -- the patches -----------------------------------------------------------------------------


def put_back_715(mp: pytest.MonkeyPatch) -> None:
    """#715 (PR #2150): reconcilePods trusts the informer cache alone (no scale
    expectations)."""
    async def always_satisfied(self: Any, namespace: str, name: str, group: str) -> bool:
        return True

    mp.setattr(expectations.RayClusterScaleExpectation, "is_satisfied", always_satisfied)


def put_back_1420(mp: pytest.MonkeyPatch) -> None:
    """#1420: checkIfNeedSubmitServeApplications submits only when nothing is cached or the
    cached config differs (not when the cluster reports no applications)."""
    def before(cached: str, serve_config_v2: str, serve_applications: Any) -> tuple[bool, str]:
        if cached == "":
            return True, "Nothing has been cached for the cluster."
        if cached != serve_config_v2:
            return True, "Current V2 Serve config doesn't match cached Serve config."
        return False, "Current V2 Serve config matches cached Serve config."

    mp.setattr(rayservice, "check_if_need_submit_serve_applications", before)


def put_back_4141(mp: pytest.MonkeyPatch) -> None:
    """#4130 (PRs #4141, #4234): a provisioned RayJob cluster's head is recreated."""
    mp.setattr(raycluster, "should_skip_head_pod_restart", lambda instance: False)


def put_back_3903(mp: pytest.MonkeyPatch) -> None:
    """#3860/#3903 (PR #4080): Running, GetJobInfo "not found" after the submitter finished
    only requeues; neither later net (#4091, #4916) exists."""
    running = rayjob.RayJobReconciler._running

    async def before(self: Any, instance: Any, mode: str, now: float) -> Any:
        saved = copy.deepcopy(instance.get("status"))
        result, err, done = await running(self, instance, mode, now)
        if (instance.get("status") or {}).get("message") == \
                "Submitter completed but Ray job not found in RayCluster.":
            instance["status"] = saved  # the BadRequest only requeued
            return result, None, False
        return result, err, done

    mp.setattr(rayjob.RayJobReconciler, "_running", before)
    mp.setattr(rayjob, "check_submitter_finished_timeout_and_update_status_if_needed",
               lambda *args: False)
    mp.setattr(rayjob, "check_job_status_check_timeout_and_update_status_if_needed",
               lambda *args: False)


def put_back_2217(mp: pytest.MonkeyPatch) -> None:
    """#2125 (PR #2217): shouldDeletePod keeps every restartPolicy Always Pod, even Failed."""
    should_delete_pod = raycluster.should_delete_pod

    def before(pod: Any, node_type: str) -> tuple[bool, str]:
        if ((pod.get("spec") or {}).get("restartPolicy") or "Always") == "Always":
            return False, "restartPolicy Always: KubeRay will not delete the Pod"
        return should_delete_pod(pod, node_type)

    mp.setattr(raycluster, "should_delete_pod", before)


def put_back_1741(mp: pytest.MonkeyPatch) -> None:
    """PR #1741: Reconcile returns early once spec.suspend and state suspended."""
    reconcile = raycluster.RayClusterReconciler.ray_cluster_reconcile

    async def before(self: Any, instance: Any) -> Any:
        if (instance.get("spec") or {}).get("suspend") and \
                (instance.get("status") or {}).get("state") == "suspended":
            return Result(), None
        return await reconcile(self, instance)

    mp.setattr(raycluster.RayClusterReconciler, "ray_cluster_reconcile", before)


def put_back_4894(mp: pytest.MonkeyPatch) -> None:
    """#4892 (PR #4894): handleSuspend's resume keeps Ready (and UpgradeInProgress) as they
    were."""
    handle_suspend = rayservice.RayServiceReconciler.handle_suspend

    async def before(self: Any, instance: Any) -> Any:
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

    mp.setattr(rayservice.RayServiceReconciler, "handle_suspend", before)


def put_back_2579(mp: pytest.MonkeyPatch) -> None:
    """PR #2579: BuildJobSubmitCommand without the ``ray job status`` check — K8sJobMode
    submits blocking (``ray job submit`` follows the logs itself), so a retried submitter
    submits the same submission id again."""
    fixed = job_builders.build_job_submit_command

    def before(ray_job: Any, submission_mode: str, gates: Any = job_builders.DEFAULTS
               ) -> list[str]:
        cmd = fixed(ray_job, submission_mode, gates)
        if "if" not in cmd:
            return cmd
        cmd = cmd[:cmd.index("if")] + cmd[cmd.index("then") + 1:]
        cmd.remove("--no-wait")
        return cmd[:cmd.index("fi")]

    mp.setattr(job_builders, "build_job_submit_command", before)


def put_back_3642(mp: pytest.MonkeyPatch) -> None:
    """PR #3642: no checkTransitionGracePeriodAndUpdateStatusIfNeeded — a RayJob whose Ray job
    ended waits for its submitter to finish, for ever if the submitter hangs."""
    mp.setattr(rayjob, "check_transition_grace_period_and_update_status_if_needed",
               lambda *args: False)


def put_back_730(mp: pytest.MonkeyPatch) -> None:
    """PR #730: getAndCheckServeStatus says ready as soon as the applications are listed
    (DEPLOYING included), so the serve Service moves to a cluster that cannot answer yet."""
    checked = rayservice.get_and_check_serve_status

    async def before(dashboard: Any) -> tuple[bool, dict[str, Any]]:
        _ready, apps = await checked(dashboard)
        return bool(apps), apps

    mp.setattr(rayservice, "get_and_check_serve_status", before)


# -- the workloads ---------------------------------------------------------------------------


def one_replica_raycluster() -> Workload:
    return attrs.evolve(builtin("raycluster"), setup=Setup(operator_replicas=1, redis=True))


def sidecar_rayjob() -> Workload:
    """The built-in RayJob in SidecarMode (the submitter is a container of the head Pod)."""
    wl = builtin("rayjob")
    knobs = tuple(attrs.evolve(k, values=("SidecarMode", "K8sJobMode"))
                  if k.name == "submissionMode" else k for k in wl.knobs)
    return attrs.evolve(wl, manifests=wl.manifests_for({"submissionMode": "SidecarMode"}),
                        knobs=knobs, families=("pod-loss",))


def toggling_raycluster() -> Workload:
    """The built-in RayCluster suspended at 30 s, resumed at 60 s and suspended again at 63 s,
    while the resumed Pods start (a queue admitting, then preempting): the toggles are the
    defaults, so every run makes them."""
    wl = builtin("raycluster")
    toggles = {"suspend": True, "unsuspend": False, "resuspend": True}
    knobs = tuple(attrs.evolve(k, values=(toggles[k.name], None)) if k.name in toggles else k
                  for k in wl.knobs)
    return attrs.evolve(wl, knobs=knobs, families=("outages",))


def timeout_rayservice() -> Workload:
    """The built-in RayService annotated ``ray.io/initializing-timeout: 60s``, suspended at
    50 s and resumed at 80 s (toggles a user suspecting suspend/resume adds), with the opt-in
    family of Serve applications that fail to deploy."""
    wl = builtin("rayservice")
    manifests = copy.deepcopy(list(wl.manifests))
    manifests[0]["metadata"]["annotations"] = {"ray.io/initializing-timeout": "60s"}
    return attrs.evolve(wl, manifests=manifests, families=("serve-failures",), knobs=(
        *wl.knobs, Knob("suspend", "RayService", "spec.suspend", (True, None), at=50.0),
        Knob("unsuspend", "RayService", "spec.suspend", (False, None), at=80.0)))


def upgrading_rayservice() -> Workload:
    """The built-in RayService with its cluster spec change at 40 s as the default (a user who
    suspects upgrades), with the opt-in serve-failures family (a slow deployment)."""
    return attrs.evolve(builtin("rayservice"), families=("serve-failures",), knobs=(
        Knob("clusterSpecChange", "RayService", "spec.rayClusterConfig.rayVersion",
             ("2.47.0", None), at=40.0),))


def families(name: str, *names: str) -> Callable[[], Workload]:
    return lambda: attrs.evolve(builtin(name), families=names)


def broad(workload: Workload) -> Workload:
    """``workload`` with every plan family (the default ones; and the opt-in ones when the bug
    needs one): what a user who suspects nothing in particular runs."""
    from emu.explore.plans import FAMILIES, OPT_IN

    if set(workload.families) & OPT_IN:
        return attrs.evolve(workload, families=tuple(FAMILIES))
    return attrs.evolve(workload, families=())


BUGS = (
    Bug("#715", one_replica_raycluster, OneLiveHead(), put_back_715),
    Bug("#1420", families("rayservice", "pod-loss"), EventuallySteady(), put_back_1420),
    Bug("#4141", sidecar_rayjob, OneJobRunPerAttempt(), put_back_4141),
    Bug("#3903", families("rayjob", "pod-loss"), EventuallySteady(), put_back_3903),
    Bug("#1741", toggling_raycluster, SuspendedClusterHasNoPods(), put_back_1741),
    Bug("#4894", timeout_rayservice, InitializingTimeoutHonoured(), put_back_4894),
    Bug("#2217", families("raycluster", "pod-loss"), EventuallySteady(), put_back_2217),
    Bug("#2579", families("rayjob", "pod-loss"), RayJobStatusConsistent(), put_back_2579),
    Bug("#3642", families("rayjob", "pod-loss"), RayJobStatusConsistent(), put_back_3642),
    Bug("#730", upgrading_rayservice, NoRefusalAfterSwitch(), put_back_730),
)
