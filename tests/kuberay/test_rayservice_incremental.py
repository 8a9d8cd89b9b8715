"""``NewClusterWithIncrementalUpgrade`` end to end (SPEC §4.12): a Gateway and an HTTPRoute in
front of per-cluster serve Services, traffic moved by ``stepSizePercent`` every
``intervalSeconds``, target capacities moved by ``maxSurgePercent`` through Serve config PUTs,
promotion when the old cluster is at 0% capacity and the new one has 100% of the traffic, and the
rollback when the spec goes back mid-upgrade. Requests go through the Gateway's data plane
(`emu.kube.gateway`, the Istio stand-in), which splits them by the route's weights."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from test_rayservice_support import (
    NS,
    active_name,
    bump_ray_version,
    condition,
    is_ready,
    pending_name,
    rayservice,
    update_rs,
    world,
)

from emu.kuberay.rayservice import (
    RayServiceReconciler,
    get_weights_from_http_route,
    is_http_route_equal,
    should_complete_incremental_rollback,
)
from emu.kuberay.utils import constant as C
from emu.runtime import HttpClient

GATEWAY = f"rs-gateway-istio.{NS}.svc.cluster.local:80"
STEP, INTERVAL, SURGE = 25, 10, 50


def incremental_rs(**options: Any) -> dict[str, Any]:
    rs = rayservice(upgrade_type="NewClusterWithIncrementalUpgrade")
    rs["spec"]["upgradeStrategy"]["clusterUpgradeOptions"] = {
        "gatewayClassName": "istio", "stepSizePercent": STEP, "intervalSeconds": INTERVAL,
        "maxSurgePercent": SURGE, **options}
    rs["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return rs


def upgrade_fields(rs: dict[str, Any]) -> tuple[Any, ...]:
    st = rs.get("status") or {}
    a, p = st.get("activeServiceStatus") or {}, st.get("pendingServiceStatus") or {}
    return (a.get("targetCapacity"), a.get("trafficRoutedPercent"), p.get("targetCapacity"),
            p.get("trafficRoutedPercent"))


class GatewayTraffic:
    """``GET /fruit`` through the Gateway every ``interval`` seconds; outcomes by time."""

    def __init__(self, sim: Any, interval: float = 0.5) -> None:
        self.sim = sim
        self.interval = interval
        self.results: list[tuple[float, int]] = []
        self.process = sim.start_process("gateway-traffic", self._run)

    async def _run(self, process: Any) -> None:
        http = HttpClient(self.sim.network, process)
        while True:
            t = self.sim.now
            try:
                status = (await http.request(GATEWAY, "GET", "/fruit")).status
            except Exception:
                status = 0
            self.results.append((t, status))
            await asyncio.sleep(self.interval)

    def failures(self) -> list[tuple[float, int]]:
        return [(t, s) for t, s in self.results if s != 200]


async def ready_incremental(sim: Any, gateway: bool = True, **install: Any
                            ) -> tuple[Any, str, Any]:
    """(the Kubernetes cluster, the first active cluster's name, the KubeRay install)."""
    kube, kuberay = await world(sim, kube={"gateway_classes": ("istio",) if gateway else ()},
                                **install)
    await sim.apply(incremental_rs())
    # Ready comes first (the pending cluster's per-cluster serve Service counts, as in Go), then
    # the promotion, then the HTTPRoute and the traffic fields
    rs = await sim.wait_for("RayService", "rs",
                            lambda o: is_ready(o) and upgrade_fields(o)[:2] == (100, 100),
                            timeout=300)
    return kube, active_name(rs), kuberay


async def watch_fields(sim: Any, until: Any, timeout: float) -> list[tuple[float, tuple[Any, ...]]]:
    """The RayService's (active capacity, active traffic, pending capacity, pending traffic),
    sampled every second, each change once, until ``until(rs)``."""
    seen: list[tuple[float, tuple[Any, ...]]] = []
    deadline = sim.now + timeout
    while sim.now < deadline:
        rs = await sim.get("RayService", "rs", NS)
        fields = upgrade_fields(rs)
        if not seen or seen[-1][1] != fields:
            seen.append((sim.now, fields))
        if until(rs):
            return seen
        await sim.sleep(1.0)
    raise AssertionError(f"not done within {timeout}s: {seen}")


async def test_first_deployment_creates_gateway_route_and_per_cluster_service(sim):
    _kube, first, _ = await ready_incremental(sim)
    rs = await sim.get("RayService", "rs", NS)
    assert upgrade_fields(rs) == (100, 100, None, None)
    gw = await sim.get("Gateway", "rs-gateway", NS)
    assert gw["spec"] == {"gatewayClassName": "istio", "listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80}]}
    assert [c["type"] for c in gw["status"]["conditions"] if c["status"] == "True"] == \
        ["Accepted", "Programmed"]
    route = await sim.get("HTTPRoute", "rs-httproute", NS)
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"name": f"{first}-serve-svc", "namespace": NS, "port": 8000, "weight": 100}]
    svc = await sim.get("Service", f"{first}-serve-svc", NS)
    assert svc["metadata"]["ownerReferences"][0]["name"] == first
    # with the incremental strategy the serve Service KubeRay builds is the per-cluster one
    assert await sim.get("Service", "rs-serve-svc", NS) is None
    traffic = GatewayTraffic(sim)
    await sim.sleep(5)
    assert traffic.results and not traffic.failures()


async def test_upgrade_moves_traffic_in_steps_then_promotes_without_a_failed_request(sim):
    kube, old, _ = await ready_incremental(sim)
    traffic = GatewayTraffic(sim)
    await sim.sleep(2)
    t0 = sim.now
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    new = pending_name(rs)
    assert condition(rs, "UpgradeInProgress")["status"] == "True"
    seen = await watch_fields(sim, lambda o: active_name(o) == new, timeout=600)
    fields = [f for _, f in seen]
    # the state machine's order: pending capacity first, then traffic up to it, then the old
    # cluster's capacity down by maxSurgePercent, and again, until old 0% / new 100%
    assert (100, 100, 0, 0) in fields or (100, 100, 0, None) in fields
    steps = [f for f in fields if None not in f]
    for a_cap, a_traffic, p_cap, p_traffic in steps:
        assert a_traffic + p_traffic == 100
        assert p_traffic <= p_cap            # traffic never runs ahead of capacity
        assert 100 <= a_cap + p_cap <= 100 + SURGE
    traffic_steps = sorted({f[3] for f in steps})
    assert traffic_steps == [0, 25, 50, 75, 100]
    moves = [t for (_, f), (t, g) in itertools.pairwise(seen)
             if None not in (f[3], g[3]) and f[3] != g[3]]
    assert len(moves) == 4
    assert all(b - a >= INTERVAL - 1 for a, b in itertools.pairwise(moves))
    rs = await sim.get("RayService", "rs", NS)
    assert pending_name(rs) == "" and is_ready(rs)
    assert condition(rs, "UpgradeInProgress")["reason"] == C.NO_PENDING_CLUSTER
    await sim.sleep(4)
    route = await sim.get("HTTPRoute", "rs-httproute", NS)
    assert [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]] == \
        [(f"{new}-serve-svc", 100)]
    assert not traffic.failures()
    served = kube.gateway.forwarded
    assert served[(f"{NS}/rs-gateway", f"{old}-serve-svc")] > 0
    assert served[(f"{NS}/rs-gateway", f"{new}-serve-svc")] > 0
    assert sim.now - t0 > 4 * INTERVAL
    await sim.sleep(70)
    assert await sim.get("RayCluster", old, NS) is None


async def test_reverting_the_spec_mid_upgrade_rolls_traffic_back(sim):
    _kube, old, _ = await ready_incremental(sim)
    traffic = GatewayTraffic(sim)
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    new = pending_name(rs)
    await sim.wait_for("RayService", "rs",
                       lambda o: (upgrade_fields(o)[3] or 0) >= 25, timeout=300)
    await update_rs(sim, "rs", bump_ray_version("2.46.0"))
    rs = await sim.wait_for("RayService", "rs",
                            lambda o: condition(o, "RollbackInProgress").get("status") == "True",
                            timeout=30)
    assert condition(rs, "RollbackInProgress")["reason"] == C.DESIRED_CLUSTER_SPEC_CHANGED
    rs = await sim.wait_for("RayService", "rs", lambda o: pending_name(o) == "", timeout=300)
    assert active_name(rs) == old
    assert upgrade_fields(rs)[:2] == (100, 100)
    assert condition(rs, "RollbackInProgress") == {}
    assert condition(rs, "UpgradeInProgress")["reason"] == C.NO_PENDING_CLUSTER
    assert not traffic.failures()
    await sim.sleep(70)
    assert await sim.get("RayCluster", new, NS) is None
    assert await sim.get("RayCluster", old, NS) is not None


async def test_a_new_leader_mid_upgrade_carries_on_from_the_status(sim):
    """Everything the upgrade needs is in the RayService status (capacities, weights, their
    times): a leader crash mid-upgrade costs the Lease wait and one more Serve PUT (the new
    leader's config cache is empty), no step is repeated or skipped, no request fails."""
    _, _old, kuberay = await ready_incremental(sim, replicas=2)
    traffic = GatewayTraffic(sim)
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    rs = await sim.wait_for("RayService", "rs", lambda o: (upgrade_fields(o)[3] or 0) >= 25,
                            timeout=300)
    new = pending_name(rs)
    leader = kuberay.leader()
    sim.faults.crash(leader)
    await sim.wait_until(lambda: kuberay.leader() not in (None, leader), timeout=120)
    seen = await watch_fields(sim, lambda o: active_name(o) == new, timeout=600)
    steps = sorted({25, *(f[3] for _, f in seen if f[3] is not None)})
    assert steps == [25, 50, 75, 100]  # from where the old leader left it, step by step
    assert not traffic.failures()


async def test_a_third_spec_mid_upgrade_rolls_back_then_upgrades_afresh(sim):
    _, old, _ = await ready_incremental(sim)
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    rs = await sim.wait_for("RayService", "rs", lambda o: (upgrade_fields(o)[3] or 0) >= 25,
                            timeout=300)
    second = pending_name(rs)
    await update_rs(sim, "rs", bump_ray_version("2.48.0"))
    rs = await sim.wait_for("RayService", "rs",
                            lambda o: condition(o, "RollbackInProgress").get("status") == "True",
                            timeout=30)
    assert condition(rs, "RollbackInProgress")["message"] == \
        "Goal state changed mid-upgrade, rolling back to original cluster."
    rs = await sim.wait_for("RayService", "rs",
                            lambda o: pending_name(o) not in ("", second), timeout=300)
    third = pending_name(rs)
    assert active_name(rs) == old and third != second
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) == third, timeout=600)
    assert pending_name(rs) == ""


async def test_without_a_gateway_implementation_the_upgrade_waits(sim):
    """No Gateway controller accepts the Gateway: Go's checkIfNeedTargetCapacityUpdate never
    moves a capacity, so the new cluster stays at 0% and gets no traffic (as on a real cluster
    without Istio or another implementation)."""
    _, old, _ = await ready_incremental(sim, gateway=False)
    rs = await sim.get("RayService", "rs", NS)
    assert is_ready(rs) and active_name(rs) == old
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    await sim.sleep(200)
    rs = await sim.get("RayService", "rs", NS)
    assert active_name(rs) == old and pending_name(rs)
    assert upgrade_fields(rs)[2:] == (0, 0)


async def test_serve_replicas_no_node_can_take_scale_workers_up_and_keep_them(sim):
    """The sample's shape: a head with ``num-cpus: 0`` and workers from ``minReplicas: 0``. The
    Serve replicas (0.5 CPU) are pending actors to the autoscaler, which adds a worker; a worker
    running replicas is not idle, so it stays past the idle timeout."""
    await world(sim, kube={"gateway_classes": ("istio",)})
    rs = incremental_rs()
    cfg = rs["spec"]["rayClusterConfig"]
    cfg["headGroupSpec"]["rayStartParams"] = {"num-cpus": "0"}
    group = cfg["workerGroupSpecs"][0]
    group.update(replicas=0, minReplicas=0, maxReplicas=4)
    group["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    rs["spec"]["serveConfigV2"] = rs["spec"]["serveConfigV2"].replace("num_cpus: 0.1",
                                                                      "num_cpus: 0.5")
    await sim.apply(rs)
    rs = await sim.wait_for("RayService", "rs",
                            lambda o: is_ready(o) and upgrade_fields(o)[:2] == (100, 100),
                            timeout=600)
    cluster = await sim.get("RayCluster", active_name(rs), NS)
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 1
    await sim.sleep(150)  # past the autoscaler's 60 s idle timeout
    cluster = await sim.get("RayCluster", active_name(rs), NS)
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 1
    apps = (await sim.get("RayService", "rs", NS))["status"]["activeServiceStatus"][
        "applicationStatuses"]
    assert apps["app1"]["status"] == "RUNNING"


# -- the pure functions --------------------------------------------------------------------------


def _status(active: dict[str, Any], pending: dict[str, Any], *conds: str) -> dict[str, Any]:
    return {"metadata": {"name": "rs", "namespace": NS},
            "spec": incremental_rs()["spec"],
            "status": {"activeServiceStatus": active, "pendingServiceStatus": pending,
                       "conditions": [{"type": c, "status": "True"} for c in conds]}}


def test_weights_are_read_by_name_containment():
    rs = _status({"rayClusterName": "rs-a"}, {"rayClusterName": "rs-b"})
    route = {"spec": {"rules": [{"backendRefs": [
        {"name": "rs-a-serve-svc", "weight": 70}, {"name": "rs-b-serve-svc", "weight": 30}]}]}}
    assert get_weights_from_http_route(route, rs) == (70, 30)
    assert get_weights_from_http_route(None, rs) == (-1, -1)
    assert get_weights_from_http_route({"spec": {"rules": []}}, rs) == (-1, -1)


def test_route_equality_compares_only_managed_fields_with_default_weight_1():
    a = {"spec": {"parentRefs": [{"name": "g", "namespace": NS}], "rules": [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
         "backendRefs": [{"name": "s", "namespace": NS, "port": 8000}]}]}}
    b = {"spec": {**a["spec"], "rules": [{**a["spec"]["rules"][0], "backendRefs": [
        {"name": "s", "namespace": NS, "port": 8000, "weight": 1, "kind": "Service"}]}]}}
    assert is_http_route_equal(a, b)
    b["spec"]["rules"][0]["backendRefs"][0]["weight"] = 2
    assert not is_http_route_equal(a, b)


def test_rollback_completes_when_active_is_whole_and_pending_drained_or_unhealthy():
    whole = {"targetCapacity": 100, "trafficRoutedPercent": 100}
    healthy = {"status": {"conditions": [{"type": "HeadPodReady", "status": "True"}]}}
    assert should_complete_incremental_rollback(
        whole, {"targetCapacity": 0, "trafficRoutedPercent": 0}, healthy)
    assert not should_complete_incremental_rollback(
        whole, {"targetCapacity": 10, "trafficRoutedPercent": 0}, healthy)
    assert should_complete_incremental_rollback(
        whole, {"targetCapacity": 10, "trafficRoutedPercent": 0}, {"status": {}})
    assert not should_complete_incremental_rollback(
        {"targetCapacity": 100, "trafficRoutedPercent": 90}, {}, None)


def test_traffic_moves_one_step_per_interval_up_to_the_pending_capacity():
    now = [1000.0]
    r = RayServiceReconciler(None, dashboard_client_func=None,  # type: ignore[arg-type]
                             http_proxy_client_func=None, clock=lambda: now[0])
    rs = _status({"rayClusterName": "a", "targetCapacity": 100, "trafficRoutedPercent": 100},
                 {"rayClusterName": "b", "targetCapacity": 30, "trafficRoutedPercent": 0})
    assert r.calculate_traffic_routed_percent(rs, True) == (75, 25)
    assert r.calculate_traffic_routed_percent(rs, False) == (100, 0)  # pending not ready
    rs["status"]["pendingServiceStatus"].update(trafficRoutedPercent=25,
                                                lastTrafficMigratedTime=r.now())
    now[0] += INTERVAL - 1
    assert r.calculate_traffic_routed_percent(rs, True) == (100, 25)  # interval not passed
    now[0] += 1
    assert r.calculate_traffic_routed_percent(rs, True) == (70, 30)  # capped at capacity
