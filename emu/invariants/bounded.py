"""Conditions allowed to hold for at most a bound: reported at the first instant they exceed it.

Checked lazily — when the world changes and at ``finish`` — never with a timer, so a monitor
schedules nothing on the loop and cannot change the run it watches. A condition that holds past
its bound is reported once per episode, with ``at = start + bound`` (the first instant the
invariant was broken) and the condition's own description of what was seen.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import attrs

from .base import BaseMonitor


@attrs.define
class _Episode:
    start: float
    message: str
    objects: tuple[str, ...]
    reported: bool = False


class Bounded:
    """Episodes of named conditions; ``bound`` 0 reports as soon as a condition holds."""

    def __init__(self, monitor: BaseMonitor, bound: float) -> None:
        self.monitor = monitor
        self.bound = bound
        self._open: dict[Hashable, _Episode] = {}

    def hold(self, key: Hashable, now: float, message: str, objects: Sequence[str]) -> None:
        """The condition ``key`` holds now (starts an episode unless one is open)."""
        ep = self._open.get(key)
        if ep is None:
            ep = self._open[key] = _Episode(now, message, tuple(objects))
        else:
            ep.message = message  # the latest description of what is seen
        self._check(ep, now)

    def release(self, key: Hashable, now: float) -> None:
        """The condition ``key`` no longer holds (closes its episode)."""
        ep = self._open.pop(key, None)
        if ep is not None:
            self._check(ep, now, closing=True)

    def set(self, key: Hashable, holds: bool, now: float, message: str,
            objects: Sequence[str]) -> None:
        if holds:
            self.hold(key, now, message, objects)
        else:
            self.release(key, now)

    def check(self, now: float) -> None:
        """Report every open episode that has now lasted longer than the bound."""
        for ep in list(self._open.values()):
            self._check(ep, now)

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def any_open(self) -> bool:
        """True while some episode is open (its verdict may still change with time)."""
        return bool(self._open)

    def _check(self, ep: _Episode, now: float, closing: bool = False) -> None:
        if ep.reported:
            return
        lasted = now - ep.start
        if self.bound <= 0 or lasted > self.bound + 1e-9:
            ep.reported = True
            bound = "" if self.bound <= 0 else f" (longer than the bound of {self.bound:g}s)"
            since = f"from t={ep.start:.3f}s" + (f" to t={now:.3f}s" if closing else "")
            self.monitor.report(f"{ep.message}, {since}{bound}",
                                ep.start + max(self.bound, 0.0), ep.objects)
