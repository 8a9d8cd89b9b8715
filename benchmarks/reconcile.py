"""RayCluster reconcile throughput: N clusters (1 head, 2 workers) created at once, one operator.

For N = 10, 100, 1,000 (each in its own subprocess, so peak memory is per run) the clusters are
applied at virtual time 0 and the run ends when every cluster is ready: all its Pods exist and,
with ``--kube`` (kubelets, the Ray image's programs), every Pod is Running and Ready and the
RayCluster reports ``state: ready``. Printed per N: wall and CPU time, reconciles/s (per wall and
per CPU second) and API requests/s, virtual time to ready, peak RSS, the CPU time of a reconcile of
a ready cluster that has nothing to do (cache reads and the port's logic); then, from 100 to 1,000
clusters, the growth of wall time and the peak memory per added cluster (issue 17: at most 10 times
for 10 times the clusters with kubelets and Ray, reconciles/s at least 2,000 API-only and 1,000
with kubelets and Ray, peak memory at most 0.5 MB per cluster), and, for the largest N, where the
run's time goes: self time of every function, grouped by layer (the ported KubeRay logic, the
client, the API server, tracing, the runtime, the emulated world, the event loop), with the time of
code of no layer (builtins such as orjson, the standard library) charged to the layers that called
it and the client's copies apart. Asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/reconcile.py [--kube] [--sizes 10,100,1000] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import subprocess
import sys
import time
from typing import Any

from _rows import output, row

import emu
from emu.kuberay.operator import install_kuberay
from emu.runtime.reconcile import Request


def cluster(i: int) -> dict[str, Any]:
    container = {"name": "ray", "image": "rayproject/ray:2.46.0",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": f"rc-{i:04d}", "namespace": "default"},
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {},
                              "template": {"spec": {"containers": [dict(container)]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "minReplicas": 0,
                                  "maxReplicas": 2, "rayStartParams": {},
                                  "template": {"spec": {"containers": [dict(container)]}}}],
        },
    }


#: Layers a profile's self time is grouped by: (label, path fragments), first match wins.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("KubeRay port (emu/kuberay/)", ("/emu/kuberay/",)),
    ("client and cache (emu/client, runtime/cache)", ("/emu/client/", "/emu/runtime/cache.py")),
    ("API server (emu/apiserver)", ("/emu/apiserver/",)),
    ("tracing (trace, structlog)", ("/emu/kernel/trace", "structlog")),
    ("runtime (emu/runtime)", ("/emu/runtime/",)),
    ("network and processes (emu/kernel)", ("/emu/kernel/",)),
    ("world (emu/kube, emu/ray, backends)", ("/emu/kube/", "/emu/ray/", "/backends/")),
    ("event loop (asyncio)", ("/asyncio/",)),
    ("benchmark (creating, polling)", ("/benchmarks/",)),
)
#: The client's copies (orjson round trips of what the cache hands out), apart from the rest of
#: the client: the issue names them as a place a reconcile's time goes.
CLIENT_COPIES = "client copies (orjson in emu/client)"


def _layer(filename: str) -> str | None:
    for label, parts in LAYERS:
        if any(part in filename for part in parts):
            return label
    return None


def profile_layers(stats: pstats.Stats) -> dict[str, float]:
    """Self seconds per layer. Code of no layer (builtins such as orjson, the standard library,
    third-party packages) is charged to the layers that called it, in proportion to the time
    each caller spent in it, up through callers of no layer; orjson called by the client is
    `CLIENT_COPIES`."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    shares: dict[Any, dict[str, float]] = {}

    def share(func: Any, seen: frozenset[Any]) -> dict[str, float]:
        # how a function's self time divides among layers (fractions summing to 1)
        found = shares.get(func)
        if found is not None:
            return found
        filename, _line, name = func
        layer = _layer(filename)
        if layer is not None:
            out = {layer: 1.0}
        else:
            callers = table[func][4] if func in table else {}
            # each caller's part of this function's self time (its cumulative time where the
            # self time is too small to have been seen)
            spent = {c: info[2] for c, info in callers.items() if c not in seen}
            if not sum(spent.values()):
                spent = {c: info[3] for c, info in callers.items() if c not in seen}
            total = sum(spent.values())
            out = {}
            for caller, t in spent.items():
                if not total:
                    break
                for label, frac in share(caller, seen | {func}).items():
                    if filename == "~" and "orjson" in name and \
                            label.startswith("client and cache"):
                        label = CLIENT_COPIES
                    out[label] = out.get(label, 0.0) + frac * t / total
            if not out:
                out = {"other": 1.0}
        if not seen:  # a share computed with callers cut off by recursion is not kept
            shares[func] = out
        return out

    result: dict[str, float] = {}
    for func, (_cc, _nc, tottime, _ct, _callers) in table.items():
        for label, frac in share(func, frozenset()).items():
            result[label] = result.get(label, 0.0) + tottime * frac
    return result


#: Ready clusters the no-op reconcile figure passes over (at most), three times.
STEADY_CLUSTERS = 300


async def steady_reconcile(kuberay: Any, n: int) -> float | None:
    """CPU seconds of one reconcile of a ready cluster that needs nothing (best of three passes
    over up to `STEADY_CLUSTERS` of them): the cache reads and the port's logic alone, which is
    what most reconciles of a long-running world cost. It calls the reconciler the controller's
    worker calls, directly, after a first pass that writes whatever the last status lacked."""
    reconciler = kuberay.reconciler("RayCluster")
    if reconciler is None:
        return None
    requests = [Request(namespace="default", name=f"rc-{i:04d}")
                for i in range(min(n, STEADY_CLUSTERS))]
    for req in requests:
        await reconciler.reconcile(req)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for req in requests:
            await reconciler.reconcile(req)
        best = min(best, time.process_time() - start)
    return best / len(requests)


def run_one(n: int, kube: bool, profile: bool = False) -> dict[str, Any]:
    counts = {"requests": 0}

    async def main(sim: emu.Simulation) -> dict[str, Any]:
        serve = sim.api.serve

        def counted(req: Any, caller: str = "") -> Any:
            counts["requests"] += 1
            return serve(req, caller)

        sim.api.serve = counted  # type: ignore[method-assign]
        if kube:
            from emu.kube import cluster as kube_cluster
            from emu.ray.images import register_ray_programs

            k = kube_cluster.install(sim, nodes=max(3, n // 20))
            register_ray_programs(sim.programs)
            await k.wait_ready(timeout=120)
        kuberay = await install_kuberay(sim, leader_election=False, direct=not kube)
        await kuberay.wait_for_leader(timeout=120)
        counts["requests"] = 0
        start_virtual = sim.now
        start = time.perf_counter()
        cpu_start = time.process_time()
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        client = sim.client("bench")
        for i in range(n):
            await client.create(cluster(i))

        def ready() -> bool:
            # The check is measurement, not work: it reads as little as it can (a page of one
            # Pod counts them all; the N clusters are read before the 3N Pods, which are read
            # once every cluster says ready), so polling stays a small part of the wall time.
            if kube:
                clusters = sim.api.list("RayCluster", "default")["items"]
                if not all(c.get("status", {}).get("state") == "ready" for c in clusters):
                    return False
            page = sim.api.list("Pod", "default", limit=1)
            count = len(page["items"]) + page["metadata"].get("remainingItemCount", 0)
            if count < 3 * n:
                return False
            if not kube:
                return True
            pods = sim.api.list("Pod", "default", label_selector="ray.io/is-ray-node=yes")["items"]
            return len(pods) >= 3 * n and all(p.get("status", {}).get("phase") == "Running"
                                              for p in pods)

        await sim.wait_until(ready, timeout=3600, every=1.0, what=f"{n} clusters ready")
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        if profiler:
            profiler.disable()
            layers = profile_layers(pstats.Stats(profiler))
        reconciles = sum(1 for e in sim.trace if e.event == "reconcile_finished"
                         and e.fields.get("controller") == "raycluster")
        return {"n": n, "wall": wall, "cpu": cpu, "virtual": sim.now - start_virtual,
                "reconciles": reconciles, "requests": counts["requests"],
                "profile": layers if profiler else None,
                "steady": None if profiler else await steady_reconcile(kuberay, n)}

    result = emu.run(main, seed=1)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--kube", action="store_true", help="run kubelets and the Ray image")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="sizes 10,100")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                        help="profile the largest size by layer (default on; it slows that run)")
    parser.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.sizes = "10,100"
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.kube, args.profiled)))
        return
    runs = []
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        cmd = [sys.executable, __file__, "--one", str(n)] + (["--kube"] if args.kube else [])
        if args.profile and n == max(sizes):
            # its own run: the profiler's overhead must not reach the timed figures
            profiled = subprocess.run([*cmd, "--profiled"], check=True, capture_output=True,
                                      text=True).stdout
            profile_run = json.loads(profiled.strip().splitlines()[-1])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        if args.profile and n == max(sizes):
            runs[-1]["profile"] = profile_run["profile"]
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        report(runs, args.kube, rows)


def report(runs: list[dict[str, Any]], kube: bool, rows: list[dict[str, Any]]) -> None:
    mode = "with kubelets and Ray" if kube else "API server only (Pods created)"
    bench = "reconcile --kube" if kube else "reconcile"
    print(f"RayCluster reconcile, one operator, {mode}")
    # CPU seconds beside wall seconds: on a shared machine the wall time also counts other
    # programs' turns, while one run's CPU time is what a quiet machine's wall time would be
    print(f"{'N':>6} {'wall s':>8} {'cpu s':>8} {'reconciles':>10} {'rec/s':>8} "
          f"{'rec/cpu-s':>9} {'requests':>9} {'req/s':>8} {'virtual s':>9} {'peak MB':>8}")
    for r in runs:
        rows.append(row(bench, f"{r['n']} RayClusters to ready, wall", r["wall"], "s"))
        rows.append(row(bench, f"{r['n']} RayClusters, reconciles/s",
                        r["reconciles"] / r["wall"], "/s",
                        target=(">= 1000" if kube else ">= 2000") if r["n"] >= 100 else ""))
        rows.append(row(bench, f"{r['n']} RayClusters, reconciles per CPU second",
                        r["reconciles"] / r["cpu"], "/s", headline=r is runs[-1]))
        if r["n"] >= 100:
            rows.append(row(bench, f"{r['n']} RayClusters, peak memory per cluster",
                            r["peak_rss_mb"] / r["n"], "MB", target="<= 0.5" if kube else ""))
        print(f"{r['n']:>6} {r['wall']:>8.2f} {r['cpu']:>8.2f} {r['reconciles']:>10} "
              f"{r['reconciles'] / r['wall']:>8.0f} {r['reconciles'] / r['cpu']:>9.0f} "
              f"{r['requests']:>9} "
              f"{r['requests'] / r['wall']:>8.0f} {r['virtual']:>9.1f} {r['peak_rss_mb']:>8.0f}")
    for r in runs:
        if r.get("steady"):
            rows.append(row(bench, f"{r['n']} RayClusters, reconcile of a ready cluster with "
                                   "nothing to do, CPU", r["steady"] * 1e6, "µs"))
            print(f"reconcile of a ready cluster with nothing to do ({r['n']} clusters): "
                  f"{r['steady'] * 1e6:.0f} µs CPU ({1 / r['steady']:.0f} per CPU second)")
    sizes = sorted(r["n"] for r in runs)
    by_n = {r["n"]: r for r in runs}
    if len(sizes) >= 2:
        small, large = sizes[-2], sizes[-1]
        growth = by_n[large]["wall"] / by_n[small]["wall"]
        factor = large / small
        goal = factor if kube else 1.2 * factor
        rows.append(row(bench, f"wall growth {small} -> {large} clusters", by_n[large]["wall"],
                        "s", baseline=by_n[small]["wall"], target=f"<= {goal:g}x",
                        headline=True))
        print(f"growth {small} -> {large} clusters: {growth:.1f}x wall time "
              f"(target <= {goal:g}x)")
        # peak RSS / N charges the interpreter, the modules and the world's fixed parts to the
        # clusters; the growth between two sizes is what one more cluster costs
        marginal = (by_n[large]["peak_rss_mb"] - by_n[small]["peak_rss_mb"]) / (large - small)
        rows.append(row(bench, f"peak memory per added cluster, {small} -> {large}", marginal,
                        "MB", target="<= 0.5" if kube else "", headline=True))
        print(f"peak memory per added cluster {small} -> {large}: {marginal:.2f} MB")
    profiled = [r for r in runs if r.get("profile")]
    if profiled:
        r = profiled[-1]
        layers = r["profile"]
        total = sum(layers.values()) or 1.0
        per = 1e6 / max(1, r["reconciles"])
        print(f"where the time goes ({r['n']} clusters, profiled run; self time by layer, "
              f"builtins and the standard library charged to their callers; µs per reconcile "
              f"at the profiled speed):")
        for label, seconds in sorted(layers.items(), key=lambda kv: -kv[1]):
            rows.append(row(bench, f"profile {r['n']}: {label}", 100 * seconds / total, "%"))
            print(f"  {label:46s} {100 * seconds / total:5.1f} %  {seconds * per:8.1f} µs")

if __name__ == "__main__":
    main()
