"""``emu explore``: the --json shape, exit codes 0/1/2, and an exported pytest file that fails on
its own in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from explore_worlds import FINE_YAML, UNREACHABLE_YAML

from emu import cli

ROOT = Path(__file__).resolve().parents[2]


def _json(out: str) -> dict:
    return orjson.loads(out.strip().splitlines()[-1])


def test_findings_exit_1_with_the_json_shape_and_a_test_file_that_fails_on_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML)
    code = cli.main(["explore", "-f", str(wl), "--budget", "2", "--seed", "1",
                     "--shrink-budget", "2", "--out", str(tmp_path / "out"), "--json"])
    out = _json(capsys.readouterr().out)
    assert code == 1
    assert out["runs"] == 2
    finding = out["findings"][0]
    assert set(finding) >= {"invariant", "message", "plan", "knobs", "replay", "test_file"}
    assert finding["invariant"] == "workload-goal"
    assert finding["plan"].startswith("[") and finding["knobs"] == {}
    assert finding["replay"] == f"pytest {finding['test_file']}"
    # what to do about it: no known KubeRay finding, the behaviour of the workload's own
    # operator (Setup.install), no mitigation known, no emulator check broken
    assert (finding["known"], finding["class"], finding["mitigation"]) == ("new", "operator", None)
    assert "explore_worlds:no_controller" in finding["class_basis"]
    assert finding["emulator"] == [] and finding["go"] == []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(ROOT), str(Path(__file__).parent))))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           finding["test_file"]], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "never reached data.k in ['2']" in proc.stdout
    assert Path(finding["test_file"]).with_suffix(".html").exists()


def test_failing_shapes_not_shrunk_are_printed_and_in_the_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "unreachable.yaml"
    wl.write_text(UNREACHABLE_YAML)
    argv = ["explore", "-f", str(wl), "--budget", "30", "--seed", "3", "--shrink-budget", "4"]
    assert cli.main([*argv, "--out", str(tmp_path / "a"), "--json"]) == 1
    unshrunk = _json(capsys.readouterr().out)["unshrunk"]
    assert unshrunk and all(u["explained_by"] >= 1 for u in unshrunk)
    assert cli.main([*argv, "--out", str(tmp_path / "a")]) == 1
    text = capsys.readouterr().out
    assert (f"{len(unshrunk)} other failing plan shape(s) contain a finding's minimized shape"
            in text)
    assert "  known:  new (no known finding has this shape; emu explore --known lists them)" \
        in text
    assert "  class:  operator: your operator's behaviour" in text


def test_no_findings_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "fine.yaml"
    wl.write_text(FINE_YAML)
    code = cli.main(["explore", "-f", str(wl), "--budget", "2", "--out", str(tmp_path / "o"),
                     "--json"])
    assert code == 0
    assert _json(capsys.readouterr().out)["findings"] == []


@pytest.mark.parametrize(("argv", "message"), [
    (["explore", "no-such-workload"], "emu explore: no workload 'no-such-workload': not a "
                                      "built-in (raycluster, rayjob, rayservice) and no "
                                      "scenario named 'no-such-workload'"),
    (["explore", "rayjob", "--budget", "lots"],
     "emu explore: --budget takes a number of runs (2000) or a duration (90s, 5m, 1h), "
     "not 'lots'"),
    (["explore"], "emu explore: give a WORKLOAD (raycluster, rayjob, rayservice or a scenario) "
                  "or -f FILE"),
    (["explore", "rayjob", "-j", "2", "--ray"], "emu explore: choose -j N or --ray, not both"),
    (["explore", "rayjob", "--per-invariant", "0"],
     "emu explore: --per-invariant must be at least 1, not 0"),
])
def test_bad_input_exits_2_naming_what_was_wrong(argv: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith(message)


def test_a_store_made_for_another_workload_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.jsonl").write_bytes(b'{"header": {"workload": "rayjob", "seed": 0}}\n')
    wl = tmp_path / "fine.yaml"
    wl.write_text(FINE_YAML)
    assert cli.main(["explore", "-f", str(wl), "--budget", "1", "--out", str(tmp_path)]) == 2
    assert "holds runs of {'workload': 'rayjob', 'seed': 0}, not {'workload': 'fine', " \
           "'seed': 0}; use another --out directory" in capsys.readouterr().err


@pytest.mark.parametrize(("setup", "message"), [
    ("file", "cannot keep the result store in {out}: it is not a directory; use another --out "
             "directory"),
    ("corrupt", "{out}/runs.jsonl is not a result store of emu explore (its first line is not "
                "a header); use another --out directory"),
])
def test_an_out_that_cannot_hold_a_store_exits_2_naming_it(
        setup: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # both used to end in a traceback (FileExistsError, orjson.JSONDecodeError)
    out = tmp_path / "out"
    if setup == "file":
        out.write_text("")
    else:
        out.mkdir()
        (out / "runs.jsonl").write_text("not json\n")
    wl = tmp_path / "fine.yaml"
    wl.write_text(FINE_YAML)
    assert cli.main(["explore", "-f", str(wl), "--budget", "1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "emu explore: " + message.format(out=out)
    if setup == "corrupt":
        assert (out / "runs.jsonl").read_text() == "not json\n"  # left as it was
