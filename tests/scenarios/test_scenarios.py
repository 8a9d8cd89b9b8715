"""Every registered scenario passes under 20 seeds, and its printed timeline for seed 1 matches
its golden file (``tests/scenarios/goldens/<name>.out``).

The seeds run in this process, one after the other (a scenario is a fraction of a second). The
golden check diffs what ``emu run NAME --seed 1`` prints, minus the wall-time line; a change in
behaviour shows as a diff of the story. After an intended change, rewrite the goldens with
``EMU_UPDATE_GOLDENS=1 pytest tests/scenarios/test_scenarios.py`` and review the diff.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from emu import cli, scenarios

SEEDS = range(20)
GOLDEN_SEED = 1
GOLDENS = Path(__file__).parent / "goldens"
NAMES = [sc.name for sc in scenarios.all_scenarios()]
#: Seed-1 results of the seeds test, reused by the golden test (same seed, same history).
_SEED1: dict[str, scenarios.ScenarioResult] = {}


def test_the_article_scenarios_are_registered():
    assert {"operator-failover", "operator-single-replica", "operator-upgrade-recreate",
            "apiserver-outage", "zombie-leader", "worker-loss", "head-loss-memory",
            "head-loss-redis", "head-loss-rocksdb", "head-restart-disabled",
            "redis-cleanup"} <= set(NAMES)
    for sc in scenarios.all_scenarios():
        assert sc.doc, f"{sc.name} says nothing of what it asserts"


@pytest.mark.parametrize("name", NAMES)
def test_scenario_meets_every_expectation_under_20_seeds(name):
    failures = []
    for seed in SEEDS:
        result = scenarios.run_scenario(name, seed)
        if seed == GOLDEN_SEED:
            _SEED1[name] = result
        if not result.expectations:
            failures.append((seed, "checked no expectation"))
        failures.extend((seed, f"{e.claim} ({e.detail})") for e in result.expectations
                        if not e.ok)
    assert failures == [], "\n".join(f"emu run {name} --seed {s}: {why}" for s, why in failures)


def _printed(name: str, capsys: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> str:
    cached = _SEED1.get(name)
    if cached is not None:
        monkeypatch.setattr(scenarios, "run_scenario", lambda _name, _seed: cached)
    code = cli.main(["run", name, "--seed", str(GOLDEN_SEED)])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    # the wall time is the one thing a rerun changes
    return "".join(line for line in out.splitlines(keepends=True)
                   if not line.startswith("virtual "))


@pytest.mark.parametrize("name", NAMES)
def test_printed_timeline_for_seed_1_matches_its_golden(name, capsys, monkeypatch):
    text = _printed(name, capsys, monkeypatch)
    path = GOLDENS / f"{name}.out"
    if os.environ.get("EMU_UPDATE_GOLDENS") == "1":
        GOLDENS.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden for {name}: run with EMU_UPDATE_GOLDENS=1"
    golden = path.read_text()
    diff = list(difflib.unified_diff(golden.splitlines(keepends=True),
                                     text.splitlines(keepends=True),
                                     f"goldens/{name}.out", "emu run (now)", n=2))
    assert not diff, ("the timeline changed (EMU_UPDATE_GOLDENS=1 rewrites the goldens):\n"
                      + "".join(diff[:80]))
