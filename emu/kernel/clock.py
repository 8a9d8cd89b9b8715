"""The simulation clock: virtual seconds, the epoch they count from, and freezing time.

Every timestamp the emulated world writes (``creationTimestamp``, a Lease's ``renewTime``, a
condition's ``lastTransitionTime``) is ``EPOCH + virtual seconds``, so the same seed writes the same
bytes on any day on any machine.

Rules:
- time can't go backwards;
- all time comes from here: nothing outside ``emu.kernel`` reads the machine's clock;
- outside work (a real socket, a thread) is awaited under `freeze_while`, which stops the virtual
  clock until it answers, so a slow real Redis never makes a Lease expire.

Prior art: trio ``MockClock``, looptime, SimPy ``rt.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from .loop import VirtualTimeLoop

T = TypeVar("T")

#: Virtual time zero, as a wall-clock instant.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def now() -> float:
    """Virtual seconds since the simulation started (the running loop's time)."""
    return asyncio.get_running_loop().time()


def to_datetime(seconds: float) -> datetime:
    """The wall-clock instant of a virtual time."""
    return EPOCH + timedelta(seconds=seconds)


def rfc3339(seconds: float) -> str:
    """Kubernetes' ``metav1.Time`` format (whole seconds, UTC, ``Z``)."""
    return to_datetime(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(seconds: float) -> str:
    """Kubernetes' ``metav1.MicroTime`` format (a Lease's acquireTime and renewTime)."""
    return to_datetime(seconds).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Virtual seconds for a ``metav1.Time`` or ``MicroTime`` string written by `rfc3339`."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (value - EPOCH).total_seconds()


async def freeze_while(awaitable: Awaitable[T]) -> T:
    """Await outside work with virtual time stopped until it answers.

    Without this, a loop that sees no timer would report a `Deadlock`, or jump the clock past a
    deadline while a real server is still thinking. Nested and concurrent freezes are counted.
    """
    loop = asyncio.get_running_loop()
    if not isinstance(loop, VirtualTimeLoop) or loop.wall_clock:
        return await awaitable
    loop._frozen += 1
    try:
        return await awaitable
    finally:
        loop._frozen -= 1
