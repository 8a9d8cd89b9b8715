"""HTTP benchmark: workload W through ``emu serve``'s HTTP stack, beside a same-run floor.

Workload W: N ConfigMaps (2,000; 200 with ``--quick``) created, read, updated, then 200 stale
updates (each a 409), lists by label, and watches that replay every object — all as plain HTTP
requests from aiohttp clients (8 in flight) over loopback. The floor is a bare dict store behind
the same HTTP stack (aiohttp, orjson, the same URLs and status codes) in the same process; the
target is ≥ 0.8x the floor on every step, in operations per CPU second of this process (client
and server together). Also: the in-process httpx transport's ops/s beside the in-process
client's, on virtual time (no sockets).

emu and the floor run in lockstep: each step is cut into turns of ``--chunk`` operations, and
the two servers take turns, so both meet the machine at the same speed (a CPU's speed here moves
by tens of percent within a minute, which made whole runs one after the other disagree by as
much). Also run, beside a floor of its own: emu with the stored-bytes paths off ("before":
every answer decoded by the API server and encoded again). Prints figures and ratios; asserts
nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/http.py [--quick] [--rounds R] [--chunk C] [--json]
"""

from __future__ import annotations

import os
import sys

# This file is named like the standard library's ``http`` package, which aiohttp and httpx
# import: drop this folder from the import path first, and put it back last for ``_rows``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.modules.pop("http", None)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator, Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

import aiohttp  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402
from aiohttp import web  # noqa: E402

import emu  # noqa: E402
from emu.http.server import HttpServer  # noqa: E402
from emu.http.transport import BASE_URL, httpx_transport  # noqa: E402
from emu.kernel.paced import PacedLoop  # noqa: E402
from emu.simulation import Simulation  # noqa: E402

sys.path.append(_HERE)
from _rows import output, row  # noqa: E402

PATH = "/api/v1/namespaces/default/configmaps"
CONCURRENCY = 8
STALE = 200
LISTS = 20


def configmap(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:05d}", "namespace": "default",
                         "labels": {"app": "bench", "shard": str(i % 10)}},
            "data": {"index": str(i), "payload": "x" * 64}}


class FloorStore:
    """The floor: a dict of serialized objects behind the same URLs, and nothing else."""

    def __init__(self) -> None:
        self.objs: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self.rev = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        name = parts[5] if len(parts) > 5 else None
        if request.method == "POST":
            obj = orjson.loads(await request.read())
            self.rev += 1
            obj["metadata"]["resourceVersion"] = str(self.rev)
            data = orjson.dumps(obj)
            self.objs[obj["metadata"]["name"]] = (self.rev, data, obj["metadata"]["labels"])
            return web.Response(status=201, body=data, content_type="application/json")
        if request.method == "PUT" and name is not None:
            obj = orjson.loads(await request.read())
            rev, _, _ = self.objs[name]
            if obj["metadata"]["resourceVersion"] != str(rev):
                return web.Response(status=409, content_type="application/json", body=orjson.dumps(
                    {"kind": "Status", "code": 409, "reason": "Conflict"}))
            self.rev += 1
            obj["metadata"]["resourceVersion"] = str(self.rev)
            data = orjson.dumps(obj)
            self.objs[name] = (self.rev, data, obj["metadata"]["labels"])
            return web.Response(body=data, content_type="application/json")
        if name is not None:
            return web.Response(body=self.objs[name][1], content_type="application/json")
        if request.query.get("watch"):
            resp = web.StreamResponse()
            resp.content_type = "application/json"
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            # one chunk, as emu's server writes events that are ready together; then the
            # stream stays open until the client leaves, as a watch does (kube's and emu's)
            await resp.write(b"".join(b'{"type":"ADDED","object":' + data + b"}\n"
                                      for _, data, _ in self.objs.values()))
            await asyncio.Event().wait()  # cancelled when the client hangs up
            return resp
        key, _, value = request.query.get("labelSelector", "=").partition("=")
        items = [data for _, data, labels in self.objs.values() if labels.get(key) == value]
        body = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"' + \
            str(self.rev).encode() + b'"},"items":[' + b",".join(items) + b"]}"
        return web.Response(body=body, content_type="application/json")


async def _bounded(jobs: list[Callable[[], Awaitable[None]]]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


Job = Callable[[], Awaitable[None]]
Figures = dict[str, tuple[int, float, float]]


def _add(figures: Figures, step: str, more: tuple[int, float, float]) -> None:
    """Add operations, wall and CPU seconds to ``figures[step]``."""
    ops, wall, cpu = figures.get(step, (0, 0.0, 0.0))
    figures[step] = (ops + more[0], wall + more[1], cpu + more[2])


class Side:
    """One server under workload W: its client session, the objects it answered, and the
    operations, wall and CPU seconds each step took on it."""

    def __init__(self, base: str, task_factory: Any) -> None:
        #: The loop's task factory during this side's turns: a world installs its own (it
        #: tracks each process's tasks), which the floor's turns must not pay for.
        self.task_factory = task_factory
        self.session = aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(
            limit=CONCURRENCY))
        self.stored: dict[str, dict[str, Any]] = {}
        self.figures: Figures = {}

    def add(self, step: str, ops: int, wall: float, cpu: float) -> None:
        _add(self.figures, step, (ops, wall, cpu))

    def create(self, i: int) -> Job:
        async def job() -> None:
            async with self.session.post(PATH, data=orjson.dumps(configmap(i)),
                                         headers={"content-type": "application/json"}) as r:
                assert r.status == 201, await r.text()
                obj = orjson.loads(await r.read())
                self.stored[obj["metadata"]["name"]] = obj
        return job

    def get(self, name: str) -> Job:
        async def job() -> None:
            async with self.session.get(f"{PATH}/{name}") as r:
                assert r.status == 200
                await r.read()
        return job

    def update(self, name: str, expect: int) -> Job:
        obj = self.stored[name]
        obj["data"]["index"] += "!"
        body = orjson.dumps(obj)

        async def job() -> None:
            async with self.session.put(f"{PATH}/{name}", data=body,
                                        headers={"content-type": "application/json"}) as r:
                assert r.status == expect, await r.text()
                if expect == 200:
                    self.stored[name] = orjson.loads(await r.read())
                else:
                    await r.read()
        return job

    def list_by_label(self, shard: int, n: int) -> Job:
        async def job() -> None:
            async with self.session.get(PATH, params={"labelSelector": f"shard={shard}"}) as r:
                assert r.status == 200
                assert len(orjson.loads(await r.read())["items"]) == n // 10
        return job

    def watch(self, n: int) -> Job:
        async def job() -> None:
            got = 0
            async with self.session.get(PATH, params={"watch": "1", "resourceVersion": "0"}) as r:
                async for _line in r.content:
                    got += 1
                    if got == n:
                        break
        return job


async def _lockstep(sides: list[Side], step: str, jobs: list[list[Job]], chunk: int,
                    ops_per_job: int = 1) -> None:
    """Run ``jobs[i]`` on ``sides[i]``, the sides in turn, ``chunk`` jobs at a time, the side
    that goes first alternating; each side's figures are summed over its chunks. The CPU's
    speed on a shared or throttled machine moves by tens of percent within a minute (a bare
    Python loop here took 0.29-0.51 s from one second to the next); chunks that alternate
    within a fraction of a second meet the same machine, so the ratio of two sides' sums
    holds where whole runs one after the other do not."""
    loop = asyncio.get_running_loop()
    for k, first in enumerate(range(0, len(jobs[0]), chunk)):
        order = range(len(sides)) if k % 2 == 0 else reversed(range(len(sides)))
        for i in order:
            loop.set_task_factory(sides[i].task_factory)
            batch = jobs[i][first:first + chunk]
            start, cpu = time.perf_counter(), time.process_time()
            await _bounded(batch)
            sides[i].add(step, len(batch) * ops_per_job, time.perf_counter() - start,
                         time.process_time() - cpu)


async def workload(sides: list[Side], n: int, chunk: int) -> None:
    """Run W on every side in lockstep (`_lockstep`): creates, gets, updates, stale updates
    (each a 409), lists by label, and watches that replay every object (at least 2,000
    events in all per side)."""
    await _lockstep(sides, "create", [[s.create(i) for i in range(n)] for s in sides], chunk)
    names = sorted(sides[0].stored)
    await _lockstep(sides, "get", [[s.get(name) for name in names] for s in sides], chunk)
    stale = [{name: dict(s.stored[name]) for name in names[:STALE]} for s in sides]
    await _lockstep(sides, "update", [[s.update(name, 200) for name in names] for s in sides],
                    chunk)
    for s, old in zip(sides, stale, strict=True):
        s.stored.update(old)  # the versions read before the updates: every PUT is a 409
    await _lockstep(sides, "stale update (409)",
                    [[s.update(name, 409) for name in names[:STALE]] for s in sides], chunk)
    await _lockstep(sides, "list by label",
                    [[s.list_by_label(i % 10, n) for i in range(LISTS)] for s in sides], 2)
    replays = max(1, 2000 // n)
    await _lockstep(sides, "watch (events)", [[s.watch(n)] * replays for s in sides], 1,
                    ops_per_job=n)


@contextlib.asynccontextmanager
async def _floor_server() -> AsyncIterator[str]:
    """A fresh `FloorStore` served on a loopback port (configured as
    emu.http.server.HttpServer configures its runner); yields its base URL."""
    runner = web.AppRunner(FloorStore().app(), access_log=None, handle_signals=False,
                           shutdown_timeout=0.5, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _emu_server(stored_bytes: bool, stub_create: bool = False) -> AsyncIterator[str]:
    """A fresh world's API server behind `HttpServer` as ``emu serve`` runs it (no
    per-request span); ``stored_bytes=False`` is the path before the stored-bytes answers;
    ``stub_create``: the API server's create replaced by a stub that only stamps a version."""
    sim = Simulation(seed=0)
    sim.network.spans = None  # as emu serve runs: no per-request span for a Perfetto view
    if stub_create:
        revs = iter(range(1, 10**9))

        def create(obj: dict[str, Any], *_: Any) -> dict[str, Any]:
            obj["metadata"]["resourceVersion"] = str(next(revs))
            return obj

        sim.api._create = create  # type: ignore[method-assign,assignment]  # what serve calls
    server = HttpServer(sim)
    server.gateway.stored_bytes = stored_bytes
    url = await server.start()
    try:
        yield url
    finally:
        await server.stop()
        sim.close()


@contextlib.asynccontextmanager
async def _pair(stored_bytes: bool, stub_create: bool = False) -> AsyncIterator[list[Side]]:
    """A fresh emu (`_emu_server`) and a fresh floor, as the two `Side`s of a lockstep run."""
    loop = asyncio.get_running_loop()
    plain = loop.get_task_factory()
    async with _emu_server(stored_bytes, stub_create) as url, _floor_server() as floor:
        sides = [Side(url, loop.get_task_factory()), Side(floor, plain)]
        try:
            yield sides
        finally:
            loop.set_task_factory(sides[0].task_factory)  # the world's, until it closes
            for s in sides:
                await s.session.close()


async def paired(n: int, stored_bytes: bool, chunk: int) -> tuple[Figures, Figures]:
    """W on a fresh emu and a fresh floor in lockstep: (emu's figures, the floor's)."""
    async with _pair(stored_bytes) as sides:
        await workload(sides, n, chunk)
    return sides[0].figures, sides[1].figures


def _summed(runs: list[Figures]) -> Figures:
    out: Figures = {}
    for figures in runs:
        for step, more in figures.items():
            _add(out, step, more)
    return out


async def http_runs(n: int, rounds: int,
                    chunk: int) -> tuple[Figures, Figures, Figures, Figures]:
    """``rounds`` lockstep runs of emu beside the floor, and as many of emu "before" (every
    answer decoded by the API server and encoded again by the gateway, as before the
    stored-bytes paths) beside a floor of its own, each on a fresh pair of servers: (emu, its
    floor, before, its floor), each summed over the rounds."""
    runs: list[list[Figures]] = [[], [], [], []]
    for _ in range(rounds):
        for k, stored_bytes in ((0, True), (2, False)):
            mine, floor = await paired(n, stored_bytes, chunk)
            runs[k].append(mine)
            runs[k + 1].append(floor)
    emu_, emu_floor, before, before_floor = (_summed(r) for r in runs)
    return emu_, emu_floor, before, before_floor


async def stub_creates(n: int, rounds: int, chunk: int) -> tuple[float, float]:
    """CPU ops/s of the create step through emu's whole HTTP stack (server, gateway, emulated
    network) with the API server's ``create`` replaced by a stub that only stamps a version,
    beside the floor's, in lockstep as W runs: what the HTTP layer costs without the API
    server's write path."""
    cpu = [0.0, 0.0]
    for _ in range(rounds):
        async with _pair(True, stub_create=True) as sides:
            await _lockstep(sides, "create", [[s.create(i) for i in range(n)] for s in sides],
                            chunk)
            for k, side in enumerate(sides):
                cpu[k] += side.figures["create"][2]
    return rounds * n / cpu[0], rounds * n / cpu[1]


def in_process(n: int) -> tuple[float, float, float]:
    """ops/s (create + get) of the httpx transport, of kr8s on it, and of ``sim.client()``,
    on virtual time."""
    async def via_client(sim: emu.Simulation) -> float:
        c = sim.client("bench")
        start = time.perf_counter()
        for i in range(n):
            await c.create(configmap(i))
            await c.get("ConfigMap", f"cm-{i:05d}", "default")
        return 2 * n / (time.perf_counter() - start)

    async def via_transport(sim: emu.Simulation) -> float:
        async with httpx.AsyncClient(base_url=BASE_URL,
                                     transport=httpx_transport(sim, identity="bench")) as c:
            start = time.perf_counter()
            for i in range(n):
                r = await c.post(PATH, json=configmap(i))
                assert r.status_code == 201
                r = await c.get(f"{PATH}/cm-{i:05d}")
                assert r.status_code == 200
            return 2 * n / (time.perf_counter() - start)

    async def via_kr8s(sim: emu.Simulation) -> float:
        from kr8s.asyncio.objects import ConfigMap

        api = await emu.kr8s_api(sim, identity="bench")
        start = time.perf_counter()
        for i in range(n):
            await ConfigMap(configmap(i), api=api).create()
            await ConfigMap.get(f"cm-{i:05d}", namespace="default", api=api)
        return 2 * n / (time.perf_counter() - start)

    return (emu.run(via_transport, seed=0), emu.run(via_kr8s, seed=0),
            emu.run(via_client, seed=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 ConfigMaps instead of 2,000")
    parser.add_argument("--rounds", type=int, default=None,
                        help="lockstep runs, summed (default 3; 1 with --quick)")
    parser.add_argument("--chunk", type=int, default=20,
                        help="operations per side before the other side's turn (default 20)")
    parser.add_argument("--json", action="store_true", help="print machine-readable rows")
    args = parser.parse_args()
    if args.chunk < 1 or (args.rounds is not None and args.rounds < 1):
        parser.error("--chunk and --rounds must be at least 1")
    n = 200 if args.quick else 2000
    rounds = args.rounds or (1 if args.quick else 3)
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        loop = PacedLoop(speed=1.0)
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            emu_figures, floor, before, before_floor = runner.run(http_runs(n, rounds,
                                                                            args.chunk))
            stub, stub_floor = runner.run(stub_creates(n, rounds, args.chunk))
        print(f"workload W over HTTP: {n} ConfigMaps, {CONCURRENCY} requests in flight, "
              f"{rounds} lockstep round(s) beside the floor, {args.chunk} operations a turn; "
              f"ops per wall second, and per CPU second of this process")
        print(f"{'step':<20}{'emu':>9}{'floor':>9}{'ratio':>7}"
              f"{'emu/cpu':>10}{'floor/cpu':>10}{'ratio':>7}{'before':>7}")
        for step, (ops, wall, cpu) in emu_figures.items():
            _, f_wall, f_cpu = floor[step]
            b_cpu, b_cpu_floor = before[step][2], before_floor[step][2]
            mine, base = ops / wall, ops / f_wall
            mine_c, base_c = ops / cpu, ops / f_cpu
            old_ratio = b_cpu_floor / b_cpu  # before beside its own floor
            rows.append(row("http", f"W {step}", mine, "ops/s", baseline=base,
                            target=">= 0.8x floor"))
            rows.append(row("http", f"W {step} per CPU second", mine_c, "ops/cpu-s",
                            baseline=base_c, target=">= 0.8x floor",
                            headline=step in ("create", "get", "update", "watch (events)")))
            rows.append(row("http", f"W {step} per CPU second, before (answers re-encoded)",
                            ops / b_cpu, "ops/cpu-s", baseline=ops / b_cpu_floor,
                            target="reported"))
            print(f"{step:<20}{mine:>9,.0f}{base:>9,.0f}{mine / base:>6.2f}x"
                  f"{mine_c:>10,.0f}{base_c:>10,.0f}{mine_c / base_c:>6.2f}x"
                  f"{old_ratio:>6.2f}x")
        rows.append(row("http", "create, API server's create stubbed, per CPU second", stub,
                        "ops/cpu-s", baseline=stub_floor, target="reported"))
        print(f"create with the API server's create stubbed (the HTTP stack alone): "
              f"{stub:,.0f} ops per CPU second, floor {stub_floor:,.0f} "
              f"({stub / stub_floor:.2f}x)")
        transport, kr8s, client = in_process(n)
        rows.append(row("http", "in-process httpx transport (create+get)", transport, "ops/s",
                        baseline=client, target="reported beside sim.client()"))
        rows.append(row("http", "in-process kr8s (create+get)", kr8s, "ops/s",
                        baseline=client, target="reported beside sim.client()"))
        print(f"in-process, virtual time, no sockets (create+get): httpx transport "
              f"{transport:,.0f} ops/s, kr8s {kr8s:,.0f} ops/s, sim.client() {client:,.0f} ops/s "
              f"({transport / client:.2f}x, {kr8s / client:.2f}x)")


if __name__ == "__main__":
    main()
