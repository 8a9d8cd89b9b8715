"""Recovery tests of the Greeter controller in the emulator: a leader crash mid-reconcile, an
API-server outage, and a lost response.

Run them with ``pytest examples/my_controller`` (the fixed `greeter.Greeter`), or with
``--greeter=naive`` to watch the lost-response test catch `naive.NaiveGreeter`.
"""

from __future__ import annotations

from greeter import KIND, configmap_name, greeting, register_greeting_kind, start_greeter

import emu
from emu.invariants import TwoLeaderChecker
from emu.kernel.trace import TraceEvent

LEASE = "greeter-leader"


def ready(g: dict) -> bool:
    return (g.get("status") or {}).get("phase") == "Ready"


def holder(lease: dict) -> str:
    """The process name in a Lease's holder identity (``<hostname>_<uuid>``)."""
    return str(lease["spec"].get("holderIdentity") or "").rsplit("_", 1)[0]


def writes(sim: emu.Simulation, verb: str, kind: str) -> list[TraceEvent]:
    """The writes the API server committed (its ``write`` trace events)."""
    return [e for e in sim.trace.select("write")
            if (e.fields.get("verb"), e.fields.get("kind")) == (verb, kind)]


def configmap_creates(sim: emu.Simulation) -> list[TraceEvent]:
    return writes(sim, "create", "ConfigMap")


async def test_a_standby_finishes_the_reconcile_a_crashed_leader_left_half_done(sim, reconciler):
    register_greeting_kind(sim)
    two_leaders = TwoLeaderChecker(sim.trace)   # attach checkers before anything happens
    start_greeter(sim, replicas=2, reconciler=reconciler)
    lease = await sim.wait_for("Lease", LEASE, lambda le: bool(holder(le)), timeout=30)
    leader = holder(lease)

    # Crash the leader the instant its ConfigMap create is committed: the ConfigMap exists, the
    # Greeting's status is not written yet (the crash runs before the leader's next step).
    def crash_after_create(ev: TraceEvent) -> None:
        if (ev.event, ev.fields.get("kind"), ev.fields.get("caller")) == (
                "write", "ConfigMap", leader):
            sim.loop.call_soon(sim.faults.crash, leader)

    sim.trace.subscribe(crash_after_create)
    await sim.client().create(greeting("hello", "hi"))
    g = await sim.wait_for(KIND, "hello", ready, timeout=120)

    crashed_at = sim.trace.select("process_crashed", process=leader)[0].t
    standby = holder(await sim.get("Lease", LEASE))
    assert standby != leader
    # controller-runtime's election: the standby waits out the 15 s Lease before taking over
    assert sim.now - crashed_at >= 15
    assert [e.fields["caller"] for e in configmap_creates(sim)] == [leader]
    assert [e.fields["caller"] for e in writes(sim, "update_status", KIND)] == [standby]
    cm = await sim.get("ConfigMap", configmap_name("hello"))
    assert cm["data"] == {"message": "hi"}
    assert g["status"] == {"phase": "Ready", "message": ""}
    assert two_leaders.violations == []


async def test_after_a_minute_long_apiserver_outage_the_greeting_is_still_reconciled(sim, reconciler):
    register_greeting_kind(sim)
    start_greeter(sim, replicas=2, reconciler=reconciler)
    await sim.wait_for("Lease", LEASE, lambda le: bool(holder(le)), timeout=30)
    leader = holder(await sim.get("Lease", LEASE))

    await sim.client().create(greeting("hello", "hi"))
    sim.faults.outage("apiserver", duration=60)     # at once: every call is refused for 60 s
    await sim.sleep(59)
    assert "status" not in await sim.get(KIND, "hello")     # nothing could be written
    # the leader could not renew its Lease within its 10 s renew deadline, so it exited, as a
    # controller-runtime manager does ("leader election lost"); the standby is still a candidate
    assert sim.processes.get(leader).alive is False
    await sim.wait_for(KIND, "hello", ready, timeout=300)
    assert holder(await sim.get("Lease", LEASE)) != leader
    assert len(configmap_creates(sim)) == 1


async def test_a_lost_create_response_is_adopted_not_reported_as_a_name_clash(sim, reconciler):
    register_greeting_kind(sim)
    start_greeter(sim, replicas=2, reconciler=reconciler)
    await sim.wait_for("Lease", LEASE, lambda le: bool(holder(le)), timeout=30)

    # The next ConfigMap create is applied, but its response never arrives: the caller times
    # out after 30 s and, in place, tries again, which meets AlreadyExists.
    sim.faults.lose_responses(verb="create", kind="ConfigMap", count=1)
    await sim.client().create(greeting("hello", "hi"))
    g = await sim.wait_for(KIND, "hello", lambda g: "phase" in (g.get("status") or {}),
                           timeout=120)
    assert g["status"] == {"phase": "Ready", "message": ""}
    assert len(configmap_creates(sim)) == 1
    assert [e.event for e in sim.trace if e.event in ("response_lost", "create_timed_out")] == [
        "response_lost", "create_timed_out"]


async def test_a_configmap_someone_else_made_is_never_taken_over(sim, reconciler):
    register_greeting_kind(sim)
    await sim.client("someone").create({
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"mine": "yes"},
        "metadata": {"name": configmap_name("hello"), "namespace": "default"}})
    start_greeter(sim, replicas=2, reconciler=reconciler)
    await sim.client().create(greeting("hello", "hi"))
    g = await sim.wait_for(KIND, "hello", lambda g: "phase" in (g.get("status") or {}),
                           timeout=120)
    assert g["status"] == {"phase": "Failed",
                           "message": "ConfigMap hello-greeting exists and is not this Greeting's"}
    assert (await sim.get("ConfigMap", configmap_name("hello")))["data"] == {"mine": "yes"}
