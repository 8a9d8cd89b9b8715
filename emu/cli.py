"""The ``emu`` command: list and run scenarios, explore seeds, run benchmarks.

``emu run SCENARIO --seed N`` prints the scenario's timeline (virtual time, process, event), each
expectation with its result, the virtual duration and wall time, and last ``digest: <hex>``; it
exits 1 when an expectation fails. Bad arguments get a message naming what was wrong (exit 2).

(A little over 500 lines: the one parser and every subcommand's handler, kept together so each
handler sits next to the arguments it reads.)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .kernel.trace import TraceEvent, render_timeline

#: Trace events too frequent for the printed timeline (shown with ``--verbose``).
QUIET_EVENTS = frozenset({"write", "process_stopped", "lease_renewed", "fact", "expect",
                          "reconcile_started", "reconcile_finished", "source_started",
                          "informer_created", "runnables_started"})


def _timeline_events(events: list[TraceEvent], verbose: bool) -> list[TraceEvent]:
    if verbose:
        return events
    return [e for e in events if e.event not in QUIET_EVENTS and not e.event.startswith("api_")]


def _cmd_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from . import scenarios

    table = Table(title="scenarios", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("what it shows")
    for sc in scenarios.all_scenarios():
        table.add_row(sc.name, sc.summary)
    Console().print(table)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from . import scenarios

    try:
        scenarios.get(args.scenario)
    except KeyError as err:
        print(f"emu run: {err.args[0]}", file=sys.stderr)
        return 2
    binary = getattr(args, "kuberay_binary", None)
    if args.operator == "real" and not binary:
        print("emu run: --operator real needs --kuberay-binary PATH (a KubeRay operator binary, "
              "see scripts/build-kuberay.sh)", file=sys.stderr)
        return 2
    if binary and args.operator != "real":
        print("emu run: --kuberay-binary needs --operator real", file=sys.stderr)
        return 2
    if binary and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"emu run: --kuberay-binary {binary}: not an executable file", file=sys.stderr)
        return 2
    options: dict[str, Any] = {}
    if binary:
        from .http.real_replicas import real_operator_options

        options = real_operator_options(binary, scenarios.get(args.scenario).options)
    from .http.real_operator import NeedsNewerKubeRay

    try:
        result = scenarios.run_scenario(args.scenario, args.seed, **options)
    except NeedsNewerKubeRay as err:
        print(f"emu run: {args.scenario}: n/a: {err}", file=sys.stderr)
        return 2
    events = result.sim.trace.events
    if args.trace:
        result.sim.trace.to_chrome(args.trace)
    if args.html:
        from .timeline import write_html

        write_html(result, Path(args.html))
    if args.json:
        out = {
            "scenario": result.scenario, "seed": result.seed, "ok": result.ok,
            "expectations": [{"claim": e.claim, "ok": e.ok, "detail": e.detail, "t": e.t}
                             for e in result.expectations],
            "facts": result.facts, "virtual_seconds": result.virtual_seconds,
            "wall_seconds": result.wall_seconds, "digest": result.digest,
        }
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
        return 0 if result.ok else 1
    print(f"scenario {result.scenario}  seed {result.seed}")
    print(render_timeline(_timeline_events(events, args.verbose)))
    print()
    for exp in result.expectations:
        mark = "PASS" if exp.ok else "FAIL"
        detail = f"  ({exp.detail})" if exp.detail else ""
        print(f"  [{mark}] {exp.claim}{detail}")
    if not result.expectations:
        print("  [FAIL] the scenario checked no expectation")
    for name, value in result.facts.items():
        print(f"  fact {name} = {value}")
    ratio = result.virtual_seconds / result.wall_seconds if result.wall_seconds > 0 else 0.0
    print(f"virtual {result.virtual_seconds:.3f}s in {result.wall_seconds:.3f}s wall "
          f"({ratio:,.0f}x real time)")
    if args.html:
        print(f"html: {args.html}")
    if args.trace:
        print(f"trace: {args.trace}")
    if not result.ok:
        print(f"replay: emu run {result.scenario} --seed {result.seed}")
    print(f"digest: {result.digest}")
    return 0 if result.ok else 1


def _cmd_differential(args: argparse.Namespace) -> int:
    from . import scenarios
    from .differential import differential
    from .http.real_operator import binary_version

    binary = args.kuberay_binary
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"emu differential: --kuberay-binary {binary}: not an executable file",
              file=sys.stderr)
        return 2
    try:
        names = args.scenarios or [sc.name for sc in scenarios.all_scenarios()]
        for name in names:
            scenarios.get(name)
    except KeyError as err:
        print(f"emu differential: {err.args[0]}", file=sys.stderr)
        return 2
    version = binary_version(binary) or "(unknown version)"
    rows = differential(names, binary, seed=args.seed, limit=args.limit)
    print(f"| scenario | port | real ({version}) | which expectation differs |")
    print("|---|---|---|---|")
    for row in rows:
        cells = [row["scenario"], row["port"], row["real"], row["differs"] or "-"]
        print("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return 0


def _explore_one(job: tuple[str, int]) -> dict[str, object]:
    """Run one seed in a worker process; a plain dict crosses the process boundary."""
    from . import scenarios

    name, seed = job
    try:
        result = scenarios.run_scenario(name, seed)
    except Exception as exc:  # a crash is a failure of that seed, with its message
        return {"seed": seed, "ok": False, "digest": "", "wall": 0.0,
                "failed": [f"raised {type(exc).__name__}: {exc}"]}
    return {"seed": seed, "ok": result.ok, "digest": result.digest, "wall": result.wall_seconds,
            "failed": [e.claim for e in result.expectations if not e.ok]
            or ([] if result.expectations else ["the scenario checked no expectation"])}


def _cmd_explore(args: argparse.Namespace) -> int:
    """``emu explore WORKLOAD``: the explorer (emu.explore); with ``--seeds``, the old seed
    sweep of a scenario."""
    from .explore.cli import mode_error

    error = mode_error(args)
    if error is not None:
        print(f"emu explore: {error}", file=sys.stderr)
        return 2
    if args.seeds is not None:
        return _cmd_explore_seeds(args)
    from .explore.cli import run_explore

    return run_explore(args)


def _cmd_explore_seeds(args: argparse.Namespace) -> int:
    import multiprocessing
    import time
    from concurrent.futures import ProcessPoolExecutor

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from . import scenarios

    try:
        scenarios.get(args.workload)
    except KeyError as err:
        print(f"emu explore: {err.args[0]}", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print(f"emu explore: --seeds must be at least 1, not {args.seeds}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"emu explore: --jobs must be at least 1, not {args.jobs}", file=sys.stderr)
        return 2
    seeds = range(args.start, args.start + args.seeds)
    jobs = [(args.workload, seed) for seed in seeds]
    console = Console(stderr=True)
    results: list[dict[str, object]] = []
    start = time.perf_counter()
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(f"exploring {args.workload}", total=len(jobs))
        if args.jobs == 1:
            for job in jobs:
                results.append(_explore_one(job))
                progress.advance(task)
        else:
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
                for item in pool.map(_explore_one, jobs):
                    results.append(item)
                    progress.advance(task)
    wall = time.perf_counter() - start
    failed = [r for r in results if not r["ok"]]
    for r in failed:
        claims = "; ".join(str(c) for c in r["failed"])  # type: ignore[attr-defined]
        print(f"seed {r['seed']} FAILED: {claims}")
        print(f"  replay: emu run {args.workload} --seed {r['seed']}")
    print(f"{len(results) - len(failed)}/{len(results)} seeds passed in {wall:.2f}s wall "
          f"({len(results) / wall:.1f} seeds/s with {args.jobs} process(es))")
    return 1 if failed else 0


#: What ``emu bench`` runs: (script in benchmarks/, extra arguments), in this order.
BENCHMARKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("apiserver", ()), ("controller", ()), ("leader_election", ()), ("gcs_storage", ()),
    ("gcs", ()), ("kube", ()), ("reconcile", ()), ("reconcile", ("--kube",)), ("rayjob", ()),
    ("rayservice", ()), ("scenarios", ()), ("http", ()), ("explore", ("--no-ray",)),
)


def _fmt(value: object, ratio: bool = False) -> str:
    if not isinstance(value, (int, float)):
        return ""
    if ratio:
        return f"{value:.2f}x"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def _last_error(stderr: str) -> str:
    """The exception line of a traceback (``pkg.SomeError: message``, not the notes after it),
    or the last line; at most 200 characters."""
    import re

    lines = stderr.strip().splitlines() or [""]
    found = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exceeded"
                                                r"|Interrupt|Exit)\b", line)]
    return (found or lines)[-1][:200]


_CLAUSE = re.compile(r"^\s*(<=|>=|<|>|=)?\s*([-\d.]+)\s*([kM]?)\s*(x?)")


def target_met(r: dict[str, object]) -> bool | None:
    """Whether a benchmark row meets its ``target`` text (``">= 50k/s, >= 0.5x raw"``,
    ``"<= 10 ms"``, ``"0"``): every comma-separated clause must hold. A clause whose number ends
    in ``x`` compares the row's same-run ratio, unless the row's own unit is a ratio (``x``);
    others compare the value (``k``/``M`` scale it; the unit is the row's). None when the row
    has no target, no value, or a clause this cannot read."""
    text = str(r.get("target") or "").strip()
    value = r.get("value")
    if not text or not isinstance(value, (int, float)):
        return None
    unit = str(r.get("unit") or "")
    for clause in text.split(","):
        found = _CLAUSE.match(clause)
        if not found:
            return None
        op, number, scale, times = found.groups()
        try:
            limit = float(number) * {"": 1.0, "k": 1e3, "M": 1e6}[scale]
        except ValueError:
            return None
        seen = value
        if times and not unit.startswith("x"):
            ratio = r.get("ratio")
            if not isinstance(ratio, (int, float)):
                return None
            seen = ratio
        ok = {"<=": seen <= limit, ">=": seen >= limit, "<": seen < limit, ">": seen > limit,
              "=": seen == limit, None: seen == limit}[op]
        if not ok:
            return False
    return True


def _cmd_bench(args: argparse.Namespace) -> int:
    """Run each benchmark script in its own process (``--quick`` unless ``--full``, always
    ``--json``), so one that crashes or runs long costs only its own rows; then print one
    table. Benchmarks print figures and ratios; nothing asserts."""
    import os
    import signal
    import subprocess
    import time

    from rich.console import Console

    root = Path(__file__).resolve().parent.parent
    folder = root / "benchmarks"
    if not folder.is_dir():
        print(f"emu bench: no benchmarks folder at {folder} (run from a source checkout)",
              file=sys.stderr)
        return 2
    chosen = [(name, extra) for name, extra in BENCHMARKS
              if not args.only or any(o in name for o in args.only)]
    if not chosen:
        names = ", ".join(dict.fromkeys(name for name, _ in BENCHMARKS))
        print(f"emu bench: --only matched no benchmark (there are: {names})", file=sys.stderr)
        return 2
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(root), env.get("PYTHONPATH"))))
    err = Console(stderr=True)
    rows: list[dict[str, object]] = []
    failed = 0
    for name, extra in chosen:
        label = " ".join((name, *extra))
        cmd = [sys.executable, str(folder / f"{name}.py"), *extra, "--json"]
        if not args.full:
            cmd.append("--quick")
        start = time.perf_counter()
        err.print(f"[dim]running {label} ({'full' if args.full else 'quick'})...[/dim]")
        # its own session, so a timeout also stops what it started (reconcile runs each N apart)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, cwd=root, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=args.timeout)
            found = orjson.loads(stdout.strip().splitlines()[-1]) if (
                proc.returncode == 0 and stdout.strip()) else None
            why = "" if isinstance(found, list) else (
                f"exit {proc.returncode}: {_last_error(stderr)}")
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            found, why = None, f"timed out after {args.timeout:g} s"
        except orjson.JSONDecodeError as exc:
            found, why = None, f"unreadable output: {exc}"
        wall = time.perf_counter() - start
        if isinstance(found, list):
            rows.extend(found)
            err.print(f"[dim]  {label}: {len(found)} figures in {wall:.1f} s[/dim]")
        else:
            failed += 1
            rows.append({"benchmark": label, "measure": f"FAILED ({why})"})
            err.print(f"[red]  {label}: {why}[/red]")
    if args.markdown:
        return _bench_markdown(rows, failed, full=args.full, strict=args.strict, load=load)
    return _bench_report(rows, failed, full=args.full, strict=args.strict)


#: The columns of ``emu bench --markdown``'s table, in order.
MARKDOWN_COLUMNS = ("benchmark", "measure", "figure", "same-run baseline", "ratio", "target",
                    "met")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _with_unit(value: object, unit: str) -> str:
    shown = _fmt(value)
    return f"{shown} {unit}".strip() if shown else ""


def headline_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The rows ``--markdown`` shows: each benchmark's ``headline`` rows (its key figures, marked
    by its script), or all of its rows when it marks none; in their order."""
    marked = {str(r.get("benchmark")) for r in rows if r.get("headline")}
    return [r for r in rows if r.get("headline") or str(r.get("benchmark")) not in marked]


def _targets(rows: list[dict[str, object]]) -> tuple[int, int]:
    """(targets met, targets) among ``rows``."""
    verdicts = [target_met(r) for r in rows]
    return sum(v is True for v in verdicts), sum(v is not None for v in verdicts)


def _bench_markdown(rows: list[dict[str, object]], failed: int, *, full: bool, strict: bool,
                    load: float | None) -> int:
    """Print the key figures of ``rows`` (`headline_rows`) as one GitHub Markdown table, what
    the README shows, after a line naming the command and the machine it ran on, and before the
    count of targets met, there and among all the figures; the exit status as for the terminal
    table."""
    import os
    import platform

    command = "emu bench --full --markdown" if full else "emu bench --markdown"
    machine = (f"Python {platform.python_version()}, {os.cpu_count()} CPUs"
               + (f", load average {load:.1f} at the start" if load is not None else ""))
    lines = [f"Measured by `{command}` ({machine}); each ratio is against a baseline "
             "measured in the same run.", "",
             "| " + " | ".join(MARKDOWN_COLUMNS) + " |",
             "|" + "|".join("---:" if c in ("figure", "same-run baseline", "ratio") else "---"
                            for c in MARKDOWN_COLUMNS) + "|"]
    shown = headline_rows(rows)
    for r in shown:
        unit = str(r.get("unit") or "")
        cells = (str(r.get("benchmark", "")), str(r.get("measure", "")),
                 _with_unit(r.get("value"), unit), _with_unit(r.get("baseline"), unit),
                 _fmt(r.get("ratio"), ratio=True), str(r.get("target") or ""),
                 {True: "met", False: "**missed**", None: ""}[target_met(r)])
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    met, targets = _targets(shown)
    summary = f"{met} of {targets} targets met"
    if len(shown) < len(rows):
        all_met, all_targets = _targets(rows)
        plain = "emu bench --full" if full else "emu bench"
        summary += (f" in these {len(shown)} key figures; {all_met} of {all_targets} in all "
                    f"{len(rows)} figures (`{plain}` prints each one)")
    lines += ["", summary + (f"; {failed} benchmark(s) failed" if failed else "") + "."]
    print("\n".join(lines))
    missed = _targets(rows)
    return 1 if failed or (strict and missed[0] < missed[1]) else 0


def _bench_report(rows: list[dict[str, object]], failed: int, *, full: bool, strict: bool) -> int:
    """Print the table of ``rows``, each target marked met or MISSED; the exit status (1 when a
    benchmark failed, or with ``strict`` when a target was missed)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"emu bench ({'full' if full else 'quick'})")
    for column in ("benchmark", "measure", "value", "unit", "same-run baseline", "ratio",
                   "target", "met"):
        table.add_column(column, justify="right" if column in (
            "value", "same-run baseline", "ratio") else "left", no_wrap=column == "benchmark")
    missed = 0
    for r in rows:
        met = target_met(r)
        missed += met is False
        mark = {True: "[green]met[/green]", False: "[red]MISSED[/red]", None: ""}[met]
        table.add_row(str(r.get("benchmark", "")), str(r.get("measure", "")),
                      _fmt(r.get("value")), str(r.get("unit") or ""), _fmt(r.get("baseline")),
                      _fmt(r.get("ratio"), ratio=True), str(r.get("target") or ""), mark)
    out = Console()
    if not out.is_terminal:
        out = Console(width=160)  # a file or pipe: one line per figure
    out.print(table)
    if missed:
        out.print(f"{missed} target(s) missed" + ("" if strict else
                                                  " (exit status 0; --strict makes it 1)"))
    return 1 if failed or (strict and missed) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="emu", description="kuberay-emu: run KubeRay recovery scenarios on a virtual clock")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p_list = sub.add_parser("list", help="list the scenarios")
    p_list.set_defaults(fn=_cmd_list)

    p_run = sub.add_parser("run", help="run one scenario and print its timeline")
    p_run.add_argument("scenario", help="a scenario name (see `emu list`)")
    p_run.add_argument("--seed", type=int, default=0, help="the seed (default 0)")
    p_run.add_argument("--html", metavar="FILE", help="write a self-contained HTML timeline")
    p_run.add_argument("--trace", metavar="FILE", help="write Chrome trace events (Perfetto)")
    p_run.add_argument("--json", action="store_true", help="print machine-readable results")
    p_run.add_argument("--verbose", "-v", action="store_true", help="print every trace event")
    p_run.add_argument("--operator", choices=("port", "real"), default="port",
                       help="the KubeRay operator: the Python port (default, virtual time) or "
                            "a real binary (--kuberay-binary; wall-clock pace)")
    p_run.add_argument("--kuberay-binary", metavar="PATH",
                       help="the real operator binary for --operator real "
                            "(scripts/build-kuberay.sh builds one)")
    p_run.set_defaults(fn=_cmd_run)

    p_diff = sub.add_parser(
        "differential", help="run scenarios with the port and with a real KubeRay binary and "
                             "print a table of where their expectations differ")
    p_diff.add_argument("scenarios", nargs="*", help="scenario names (default: every one)")
    p_diff.add_argument("--kuberay-binary", metavar="PATH", required=True,
                        help="the real operator binary (scripts/build-kuberay.sh builds one)")
    p_diff.add_argument("--seed", type=int, default=0, help="the seed (default 0)")
    p_diff.add_argument("--limit", type=float, default=900.0, metavar="SECONDS",
                        help="stop a real operator's run after this many seconds (default 900)")
    p_diff.set_defaults(fn=_cmd_differential)

    p_explore = sub.add_parser(
        "explore", help="search a workload for recovery bugs: generated fault plans, "
        "KubeRay's invariants, findings shrunk to pytest files")
    from .explore.cli import add_arguments

    add_arguments(p_explore)
    p_explore.set_defaults(fn=_cmd_explore)

    p_bench = sub.add_parser("bench", help="run the benchmarks and print one table of figures")
    p_bench.add_argument("--full", action="store_true",
                         help="the issue-sized runs (default: each benchmark's --quick)")
    p_bench.add_argument("--only", action="append", metavar="NAME",
                         help="run only benchmarks whose name contains NAME (repeatable)")
    p_bench.add_argument("--timeout", type=float, default=3600.0,
                         help="seconds one benchmark may run before it is stopped "
                              "(default 3600)")
    p_bench.add_argument("--strict", action="store_true",
                         help="exit 1 when a figure misses its target (default: only mark it)")
    p_bench.add_argument("--markdown", action="store_true",
                         help="print the figures as one Markdown table (the README's), progress "
                              "on stderr")
    p_bench.set_defaults(fn=_cmd_bench)

    from .http.command import add_serve_parser

    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
