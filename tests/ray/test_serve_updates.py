"""Serve config updates as real Serve applies them, and what in-flight requests see.

Real Serve (``deployment_state.py``): options that do not change a replica's version
(``num_replicas``, ``user_config``, autoscaling, ``max_ongoing_requests``, ``target_capacity``,
...) apply to the running replicas; a code or ``ray_actor_options`` change rolls them — at most
``max(20% of the target, 1)`` old replicas stop at a time, their replacements start at once — and
a stopping replica drains (``graceful_shutdown_wait_loop_s``) or is killed at
``graceful_shutdown_timeout_s`` with its requests. Proxies queue a request until a replica has
room; a proxy whose node lost its replicas drains for 30 s before it stops."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import attrs

from emu.kernel.network import ConnectionRefused
from emu.ray.config import ServeAppBehaviour
from emu.ray.serve import capacity_adjusted

from test_serve import CONFIG, DASH, apps, cluster  # isort: skip

APP = "fruit.deployment_graph"


def _replicas(app: dict[str, Any]) -> dict[str, str]:
    return {r["replica_id"]: r["state"] for d in app["deployments"].values()
            for r in d["replicas"]}


def _config(num_replicas: int = 2, **deployment: Any) -> dict[str, Any]:
    config = copy.deepcopy(CONFIG)
    config["applications"][0]["deployments"][0].update(num_replicas=num_replicas, **deployment)
    return config


def _behave(rw: Any, import_path: str = APP, **fields: Any) -> None:
    rw.config.serve_apps[import_path] = attrs.evolve(rw.config.serve_behaviour(import_path),
                                                     **fields)


class Client:
    """``GET /fruit`` to ``address`` every ``interval`` s, each request in its own task."""

    def __init__(self, rw: Any, address: str, interval: float = 0.25) -> None:
        self.rw = rw
        self.address = address
        self.results: list[tuple[float, float, int]] = []  # (sent, answered, status)
        self._task = asyncio.ensure_future(self._run(interval))
        self._inflight: list[asyncio.Future[Any]] = []

    async def _one(self) -> None:
        sent = self.rw.now
        try:
            status = (await self.rw.http(self.address, "GET", "/fruit")).status
        except Exception:
            status = 0
        self.results.append((sent, self.rw.now, status))

    async def _run(self, interval: float) -> None:
        while True:
            self._inflight.append(asyncio.ensure_future(self._one()))
            await asyncio.sleep(interval)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(*self._inflight)

    def failed(self) -> list[tuple[float, float, int]]:
        return [r for r in self.results if r[2] != 200]


def test_capacity_adjusted_rounds_half_up_and_keeps_one_replica():
    assert capacity_adjusted(4, None) == 4
    assert capacity_adjusted(4, 100) == 4
    assert capacity_adjusted(4, 0) == 0
    assert capacity_adjusted(0, 50) == 0
    assert capacity_adjusted(1, 10) == 1
    assert capacity_adjusted(3, 50) == 2  # 1.5 rounds up
    assert capacity_adjusted(5, 10) == 1  # 0.5 rounds up


async def test_code_change_rolls_replicas_without_a_failed_request(ray_world):
    rw = ray_world
    _head, workers = await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(2))
    await rw.sleep(8)
    before = _replicas((await apps(rw))["fruit"])
    assert list(before.values()) == ["RUNNING", "RUNNING"]
    client = Client(rw, f"{workers[0].ip}:8000")
    code = _config(2)
    code["applications"][0]["import_path"] = "fruit.v2"
    await rw.http(DASH, "PUT", "/api/serve/applications/", code)
    # the build (2 s): DEPLOYING while the old replicas keep serving
    await rw.sleep(1)
    fruit = (await apps(rw))["fruit"]
    assert fruit["status"] == "DEPLOYING" and _replicas(fruit) == before
    seen: list[dict[str, str]] = []
    for _ in range(40):
        await rw.sleep(0.5)
        fruit = (await apps(rw))["fruit"]
        seen.append(_replicas(fruit))
        if fruit["status"] == "RUNNING":
            break
    assert fruit["status"] == "RUNNING"
    after = _replicas(fruit)
    assert len(after) == 2 and not set(after) & set(before)
    # one old replica at a time (20% of 2, at least 1): never both old ones stopping
    for snapshot in seen:
        old_stopping = [r for r, s in snapshot.items() if r in before and s == "STOPPING"]
        old_serving = [r for r, s in snapshot.items() if r in before and s == "RUNNING"]
        new_running = [r for r, s in snapshot.items() if r not in before and s == "RUNNING"]
        assert len(old_stopping) <= 1
        assert old_serving or new_running  # something always serves
    await client.stop()
    assert client.results and not client.failed()


async def test_single_replica_roll_queues_requests_instead_of_failing_them(ray_world):
    """With one replica Serve stops the old one as it starts the new one: requests meanwhile
    wait in the proxy (latency of about the replica start), none fails."""
    rw = ray_world
    head, _workers = await cluster(rw)
    _behave(rw, replica_start_seconds=3.0)
    _behave(rw, "fruit.v2", replica_start_seconds=3.0)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(1))
    await rw.sleep(8)
    client = Client(rw, f"{head.ip}:8000")
    code = _config(1)
    code["applications"][0]["import_path"] = "fruit.v2"
    await rw.http(DASH, "PUT", "/api/serve/applications/", code)
    await rw.sleep(12)
    await client.stop()
    assert client.results and not client.failed()
    slowest = max(answered - sent for sent, answered, _ in client.results)
    assert 2.0 <= slowest <= 5.0


async def test_options_update_keeps_replicas_and_target_capacity_scales_them(ray_world):
    rw = ray_world
    await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(4))
    await rw.sleep(8)
    before = _replicas((await apps(rw))["fruit"])
    assert len(before) == 4
    options = _config(4, user_config={"price": 3}, max_ongoing_requests=10,
                      graceful_shutdown_timeout_s=5)
    await rw.http(DASH, "PUT", "/api/serve/applications/", options)
    await rw.sleep(3)
    fruit = (await apps(rw))["fruit"]
    assert (fruit["status"], _replicas(fruit)) == ("RUNNING", before)
    await rw.http(DASH, "PUT", "/api/serve/applications/", {**options, "target_capacity": 50})
    await rw.sleep(5)
    fruit = (await apps(rw))["fruit"]
    assert fruit["status"] == "RUNNING"
    assert set(_replicas(fruit)) < set(before) and len(_replicas(fruit)) == 2
    answer = await rw.http(DASH, "GET", "/api/serve/applications/")
    assert answer.json()["target_capacity"] == 50
    await rw.http(DASH, "PUT", "/api/serve/applications/", {**options, "target_capacity": 0})
    await rw.sleep(5)
    fruit = (await apps(rw))["fruit"]
    assert (fruit["status"], _replicas(fruit)) == ("RUNNING", {})


async def test_a_stopping_replica_finishes_its_requests_or_is_killed_at_the_timeout(ray_world):
    rw = ray_world
    head, _workers = await cluster(rw)
    _behave(rw, request_seconds=6.0)
    await rw.http(DASH, "PUT", "/api/serve/applications/",
                  _config(1, graceful_shutdown_timeout_s=10))
    await rw.sleep(8)
    slow = asyncio.ensure_future(rw.http(f"{head.ip}:8000", "GET", "/fruit"))
    await rw.sleep(1)
    await rw.http(DASH, "PUT", "/api/serve/applications/",
                  _config(0, graceful_shutdown_timeout_s=10))
    await rw.sleep(2)
    fruit = (await apps(rw))["fruit"]
    assert list(_replicas(fruit).values()) == ["STOPPING"]  # draining its request
    assert (await slow).status == 200  # answered at ~t+6: the drain waited for it
    await rw.sleep(3)
    assert _replicas((await apps(rw))["fruit"]) == {}
    # a request longer than the graceful shutdown timeout is cut: 500 at the timeout
    _behave(rw, request_seconds=60.0)
    await rw.http(DASH, "PUT", "/api/serve/applications/",
                  _config(1, graceful_shutdown_timeout_s=10))
    await rw.sleep(8)
    t0 = rw.now
    cut = asyncio.ensure_future(rw.http(f"{head.ip}:8000", "GET", "/fruit"))
    await rw.sleep(1)
    await rw.http(DASH, "PUT", "/api/serve/applications/",
                  _config(0, graceful_shutdown_timeout_s=10))
    reply = await cut
    assert reply.status == 500 and "died" in reply.body
    assert 10.0 <= rw.now - t0 <= 13.0


async def test_requests_beyond_max_ongoing_requests_wait_for_room(ray_world):
    rw = ray_world
    head, _workers = await cluster(rw)
    _behave(rw, request_seconds=2.0)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(1, max_ongoing_requests=1))
    await rw.sleep(8)
    t0 = rw.now
    replies = await asyncio.gather(*(rw.http(f"{head.ip}:8000", "GET", "/fruit")
                                     for _ in range(3)))
    assert [r.status for r in replies] == [200, 200, 200]
    assert rw.now - t0 == 6.0  # one at a time


async def test_a_request_before_any_replica_runs_waits_for_one(ray_world):
    rw = ray_world
    head, _workers = await cluster(rw)
    _behave(rw, replica_start_seconds=5.0)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(1))
    await rw.sleep(3)  # built (2 s), route pushed, the replica still starting
    assert (await rw.http(f"{head.ip}:8000", "GET", "/-/routes")).status == 200
    t0 = rw.now
    reply = await rw.http(f"{head.ip}:8000", "GET", "/fruit")
    assert reply.status == 200 and rw.now - t0 > 2.0


async def test_a_proxy_whose_node_lost_its_replicas_drains_30s_then_stops(ray_world):
    rw = ray_world
    _head, workers = await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(2))
    await rw.sleep(8)
    proxy = f"{workers[1].ip}:8000"
    assert (await rw.http(proxy, "GET", "/-/healthz")).status == 200
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(1))
    await rw.sleep(6)  # its replica drained and stopped (2 s): the node has none
    nodes = {r["node_ip"] for d in (await apps(rw))["fruit"]["deployments"].values()
             for r in d["replicas"]}
    if workers[1].ip in nodes:  # the kept replica may be on either worker
        proxy = f"{workers[0].ip}:8000"
    health = await rw.http(proxy, "GET", "/-/healthz")
    assert (health.status, health.body) == (503, "This node is being drained.")
    assert (await rw.http(proxy, "GET", "/fruit")).status == 200  # still serving
    await rw.sleep(30)
    try:
        await rw.http(proxy, "GET", "/fruit")
    except ConnectionRefused:
        pass
    else:
        raise AssertionError("the drained proxy still answers")


def test_behaviour_has_a_request_time():
    assert ServeAppBehaviour().request_seconds == 0.0


async def test_scaling_by_a_config_update_keeps_the_app_deploying_until_done(ray_world):
    """Serve's ``_determine_app_status``: UPSCALING started by a config update counts as
    DEPLOYING (so KubeRay does not call the cluster ready mid-scale)."""
    rw = ray_world
    await cluster(rw)
    _behave(rw, replica_start_seconds=5.0)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(1))
    await rw.sleep(10)
    assert (await apps(rw))["fruit"]["status"] == "RUNNING"
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(3))
    await rw.sleep(2)
    fruit = (await apps(rw))["fruit"]
    dep = fruit["deployments"]["FruitMarket"]
    assert (fruit["status"], dep["status"], dep["status_trigger"]) == (
        "DEPLOYING", "UPSCALING", "CONFIG_UPDATE_STARTED")
    await rw.sleep(6)
    fruit = (await apps(rw))["fruit"]
    dep = fruit["deployments"]["FruitMarket"]
    assert (fruit["status"], dep["status"], dep["status_trigger"]) == (
        "RUNNING", "HEALTHY", "UPSCALE_COMPLETED")


async def test_a_ray_actor_options_change_rolls_replicas(ray_world):
    rw = ray_world
    await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", _config(2))
    await rw.sleep(8)
    before = _replicas((await apps(rw))["fruit"])
    await rw.http(DASH, "PUT", "/api/serve/applications/",
                  _config(2, ray_actor_options={"num_cpus": 0.25}))
    await rw.sleep(1)
    fruit = (await apps(rw))["fruit"]
    assert fruit["status"] == "DEPLOYING"  # no build (same code): the roll starts at once
    assert sorted(_replicas(fruit).values()).count("STOPPING") == 1
    await rw.sleep(15)
    fruit = (await apps(rw))["fruit"]
    assert fruit["status"] == "RUNNING"
    assert len(_replicas(fruit)) == 2 and not set(_replicas(fruit)) & set(before)


def test_a_drain_that_times_out_ends_whatever_the_float_sum_of_its_waits() -> None:
    # found in review: the time left was computed as timeout - (now - started); from this start
    # ten 2 s waits leave 19.999999999999996 s elapsed, the next wait came out 7e-15 s — below
    # the loop's 1 ns resolution — and the drain spun at one virtual instant for ever
    import asyncio
    from types import SimpleNamespace

    from emu.kernel.loop import VirtualTimeLoop
    from emu.ray.serve import NodeServe

    loop = VirtualTimeLoop(start=46.921554071180374)
    node = object.__new__(NodeServe)
    logged: list[str] = []
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        assert len(waits) < 100, f"the drain keeps waiting: {waits[-3:]}"
        await asyncio.sleep(seconds)

    node.raylet = SimpleNamespace(ctx=SimpleNamespace(process=SimpleNamespace(sleep=sleep)),
                                  log=lambda event, **_f: logged.append(event))

    async def main() -> float:
        killed = loop.create_future()
        node.replicas = {"r1": {"ongoing": 1, "killed": killed, "state": "STOPPING"}}
        started = loop.time()
        await asyncio.wait_for(node._drain("r1", 2.0, 20.0), 60.0)
        assert killed.done()
        return loop.time() - started

    try:
        took = loop.run_until_complete(main())
    finally:
        loop.close()
    assert logged == ["serve_replica_killed"]
    assert abs(took - 20.0) < 1e-6
