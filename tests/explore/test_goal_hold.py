"""A workload's goal counts only once it has stood past every invariant's hold time after the
last fault healed, so ending the run (deleting the workload) never hides a bounded violation."""

from __future__ import annotations

from typing import Any

import attrs
from explore_worlds import BARE, CONFIGMAP

import emu
from emu.explore.export import replay
from emu.explore.faults import LoseRayPod
from emu.explore.runner import POLL, world_options
from emu.explore.workload import Goal, Workload, builtin
from emu.faults import Outage
from emu.invariants import RayJobStatusConsistent

#: A ConfigMap whose goal holds from the start; deleted when the goal counts.
READY_AT_ONCE = Workload("ready-at-once", [CONFIGMAP], setup=BARE,
                         goal=Goal("ConfigMap", "data.k", ("1",), horizon=60.0))


def _delete_time(workload: Workload, plan: list[Any], invariants: list[Any]) -> float:
    box: dict[str, float] = {}

    async def main(sim: emu.Simulation) -> None:
        await replay(sim, workload, {}, plan, invariants)
        [ev] = sim.trace.select("workload_delete")
        box["t"] = ev.t

    emu.run(main, seed=1, **world_options(workload))
    return box["t"]


def test_a_goal_reached_before_a_fault_counts_only_after_it_healed_and_the_hold_time() -> None:
    quiet = _delete_time(READY_AT_ONCE, [], [RayJobStatusConsistent()])
    outage = [Outage(at=5.0, endpoint="apiserver", duration=10.0)]
    held = _delete_time(READY_AT_ONCE, outage, [RayJobStatusConsistent()])
    # the outage ends at t=15; the bound of 5 s plus one poll must pass after it
    assert held >= 15.0 + RayJobStatusConsistent().bound + POLL
    assert quiet < held


def test_without_bounded_invariants_the_goal_still_stands_one_poll() -> None:
    t = _delete_time(READY_AT_ONCE, [], [])
    assert t >= POLL


def test_the_rayjob_goal_no_longer_hides_failed_beside_running_after_a_head_deletion() -> None:
    # F2 (docs/findings.md): with the head Pod deleted, KubeRay writes Failed/AppFailed while
    # jobStatus stays RUNNING; the goal (a terminal RayJob) used to delete the RayJob inside the
    # invariant's 5 s bound, so the explorer never reported it.
    wl = builtin("rayjob")
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        box["found"] = await replay(sim, wl, {}, [LoseRayPod(at=25.0, owner="demo-job",
                                                            node_type="head", how="delete")])

    emu.run(main, seed=1, **world_options(wl))
    broken = [v for v in box["found"] if v["invariant"] == "rayjob-status-consistent"]
    assert broken, box["found"]
    assert "Failed (reason AppFailed) with non-terminal jobStatus RUNNING" in broken[0]["message"]


def test_hold_time_is_each_bounded_invariants_bound() -> None:
    inv = RayJobStatusConsistent(bound=7.0)
    assert inv.hold_time == 7.0
    assert attrs.evolve(inv, bound=1.0).hold_time == 1.0


def test_the_default_sets_hold_is_five_seconds_the_submitter_invariant_adds_none() -> None:
    # rayjob-submitter-recovered bounds a Running RayJob, never a goal state: holding every
    # reached goal for its 60 s would lengthen every run by 55 virtual seconds, digests changed
    from emu.invariants import SubmitterLossRecovered, kuberay_invariants

    assert SubmitterLossRecovered(bound=60.0).hold_time == 0.0
    assert max(inv.hold_time for inv in kuberay_invariants()) == 5.0
