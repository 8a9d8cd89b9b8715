"""Leader election timings, in virtual seconds, from client-go's semantics (SPEC §1.5)."""

from __future__ import annotations

from runtime_helpers import configmap, events, start_replicas

from emu.kernel import clock
from emu.runtime.leaderelection import JITTER_FACTOR
from emu.runtime.manager import Manager

LOCK = "ray-operator-leader"


async def _lease(sim):
    return await sim.get("Lease", LOCK, "default")


def _spy_observations(mgr: Manager, times: list[float]) -> None:
    """Record when this candidate saw the Lease record change (observedTime updates)."""
    elector = mgr.elector
    assert elector is not None
    original = elector.set_observed_record

    def spy(rec):
        original(rec)
        times.append(elector.observed_time)

    elector.set_observed_record = spy  # type: ignore[method-assign]


async def test_the_first_candidate_acquires_the_lease_immediately(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(0.5)
    acquired = events(sim, "leader_acquired", "op-0")
    assert [e.t for e in acquired] == [0.0]
    lease = await _lease(sim)
    assert lease["spec"]["holderIdentity"] == mgrs["op-0"].identity
    assert lease["spec"]["holderIdentity"].startswith("op-0_")
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["leaseTransitions"] == 0
    assert lease["spec"]["acquireTime"] == clock.rfc3339_micro(0.0) == "2026-01-01T00:00:00.000000Z"


async def test_the_leader_renews_every_retry_period_keeping_acquire_time(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(7)
    lease = await _lease(sim)
    assert lease["spec"]["renewTime"] == clock.rfc3339_micro(6.0)
    assert lease["spec"]["acquireTime"] == clock.rfc3339_micro(0.0)
    assert lease["spec"]["leaseTransitions"] == 0


async def test_standby_takes_over_no_earlier_than_lease_duration_after_last_observed_change(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0", "op-1"], log, mgrs)
    await sim.sleep(0)
    seen: list[float] = []
    _spy_observations(mgrs["op-1"], seen)
    await sim.sleep(0.5)
    await sim.client().create(configmap("a"))
    await sim.sleep(9.5)
    sim.faults.crash("op-0")
    await sim.wait_for("Lease", LOCK, lambda lease: lease["spec"]["holderIdentity"].startswith("op-1"),
                       timeout=60)
    acquired_at = events(sim, "leader_acquired", "op-1")[0].t
    last_change_seen = max(t for t in seen if t < acquired_at)
    assert last_change_seen >= 8.0  # it saw op-0's last renewals before the crash at t=10
    assert acquired_at >= last_change_seen + 15.0
    assert acquired_at <= last_change_seen + 15.0 + 2.0 * (1 + JITTER_FACTOR)
    lease = await _lease(sim)
    assert lease["spec"]["leaseTransitions"] == 1
    assert lease["spec"]["acquireTime"] == clock.rfc3339_micro(acquired_at)
    await sim.sleep(1)
    new_leader_reconciles = [t for t, p, _k in log if p == "op-1"]
    assert new_leader_reconciles and new_leader_reconciles[0] >= acquired_at


async def test_apiserver_outage_longer_than_renew_deadline_makes_the_leader_exit_1(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0", "op-1"], log, mgrs)
    await sim.sleep(5)
    sim.faults.outage("apiserver", duration=30)
    op0 = sim.processes.get("op-0")
    code = await op0.wait_exited()
    lost = events(sim, "leader_lost", "op-0")
    assert code == 1
    assert op0.exit_reason == "leader election lost"
    # last renew at t=4, next window opens at t=6 and closes RenewDeadline later
    assert [e.t for e in lost] == [16.0]
    await sim.wait_for("Lease", LOCK, lambda lease: lease["spec"]["holderIdentity"].startswith("op-1"),
                       timeout=60)
    acquired = events(sim, "leader_acquired", "op-1")
    assert len(acquired) == 1
    # nobody leads while the API server is down; op-1's view is older than 15 s, so its first
    # attempt after the outage wins
    assert 35.0 <= acquired[0].t <= 35.0 + 2.0 * (1 + JITTER_FACTOR)


async def test_a_restarted_process_has_a_new_identity_and_waits_for_its_old_lease(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(5)
    old_identity = mgrs["op-0"].identity
    sim.faults.restart("op-0")
    await sim.sleep(0)
    new_identity = mgrs["op-0"].identity
    assert new_identity != old_identity
    assert new_identity.startswith("op-0_")
    await sim.wait_for("Lease", LOCK, lambda lease: lease["spec"]["holderIdentity"] == new_identity,
                       timeout=60)
    acquired = events(sim, "leader_acquired", "op-0")
    assert acquired[0].t == 0.0
    # it first looked at t=5 and saw op-0's renewal from t=4 as a change: 15 s from t=5
    assert 20.0 <= acquired[1].t <= 20.0 + 2.0 * (1 + JITTER_FACTOR)
    lease = await _lease(sim)
    assert lease["spec"]["leaseTransitions"] == 1


async def test_identities_are_decided_by_the_seed(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(0)
    first = mgrs["op-0"].identity
    sim.faults.crash("op-0")
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(0)
    assert mgrs["op-0"].identity != first
    rng = sim.rng.fork("operator:op-0:1").fork("leader-identity:op-0:1")
    assert first == f"op-0_{rng.uid()}"


async def test_a_leader_partitioned_from_the_apiserver_exits_after_its_renew_deadline(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0", "op-1"], log, mgrs)
    await sim.sleep(5)
    sim.faults.partition("op-0", "apiserver")
    op0 = sim.processes.get("op-0")
    assert await op0.wait_exited() == 1
    # the window opened at t=6; each request times out after max(10/2, 1) = 5 s; the window's
    # 10 s deadline ends it
    assert [e.t for e in events(sim, "leader_lost", "op-0")] == [16.0]
    failed = events(sim, "lease_update_failed", "op-0")
    assert failed[0].t == 11.0
    assert failed[0].fields["error"] == "update apiserver: i/o timeout after 5s"
    await sim.wait_for("Lease", LOCK, lambda lease: lease["spec"]["holderIdentity"].startswith(
        "op-1"), timeout=60)
    assert events(sim, "leader_acquired", "op-1")[0].t >= 4.0 + 15.0


def test_the_same_seed_gives_the_same_failover_history_byte_for_byte():
    import emu

    async def failover(sim):
        log, mgrs = [], {}
        await sim.client().create(configmap("a"))
        start_replicas(sim, ["op-0", "op-1", "op-2"], log, mgrs)
        await sim.sleep(7)
        sim.faults.crash("op-0")
        await sim.sleep(40)
        return sim.trace.digest()

    assert emu.run(failover, seed=3) == emu.run(failover, seed=3)
    assert emu.run(failover, seed=3) != emu.run(failover, seed=4)
