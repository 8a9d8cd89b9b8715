"""The mitigations `emu.explore.known` ships are checked on the findings' own replays: the same
plan, with the change the mitigation asks for, no longer breaks the invariant — and the fault
still acted (the plan was performed, the job was run), so the check cannot pass by missing its
window.

F1's (``ENABLE_DETERMINISTIC_HEAD_POD_NAME=true`` on the operator), F2's (GCS fault tolerance
on: the restarted head reads the job table back) and F3's (K8sJobMode; or, keeping SidecarMode,
``preRunningDeadlineSeconds``, which fails the RayJob instead of leaving it wedged). F4 names
the same GCS fault tolerance; its window (the head lost between the job's end and KubeRay
seeing the submitter finish) moves with the Redis Pod's start, so it is not replayed here.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

import emu
from emu.explore.known import by_id
from emu.explore.runner import RunSpec, play, prepare, world_options

FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings"
RESOURCES = {"limits": {"cpu": "100m", "memory": "512Mi"},
             "requests": {"cpu": "100m", "memory": "512Mi"}}


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"mitigated_{name}", FINDINGS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replay(module: ModuleType, workload: Any, plan: Any,
            env: dict[str, str] | None = None,
            knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        reasons: list[str] = []
        box["reasons"] = reasons

        def on_write(ev: Any) -> None:  # every RayJob status reason written, in order
            if ev.event == "write" and ev.fields.get("kind") == "RayJob":
                try:
                    job = sim.api.get("RayJob", str(ev.fields.get("name")), "default")
                except Exception:  # deleted
                    return
                reason = (job.get("status") or {}).get("reason")
                if reason and reason not in reasons:
                    reasons.append(str(reason))

        sim.trace.subscribe(on_write)
        if env is None:
            await prepare(sim, workload)
        else:  # runner.prepare, with the operator's environment the mitigation sets
            await sim.cluster.wait_ready()
            kuberay = await sim.install_kuberay(replicas=workload.setup.operator_replicas,
                                                resources=RESOURCES, env=env)
            await kuberay.wait_for_leader(timeout=120)
        box["found"], _, _ = await play(sim, workload, RunSpec(
            module.KNOBS if knobs is None else knobs, plan))
        box["performed"] = [type(f).__name__ for f in sim.faults.performed()]
        box["events"] = [(e.event, dict(e.fields)) for e in sim.trace.events
                         if e.event in ("job_submission_received", "job_recovered")]

    emu.run(main, seed=1, **world_options(workload))
    return box


def test_f1_a_deterministic_head_pod_name_leaves_one_head() -> None:
    assert "ENABLE_DETERMINISTIC_HEAD_POD_NAME=true" in by_id("F1").mitigation
    module = _load("test_zombie_leader_second_head")
    box = _replay(module, module.WORKLOAD, module.PLAN,
                  env={"ENABLE_DETERMINISTIC_HEAD_POD_NAME": "true"})
    assert {"CrashLeader", "PauseLeader", "Crash", "Pause"} <= set(box["performed"])
    assert not [v for v in box["found"] if v["invariant"] == module.INVARIANT], box["found"]
    # the retry the zombie window fell into still happened: two attempts, two submissions
    submissions = [f["submission_id"] for e, f in box["events"] if e == "job_submission_received"]
    assert len(set(submissions)) == 2, box["events"]


def test_f2_gcs_fault_tolerance_keeps_the_job_from_running_twice() -> None:
    assert "GCS fault tolerance" in by_id("F2").mitigation
    module = _load("test_head_container_kill_job_runs_twice")
    manifests = copy.deepcopy(list(module.WORKLOAD.manifests))
    for m in manifests:
        if m["kind"] == "RayJob":
            m["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"] = {
                "redisAddress": "redis:6379"}
    workload = attrs.evolve(module.WORKLOAD, manifests=manifests,
                            setup=attrs.evolve(module.WORKLOAD.setup, redis=True))
    # the Redis Pod starts first and delays the job by 2 s: the kill keeps its place in it
    plan = [attrs.evolve(f, at=f.at + 2.0) for f in module.PLAN]
    box = _replay(module, workload, plan)
    assert "KillContainer" in box["performed"]
    assert not [v for v in box["found"] if v["invariant"] == module.INVARIANT], box["found"]
    submissions = [f["submission_id"] for e, f in box["events"] if e == "job_submission_received"]
    # One submission: the new head read the job table back and did not run it again. (Whether
    # the job is then recovered depends on a request that starts the new head's lazy job
    # manager — a submit, stop, delete or logs request, as on Ray 2.60 — not on the mitigation.)
    assert len(submissions) == 1, box["events"]


def test_f3_k8s_job_mode_or_a_pre_running_deadline_leaves_no_rayjob_wedged() -> None:
    mitigation = by_id("F3").mitigation
    assert "K8sJobMode" in mitigation and "preRunningDeadlineSeconds" in mitigation
    module = _load("test_sidecar_job_ends_before_cluster_ready")
    # the same lost response, in the default submission mode
    box = _replay(module, module.WORKLOAD, module.PLAN, knobs={})
    assert "LoseResponses" in box["performed"]
    assert not box["found"], box["found"]
    # SidecarMode kept, with a deadline before the RayJob is Running: it fails, not wedges
    manifests = copy.deepcopy(list(module.WORKLOAD.manifests))
    manifests[0]["spec"]["preRunningDeadlineSeconds"] = 60
    box = _replay(module, attrs.evolve(module.WORKLOAD, manifests=manifests), module.PLAN)
    assert "LoseResponses" in box["performed"]
    assert not box["found"], box["found"]
    assert "PreRunningDeadlineExceeded" in box["reasons"], box["reasons"]
