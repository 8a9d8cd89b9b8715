"""Your own operator as a plugin of ``emu explore``: ``WORKLOAD`` as ``module:attr`` (a
`Workload` value or a function returning one) and ``--invariants module:attr`` (your invariant
values), tried on the Greeter of examples/my_controller: its planted recovery bug is found,
its fixed version passes; a reference that is not what it should be is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from emu import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_controller"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in ("explore_greeter", "greeter", "naive"):
        sys.modules.pop(name, None)


def _explore(tmp: Path, which: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = cli.main(["explore", f"explore_greeter:{which}", "--invariants",
                     "explore_greeter:invariants", "--budget", "40", "--shrink-budget", "0",
                     "--out", str(tmp / which), "--json"])
    return code, orjson.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_the_planted_bug_is_found_and_the_fixed_greeter_passes(
        example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, naive = _explore(example, "naive", capsys)
    assert code == 1
    found = {f["invariant"] for f in naive["findings"]}
    assert "greeter-no-false-name-clash" in found
    clash = next(f for f in naive["findings"] if f["invariant"] == "greeter-no-false-name-clash")
    assert "is Failed although ConfigMap hello-greeting is its own" in clash["message"]
    # the exported test replays with the same invariants, imported from their module
    exported = Path(clash["test_file"]).read_text()
    assert "INVARIANTS = [NoFalseNameClash()]" in exported
    assert "from explore_greeter import NoFalseNameClash" in exported
    code, fixed = _explore(example, "fixed", capsys)
    assert (code, fixed["findings"], fixed["runs"]) == (0, [], 40)


@pytest.mark.parametrize(("argv", "message"), [
    (["no_such_module:w"], "workload 'no_such_module:w': No module named 'no_such_module'"),
    (["explore_greeter:nothing"], "'explore_greeter' has no 'nothing'"),
    (["explore_greeter:greeting"], "could not be called with no arguments"),
    (["explore_greeter:invariants"], "is a list, not an emu.explore.workload.Workload"),
    (["explore_greeter:naive", "--invariants", "explore_greeter:naive"],
     "--invariants 'explore_greeter:naive' must give Invariant values"),
    (["explore_greeter:naive", "--invariants", "explore_greeter"], "give module:attr"),
])
def test_a_reference_that_is_not_a_workload_or_invariants_is_refused_by_name(
        example: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        message: str) -> None:
    assert cli.main(["explore", *argv, "--budget", "1", "--out", str(example / "o")]) == 2
    assert message in capsys.readouterr().err
