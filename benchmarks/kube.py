"""Kubernetes built-ins benchmark: N Nodes and M Pods created, scheduled and Running.

Every built-in runs as in a test (a kubelet process per Node, the scheduler, the controllers); the
Pods are created through the API server by a client, bound by the scheduler and started by their
kubelets, each container a process. Prints wall time, virtual time, Pods per wall second and peak
memory, plus a same-run baseline (the same number of bare API-server Pod creates) to compare
across machines. Asserts nothing.

    .venv/bin/python benchmarks/kube.py [--nodes 1000] [--pods 10000] [--quick] [--json]

Targets (issue 4): 1,000 Nodes and 10,000 Pods in at most 20 s wall and 2 GiB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import time
from typing import Any

from _rows import output, row

import emu
import emu.kube.cluster as kc
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{i:05d}", "namespace": "default", "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "app", "image": "example/app:1",
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "128Mi"}}}]}}


def baseline(pods: int) -> float:
    """Wall seconds for ``pods`` creates straight into an API server (no network, no kube)."""
    api = APIServer(clock=lambda: 0.0, rng=SimRandom(1))
    start = time.perf_counter()
    for i in range(pods):
        api.create(pod(i))
    return time.perf_counter() - start


async def scenario(sim: emu.Simulation, nodes: int, pods: int, batch: int) -> dict[str, float]:
    wall0 = time.perf_counter()
    cluster = kc.install(sim, nodes=nodes, image_pull_delay=1.0, container_start_delay=0.5)
    await cluster.wait_ready(timeout=600)
    wall_nodes = time.perf_counter() - wall0
    v0 = sim.now
    running: dict[str, None] = {}
    done = asyncio.Event()
    watch = sim.api.watch("Pod", "default")

    async def count() -> None:
        async for event in watch:
            obj = event["object"]
            if (obj.get("status") or {}).get("phase") == "Running":
                running[obj["metadata"]["name"]] = None
                if len(running) == pods:
                    done.set()
                    return

    counter = asyncio.ensure_future(count())
    client = sim.client("bench")
    wall1 = time.perf_counter()
    for start in range(0, pods, batch):
        await asyncio.gather(*(client.create(pod(i))
                               for i in range(start, min(start + batch, pods))))
    wall_created = time.perf_counter() - wall1
    await asyncio.wait_for(done.wait(), timeout=3600)
    counter.cancel()
    watch.close()
    return {"wall_nodes": wall_nodes, "wall_create": wall_created,
            "wall_pods": time.perf_counter() - wall1, "wall_total": time.perf_counter() - wall0,
            "virtual": sim.now - v0, "writes": float(sim.api.resource_version)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500,
                        help="Pods created concurrently per batch (default 500)")
    parser.add_argument("--quick", action="store_true", help="100 Nodes, 1,000 Pods")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    parser.add_argument("--gc-threshold", type=int, default=50_000,
                        help="first generation threshold of Python's cyclic GC (default 50000; "
                             "700 is Python's own): with ~1 GiB of live objects, full passes "
                             "at the default rate dominate the run")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.pods = 100, 1000
    gc.set_threshold(args.gc_threshold, 20, 100)
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        base = baseline(args.pods)

        async def run(sim: emu.Simulation) -> dict[str, float]:
            return await scenario(sim, args.nodes, args.pods, args.batch)

        figures = emu.run(run, seed=1)
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        what = f"{args.nodes} Nodes, {args.pods} Pods to Running"
        full = args.nodes == 1000 and args.pods == 10_000
        rows.append(row("kube", f"{what}, wall (baseline: bare creates)", figures["wall_total"],
                        "s", baseline=base, target="<= 20 s" if full else "", headline=True))
        rows.append(row("kube", f"{what}, Pods/s", args.pods / figures["wall_pods"], "/s"))
        rows.append(row("kube", f"{what}, peak RSS", peak_mib, "MiB",
                        target="<= 2048 MiB" if full else "", headline=True))
        print(f"kube: {args.nodes} nodes, {args.pods} pods created, scheduled and Running")
        print(f"  nodes registered and Ready   {figures['wall_nodes']:8.2f} s wall")
        print(f"  pods created                 {figures['wall_create']:8.2f} s wall")
        print(f"  pods created → all Running   {figures['wall_pods']:8.2f} s wall, "
              f"{figures['virtual']:.2f} s virtual")
        print(f"  total                        {figures['wall_total']:8.2f} s wall  "
              f"(target ≤ 20 s)")
        print(f"  pods/s (wall)                {args.pods / figures['wall_pods']:8.0f}")
        print(f"  API writes                   {figures['writes']:8.0f} "
              f"({figures['writes'] / figures['wall_total']:.0f}/s)")
        print(f"  peak memory (max RSS)        {peak_mib:8.0f} MiB  (target ≤ 2048 MiB)")
        print(f"  baseline: {args.pods} bare API-server creates {base:.3f} s wall; "
              f"ratio {figures['wall_total'] / base:.1f}x")

if __name__ == "__main__":
    main()
