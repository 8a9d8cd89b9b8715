"""The article's RayService blue/green cases, end to end: kubelets run the Pods, the fake Ray runs
GCS, dashboard, Serve and its proxies, EndpointSlices follow the Pods after a delay, kube-proxy
sends each request to one endpoint, and the operator runs as Deployment Pods with leader
election. The switch is two Service writes and a status write derived from them; these tests
show what happens around, between and after them (SPEC §4.7 to §4.9, §6 items 29 to 34, §7.4)."""

from __future__ import annotations

from typing import Any

import pytest
from test_rayservice_support import (
    NS,
    Traffic,
    active_name,
    bump_ray_version,
    is_ready,
    pending_name,
    rayservice,
    selector_cluster,
    serve_config_v2,
    update_rs,
    world,
    writes,
)

from emu.apiserver.errors import ApiError
from emu.faults import api_error_factory
from emu.kernel.network import Match
from emu.ray import ServeAppBehaviour

HEAD_SVC, SERVE_SVC = "rs-head-svc", "rs-serve-svc"


async def _ready_service(sim: Any, **install: Any) -> tuple[Any, Any, str]:
    kube, kuberay = await world(sim, **install)
    await sim.apply(rayservice(replicas=2))
    rs = await sim.wait_for("RayService", "rs", is_ready, timeout=300)
    return kube, kuberay, active_name(rs)


async def _start_upgrade(sim: Any) -> str:
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    return pending_name(rs)


async def test_upgrade_records_pending_name_then_switches_head_then_serve_then_deletes_old(sim):
    """The whole blue/green upgrade: the pending name is persisted before its cluster is
    created; the head Service is re-pointed before the serve Service; the status promotes
    pending once both point at it; the old cluster goes one deletion delay (60 s) after the
    controller first saw it dangling, i.e. right after the promotion."""
    _, _, old = await _ready_service(sim)
    t_spec = sim.now
    new = await _start_upgrade(sim)
    assert new != old and new.startswith("rs-")
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) == new, timeout=300)
    t_promoted = sim.now
    assert pending_name(rs) == "" and is_ready(rs)
    assert await selector_cluster(sim, HEAD_SVC) == new
    assert await selector_cluster(sim, SERVE_SVC) == new

    name_write = next(t for t, verb, _ in writes(sim, "RayService", "rs", "update_status")
                      if t >= t_spec)
    created = writes(sim, "RayCluster", new, "create")
    assert len(created) == 1 and created[0][0] >= name_write
    head_switch = [t for t, verb, _ in writes(sim, "Service", HEAD_SVC, "update")]
    serve_switch = [t for t, verb, _ in writes(sim, "Service", SERVE_SVC, "update")]
    assert len(head_switch) == len(serve_switch) == 1
    assert head_switch[0] <= serve_switch[0]
    trace = [(e.t, e.fields.get("name")) for e in sim.trace.select("write", "kube-apiserver")
             if e.fields.get("kind") == "Service" and e.fields.get("verb") == "update"]
    assert [name for _, name in trace] == [HEAD_SVC, SERVE_SVC]

    await sim.sleep(80)
    deletes = writes(sim, "RayCluster", old, "delete")
    assert len(deletes) == 1
    deleted_at = deletes[0][0]
    # First seen dangling at the promotion pass (or the next, 2 s later); deleted on the first
    # pass strictly after that + 60 s.
    assert 60.0 <= deleted_at - t_promoted <= 64.5, deleted_at - t_promoted
    assert await sim.get("RayCluster", new) is not None


#: (EndpointSlice propagation delay, rayClusterDeletionDelaySeconds) → failed requests, as
#: measured (seed 0, one request every 0.1 s).
TRAFFIC_CASES = {
    (0.0, None): 0, (2.0, None): 0, (0.0, 0): 0, (2.0, 0): 0, (10.0, 0): None,
}


@pytest.mark.parametrize(("propagation", "deletion_delay"), list(TRAFFIC_CASES),
                         ids=[f"slices_{p:g}s_drain_{'default' if d is None else d}s"
                              for p, d in TRAFFIC_CASES])
async def test_traffic_through_the_serve_service_during_an_upgrade(sim, propagation,
                                                                   deletion_delay):
    """A request every 0.1 s through the serve Service while the upgrade switches clusters.

    The selector switch itself loses nothing here: until the EndpointSlice catches up,
    kube-proxy keeps sending to the old Pods, which still serve. Requests fail when the old
    cluster is gone before the slices have moved: with ``rayClusterDeletionDelaySeconds: 0`` the
    old cluster is deleted two passes (about 4 s) after the switch, so a 10 s propagation delay
    sends requests to Pods that no longer exist. The switch is not zero-loss by itself; the
    default 60 s drain only hides propagation delays shorter than it (and nothing here models
    long in-flight requests)."""
    spec = {} if deletion_delay is None else {"rayClusterDeletionDelaySeconds": deletion_delay}
    await world(sim, kube={"endpoint_propagation_delay": propagation})
    await sim.apply(rayservice(replicas=2, **spec))
    await sim.wait_for("RayService", "rs", is_ready, timeout=300)
    await sim.sleep(15)
    traffic = Traffic(sim)
    await sim.sleep(5)
    t0 = sim.now
    new = await _start_upgrade(sim)
    await sim.wait_for("RayService", "rs", lambda o: active_name(o) == new, timeout=300)
    t_switch = writes(sim, "Service", SERVE_SVC, "update")[0][0]
    await sim.sleep(90)
    traffic.stop()
    failed, sent = traffic.failures(t0), traffic.sent(t0)
    failed_times = [t for t, ok in traffic.results if not ok and t >= t0]
    print(f"\npropagation={propagation:g}s deletion_delay={deletion_delay}: {failed} of {sent} "
          f"requests failed" + (f", from t_switch+{failed_times[0] - t_switch:.1f}s to "
                                f"+{failed_times[-1] - t_switch:.1f}s" if failed_times else ""))
    assert sent > 1000
    expected = TRAFFIC_CASES[(propagation, deletion_delay)]
    if expected is not None:
        assert failed == expected
    else:
        # The old Pods die about 2 s after the switch and the slices move at 10 s. A deleted
        # Pod's IP blackholes, so each request sent in between waits the client's 2 s timeout
        # before it fails (one client, one request at a time): a handful fail, spread over the
        # window, rather than 10 a second.
        assert 3 <= failed <= 5, failed
        assert all(t_switch + 2.0 <= t <= t_switch + propagation + 0.1 for t in failed_times)


def _fail_serve_svc_updates_from(sim: Any, process: Any) -> int:
    """The leader's Update of the serve Service fails (500) — the second write of the switch."""
    return sim.network.fail_requests(
        Match(verb="update", kind="Service", name=SERVE_SVC, caller=process.name),
        api_error_factory(500))


@pytest.mark.parametrize("pending_stays_ready", [True, False], ids=["pending_ready",
                                                                    "pending_lost_its_head"])
async def test_crash_between_head_and_serve_service_writes(sim, pending_stays_ready):
    """The leader re-points the head Service, its serve Service write fails, and it crashes.
    The next leader (after the Lease expires) re-reads both Services: it completes the switch
    only on a pass where pending is serve-ready. With pending's head Pod gone, the half switch
    (head → pending, serve → active) stays, with no promotion, until the new head runs the
    re-PUT Serve app; then the switch completes (SPEC §6 item 32)."""
    _, kuberay, old = await _ready_service(sim, replicas=2)
    leader = kuberay.leader()
    rule = _fail_serve_svc_updates_from(sim, leader)
    new = await _start_upgrade(sim)
    await sim.wait_until(lambda: _points(sim, HEAD_SVC) == new, timeout=300, every=0.1,
                         what="head Service switched")
    await sim.sleep(3)  # the serve Service write keeps failing
    assert _points(sim, SERVE_SVC) == old
    t_crash = sim.now
    sim.faults.crash(leader)
    sim.network.clear_rule(rule)
    if not pending_stays_ready:
        heads = await sim.client().list("Pod", NS, label_selector=f"ray.io/cluster={new},"
                                                                  "ray.io/node-type=head")
        await sim.client().delete("Pod", heads[0]["metadata"]["name"], NS,
                                  grace_period_seconds=0)
        await sim.wait_until(lambda: kuberay.leader() not in (None, leader), timeout=120,
                             every=0.1, what="a new leader")
        t_leader = sim.now
        half: list[tuple[Any, ...]] = []
        while _points(sim, SERVE_SVC) != new and sim.now - t_leader < 300:
            rs = await sim.get("RayService", "rs")
            half.append((_points(sim, HEAD_SVC), _points(sim, SERVE_SVC), active_name(rs),
                         pending_name(rs)))
            await sim.sleep(0.5)
        # The new leader runs, but pending is not serve-ready: neither Service moves and nothing
        # is promoted, until the recreated head runs the re-PUT Serve app.
        print(f"\nhalf switch kept for {sim.now - t_leader:.1f}s under the new leader")
        assert sim.now - t_leader >= 10.0
        assert set(half) == {(new, old, old, new)}
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) == new, timeout=300)
    t_done = writes(sim, "Service", SERVE_SVC, "update")[-1][0]
    print(f"\nserve Service switched {t_done - t_crash:.1f}s after the crash")
    assert _points(sim, SERVE_SVC) == new and pending_name(rs) == ""
    assert t_done - t_crash >= 13.0  # nobody writes before the old Lease expires
    assert len(writes(sim, "Service", HEAD_SVC, "update")) == 1


def _points(sim: Any, svc: str) -> str | None:
    try:
        obj = sim.api.get("Service", svc, NS)
    except ApiError:
        return None
    return obj["spec"]["selector"].get("ray.io/cluster")


async def test_failover_after_promotion_deletes_the_old_cluster_later_than_scheduled(sim):
    """The old leader promoted and scheduled the old cluster's deletion (in memory) for 60 s
    later, then crashed 30 s in. The new leader first sees the dangling cluster when it starts
    reconciling and deletes it 60 s after *that*: later than scheduled by the time between the
    two first sightings (SPEC §4.9, §7.4)."""
    _, kuberay, old = await _ready_service(sim, replicas=2)
    new = await _start_upgrade(sim)
    await sim.wait_for("RayService", "rs", lambda o: active_name(o) == new, timeout=300)
    await sim.sleep(2.5)
    first = kuberay.reconciler("RayService")
    scheduled = first.ray_cluster_deletion_timestamps[old]
    leader = kuberay.leader()
    await sim.sleep(30)
    sim.faults.crash(leader)
    t_crash = sim.now
    await sim.wait_until(lambda: kuberay.leader() not in (None, leader), timeout=120, every=0.1,
                         what="a new leader")
    await sim.sleep(5)
    second = kuberay.reconciler("RayService")
    assert second is not first
    rescheduled = second.ray_cluster_deletion_timestamps[old]
    await sim.sleep(80)
    deletes = writes(sim, "RayCluster", old, "delete")
    assert len(deletes) == 1
    deleted_at = deletes[0][0]
    late = deleted_at - scheduled
    print(f"\nscheduled by the old leader at t={scheduled:.1f}s, re-armed by the new one at "
          f"t={rescheduled:.1f}s, deleted at t={deleted_at:.1f}s: {late:.1f}s late")
    first_seen_old, first_seen_new = scheduled - 60.0, rescheduled - 60.0
    assert first_seen_old < t_crash < first_seen_new < deleted_at
    # The new leader's first pass comes after the Lease expired (15 s from the last renewal)
    # plus its retry tick; the deletion comes on its first pass after the re-armed deadline.
    assert 15.0 - 2.0 <= first_seen_new - t_crash <= 15.0 + 4.4 + 2.0
    assert rescheduled < deleted_at <= rescheduled + 2.5
    assert late == pytest.approx(deleted_at - rescheduled + (first_seen_new - first_seen_old))
    assert late >= 30.0 + 13.0


async def test_active_failing_while_pending_is_not_ready_loses_requests_until_the_switch(sim):
    """An upgrade whose new Serve app takes 120 s to build; meanwhile the active cluster loses
    all its Pods. Requests fail until pending is serve-ready and the Services move: preparing
    the new cluster cannot make up for the failed active one (SPEC §6, the article's last
    point)."""
    _, _, old = await _ready_service(sim)
    sim.ray_config.serve_apps["slow.app"] = ServeAppBehaviour(build_seconds=120.0)
    traffic = Traffic(sim)
    await sim.sleep(5)

    def upgrade(rs: dict[str, Any]) -> None:
        rs["spec"]["rayClusterConfig"]["rayVersion"] = "2.47.0"
        rs["spec"]["serveConfigV2"] = serve_config_v2(import_path="slow.app")

    await update_rs(sim, "rs", upgrade)
    rs = await sim.wait_for("RayService", "rs", lambda o: bool(pending_name(o)), timeout=60)
    new = pending_name(rs)
    await sim.wait_for("RayCluster", new, timeout=60)
    await sim.sleep(10)
    t_fail = sim.now
    for pod in await sim.client().list("Pod", NS, label_selector=f"ray.io/cluster={old}"):
        await sim.client().delete("Pod", pod["metadata"]["name"], NS, grace_period_seconds=0)
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) == new, timeout=400)
    t_switch = writes(sim, "Service", SERVE_SVC, "update")[-1][0]
    await sim.sleep(10)
    traffic.stop()
    lost = traffic.failures(t_fail, t_switch)
    print(f"\nactive failed at t={t_fail:.1f}s, serve Service switched at t={t_switch:.1f}s: "
          f"{lost} of {traffic.sent(t_fail, t_switch)} requests failed in between, "
          f"{traffic.failures(t_switch + 2.0)} after")
    assert t_switch - t_fail >= 60.0
    assert lost >= traffic.sent(t_fail + 5.0, t_switch) * 0.5
    assert traffic.failures(0, t_fail) == 0
    assert traffic.failures(t_switch + 2.0) == 0
