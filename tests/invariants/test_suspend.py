"""suspended-cluster-has-no-pods: a RayCluster that says it is suspended runs no Pod."""

from __future__ import annotations

from invariant_worlds import create, delete, pod, raycluster

from emu.faults import Outage
from emu.invariants import Monitors, SuspendedClusterHasNoPods, Violation
from emu.invariants.suspend import says_suspended


def suspended(name, **status):
    obj = raycluster(name, **status)
    obj["spec"]["suspend"] = True
    return obj


async def test_a_pod_living_past_the_bound_under_a_suspended_status_is_reported(sim):
    monitors = Monitors.attach(sim, [SuspendedClusterHasNoPods(bound=5.0)])
    create(sim, suspended("sleepy", state="suspended"))
    await sim.sleep(2)
    create(sim, pod("sleepy-worker-0", cluster="sleepy", node_type="worker"))
    create(sim, pod("sleepy-head", cluster="sleepy", phase="Failed"))  # finished: not live
    await sim.sleep(10)
    assert await monitors.finish(sim) == [Violation(
        "suspended-cluster-has-no-pods",
        "RayCluster default/sleepy says suspended (spec.suspend, status suspended) yet runs "
        "live Pods (sleepy-worker-0), from t=2.000s (longer than the bound of 5s after the "
        "condition began or the last fault healed)",
        7.0, ("RayCluster/default/sleepy", "Pod/default/sleepy-worker-0"))]


async def test_a_pod_deleted_within_the_bound_and_a_cluster_still_suspending_pass(sim):
    monitors = Monitors.attach(sim, [SuspendedClusterHasNoPods(bound=5.0)])
    create(sim, suspended("sleepy", state="suspended"))
    create(sim, pod("sleepy-worker-0", cluster="sleepy", node_type="worker"))
    await sim.sleep(4)
    delete(sim, "Pod", "sleepy-worker-0")
    # suspend asked, Pods still running, status not yet suspended: KubeRay is deleting them
    create(sim, suspended("going", state="ready"))
    create(sim, pod("going-head", cluster="going"))
    await sim.sleep(20)
    await monitors.assert_ok(sim)


async def test_the_bound_counts_from_the_last_fault_healed(sim):
    monitors = Monitors.attach(sim, [SuspendedClusterHasNoPods(bound=5.0)])
    create(sim, suspended("sleepy", state="suspended"))
    create(sim, pod("sleepy-worker-0", cluster="sleepy", node_type="worker"))
    sim.faults.do(Outage(endpoint="apiserver", duration=30.0))
    await sim.sleep(33)
    delete(sim, "Pod", "sleepy-worker-0")  # gone 3 s after the outage healed: in time
    await monitors.assert_ok(sim)


async def test_the_rayclustersuspended_condition_counts_as_suspended_and_ends_the_episode(sim):
    monitors = Monitors.attach(sim, [SuspendedClusterHasNoPods(bound=5.0)])
    create(sim, suspended("cond", conditions=[{"type": "RayClusterSuspended",
                                               "status": "True"}]))
    create(sim, pod("cond-head", cluster="cond"))
    await sim.sleep(6)
    delete(sim, "RayCluster", "cond")  # the deletion closes the episode, past the bound
    found = await monitors.finish(sim)
    assert [(v.at, v.message.split(",")[0]) for v in found] == [
        (5.0, "RayCluster default/cond says suspended (spec.suspend")]
    assert "from t=0.000s to t=6.000s" in found[0].message


def test_says_suspended_needs_both_the_spec_and_the_status():
    assert says_suspended(suspended("a", state="suspended"))
    assert not says_suspended(raycluster("b", state="suspended"))
    assert not says_suspended(suspended("c", state="ready"))
