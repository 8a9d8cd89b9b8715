"""A fault plan's ``at`` times count from the start of the run: 0 in a virtual run, the real
instant a paced run (``emu.run(paced=True)``) started at, so one plan means the same in both."""

from __future__ import annotations

from typing import Any

import emu
from emu.faults import Outage


async def _watch(sim: emu.Simulation) -> tuple[float, list[Any]]:
    await sim.sleep(0.6)
    return sim.loop.start, sim.faults.performed()  # type: ignore[attr-defined]


def test_a_virtual_runs_plan_counts_from_zero() -> None:
    start, performed = emu.run(_watch, faults=[Outage(at=0.3, duration=0.1)])
    assert start == 0.0
    assert [f.at for f in performed] == [0.3]


def test_a_paced_runs_plan_counts_from_the_instant_it_started() -> None:
    start, performed = emu.run(_watch, faults=[Outage(at=0.3, duration=0.1)], paced=True)
    assert start > 1e6  # the real instant, counted from the emulator's EPOCH
    assert len(performed) == 1
    # performed 0.3 s into the run (paced by the wall clock: allow a loaded machine's lag),
    # not at once as a plan read as absolute times would be
    assert 0.29 <= performed[0].at - start < 0.55, performed[0].at - start


async def _last_healed(sim: emu.Simulation) -> tuple[float, float, float]:
    from emu.explore.runner import _last_fault_end
    from emu.invariants.liveness import last_fault_healed

    return sim.loop.start, last_fault_healed(sim), _last_fault_end(sim)  # type: ignore[attr-defined]


def test_with_no_fault_yet_the_last_fault_healed_at_the_runs_start() -> None:
    # the explorer's goal and the steadiness invariant wait "horizon seconds after the last
    # fault": in a paced run that must count from its start, not from the clock's zero (which
    # would make a replay give up on its goal at once)
    start, healed, end = emu.run(_last_healed, paced=True)
    assert healed == end == start > 1e6
    assert emu.run(_last_healed) == (0.0, 0.0, 0.0)
