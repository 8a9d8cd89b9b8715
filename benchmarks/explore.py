"""The explorer's throughput and the time it takes to find a bug.

1. Runs per CPU second of each built-in workload (this process and the runs it forked, ``os.times``:
   user + system, children included, so a machine shared with other work skews the figures less
   than wall time would), the same candidate plans played two ways taking turns in chunks:
   - **before**: every run in a fresh world in a forked worker (the default until plans armed
     late, `RunSpec.arm_at`);
   - **now**: the worker plays one shared run of each knob setting and forks each run whose
     plan arms late at its instant (`runner._Branches`); the rest as before.
   "same runs" counts the runs whose digest, violations, performed faults and errors are
   identical both ways (they must all be: a fork of the shared run is the run from scratch).
2. Search rates (wall) with ``-j 1``, ``-j 2`` and on a local Ray.
3. CPU seconds to the first finding of each reintroduced KubeRay bug (benchmarks/explore_bugs.py:
   the bug put back by monkeypatching; a finding is a run breaking the bug's invariant whose
   same run on the unmodified port does not — that check's CPU is not counted): uniform before,
   uniform now, guided now, each up to ``--bug-budget`` runs.

Targets (issue 24): at least 50 runs per CPU second on one core; each bug found within 60 CPU s.

    .venv/bin/python benchmarks/explore.py [--runs 24] [--quick] [--no-ray] [--no-bugs]
                                           [--bug-budget 120] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from _rows import output, row

from emu.explore import plans, runner
from emu.explore.runner import ForkServer, RunResult, RunSpec, run_one
from emu.explore.search import Executor, ProcessExecutor, RayExecutor, explore
from emu.explore.workload import builtin

TARGET = ">= 50 runs/s per core (RayJob-sized world)"
BUG_TARGET = "<= 60 CPU s to the first finding"


#: The search whose plan mix the throughput figures sample: its first this many candidates.
MIX = 200


def specs_for(name: str, runs: int, seed: int = 1) -> tuple[list[RunSpec], list[RunSpec]]:
    """``runs`` plans spread evenly over a `MIX`-run search's candidates (its mix: half of them
    random combinations on random knobs), and ``runs`` of its plans that arm late."""
    wl = builtin(name)
    [ref] = list(ForkServer(wl, seed, fork=False).run([RunSpec()], record=True))
    every = plans.candidates(wl, ref.actions, seed, MIX)
    armed = [s for s in every if s.arm_at is not None]
    return ([every[i * len(every) // runs] for i in range(runs)],
            [armed[i * len(armed) // runs] for i in range(min(runs, len(armed)))])


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


#: (label, share prefixes): before = fresh worlds in a worker, now = forks of a shared run.
MODES = (("before", False), ("now", True))
#: Specs per turn: the modes take turns on the same chunk, so a machine whose load changes
#: during the measurement weighs on every mode alike (and a chunk is one worker batch).
CHUNK = 8


def measure(name: str, specs: list[RunSpec]) -> dict[str, tuple[float, list[RunResult]]]:
    """For each mode of `MODES`: runs per CPU second, and the results in spec order."""
    cost = {label: 0.0 for label, _ in MODES}
    results: dict[str, list[RunResult]] = {label: [] for label, _ in MODES}
    for i in range(0, len(specs), CHUNK):
        for label, share in MODES:
            runner.SHARE_PREFIXES = share
            try:
                start = cpu()
                results[label] += ForkServer(builtin(name), 1).run(specs[i:i + CHUNK])
                cost[label] += cpu() - start
            finally:
                runner.SHARE_PREFIXES = True
    return {label: (len(specs) / max(cost[label], 1e-9), results[label]) for label in cost}


def outcome(r: RunResult) -> bytes:
    """What a run was, comparable across modes (violations are dicts: compared as JSON)."""
    return orjson.dumps([r.digest, r.violations, r.performed, r.error],
                        option=orjson.OPT_SORT_KEYS, default=str)


def search_rate(name: str, runs: int, executor: Executor) -> float:
    try:
        result = explore(builtin(name), budget=runs, seed=1, executor=executor,
                         shrink_budget=0, export=False)
    finally:
        executor.close()
    return result.runs / result.wall


class _Found(Exception):
    pass


def first_finding(bug: Any, search: str, share: bool, budget: int, *, narrow: bool = True
                  ) -> tuple[float | None, int | None, float]:
    """CPU seconds and runs to the first finding of ``bug`` (None, None when none within
    ``budget`` runs), and the CPU seconds the search took in all; ``narrow``: the plan families
    of the bug's test, else every family."""
    import pytest
    from explore_bugs import broad

    wl = bug.workload() if narrow else broad(bug.workload())
    invariant = bug.invariant.name
    mp = pytest.MonkeyPatch()
    state: dict[str, Any] = {"runs": 0, "checking": 0.0, "at": None, "run": None}
    begin = cpu()

    class Watching(Executor):
        def map(self, workload: Any, seed: int, batches: Any) -> Any:
            last = cpu()
            for bi, results in super().map(workload, seed, batches):
                now = cpu()
                for k, r in enumerate(results):
                    state["runs"] += 1
                    if not any(v["invariant"] == invariant for v in r.violations):
                        continue
                    paused = cpu()
                    mp.undo()  # the same run on the unmodified port
                    port = run_one(wl, r.spec, seed=1, invariants=[bug.invariant])
                    bug.put_back(mp)
                    state["checking"] += cpu() - paused
                    if not any(v["invariant"] == invariant for v in port.violations):
                        at = last + (now - last) * (k + 1) / len(results)
                        state["at"] = at - begin - state["checking"]
                        state["run"] = state["runs"]
                        raise _Found
                last = cpu()
                yield bi, results

    runner.SHARE_PREFIXES = share
    bug.put_back(mp)
    try:
        explore(wl, budget=budget, seed=1, shrink_budget=0, export=False, search=search,
                invariants=[bug.invariant], executor=Watching())
    except _Found:
        pass
    finally:
        mp.undo()
        runner.SHARE_PREFIXES = True
    return state["at"], state["run"], cpu() - begin - state["checking"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=24, help="runs per measurement")
    parser.add_argument("--quick", action="store_true", help="8 runs per measurement")
    parser.add_argument("--no-ray", action="store_true", help="skip the local-Ray row")
    parser.add_argument("--no-bugs", action="store_true", help="skip the bugs' section")
    parser.add_argument("--no-search", action="store_true", help="skip the search rates")
    parser.add_argument("--only-bugs", action="store_true", help="only the bugs' section")
    parser.add_argument("--narrow-only", action="store_true",
                        help="the bugs' searches with their tests' plan families only")
    parser.add_argument("--broad-only", action="store_true",
                        help="the bugs' searches with every plan family only")
    parser.add_argument("--bugs", metavar="A,B", default=None,
                        help="only these bugs (e.g. 715,2217)")
    parser.add_argument("--bug-budget", type=int, default=120,
                        help="runs each search for a bug may take")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = 8 if args.quick else args.runs
    rows: list[dict] = []
    with output(args.json, rows):
        if not args.only_bugs:
            throughput(runs, rows, ray=not args.no_ray, search=not args.no_search)
        if not args.no_bugs:
            only = {f"#{b.strip().lstrip('#')}" for b in args.bugs.split(",")} \
                if args.bugs else None
            if not args.broad_only:
                bugs(args.bug_budget, rows, narrow=True, only=only)
            if not args.narrow_only:
                bugs(args.bug_budget, rows, narrow=False, only=only)


def throughput(runs: int, rows: list[dict], *, ray: bool, search: bool = True) -> None:
    print(f"emu explore throughput ({runs} candidate plans per workload; runs per CPU second)")
    for name in ("rayjob", "raycluster", "rayservice"):
        mix, late = specs_for(name, runs)
        for what, specs in ((f"mix of {MIX}", mix), ("armed late", late)):
            m = measure(name, specs)
            (before, old), (now, new) = (m[label] for label, _ in MODES)
            same = sum(outcome(a) == outcome(b) for a, b in zip(old, new, strict=True))
            armed = sum(s.arm_at is not None for s in specs)
            mean_arm = sum(s.arm_at or 0.0 for s in specs) / max(1, armed)
            virtual = sum(r.virtual for r in new) / len(new)
            print(f"  {name:<11} {what:<11} before {before:5.2f}   now {now:5.2f} runs/s "
                  f"({now / before:.2f}x); {armed}/{len(specs)} arm late (mean {mean_arm:.1f} "
                  f"of {virtual:.0f} virtual s); same runs {same}/{len(specs)}", flush=True)
            rows.append(row("explore", f"{name} runs/s, one core, {what} (forks of a shared "
                            "run)", now, "runs/s", baseline=before, target=TARGET,
                            headline=name == "rayjob" and what.startswith("mix")))
            rows.append(row("explore", f"{name} runs identical from a fork and from scratch, "
                            f"{what}", same, "runs", baseline=len(specs)))
    if not search:
        return
    one = search_rate("rayjob", runs, Executor())
    two = search_rate("rayjob", runs, ProcessExecutor(2))
    print(f"  rayjob search (wall)  -j 1 {one:6.2f} runs/s   -j 2 {two:6.2f} runs/s "
          f"({two / one:.2f}x)")
    rows.append(row("explore", "rayjob search runs/s (wall), -j 2", two, "runs/s",
                    baseline=one, headline=True))
    if ray:
        ray_rate = search_rate("rayjob", runs, RayExecutor(num_cpus=2))
        print(f"  rayjob search  local Ray (2 CPUs) {ray_rate:6.2f} runs/s "
              f"(wall, including ray.init)")
        rows.append(row("explore", "rayjob search runs/s (wall), local Ray (2 CPUs)",
                        ray_rate, "runs/s", baseline=one))


def bugs(budget: int, rows: list[dict], *, narrow: bool, only: set[str] | None = None) -> None:
    from explore_bugs import BUGS

    scope = "the families of each bug's test" if narrow else "every plan family"
    print(f"CPU seconds (runs) to the first finding of each reintroduced bug, seed 1, {scope}, "
          f"at most {budget} runs")
    modes = [("uniform, before", "uniform", False), ("uniform, now", "uniform", True),
             ("guided, now", "guided", True)]
    if not narrow:  # the same order as uniform now, only slower: left out of the long searches
        modes = modes[1:]
    print(f"  {'bug':<7} " + " ".join(f"{label:>18}" for label, _, _ in modes))
    for bug in BUGS:
        if only is not None and bug.name not in only:
            continue
        cells = []
        for label, search, share in modes:
            at, run, total = first_finding(bug, search, share, budget, narrow=narrow)
            cells.append(f"{at:7.1f} s ({run:3d})" if at is not None and run is not None
                         else f"none ({total:.0f} s)")
            if at is not None:
                rows.append(row("explore", f"{bug.name} CPU s to the first finding ({label}, "
                                f"{'narrow' if narrow else 'all families'})", at, "s",
                                target=BUG_TARGET))
            print(f"  {bug.name:<7} {label}: {cells[-1]}", file=sys.stderr, flush=True)
        print(f"  {bug.name:<7} " + " ".join(f"{c:>18}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
