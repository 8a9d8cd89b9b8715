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
    with pytest.raises(ValueError, match=r"^unknown fault type 'Meteor'; known: AfterRequest, "
                                         r"CoalesceEvents, Crash, "):
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


def test_after_request_crashes_the_caller_right_after_its_write_is_committed():
    import asyncio

    async def main(sim):
        async def writer(proc):
            c = sim.client(process=proc)
            for i in range(3):
                await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": f"cm-{i}", "namespace": "default"}})
                await proc.sleep(1)

        sim.faults.after(emu.Crash(process="writer"), verb="create", kind="ConfigMap",
                         name="cm-1")
        proc = sim.start_process("writer", writer)
        await proc.wait_exited()
        await asyncio.sleep(5)
        names = [o["metadata"]["name"] for o in (await sim.client().list("ConfigMap", "default"))]
        return names, proc.exit_code, repr(sim.faults.plan())

    names, code, plan = emu.run(main)
    assert names == ["cm-0", "cm-1"]
    assert code == 137
    assert plan.startswith("[AfterRequest(at=0.0, then=Crash(at=0.0, process='writer'), "
                           "verb='create', kind='ConfigMap', name='cm-1'")


def test_a_plan_with_a_nested_fault_round_trips_through_json():
    plan = emu.FaultPlan([emu.AfterRequest(then=emu.Crash(process="op-0"), verb="create",
                                           kind="Job")])
    assert emu.FaultPlan.from_json(plan.to_json()) == plan


def test_applying_a_crd_serves_its_kind_and_register_kind_does_the_same():
    async def main(sim):
        await sim.apply({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "greetings.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Greeting", "plural": "greetings", "shortNames": ["gr"]},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}}}]}})
        g = await sim.apply({"apiVersion": "example.com/v1", "kind": "Greeting",
                             "metadata": {"name": "hello"}, "spec": {"text": "hi"}})
        sim.register_kind("Farewell", group="example.com")
        f = await sim.client().create({"apiVersion": "example.com/v1", "kind": "Farewell",
                                       "metadata": {"name": "bye", "namespace": "default"}})
        with pytest.raises(emu.Invalid) as info:
            await sim.apply({"apiVersion": "apiextensions.k8s.io/v1",
                             "kind": "CustomResourceDefinition", "metadata": {"name": "wrong"},
                             "spec": {"group": "example.com", "scope": "Namespaced",
                                      "names": {"kind": "Thing", "plural": "things"},
                                      "versions": [{"name": "v1"}]}})
        return g["metadata"]["generation"], f["metadata"]["name"], str(info.value)

    gen, name, message = emu.run(main)
    assert (gen, name) == (1, "bye")
    assert message == ('CustomResourceDefinition.apiextensions.k8s.io "wrong" is invalid: '
                       'metadata.name: Invalid value: "wrong": must be '
                       'spec.names.plural+"."+spec.group')
