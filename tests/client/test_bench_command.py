"""`emu bench`: runs benchmark scripts as subprocesses and prints one table of their rows."""

from __future__ import annotations

from emu import cli


def _cells(out: str, text: str) -> list[str]:
    line = next(line for line in out.splitlines() if text in line)
    return [cell.strip() for cell in line.split("│")[1:-1]]


def test_bench_only_matching_nothing_is_a_usage_error_naming_the_benchmarks(capsys):
    assert cli.main(["bench", "--only", "nope"]) == 2
    assert capsys.readouterr().err == (
        "emu bench: --only matched no benchmark (there are: apiserver, controller, "
        "leader_election, gcs_storage, gcs, kube, reconcile, rayjob, rayservice, scenarios, http, explore)\n")


def test_bench_tables_each_figure_with_its_value_and_target(capsys):
    assert cli.main(["bench", "--only", "leader"]) == 0
    out = capsys.readouterr().out
    assert "emu bench (quick)" in out
    assert _cells(out, "instants with two valid holders") == [
        "leader_election", "instants with two valid holders", "0", "", "", "", "0", "met"]
    assert _cells(out, "2 simulated hours")[3:7] == ["s", "", "", "<= 2.5 s"]


def test_bench_shows_a_benchmark_that_runs_past_the_timeout_as_failed_and_exits_1(capsys):
    assert cli.main(["bench", "--only", "rayjob", "--timeout", "0.5"]) == 1
    assert _cells(capsys.readouterr().out, "FAILED") == [
        "rayjob", "FAILED (timed out after 0.5 s)", "", "", "", "", "", ""]


def test_a_crashed_benchmark_is_reported_by_its_exception_line_not_the_notes_after_it():
    stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
              "emu.simulation.VirtualTimeExceeded: the run reached its virtual time limit\n"
              "  Task-1: body\nreplay: emu.run(main, seed=7)\n"
              "faults performed during the run: [Crash(at=1.0, process='a')]\n")
    assert cli._last_error(stderr) == (
        "emu.simulation.VirtualTimeExceeded: the run reached its virtual time limit")


def test_a_missed_target_is_marked_and_fails_only_under_strict(capsys):
    rows = [{"benchmark": "b", "measure": "fast", "value": 9.0, "unit": "ms", "target": "<= 10 ms"},
            {"benchmark": "b", "measure": "slow", "value": 12.0, "unit": "ms", "target": "<= 10 ms"}]
    assert cli._bench_report(rows, 0, full=False, strict=False) == 0
    out = capsys.readouterr().out
    assert _cells(out, "fast")[-1] == "met" and _cells(out, "slow")[-1] == "MISSED"
    assert "1 target(s) missed (exit status 0; --strict makes it 1)" in out
    assert cli._bench_report(rows, 0, full=False, strict=True) == 1
    assert cli._bench_report(rows[:1], 0, full=False, strict=True) == 0


def test_markdown_prints_one_table_with_units_ratios_and_the_met_column(capsys):
    rows = [{"benchmark": "b", "measure": "fast | small", "value": 9.0, "unit": "ms",
             "baseline": 4.5, "ratio": 2.0, "target": "<= 10 ms"},
            {"benchmark": "b", "measure": "slow", "value": 12345.0, "unit": "/s",
             "target": ">= 20k/s"},
            {"benchmark": "b", "measure": "untargeted", "value": 0.5, "unit": ""},
            {"benchmark": "c", "measure": "FAILED (exit 1: ValueError: x)"}]
    assert cli._bench_markdown(rows, 1, full=True, strict=False, load=2.25) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[1:] == [
        "",
        "| benchmark | measure | figure | same-run baseline | ratio | target | met |",
        "|---|---|---:|---:|---:|---|---|",
        "| b | fast \\| small | 9 ms | 4.5 ms | 2.00x | <= 10 ms | met |",
        "| b | slow | 12,345 /s |  |  | >= 20k/s | **missed** |",
        "| b | untargeted | 0.5 |  |  |  |  |",
        "| c | FAILED (exit 1: ValueError: x) |  |  |  |  |  |",
        "",
        "1 of 2 targets met; 1 benchmark(s) failed.",
    ]
    assert out.startswith("Measured by `emu bench --full --markdown` (Python ")
    assert ", load average 2.2 at the start); each ratio is against a baseline measured in the " \
           "same run.\n" in out


def test_markdown_exits_1_on_a_missed_target_only_under_strict(capsys):
    rows = [{"benchmark": "b", "measure": "slow", "value": 12.0, "unit": "ms",
             "target": "<= 10 ms"}]
    assert cli._bench_markdown(rows, 0, full=False, strict=False, load=None) == 0
    assert cli._bench_markdown(rows, 0, full=False, strict=True, load=None) == 1
    assert capsys.readouterr().out.startswith(
        "Measured by `emu bench --markdown` (Python ")


def test_bench_markdown_runs_a_benchmark_and_prints_its_rows_as_markdown(capsys):
    assert cli.main(["bench", "--only", "leader", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| leader_election | instants with two valid holders | 0 |  |  | 0 | met |" in out
    assert "┃" not in out  # not the terminal table


def test_markdown_shows_each_benchmarks_key_figures_and_counts_every_target(capsys):
    rows = [{"benchmark": "a", "measure": "key", "value": 1.0, "unit": "s", "target": "<= 2 s",
             "headline": True},
            {"benchmark": "a", "measure": "detail", "value": 3.0, "unit": "s",
             "target": "<= 2 s", "headline": False},
            {"benchmark": "b", "measure": "only one", "value": 5.0, "unit": "ms"}]
    assert [r["measure"] for r in cli.headline_rows(rows)] == ["key", "only one"]
    assert cli._bench_markdown(rows, 0, full=True, strict=True, load=None) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[4:] == [
        "| a | key | 1 s |  |  | <= 2 s | met |",
        "| b | only one | 5 ms |  |  |  |  |",
        "",
        "1 of 1 targets met in these 2 key figures; 1 of 2 in all 3 figures "
        "(`emu bench --full` prints each one).",
    ]


def test_every_benchmark_emu_bench_runs_marks_its_key_figures():
    from pathlib import Path

    folder = Path(cli.__file__).resolve().parent.parent / "benchmarks"
    unmarked = [name for name, _ in cli.BENCHMARKS
                if "headline=" not in (folder / f"{name}.py").read_text()]
    assert unmarked == []
