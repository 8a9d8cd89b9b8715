"""API server benchmark: writes, reads, selector lists and watch fan-out, against a same-run baseline.

Prints figures and ratios; asserts nothing (these machines are noisy, so the ratio to a baseline
measured in the same run is the figure to compare across runs).

    PYTHONPATH=. .venv/bin/python benchmarks/apiserver.py [--quick] [--json]

The raw baseline is what the store fundamentally does per update: a dict lookup, a
resourceVersion check and an orjson snapshot (``raw``); ``raw+read`` also decodes the snapshot,
since the server's update returns a fresh object every time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson
from _rows import output, row

from emu.apiserver.server import APIServer
from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.rng import SimRandom


def server() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(7))


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "bench"},
                     "annotations": {"ray.io/ft-enabled": "false"}},
        "spec": {"containers": [{
            "name": "ray-head", "image": "rayproject/ray:2.9.0",
            "ports": [{"containerPort": 6379, "name": "gcs"}, {"containerPort": 8265,
                                                               "name": "dashboard"}],
            "env": [{"name": f"ENV_{i}", "value": f"value-{i}"} for i in range(8)],
            "resources": {"limits": {"cpu": "1", "memory": "2Gi"},
                          "requests": {"cpu": "1", "memory": "2Gi"}},
        }]},
    }


def raycluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {
            "rayVersion": "2.9.0",
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                              "template": {"spec": {"containers": [
                                  {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}},
            "workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 0,
                                  "maxReplicas": 10, "rayStartParams": {},
                                  "template": {"spec": {"containers": [
                                      {"name": "ray-worker",
                                       "image": "rayproject/ray:2.9.0"}]}}}],
        },
    }


def rate(n: int, fn: Callable[[int], None], repeat: int = 3) -> float:
    """Best-of-``repeat`` operations per second of ``fn(n)`` doing ``n`` operations."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t0)
    return n / best


def bench_construct() -> float:
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        server()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
            "data": {f"k{i}": f"v{i}" for i in range(10)}}


def bench_updates(n: int) -> list[tuple[str, float, float, float]]:
    """(case, server updates/s, raw/s, raw+read/s) with the baselines on the same object."""

    def raw_loop(decode: bool, template: dict[str, Any],
                 mutate: Callable[[dict[str, Any], int], None]) -> Callable[[int], None]:
        def run(count: int) -> None:
            store: dict[tuple[str, str], tuple[int, bytes]] = {("default", "x"): (1, b"")}
            rev = 1
            obj = orjson.loads(orjson.dumps(template))
            obj["metadata"]["resourceVersion"] = "1"
            for i in range(count):
                mutate(obj, i)
                cur = store[("default", "x")]
                if str(cur[0]) != obj["metadata"]["resourceVersion"]:
                    raise RuntimeError("conflict")
                rev += 1
                obj["metadata"]["resourceVersion"] = str(rev)
                data = orjson.dumps(obj)
                store[("default", "x")] = (rev, data)
                if decode:
                    obj = orjson.loads(data)
        return run

    def server_loop(make: Callable[[str], dict[str, Any]],
                    mutate: Callable[[dict[str, Any], int], None], status: bool = False
                    ) -> Callable[[int], None]:
        def run(count: int) -> None:
            srv = server()
            obj = srv.create(make("x"))
            update = srv.update_status if status else srv.update
            for i in range(count):
                mutate(obj, i)
                obj = update(obj)
        return run

    def set_data(obj: dict[str, Any], i: int) -> None:
        obj["data"]["k0"] = str(i)

    def set_ray(obj: dict[str, Any], i: int) -> None:
        obj["spec"]["workerGroupSpecs"][0]["replicas"] = i

    def set_image(obj: dict[str, Any], i: int) -> None:
        obj["spec"]["containers"][0]["image"] = f"rayproject/ray:2.{i}"

    def set_phase(obj: dict[str, Any], i: int) -> None:
        obj.setdefault("status", {})["phase"] = "Running" if i % 2 else "Pending"

    cases = [
        ("update ConfigMap (data)", cm, set_data, False),
        ("update RayCluster (spec: generation bump)", raycluster, set_ray, False),
        ("update Pod (image)", pod, set_image, False),
        ("update_status Pod (phase)", pod, set_phase, True),
    ]
    out = []
    for label, make, mutate, status in cases:
        srv_rate = rate(n, server_loop(make, mutate, status))
        raw = rate(n, raw_loop(False, make("x"), mutate))
        raw_read = rate(n, raw_loop(True, make("x"), mutate))
        out.append((label, srv_rate, raw, raw_read))
    return out


def bench_gets(n: int) -> float:
    srv = server()
    for i in range(100):
        srv.create(pod(f"p{i}"))
    get = srv.get

    def run(count: int) -> None:
        for i in range(count):
            get("Pod", f"p{i % 100}", "default")

    return rate(n, run)


def bench_list(objects: int) -> dict[str, float]:
    srv = server()
    for i in range(objects):
        srv.create(pod(f"p{i:05d}", {"app": f"a{i % 100}", "tier": "web" if i % 2 else "db"}))
    out = {}
    for text in ("app=a7", "app=a7,tier=web", "tier=web", "app in (a1,a2,a3)", "app!=a7", ""):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            result = srv.list("Pod", "default", label_selector=text)
            times.append(time.perf_counter() - t0)
        out[f"{text or '(all)'!s} -> {len(result['items'])} items"] = min(times) * 1000
    return out


class BareStore:
    """Workload W's floor: what any store does per operation — a dict, one global revision, the
    resourceVersion check and an orjson snapshot, decoded on every read (so a caller never shares
    the stored state) — and nothing else (no validation, no defaulting, no watch, no network)."""

    def __init__(self) -> None:
        self.rev = 0
        self.items: dict[tuple[str, str], bytes] = {}
        self.rvs: dict[tuple[str, str], int] = {}

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.items:
            raise KeyError(key)
        self.rev += 1
        obj["metadata"]["resourceVersion"] = str(self.rev)
        data = self.items[key] = orjson.dumps(obj)
        self.rvs[key] = self.rev
        return orjson.loads(data)  # type: ignore[no-any-return]

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return orjson.loads(self.items[(namespace, name)])  # type: ignore[no-any-return]

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if str(self.rvs[key]) != obj["metadata"]["resourceVersion"]:
            raise LookupError("conflict")
        return self.create_at(key, obj)

    def create_at(self, key: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
        self.rev += 1
        obj["metadata"]["resourceVersion"] = str(self.rev)
        data = self.items[key] = orjson.dumps(obj)
        self.rvs[key] = self.rev
        return orjson.loads(data)  # type: ignore[no-any-return]

    def list(self, namespace: str, key: str, value: str) -> list[dict[str, Any]]:
        out = []
        for (ns, _), data in self.items.items():
            if ns == namespace:
                obj = orjson.loads(data)
                if obj["metadata"].get("labels", {}).get(key) == value:
                    out.append(obj)
        return out


#: Workload W's steps, in order (issue 17): rates are operations per second.
W_STEPS = ("create", "get", "update", "stale update -> 409", "list by label")


def w_object(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:05d}", "namespace": "default",
                         "labels": {"app": "w", "shard": f"s{i % 20}"}},
            "data": {f"k{j}": f"v{j}" for j in range(5)}}


def bench_workload_w(count: int, stale: int = 200, lists: int = 50, repeat: int = 3
                     ) -> dict[str, tuple[float, float]]:
    """Workload W through ``sim.client`` (as a controller calls it: over the emulated network,
    inside a run) and through `BareStore`, in the same process: {step: (emu/s, bare/s)}, each
    the best of ``repeat`` rounds (emu and bare alternate, so a busy moment hits both)."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        for step, (emu_rate, bare_rate) in _workload_w_once(count, stale, lists).items():
            was = best.get(step, (0.0, 0.0))
            best[step] = (max(was[0], emu_rate), max(was[1], bare_rate))
    return best


#: Workload W's clock: this process's CPU time. Both sides are single-threaded and CPU-bound, so
#: on a quiet machine it equals the wall time, and on a shared one it leaves out other programs'
#: turns, which would otherwise land on whichever side they happen to interrupt.
_clock = time.process_time


def _workload_w_once(count: int, stale: int, lists: int) -> dict[str, tuple[float, float]]:
    import emu

    def timed(fn: Callable[[], None]) -> float:
        t0 = _clock()
        fn()
        return _clock() - t0

    bare = BareStore()
    made: list[dict[str, Any]] = []
    bare_s = {
        "create": timed(lambda: made.extend(bare.create(w_object(i)) for i in range(count))),
        "get": timed(lambda: [bare.get("default", f"cm-{i:05d}") for i in range(count)]),
    }

    def bare_updates() -> None:
        for i, obj in enumerate(made):
            obj["data"]["k0"] = str(i)
            made[i] = bare.update(obj)

    def bare_stale() -> None:
        for i in range(stale):
            obj = w_object(i)
            obj["metadata"]["resourceVersion"] = "1"
            try:
                bare.update(obj)
            except LookupError:
                pass

    bare_s["update"] = timed(bare_updates)
    bare_s["stale update -> 409"] = timed(bare_stale)
    bare_s["list by label"] = timed(
        lambda: [bare.list("default", "shard", f"s{i % 20}") for i in range(lists)])

    emu_s: dict[str, float] = {}

    async def main(sim: emu.Simulation) -> None:
        c = sim.client("bench")
        objs: list[dict[str, Any]] = []
        t0 = _clock()
        for i in range(count):
            objs.append(await c.create(w_object(i)))
        emu_s["create"] = _clock() - t0
        t0 = _clock()
        for i in range(count):
            await c.get("ConfigMap", f"cm-{i:05d}", "default")
        emu_s["get"] = _clock() - t0
        t0 = _clock()
        for i, obj in enumerate(objs):
            obj["data"]["k0"] = str(i)
            objs[i] = await c.update(obj)
        emu_s["update"] = _clock() - t0
        t0 = _clock()
        for i in range(stale):
            obj = w_object(i)
            obj["metadata"]["resourceVersion"] = "1"
            try:
                await c.update(obj)
            except emu.Conflict:
                pass
        emu_s["stale update -> 409"] = _clock() - t0
        t0 = _clock()
        for i in range(lists):
            await c.list("ConfigMap", namespace="default", label_selector=f"shard=s{i % 20}")
        emu_s["list by label"] = _clock() - t0

    emu.run(main, seed=1)
    ops = {"create": count, "get": count, "update": count, "stale update -> 409": stale,
           "list by label": lists}
    return {step: (ops[step] / emu_s[step], ops[step] / bare_s[step]) for step in W_STEPS}


def bench_watch(watchers: int, updates: int) -> float:
    async def main() -> float:
        srv = server()
        obj = srv.create(pod("x"))
        streams = [srv.watch("Pod", "default", resource_version=obj["metadata"]["resourceVersion"])
                   for _ in range(watchers)]
        t0 = time.perf_counter()
        for i in range(updates):
            obj["spec"]["containers"][0]["image"] = f"img:{i}"
            obj = srv.update(obj)
        delivered = 0
        for stream in streams:
            for _ in range(updates):
                await stream.__anext__()
                delivered += 1
        dt = time.perf_counter() - t0
        for stream in streams:
            stream.close()
        return delivered / dt

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as a JSON list of rows (tables go to stderr)")
    args = parser.parse_args()
    n = 5_000 if args.quick else 30_000
    objects = 2_000 if args.quick else 10_000
    rows: list[dict[str, Any]] = []
    b = "apiserver"
    with output(args.json, rows):
        construct = bench_construct()
        rows.append(row(b, "new APIServer, every kind", construct, "ms", target="<= 5 ms"))
        print(f"construct APIServer (all kinds, 4 namespaces): {construct:.2f} ms (median)")
        print("updates via the sync path; baselines on the same object in the same run:")
        print(f"  {'case':44s} {'server/s':>10s} {'raw/s':>10s} {'raw+read/s':>11s} "
              f"{'x raw':>6s} {'x raw+read':>10s}")
        for label, srv_rate, raw, raw_read in bench_updates(n):
            first = not any(r["measure"].startswith("update") for r in rows)
            rows.append(row(b, f"{label} vs raw", srv_rate, "/s", baseline=raw,
                            target=">= 50k/s, >= 0.5x raw" if first else "", headline=first))
            rows.append(row(b, f"{label} vs raw+read", srv_rate, "/s", baseline=raw_read))
            print(f"  {label:44s} {srv_rate:10,.0f} {raw:10,.0f} {raw_read:11,.0f} "
                  f"{srv_rate / raw:6.2f} {srv_rate / raw_read:10.2f}")
        gets = bench_gets(n * 2)
        rows.append(row(b, "get Pod", gets, "/s", target=">= 100k/s", headline=True))
        print(f"{'get Pod':45s} {gets:12,.0f} /s")
        print(f"list Pods by label selector over {objects} objects (ms, best of 5):")
        for label, ms in bench_list(objects).items():
            rows.append(row(b, f"list {label} of {objects}", ms, "ms"))
            print(f"  {label:40s} {ms:8.2f} ms")
        print("watch fan-out (events delivered per second, including the writes):")
        for watchers in (1, 10, 100):
            updates = max(200, (n // 5) // watchers)
            rate_ = bench_watch(watchers, updates)
            rows.append(row(b, f"watch fan-out, {watchers} watchers", rate_, "events/s"))
            print(f"  {watchers:3d} watchers x {updates:5d} updates: {rate_:12,.0f} events/s")
        count = 500 if args.quick else 2_000
        print(f"workload W ({count} ConfigMaps) through sim.client vs a bare store, same run "
              "(CPU time, best of 3 alternating rounds):")
        targets = {"create": ">= 0.5x bare", "get": ">= 0.5x bare", "update": ">= 0.5x bare",
                   "stale update -> 409": ">= 0.3x bare"}
        for step, (emu_rate, bare_rate) in bench_workload_w(count).items():
            rows.append(row(b, f"workload W: {step}", emu_rate, "/s", baseline=bare_rate,
                            target=targets.get(step, ""),
                            headline=step in ("create", "update")))
            print(f"  {step:24s} {emu_rate:10,.0f}/s  bare {bare_rate:10,.0f}/s  "
                  f"{emu_rate / bare_rate:5.2f}x")

if __name__ == "__main__":
    main()
