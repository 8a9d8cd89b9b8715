"""GCS storage throughput per backend, against the raw client measured in the same run.

    PYTHONPATH=. .venv/bin/python benchmarks/gcs_storage.py [--ops N] [--reload N] [--quick] [--json]

For each backend: sequential single-key writes/s and reads/s on the ``ACTOR`` table, and the time to
reload a table of 10 000 actor records with ``get_all`` (what a restarted GCS does). Each figure is
printed next to the same work done with the raw client underneath — a dict, fakeredis ``HSET`` /
``HGET`` / ``HGETALL``, a real server (when ``EMU_REDIS_URL`` is set), ``rocksdict`` directly — and the
ratio backend / raw. These machines are noisy: figures are printed, never asserted.

Everything runs on the virtual-time loop, as in the emulator; real-server awaits (backend and raw
alike) are under ``freeze_while``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import fakeredis
import redis.asyncio as aioredis
from _rows import output, row
from rocksdict import Options, Rdict, WriteOptions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emu.backends import GcsStorage, MemoryStoreClient, RedisStoreClient, RocksDBStoreClient
from emu.kernel.clock import freeze_while
from emu.kernel.loop import VirtualTimeLoop

VALUE = b"\x08" * 200  # about the size of a small serialized ActorTableData
TABLE = "ACTOR"


class Raw:
    """The baseline: put/get/get_all straight on the store underneath a backend."""

    def __init__(self, put: Callable[[str, bytes], Awaitable[object]],
                 get: Callable[[str], Awaitable[object]],
                 get_all: Callable[[], Awaitable[object]]) -> None:
        self.put, self.get, self.get_all = put, get, get_all


def raw_dict() -> Raw:
    data: dict[str, bytes] = {}

    async def put(key: str, value: bytes) -> None:
        data[key] = value

    async def get(key: str) -> bytes | None:
        return data.get(key)

    async def get_all() -> dict[str, bytes]:
        return dict(sorted(data.items()))

    return Raw(put, get, get_all)


def raw_redis(client: aioredis.Redis, frozen: bool) -> Raw:
    key = "RAWbench@ACTOR"
    c: object = client

    async def run(awaitable: Awaitable[object]) -> object:
        return await (freeze_while(awaitable) if frozen else awaitable)

    async def put(field: str, value: bytes) -> object:
        return await run(c.hset(key, field, value))  # type: ignore[attr-defined]

    async def get(field: str) -> object:
        return await run(c.hget(key, field))  # type: ignore[attr-defined]

    async def get_all() -> object:
        return await run(c.hgetall(key))  # type: ignore[attr-defined]

    return Raw(put, get, get_all)


def raw_rocksdict(path: str) -> tuple[Raw, Rdict]:
    opts = Options(raw_mode=True)
    db = Rdict(path, options=opts)
    nosync = WriteOptions()
    nosync.sync = False  # ACTOR is a soft-durability table in Ray: written without fsync

    async def put(key: str, value: bytes) -> None:
        db.put(key.encode(), value, nosync)

    async def get(key: str) -> object:
        return db.get(key.encode())

    async def get_all() -> object:
        return dict(db.items())

    return Raw(put, get, get_all), db


async def timed(n: int, op: Callable[[int], Awaitable[object]]) -> float:
    """Operations per second of ``n`` sequential ``op(i)``."""
    start = time.perf_counter()
    for i in range(n):
        await op(i)
    return n / (time.perf_counter() - start)


async def measure_backend(store: GcsStorage, ops: int, reload: int) -> tuple[float, float, float]:
    writes = await timed(ops, lambda i: store.put(TABLE, f"actor-{i:08d}", VALUE))
    reads = await timed(ops, lambda i: store.get(TABLE, f"actor-{i:08d}"))
    await store.delete_namespace()
    await store.batch_put(TABLE, {f"actor-{i:08d}": VALUE for i in range(reload)})
    start = time.perf_counter()
    loaded = await store.get_all(TABLE)
    elapsed = time.perf_counter() - start
    assert len(loaded) == reload
    await store.delete_namespace()
    return writes, reads, elapsed


async def measure_raw(raw: Raw, ops: int, reload: int) -> tuple[float, float, float]:
    writes = await timed(ops, lambda i: raw.put(f"actor-{i:08d}", VALUE))
    reads = await timed(ops, lambda i: raw.get(f"actor-{i:08d}"))
    for i in range(ops, reload):
        await raw.put(f"actor-{i:08d}", VALUE)
    start = time.perf_counter()
    await raw.get_all()
    return writes, reads, time.perf_counter() - start


async def main(ops: int, reload: int, out: list[dict[str, Any]] | None = None) -> None:
    rows: list[tuple[str, tuple[float, float, float], tuple[float, float, float]]] = []
    with tempfile.TemporaryDirectory(prefix="gcs-bench-") as tmp:
        rows.append(("memory / dict",
                     await measure_backend(MemoryStoreClient("bench"), ops, reload),
                     await measure_raw(raw_dict(), ops, reload)))

        server = fakeredis.FakeServer()
        store = RedisStoreClient(fakeredis.FakeAsyncRedis(server=server), "bench")
        raw_client = fakeredis.FakeAsyncRedis(server=server)
        rows.append(("fakeredis / raw HSET,HGET",
                     await measure_backend(store, ops, reload),
                     await measure_raw(raw_redis(raw_client, frozen=False), ops, reload)))
        await raw_client.delete("RAWbench@ACTOR")
        await store.close()

        url = os.environ.get("EMU_REDIS_URL")
        if url:
            store = RedisStoreClient.from_url(url, "emu-bench")
            real = aioredis.Redis.from_url(url, single_connection_client=True)
            try:
                rows.append(("redis-server / raw HSET,HGET",
                             await measure_backend(store, ops, reload),
                             await measure_raw(raw_redis(real, frozen=True), ops, reload)))
            finally:
                await freeze_while(real.delete("RAWbench@ACTOR"))
                await freeze_while(real.aclose())
                await store.close()
        else:
            print("redis-server: skipped (EMU_REDIS_URL not set: start one with "
                  "scripts/redis-server.sh)")

        rocks = RocksDBStoreClient(os.path.join(tmp, "backend"), "bench")
        raw_rocks, db = raw_rocksdict(os.path.join(tmp, "raw"))
        try:
            rows.append(("rocksdb / rocksdict",
                         await measure_backend(rocks, ops, reload),
                         await measure_raw(raw_rocks, ops, reload)))
            synced = await timed(min(ops, 500),
                                 lambda i: rocks.put("JOB", f"job-{i:08d}", VALUE))
        finally:
            await rocks.close()
            db.close()

    print(f"{ops} sequential ops per figure; reload = get_all of a {reload}-entry {TABLE} table\n")
    header = (f"{'backend / baseline':30} {'writes/s':>10} {'raw':>10} {'ratio':>6}"
              f" {'reads/s':>10} {'raw':>10} {'ratio':>6} {'reload ms':>10} {'raw':>8} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    for name, (bw, br, bl), (rw, rr, rl) in rows:
        if out is not None:
            out.append(row("gcs_storage", f"{name}: writes", bw, "/s", baseline=rw, headline=True))
            out.append(row("gcs_storage", f"{name}: reads", br, "/s", baseline=rr))
            out.append(row("gcs_storage", f"{name}: reload {reload}", bl * 1e3, "ms",
                           baseline=rl * 1e3))
        print(f"{name:30} {bw:10.0f} {rw:10.0f} {bw / rw:6.2f} {br:10.0f} {rr:10.0f} {br / rr:6.2f}"
              f" {bl * 1e3:10.1f} {rl * 1e3:8.1f} {bl / rl:6.2f}")
    print(f"\nrocksdb synced writes (JOB table, WAL fsync per write): {synced:.0f}/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=5000, help="writes and reads per figure")
    parser.add_argument("--reload", type=int, default=10_000, help="entries reloaded by get_all")
    parser.add_argument("--quick", action="store_true", help="1,000 ops, 2,000 reloaded")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    args = parser.parse_args()
    if args.quick:
        args.ops, args.reload = 1000, 2000
    found: list[dict[str, Any]] = []
    with output(args.json, found), asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        runner.run(main(args.ops, args.reload, found))
