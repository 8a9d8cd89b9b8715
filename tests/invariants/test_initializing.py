"""rayservice-initializing-timeout: with ray.io/initializing-timeout, an initialization (from
creation or a resume) ends Running or InitializingTimeout within the timeout plus the bound."""

from __future__ import annotations

from invariant_worlds import NS, create, rayservice, set_status

from emu.faults import Outage
from emu.invariants import InitializingTimeoutHonoured, Monitors, Violation
from emu.invariants.initializing import timeout_seconds

TIMED_OUT = [{"type": "Ready", "status": "False", "reason": "InitializingTimeout"}]


def annotated(name, timeout="60s", **status):
    obj = rayservice(name, **status)
    obj["metadata"]["annotations"] = {"ray.io/initializing-timeout": timeout}
    return obj


def set_suspend(sim, name, value):
    obj = sim.api.get("RayService", name, NS)
    obj["spec"]["suspend"] = value
    sim.api.update(obj, caller="test")


def test_the_annotation_reads_as_kuberay_reads_it():
    assert timeout_seconds("60s") == 60.0
    assert timeout_seconds("1h30m") == 5400.0
    assert timeout_seconds("90") == 90.0
    assert timeout_seconds("") is None
    assert timeout_seconds("0") is None
    assert timeout_seconds("soon") is None
    # whatever KubeRay's own reading (controllers.rayservice.get_initializing_timeout) accepts
    from emu.kuberay.rayservice import get_initializing_timeout

    for text in ("+5m", "1.5h", "300ms", "2m30s", "+90", "45"):
        ray_service = {"metadata": {"annotations": {"ray.io/initializing-timeout": text}}}
        assert timeout_seconds(text) == get_initializing_timeout(ray_service), text


async def test_an_initialization_that_never_ends_is_reported_at_timeout_plus_bound(sim):
    monitors = Monitors.attach(sim, [InitializingTimeoutHonoured(bound=30.0)])
    await sim.sleep(5)
    create(sim, annotated("rs"))
    assert await monitors.finish(sim) == [Violation(
        "rayservice-initializing-timeout",
        "RayService default/rs, created at t=5.000s with ray.io/initializing-timeout 60s, was "
        "neither Running nor InitializingTimeout by t=95.000s (serviceStatus (none), Ready "
        "(none) reason (none))", 95.0, ("RayService/default/rs",))]


async def test_running_timed_out_or_unannotated_services_pass(sim):
    monitors = Monitors.attach(sim, [InitializingTimeoutHonoured(bound=30.0)])
    create(sim, annotated("ok"))
    create(sim, annotated("late"))
    create(sim, rayservice("free"))  # no annotation: no promise
    sim.call_later(40, lambda: set_status(sim, "RayService", "ok", serviceStatus="Running"))
    sim.call_later(80, lambda: set_status(sim, "RayService", "late", conditions=TIMED_OUT))
    await sim.sleep(200)
    await monitors.assert_ok(sim)


async def test_a_resume_starts_a_new_initialization(sim):
    monitors = Monitors.attach(sim, [InitializingTimeoutHonoured(bound=30.0)])
    create(sim, annotated("rs", serviceStatus="Running"))
    await sim.sleep(10)
    set_suspend(sim, "rs", True)
    set_status(sim, "RayService", "rs", serviceStatus="", conditions=[
        {"type": "Suspended", "status": "True", "reason": "SuspendComplete"},
        {"type": "Ready", "status": "False", "reason": "SuspendComplete"}])
    await sim.sleep(10)
    set_suspend(sim, "rs", False)  # asked at t=20; KubeRay resumes at t=25
    await sim.sleep(5)
    set_status(sim, "RayService", "rs", conditions=[  # Ready still says SuspendComplete
        {"type": "Suspended", "status": "False", "reason": "Resumed"},
        {"type": "Ready", "status": "False", "reason": "SuspendComplete"}])
    found = await monitors.finish(sim)
    assert [(v.at, v.message.split(" with ")[0]) for v in found] == [
        (115.0, "RayService default/rs, resumed at t=25.000s")]
    assert "Ready False reason SuspendComplete" in found[0].message


async def test_the_deadline_waits_for_the_last_fault_to_heal(sim):
    monitors = Monitors.attach(sim, [InitializingTimeoutHonoured(bound=30.0)])
    create(sim, annotated("rs"))
    sim.faults.do(Outage(endpoint="apiserver", duration=100.0))
    sim.call_later(120, lambda: set_status(sim, "RayService", "rs", conditions=TIMED_OUT))
    await sim.sleep(200)
    await monitors.assert_ok(sim)
