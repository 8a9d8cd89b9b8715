"""Fixtures for the API server conformance tests: a server on a settable clock, and object makers.

Most verbs are synchronous, so most tests call them directly with a `ManualClock`; watch tests run
on a fresh virtual-time loop (``run``) with the server reading that loop's clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from emu.apiserver.server import APIServer
from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.rng import SimRandom


class ManualClock:
    """Virtual seconds that a test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Recorder:
    """A ``trace`` callable that keeps every write it is told about."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def trace() -> Recorder:
    return Recorder()


@pytest.fixture
def api(clock: ManualClock, trace: Recorder) -> APIServer:
    return APIServer(clock=clock, rng=SimRandom(1), trace=trace)


def _vrun(fn: Callable[[], Awaitable[Any]]) -> Any:
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(fn())  # type: ignore[arg-type]


@pytest.fixture
def run() -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """``run(async_fn)``: run it on a fresh virtual-time loop and return its result."""
    return _vrun
