"""The pytest plugin: a ``sim`` fixture that runs the test body in a fresh virtual-time world.

``async def test_x(sim): ...`` runs inside `emu.run` with the seed from ``--emu-seed`` (default 0)
or ``@pytest.mark.emu(seed=...)``; ``--emu-seeds N`` runs every such test under seeds 0..N-1. A
failing test ends with the line that replays it::

    reproduce: pytest tests/test_x.py::test_x --emu-seed=3

``--emu-html DIR`` writes each failing run's timeline page into DIR. ``emu`` is imported only
inside hooks, so loading the plugin costs nothing for other tests.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

_SEED_KEY = pytest.StashKey[int]()
_HTML_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("emu", "kuberay-emu simulation")
    group.addoption("--emu-seed", type=int, default=None,
                    help="seed for tests that use the sim fixture (default 0, or the emu mark's)")
    group.addoption("--emu-seeds", type=int, default=None,
                    help="run every sim test under seeds 0..N-1")
    group.addoption("--emu-html", metavar="DIR", default=None,
                    help="write the HTML timeline of every failing sim test into DIR")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "emu(seed=None, **options): options for the sim fixture's Simulation")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    count = metafunc.config.getoption("--emu-seeds")
    if count and "sim" in metafunc.fixturenames:
        if count < 1:
            raise pytest.UsageError(f"--emu-seeds must be at least 1, not {count}")
        metafunc.fixturenames.append("_emu_seed")
        metafunc.parametrize("_emu_seed", list(range(count)), ids=[f"seed{i}" for i in range(count)])


@pytest.fixture
def sim() -> Any:
    """A fresh `emu.Simulation`; the test must be ``async def`` (it runs on the virtual clock)."""
    return _SimPlaceholder()


class _SimPlaceholder:
    def __repr__(self) -> str:
        return "<sim: replaced by a Simulation when the async test runs>"


def _seed_for(item: pytest.Item) -> int:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "_emu_seed" in callspec.params:
        return int(callspec.params["_emu_seed"])
    opt = item.config.getoption("--emu-seed")
    if opt is not None:
        return int(opt)
    mark = item.get_closest_marker("emu")
    if mark is not None and mark.kwargs.get("seed") is not None:
        return int(mark.kwargs["seed"])
    return 0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    funcargs = pyfuncitem.funcargs
    if "sim" not in funcargs or not isinstance(funcargs["sim"], _SimPlaceholder):
        return None
    func = pyfuncitem.obj
    if not inspect.iscoroutinefunction(func):
        raise pytest.UsageError(f"{pyfuncitem.nodeid}: a test using the sim fixture must be "
                                "'async def'")
    import emu

    seed = _seed_for(pyfuncitem)
    pyfuncitem.stash[_SEED_KEY] = seed
    mark = pyfuncitem.get_closest_marker("emu")
    options = {k: v for k, v in (mark.kwargs.items() if mark else ()) if k != "seed"}
    names = pyfuncitem._fixtureinfo.argnames

    holder: list[Any] = []

    async def main(s: Any) -> Any:
        holder.append(s)
        kwargs = {name: funcargs[name] for name in names if name in funcargs}
        kwargs["sim"] = s
        return await func(**kwargs)

    main.__qualname__ = func.__qualname__
    main.__module__ = func.__module__
    try:
        emu.run(main, seed=seed, **options)
    except BaseException:
        html_dir = pyfuncitem.config.getoption("--emu-html")
        if html_dir and holder:
            pyfuncitem.stash[_HTML_KEY] = _write_failure_html(pyfuncitem, holder[0], seed, html_dir)
        raise
    return True


def _write_failure_html(item: pytest.Item, sim: Any, seed: int, directory: str) -> str:
    from pathlib import Path

    from emu.timeline import render_html

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.nodeid)
    path = Path(directory) / f"{safe}-seed{seed}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(f"{item.nodeid} (seed {seed}, failed)", sim.trace.events, [], {},
                                sim.trace.digest()))
    return str(path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and _SEED_KEY in item.stash:
        seed = item.stash[_SEED_KEY]
        nodeid = item.nodeid.split("[seed")[0]
        text = f"reproduce: pytest {nodeid} --emu-seed={seed}"
        if _HTML_KEY in item.stash:
            text += f"\ntimeline: {item.stash[_HTML_KEY]}"
        add = getattr(report.longrepr, "addsection", None)
        if add is not None:
            add("emu", text)
        else:
            report.sections.append(("emu", text))
