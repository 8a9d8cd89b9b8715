"""The article's RayService blue/green claims as scenarios, each with traffic counted.

The article: the switch is two sequential Service writes (head, then serve), not a transaction; a
failure between them leaves a partial switch; a Service change takes time to reach the forwarding
path; if the active cluster fails while pending is not ready, requests are lost — so the switch is
not zero-downtime. These scenarios run the whole stack (kubelets, EndpointSlices, kube-proxy, the
fake Ray with Serve and its proxies, KubeRay as Deployment Pods with leader election) and measure:

- ``rayservice-upgrade``: an upgrade under a steady request stream, twice: with the default 60 s
  deletion delay and 2 s EndpointSlice propagation (nothing lost), then with no deletion delay and
  slices lagging 6-14 s (requests go to Pods that are gone until the slices move).
- ``rayservice-switch-interrupted``: the leader dies between the two Service writes; the half switch
  stays until the next leader completes it, and only while pending is serve-ready.
- ``rayservice-failover-cleanup``: a failover after promotion re-arms the in-memory 60 s deletion
  delay, so the old cluster goes later than the old leader had scheduled.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import attrs

from ..faults import DelayEndpoints
from ..kernel.trace import TraceEvent
from ..simulation import Simulation
from . import Report, scenario
from ._rayservice_common import (
    DEFAULT_DELETION_DELAY,
    LEASE_DURATION,
    NS,
    Narrator,
    deleted_pod_of,
    head_svc,
    head_traffic,
    kube_config,
    next_event,
    rayservice,
    selector_cluster,
    serve_svc,
    serve_traffic,
    start,
    status_names,
    update_rayservice,
    upgrade_to,
)

RS = "rs"
HEAD, SERVE = head_svc(RS), serve_svc(RS)
#: The realistic EndpointSlice propagation delay of the first upgrade.
PROPAGATION = 2.0
#: The slow propagation (a loaded control plane) of the second upgrade: seeded in this range.
SLOW_PROPAGATION = (6.0, 14.0)
#: The reconcile period: the RayService controller requeues every 2 s.
PASS = 2.0


def _is_ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _deadline(kuberay: Any, cluster: str) -> float:
    """The deletion deadline the current leader holds in memory for ``cluster`` (NaN if none)."""
    reconciler = kuberay.reconciler("RayService")
    if reconciler is None:
        return math.nan
    return float(reconciler.ray_cluster_deletion_timestamps.get(cluster, math.nan))


async def _wait_promoted(narrator: Narrator, old: str, timeout: float = 300.0) -> str:
    """Wait until the status promotes a cluster other than ``old``; its name."""
    promoted = await narrator.wait("promoted", previous=old, timeout=timeout)
    return str(promoted.fields["active"])


async def _wait_deleted(narrator: Narrator, cluster: str, timeout: float = 200.0) -> float:
    """Wait until ``cluster`` is deleted; when its deletion was written."""
    return (await narrator.wait("cluster_deleted", cluster=cluster, timeout=timeout)).t


@scenario("rayservice-upgrade",
          "blue/green upgrade under traffic: head then serve Service, promotion, old cluster "
          "deleted 60 s later; requests lost only when slices outlast the deletion",
          cluster=kube_config(PROPAGATION))
async def rayservice_upgrade(sim: Simulation, report: Report) -> None:
    """A RayService upgraded twice while a client sends a request every 0.5 s to its serve
    Service (one endpoint per request, as the EndpointSlice lists them at that moment).

    First upgrade, defaults (deletion delay 60 s) and 2 s slice propagation. Expected: the pending
    name is recorded before its cluster is created; the head Service is re-pointed before the
    serve Service, by the same leader, in one pass, one API round trip apart; promotion follows
    the serve Service write; the leader arms the old cluster's deletion for 60 s after it first
    sees it dangling (within a pass of promotion) and deletes it on its first pass past that
    deadline; no request fails, because the old Pods outlive the slices' move.

    Second upgrade, ``rayClusterDeletionDelaySeconds: 0`` while the slices lag 6 to 14 s (seeded;
    `DelayEndpoints`). Expected: requests fail, all of them between the old cluster's deletion
    and the slices' move (serve switch + the lag), none before, and every request sent in that
    window — the switch itself is not what loses them; the Services' propagation outlasting the
    old Pods is.
    """
    kuberay = await start(sim, replicas=1)
    narrator = Narrator(sim, RS)
    await sim.apply(rayservice(RS))
    await sim.wait_for("RayService", RS, _is_ready, timeout=300)
    first = status_names(sim, RS)[0]
    traffic = serve_traffic(sim, RS)
    await sim.sleep(3)

    # -- upgrade 1: default deletion delay, 2 s propagation ----------------------------------
    t0 = sim.now
    await update_rayservice(sim, RS, upgrade_to("2.47.0"))
    second = await _wait_promoted(narrator, first)
    await sim.sleep(PASS + 1)
    armed = _deadline(kuberay, first)
    t_deleted = await _wait_deleted(narrator, first)
    await sim.sleep(PROPAGATION + 3)
    t1 = sim.now
    leader = kuberay.leader()

    recorded = narrator.time("pending_recorded", cluster=second)
    created = narrator.time("cluster_created", cluster=second)
    report.expect("the pending cluster's name is recorded in the status before the cluster is "
                  "created", recorded <= created,
                  f"name at t={recorded:.3f}s, cluster created at t={created:.3f}s")
    head = narrator.first("service_repointed", service=HEAD, to=second)
    serve = narrator.first("service_repointed", service=SERVE, to=second)
    order_ok = head is not None and serve is not None and head.t <= serve.t and (
        narrator.happenings.index(head) < narrator.happenings.index(serve))
    gap = (serve.t - head.t) if head and serve else math.nan
    report.expect("the head Service is re-pointed first, then the serve Service: two writes",
                  order_ok, f"head at t={head.t if head else math.nan:.3f}s, serve at "
                            f"t={serve.t if serve else math.nan:.3f}s ({gap * 1000:.0f} ms apart)")
    same_writer = bool(head and serve and head.fields["by"] == serve.fields["by"]
                       == (leader.name if leader else ""))
    report.expect("both writes come from the leader, in one reconcile pass",
                  same_writer and gap < PASS / 2,
                  f"writer {head.fields['by'] if head else '?'}")
    promoted = narrator.time("promoted", active=second)
    report.expect("promotion is written after both Services point at the pending cluster",
                  serve is not None and promoted >= serve.t,
                  f"promoted at t={promoted:.3f}s")
    delay1 = t_deleted - promoted
    report.expect("the old cluster is deleted on the first pass past the 60 s deadline the "
                  "leader armed when it first saw it dangling (a pass after promotion)",
                  promoted <= armed - DEFAULT_DELETION_DELAY <= promoted + PASS + 0.5
                  and armed <= t_deleted <= armed + PASS + 0.5,
                  f"first seen dangling t={armed - DEFAULT_DELETION_DELAY:.3f}s, deadline "
                  f"t={armed:.3f}s, deleted t={t_deleted:.3f}s: {delay1:.1f}s after promotion")
    failed1, sent1 = traffic.failures(t0, t1), traffic.sent(t0, t1)
    report.expect("with 2 s propagation and the 60 s deletion delay, no request fails",
                  failed1 == 0 and sent1 > 0, f"{failed1} of {sent1} failed")

    # -- upgrade 2: no deletion delay, slices lag 6-14 s -------------------------------------
    low, high = SLOW_PROPAGATION
    slow = round(low + (high - low) * sim.rng.fork("propagation").random(), 3)
    sim.faults.do(DelayEndpoints(seconds=slow))
    await update_rayservice(sim, RS, upgrade_to("2.48.0", rayClusterDeletionDelaySeconds=0))
    third = await _wait_promoted(narrator, second)
    t_deleted2 = await _wait_deleted(narrator, second)
    await sim.sleep(slow + 3)
    traffic.stop()
    t2 = sim.now
    serve2 = narrator.time("service_repointed", service=SERVE, to=third)
    head2 = narrator.time("service_repointed", service=HEAD, to=third)
    promoted2 = narrator.time("promoted", active=third)
    failed2, sent2 = traffic.failures(t1, t2), traffic.sent(t1, t2)
    times = traffic.failure_times(t1, t2)
    slices_move = serve2 + slow
    report.expect("with no deletion delay and slices lagging 6-14 s, requests fail",
                  failed2 > 0, f"{failed2} of {sent2} failed with a {slow:g} s lag")
    window = (f"failures from t={times[0]:.1f}s to t={times[-1]:.1f}s; old cluster deleted "
              f"t={t_deleted2:.1f}s, slices move t={slices_move:.1f}s") if times else "none"
    report.expect("every failure falls between the old cluster's deletion and the slices' move",
                  bool(times) and t_deleted2 <= times[0] and times[-1] <= slices_move + 1.0,
                  window)
    in_window = traffic.sent(t_deleted2, slices_move)
    report.expect("and every request sent in that window fails (the slice lists only the dead "
                  "Pod)", abs(failed2 - in_window) <= 1,
                  f"{failed2} failed, {in_window} sent in the window")
    report.expect("the serve Service still points at the new cluster (nothing rolled back)",
                  selector_cluster(sim, SERVE) == third and selector_cluster(sim, HEAD) == third)

    report.fact("upgrade1_failed_requests", f"{failed1} of {sent1}")
    report.fact("upgrade1_head_then_serve_write_gap_ms", round(gap * 1000, 1))
    report.fact("upgrade1_deletion_deadline_after_promotion_s", round(armed - promoted, 3))
    report.fact("upgrade1_old_cluster_deleted_after_promotion_s", round(delay1, 3))
    report.fact("upgrade1_propagation_s", PROPAGATION)
    report.fact("upgrade2_failed_requests", f"{failed2} of {sent2}")
    report.fact("upgrade2_head_then_serve_write_gap_ms", round((serve2 - head2) * 1000, 1))
    report.fact("upgrade2_old_cluster_deleted_after_promotion_s",
                round(t_deleted2 - promoted2, 3))
    report.fact("upgrade2_propagation_s", slow)
    report.fact("upgrade2_loss_window_s",
                round(times[-1] - times[0] + traffic.interval, 3) if times else 0.0)


def _crash_after_head_write(sim: Simulation, leader: Any) -> asyncio.Future[float]:
    """Crash ``leader`` right after the API server commits its head Service update, before its
    serve Service write is sent. The future gets the crash time."""
    crashed: asyncio.Future[float] = sim.loop.create_future()

    def on_event(ev: TraceEvent) -> None:
        f = ev.fields
        if (not crashed.done() and ev.event == "write" and f.get("kind") == "Service"
                and f.get("name") == HEAD and f.get("verb") == "update"
                and f.get("caller") == leader.name):
            crashed.set_result(ev.t)
            # after the write is committed, before the leader's task sees the response
            sim.loop.call_soon(sim.faults.crash, leader)

    sim.trace.subscribe(on_event)
    return crashed


@attrs.frozen
class _Tenure:
    process: str
    identity: str
    t: float


def _leader_since(sim: Simulation, t: float) -> _Tenure:
    """The first leadership acquired at or after ``t``: process name, Lease identity, when. (A
    crashed operator container restarts under the same process name with a new identity.)"""
    for ev in sim.trace.select("leader_acquired"):
        if ev.t >= t:
            return _Tenure(ev.process, str(ev.fields.get("identity", "")), ev.t)
    return _Tenure("", "", math.nan)


@scenario("rayservice-switch-interrupted",
          "the leader dies between the head and serve Service writes: a half switch the next "
          "leader completes only while pending is serve-ready",
          cluster=kube_config(PROPAGATION))
async def rayservice_switch_interrupted(sim: Simulation, report: Report) -> None:
    """Two operator replicas; a RayService upgraded twice, each time with the leader crashing
    right after its head Service write and before its serve Service write. Two clients: one on
    the serve Service (the application's users), one on the head Service's dashboard port.

    Round 1, pending stays ready. Expected: the half switch is observable (head Service → pending,
    serve Service → active, status unchanged); the next leader, after the Lease expires, completes
    it with the serve Service write only (the head Service is not written again) and promotes;
    no serve request fails.

    Round 2, pending's head Pod is deleted at the crash. Expected: the next leader leaves the half
    switch in place — no Service write, no promotion — until pending's recreated head runs the
    Serve app again; then it completes the switch. Serve clients lose nothing (the serve Service
    still points at the healthy active cluster); head-Service clients reach the pending cluster
    during the half switch, and fail while its head is gone.
    """
    kuberay = await start(sim, replicas=2)
    narrator = Narrator(sim, RS)
    await sim.apply(rayservice(RS))
    await sim.wait_for("RayService", RS, _is_ready, timeout=300)
    first = status_names(sim, RS)[0]
    serve_clients, head_clients = serve_traffic(sim, RS), head_traffic(sim, RS)
    await sim.sleep(3)

    # -- round 1: the leader dies between the writes, pending stays ready -------------------
    leader1 = kuberay.leader()
    tenure1 = _leader_since(sim, 0.0)
    crashing = _crash_after_head_write(sim, leader1)
    await update_rayservice(sim, RS, upgrade_to("2.47.0"))
    t_crash1 = await asyncio.wait_for(crashing, 120)
    second = status_names(sim, RS)[1]
    await sim.sleep(1)
    half1 = (selector_cluster(sim, HEAD), selector_cluster(sim, SERVE), *status_names(sim, RS))
    report.expect("after the crash the switch is half done: head Service → pending, serve "
                  "Service → active, status unchanged",
                  half1 == (second, first, first, second) and not leader1.alive,
                  f"head → {half1[0]}, serve → {half1[1]}, active {half1[2]}, "
                  f"pending {half1[3]}")
    await _wait_promoted(narrator, first)
    tenure2 = _leader_since(sim, t_crash1)
    t_leader2 = tenure2.t
    done1 = narrator.first("service_repointed", service=SERVE, to=second)
    t_done1 = done1.t if done1 else math.nan
    head_writes1 = narrator.all("service_repointed", service=HEAD, to=second)
    report.expect("the next leader completes it after the Lease expires, with the serve "
                  "Service write only",
                  done1 is not None and done1.fields["by"] == tenure2.process
                  and tenure2.identity != tenure1.identity
                  and t_done1 - t_crash1 >= LEASE_DURATION - PASS and len(head_writes1) == 1,
                  f"crash t={t_crash1:.3f}s, new leader t={t_leader2:.3f}s, serve Service "
                  f"t={t_done1:.3f}s ({t_done1 - t_crash1:.1f}s half switched)")
    await sim.sleep(5)

    # -- round 2: the leader dies between the writes and pending loses its head --------------
    leader2_proc = kuberay.leader()
    crashing = _crash_after_head_write(sim, leader2_proc)
    await update_rayservice(sim, RS, upgrade_to("2.48.0"))
    t_crash2 = await asyncio.wait_for(crashing, 120)
    third = status_names(sim, RS)[1]
    lost_head = await deleted_pod_of(sim, third, "head")
    t_lost = sim.now
    await _wait_promoted(narrator, second)
    tenure3 = _leader_since(sim, t_crash2)
    t_leader3 = tenure3.t
    done2 = narrator.first("service_repointed", service=SERVE, to=third)
    t_done2 = done2.t if done2 else math.nan
    back = _head_started_after(sim, third, t_lost)
    writes_between = [h for h in narrator.happenings
                      if h.what in ("service_repointed", "promoted") and t_crash2 < h.t < t_done2]
    report.expect("with pending's head gone, the next leader leaves the half switch in place "
                  "(no Service write, no promotion) until pending serves again",
                  done2 is not None and done2.fields["by"] == tenure3.process
                  and tenure3.identity != tenure2.identity and not writes_between
                  and t_leader3 < back < t_done2,
                  f"new leader t={t_leader3:.3f}s, pending head {lost_head} replaced and running "
                  f"t={back:.3f}s, serve Service t={t_done2:.3f}s: half switch kept "
                  f"{t_done2 - t_leader3:.1f}s under the new leader")
    await sim.sleep(PROPAGATION + 3)
    serve_clients.stop()
    head_clients.stop()
    end = sim.now

    t0 = t_crash1 - 3
    serve_failed = serve_clients.failures(t0, end)
    report.expect("no request through the serve Service fails in either round (it kept "
                  "pointing at the healthy active cluster)",
                  serve_failed == 0, f"{serve_failed} of {serve_clients.sent(t0, end)} failed")
    head_failed1 = head_clients.failures(t_crash1, t_done1)
    head_failed2 = head_clients.failures(t_crash2, t_done2)
    times2 = head_clients.failure_times(t_crash2, t_done2 + PROPAGATION + 1)
    report.expect("head-Service clients fail only in round 2, while the half switch points them "
                  "at pending's missing head",
                  head_failed1 == 0 and head_failed2 > 0 and bool(times2)
                  and t_lost <= times2[0] and times2[-1] <= back + PROPAGATION + 1,
                  f"round 1: {head_failed1} failed; round 2: {head_failed2} failed"
                  + (f" from t={times2[0]:.1f}s to t={times2[-1]:.1f}s" if times2 else ""))

    report.fact("round1_half_switch_s", round(t_done1 - t_crash1, 3))
    report.fact("round1_crash_to_new_leader_s", round(t_leader2 - t_crash1, 3))
    report.fact("round2_half_switch_s", round(t_done2 - t_crash2, 3))
    report.fact("round2_half_switch_under_new_leader_s", round(t_done2 - t_leader3, 3))
    report.fact("serve_failed_requests", f"{serve_failed} of {serve_clients.sent(t0, end)}")
    report.fact("head_svc_failed_requests_round1",
                f"{head_failed1} of {head_clients.sent(t_crash1, t_done1)}")
    report.fact("head_svc_failed_requests_round2",
                f"{head_failed2} of {head_clients.sent(t_crash2, t_done2)}")


def _head_started_after(sim: Simulation, cluster: str, t: float) -> float:
    """When a head container of ``cluster`` started after ``t`` (NaN if none did)."""
    prefix = f"{NS}/{cluster}-head-"
    for ev in sim.trace.select("ray_container_started"):
        if ev.t > t and ev.process.startswith(prefix):
            return ev.t
    return math.nan


@scenario("rayservice-failover-cleanup",
          "a failover after promotion re-arms the in-memory 60 s deletion delay: the old "
          "cluster goes later than the old leader had scheduled",
          cluster=kube_config(PROPAGATION))
async def rayservice_failover_cleanup(sim: Simulation, report: Report) -> None:
    """Two operator replicas; an upgrade under traffic through the serve Service. The leader
    promotes the new cluster and arms the old one's deletion for 60 s after it first saw it
    dangling — in its memory only. Between 20 and 40 s later (seeded) the leader crashes.

    Expected: the old leader deletes nothing; the new leader first sees the old cluster dangling
    on its first pass (after the Lease expired, 15 s, plus its retry tick) and arms its own 60 s
    from then, so the deletion comes later than scheduled by the time between the two sightings
    (at least the crash delay plus 13 s); the deletion is on the new leader's first pass past its
    deadline; no serve request fails (the old cluster only lingers).
    """
    kuberay = await start(sim, replicas=2)
    narrator = Narrator(sim, RS)
    await sim.apply(rayservice(RS))
    await sim.wait_for("RayService", RS, _is_ready, timeout=300)
    first = status_names(sim, RS)[0]
    traffic = serve_traffic(sim, RS)
    await sim.sleep(3)
    t0 = sim.now
    await update_rayservice(sim, RS, upgrade_to("2.47.0"))
    second = await _wait_promoted(narrator, first)
    promoted = narrator.time("promoted", active=second)
    await sim.sleep(PASS + 1)
    leader1 = kuberay.leader()
    scheduled = _deadline(kuberay, first)
    crash_after = 20.0 + 20.0 * sim.rng.fork("crash").random()
    await sim.sleep(promoted + crash_after - sim.now)
    t_crash = sim.now
    sim.faults.crash(leader1)
    await next_event(sim, lambda ev: ev.event == "leader_acquired" and ev.t >= t_crash,
                     timeout=120, what="a new leader")
    await sim.sleep(PASS)  # its first passes see the old cluster dangling
    rearmed = _deadline(kuberay, first)
    tenure2 = _leader_since(sim, t_crash)
    t_leader2 = tenure2.t
    t_deleted = await _wait_deleted(narrator, first)
    await sim.sleep(3)
    traffic.stop()
    deleted = narrator.first("cluster_deleted", cluster=first)
    seen_old, seen_new = scheduled - DEFAULT_DELETION_DELAY, rearmed - DEFAULT_DELETION_DELAY
    late = t_deleted - scheduled
    report.expect("the old leader armed the deletion in memory a pass after promotion, then "
                  "crashed before its deadline",
                  promoted <= seen_old <= promoted + PASS + 0.5 and t_crash < scheduled,
                  f"promoted t={promoted:.3f}s, deadline t={scheduled:.3f}s, crash "
                  f"t={t_crash:.3f}s ({crash_after:.1f}s after promotion)")
    report.expect("the new leader first sees the cluster dangling on its first passes, after "
                  "the Lease expired, and arms a fresh 60 s",
                  LEASE_DURATION - PASS <= seen_new - t_crash <= LEASE_DURATION + 4.4 + PASS
                  and t_leader2 <= seen_new + 1e-6,
                  f"new leader t={t_leader2:.3f}s, first seen t={seen_new:.3f}s, deadline "
                  f"t={rearmed:.3f}s")
    report.expect("the new leader deletes it on its first pass past its own deadline",
                  deleted is not None and deleted.fields["by"] == tenure2.process
                  and rearmed <= t_deleted <= rearmed + PASS + 0.5,
                  f"deleted t={t_deleted:.3f}s by {deleted.fields['by'] if deleted else '?'}")
    report.expect("so the deletion comes later than the old leader scheduled, by the time "
                  "between the two sightings (at least the crash delay + 13 s)",
                  late >= (t_crash - seen_old) + LEASE_DURATION - PASS
                  and abs(late - ((seen_new - seen_old) + (t_deleted - rearmed))) < 1e-6,
                  f"{late:.1f}s late; {t_deleted - promoted:.1f}s after promotion instead of "
                  f"{scheduled - promoted:.1f}s")
    failed, sent = traffic.failures(t0), traffic.sent(t0)
    report.expect("no request through the serve Service fails", failed == 0 and sent > 0,
                  f"{failed} of {sent} failed")
    report.fact("crash_after_promotion_s", round(crash_after, 3))
    report.fact("scheduled_deletion_after_promotion_s", round(scheduled - promoted, 3))
    report.fact("actual_deletion_after_promotion_s", round(t_deleted - promoted, 3))
    report.fact("deleted_later_than_scheduled_s", round(late, 3))
    report.fact("failed_requests", f"{failed} of {sent}")
