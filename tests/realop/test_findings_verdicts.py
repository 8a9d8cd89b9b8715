"""The verdicts of scripts/replay-findings-real.sh (`emu.differential`): a real run's
violations are classified as known findings, and a finding counts as reproduced only in the runs
that showed it, whatever invariant they broke. No Go needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emu.differential import finding_verdict, known_in_run, load_finding

FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings"

RUNNING = ("rayjob-status-consistent t=32.0 RayJob default/demo-job had jobDeploymentStatus "
           "Failed (reason AppFailed) with non-terminal jobStatus RUNNING, from t=32.000s")
SUCCEEDED = RUNNING.replace("RUNNING", "SUCCEEDED")


def _run(*violations: str) -> dict[str, Any]:
    return {"outcome": "ran", "violations": list(violations)}


def test_a_runs_violations_are_classified_from_the_replays_plan_and_status() -> None:
    f4 = load_finding(FINDINGS / "test_head_lost_after_success_marked_failed.py")
    assert known_in_run(f4, _run(SUCCEEDED)) == ["F4"]
    # the same plan's head loss landing before the job succeeded is F2's shape, not F4's
    assert known_in_run(f4, _run(RUNNING)) == ["F2"]
    assert known_in_run(f4, _run()) == []


def test_the_verdict_counts_the_runs_that_showed_the_finding_and_says_what_else() -> None:
    rows = [{**_run(SUCCEEDED), "known": ["F4"]}, {**_run(RUNNING), "known": ["F2"]},
            {"outcome": "error", "error": "WaitTimeout: x"}]
    assert finding_verdict(rows, "v1.5.0", "F4") == \
        "reproduced on KubeRay v1.5.0 (1 of 2 runs, 1 more stopped with an error); showed F2"
    assert finding_verdict(rows[1:2], "v1.5.0", "F4") == \
        "not reproduced on v1.5.0 (1 runs); showed F2"
    assert finding_verdict([{**_run(), "known": []}], "v1.5.0", "F4") == \
        "not reproduced on v1.5.0 (1 runs); no invariant broke"
    assert finding_verdict(rows[2:], "v1.5.0", "F4") == \
        "cannot be replayed on the binary: WaitTimeout: x"
    with pytest.raises(ValueError, match="no runs"):
        finding_verdict([], "v1.5.0", "F4")


def test_a_file_that_is_not_a_replay_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    other = tmp_path / "test_other.py"
    other.write_text("X = 1\n")
    with pytest.raises(ValueError, match="not a findings replay file .no WORKLOAD, KNOBS"):
        load_finding(other)
