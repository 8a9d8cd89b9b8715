"""The pytest plugin: a ``sim`` fixture that runs the test body in a fresh virtual-time world.

``async def test_x(sim): ...`` runs inside `emu.run` with the seed from ``--emu-seed`` (default 0)
or ``@pytest.mark.emu(seed=...)``; ``--emu-seeds N`` runs every such test under seeds 0..N-1. The
mark's other arguments go to the `emu.Simulation` (``@pytest.mark.emu(cluster=True)``);
``@pytest.mark.emu(restore="world")`` runs the body in a restore of the `emu.Snapshot` that the
fixture ``world`` returns (e.g. a module-scoped ``emu.snapshot_world(...)``).
``sim.fail_on_panic`` is on: the first reconcile panic of any controller fails the test with
`emu.ReconcilePanic` (``@pytest.mark.emu(fail_on_panic=False)`` turns it off). A failing test
ends with the line that replays it, carrying every option that shaped the run::

    reproduce: pytest tests/test_x.py::test_x --my-option=3 --emu-seed=3

and, when the run had any, the reconcile panics with their tracebacks. ``--emu-html DIR``
writes each failing run's timeline page into DIR.

The plugin runs a ``sim`` test itself whichever other plugin claims async tests: pytest-asyncio
in strict or auto mode (whose item hands us a synchronous wrapper of the test), or anyio's plugin
(``@pytest.mark.anyio``, ``anyio_mode = auto``). It wraps ``pytest_pyfunc_call``, runs the test,
and lets the others call a test that has already run. ``emu`` is imported only inside hooks, so
loading the plugin costs nothing for other tests.

A coroutine of the library that a test never awaited (``sim.sleep(5)`` or ``sim.wait_for(...)``
without ``await``: it does nothing, and Python only warns when it is collected) fails the test,
any test, naming the file and line where it was dropped (`pytest_runtest_call`).
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
import types
import warnings
from collections.abc import Generator
from typing import Any

import pytest

_SEED_KEY = pytest.StashKey[int]()
_HTML_KEY = pytest.StashKey[str]()
_SIM_KEY = pytest.StashKey[Any]()

#: Options that only change what pytest reports or which tests it picks (the reproduce line
#: names the test itself), by ``dest``: not carried.
_NOT_SHAPING = frozenset({
    "verbose", "quiet", "exitfirst", "maxfail", "tbstyle", "reportchars", "showlocals",
    "capture", "color", "code_highlight", "keyword", "markexpr", "durations", "durations_min",
    "junitxml", "junitprefix", "resultlog", "lf", "last_failed_no_failures", "failedfirst",
    "newfirst", "cacheshow", "cacheclear", "stepwise", "stepwise_skip", "deselect", "ignore",
    "ignore_glob", "help", "version", "collectonly", "fulltrace", "showfixtures",
    "show_fixtures_per_test", "no_header", "no_summary", "no_fold_skipped", "setuponly",
    "setupshow", "setupplan", "pastebin", "traceconfig", "debug", "log_cli_level", "log_level",
    "log_file", "log_file_level", "log_format", "log_date_format", "log_cli_format",
    "log_cli_date_format", "log_file_format", "log_file_date_format", "log_file_mode",
    "log_auto_indent", "logger_disable", "log_disable", "usepdb", "usepdb_cls", "trace",
    "emu_seed", "emu_seeds", "emu_html", "xfail_tb", "disable_warnings", "report_log",
    "basetemp", "verbosity_assertions",
    "verbosity_test_cases", "doctestmodules", "doctestglob", "doctestreport",
})
#: Environment variables that shape a run, carried as a prefix of the reproduce line.
_ENV_PREFIXES = ("EMU_",)


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
        "markers", "emu(seed=None, fail_on_panic=True, **options): options for the sim fixture's "
        "Simulation")


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


def _test_function(pyfuncitem: pytest.Function) -> Any:
    """The test's own ``async def``, under whatever another plugin wrapped it in (pytest-asyncio
    hands its items a synchronous ``functools.wraps`` wrapper)."""
    func = pyfuncitem.obj
    if inspect.iscoroutinefunction(func):
        return func
    inner = inspect.unwrap(func)
    return inner if inspect.iscoroutinefunction(inner) else func


def _done(**_kwargs: Any) -> None:
    """What other plugins call in place of a sim test that has already run."""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    funcargs = pyfuncitem.funcargs
    if "sim" not in funcargs or not isinstance(funcargs["sim"], _SimPlaceholder):
        return (yield)
    func = _test_function(pyfuncitem)
    if not inspect.iscoroutinefunction(func):
        raise pytest.UsageError(f"{pyfuncitem.nodeid}: a test using the sim fixture must be "
                                "'async def'")
    _run_sim_test(pyfuncitem, func)
    saved = pyfuncitem.obj
    pyfuncitem.obj = _done
    try:
        return (yield)
    finally:
        pyfuncitem.obj = saved


def _run_sim_test(pyfuncitem: pytest.Function, func: Any) -> None:
    __tracebackhide__ = True
    import emu

    funcargs = pyfuncitem.funcargs
    seed = _seed_for(pyfuncitem)
    pyfuncitem.stash[_SEED_KEY] = seed
    mark = pyfuncitem.get_closest_marker("emu")
    options = {k: v for k, v in (mark.kwargs.items() if mark else ()) if k != "seed"}
    options.setdefault("fail_on_panic", True)
    names = pyfuncitem._fixtureinfo.argnames
    if options.get("restore") is not None:
        _run_restored_test(pyfuncitem, func, options, names)
        return

    async def main(s: Any) -> Any:
        pyfuncitem.stash[_SIM_KEY] = s
        kwargs = {name: funcargs[name] for name in names if name in funcargs}
        kwargs["sim"] = s
        return await func(**kwargs)

    main.__qualname__ = func.__qualname__
    main.__module__ = func.__module__
    main.__wrapped__ = func  # type: ignore[attr-defined]
    main._emu_replay_hint = "the reproduce: line below reruns this test"  # type: ignore[attr-defined]
    try:
        emu.run(main, seed=seed, **options)
    except BaseException as exc:
        html_dir = pyfuncitem.config.getoption("--emu-html")
        if html_dir and _SIM_KEY in pyfuncitem.stash:
            pyfuncitem.stash[_HTML_KEY] = _write_failure_html(
                pyfuncitem, pyfuncitem.stash[_SIM_KEY], seed, html_dir, exc)
        if isinstance(exc, (emu.ReconcilePanic, emu.Deadlock, emu.VirtualTimeExceeded)):
            # the frames are the loop's and the runner's: the message (and, for a panic, the
            # chained exception with the reconciler's own frames) says everything
            raise exc.with_traceback(None) from exc.__cause__
        raise
    # a passing test's world is not kept (the report of a failing one reads its panics)
    _forget_sim(pyfuncitem)


class _RestoredTest:
    """A sim test's body sent to a snapshot's process: the test function (by name) and its
    other fixtures' values."""

    def __init__(self, func: Any, kwargs: dict[str, Any], fail_on_panic: bool) -> None:
        self.func = func
        self.kwargs = kwargs
        self.fail_on_panic = fail_on_panic

    async def __call__(self, sim: Any) -> Any:
        sim.fail_on_panic = self.fail_on_panic
        return await self.func(sim=sim, **self.kwargs)


def _run_restored_test(pyfuncitem: pytest.Function, func: Any, options: dict[str, Any],
                       names: Any) -> None:
    """``@pytest.mark.emu(restore="fixture")``: the body runs in a restore of the `emu.Snapshot`
    that fixture returns (the world is the snapshot's: other world options are refused)."""
    __tracebackhide__ = True
    import emu

    options = dict(options)
    restore = options.pop("restore")
    fail_on_panic = bool(options.pop("fail_on_panic"))
    if options:
        raise pytest.UsageError(f"{pyfuncitem.nodeid}: a test restored from a snapshot runs in "
                                f"the snapshot's world: drop {sorted(options)} from the emu mark")
    snap = pyfuncitem._request.getfixturevalue(restore) if isinstance(restore, str) else restore
    kwargs = {name: pyfuncitem.funcargs[name] for name in names
              if name in pyfuncitem.funcargs and name not in ("sim", "_emu_seed", restore)}
    emu.run(_RestoredTest(func, kwargs, fail_on_panic), restore=snap)


def _forget_sim(item: pytest.Item) -> None:
    if _SIM_KEY in item.stash:
        del item.stash[_SIM_KEY]


def _write_failure_html(item: pytest.Item, sim: Any, seed: int, directory: str,
                        exc: BaseException) -> str:
    from pathlib import Path

    from emu.timeline import render_failure_html

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.nodeid)
    path = Path(directory) / f"{safe}-seed{seed}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_failure_html(f"{item.nodeid} (seed {seed}, failed)", sim, exc))
    return str(path)


# -- the reproduce line -----------------------------------------------------------------------------


def _option_args(config: pytest.Config) -> tuple[list[str], list[str]]:
    """Command-line arguments for every option whose value differs from its default, except
    those that only change reporting or selection; and the options that cannot be written back
    as arguments."""
    args: list[str] = []
    cannot: list[str] = []
    parser = getattr(config, "_parser", None)
    groups = getattr(parser, "_groups", [])
    seen: set[str] = set()
    for group in groups:
        for opt in group.options:
            dest = opt.dest
            if dest in seen or dest in _NOT_SHAPING or not opt.names():
                continue
            seen.add(dest)
            value = getattr(config.option, dest, opt.default)
            if value == opt.default or value is None:
                continue
            long = max(opt.names(), key=len)
            action = type(opt._action).__name__
            if action in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction",
                          "_CountAction", "BooleanOptionalAction"):
                if isinstance(value, bool) or action == "_StoreConstAction":
                    args.append(long)
                elif isinstance(value, int):
                    args.extend([long] * value)
                continue
            values = value if isinstance(value, list) else [value]
            for v in dict.fromkeys(values) if all(_hashable(v) for v in values) else values:
                if isinstance(v, (str, int, float)) or hasattr(v, "__fspath__"):
                    args.append(f"{long}={v}" if long.startswith("--") else f"{long} {v}")
                else:
                    cannot.append(f"{long} ({v!r})")
    return args, cannot


def _without_ini_addopts(config: pytest.Config, args: list[str]) -> list[str]:
    """Drop arguments that the ini file's ``addopts`` supplies (they apply again on a rerun from
    the same directory) unless they were also given on the command line."""
    ini = set(shlex.split(" ".join(config.getini("addopts") or [])))
    given = set(config.invocation_params.args)
    kept = []
    for arg in args:
        parts = arg.split(" ") if not arg.startswith("--") else [arg, *arg.split("=", 1)]
        from_ini = all(p in ini for p in arg.split(" ")) or arg in ini
        if from_ini and not any(p in given for p in parts) and arg not in given:
            continue
        kept.append(arg)
    return kept


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def reproduce_line(item: pytest.Item, seed: int) -> str:
    """``reproduce: pytest <test> <options that shaped the run> --emu-seed=N``, prefixed with the
    ``EMU_*`` environment it ran under, with a note naming what it cannot carry."""
    nodeid = item.nodeid
    match = re.match(r"^(.*?)\[(.*)\]$", nodeid)
    if match is not None:  # drop --emu-seeds' own "seedN" part of the parameter id
        rest = re.sub(r"(^|-)seed\d+(?=-|$)", "", match.group(2)).strip("-")
        nodeid = f"{match.group(1)}[{rest}]" if rest else match.group(1)
    config = item.config
    try:
        args, cannot = _option_args(config)
        args = _without_ini_addopts(config, args)
    except Exception as err:  # a parser this plugin does not know: say so, carry nothing
        args, cannot = [], [f"the command-line options ({type(err).__name__}: {err})"]
    env = [f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items())
           if k.startswith(_ENV_PREFIXES)]
    words = [*env, "pytest", shlex.quote(nodeid), *(shlex.quote(a) if " " not in a else a
                                                     for a in args), f"--emu-seed={seed}"]
    line = "reproduce: " + " ".join(words)
    invoked = config.invocation_params.dir
    if invoked != config.rootpath:
        line = f"reproduce (from {config.rootpath}): " + line.removeprefix("reproduce: ")
    if cannot:
        line += "\n  (not carried: " + ", ".join(cannot) + ")"
    return line


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and _SEED_KEY in item.stash:
        seed = item.stash[_SEED_KEY]
        text = reproduce_line(item, seed)
        if _HTML_KEY in item.stash:
            text += f"\ntimeline: {item.stash[_HTML_KEY]}"
        sections = [("emu", text)]
        sim = item.stash.get(_SIM_KEY, None)
        _forget_sim(item)
        panics = list(getattr(sim, "panics", []) or [])
        if panics:
            shown = [f"{p.summary()}\n{p.traceback}" for p in panics[:3]]
            more = f"\n... and {len(panics) - 3} more" if len(panics) > 3 else ""
            sections.append((f"emu: reconcile panics ({len(panics)})",
                             "\n".join(shown).rstrip() + more))
        add = getattr(report.longrepr, "addsection", None)
        for name, body in sections:
            if add is not None:
                add(name, body)
            else:
                report.sections.append((name, body))


# -- coroutines never awaited ----------------------------------------------------------------------

_EMU_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NEVER_AWAITED = r"coroutine .* was never awaited"


def _library_coroutine(source: Any) -> bool:
    """Whether ``source`` (a warning's) is a coroutine whose code is the library's."""
    return isinstance(source, types.CoroutineType) and \
        os.path.abspath(source.cr_code.co_filename).startswith(_EMU_DIR)


def _where(w: warnings.WarningMessage) -> str:
    """Where the test dropped the coroutine: the creation site when Python tracks coroutine
    origins (the first frame outside the library), else the line running when it was collected
    (for ``sim.sleep(5)`` without ``await``, that line)."""
    origin = getattr(w.source, "cr_origin", None) or ()
    for filename, lineno, _func in origin:
        if not os.path.abspath(filename).startswith(_EMU_DIR):
            return f"{_relative(filename)}:{lineno}"
    return f"{_relative(w.filename)}:{w.lineno}"


def _relative(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


class UnawaitedCoroutine(AssertionError):
    """A test called a coroutine function of the library and never awaited the coroutine."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Fail a test in which a library coroutine was never awaited; other warnings go on to
    pytest as they came."""
    __tracebackhide__ = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=_NEVER_AWAITED, category=RuntimeWarning)
        failure: BaseException | None = None
        try:
            result = yield
        except BaseException as exc:  # the test's own failure: the finding is added to it
            failure = exc
    ours = [w for w in caught if issubclass(w.category, RuntimeWarning)
            and _library_coroutine(w.source)]
    for w in caught:
        if not any(w is o for o in ours):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                                   source=w.source)
    if ours:
        lines = [f"{_where(w)}: {w.message} (a coroutine does nothing until awaited: add "
                 "'await')" for w in ours]
        text = "\n".join(lines)
        if failure is not None:
            failure.add_note(text)
            raise failure
        raise UnawaitedCoroutine(text)
    if failure is not None:
        raise failure
    return result
