"""The runner: one run is a pure function of (workload, knobs, plan, seed), forked or fresh."""

from __future__ import annotations

from explore_worlds import unreachable

from emu.explore.faults import AtCall, CrashLeader
from emu.explore.runner import ForkServer, RunSpec, run_one
from emu.explore.workload import builtin
from emu.faults import Crash


def test_a_forked_run_is_the_same_run_as_a_fresh_one() -> None:
    wl = builtin("raycluster")
    spec = RunSpec({"workers": 2}, [CrashLeader(at=3.0),
                                    AtCall(n=1, verb="create", kind="Pod", then=Crash())])
    fresh = run_one(wl, spec, seed=3)
    forked = list(ForkServer(wl, 3).run([spec, spec]))
    assert fresh.error == "" and fresh.digest
    assert [r.digest for r in forked] == [fresh.digest, fresh.digest]
    assert [r.violations for r in forked] == [fresh.violations] * 2
    assert [r.performed for r in forked] == [fresh.performed] * 2
    assert any("Crash(" in p for p in fresh.performed)


def test_the_reference_run_records_the_operators_writes_and_the_state_transitions() -> None:
    ref = run_one(builtin("raycluster"), RunSpec(), seed=1, record=True)
    calls = {(a["verb"], a["kind"]) for a in ref.actions if a["type"] == "call"}
    assert {("create", "Pod"), ("create", "Service"), ("update_status", "RayCluster")} <= calls
    states = [a["state"] for a in ref.actions
              if a["type"] == "transition" and a["kind"] == "RayCluster"]
    assert "('ready',)" in states
    assert [a for a in ref.actions if a["type"] == "operator"]


def test_a_goal_never_reached_is_a_workload_goal_violation_naming_the_object() -> None:
    [result] = ForkServer(unreachable(), 0).run([RunSpec()])
    [v] = result.violations
    assert v["invariant"] == "workload-goal"
    assert v["objects"] == ["ConfigMap/default/settings"]
    assert "{'settings': '1'} never reached data.k in ['2']" in v["message"]


# -- livelocks and the early end of a quiet settle -------------------------------------------


def echo_controller(sim) -> None:
    """A controller that writes the ConfigMap again each time it sees it change — at zero
    latency, so virtual time never moves once it has started (``Setup.install``)."""

    async def main(proc) -> None:
        client = sim.client("echo")
        while True:
            try:
                cur = await client.get("ConfigMap", "settings", "default")
            except Exception:
                await proc.sleep(1.0)
                continue
            cur["data"]["n"] = str(int(cur["data"].get("n", "0")) + 1)
            await client.update(cur)

    sim.processes.start("echo", main)


def _echo_workload():
    from explore_worlds import CONFIGMAP

    from emu.explore.workload import Goal, Setup, Workload

    return Workload("echo", [CONFIGMAP],
                    setup=Setup(nodes=1, install="test_explore_runner:echo_controller", lease=""),
                    goal=Goal("ConfigMap", "data.k", ("1",), horizon=5.0, delete=False))


def test_a_livelock_is_reported_at_the_same_instant_forked_and_fresh() -> None:
    wl = _echo_workload()
    fresh = run_one(wl, RunSpec(), seed=2)
    [forked] = ForkServer(wl, 2).run([RunSpec()])
    assert fresh.error.startswith("Livelock: virtual time stood still at t=")
    assert forked.error == fresh.error
    assert (fresh.violations, fresh.digest) == ((), "")


def test_a_quiet_settle_ends_early_with_the_same_findings_as_the_full_one(monkeypatch) -> None:
    import emu.explore.runner as runner

    wl = builtin("rayjob")
    specs = [RunSpec(), RunSpec({"entrypoint": wl.knob("entrypoint").values[1]},
                                [CrashLeader(at=20.0)])]
    early = list(ForkServer(wl, 5).run(specs))
    monkeypatch.setattr(runner, "EARLY_STOP", False)
    full = list(ForkServer(wl, 5).run(specs))
    assert [r.violations for r in early] == [r.violations for r in full]
    assert [r.performed for r in early] == [r.performed for r in full]
    # the full settle runs to 300 s after the last fault; the quiet world stops long before
    assert all(e.virtual < f.virtual - 100 for e, f in zip(early, full, strict=True))
    assert all(f.virtual >= 300 for f in full)


def test_a_settle_never_ends_early_while_an_object_is_unsteady() -> None:
    # a RayJob that cannot finish (its head is never Ready: no Node fits it) stays unsteady,
    # so the run keeps the full settle and eventual liveness still fails
    wl = builtin("rayjob")
    big = wl.manifests[0]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    big["containers"][0]["resources"] = {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}}
    [result] = ForkServer(wl, 1).run([RunSpec()])
    assert result.virtual >= 300
    assert "eventually-steady" in {v["invariant"] for v in result.violations}
