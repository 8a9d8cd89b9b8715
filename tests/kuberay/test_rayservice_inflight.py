"""Requests in flight during a blue/green switch: measured, not assumed.

Each request takes 2 s in its replica (``ServeAppBehaviour.request_seconds``). With KubeRay's
default 60 s deletion delay the old cluster outlives every request it took, so none fails; with
``rayClusterDeletionDelaySeconds: 0`` the old cluster goes 2 s after the promotion (the next
pass) while EndpointSlices have only just moved, and the requests it was still working on are cut.
"""

from __future__ import annotations

import asyncio
from typing import Any

from test_rayservice_support import (
    NS,
    active_name,
    bump_ray_version,
    is_ready,
    rayservice,
    update_rs,
    world,
)

from emu.ray import ServeAppBehaviour
from emu.runtime import HttpClient

APP = "fruit.deployment_graph"
REQUEST_SECONDS = 2.0


class SlowClient:
    """A ``GET /fruit`` to the serve Service every 0.5 s, each in its own task (so several are
    in flight at once), with a 30 s client timeout."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.results: list[tuple[float, bool]] = []
        self.process = sim.start_process("slow-client", self._run)

    async def _run(self, process: Any) -> None:
        http = HttpClient(self.sim.network, process, timeout=30.0)

        async def one() -> None:
            t = self.sim.now
            try:
                ok = (await http.request(f"rs-serve-svc.{NS}.svc.cluster.local:8000", "GET",
                                         "/fruit")).status == 200
            except Exception:
                ok = False
            self.results.append((t, ok))

        while True:
            process.spawn(one())
            await asyncio.sleep(0.5)

    def failed(self, since: float = 0.0) -> list[float]:
        return sorted(t for t, ok in self.results if not ok and t >= since)


async def _upgrade(sim: Any, **spec: Any) -> tuple[str, str, SlowClient, float]:
    await world(sim)
    sim.ray_config.serve_apps[APP] = ServeAppBehaviour(request_seconds=REQUEST_SECONDS)
    await sim.apply(rayservice(replicas=1, **spec))
    rs = await sim.wait_for("RayService", "rs", is_ready, timeout=300)
    old = active_name(rs)
    client = SlowClient(sim)
    await sim.sleep(5)
    t0 = sim.now
    await update_rs(sim, "rs", bump_ray_version("2.47.0"))
    rs = await sim.wait_for("RayService", "rs", lambda o: active_name(o) not in ("", old),
                            timeout=300)
    return old, active_name(rs), client, t0


async def test_with_the_default_deletion_delay_no_request_in_flight_is_lost(sim):
    old, _new, client, t0 = await _upgrade(sim)
    await sim.sleep(70)  # the old cluster is deleted 60-62 s after the promotion
    assert await sim.get("RayCluster", old, NS) is None
    await sim.sleep(REQUEST_SECONDS + 1)
    assert len(client.results) > 100 and client.failed(t0) == []


async def test_without_a_deletion_delay_requests_in_flight_on_the_old_cluster_are_cut(sim):
    old, _new, client, t0 = await _upgrade(sim, rayClusterDeletionDelaySeconds=0)
    t_promoted = sim.now
    await sim.sleep(10)
    assert await sim.get("RayCluster", old, NS) is None
    await sim.sleep(REQUEST_SECONDS + 1)
    failed = client.failed(t0)
    print(f"\n{len(failed)} cut, sent at {failed}; promoted t={t_promoted:.1f}")
    assert failed, "requests the old cluster was working on should be cut"
    # all of them sent to the old cluster shortly before its deletion (within one request time
    # plus the slices' move), none long before or after
    assert all(t_promoted - REQUEST_SECONDS - 2 <= t <= t_promoted + 4 for t in failed), \
        (failed, t_promoted)
