"""`emu bench` reads each row's target text to mark it met or missed (and ``--strict`` exits 1)."""

from __future__ import annotations

import pytest

from emu.cli import target_met


def r(value, target, *, unit="/s", ratio=None):
    return {"value": value, "unit": unit, "ratio": ratio, "target": target}


@pytest.mark.parametrize(("row", "met"), [
    (r(60_000, ">= 50k/s, >= 0.5x raw", ratio=0.6), True),
    (r(60_000, ">= 50k/s, >= 0.5x raw", ratio=0.3), False),     # the ratio clause misses
    (r(40_000, ">= 50k/s, >= 0.5x raw", ratio=0.9), False),     # the value clause misses
    (r(9.5, "<= 10 ms", unit="ms"), True),
    (r(10.5, "<= 10 ms", unit="ms"), False),
    (r(0, "0", unit=""), True),
    (r(2, "0", unit=""), False),
    (r(11.0, "<= 12x", unit="s", ratio=11.0), True),            # growth: a ratio of walls
    (r(13.0, "<= 12x", unit="s", ratio=13.0), False),
    (r(1200, ">= 1000", unit="x real"), True),
    (r(541, ">= 1000", unit="x real"), False),
    (r(3.0, ">= 2x", unit="x"), True),                          # the unit is the ratio itself
    (r(5, "", unit="s"), None),                                 # no target
    (r(5, "as fast as possible"), None),                        # unreadable: not judged
    (r(5, ">= 0.5x raw", ratio=None), None),                    # no baseline to judge by
])
def test_target_met(row, met):
    assert target_met(row) is met
