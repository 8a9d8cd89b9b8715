"""Each scenario's cost: wall time, virtual duration and compression (virtual / wall), and what a
world costs before a scenario does anything. Prints a table (or, with ``--json``, rows for
``emu bench``); asserts nothing.

Targets (issue 17): a world with the Kubernetes built-ins and KubeRay installed ready in <= 10 ms
wall; every scenario <= 0.3 s wall and >= 1,000x real time. The baseline of the world rows is a
bare `emu.run` (no cluster) in the same run, so a slow machine shows as a slow baseline too; the
restored world's baseline is the same world built from scratch in this run.

    .venv/bin/python benchmarks/scenarios.py [--seeds 3] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import attrs
from _rows import output, row

import emu
from emu import scenarios
from emu.scenarios import _common

#: The scenarios ``--quick`` measures: one of each family (operator, outage, Ray, RayService).
QUICK = ("operator-failover", "apiserver-outage", "head-loss-redis", "rayservice-upgrade")


def measure(name: str, seeds: int) -> tuple[float, float, float, float, bool]:
    """(median wall s, median CPU s, median virtual s, worst wall s, every seed ok) over seeds
    1..``seeds``. CPU time is what a quiet machine's wall time would be (the run is one thread
    on virtual time: it never waits on the wall clock), so a busy machine does not hide it."""
    walls, cpus, virtuals, ok = [], [], [], True
    for seed in range(1, seeds + 1):
        cpu0 = time.process_time()
        result = scenarios.run_scenario(name, seed)
        cpus.append(time.process_time() - cpu0)
        ok = ok and result.ok
        walls.append(result.wall_seconds)
        virtuals.append(result.virtual_seconds)
    return (statistics.median(walls), statistics.median(cpus), statistics.median(virtuals),
            max(walls), ok)


def world_ms(repeat: int, *, kuberay: bool) -> tuple[float, float]:
    """(median ms of a world with the built-ins [and KubeRay with a leader], median ms of a bare
    `emu.run` doing nothing) over ``repeat`` runs, seeds 1..repeat."""

    async def ready(sim: emu.Simulation) -> None:
        if kuberay:
            await _common.start(sim, replicas=2)
        else:
            await sim.cluster.wait_ready()

    async def nothing(sim: emu.Simulation) -> None:
        return None

    built, bare = [], []
    for seed in range(1, repeat + 1):
        t0 = time.perf_counter()
        emu.run(ready, seed=seed, cluster=_common.kube())
        built.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        emu.run(nothing, seed=seed)
        bare.append((time.perf_counter() - t0) * 1000)
    return statistics.median(built), statistics.median(bare)


def standard_cpu_ms(repeat: int, *, kuberay: bool) -> tuple[float, float]:
    """(median CPU ms of a world built with the standard cluster's system Pods, the same
    without), runs interleaved, seeds 1..``repeat``: `KubeConfig.standard_cluster`'s cost."""

    async def ready(sim: emu.Simulation) -> None:
        if kuberay:
            await _common.start(sim, replicas=2)
        else:
            await sim.cluster.wait_ready()

    times: dict[bool, list[float]] = {False: [], True: []}
    for seed in range(1, repeat + 1):
        for standard in (False, True):
            cpu0 = time.process_time()
            emu.run(ready, seed=seed,
                    cluster=attrs.evolve(_common.kube(), standard_cluster=standard))
            times[standard].append((time.process_time() - cpu0) * 1000)
    return statistics.median(times[True]), statistics.median(times[False])


async def _kuberay_ready(sim: emu.Simulation) -> None:
    await _common.start(sim, replicas=2)


async def _ready_now(sim: emu.Simulation) -> float:
    """A restored run's whole work: the world is there (returns its virtual time)."""
    return sim.now


def restored_ms(repeat: int) -> tuple[float, float]:
    """(median ms of a world with the built-ins and KubeRay restored from a snapshot — one
    ``snap.run`` round trip: fork, run, result back —, ms to build and park that snapshot)."""
    t0 = time.perf_counter()
    snap = emu.snapshot_world(_kuberay_ready, seed=1, cluster=_common.kube())
    parked = (time.perf_counter() - t0) * 1000
    times = []
    with snap:
        for _ in range(repeat):
            t0 = time.perf_counter()
            snap.run(_ready_now)
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), parked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per scenario (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help=f"one seed of {len(QUICK)} scenarios ({', '.join(QUICK)})")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    args = parser.parse_args()
    seeds = 1 if args.quick else args.seeds
    names = list(QUICK) if args.quick else [sc.name for sc in scenarios.all_scenarios()]
    rows: list[dict[str, Any]] = []
    b = "scenarios"
    with output(args.json, rows):
        scenarios.run_scenario("worker-loss", 0)  # warm up imports and caches
        repeat = 3 if args.quick else 7
        for label, kuberay in (("built-ins", False), ("built-ins + KubeRay", True)):
            built, bare = world_ms(repeat, kuberay=kuberay)
            rows.append(row(b, f"world ready: {label}", built, "ms", baseline=bare,
                            target="<= 10 ms" if kuberay else ""))
            print(f"world ready ({label}): {built:.1f} ms median of {repeat} "
                  f"(bare emu.run {bare:.2f} ms)")
        for label, kuberay in (("built-ins", False), ("built-ins + KubeRay", True)):
            with_std, without = standard_cpu_ms(repeat * 3, kuberay=kuberay)
            rows.append(row(b, f"world ready, CPU: {label}, standard cluster "
                               f"(baseline: without)", with_std, "ms", baseline=without,
                            target="<= 2x baseline"))
            print(f"world ready ({label}) with the standard cluster: {with_std:.1f} ms CPU "
                  f"median of {repeat * 3} ({with_std / without:.2f}x; without: "
                  f"{without:.1f} ms)")
        restored, parked = restored_ms(repeat * 3)
        rows.append(row(b, "world ready: built-ins + KubeRay, restored from a snapshot",
                        restored, "ms", baseline=built, target="<= 10 ms", headline=True))
        print(f"world ready (built-ins + KubeRay, restored from a snapshot): {restored:.1f} ms "
              f"median of {repeat * 3} (built: {built:.1f} ms; building and parking the "
              f"snapshot once: {parked:.1f} ms)")
        print(f"\nscenarios ({seeds} seed(s) each; median wall and CPU, worst wall, median "
              f"virtual; targets judged on CPU time, a quiet machine's wall)")
        print(f"{'scenario':<32}{'wall s':>9}{'cpu s':>9}{'worst s':>9}{'virtual s':>11}"
              f"{'x wall':>9}{'x cpu':>9}  targets")
        total_wall = total_cpu = total_virtual = 0.0
        for name in names:
            wall, cpu, virtual, worst, ok = measure(name, seeds)
            ratio = virtual / wall if wall else 0.0
            cpu_ratio = virtual / cpu if cpu else 0.0
            total_wall += wall
            total_cpu += cpu
            total_virtual += virtual
            rows.append(row(b, f"{name} wall", wall, "s"))
            rows.append(row(b, f"{name} CPU", cpu, "s", target="<= 0.3 s",
                            headline=name == "operator-failover"))
            rows.append(row(b, f"{name} compression (virtual / CPU)", cpu_ratio, "x real",
                            target=">= 1000", headline=name == "operator-failover"))
            marks = (("" if cpu <= 0.3 else "cpu>0.3s ")
                     + ("" if cpu_ratio >= 1000 else "ratio<1000x"))
            note = "" if ok else "  (an expectation failed)"
            print(f"{name:<32}{wall:>9.3f}{cpu:>9.3f}{worst:>9.3f}{virtual:>11.1f}{ratio:>9,.0f}"
                  f"{cpu_ratio:>9,.0f}  {marks or 'met'}{note}")
        print(f"{'all (sum of medians)':<32}{total_wall:>9.3f}{total_cpu:>9.3f}{'':>9}"
              f"{total_virtual:>11.1f}{total_virtual / total_wall:>9,.0f}"
              f"{total_virtual / total_cpu:>9,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
