"""Virtual time paced by the wall clock, for serving real clients (``emu serve``).

`PacedLoop` is a `VirtualTimeLoop` in wall-clock mode whose ``time()`` runs ``speed`` times as fast
as the machine's monotonic clock, from a chosen virtual start: at speed 10 a Lease's 15 s take
1.5 s of real time. asyncio computes its selector waits from ``time()``, in virtual seconds; the
selector divides them by ``speed`` before really waiting. Nothing jumps: real sockets are waited
on for real. It lives in the kernel because only the kernel reads the machine's clock.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from datetime import UTC, datetime
from typing import Any

from .clock import EPOCH
from .loop import VirtualTimeLoop


class ScaledSelector:
    """The real selector, with asyncio's virtual timeouts turned into real ones (÷ speed)."""

    def __init__(self, real: selectors.BaseSelector, speed: float) -> None:
        self._real = real
        self._speed = speed

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            timeout = timeout / self._speed
        return self._real.select(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class PacedLoop(VirtualTimeLoop):
    """A loop whose virtual time runs ``speed`` times as fast as the wall clock, from ``start``
    virtual seconds."""

    def __init__(self, *, speed: float = 1.0, start: float = 0.0) -> None:
        super().__init__(wall_clock=True, start=start)
        if not speed > 0:
            self.close()
            raise ValueError(f"speed must be positive, got {speed!r}")
        self.speed = float(speed)
        self._origin = time.monotonic()
        self._start = float(start)
        virtual = self._selector
        virtual._real = ScaledSelector(virtual._real, self.speed)  # type: ignore[assignment]

    def time(self) -> float:
        return self._start + (time.monotonic() - self._origin) * self.speed


def wall_now() -> datetime:
    """The machine's current UTC instant (for what must match the real world: a TLS
    certificate's validity, the start of a served world's clock)."""
    return datetime.now(UTC)


def real_now_as_virtual() -> float:
    """Virtual seconds that make ``EPOCH + t`` the current real instant."""
    return max(0.0, (wall_now() - EPOCH).total_seconds())


def wall_speed() -> float:
    """Virtual seconds per wall second on the running loop: a `PacedLoop`'s ``speed``, else 1
    (a client on the world's virtual clock counts in the world's seconds). A duration a client
    gives in its own seconds (a watch's ``timeoutSeconds``) is that many times longer in
    virtual time."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return 1.0
    speed = getattr(loop, "speed", 1.0)
    return float(speed) if isinstance(speed, int | float) and speed > 0 else 1.0
