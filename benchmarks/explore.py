"""The explorer's throughput: runs/s on one core for each built-in workload, before and after
this session's speed-ups measured side by side on the same plans, with ``-j 2``, on a local Ray,
and the wall time to the first finding. Prints a table; asserts nothing.

One core's rate is runs per CPU second of this process and the runs it forked (``os.times``:
user + system, children included), so a machine shared with other work skews the figures less
than wall time would; the ``-j 2`` and Ray rows are wall time (they are about using more cores).

- **before**: the explorer's default as it was: each run forked from a world prepared once per
  batch, simulated to 300 virtual seconds past its last fault (``EARLY_STOP`` off);
- **fresh**: a fresh world per run in this process, whose final settle ends once the world is
  quiet (`emu.explore.runner.Quiet`);
- **forked**: the same, each run forked from the prepared world;
- **worker** (the default now): fresh worlds in one forked worker per batch.

The modes take turns on chunks of the same plans. "same findings" counts the runs whose
violations, performed faults and errors are identical in every mode: an early end must not
change what a run finds. A livelock (virtual time
standing still) is stopped deterministically by `runner.Watchdog` in every mode; before it, a
fresh run hung and a forked one cost the fork-server its 30 s wall-clock limit.

Target (issue 12): at least 50 runs/s per core for a RayJob-sized world.

    .venv/bin/python benchmarks/explore.py [--runs 24] [--quick] [--no-ray] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from _rows import output, row

from emu.explore import plans, runner
from emu.explore.runner import ForkServer, RunResult, RunSpec
from emu.explore.search import Executor, ProcessExecutor, RayExecutor, explore
from emu.explore.workload import builtin

TARGET = ">= 50 runs/s per core (RayJob-sized world)"


def specs_for(name: str, runs: int, seed: int = 1) -> list[RunSpec]:
    wl = builtin(name)
    [ref] = list(ForkServer(wl, seed, fork=False).run([RunSpec()], record=True))
    return plans.candidates(wl, ref.actions, seed, runs)


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


#: (label, ForkServer's fork, early end): before = the explorer's default as it was.
MODES = (("before", True, False), ("fresh", False, True), ("forked", True, True),
         ("worker", None, True))
#: Specs per turn: the modes take turns on the same chunk, so a machine whose load changes
#: during the measurement weighs on every mode alike.
CHUNK = 4


def measure(name: str, specs: list[RunSpec]) -> dict[str, tuple[float, list[RunResult]]]:
    """For each mode of `MODES`: runs per CPU second, and the results in spec order."""
    cost = {label: 0.0 for label, _, _ in MODES}
    results: dict[str, list[RunResult]] = {label: [] for label, _, _ in MODES}
    for i in range(0, len(specs), CHUNK):
        for label, fork, early in MODES:
            runner.EARLY_STOP = early
            try:
                start = cpu()
                results[label] += ForkServer(builtin(name), 1, fork=fork).run(
                    specs[i:i + CHUNK])
                cost[label] += cpu() - start
            finally:
                runner.EARLY_STOP = True
    return {label: (len(specs) / max(cost[label], 1e-9), results[label]) for label in cost}


def outcome(r: RunResult) -> bytes:
    """What a run found, comparable across modes (violations are dicts: compared as JSON)."""
    return orjson.dumps([r.violations, r.performed, r.error], option=orjson.OPT_SORT_KEYS,
                        default=str)


def search_before_after(name: str, runs: int) -> tuple[float, float, int]:
    """Wall seconds of one ``-j 1`` search of ``runs`` plans as the explorer was (forked from a
    prepared world, full settles, a livelock stopped only by the fork-server's wall-clock
    limit) and as it is; and the livelocks in it."""
    walls = []
    for before in (True, False):
        runner.EARLY_STOP = not before
        runner.LIVELOCK_ITERATIONS = 10**12 if before else LIVELOCKS
        try:
            result = explore(builtin(name), budget=runs, seed=1, shrink_budget=0,
                             export=False, executor=Executor(fork=True if before else None))
        finally:
            runner.EARLY_STOP, runner.LIVELOCK_ITERATIONS = True, LIVELOCKS
        walls.append(result.wall)
    return walls[0], walls[1], sum("Livelock" in r.error or "wall-clock" in r.error
                                   for r in result.errors)


LIVELOCKS = runner.LIVELOCK_ITERATIONS


def search_rate(name: str, runs: int, executor: Executor) -> float:
    try:
        result = explore(builtin(name), budget=runs, seed=1, executor=executor,
                         shrink_budget=0, export=False)
    finally:
        executor.close()
    return result.runs / result.wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=24, help="runs per measurement")
    parser.add_argument("--quick", action="store_true", help="6 runs per measurement")
    parser.add_argument("--no-ray", action="store_true", help="skip the local-Ray row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = 6 if args.quick else args.runs
    rows: list[dict] = []
    with output(args.json, rows):
        print(f"emu explore throughput ({runs} runs per figure; runs per CPU second)")
        for name in ("rayjob", "raycluster", "rayservice"):
            specs = specs_for(name, runs)
            m = measure(name, specs)
            (before, full), (fresh, _), (forked, _), (worker, now) = (
                m[label] for label, _, _ in MODES)
            same = sum(len({outcome(m[label][1][i]) for label, _, _ in MODES}) == 1
                       for i in range(len(specs)))
            virtual = (sum(r.virtual for r in full) / len(full),
                       sum(r.virtual for r in now) / len(now))
            livelocks = sum(r.error.startswith("Livelock") for r in now)
            print(f"  {name:<11} before {before:5.2f}   now: fresh {fresh:5.2f}  forked "
                  f"{forked:5.2f}  worker {worker:5.2f} runs/s   (worker {worker / before:.2f}x "
                  f"of before; forked {forked / fresh:.2f}x of fresh)")
            print(f"  {'':<11} virtual s per run {virtual[0]:.0f} -> {virtual[1]:.0f}; same "
                  f"findings in every mode {same}/{len(specs)}; livelocks stopped {livelocks}")
            rows.append(row("explore", f"{name} runs/s, one core (default: worker, early end)",
                            worker, "runs/s", baseline=before,
                            target=TARGET if name == "rayjob" else "",
                            headline=name == "rayjob"))
            rows.append(row("explore", f"{name} runs/s, one core, forked from a prepared world",
                            forked, "runs/s", baseline=fresh))
            rows.append(row("explore", f"{name} runs with the same findings in every mode", same,
                            "runs", baseline=len(specs)))
        before, after, livelocks = search_before_after("raycluster", runs)
        print(f"  raycluster search of {runs} runs (wall, -j 1): before {before:.1f}s, now "
              f"{after:.1f}s ({before / after:.2f}x; {livelocks} livelock(s), each "
              f"{runner.WALL_LIMIT:g}s before)")
        rows.append(row("explore", f"raycluster search of {runs} runs, wall (-j 1)", after, "s",
                        baseline=before))
        one = search_rate("rayjob", runs, Executor())
        two = search_rate("rayjob", runs, ProcessExecutor(2))
        print(f"  rayjob search (wall)  -j 1 {one:6.2f} runs/s   -j 2 {two:6.2f} runs/s "
              f"({two / one:.2f}x)")
        rows.append(row("explore", "rayjob search runs/s (wall), -j 2", two, "runs/s",
                        baseline=one, headline=True))
        if not args.no_ray:
            ray_rate = search_rate("rayjob", runs, RayExecutor(num_cpus=2))
            print(f"  rayjob search  local Ray (2 CPUs) {ray_rate:6.2f} runs/s "
                  f"(wall, including ray.init)")
            rows.append(row("explore", "rayjob search runs/s (wall), local Ray (2 CPUs)",
                            ray_rate, "runs/s", baseline=one))
        start = time.perf_counter()
        result = explore(builtin("rayjob"), budget=runs * 5, seed=1, shrink_budget=0,
                         export=False, duration=None)
        first = result.first_finding_wall
        when = f"after {first:.1f}s wall" if first is not None else "none found"
        print(f"  rayjob first finding: {when} ({result.runs} runs in "
              f"{time.perf_counter() - start:.1f}s, {len(result.findings)} finding(s))")
        if first is not None:
            rows.append(row("explore", "rayjob time to first finding", first, "s", headline=True))


if __name__ == "__main__":
    main()
