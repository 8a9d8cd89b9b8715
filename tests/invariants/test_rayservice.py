"""rayservice-serves-ready-cluster and rayservice-no-refused-requests-during-switch."""

from __future__ import annotations

from invariant_worlds import (
    create,
    delete,
    pod,
    raycluster,
    rayservice,
    repoint,
    serve_service,
    set_status,
)

from emu.invariants import Monitors, NoRefusedRequestsDuringSwitch, ServesReadyCluster, Violation

OBJS = ("RayService/default/rs", "Service/default/rs-serve-svc")


def two_clusters(sim, *, second_ready):
    rs = create(sim, rayservice("rs"))
    create(sim, raycluster("rs-blue"))
    create(sim, pod("rs-blue-head", cluster="rs-blue"))
    create(sim, raycluster("rs-green"))
    create(sim, pod("rs-green-head", cluster="rs-green", ready=second_ready))
    return rs


async def test_pointing_the_serve_service_at_an_unready_cluster_is_a_violation(sim):
    monitors = Monitors.attach(sim, [ServesReadyCluster()])
    rs = two_clusters(sim, second_ready=False)
    create(sim, serve_service(rs, "rs-blue"))
    await sim.sleep(10)
    repoint(sim, "rs-serve-svc", "rs-green")
    await sim.sleep(3)
    assert monitors.violations() == []   # within the 5 s bound
    await sim.sleep(60)
    assert await monitors.finish(sim) == [Violation(
        "rayservice-serves-ready-cluster",
        "RayService default/rs: serve Service rs-serve-svc was pointed at RayCluster rs-green, "
        "which has no Ready head Pod, from t=10.000s (longer than the bound of 5s)",
        15.0, (*OBJS, "RayCluster/default/rs-green"))]


async def test_deleting_the_cluster_the_serve_service_selects_is_a_violation(sim):
    monitors = Monitors.attach(sim, [ServesReadyCluster()])
    rs = two_clusters(sim, second_ready=True)
    create(sim, serve_service(rs, "rs-blue"))
    await sim.sleep(10)
    delete(sim, "RayCluster", "rs-blue")
    assert await monitors.finish(sim) == [Violation(
        "rayservice-serves-ready-cluster",
        "RayService default/rs: serve Service rs-serve-svc selected RayCluster rs-blue, which "
        "was deleted, from t=10.000s", 10.0, (*OBJS, "RayCluster/default/rs-blue"))]


async def test_a_switch_to_a_ready_cluster_then_deleting_the_old_one_holds(sim):
    monitors = Monitors.attach(sim, [ServesReadyCluster()])
    rs = two_clusters(sim, second_ready=True)
    create(sim, serve_service(rs, "rs-blue"))
    await sim.sleep(10)
    repoint(sim, "rs-serve-svc", "rs-green")
    await sim.sleep(60)
    delete(sim, "RayCluster", "rs-blue")
    delete(sim, "Pod", "rs-green-head")   # head loss later: nothing else to serve from
    await sim.sleep(60)
    await monitors.assert_ok(sim)


def refused(sim, process="traffic/serve"):
    sim.trace.emit(process, "requests_failing", error="ConnectionRefused", ok_so_far=10)


async def test_a_refused_request_while_both_clusters_are_ready_is_a_violation(sim):
    monitors = Monitors.attach(sim, [NoRefusedRequestsDuringSwitch()])
    two_clusters(sim, second_ready=True)
    set_status(sim, "RayService", "rs", activeServiceStatus={"rayClusterName": "rs-blue"},
               pendingServiceStatus={"rayClusterName": "rs-green"})
    await sim.sleep(7)
    refused(sim)
    assert await monitors.finish(sim) == [Violation(
        "rayservice-no-refused-requests-during-switch",
        "RayService default/rs: traffic/serve had a request refused (ConnectionRefused) while "
        "switching from RayCluster rs-blue to rs-green, both ready", 7.0,
        ("RayService/default/rs", "RayCluster/default/rs-blue", "RayCluster/default/rs-green"))]


async def test_refusals_outside_a_both_ready_switch_are_not_violations(sim):
    monitors = Monitors.attach(sim, [NoRefusedRequestsDuringSwitch()])
    two_clusters(sim, second_ready=False)
    set_status(sim, "RayService", "rs", activeServiceStatus={"rayClusterName": "rs-blue"},
               pendingServiceStatus={"rayClusterName": "rs-green"})
    refused(sim)                           # the pending cluster is not ready yet
    refused(sim, process="traffic/head")   # not the serve traffic
    set_status(sim, "RayService", "rs", activeServiceStatus={"rayClusterName": "rs-green"},
               pendingServiceStatus={"rayClusterName": ""})
    refused(sim)                           # no switch in progress
    await monitors.assert_ok(sim)


async def test_suspending_deletes_clusters_before_services_without_a_violation(sim):
    monitors = Monitors.attach(sim, [ServesReadyCluster()])
    rs = two_clusters(sim, second_ready=True)
    create(sim, serve_service(rs, "rs-blue"))
    per_cluster = serve_service(rs, "rs-green")   # an incremental upgrade's own Service
    per_cluster["metadata"]["name"] = "rs-green-serve-svc"
    create(sim, per_cluster)
    obj = sim.api.get("RayService", "rs", "default")
    obj["spec"]["suspend"] = True
    sim.api.update(obj, caller="test")
    delete(sim, "RayCluster", "rs-blue")
    await sim.sleep(10)
    delete(sim, "Service", "rs-serve-svc")
    await monitors.assert_ok(sim)
