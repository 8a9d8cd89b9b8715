"""one-live-head: at most one live head Pod per RayCluster."""

from __future__ import annotations

from invariant_worlds import create, delete, pod

from emu.invariants import Monitors, OneLiveHead, Violation


async def test_a_second_live_head_is_a_violation_naming_both_pods_and_the_time(sim):
    monitors = Monitors.attach(sim, [OneLiveHead()])
    create(sim, pod("rc-head-a", cluster="rc"))
    await sim.sleep(5)
    create(sim, pod("rc-head-b", cluster="rc", phase="Pending", ready=False))
    assert await monitors.finish(sim) == [Violation(
        "one-live-head",
        "RayCluster default/rc had 2 live head Pods (rc-head-a, rc-head-b), from t=5.000s",
        5.0, ("RayCluster/default/rc", "Pod/default/rc-head-a", "Pod/default/rc-head-b"))]


async def test_a_replacement_after_the_old_head_is_gone_is_not_a_violation(sim):
    monitors = Monitors.attach(sim, [OneLiveHead()])
    create(sim, pod("rc-head-a", cluster="rc"))
    create(sim, pod("other-head", cluster="other"))
    await sim.sleep(5)
    delete(sim, "Pod", "rc-head-a")
    create(sim, pod("rc-head-c", cluster="rc", phase="Failed", ready=False))
    create(sim, pod("rc-head-b", cluster="rc"))
    await monitors.assert_ok(sim)


async def test_a_bound_tolerates_a_short_overlap_and_reports_a_longer_one(sim):
    monitors = Monitors.attach(sim, [OneLiveHead(bound=10.0)])
    create(sim, pod("rc-head-a", cluster="rc"))
    create(sim, pod("rc-head-b", cluster="rc"))
    await sim.sleep(4)
    delete(sim, "Pod", "rc-head-b")
    assert monitors.violations() == []
    create(sim, pod("rc-head-c", cluster="rc"))
    await sim.sleep(30)
    found = await monitors.finish(sim)
    assert [(v.at, v.message) for v in found] == [(
        14.0, "RayCluster default/rc had 2 live head Pods (rc-head-a, rc-head-c), from t=4.000s "
              "(longer than the bound of 10s)")]
