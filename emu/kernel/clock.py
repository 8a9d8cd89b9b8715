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
import re
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


#: The strings `rfc3339` and `rfc3339_micro` made, by (format, seconds): a world writes the same
#: instant many times over (every write at one virtual time, each Lease renewal's two fields),
#: and ``strftime`` was a percent of an explorer run. Cleared when it reaches `_TIMES_MAX`.
_TIMES: dict[tuple[bool, float], str] = {}
_TIMES_MAX = 4096


def rfc3339(seconds: float) -> str:
    """Kubernetes' ``metav1.Time`` format (whole seconds, UTC, ``Z``)."""
    text = _TIMES.get((False, seconds))
    if text is None:
        if len(_TIMES) >= _TIMES_MAX:
            _TIMES.clear()
        text = _TIMES[(False, seconds)] = to_datetime(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


def rfc3339_micro(seconds: float) -> str:
    """Kubernetes' ``metav1.MicroTime`` format (a Lease's acquireTime and renewTime)."""
    text = _TIMES.get((True, seconds))
    if text is None:
        if len(_TIMES) >= _TIMES_MAX:
            _TIMES.clear()
        text = _TIMES[(True, seconds)] = to_datetime(seconds).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
    return text


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


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                   "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` in seconds ("1h30m", "+5m", "-5s", "0"), or None where Go
    would refuse it: the one parser of the emulated world (cert-manager's durations, the
    invariants' reading of KubeRay annotations). The KubeRay port keeps its own copy in
    emu/kuberay/utils/validation.py, which the layer contracts keep away from emu.kernel."""
    s = text
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        return None
    total = 0.0
    pos = 0
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total
