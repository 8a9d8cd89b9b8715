"""The article's RayService blue/green cases, end to end: kubelets run the Pods, the fake Ray runs
GCS, dashboard, Serve and its proxies, EndpointSlices follow the Pods after a delay, kube-proxy
sends each request to one endpoint, and the operator runs as Deployment Pods with leader
election. The switch is two Service writes and a status write derived from them; these tests
show what happens around, between and after them (SPEC §4.7 to §4.9, §6 items 29 to 34, §7.4)."""

from __future__ import annotations

from typing import Any

import pytest
from test_rayservice_support import (
    Traffic,
    active_name,
    bump_ray_version,
    is_ready,
    pending_name,
    rayservice,
    selector_cluster,
    update_rs,
    world,
    writes,
)

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
        # The old Pods die about 2 s after the switch and the slices move at 10 s: roughly the
        # 8 s in between, at 10 requests a second.
        assert 40 <= failed <= 100, failed
        assert all(t_switch + 2.0 <= t <= t_switch + propagation + 0.1 for t in failed_times)
