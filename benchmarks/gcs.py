"""The fake GCS per storage backend: restart-and-reload of 10k actors, and KV writes and reads
through the GCS, each against the raw backend client measured in the same run.

    PYTHONPATH=. .venv/bin/python benchmarks/gcs.py [--actors N] [--ops N] [--quick] [--json]

Backends: ``memory``; ``fakeredis`` (embedded, in-process); ``redis-pod`` (a Redis workload
reached through the emulated network, as a Redis-FT cluster in the emulator uses it);
``redis-server`` (a real server, when ``EMU_REDIS_URL`` is set); ``rocksdb`` (a directory).

- **reload**: the store holds what a GCS of a cluster with N detached ALIVE actors on 10 nodes
  wrote (``ACTOR`` and ``ACTOR_TASK_SPEC`` records, ``NODE``, ``JOB``, the cluster id); a new
  `GcsServer` starts on it (load, cluster id, listen). Baseline: ``get_all`` of the five tables
  it loads, on the same store. (A memory store never survives a real restart; its figure is the
  in-process cost of the same load.)
- **writes/s, reads/s**: ``InternalKVPut``/``InternalKVGet`` RPCs from a client through the network
  to the GCS process, against ``put``/``get`` on the store directly.

Wall-clock time (``time.perf_counter``) while the virtual-time loop runs; these machines are
noisy, so figures are printed with ratios, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import fakeredis
import orjson
from _rows import output, row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emu.backends import GcsStorage, MemoryStoreClient, RedisStoreClient, RocksDBStoreClient
from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.process import Process
from emu.kernel.programs import ContainerContext
from emu.kernel.world import World
from emu.ray.config import RayConfig
from emu.ray.gcs import GcsServer, kv_storage_key
from emu.ray.gcs_client import GcsClient
from emu.ray.net import bind_caller
from emu.ray.redis_server import NetworkRedis, redis_program

StoreFactory = Callable[[ContainerContext], GcsStorage]
NAMESPACE = "bench"


def records(actors: int) -> dict[str, dict[str, bytes]]:
    """What a GCS persisted for ``actors`` detached ALIVE actors spread over 10 nodes."""
    dump = lambda r: orjson.dumps(r, option=orjson.OPT_SORT_KEYS)  # noqa: E731
    nodes = {f"{i:056x}": {"node_id": f"{i:056x}", "node_name": f"worker-{i}",
                           "node_ip": f"10.0.1.{i}", "raylet_address": f"10.0.1.{i}:20000",
                           "is_head": i == 0, "resources": {"CPU": 8.0}, "labels": {},
                           "state": "ALIVE", "start_time_ms": 0, "end_time_ms": None}
             for i in range(10)}
    tables: dict[str, dict[str, bytes]] = {
        "NODE": {k: dump(v) for k, v in nodes.items()},
        "JOB": {"01000000": dump({"job_id": "01000000", "is_dead": False,
                                  "driver_node_id": None})},
        "ACTOR": {}, "ACTOR_TASK_SPEC": {},
        "KV": {kv_storage_key("cluster", "ray_cluster_id"): b"c" * 56},
    }
    node_ids = sorted(nodes)
    for i in range(actors):
        actor_id = f"{i:032x}"
        node = nodes[node_ids[i % 10]]
        tables["ACTOR"][actor_id] = dump({
            "actor_id": actor_id, "name": f"actor-{i}", "ray_namespace": "", "job_id": "01000000",
            "class_name": "app:Worker", "detached": True, "max_restarts": -1,
            "max_task_retries": 0, "num_cpus": 1.0, "resources": {}, "node_id_affinity": None,
            "soft": False, "head": False, "state": "ALIVE", "num_restarts": 0,
            "node_id": node["node_id"], "address": node["raylet_address"], "version": 2,
            "death_cause": None})
        tables["ACTOR_TASK_SPEC"][actor_id] = pickle.dumps(
            {"cls": "app:Worker", "args": (i,), "kwargs": {}, "checkpoint": None,
             "checkpoint_key": None})
    return tables


def context(world: World, process: Process, ip: str, name: str) -> ContainerContext:
    return ContainerContext(process=process, network=world.network, rng=world.rng.fork(name),
                            pod={"metadata": {"name": name, "namespace": "default"}},
                            container={"name": name}, env={}, ip=ip, hostname=name)


async def in_process(world: World, name: str, ip: str,
                     body: Callable[[ContainerContext], Awaitable[Any]]) -> Any:
    """Run ``body(ctx)`` as the main of a new process (what a container does)."""
    result: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def main(process: Process) -> None:
        result.set_result(await body(context(world, process, ip, name)))
        await asyncio.Event().wait()

    world.start_process(name, main, host=name)
    return await result


async def measure(label: str, factory: StoreFactory, actors: int, ops: int,
                  world: World) -> dict[str, float]:
    out: dict[str, float] = {}
    raw: GcsStorage = await in_process(world, f"{label}-raw", "10.9.0.1",
                                       lambda ctx: _sync(factory(ctx)))
    for table, entries in records(actors).items():
        await raw.batch_put(table, entries)
    t0 = time.perf_counter()
    for table in ("JOB", "NODE", "ACTOR", "ACTOR_TASK_SPEC", "PLACEMENT_GROUP"):
        await raw.get_all(table)
    out["raw_reload_s"] = time.perf_counter() - t0
    value = b"\x08" * 200
    t0 = time.perf_counter()
    for i in range(ops):
        await raw.put("KV", kv_storage_key("bench", f"raw-{i}"), value)
    out["raw_writes"] = ops / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(ops):
        await raw.get("KV", kv_storage_key("bench", f"raw-{i}"))
    out["raw_reads"] = ops / (time.perf_counter() - t0)
    if not isinstance(raw, MemoryStoreClient):
        await raw.close()

    async def start_gcs(ctx: ContainerContext) -> tuple[GcsServer, float]:
        store = raw if isinstance(raw, MemoryStoreClient) else factory(ctx)
        kind = "redis" if isinstance(store, RedisStoreClient) else label
        server = GcsServer(ctx, store, kind, RayConfig(), port=6379)
        begin = time.perf_counter()
        await server.start()
        return server, time.perf_counter() - begin

    server, out["gcs_reload_s"] = await in_process(world, f"{label}-gcs", "10.9.0.2", start_gcs)
    assert server.loaded["ACTOR"] == actors, server.loaded
    client = GcsClient(bind_caller(world.network, caller="bench"), "10.9.0.2:6379")
    t0 = time.perf_counter()
    for i in range(ops):
        await client.kv_put("bench", f"gcs-{i}", value)
    out["gcs_writes"] = ops / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(ops):
        await client.kv_get("bench", f"gcs-{i}")
    out["gcs_reads"] = ops / (time.perf_counter() - t0)
    world.processes.crash_all()
    if not isinstance(server.storage, MemoryStoreClient):
        await server.storage.close()
    return out


async def _sync(value: GcsStorage) -> GcsStorage:
    return value


def backends(tmp: Path) -> list[tuple[str, Callable[[World], Awaitable[StoreFactory]]]]:
    async def memory(world: World) -> StoreFactory:
        return lambda ctx: MemoryStoreClient(NAMESPACE)

    async def fake(world: World) -> StoreFactory:
        server = fakeredis.FakeServer()
        return lambda ctx: RedisStoreClient(fakeredis.FakeAsyncRedis(server=server), NAMESPACE,
                                            owns_client=True)

    async def pod(world: World) -> StoreFactory:
        ready = asyncio.Event()

        async def main(process: Process) -> int:
            ctx = context(world, process, "10.9.9.9", "redis")
            ctx.on_ready_change(lambda ok: ready.set())
            return await redis_program(ctx)

        world.start_process("redis/main", main, host="redis")
        await ready.wait()
        return lambda ctx: RedisStoreClient(NetworkRedis(ctx.call, "10.9.9.9:6379"), NAMESPACE,
                                            address="redis:6379", external=False,
                                            owns_client=True)

    async def real(world: World) -> StoreFactory:
        url = os.environ["EMU_REDIS_URL"]
        return lambda ctx: RedisStoreClient.from_url(url, NAMESPACE)

    async def rocks(world: World) -> StoreFactory:
        path = tmp / "rocksdb"
        return lambda ctx: RocksDBStoreClient(path, NAMESPACE, holder=ctx.process.name)

    found: list[tuple[str, Callable[[World], Awaitable[StoreFactory]]]] = [
        ("memory", memory), ("fakeredis", fake), ("redis-pod", pod)]
    if os.environ.get("EMU_REDIS_URL"):
        found.append(("redis-server", real))
    found.append(("rocksdb", rocks))
    return found


async def main(actors: int, ops: int, out: list[dict[str, Any]] | None = None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="emu-bench-gcs-"))
    rows: list[tuple[str, dict[str, float]]] = []
    try:
        for label, make in backends(tmp):
            world = World(seed=0)
            factory = await make(world)
            if label == "redis-server":
                cleanup = RedisStoreClient.from_url(os.environ["EMU_REDIS_URL"], NAMESPACE)
                await cleanup.delete_namespace()
                await cleanup.close()
            rows.append((label, await measure(label, factory, actors, ops, world)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not os.environ.get("EMU_REDIS_URL"):
        print("redis-server: skipped (EMU_REDIS_URL not set; scripts/redis-server.sh start)")
    print(f"GCS restart-and-reload of {actors} actors (10 nodes), and {ops} KV ops via the GCS")
    print(f"{'backend':<13}{'raw load':>10}{'GCS start':>11}{'ratio':>7}"
          f"{'raw w/s':>10}{'GCS w/s':>10}{'ratio':>7}{'raw r/s':>10}{'GCS r/s':>10}{'ratio':>7}")
    for label, r in rows:
        if out is not None:
            out.append(row("gcs", f"{label}: restart and reload {actors} actors",
                           r["gcs_reload_s"] * 1000, "ms", baseline=r["raw_reload_s"] * 1000,
                           headline=True))
            out.append(row("gcs", f"{label}: KV writes via the GCS", r["gcs_writes"], "/s",
                           baseline=r["raw_writes"]))
            out.append(row("gcs", f"{label}: KV reads via the GCS", r["gcs_reads"], "/s",
                           baseline=r["raw_reads"]))
        print(f"{label:<13}{r['raw_reload_s'] * 1000:>8.0f}ms{r['gcs_reload_s'] * 1000:>9.0f}ms"
              f"{r['gcs_reload_s'] / r['raw_reload_s']:>7.2f}"
              f"{r['raw_writes']:>10.0f}{r['gcs_writes']:>10.0f}"
              f"{r['gcs_writes'] / r['raw_writes']:>7.2f}"
              f"{r['raw_reads']:>10.0f}{r['gcs_reads']:>10.0f}"
              f"{r['gcs_reads'] / r['raw_reads']:>7.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--actors", type=int, default=10_000)
    parser.add_argument("--ops", type=int, default=2_000)
    parser.add_argument("--quick", action="store_true", help="2,000 actors, 500 ops")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    args = parser.parse_args()
    if args.quick:
        args.actors, args.ops = 2_000, 500
    found: list[dict[str, Any]] = []
    with output(args.json, found), asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        runner.run(main(args.actors, args.ops, found))
