"""RayService upgrade throughput: N running RayServices, all upgraded (blue/green) at once.

The whole world runs: the API server, kubelets, scheduler, EndpointSlices, kube-proxy, the fake
Ray with its dashboard, Serve and proxies in every Pod, and KubeRay (one replica, leader
election on) with the RayCluster and RayService controllers. N RayServices are applied and
brought to Ready; then every one gets a new ``rayVersion`` at once, and the run ends when each
has promoted its new cluster and the old ones are deleted (one 60 s deletion delay later).
Prints wall and CPU time, virtual time, reconciles per controller and reconciles per wall and
CPU second, for
the setup and the upgrade separately; asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/rayservice.py [--services 200] [--workers 0]
        [--concurrency 1] [--seed 1] [--quick] [--json]
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

from test_rayservice_support import (
    active_name,
    bump_ray_version,
    is_ready,
    rayservice,
    update_rs,
    world,
)

import emu


def run(services: int, workers: int, concurrency: int, seed: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        # Two clusters per RayService during the upgrade, a head and the workers each.
        pods = services * 2 * (1 + workers) * 1.2
        nodes = max(3, math.ceil(pods / 110))
        await world(sim, nodes=nodes, reconcile_concurrency=concurrency)
        counts: collections.Counter[str] = collections.Counter()

        def count(ev: Any) -> None:
            if ev.event == "reconcile_finished":
                counts[ev.fields.get("controller", "?")] += 1

        sim.trace.subscribe(count)
        names = [f"bench-{i:04d}" for i in range(services)]

        def phase(name: str, wall: float, virtual: float) -> None:
            figures[name] = {"wall": wall, "cpu": time.process_time() - t_cpu,
                             "virtual": virtual, "reconciles": dict(counts)}
            counts.clear()

        t_wall, t_virtual, t_cpu = time.perf_counter(), sim.now, time.process_time()
        for name in names:
            await sim.apply(rayservice(name, replicas=workers))

        def all_ready() -> bool:
            items = sim.api.list("RayService", "default")["items"]
            return sum(1 for o in items if is_ready(o)) == services

        await sim.wait_until(all_ready, timeout=6 * 3600, every=5.0, what="every RayService")
        phase("setup", time.perf_counter() - t_wall, sim.now - t_virtual)
        old = {o["metadata"]["name"]: active_name(o)
               for o in sim.api.list("RayService", "default")["items"]}

        t_wall, t_virtual, t_cpu = time.perf_counter(), sim.now, time.process_time()
        for name in names:
            await update_rs(sim, name, bump_ray_version("2.47.0"))

        def all_upgraded() -> bool:
            items = sim.api.list("RayService", "default")["items"]
            promoted = sum(1 for o in items
                           if active_name(o) not in ("", old[o["metadata"]["name"]]))
            clusters = {c["metadata"]["name"] for c in sim.api.list("RayCluster",
                                                                    "default")["items"]}
            return promoted == services and not clusters & set(old.values())

        await sim.wait_until(all_upgraded, timeout=6 * 3600, every=5.0, what="every upgrade")
        phase("upgrade", time.perf_counter() - t_wall, sim.now - t_virtual)
        figures["nodes"] = nodes

    emu.run(main, seed=seed, max_virtual_time=12 * 3600)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--workers", type=int, default=0, help="worker Pods per RayCluster")
    parser.add_argument("--concurrency", type=int, default=1, help="--reconcile-concurrency")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="20 RayServices")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    args = parser.parse_args()
    if args.quick:
        args.services = 20
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        report(args, rows)


def report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    f = run(args.services, args.workers, args.concurrency, args.seed)
    print(f"rayservices: {args.services} ({args.workers} workers per cluster), {f['nodes']} nodes, "
          f"concurrency {args.concurrency}")
    for name, what in (("setup", "apply to all Ready"),
                       ("upgrade", "spec change to all promoted and old clusters deleted")):
        p = f[name]
        total = sum(p["reconciles"].values())
        rows.append(row("rayservice", f"{args.services} RayServices, {name}, wall", p["wall"],
                        "s", headline=True))
        rows.append(row("rayservice", f"{args.services} RayServices, {name}, reconciles/s",
                        total / p["wall"], "/s"))
        rows.append(row("rayservice",
                        f"{args.services} RayServices, {name}, reconciles per CPU second",
                        total / p["cpu"], "/s"))
        print(f"{name}: {what}")
        print(f"  wall time:    {p['wall']:.1f} s (CPU {p['cpu']:.1f} s)")
        print(f"  virtual time: {p['virtual']:.1f} s")
        for ctrl, n in sorted(p["reconciles"].items()):
            print(f"  reconciles:   {ctrl:<12} {n:>8}  ({n / p['wall']:.0f}/s wall)")
        print(f"  reconciles/s: {total / p['wall']:.0f} (all controllers, per wall second; "
              f"{total / p['cpu']:.0f} per CPU second)")


if __name__ == "__main__":
    main()
