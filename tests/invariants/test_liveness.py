"""eventually-steady: every object converges within the bound after the last fault heals."""

from __future__ import annotations

import attrs
from invariant_worlds import create, pod, raycluster, rayjob, rayservice, set_status

from emu.faults import Outage
from emu.invariants import EventuallySteady, Monitors, Violation


def ready_cluster(sim, name, workers=1):
    create(sim, raycluster(name, workers=workers, state="ready"))
    create(sim, pod(f"{name}-head", cluster=name))
    for i in range(workers):
        create(sim, pod(f"{name}-worker-{i}", cluster=name, node_type="worker"))


async def test_a_cluster_that_never_becomes_ready_is_reported_at_its_deadline(sim):
    monitors = Monitors.attach(sim, [EventuallySteady(bound=60.0)])
    await sim.sleep(5)
    create(sim, raycluster("rc", workers=2, state="ready"))
    create(sim, pod("rc-head", cluster="rc"))
    create(sim, pod("rc-worker-0", cluster="rc", node_type="worker"))
    assert await monitors.finish(sim) == [Violation(
        "eventually-steady",
        "RayCluster default/rc not steady at t=65.000s (state ready, head Ready, 1/2 workers "
        "Ready); expected within 60s (created or spec changed at t=5.000s)",
        65.0, ("RayCluster/default/rc",))]


async def test_finish_waits_for_objects_that_converge_before_their_deadline(sim):
    monitors = Monitors.attach(sim, [EventuallySteady(bound=60.0)])
    create(sim, rayjob("rj", jobDeploymentStatus="Running"))
    create(sim, rayservice("rs", serviceStatus="Running"))
    ready_cluster(sim, "rc")
    sim.call_later(40, lambda: set_status(sim, "RayJob", "rj", jobDeploymentStatus="Complete",
                                          jobStatus="SUCCEEDED"))
    await monitors.assert_ok(sim)
    assert sim.now == 40.0


async def test_the_deadline_counts_from_the_last_fault_healed(sim):
    monitors = Monitors.attach(sim, [EventuallySteady(bound=60.0)])
    create(sim, rayjob("rj", jobDeploymentStatus="Running"))
    create(sim, rayservice("rs", serviceStatus="Running",
                           pendingServiceStatus={"rayClusterName": "rs-new"}))
    sim.faults.do(Outage(endpoint="apiserver", duration=30.0))
    found = await monitors.finish(sim)
    assert [(v.at, v.message) for v in found] == [
        (90.0, "RayJob default/rj not steady at t=90.000s (jobDeploymentStatus Running, "
               "jobStatus (none)); expected within 60s (last fault healed at t=30.000s)"),
        (90.0, "RayService default/rs not steady at t=90.000s (serviceStatus Running, pending "
               "cluster rs-new); expected within 60s (last fault healed at t=30.000s)"),
    ]


async def test_terminal_suspended_and_no_restart_clusters_are_steady(sim):
    monitors = Monitors.attach(sim, [EventuallySteady(bound=60.0)])
    create(sim, rayjob("failed", jobDeploymentStatus="Failed"))
    suspended = raycluster("sleepy", state="suspended")
    suspended["spec"]["suspend"] = True
    create(sim, suspended)
    no_restart = raycluster("sidecar", state="ready", conditions=[
        {"type": "RayClusterProvisioned", "status": "True"}])
    no_restart["metadata"]["annotations"] = {"ray.io/disable-provisioned-head-restart": "true"}
    create(sim, no_restart)
    await sim.sleep(100)
    await monitors.assert_ok(sim)


async def test_an_informer_lag_heals_once_its_last_late_event_can_arrive(sim):
    # events a lagging watch received while the fault was on reach the cache `seconds` later:
    # the fault healed then, not at the end of its duration (bounds counted from it were short)
    from emu.faults import InformerLag
    from emu.invariants.liveness import heals_at

    lag = InformerLag(at=5.0, kind="RayJob", seconds=30.0, duration=1.0, optional=True)
    assert heals_at(lag) == 36.0
    assert heals_at(Outage(at=5.0, endpoint="apiserver", duration=1.0)) == 6.0
    monitors = Monitors.attach(sim, [EventuallySteady(bound=60.0)])
    create(sim, rayjob("rj", jobDeploymentStatus="Running"))
    sim.faults.do(attrs.evolve(lag, at=0.0))
    found = await monitors.finish(sim)
    assert [(v.at, v.message) for v in found] == [
        (91.0, "RayJob default/rj not steady at t=91.000s (jobDeploymentStatus Running, "
               "jobStatus (none)); expected within 60s (last fault healed at t=31.000s)")]
