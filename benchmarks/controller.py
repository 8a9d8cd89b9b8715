"""Controller throughput: a no-op reconciler's reconciles/s with 1, 4 and 16 workers.

The baseline, measured in the same run, is the least a worker pool can do: a bare
``asyncio.Queue`` drained by the same number of tasks each awaiting a no-op coroutine. The
controller adds what controller-runtime adds: the deduplicating queue with its processing set,
``done``/``forget``, the outcome ``match`` and two trace events per reconcile (which the
invariant checkers read). Prints figures and ratios; asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/controller.py [--keys 50000] [--repeat 3] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _rows import output, row

from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.process import Process
from emu.kernel.world import World
from emu.runtime.controller import Controller, ControllerOptions
from emu.runtime.reconcile import Request, Result

WORKERS = (1, 4, 16)


class NoOp:
    """Does nothing; sets ``all_done`` after ``expected`` reconciles."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.all_done = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.count += 1
        if self.count == self.expected:
            self.all_done.set()
        return Result()


async def bare_queue(keys: int, workers: int) -> float:
    q: asyncio.Queue[Request] = asyncio.Queue()
    for i in range(keys):
        q.put_nowait(Request("default", f"k{i}"))
    done = 0

    async def noop() -> None:
        return None

    async def worker() -> None:
        nonlocal done
        while True:
            item = await q.get()
            await noop()
            del item
            q.task_done()
            done += 1

    start = time.perf_counter()
    tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
    await q.join()
    wall = time.perf_counter() - start
    for t in tasks:
        t.cancel()
    assert done == keys
    return keys / wall


async def controller(keys: int, workers: int, traced: bool = True) -> float:
    world = World(seed=1)
    finished = asyncio.Event()
    rate: list[float] = []

    async def main(proc: Process) -> None:
        noop = NoOp(keys)
        ctrl = Controller("bench", noop, ControllerOptions(max_concurrent_reconciles=workers,
                                                            trace_reconciles=traced),
                          process=proc)
        for i in range(keys):
            ctrl.queue.add(Request("default", f"k{i}"))
        start = time.perf_counter()
        runner = asyncio.ensure_future(ctrl.start())
        await noop.all_done.wait()
        rate.append(keys / (time.perf_counter() - start))
        runner.cancel()
        finished.set()

    world.start_process("operator-0", main)
    await finished.wait()
    world.processes.crash_all()
    return rate[0]


async def controller_untraced(keys: int, workers: int) -> float:
    return await controller(keys, workers, traced=False)


def measure(fn: object, keys: int, workers: int, repeat: int) -> float:
    best = 0.0
    for _ in range(repeat):
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            best = max(best, runner.run(fn(keys, workers)))  # type: ignore[operator]
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="10,000 keys, best of 1")
    ap.add_argument("--json", action="store_true",
                    help="print the figures as a JSON list of rows (tables go to stderr)")
    args = ap.parse_args()
    if args.quick:
        args.keys, args.repeat = 10_000, 1
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        print(f"no-op controller, {args.keys:,} distinct keys, best of {args.repeat}")
        print(f"  {'workers':>7}  {'bare queue/s':>13}  {'traced/s':>10}  {'ratio':>6}  "
              f"{'untraced/s':>10}  {'ratio':>6}")
        for w in WORKERS:
            base = measure(bare_queue, args.keys, w, args.repeat)
            ctrl = measure(controller, args.keys, w, args.repeat)
            quiet = measure(controller_untraced, args.keys, w, args.repeat)
            rows.append(row("controller", f"no-op reconciles, {w} workers, traced", ctrl, "/s",
                            baseline=base, headline=w == WORKERS[0]))
            rows.append(row("controller", f"no-op reconciles, {w} workers, untraced", quiet,
                            "/s", baseline=base))
            print(f"  {w:>7}  {base:>13,.0f}  {ctrl:>10,.0f}  {ctrl / base:>6.3f}  "
                  f"{quiet:>10,.0f}  {quiet / base:>6.3f}")
        print("  (traced: two trace events per reconcile, what the two-leader checker reads)")

if __name__ == "__main__":
    main()
