from __future__ import annotations

import pytest

import emu

pytest_plugins = ["pytester"]


def test_emu_run_returns_the_result_and_is_deterministic():
    async def main(sim):
        c = sim.client()
        cm = await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"generateName": "cfg-", "namespace": "default"}})
        await sim.sleep(3600)
        return cm["metadata"]["name"], cm["metadata"]["uid"], cm["metadata"]["creationTimestamp"], sim.now

    first = emu.run(main, seed=11)
    assert first == emu.run(main, seed=11)
    assert first != emu.run(main, seed=12)
    assert first[2] == "2026-01-01T00:00:00Z" and first[3] == 3600.0


def test_a_failing_run_carries_the_line_that_replays_it():
    async def main(sim):
        await sim.sleep(5)
        raise AssertionError("boom")

    with pytest.raises(AssertionError) as info:
        emu.run(main, seed=4, faults=[emu.Crash(at=2.0, process="kube-apiserver")])
    notes = info.value.__notes__
    assert notes[0] == (f"replay: emu.run({main.__module__}."
                        "test_a_failing_run_carries_the_line_that_replays_it.<locals>.main, seed=4, "
                        "faults=[Crash(at=2.0, process='kube-apiserver')])")


def test_a_fault_plan_round_trips_through_json_and_prints_as_code():
    plan = emu.FaultPlan([emu.Crash(at=12.0, process="operator-0"),
                          emu.Outage(at=30.0, endpoint="apiserver", duration=60.0),
                          emu.FailRequests(at=1.0, verb="update", kind="Lease", code=409, count=2)])
    assert emu.FaultPlan.from_json(plan.to_json()) == plan
    assert repr(plan).startswith("[Crash(at=12.0, process='operator-0'), Outage(at=30.0, "
                                 "endpoint='apiserver', duration=60.0, mode='refuse'), ")


def test_an_unknown_fault_type_in_a_stored_plan_is_named():
    with pytest.raises(ValueError, match=r"^unknown fault type 'Meteor'; known: Crash, "):
        emu.FaultPlan.from_json('[{"type": "Meteor", "at": 1}]')


def test_the_plugin_prints_the_replay_command_for_a_failing_sim_test(pytester):
    pytester.makepyfile(test_demo="""
        async def test_fails(sim):
            await sim.sleep(1)
            assert sim.rng.random() < 0
    """)
    result = pytester.runpytest("--emu-seed=5", "-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*reproduce: pytest test_demo.py::test_fails --emu-seed=5*"])


def test_the_plugin_runs_each_sim_test_under_every_seed_with_emu_seeds(pytester):
    pytester.makepyfile(test_demo="""
        SEEN = []

        async def test_seeded(sim):
            SEEN.append(sim.seed)

        def test_all_seeds_ran():
            assert sorted(SEEN) == [0, 1, 2]
    """)
    result = pytester.runpytest("--emu-seeds=3", "-p", "no:asyncio")
    result.assert_outcomes(passed=4)


def test_a_sync_test_asking_for_sim_is_told_to_be_async(pytester):
    pytester.makepyfile(test_demo="""
        def test_sync(sim):
            pass
    """)
    result = pytester.runpytest("-p", "no:asyncio")
    result.stdout.fnmatch_lines(["*a test using the sim fixture must be 'async def'*"])


def test_a_run_that_never_ends_is_stopped_at_its_virtual_time_limit():
    async def main(sim):
        while True:  # a periodic loop: time keeps moving, so this is no deadlock
            await sim.sleep(10)

    with pytest.raises(emu.VirtualTimeExceeded) as info:
        emu.run(main, max_virtual_time=3600)
    assert str(info.value).startswith(
        "the run reached its virtual time limit of 3600s without finishing (raise it with "
        "max_virtual_time=...); tasks still waiting:\n  Task-")


def test_the_plugin_writes_a_failing_runs_timeline_with_emu_html(pytester):
    pytester.makepyfile(test_demo="""
        async def test_fails(sim):
            await sim.sleep(3)
            sim.log("about_to_fail", why="demo")
            assert False
    """)
    out = pytester.path / "timelines"
    result = pytester.runpytest(f"--emu-html={out}", "-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    [page] = sorted(out.iterdir())
    assert page.name == "test_demo.py__test_fails-seed0.html"
    assert "about_to_fail" in page.read_text()
    result.stdout.fnmatch_lines([f"*timeline: {page}*"])
