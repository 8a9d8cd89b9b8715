from __future__ import annotations

import asyncio
import importlib
import math
import os

import pytest

import emu
import emu.runtime  # imported here, so the in-process pytester runs below share its classes
import emu.simulation
from emu.simulation import WaitTimeout


@pytest.fixture(autouse=True)
def _no_suite_emu_settings(monkeypatch):
    """The reproduce line rightly carries EMU_* settings (scripts/test.sh sets EMU_REDIS_URL);
    these tests compare it word for word, so they run without the suite's own."""
    for key in [k for k in os.environ if k.startswith("EMU_")]:
        monkeypatch.delenv(key)

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


async def _failing_main(sim):
    await sim.sleep(5)
    raise AssertionError("boom")


def test_a_failing_run_carries_the_emu_run_line_that_replays_it_with_its_options():
    with pytest.raises(AssertionError) as info:
        emu.run(_failing_main, seed=4, history_window=500,
                faults=[emu.Crash(at=2.0, process="kube-apiserver")])
    notes = info.value.__notes__
    line = notes[0].removeprefix("replay: ")
    assert line == (f"emu.run({_failing_main.__module__}._failing_main, seed=4, "
                    "history_window=500, faults=[Crash(at=2.0, process='kube-apiserver')])")
    top = _failing_main.__module__.split(".")[0]
    names = {n: getattr(emu, n) for n in emu.__all__}  # what `from emu import *` gives
    with pytest.raises(AssertionError) as again:  # the line works: it replays the same failure
        eval(line, {**names, "emu": emu, top: importlib.import_module(top)})
    assert again.value.__notes__ == notes


def test_a_run_whose_main_no_line_can_name_gets_its_seed_and_faults_but_no_emu_run_line():
    async def main(sim):
        await sim.sleep(5)
        raise AssertionError("boom")

    with pytest.raises(AssertionError) as info:
        emu.run(main, seed=4, faults=[emu.Crash(at=2.0, process="kube-apiserver")])
    assert info.value.__notes__[0] == (
        "replay: seed=4, faults=[Crash(at=2.0, process='kube-apiserver')] (no one-line emu.run "
        "replay: test_a_run_whose_main_no_line_can_name_gets_its_seed_and_faults_but_no_emu_run_"
        "line.<locals>.main is a lambda or a function defined inside another; define it at a "
        "module's top level to get one)")


async def _two_params(sim, extra):  # the signature is the point
    return None


async def _one_param(sim):
    return None


def test_the_replay_note_says_what_stops_a_one_line_replay():
    from emu.explain import replay_line, replay_obstacle

    async def local(sim):
        return None

    assert replay_obstacle(_one_param) is None
    assert replay_line(_one_param, 3, None) == f"emu.run({__name__}._one_param, seed=3)"
    assert replay_obstacle(_two_params) == "_two_params takes more than the simulation"
    assert "defined inside another" in (replay_obstacle(local) or "")
    assert "the option cluster=<object object at" in (
        replay_obstacle(_one_param, {"cluster": object()}) or "")
    local._emu_replay_hint = "rerun the test"  # type: ignore[attr-defined]
    assert (replay_obstacle(local) or "").endswith("; rerun the test")


def test_a_fault_plan_round_trips_through_json_and_prints_as_code():
    plan = emu.FaultPlan([emu.Crash(at=12.0, process="operator-0"),
                          emu.Outage(at=30.0, endpoint="apiserver", duration=60.0),
                          emu.FailRequests(at=1.0, verb="update", kind="Lease", code=409, count=2)])
    assert emu.FaultPlan.from_json(plan.to_json()) == plan
    assert repr(plan).startswith("[Crash(at=12.0, process='operator-0'), Outage(at=30.0, "
                                 "endpoint='apiserver', duration=60.0, mode='refuse'), ")


def test_an_unknown_fault_type_in_a_stored_plan_is_named():
    # the known types include those of modules imported so far (emu.explore adds its own)
    with pytest.raises(ValueError, match=r"^unknown fault type 'Meteor'; known: AfterRequest, "
                                         r"(.*, )?CoalesceEvents, Crash, "):
        emu.FaultPlan.from_json('[{"type": "Meteor", "at": 1}]')


def test_the_plugin_prints_the_replay_command_for_a_failing_sim_test(pytester):
    pytester.makepyfile(test_demo="""
        async def test_fails(sim):
            await sim.sleep(1)
            assert sim.rng.random() < 0
    """)
    result = pytester.runpytest("--emu-seed=5", "-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*replay: emu.run(test_demo.test_fails, seed=5, fail_on_panic=True)",
        "reproduce: pytest test_demo.py::test_fails -p no:asyncio --emu-seed=5"])


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
    text = page.read_text()
    assert "about_to_fail" in text
    result.stdout.fnmatch_lines([f"*timeline: {page}*"])
    # the page opens with why the test failed, and has its expectations and facts
    why = text[text.index('<section id="why">'):text.index("</section>")]
    assert text.index('id="why"') < text.index('<svg id="timeline"')
    assert "AssertionError: assert False" in why
    assert ('<tr class="fail"><td>FAIL</td><td>the test finishes without an exception</td>'
            '<td>AssertionError: assert False</td></tr>') in text
    assert "<tr><td>seed</td><td>0</td></tr>" in text
    assert "<tr><td>virtual time</td><td>3.000s</td></tr>" in text
    assert text.count('class="mark failure"') == 1


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


# -- the plugin beside other async plugins ----------------------------------------------------------

HOST_TESTS = """
    import asyncio
    import pytest

    async def test_sim_runs_on_virtual_time(sim):
        await sim.sleep(3600)
        assert sim.now == 3600

    async def test_sim_fails(sim):
        await sim.sleep(1)
        assert sim.now == 0
"""


@pytest.mark.parametrize(("host", "ini", "extra"), [
    ("pytest-asyncio strict", "asyncio_mode = strict",
     "@pytest.mark.asyncio\nasync def test_host_async():\n    await asyncio.sleep(0)\n"),
    ("pytest-asyncio auto", "asyncio_mode = auto",
     "async def test_host_async():\n    await asyncio.sleep(0)\n"),
    ("anyio marker", "asyncio_mode = strict",
     "pytestmark = pytest.mark.anyio\nasync def test_host_async():\n    await asyncio.sleep(0)\n"),
    ("anyio auto", "anyio_mode = auto",
     "async def test_host_async():\n    await asyncio.sleep(0)\n"),
], ids=["asyncio-strict", "asyncio-auto", "anyio-marker", "anyio-auto"])
def test_sim_tests_run_under_each_async_plugin_configuration_in_its_own_pytest(
        pytester, host, ini, extra):
    import textwrap

    pytester.makeini(f"[pytest]\n{ini}\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_demo=textwrap.dedent(HOST_TESTS) + "\n" + extra)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error::pytest.PytestWarning")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["reproduce: pytest *test_demo.py::test_sim_fails* "
                                 "--pythonwarnings=error::pytest.PytestWarning -p no:cacheprovider "
                                 "--emu-seed=0"])
    assert "must be 'async def'" not in result.stdout.str()


# -- the reproduce line -----------------------------------------------------------------------------


def test_the_reproduce_line_carries_custom_options_and_parameters_and_drops_reporting_ones(pytester):
    pytester.makeconftest("""
        def pytest_addoption(parser):
            parser.addoption("--size", type=int, default=1)
            parser.addoption("--fast", action="store_true")
    """)
    pytester.makepyfile(test_demo="""
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        async def test_fails(sim, n, request):
            assert n == 1 or request.config.getoption("--size") == 1
    """)
    result = pytester.runpytest("-p", "no:asyncio", "--size=3", "--fast", "-q", "--maxfail=9",
                                "--emu-seeds=2")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "reproduce: pytest 'test_demo.py::test_fails[2]' --size=3 --fast -p no:asyncio "
        "--emu-seed=0",
        "reproduce: pytest 'test_demo.py::test_fails[2]' --size=3 --fast -p no:asyncio "
        "--emu-seed=1"])
    # a test that takes other fixtures has no emu.run line that would work
    assert "replay: seed=0 (no one-line emu.run replay: test_fails takes more than the " \
        "simulation; the reproduce: line below reruns this test)" in result.stdout.str()
    assert "replay: emu.run(" not in result.stdout.str()


# -- reconcile panics -------------------------------------------------------------------------------

PANICKING_CONTROLLER = """
    import pytest
    from emu.runtime import OperatorConfig, Result, start_operator


    class Buggy:
        async def reconcile(self, request):
            cm = {"data": {}}
            return Result() if cm["data"]["ready"] else Result()   # KeyError: 'ready'


    def start(sim):
        def setup(mgr, cfg):
            mgr.new_controller().for_("ConfigMap").complete(Buggy())
        start_operator(sim, "op-0", OperatorConfig(setup=setup, leader_election=False))


    def cm(name):
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}}
"""


def test_a_reconcile_panic_fails_the_test_at_once_with_its_traceback(pytester):
    import textwrap

    pytester.makepyfile(test_demo=textwrap.dedent(PANICKING_CONTROLLER) + textwrap.dedent("""
        async def test_waits_for_ready(sim):
            start(sim)
            await sim.client().create(cm("a"))
            await sim.wait_for("ConfigMap", "a", lambda o: o.get("data"), timeout=600)
    """))
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*return Result() if cm[[]\"data\"[]][[]\"ready\"[]] else Result()*",
        "E*KeyError: 'ready'",
        "*The above exception was the direct cause of the following exception*",
        "E*emu.simulation.ReconcilePanic: reconcile panic in controller configmap on ConfigMap "
        "default/a at t=0.000s: KeyError: 'ready' at test_demo.py:8 (sim.fail_on_panic stops the "
        "run at the first panic*",
        "*emu: reconcile panics (1)*",
        "t=0.000s controller configmap on ConfigMap default/a: KeyError: 'ready' at test_demo.py:8",
        "Traceback (most recent call last):",
    ])
    assert "condition not met" not in out  # it stopped at the panic, not at the timeout


def test_with_fail_on_panic_off_the_wait_timeout_names_the_panic_and_the_predicate(pytester):
    import textwrap

    pytester.makepyfile(test_demo=textwrap.dedent(PANICKING_CONTROLLER) + textwrap.dedent("""
        @pytest.mark.emu(fail_on_panic=False)
        async def test_waits_for_ready(sim):
            start(sim)
            await sim.client().create(cm("a"))
            await sim.wait_for("ConfigMap", "a", lambda o: o.get("data"), timeout=60)
    """))
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E*WaitTimeout: ConfigMap default/a: condition not met within 60s (virtual, now t=60.000s)",
        "E*  waiting for: lambda o: o.get(\"data\")",
        "E*  last seen: resourceVersion *",
        "E*  status: None",
        "E*  panic: t=*s controller configmap on ConfigMap default/a: KeyError: 'ready' at "
        "test_demo.py:8",
        "E*  warning: t=*s controller configmap on ConfigMap default/a: RuntimeError: panic: "
        "KeyError: 'ready' [[]recovered[]]",
        "*emu: reconcile panics (*)*",
    ])


def test_a_wait_timeout_shows_the_objects_conditions_and_warning_events():
    async def main(sim):
        c = sim.client()
        await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "default"}})
        await c.create({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": "a.1", "namespace": "default"},
                        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                        "type": "Warning", "reason": "FailedMount", "message": "no volume"})
        pod = await c.create({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": "p", "namespace": "default"},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        pod["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/0 nodes are available"}]}
        await c.update_status(pod)

        def is_running(p):
            return p["status"]["phase"] == "Running"

        with pytest.raises(WaitTimeout) as info:
            await sim.wait_for("Pod", "p", is_running, timeout=10)
        return str(info.value), info.value

    text, err = emu.run(main)
    lines = text.splitlines()
    assert lines[0] == "Pod default/p: condition not met within 10s (virtual, now t=10.000s)"
    assert lines[1].startswith("  waiting for: test_a_wait_timeout_shows_the_objects_conditions_"
                               "and_warning_events.<locals>.main.<locals>.is_running "
                               "(test_run_and_plugin.py:")
    assert lines[3] == ("  conditions: PodScheduled=False (Unschedulable: 0/0 nodes are "
                        "available)")
    assert lines[4] == "  status: {'phase': 'Pending'}"
    assert lines[5] == "  warning: Event FailedMount: no volume"
    assert err.kind == "Pod" and err.last["status"]["phase"] == "Pending"


# -- deadlock ---------------------------------------------------------------------------------------


def test_a_deadlocked_run_ends_at_once_naming_the_tests_own_line_first():
    async def main(sim):
        await sim.sleep(2)
        never = asyncio.Event()
        await never.wait()

    for limit in (24 * 3600, math.inf):
        with pytest.raises(emu.Deadlock) as info:
            emu.run(main, max_virtual_time=limit)
        lines = str(info.value).splitlines()
        assert info.value.now == 2.0
        assert lines[1].startswith("  Task-")
        assert lines[1].endswith(
            "(the test): stuck at tests/client/test_run_and_plugin.py:"
            f"{main.__code__.co_firstlineno + 3} in test_a_deadlocked_run_ends_at_once_naming_the_"
            "tests_own_line_first.<locals>.main: await never.wait()  (waiting in Event.wait)")
        assert any(line.startswith("  kube-apiserver:main: stuck at ") for line in lines[2:])


def test_a_deadlocked_sim_test_fails_at_once_pointing_at_its_line(pytester):
    pytester.makepyfile(test_demo="""
        import asyncio

        async def test_stuck(sim):
            await sim.sleep(1)
            await asyncio.Event().wait()
    """)
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E*Deadlock: Deadlock at t=1.000000s: no task can ever run again*",
        "*(the test): stuck at test_demo.py:5 in test_stuck: await asyncio.Event().wait()*",
    ])


def test_the_reproduce_line_names_an_option_it_cannot_write_back(pytester):
    pytester.makeconftest("""
        import json

        def pytest_addoption(parser):
            parser.addoption("--limits", type=json.loads, default=None)
    """)
    pytester.makepyfile(test_demo="""
        async def test_fails(sim):
            assert False
    """)
    result = pytester.runpytest("-p", "no:asyncio", '--limits={"cpu": 2}')
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "reproduce: pytest test_demo.py::test_fails -p no:asyncio --emu-seed=0",
        "  (not carried: --limits ({'cpu': 2}))"])


def test_wait_until_times_out_naming_its_condition_and_the_runs_panics():
    async def main(sim):
        with pytest.raises(WaitTimeout) as info:
            await sim.wait_until(lambda: sim.now > 100, timeout=10, what="time passes")
        return str(info.value)

    assert emu.run(main) == ("time passes: not met within 10s (virtual)\n"
                             "  waiting for: lambda: sim.now > 100")
