"""A pytest plugin loaded (``-p client_suites.plugin``) into each client's own suite.

It deselects the tests listed in ``client_suites.deselected`` for the suite named by
``CLIENT_SUITES_NAME`` (when the whole suite runs, ``CLIENT_SUITES_FULL=1``, a listed id that
it does not collect is an error: a stale list must not go unnoticed) and writes each test's
outcome to the JSON file ``CLIENT_SUITES_RESULTS``:
``{"outcomes": {nodeid: "passed"|"failed"|"skipped"}, "deselected": [...], "messages": {...}}``.

A test that runs longer than ``CLIENT_SUITES_TIMEOUT`` seconds (default 60; setup, call and
teardown together) fails with `TestTimeout`, raised from a SIGALRM handler (again every 5 s
should the suite's code swallow it), so one hung test cannot hang the run.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from client_suites.deselected import DESELECTED

_outcomes: dict[str, str] = {}
_messages: dict[str, str] = {}
_deselected: list[str] = []


class TestTimeout(Exception):
    """A test ran longer than ``CLIENT_SUITES_TIMEOUT``."""


def _suite() -> str:
    name = os.environ.get("CLIENT_SUITES_NAME", "")
    if name not in DESELECTED:
        raise pytest.UsageError(f"CLIENT_SUITES_NAME={name!r} is not one of {sorted(DESELECTED)}")
    return name


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = DESELECTED[_suite()]
    collected = {item.nodeid for item in items}
    stale = sorted(set(listed) - collected)
    if stale and os.environ.get("CLIENT_SUITES_FULL") == "1":
        raise pytest.UsageError("client_suites.deselected lists tests the suite does not have: "
                                + ", ".join(stale))
    drop = [item for item in items if item.nodeid in listed]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for item in items if item.nodeid not in listed]
    _deselected.extend(item.nodeid for item in drop)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    limit = int(os.environ.get("CLIENT_SUITES_TIMEOUT", "60"))

    def expired(signum: int, frame: FrameType | None) -> None:
        signal.alarm(5)
        raise TestTimeout(f"{item.nodeid} took longer than {limit} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    before = _outcomes.get(report.nodeid)
    if report.failed:
        _outcomes[report.nodeid] = "failed"
        _messages.setdefault(report.nodeid, f"{report.when}: {report.longreprtext[-1500:]}")
    elif report.skipped and before is None:
        _outcomes[report.nodeid] = "skipped"
        _messages[report.nodeid] = str(report.longrepr)[-500:]
    elif report.when == "call" and report.passed and before is None:
        _outcomes[report.nodeid] = "passed"


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("CLIENT_SUITES_RESULTS")
    if out:
        Path(out).write_text(json.dumps({"outcomes": _outcomes, "messages": _messages,
                                         "deselected": _deselected}, indent=1))
