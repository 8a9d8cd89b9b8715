"""The seven fixed KubeRay bugs of tests/explore/test_reintroduced_bugs.py (and #715 of
test_explore_search.py), each as a workload, the invariant that shows it and a function that
puts the bug back into the port (monkeypatching; emu/kuberay itself is never changed): for
benchmarks/explore.py's "CPU seconds to the first finding", uniform against guided.

The workloads and plan families are those of the tests (what a user suspecting that kind of
fault would pick); the patches are the tests' own, written again here so the tests stay
self-contained.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import emu.kuberay.expectations as expectations
import emu.kuberay.raycluster as raycluster
import emu.kuberay.rayjob as rayjob
import emu.kuberay.rayservice as rayservice
from emu.explore.workload import Knob, Setup, Workload, builtin
from emu.invariants import (
    EventuallySteady,
    InitializingTimeoutHonoured,
    OneJobRunPerAttempt,
    OneLiveHead,
    SuspendedClusterHasNoPods,
)
from emu.runtime import Result


@attrs.frozen
class Bug:
    name: str
    workload: Callable[[], Workload]
    invariant: Any
    put_back: Callable[[pytest.MonkeyPatch], None]


def _715(mp: pytest.MonkeyPatch) -> None:
    async def always_satisfied(self: Any, namespace: str, name: str, group: str) -> bool:
        return True

    mp.setattr(expectations.RayClusterScaleExpectation, "is_satisfied", always_satisfied)


def _1420(mp: pytest.MonkeyPatch) -> None:
    def before(cached: str, serve_config_v2: str, serve_applications: Any) -> tuple[bool, str]:
        if cached == "":
            return True, "Nothing has been cached for the cluster."
        if cached != serve_config_v2:
            return True, "Current V2 Serve config doesn't match cached Serve config."
        return False, "Current V2 Serve config matches cached Serve config."

    mp.setattr(rayservice, "check_if_need_submit_serve_applications", before)


def _4141(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(raycluster, "should_skip_head_pod_restart", lambda instance: False)


def _3903(mp: pytest.MonkeyPatch) -> None:
    running = rayjob.RayJobReconciler._running

    async def before(self: Any, instance: Any, mode: str, now: float) -> Any:
        saved = copy.deepcopy(instance.get("status"))
        result, err, done = await running(self, instance, mode, now)
        if (instance.get("status") or {}).get("message") == \
                "Submitter completed but Ray job not found in RayCluster.":
            instance["status"] = saved
            return result, None, False
        return result, err, done

    mp.setattr(rayjob.RayJobReconciler, "_running", before)
    mp.setattr(rayjob, "check_submitter_finished_timeout_and_update_status_if_needed",
               lambda *args: False)
    mp.setattr(rayjob, "check_job_status_check_timeout_and_update_status_if_needed",
               lambda *args: False)


def _2217(mp: pytest.MonkeyPatch) -> None:
    should_delete_pod = raycluster.should_delete_pod

    def before(pod: Any, node_type: str) -> tuple[bool, str]:
        if ((pod.get("spec") or {}).get("restartPolicy") or "Always") == "Always":
            return False, "restartPolicy Always: KubeRay will not delete the Pod"
        return should_delete_pod(pod, node_type)

    mp.setattr(raycluster, "should_delete_pod", before)


def _1741(mp: pytest.MonkeyPatch) -> None:
    reconcile = raycluster.RayClusterReconciler.ray_cluster_reconcile

    async def before(self: Any, instance: Any) -> Any:
        if (instance.get("spec") or {}).get("suspend") and \
                (instance.get("status") or {}).get("state") == "suspended":
            return Result(), None
        return await reconcile(self, instance)

    mp.setattr(raycluster.RayClusterReconciler, "ray_cluster_reconcile", before)


def _4894(mp: pytest.MonkeyPatch) -> None:
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


def _one_replica_raycluster() -> Workload:
    return attrs.evolve(builtin("raycluster"), setup=Setup(operator_replicas=1, redis=True))


def _sidecar_rayjob() -> Workload:
    wl = builtin("rayjob")
    knobs = tuple(attrs.evolve(k, values=("SidecarMode", "K8sJobMode"))
                  if k.name == "submissionMode" else k for k in wl.knobs)
    return attrs.evolve(wl, manifests=wl.manifests_for({"submissionMode": "SidecarMode"}),
                        knobs=knobs, families=("pod-loss",))


def _toggling_raycluster() -> Workload:
    wl = builtin("raycluster")
    toggles = {"suspend": True, "unsuspend": False, "resuspend": True}
    knobs = tuple(attrs.evolve(k, values=(toggles[k.name], None)) if k.name in toggles else k
                  for k in wl.knobs)
    return attrs.evolve(wl, knobs=knobs, families=("outages",))


def _timeout_rayservice() -> Workload:
    wl = builtin("rayservice")
    manifests = copy.deepcopy(list(wl.manifests))
    manifests[0]["metadata"]["annotations"] = {"ray.io/initializing-timeout": "60s"}
    return attrs.evolve(wl, manifests=manifests, families=("serve-failures",), knobs=(
        *wl.knobs, Knob("suspend", "RayService", "spec.suspend", (True, None), at=50.0),
        Knob("unsuspend", "RayService", "spec.suspend", (False, None), at=80.0)))


def _families(name: str, *families: str) -> Callable[[], Workload]:
    return lambda: attrs.evolve(builtin(name), families=families)


def broad(workload: Workload) -> Workload:
    """``workload`` with every plan family (the default ones; and the opt-in ones when the bug
    needs one): what a user who suspects nothing in particular runs."""
    from emu.explore.plans import FAMILIES, OPT_IN

    if set(workload.families) & OPT_IN:
        return attrs.evolve(workload, families=tuple(FAMILIES))
    return attrs.evolve(workload, families=())


BUGS = (
    Bug("#715", _one_replica_raycluster, OneLiveHead(), _715),
    Bug("#1420", _families("rayservice", "pod-loss"), EventuallySteady(), _1420),
    Bug("#4141", _sidecar_rayjob, OneJobRunPerAttempt(), _4141),
    Bug("#3903", _families("rayjob", "pod-loss"), EventuallySteady(), _3903),
    Bug("#1741", _toggling_raycluster, SuspendedClusterHasNoPods(), _1741),
    Bug("#4894", _timeout_rayservice, InitializingTimeoutHonoured(), _4894),
    Bug("#2217", _families("raycluster", "pod-loss"), EventuallySteady(), _2217),
)
