"""The pytest plugin fails a test in which a coroutine of the library was never awaited (it did
nothing; Python only warns when it is collected), naming the file and line."""

from __future__ import annotations

import emu.runtime  # noqa: F401  (imported here, so the in-process pytester runs share classes)

pytest_plugins = ["pytester"]


def test_a_sim_sleep_without_await_fails_the_test_naming_the_line(pytester):
    pytester.makepyfile(test_demo="""
        async def test_forgot(sim):
            sim.sleep(5)
            assert sim.now == 0.0
    """)
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*UnawaitedCoroutine: test_demo.py:2: coroutine 'World.sleep' was never awaited "
        "(a coroutine does nothing until awaited: add 'await')"])


def test_a_wait_for_without_await_is_named_beside_the_failure_it_caused(pytester):
    pytester.makepyfile(test_demo="""
        async def test_forgot(sim):
            await sim.client().create({"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "a"}})
            sim.wait_for("ConfigMap", "a", lambda cm: cm.get("data"))
            assert False, "the test's own failure"
    """)
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the test's own failure*",
        "*test_demo.py:4: coroutine 'Simulation.wait_for' was never awaited*"])


def test_a_plain_test_running_emu_run_is_checked_too_and_awaited_ones_pass(pytester):
    pytester.makepyfile(test_demo="""
        import emu

        def test_plain():
            async def main(sim):
                sim.sleep(1)

            emu.run(main, seed=1)

        async def test_awaited(sim):
            await sim.sleep(5)
            assert sim.now == 5.0

        async def test_users_own(sim):
            async def mine():
                pass

            mine()  # not the library's: a RuntimeWarning, as Python gives
    """)
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(failed=1, passed=2, warnings=1)
    result.stdout.fnmatch_lines(["*UnawaitedCoroutine: test_demo.py:5: coroutine "
                                 "'World.sleep' was never awaited*",
                                 "*RuntimeWarning: coroutine *mine' was never awaited*"])
