"""Leader-election soak: 24 simulated hours, 3 candidates, a seeded crash/restart schedule.

Prints the wall time against the 30 s target, what happened (acquisitions, crashes, time without
a leader, the longest gap) and what the checkers found: "at most one valid holder at any instant
as the API server sees it" (`LeaseHolderChecker`) and the overlapping-belief windows
(`TwoLeaderChecker`). Asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/leader_election.py [--hours 24] [--seed 7] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from _rows import output, row

import emu
from emu.invariants import LeadershipTenures, LeaseHolderChecker, TwoLeaderChecker
from emu.kernel.rng import SimRandom
from emu.runtime.operator_process import LEADER_ELECTION_ID, OperatorConfig, start_operator

TARGET_WALL = 30.0
NAMES = ["operator-0", "operator-1", "operator-2"]


def schedule(seed: int, hours: float) -> list[tuple[float, str, float]]:
    """(crash time, replica, restart delay): one crash every ~20 min on average."""
    rng = SimRandom(seed).fork("bench-schedule")
    out = []
    t = 0.0
    end = hours * 3600
    while True:
        t += rng.expovariate(1 / 1200)
        if t >= end:
            return out
        out.append((t, rng.choice(NAMES), rng.uniform(0.0, 60.0)))


async def soak(sim: emu.Simulation, hours: float, plan: list[tuple[float, str, float]]
               ) -> dict[str, Any]:
    holder = LeaseHolderChecker(sim, "default", LEADER_ELECTION_ID).start()
    two = TwoLeaderChecker(sim.trace)
    tenures = LeadershipTenures(sim.trace)
    cfg = OperatorConfig()
    for name in NAMES:
        start_operator(sim, name, cfg)
    crashed: dict[str, float] = {}
    for at, name, delay in plan:
        await sim.sleep(at - sim.now)
        proc = sim.processes.get(name)
        if proc.alive:
            sim.faults.crash(name)
            sim.call_later(delay, lambda n=name: start_operator(sim, n, cfg))
            crashed[name] = at
    await sim.sleep(hours * 3600 - sim.now)
    end = sim.now
    spans = sorted((t.start, t.end if t.end is not None else end) for t in tenures.all())
    gaps = []
    cursor = 0.0
    for start, stop in spans:
        if start > cursor:
            gaps.append(start - cursor)
        cursor = max(cursor, stop)
    if cursor < end:
        gaps.append(end - cursor)
    return {
        "lease_writes": holder.writes, "holder_changes": holder.holder_changes,
        "holder_violations": len(holder.violations), "two_leader_windows": len(two.windows),
        "two_leader_violations": len(two.violations), "tenures": len(tenures.all()),
        "crashes": len(sim.trace.select(event="process_crashed")),
        "leaderless_s": sum(gaps),
        "longest_gap_s": max(gaps) if gaps else 0.0, "events": len(sim.trace),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="2 simulated hours")
    ap.add_argument("--json", action="store_true",
                    help="print the figures as a JSON list of rows (tables go to stderr)")
    args = ap.parse_args()
    if args.quick:
        args.hours = 2.0
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        plan = schedule(args.seed, args.hours)
        wall0 = time.perf_counter()
        # past the soak: emu.run stops at a day of virtual time unless told otherwise
        out = emu.run(lambda sim: soak(sim, args.hours, plan), seed=args.seed,
                      max_virtual_time=args.hours * 3600 + 3600)
        wall = time.perf_counter() - wall0
        virtual = args.hours * 3600
        budget = TARGET_WALL * args.hours / 24.0
        rows.append(row("leader_election", f"{args.hours:g} simulated hours, 3 candidates",
                        wall, "s", target=f"<= {budget:g} s", headline=True))
        rows.append(row("leader_election", "instants with two valid holders",
                        float(out["holder_violations"]), "", target="0", headline=True))
        print(f"leader election soak: {args.hours:g} simulated hours, {len(NAMES)} candidates, "
              f"seed {args.seed}, {len(plan)} scheduled crashes")
        print(f"  wall time            {wall:8.2f} s   (target <= {TARGET_WALL:g} s: "
              f"{wall / TARGET_WALL:.2f} of budget; {virtual / wall:,.0f}x real time)")
        for key, value in out.items():
            shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
            print(f"  {key:<20} {shown:>8}")
        print(f"  one valid holder at every instant: "
              f"{'held' if out['holder_violations'] == 0 else 'VIOLATED'}")

if __name__ == "__main__":
    main()
