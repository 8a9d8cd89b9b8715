"""docs/tutorial.md section 11, as a reader runs it: the explorer finds the naive Greeter's three
bugs in 40 runs and nothing in the fixed one (examples/my_controller/explore_greeter.py)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from emu.explore.search import explore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_controller"


def test_the_tutorials_explorer_finds_the_naive_greeters_bugs_and_none_in_the_fixed_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.chdir(tmp_path)
    # the example's module, from its folder (as `python explore_greeter.py` finds it)
    explore_greeter = importlib.import_module("explore_greeter")

    try:
        naive = explore(explore_greeter.workload("naive"), budget=40,
                        out="greeter-naive-findings")
        fixed = explore(explore_greeter.workload("fixed"), budget=40,
                        out="greeter-fixed-findings")
    finally:
        for name in ("explore_greeter", "greeter", "naive"):
            sys.modules.pop(name, None)
    text = (EXAMPLE.parents[1] / "docs" / "tutorial.md").read_text()
    assert [f.invariant for f in naive.findings] == ["workload-goal"] * 3
    for finding in naive.findings:
        assert f"  plan: {finding.plan!r}" in text
    assert not fixed.findings and fixed.runs == 40
