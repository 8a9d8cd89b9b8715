"""``apiserver-churn``: 200 clients racing on a handful of ConfigMaps, with watchers.

The foundation's own scenario: many concurrent writers doing seeded creates, read-modify-write
updates (which conflict when another writer got there first), and deletes, while watchers follow
every change. It shows optimistic concurrency at work (409 Conflict on a stale resourceVersion,
409 AlreadyExists on a taken name) and checks the watch contract: every committed change is seen
once, in commit order. Its digest is the determinism check's subject: same seed, same history.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from ..apiserver.errors import ApiError
from ..kernel.process import Process
from ..simulation import Simulation
from . import Report, scenario

CLIENTS = 200
OPS_PER_CLIENT = 10
NAMES = 12
WATCHERS = 3


@scenario("apiserver-churn", "200 clients race on 12 ConfigMaps; conflicts, and watches that "
                             "see every change once")
async def apiserver_churn(sim: Simulation, report: Report) -> None:
    """200 concurrent clients create, update (some conflicting) and delete ConfigMaps while three
    watchers follow; expectations: conflicts happen, resourceVersions only grow, and each watcher
    sees exactly the committed changes in commit order."""
    outcomes: Counter[str] = Counter()
    committed: list[tuple[int, str, str]] = []
    start_rv = sim.api.resource_version
    seen: dict[int, list[tuple[int, str, str]]] = {i: [] for i in range(WATCHERS)}
    done = asyncio.Event()

    async def watcher(index: int, proc: Process) -> None:
        client = sim.client(process=proc)
        stream = await client.watch("ConfigMap", "default", resource_version=str(start_rv))
        async for event in stream:
            obj = event["object"]
            seen[index].append((int(obj["metadata"]["resourceVersion"]), event["type"],
                                obj["metadata"]["name"]))

    def watcher_main(index: int) -> Callable[[Process], Awaitable[None]]:
        return lambda proc: watcher(index, proc)

    for i in range(WATCHERS):
        sim.start_process(f"watcher-{i}", watcher_main(i))
    await sim.sleep(0.001)

    async def writer(proc: Process) -> None:
        client = sim.client(process=proc)
        rng = sim.rng.fork(proc.name)
        for op_index in range(OPS_PER_CLIENT):
            name = f"cm-{rng.randrange(NAMES)}"
            op = rng.choice(("create", "update", "update", "delete"))
            await proc.sleep(rng.random() * 0.05)
            try:
                if op == "create":
                    obj = await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": name, "namespace": "default"},
                                               "data": {"by": proc.name}})
                    committed.append((int(obj["metadata"]["resourceVersion"]), "ADDED", name))
                elif op == "update":
                    cur = await client.get("ConfigMap", name, "default")
                    await proc.sleep(rng.random() * 0.01)  # think time: others may write meanwhile
                    # a value no earlier write had: an update that changes nothing is a no-op
                    # (no new resourceVersion, no watch event), as in Kubernetes
                    cur.setdefault("data", {})["by"] = f"{proc.name}/{op_index}"
                    obj = await client.update(cur)
                    committed.append((int(obj["metadata"]["resourceVersion"]), "MODIFIED", name))
                else:
                    await client.delete("ConfigMap", name, "default")
                    committed.append((sim.api.resource_version, "DELETED", name))
                outcomes[f"{op}:ok"] += 1
            except ApiError as err:
                outcomes[f"{op}:{err.reason}"] += 1
        writers_left[0] -= 1
        if writers_left[0] == 0:
            done.set()

    writers_left = [CLIENTS]
    for i in range(CLIENTS):
        sim.start_process(f"client-{i:03d}", writer)
    await done.wait()
    await sim.sleep(1)

    committed.sort()
    for key in sorted(outcomes):
        report.fact(key, outcomes[key])
    report.fact("resource_version", sim.api.resource_version)
    report.expect("concurrent read-modify-write updates meet 409 Conflict",
                  outcomes["update:Conflict"] > 0, f"{outcomes['update:Conflict']} conflicts")
    report.expect("creates of a taken name meet 409 AlreadyExists",
                  outcomes["create:AlreadyExists"] > 0,
                  f"{outcomes['create:AlreadyExists']} refused")
    rvs = [rv for rv, _, _ in committed]
    dupes = sorted({rv for rv in rvs if rvs.count(rv) > 1})
    report.expect("every committed write has a distinct, growing resourceVersion",
                  not dupes, f"{len(rvs)} writes" + (f"; repeated: {dupes[:5]}" if dupes else ""))
    for i in range(WATCHERS):
        got = seen[i]
        in_order = all(a[0] < b[0] for a, b in itertools.pairwise(got))
        report.expect(f"watcher {i} saw every change exactly once, in commit order",
                      in_order and _same(got, committed),
                      f"{len(got)} events for {len(committed)} writes")


def _same(seen: list[Any], committed: list[Any]) -> bool:
    return [(t, n) for _, t, n in seen] == [(t, n) for _, t, n in committed]
