"""RayJob throughput: N RayJobs, each with its own RayCluster, from creation to Complete.

The whole world runs: the API server, kubelets, scheduler, Job controller, Services, the fake Ray
in every head Pod and in every submitter Pod, and KubeRay (one replica, leader election on) with
the RayCluster and RayJob controllers. All RayJobs are applied at once; the run ends when the
last one is Complete. Prints wall and CPU time, virtual time, reconciles (per controller) and
reconciles per wall second; asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/rayjob.py [--jobs 500] [--workers 0]
        [--job-seconds 30] [--concurrency 1] [--seed 1] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import time
from pathlib import Path
from typing import Any

from _rows import output, row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "kuberay"))

from test_rayjob_support import e2e_rayjob, world

import emu


def run(jobs: int, workers: int, job_seconds: int, concurrency: int, seed: int
        ) -> dict[str, Any]:
    figures: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        # Head 1 CPU, submitter 0.5, each worker 1: room for all with a fifth to spare.
        cpus = jobs * (1.5 + workers) * 1.2
        pods = jobs * (2 + workers) * 1.2
        nodes = max(3, math.ceil(cpus / 64), math.ceil(pods / 110))
        config, _ = await world(sim, nodes=nodes, reconcile_concurrency=concurrency)
        counts: collections.Counter[str] = collections.Counter()

        def count(ev: Any) -> None:
            if ev.event == "reconcile_finished":
                counts[ev.fields.get("controller", "?")] += 1

        sim.trace.subscribe(count)
        start_virtual = sim.now
        start_wall = time.perf_counter()
        start_cpu = time.process_time()
        for i in range(jobs):
            await sim.apply(e2e_rayjob(f"bench-{i:04d}", workers=workers,
                                       entrypoint=f"python -c 'import time; "
                                                  f"time.sleep({job_seconds})'"))
        pending = {f"bench-{i:04d}" for i in range(jobs)}

        def all_complete() -> bool:
            for obj in sim.api.list("RayJob", "default")["items"]:
                if (obj.get("status") or {}).get("jobDeploymentStatus") == "Complete":
                    pending.discard(obj["metadata"]["name"])
            return not pending

        await sim.wait_until(all_complete, timeout=6 * 3600, every=5.0, what="every RayJob")
        figures.update(
            wall=time.perf_counter() - start_wall, cpu=time.process_time() - start_cpu,
            virtual=sim.now - start_virtual,
            reconciles=dict(counts), nodes=nodes,
            submissions=len(config.records.submissions),
            accepted=len(config.records.accepted()))

    emu.run(main, seed=seed, max_virtual_time=7 * 3600)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--workers", type=int, default=0, help="worker Pods per RayCluster")
    parser.add_argument("--job-seconds", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=1, help="--reconcile-concurrency")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="50 RayJobs")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    args = parser.parse_args()
    if args.quick:
        args.jobs = 50
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        report(args, rows)


def report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    f = run(args.jobs, args.workers, args.job_seconds, args.concurrency, args.seed)
    total = sum(f["reconciles"].values())
    rows.append(row("rayjob", f"{args.jobs} RayJobs to Complete, wall", f["wall"], "s",
                    headline=True))
    rows.append(row("rayjob", f"{args.jobs} RayJobs, reconciles per wall second",
                    total / f["wall"], "/s"))
    # CPU seconds too: on a shared machine the wall time also counts other programs' turns
    rows.append(row("rayjob", f"{args.jobs} RayJobs, reconciles per CPU second",
                    total / f["cpu"], "/s", headline=True))
    print(f"rayjobs: {args.jobs} (each its own RayCluster, {args.workers} workers, "
          f"{args.job_seconds} s jobs), {f['nodes']} nodes, concurrency {args.concurrency}")
    print(f"wall time:    {f['wall']:.1f} s (CPU {f['cpu']:.1f} s)")
    print(f"virtual time: {f['virtual']:.1f} s (creation of the first to Complete of the last)")
    for name, n in sorted(f["reconciles"].items()):
        print(f"reconciles:   {name:<12} {n:>8}  ({n / f['wall']:.0f}/s wall)")
    print(f"reconciles/s: {total / f['wall']:.0f} (all controllers, per wall second; "
          f"{total / f['cpu']:.0f} per CPU second)")
    print(f"submissions:  {f['submissions']} received, {f['accepted']} accepted")


if __name__ == "__main__":
    main()
