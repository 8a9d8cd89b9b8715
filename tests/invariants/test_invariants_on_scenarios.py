"""Every scenario, one seed, with the default invariants attached: no false violations.

The zombie-leader scenario's point is a two-leader window in which both leaders work: it must be
reported as information, never as a violation."""

from __future__ import annotations

from typing import Any

import pytest

import emu
from emu.invariants import Monitors, Violation, kuberay_invariants
from emu.scenarios import Report, all_scenarios, get

NAMES = [sc.name for sc in all_scenarios()]


def run_checked(name: str, seed: int = 1) -> tuple[bool, list[Violation], list[Violation]]:
    sc = get(name)
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        monitors = Monitors.attach(sim, kuberay_invariants())
        report = Report(sim)
        await sc.fn(sim, report)
        box["ok"] = report.ok
        box["violations"] = await monitors.finish(sim)
        box["info"] = monitors.info()

    emu.run(main, seed=seed, **sc.options)
    return box["ok"], box["violations"], box["info"]


@pytest.mark.parametrize("name", NAMES)
def test_scenario_holds_every_default_invariant(name):
    ok, violations, info = run_checked(name)
    assert ok
    assert violations == [], "\n".join(map(str, violations))
    if name == "zombie-leader":
        assert [v.invariant for v in info] == ["two-leader-window"]
        assert info[0].severity == "info"
