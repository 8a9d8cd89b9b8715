"""Ports of ``rayservice_controller_test.go`` (the envtest suite). Go fakes the head Pod's
readiness and the dashboard; here the kubelets, the fake Ray and its Serve API do the work, so
each case waits for what really happens."""

from __future__ import annotations

import copy
from typing import Any

from test_rayservice_support import (
    NS,
    active_name,
    bump_ray_version,
    is_ready,
    pending_name,
    rayservice,
    serve_config_v2,
    update_rs,
    world,
    writes,
)

from emu.kuberay.utils import constant as C
from emu.ray import ServeAppBehaviour


async def _running(sim: Any, name: str = "rs", **spec: Any) -> dict[str, Any]:
    await world(sim)
    await sim.apply(rayservice(name, **spec))
    return await sim.wait_for("RayService", name, is_ready, timeout=300)


def _append_group(rs: dict[str, Any]) -> None:
    groups = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    extra = copy.deepcopy(groups[0])
    extra["groupName"] = "worker-group-to-active-cluster"
    groups.append(extra)


async def _stays(sim: Any, seconds: float, check: Any) -> None:
    """Gomega's ``Consistently``: ``check(rs)`` holds every 0.5 s for ``seconds``."""
    end = sim.now + seconds
    while sim.now < end:
        assert check(await sim.get("RayService", "rs"))
        await sim.sleep(0.5)


async def test_ray_service_with_a_maximum_name_gets_its_services(sim):
    """Describe "RayService with a maximum name"."""
    name = "s" * C.MAX_RAY_SERVICE_NAME_LENGTH
    rs = await _running(sim, name)
    assert active_name(rs).startswith(name + "-")
    assert await sim.get("Service", f"{name}-head-svc") is not None
    assert await sim.get("Service", f"{name}-serve-svc") is not None


async def test_autoscaler_updates_to_pending_and_active_never_trigger_an_upgrade(sim):
    """Describe "Autoscaler updates RayCluster should not trigger zero downtime upgrade"."""
    await world(sim)
    await sim.apply(rayservice())
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    pending = pending_name(rs)
    cluster = await sim.wait_for("RayCluster", pending, timeout=60)
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] += 1
    await sim.client().update(cluster)
    await _stays(sim, 5, lambda o: pending_name(o) == pending)
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) == pending, timeout=300)
    active = await sim.client().get("RayCluster", pending, NS)
    active["spec"]["workerGroupSpecs"][0]["replicas"] += 1
    await sim.client().update(active)
    await _stays(sim, 5, lambda o: active_name(o) == pending and pending_name(o) == "")


async def test_running_service_has_annotations_on_its_cluster_and_endpoints(sim):
    """BeforeEach of "After a RayService is running": conditions, promotion, annotations
    propagated, healthy apps, both Services, Ready with endpoints."""
    rs = await _running(sim)
    cluster = await sim.client().get("RayCluster", active_name(rs), NS)
    assert cluster["metadata"]["annotations"]["foo"] == "bar"
    assert rs["status"]["activeServiceStatus"]["applicationStatuses"]["app1"]["status"] == \
        "RUNNING"
    assert rs["status"]["numServeEndpoints"] > 0
    assert rs["status"]["serviceStatus"] == "Running"
    head = await sim.get("Service", "rs-head-svc")
    serve = await sim.get("Service", "rs-serve-svc")
    assert head is not None and serve is not None
    assert head["spec"]["selector"]["ray.io/cluster"] == active_name(rs)
    assert serve["spec"]["selector"] == {"ray.io/cluster": active_name(rs), "ray.io/serve": "true"}


async def test_updating_serve_config_v2_is_applied_in_place(sim):
    """When "Testing in-place update: updating the serveConfigV2"."""
    rs = await _running(sim)
    active = active_name(rs)

    def new_config(obj: dict[str, Any]) -> None:
        obj["spec"]["serveConfigV2"] = serve_config_v2("newAppName")

    await update_rs(sim, "rs", new_config)
    rs = await sim.wait_for("RayService", "rs", lambda o: "newAppName" in (
        o["status"].get("activeServiceStatus", {}).get("applicationStatuses") or {}), timeout=120)
    assert pending_name(rs) == ""
    assert active_name(rs) == active
    events = await sim.client().list("Event", NS)
    assert any(e["reason"] == C.UPDATED_SERVE_APPLICATIONS and
               e["involvedObject"]["uid"] == rs["metadata"]["uid"] for e in events)


async def test_appending_a_worker_group_updates_the_active_cluster_in_place(sim):
    """When "Testing appending a new worker group to the active RayCluster"."""
    rs = await _running(sim)
    active = active_name(rs)
    await update_rs(sim, "rs", _append_group)
    await sim.wait_for("RayCluster", active,
                       lambda o: len(o["spec"]["workerGroupSpecs"]) == 2, timeout=60)
    await _stays(sim, 3, lambda o: active_name(o) == active and pending_name(o) == "")
    assert writes(sim, "RayCluster", verb="create") == [
        (t, v, n) for t, v, n in writes(sim, "RayCluster", verb="create") if n == active]


async def test_zero_downtime_upgrade_promotes_the_new_cluster(sim):
    """When "During the zero-downtime upgrade process" / "Promote the pending RayCluster"."""
    rs = await _running(sim)
    await update_rs(sim, "rs", bump_ray_version("mock-ray-version-1"))
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    pending = pending_name(rs)
    await sim.wait_for("RayCluster", pending, timeout=60)
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) == pending, timeout=300)
    assert pending_name(rs) == ""


async def test_updating_the_spec_again_mid_upgrade_prepares_another_pending_cluster(sim):
    """When "Updating the RayVersion again to prepare a new pending cluster": the superseded
    pending cluster becomes dangling."""
    await _running(sim, serveConfigV2=serve_config_v2(import_path="slow.app"))
    sim.ray_config.serve_apps["slow.app"] = ServeAppBehaviour(build_seconds=300.0)
    await update_rs(sim, "rs", bump_ray_version("mock-ray-version-1"))
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    first = pending_name(rs)
    await sim.wait_for("RayCluster", first, timeout=60)
    await update_rs(sim, "rs", bump_ray_version("mock-ray-version-2"))
    rs = await sim.wait_for("RayService", "rs",
                            lambda o: pending_name(o) not in ("", first), timeout=60)
    second = pending_name(rs)
    await sim.wait_for("RayCluster", second, timeout=60)
    await sim.sleep(70)
    assert [n for _, _, n in writes(sim, "RayCluster", verb="delete")] == [first]


async def test_appending_a_worker_group_updates_the_pending_cluster_in_place(sim):
    """When "Testing appending a new worker group to the pending RayCluster"."""
    await _running(sim, serveConfigV2=serve_config_v2(import_path="slow.app"))
    sim.ray_config.serve_apps["slow.app"] = ServeAppBehaviour(build_seconds=300.0)
    await update_rs(sim, "rs", bump_ray_version("mock-ray-version-1"))
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    pending = pending_name(rs)
    await sim.wait_for("RayCluster", pending, timeout=60)
    await update_rs(sim, "rs", _append_group)
    await sim.wait_for("RayCluster", pending,
                       lambda o: len(o["spec"]["workerGroupSpecs"]) == 2, timeout=60)
    await _stays(sim, 3, lambda o: pending_name(o) == pending)
