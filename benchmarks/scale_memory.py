"""Where the memory of a RayCluster world goes: a tracemalloc breakdown once N clusters are ready.

The world of ``benchmarks/reconcile.py --kube`` (N RayClusters of 1 head and 2 workers, one
operator, kubelets on N/20 Nodes running the Ray image's programs), built to ready, then one
tracemalloc snapshot: the traced heap (and its peak during the run), the lines that allocated
the most of what is still alive, and the same grouped by module. The line that allocated a block
is where it was made, not who keeps it: an ``orjson.loads`` line in the watch stream is an event
object a handler kept (or a string or a sub-object of it). Tracing doubles the run's time;
figures other than the peak are bytes still allocated at the end. Asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/scale_memory.py [--n 100] [--top 20] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
from typing import Any

import emu
from benchmarks.reconcile import cluster
from emu.kuberay.operator import install_kuberay


def _short(filename: str) -> str:
    for marker in ("/emu/", "/benchmarks/"):
        at = filename.rfind(marker)
        if at >= 0:
            return filename[at + 1:]
    return filename.rsplit("/", 2)[-1] if "/" in filename else filename


def measure(n: int, top: int) -> dict[str, Any]:
    """Build the world, let it reach ready, and break the traced heap down."""

    async def main(sim: emu.Simulation) -> dict[str, Any]:
        from emu.kube import cluster as kube_cluster
        from emu.ray.images import register_ray_programs

        k = kube_cluster.install(sim, nodes=max(3, n // 20))
        register_ray_programs(sim.programs)
        await k.wait_ready(timeout=120)
        kuberay = await install_kuberay(sim, leader_election=False)
        await kuberay.wait_for_leader(timeout=120)
        client = sim.client("bench")
        for i in range(n):
            await client.create(cluster(i))

        def ready() -> bool:
            clusters = sim.api.list("RayCluster", "default")["items"]
            if not all(c.get("status", {}).get("state") == "ready" for c in clusters):
                return False
            pods = sim.api.list("Pod", "default", label_selector="ray.io/is-ray-node=yes")["items"]
            return len(pods) >= 3 * n and all(p.get("status", {}).get("phase") == "Running"
                                              for p in pods)

        await sim.wait_until(ready, timeout=3600, every=1.0, what=f"{n} clusters ready")
        peak = tracemalloc.get_traced_memory()[1]
        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        total = sum(s.size for s in snap.statistics("filename"))
        lines = [{"where": f"{_short(s.traceback[0].filename)}:{s.traceback[0].lineno}",
                  "mb": s.size / 1e6, "blocks": s.count}
                 for s in snap.statistics("lineno")[:top]]
        files: dict[str, float] = {}
        for s in snap.statistics("filename"):
            name = _short(s.traceback[0].filename)
            files[name] = files.get(name, 0.0) + s.size / 1e6
        by_file = sorted(files.items(), key=lambda kv: -kv[1])[:top]
        return {"n": n, "traced_mb": total / 1e6, "peak_mb": peak / 1e6, "lines": lines,
                "files": [{"file": f, "mb": mb} for f, mb in by_file]}

    tracemalloc.start()
    try:
        return emu.run(main, seed=1)
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="RayClusters (default 100)")
    parser.add_argument("--top", type=int, default=20, help="lines and modules shown")
    parser.add_argument("--json", action="store_true", help="print the breakdown as JSON")
    args = parser.parse_args()
    out = measure(args.n, args.top)
    if args.json:
        print(json.dumps(out))
        return
    print(f"traced heap with {out['n']} RayClusters ready (kubelets and Ray): "
          f"{out['traced_mb']:.1f} MB ({out['traced_mb'] / out['n'] * 1000:.0f} kB per cluster); "
          f"peak during the run {out['peak_mb']:.1f} MB")
    print("allocated by line (still alive):")
    for item in out["lines"]:
        print(f"  {item['mb']:7.2f} MB {item['blocks']:>8} blocks  {item['where']}")
    print("by module:")
    for item in out["files"]:
        print(f"  {item['mb']:7.2f} MB  {item['file']}")


if __name__ == "__main__":
    main()
