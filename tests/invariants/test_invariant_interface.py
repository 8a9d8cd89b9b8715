"""The interface: values that print as code, Monitors, InvariantViolated, info items, and that
attaching invariants changes nothing in the run they watch."""

from __future__ import annotations

import pytest
from invariant_worlds import create, pod

import emu
from emu.invariants import (
    Cleanup,
    EventuallySteady,
    Invariant,
    InvariantViolated,
    Monitors,
    OneLiveHead,
    TwoLeaderWindows,
    Violation,
    kuberay_invariants,
)
from emu.scenarios import Report, get


def test_the_default_set_is_values_with_stable_names_rationales_and_code_reprs():
    invs = kuberay_invariants()
    names = [inv.name for inv in invs]
    assert names == [
        "one-live-head", "one-job-run-per-attempt", "rayjob-status-consistent",
        "retry-attempts-fenced", "rayjob-submitter-recovered", "rayservice-serves-ready-cluster",
        "rayservice-no-refused-requests-during-switch", "rayservice-initializing-timeout",
        "suspended-cluster-has-no-pods",
        "eventually-steady",
        "cleanup-after-delete", "two-leader-window"]
    assert all(inv.rationale for inv in invs)
    assert repr(EventuallySteady(bound=60.0)) == "EventuallySteady(bound=60.0)"
    assert eval(repr(OneLiveHead(bound=2.0)), {"OneLiveHead": OneLiveHead}) == OneLiveHead(2.0)
    assert kuberay_invariants() == invs and kuberay_invariants() is not invs


async def test_settle_time_is_the_longest_bound_of_the_liveness_invariants(sim):
    monitors = Monitors.attach(sim, [OneLiveHead(), EventuallySteady(bound=200.0),
                                     Cleanup(bound=90.0)])
    assert [inv.settle_time for inv in monitors.invariants] == [0.0, 200.0, 90.0]
    assert monitors.settle_time == 200.0


async def test_attaching_something_that_is_not_an_invariant_names_it(sim):
    with pytest.raises(TypeError, match=r"^Monitors.attach: 'one-live-head' is not an "
                                        r"Invariant value$"):
        Monitors.attach(sim, ["one-live-head"])


async def test_the_base_class_alone_cannot_attach(sim):
    with pytest.raises(NotImplementedError, match="Invariant.attach"):
        Invariant().attach(sim)


async def test_assert_ok_raises_one_line_per_violation_in_time_order(sim):
    monitors = Monitors.attach(sim, [OneLiveHead()])
    create(sim, pod("b-1", cluster="b"))
    create(sim, pod("b-2", cluster="b"))
    await sim.sleep(2)
    create(sim, pod("a-1", cluster="a"))
    create(sim, pod("a-2", cluster="a"))
    with pytest.raises(InvariantViolated) as caught:
        await monitors.assert_ok(sim)
    assert str(caught.value) == (
        "2 invariant violations:\n"
        "  [one-live-head] t=0.000s: RayCluster default/b had 2 live head Pods (b-1, b-2), "
        "from t=0.000s\n"
        "  [one-live-head] t=2.000s: RayCluster default/a had 2 live head Pods (a-1, a-2), "
        "from t=2.000s")
    assert [v.at for v in caught.value.violations] == [0.0, 2.0]


def test_an_information_item_prints_its_severity():
    v = Violation("two-leader-window", "two leaders", 1.5, severity="info")
    assert str(v) == "[two-leader-window (info)] t=1.500s: two leaders"


def _run(name: str, attach: bool) -> tuple[str, list[Violation], list[Violation]]:
    sc = get(name)
    box = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants()) if attach else None
        await sc.fn(sim, Report(sim))
        box["digest"] = sim.trace.digest()
        box["found"] = await monitors.finish(sim) if monitors else []
        box["info"] = monitors.info() if monitors else []

    emu.run(main, seed=3, **sc.options)
    return box["digest"], box["found"], box["info"]


def test_attaching_invariants_leaves_the_trace_digest_unchanged():
    bare, _, _ = _run("zombie-leader", attach=False)
    watched, found, info = _run("zombie-leader", attach=True)
    assert watched == bare
    assert found == []
    assert [v.invariant for v in info] == ["two-leader-window"]


async def test_a_two_leader_window_without_work_is_not_reported_unless_asked(sim):
    strict = Monitors.attach(sim, [TwoLeaderWindows()])
    every = Monitors.attach(sim, [TwoLeaderWindows(only_when_both_worked=False)])
    sim.trace.emit("op-0", "leader_acquired", identity="a")
    await sim.sleep(3)
    sim.trace.emit("op-1", "leader_acquired", identity="b")
    await sim.sleep(2)
    sim.trace.emit("op-0", "leader_lost")
    assert await strict.finish(sim) == [] and strict.info() == []
    assert await every.finish(sim) == []
    assert every.info() == [Violation(
        "two-leader-window", "processes op-0, op-1 all believed they led from t=3.000s until "
        "t=5.000s (op-0: 0 reconciles, op-1: 0 reconciles)", 3.0,
        ("Process/op-0", "Process/op-1"), "info")]


async def test_finish_twice_reports_each_violation_once(sim):
    monitors = Monitors.attach(sim, [EventuallySteady(bound=10.0), OneLiveHead()])
    create(sim, pod("h-1", cluster="h"))
    create(sim, pod("h-2", cluster="h"))
    create(sim, {"apiVersion": "ray.io/v1", "kind": "RayJob",
                 "metadata": {"name": "rj", "namespace": "default"},
                 "spec": {"entrypoint": "python -c 'pass'"}})
    first = await monitors.finish(sim)
    assert [v.invariant for v in first] == ["one-live-head", "eventually-steady"]
    assert await monitors.finish(sim) == first


async def test_a_users_own_invariant_is_a_value_like_the_others(sim):
    import attrs

    from emu.invariants import BaseMonitor
    from emu.invariants.view import WorldView

    @attrs.frozen
    class NoPendingPods(Invariant):
        name = "no-pending-pods"
        rationale = "this test's own contract"
        bound: float = 0.0

        def attach(self, sim):
            monitor = BaseMonitor(self.name)
            view = WorldView.of(sim)

            def on_change(kind, type_, obj, old):
                if kind == "Pod" and (obj.get("status") or {}).get("phase") == "Pending":
                    monitor.report(f"Pod {obj['metadata']['name']} is Pending", view.now,
                                   [f"Pod/default/{obj['metadata']['name']}"])

            view.subscribe(on_change)
            return monitor

    monitors = Monitors.attach(sim, [NoPendingPods(), *kuberay_invariants()[:1]])
    await sim.sleep(1)
    create(sim, pod("p", cluster="c", phase="Pending", ready=False))
    with pytest.raises(InvariantViolated, match=r"\[no-pending-pods\] t=1.000s: Pod p is Pending"):
        await monitors.assert_ok(sim)
