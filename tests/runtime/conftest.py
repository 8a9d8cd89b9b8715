"""Fixtures for runtime tests that need only a virtual-time loop (no API server)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from emu.kernel.loop import VirtualTimeLoop

T = TypeVar("T")


def vrun(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` on a fresh virtual-time loop."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(fn())  # type: ignore[arg-type]


@pytest.fixture
def run() -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    return vrun
