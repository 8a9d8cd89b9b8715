"""Each scenario's cost: wall time, virtual duration and compression (virtual / wall), and
``emu explore`` throughput on one and two processes. Prints a table; asserts nothing.

Targets (issue 9): every scenario under 0.5 s wall and at least 1,000x faster than real time.

    .venv/bin/python benchmarks/scenarios.py [--seeds 3] [--explore operator-failover]
                                             [--explore-seeds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emu import cli, scenarios


def measure(name: str, seeds: int) -> tuple[float, float, float]:
    """(median wall s, median virtual s, worst wall s) over ``seeds`` seeds (1, 2, ...)."""
    walls, virtuals = [], []
    for seed in range(1, seeds + 1):
        result = scenarios.run_scenario(name, seed)
        if not result.ok:
            print(f"  note: {name} seed {seed} failed an expectation", file=sys.stderr)
        walls.append(result.wall_seconds)
        virtuals.append(result.virtual_seconds)
    return statistics.median(walls), statistics.median(virtuals), max(walls)


def explore_rate(name: str, seeds: int, jobs: int) -> float:
    """Seeds per second of ``emu explore NAME --seeds N --jobs J`` (its own report)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        cli.main(["explore", name, "--seeds", str(seeds), "--jobs", str(jobs)])
    found = re.search(r"\(([\d.]+) seeds/s", out.getvalue())
    return float(found.group(1)) if found else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per scenario (default 3)")
    parser.add_argument("--explore", default="operator-failover",
                        help="the scenario for the explore rows (default operator-failover)")
    parser.add_argument("--explore-seeds", type=int, default=20)
    args = parser.parse_args()

    scenarios.run_scenario("worker-loss", 0)  # warm up imports and caches
    rows = []
    for sc in scenarios.all_scenarios():
        wall, virtual, worst = measure(sc.name, args.seeds)
        rows.append((sc.name, wall, worst, virtual, virtual / wall if wall else 0.0))
    print(f"scenarios ({args.seeds} seeds each; median wall, worst wall, median virtual)")
    print(f"{'scenario':<32}{'wall s':>9}{'worst s':>9}{'virtual s':>11}{'x real':>9}  targets")
    for name, wall, worst, virtual, ratio in rows:
        marks = ("" if wall < 0.5 else "wall>=0.5s ") + ("" if ratio >= 1000 else "ratio<1000x")
        print(f"{name:<32}{wall:>9.3f}{worst:>9.3f}{virtual:>11.1f}{ratio:>9,.0f}  "
              f"{marks or 'met'}")
    total_wall = sum(r[1] for r in rows)
    total_virtual = sum(r[3] for r in rows)
    print(f"{'all (sum of medians)':<32}{total_wall:>9.3f}{'':>9}{total_virtual:>11.1f}"
          f"{total_virtual / total_wall:>9,.0f}")
    print()
    print(f"emu explore {args.explore} --seeds {args.explore_seeds}")
    for jobs in (1, 2):
        start = time.perf_counter()
        rate = explore_rate(args.explore, args.explore_seeds, jobs)
        print(f"  --jobs {jobs}: {rate:6.1f} seeds/s ({time.perf_counter() - start:.1f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
