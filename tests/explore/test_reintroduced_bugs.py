"""KubeRay recovery bugs fixed upstream, put back into the port by monkeypatching the ported
function (controllers/ itself is never changed): a small explore budget reports a finding the
unmodified port, same seed and budget, does not have. (#715 is in test_explore_search.py.)

Each search names the plan it needs by what it is (`budget_to_reach`), narrowed to the plan
family a user suspecting that kind of fault would pick (`Workload.families`), so the budget
stays small and the test survives changes to the generators' order.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from explore_worlds import budget_to_reach

import controllers.rayservice as rayservice
from emu.explore.faults import LoseRayPod
from emu.explore.runner import RunSpec
from emu.explore.search import explore
from emu.explore.workload import builtin
from emu.invariants import EventuallySteady


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
