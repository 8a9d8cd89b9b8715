"""Ray Serve through the dashboard and the proxies: an app's life, failures, and head loss."""

from __future__ import annotations

import pytest
from raytestworld import HEAD_SVC

from emu.kernel.network import ConnectionRefused
from emu.ray.faults import fail_serve_deployment, slow_serve_deployment
from emu.ray.serve import EMPTY_DETAILS

HEAD = "raycluster-head-0"
DASH = f"{HEAD_SVC}:8265"
CONFIG = {
    "applications": [{
        "name": "fruit", "import_path": "fruit.deployment_graph", "route_prefix": "/fruit",
        "deployments": [{"name": "FruitMarket", "num_replicas": 2,
                         "ray_actor_options": {"num_cpus": 0.5}}],
    }],
}


async def cluster(rw, env=None, worker_env=None):
    head = rw.head(HEAD, env=env)
    workers = [rw.worker(f"worker-{i}", env=worker_env, serve_probe=True) for i in range(2)]
    await head.wait_ready()
    return head, workers


async def apps(rw):
    answer = await rw.http(DASH, "GET", "/api/serve/applications/?api_type=declarative")
    assert answer.status == 200, answer.body
    return answer.json()["applications"]


async def test_serve_app_deploys_then_runs_and_every_proxy_serves_it(ray_world):
    rw = ray_world
    head, workers = await cluster(rw)
    assert (await rw.http(DASH, "GET", "/api/serve/applications/")).json() == EMPTY_DETAILS
    with pytest.raises(ConnectionRefused):
        await rw.http(f"{head.ip}:8000", "GET", "/-/healthz")
    assert [w.ready for w in workers] == [False, False], "their probe needs a healthy proxy"

    put = await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    assert (put.status, put.body) == (200, "")
    assert (await apps(rw))["fruit"]["status"] == "DEPLOYING"
    await rw.sleep(8)  # build 2 s, replicas 3 s, a control-loop period
    fruit = (await apps(rw))["fruit"]
    assert (fruit["status"], fruit["route_prefix"]) == ("RUNNING", "/fruit")
    market = fruit["deployments"]["FruitMarket"]
    assert market["status"] == "HEALTHY"
    assert sorted(r["node_ip"] for r in market["replicas"]) == sorted(w.ip for w in workers)
    for address in (f"{head.ip}:8000", *(f"{w.ip}:8000" for w in workers)):
        health = await rw.http(address, "GET", "/-/healthz")
        assert (health.status, health.body) == (200, "success")
    assert [w.ready for w in workers] == [True, True]
    reply = await rw.http(f"{workers[0].ip}:8000", "GET", "/fruit/mango")
    assert (reply.status, reply.body) == (200, "fruit: /fruit/mango")
    missing = await rw.http(f"{head.ip}:8000", "GET", "/veggie")
    assert (missing.status, missing.body) == (
        404, "Path '/veggie' not found. Please ping http://.../-/routes for route table.")
    routes = await rw.http(f"{head.ip}:8000", "GET", "/-/routes")
    assert routes.json() == {"/fruit": "fruit"}


async def test_failing_build_makes_the_app_deploy_failed_with_its_message(ray_world):
    rw = ray_world
    fail_serve_deployment(rw.config, "fruit.deployment_graph", "ModuleNotFoundError: fruit")
    await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    await rw.sleep(5)
    fruit = (await apps(rw))["fruit"]
    assert (fruit["status"], fruit["message"]) == ("DEPLOY_FAILED", "ModuleNotFoundError: fruit")


async def test_slow_deployment_stays_deploying_until_its_build_ends(ray_world):
    rw = ray_world
    slow_serve_deployment(rw.config, "fruit.deployment_graph", build_seconds=60)
    await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    await rw.sleep(30)
    assert (await apps(rw))["fruit"]["status"] == "DEPLOYING"
    await rw.sleep(36)
    assert (await apps(rw))["fruit"]["status"] == "RUNNING"


async def test_put_is_declarative_apps_missing_from_it_are_deleted(ray_world):
    rw = ray_world
    await cluster(rw)
    both = {"applications": [
        {"name": "a", "import_path": "a.app", "route_prefix": "/a"},
        {"name": "b", "import_path": "b.app", "route_prefix": "/b"}]}
    await rw.http(DASH, "PUT", "/api/serve/applications/", both)
    await rw.sleep(8)
    assert {k: v["status"] for k, v in (await apps(rw)).items()} == {"a": "RUNNING",
                                                                     "b": "RUNNING"}
    await rw.http(DASH, "PUT", "/api/serve/applications/",
                  {"applications": both["applications"][1:]})
    assert {k: v["status"] for k, v in (await apps(rw)).items()} == {"a": "DELETING",
                                                                     "b": "RUNNING"}
    # its replicas drain first (graceful_shutdown_wait_loop_s, 2 s) as in Serve
    await rw.sleep(2)
    assert sorted(await apps(rw)) == ["a", "b"]
    await rw.sleep(2)
    assert sorted(await apps(rw)) == ["b"]


async def test_invalid_serve_config_is_400_with_the_reason(ray_world):
    rw = ray_world
    await cluster(rw)
    dup = {"applications": [{"name": "a", "import_path": "x:y", "route_prefix": "/a"},
                            {"name": "a", "import_path": "x:z", "route_prefix": "/b"}]}
    answer = await rw.http(DASH, "PUT", "/api/serve/applications/", dup)
    assert (answer.status, answer.body) == (
        400, "Found duplicate application names: ['a']. Application names must be unique.")
    bad = await rw.http(DASH, "GET", "/api/serve/applications/?api_type=other")
    assert bad.status == 400


async def test_replica_lost_with_its_node_makes_the_app_unhealthy_until_replaced(ray_world):
    rw = ray_world
    _, workers = await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    await rw.sleep(8)
    workers[1].crash()
    seen = []
    for _ in range(25):  # the node fails its health checks; the replica is replaced
        await rw.sleep(1)
        status = (await apps(rw))["fruit"]["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
    assert seen == ["RUNNING", "UNHEALTHY", "RUNNING"]
    replicas = (await apps(rw))["fruit"]["deployments"]["FruitMarket"]["replicas"]
    assert [r["node_ip"] for r in replicas] == [workers[0].ip, workers[0].ip]


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_serve_apps_survive_a_head_restart_only_with_fault_tolerance(ray_world, backend):
    rw = ray_world
    env: dict[str, str] = {}
    worker_env: dict[str, str] = {}
    if backend == "redis":
        await rw.redis().wait_ready()
        env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "uid-1"}
        worker_env = {"RAY_gcs_rpc_server_reconnect_timeout_s": "600"}
    head, workers = await cluster(rw, env, worker_env)
    await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    await rw.sleep(8)
    head.crash()
    await rw.sleep(5)
    served = await rw.http(f"{workers[0].ip}:8000", "GET", "/fruit/kiwi")
    assert served.status == 200, "worker proxies keep serving while the head is gone"
    new_head = head.replace(HEAD + "-b")
    await new_head.wait_ready()
    await rw.sleep(30)
    after = await apps(rw)
    if backend == "memory":
        assert after == {}, "no controller, no checkpoint: KubeRay must PUT the config again"
        assert [w.alive for w in workers] == [False, False]
        return
    assert after["fruit"]["status"] == "RUNNING"
    replicas = after["fruit"]["deployments"]["FruitMarket"]["replicas"]
    assert sorted(r["node_ip"] for r in replicas) == sorted(w.ip for w in workers), \
        "the recovered controller kept the replicas that never died"
    health = await rw.http(f"{new_head.ip}:8000", "GET", "/-/healthz")
    assert (health.status, health.body) == (200, "success")


def _replica_ids(fruit):
    return sorted(r["replica_id"] for r in fruit["deployments"]["FruitMarket"]["replicas"])


async def test_lightweight_update_keeps_replicas_and_a_code_change_replaces_them(ray_world):
    import copy

    rw = ray_world
    _head, workers = await cluster(rw)
    await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    await rw.sleep(8)
    before = _replica_ids((await apps(rw))["fruit"])
    assert len(before) == 2
    light = copy.deepcopy(CONFIG)
    light["applications"][0]["deployments"][0]["user_config"] = {"price": 3}
    assert (await rw.http(DASH, "PUT", "/api/serve/applications/", light)).status == 200
    for _ in range(10):  # no outage: the app keeps running on the same replicas
        fruit = (await apps(rw))["fruit"]
        assert (fruit["status"], _replica_ids(fruit)) == ("RUNNING", before)
        reply = await rw.http(f"{workers[0].ip}:8000", "GET", "/fruit/a")
        assert reply.status == 200
        await rw.sleep(1)
    light["applications"][0]["deployments"][0]["num_replicas"] = 1
    await rw.http(DASH, "PUT", "/api/serve/applications/", light)
    await rw.sleep(5)
    fruit = (await apps(rw))["fruit"]
    assert (fruit["status"], _replica_ids(fruit)) == ("RUNNING", before[:1])
    code = copy.deepcopy(light)
    code["applications"][0]["import_path"] = "fruit.v2"
    await rw.http(DASH, "PUT", "/api/serve/applications/", code)
    await rw.sleep(10)
    fruit = (await apps(rw))["fruit"]
    assert fruit["status"] == "RUNNING"
    assert not set(_replica_ids(fruit)) & set(before)
