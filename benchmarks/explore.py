"""The explorer's throughput: runs/s on one core for each built-in workload (forked from a
prepared world, against fresh worlds measured in the same run), with ``-j 2``, on a local Ray,
and the wall time to the first finding. Prints a table; asserts nothing.

Target (issue 12): at least 50 runs/s per core for a RayJob-sized world.

    .venv/bin/python benchmarks/explore.py [--runs 40] [--quick] [--no-ray] [--json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _rows import output, row

from emu.explore import plans
from emu.explore.runner import ForkServer, RunSpec
from emu.explore.search import Executor, ProcessExecutor, RayExecutor, explore
from emu.explore.workload import builtin

TARGET = ">= 50 runs/s per core (RayJob-sized world)"


def specs_for(name: str, runs: int, seed: int = 1) -> list[RunSpec]:
    wl = builtin(name)
    [ref] = list(ForkServer(wl, seed, fork=False).run([RunSpec()], record=True))
    return plans.candidates(wl, ref.actions, seed, runs)


def rate(name: str, specs: list[RunSpec], *, fork: bool) -> float:
    start = time.perf_counter()
    list(ForkServer(builtin(name), 1, fork=fork).run(specs))
    return len(specs) / (time.perf_counter() - start)


def search_rate(name: str, runs: int, executor: Executor) -> float:
    try:
        result = explore(builtin(name), budget=runs, seed=1, executor=executor,
                         shrink_budget=0, export=False)
    finally:
        executor.close()
    return result.runs / result.wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40, help="runs per measurement")
    parser.add_argument("--quick", action="store_true", help="8 runs per measurement")
    parser.add_argument("--no-ray", action="store_true", help="skip the local-Ray row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = 8 if args.quick else args.runs
    rows: list[dict] = []
    with output(args.json, rows):
        print(f"emu explore throughput ({runs} runs per figure)")
        for name in ("rayjob", "raycluster", "rayservice"):
            specs = specs_for(name, runs)
            fresh = rate(name, specs, fork=False)
            forked = rate(name, specs, fork=True)
            print(f"  {name:<11} forked {forked:6.2f} runs/s   fresh worlds {fresh:6.2f} runs/s"
                  f"   ({forked / fresh:.2f}x)")
            rows.append(row("explore", f"{name} runs/s, one core (fork-server)", forked,
                            "runs/s", baseline=fresh,
                            target=TARGET if name == "rayjob" else ""))
        one = search_rate("rayjob", runs, Executor())
        two = search_rate("rayjob", runs, ProcessExecutor(2))
        print(f"  rayjob search  -j 1 {one:6.2f} runs/s   -j 2 {two:6.2f} runs/s "
              f"({two / one:.2f}x)")
        rows.append(row("explore", "rayjob search runs/s, -j 2", two, "runs/s", baseline=one))
        if not args.no_ray:
            ray_rate = search_rate("rayjob", runs, RayExecutor(num_cpus=2))
            print(f"  rayjob search  local Ray (2 CPUs) {ray_rate:6.2f} runs/s "
                  f"(including ray.init)")
            rows.append(row("explore", "rayjob search runs/s, local Ray (2 CPUs)", ray_rate,
                            "runs/s", baseline=one))
        start = time.perf_counter()
        result = explore(builtin("rayjob"), budget=runs * 5, seed=1, shrink_budget=0,
                         export=False, duration=None)
        first = result.first_finding_wall
        print(f"  rayjob first finding after {first if first is not None else float('nan'):.1f}s"
              f" wall ({result.runs} runs in {time.perf_counter() - start:.1f}s, "
              f"{len(result.findings)} finding(s))")
        if first is not None:
            rows.append(row("explore", "rayjob time to first finding", first, "s"))


if __name__ == "__main__":
    main()
