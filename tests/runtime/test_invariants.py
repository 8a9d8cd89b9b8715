"""The leadership checkers of emu/invariants.py."""

from __future__ import annotations

from runtime_helpers import start_replicas

from emu.invariants import HolderViolation, LeadershipTenures, LeaseHolderChecker
from emu.kernel import clock

LOCK = "ray-operator-leader"


async def test_failover_keeps_one_valid_holder_as_the_apiserver_sees_it(sim):
    checker = LeaseHolderChecker(sim, "default", LOCK).start()
    tenures = LeadershipTenures(sim.trace)
    log, mgrs = [], {}
    start_replicas(sim, ["op-0", "op-1"], log, mgrs)
    await sim.sleep(10)
    sim.faults.crash("op-0")
    await sim.sleep(40)
    assert checker.violations == []
    assert checker.holder_changes == 2
    assert [(t.process, t.ended_by) for t in tenures.all()] == [("op-0", "crashed"),
                                                               ("op-1", "leading")]
    first = tenures.all()[0]
    assert (first.start, first.end) == (0.0, 10.0)


async def test_a_takeover_before_the_previous_holder_expires_is_reported(sim):
    checker = LeaseHolderChecker(sim, "default", LOCK).start()
    log, mgrs = [], {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(3)
    c = sim.client("intruder")
    lease = await c.get("Lease", LOCK, "default")
    lease["spec"]["holderIdentity"] = "intruder"
    lease["spec"]["renewTime"] = clock.rfc3339_micro(sim.now)
    await c.update(lease)
    await sim.sleep(0)
    assert checker.violations == [HolderViolation(
        at=3.0, lease=f"default/{LOCK}", previous=mgrs["op-0"].identity,
        previous_valid_until=17.0, new="intruder")]
