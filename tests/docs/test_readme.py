"""The README's example test runs, as written, under the project's pytest plugin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readmes_first_test_passes(tmp_path):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A first test"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "test_readme_example.py").write_text(code)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:asyncio", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout


def test_the_readme_opens_with_the_demo_and_test_commands_that_ci_runs():
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert first_block == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci


FIGURES = re.compile(r"<!-- figures: the output of `emu bench --full --markdown`, pasted whole -->\n"
                     r"(.*?)<!-- /figures -->", re.S)


def _figures(path: Path) -> list[str]:
    found = FIGURES.search(path.read_text())
    assert found, f"{path.name} has no figures block (the output of emu bench --full --markdown)"
    lines = found.group(1).strip().splitlines()
    assert lines, f"{path.name}'s figures block is empty: paste the output of emu bench --full " \
                  "--markdown into it"
    return lines


def _printed_by_bench_markdown(capsys) -> list[str]:
    from emu import cli

    rows = [{"benchmark": "apiserver", "measure": "get Pod", "value": 1.5e5, "unit": "/s",
             "baseline": 3e5, "ratio": 0.5, "target": ">= 100k/s"}]
    cli._bench_markdown(rows, 0, full=True, strict=False, load=1.0)
    return capsys.readouterr().out.strip().splitlines()


def _shape(line: str) -> str:
    return re.sub(r"\d+(\.\d+)*", "N", line)


def test_the_readmes_figures_have_the_shape_emu_bench_full_markdown_prints(capsys):
    """The numbers are the command's; what is checked is that the block is its whole output:
    the same opening line, header and separator, seven cells a row, each benchmark one that
    `emu bench` runs, and a closing count that agrees with the rows' met column (no benchmark
    failed)."""
    from emu import cli

    lines = _figures(ROOT / "README.md")
    printed = _printed_by_bench_markdown(capsys)
    assert _shape(lines[0]) == _shape(printed[0])
    assert lines[1:4] == printed[1:4]  # blank line, header, separator
    table = [line for line in lines[4:] if line.startswith("|")]
    assert len(table) >= 20 and lines[4:4 + len(table)] == table
    names = {name for name, _ in cli.BENCHMARKS}
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in table]
    assert [row for row in cells if len(row) != 7] == []
    assert sorted({row[0].split()[0] for row in cells} - names) == []
    assert {row[6] for row in cells} <= {"met", "**missed**", ""}
    met = sum(row[6] == "met" for row in cells)
    targets = sum(row[6] != "" for row in cells)
    assert lines[4 + len(table)] == ""
    closing = re.fullmatch(r"(\d+) of (\d+) targets met in these (\d+) key figures; (\d+) of "
                           r"(\d+) in all (\d+) figures \(`emu bench --full` prints each one\)\.",
                           lines[5 + len(table)])
    assert closing and len(lines) == 6 + len(table), lines[4 + len(table):]
    assert [int(n) for n in closing.groups()[:3]] == [met, targets, len(table)]


def test_performance_md_shows_the_same_current_figures_as_the_readme():
    assert _figures(ROOT / "docs" / "performance.md") == _figures(ROOT / "README.md")


def test_the_readme_fits_on_three_screens():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


def test_the_readmes_crash_example_crashes_the_leading_replica():
    """The README's ``emu.run(main, seed=7, faults=[emu.CrashLeader(at=12.0)])``, with a
    ``main`` that installs KubeRay with two replicas as the README says."""
    import emu

    call = re.search(r"`(emu\.run\(main, [^`]*\))`", (ROOT / "README.md").read_text()).group(1)
    leaders: list[str] = []

    async def main(sim):
        kuberay = await sim.install_kuberay(replicas=2)
        await sim.sleep(11)
        leaders.append(kuberay.leader().name)
        await sim.sleep(40)
        leaders.append(kuberay.leader().name)

    eval(call, {"emu": emu, "main": main})
    assert len(leaders) == 2 and leaders[0] != leaders[1]


def test_the_demo_command_runs_the_failover_and_writes_its_timeline(tmp_path, capsys):
    """What scripts/demo.sh runs after setting up, with its default scenario, as the README
    describes it: the timeline printed, the digest last, the HTML timeline written."""
    import shlex

    from emu import cli

    script = (ROOT / "scripts" / "demo.sh").read_text()
    scenario = re.search(r'scenario="\$\{EMU_DEMO_SCENARIO:-([\w-]+)\}"', script).group(1)
    line = re.search(r"^exec \.venv/bin/emu (.*) \"\$@\"$", script, re.M).group(1)
    args = [a.replace("$scenario", scenario) for a in shlex.split(line)]
    assert scenario == "operator-failover" and "--html" in args
    html = tmp_path / args[args.index("--html") + 1]
    html.parent.mkdir(parents=True)
    args[args.index("--html") + 1] = str(html)
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("digest: ")
    assert "RayJob" in out and html.read_text().lower().startswith("<!doctype html>")
