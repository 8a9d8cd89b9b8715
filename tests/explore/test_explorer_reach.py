"""What the explorer can reach, added for fixed KubeRay bugs it could not find before (see
test_reintroduced_bugs.py): timed knobs whose default is a change, the opt-in serve-failures
family, and a kubelet eviction."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from emu.explore import plans
from emu.explore.faults import LoseRayPod
from emu.explore.runner import world_options
from emu.explore.workload import Knob, builtin
from emu.faults import FailServeDeployment, SlowServeDeployment
from emu.simulation import run


def test_a_timed_knob_makes_its_default_change_unless_the_run_sets_it() -> None:
    wl = builtin("raycluster")
    assert wl.changes_for({}) == []  # the built-in toggles default to no change
    wl = attrs.evolve(wl, knobs=tuple(attrs.evolve(k, values=(True, None))
                                      if k.name == "suspend" else k for k in wl.knobs))
    [(at, knob, value)] = wl.changes_for({})
    assert (at, knob.name, value) == (30.0, "suspend", True)
    assert wl.changes_for({"suspend": None}) == []
    with pytest.raises(KeyError, match="no knob 'nope'"):
        wl.changes_for({"nope": 1})


def _actions(kind: str = "RayService") -> list[dict[str, Any]]:
    return [{"type": "transition", "t": 1.1, "kind": kind, "state": "()"},
            {"type": "transition", "t": 21.0, "kind": kind, "state": "('Running',)"}]


def test_serve_failures_is_generated_only_when_named() -> None:
    wl = builtin("rayservice")
    default = plans.systematic(wl, _actions())
    assert not any(isinstance(f, (FailServeDeployment, SlowServeDeployment))
                   for p in default for f in p.faults)
    named = plans.systematic(attrs.evolve(wl, families=("serve-failures",)), _actions())
    assert [repr(p) for p in named] == [repr(p) for p in [
        [FailServeDeployment(at=1.1, import_path="fruit.deployment_graph")],
        [SlowServeDeployment(at=1.1, import_path="fruit.deployment_graph", build_seconds=60.0)],
        [FailServeDeployment(at=21.0, import_path="fruit.deployment_graph")],
        [SlowServeDeployment(at=21.0, import_path="fruit.deployment_graph", build_seconds=60.0)],
    ]]
    assert "serve-failures" in plans.OPT_IN


def test_pod_loss_evicts_the_head_at_each_transition() -> None:
    wl = attrs.evolve(builtin("raycluster"), families=("pod-loss",))
    evictions = [f for p in plans.systematic(wl, _actions("RayCluster")) for f in p.faults
                 if isinstance(f, LoseRayPod) and f.how == "evict"]
    assert [(f.at, f.node_type) for f in evictions] == [(1.1, "head"), (21.0, "head")]


def test_an_evicted_head_says_failed_evicted_and_kuberay_replaces_it() -> None:
    wl = builtin("raycluster")
    seen: dict[str, Any] = {}

    async def main(sim: Any) -> None:
        from emu.explore.runner import prepare

        await prepare(sim, wl)
        await sim.apply(wl.manifests[0])
        await sim.sleep(20)
        [head] = sim.api.list("Pod", "default",
                              label_selector="ray.io/node-type=head")["items"]
        name = head["metadata"]["name"]
        assert LoseRayPod(owner="raycluster", how="evict").apply(sim) is None
        status = sim.api.get("Pod", name, "default")["status"]
        seen["evicted"] = (status.get("phase"), status.get("reason"))
        await sim.sleep(20)
        seen["heads"] = sorted(p["metadata"]["name"] for p in sim.api.list(
            "Pod", "default", label_selector="ray.io/node-type=head")["items"])
        seen["name"] = name

    run(main, seed=1, **world_options(wl))
    assert seen["evicted"] == ("Failed", "Evicted")
    assert len(seen["heads"]) == 1 and seen["heads"] != [seen["name"]]  # shouldDeletePod


def test_evict_is_a_known_way_to_lose_a_pod() -> None:
    with pytest.raises(ValueError, match="delete, kill, gcs, node or evict"):
        LoseRayPod(owner="x", how="explode").apply(None)  # type: ignore[arg-type]


def test_knob_values_are_checked_before_anything_runs() -> None:
    wl = attrs.evolve(builtin("raycluster"),
                      knobs=(Knob("k", "RayCluster", "spec.suspend", (False, True)),))
    with pytest.raises(ValueError, match="takes one of"):
        wl.check_knobs({"k": 3})
