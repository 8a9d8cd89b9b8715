"""Head loss: what survives is decided by where the GCS keeps its tables (FACTS §2.2, §2.3)."""

from __future__ import annotations

import pytest
from ray_actors import Counter

HEAD = "raycluster-head-0"
UID = "864b004c-6305-42e3-ac46-adfa8eb6f752"


def ft_env(backend: str) -> tuple[dict[str, str], dict[str, str]]:
    """(head env, worker env) as KubeRay writes them for each backend."""
    if backend == "memory":
        return {}, {}
    workers = {"RAY_gcs_rpc_server_reconnect_timeout_s": "600"}
    if backend == "redis":
        return {"RAY_REDIS_ADDRESS": "redis:6379", "REDIS_PASSWORD": "5241590000000000",
                "RAY_external_storage_namespace": UID}, workers
    return {"RAY_gcs_storage": "rocksdb", "RAY_gcs_storage_path": "/data/gcs"}, workers


async def start_cluster(rw, backend, tmp_path):
    head_env, worker_env = ft_env(backend)
    volumes = {}
    if backend == "redis":
        redis = rw.redis(password="5241590000000000")
        await redis.wait_ready()
    if backend == "rocksdb":
        volumes = {"/data/gcs": tmp_path / "gcs-pvc"}
    head = rw.head(HEAD, env=head_env, volumes=volumes)
    workers = [rw.worker(f"worker-{i}", env=worker_env) for i in range(2)]
    for pod in (head, *workers):
        await pod.wait_ready()
    return head, workers


@pytest.mark.parametrize("backend", ["memory", "redis", "rocksdb"])
async def test_head_pod_loss_keeps_cluster_state_only_with_fault_tolerance(ray_world, tmp_path,
                                                                           backend):
    rw = ray_world
    head, workers = await start_cluster(rw, backend, tmp_path)
    driver = rw.driver()
    await driver.connect()
    nodes = {n["node_name"]: n["node_id"] for n in await driver.nodes()}
    keeper = await driver.create_actor(Counter, name="keeper", detached=True,
                                       node_id=nodes["worker-0"])
    assert await keeper.call("incr", 3) == 3
    await driver.create_actor(Counter, name="on-head", detached=True, head=True, num_cpus=0)
    phoenix = await driver.create_actor(Counter, 100, name="phoenix", detached=True, head=True,
                                        num_cpus=0, max_restarts=1)
    await phoenix.call("incr")
    before = (await driver.gcs.check_alive())["cluster_id"]

    head.crash()
    await rw.sleep(5)
    new_head = head.replace(HEAD + "-new")
    await new_head.wait_ready()
    await rw.sleep(40)

    after = (await driver.gcs.check_alive())["cluster_id"]
    state = {n["node_name"]: n["state"] for n in await driver.nodes()}
    survivors = [name for name in ("keeper", "on-head", "phoenix")
                 if await driver.gcs.named_actor(name, "") is not None]
    if backend == "memory":
        assert after != before
        assert state == {HEAD + "-new": "ALIVE"}
        assert [w.alive for w in workers] == [False, False]
        assert [w.process.exit_code for w in workers] == [1, 1]
        assert survivors == []
        return
    assert after == before
    assert state == {HEAD: "DEAD", HEAD + "-new": "ALIVE", "worker-0": "ALIVE",
                     "worker-1": "ALIVE"}
    # the new head's registration declares the old one dead with Ray's InferDeathInfo text
    [old] = [n for n in await driver.nodes() if n["node_name"] == HEAD]
    assert old["death_reason"] == "health check failed due to missing too many heartbeats"
    assert [w.alive for w in workers] == [True, True]
    assert survivors == ["keeper", "phoenix"]
    assert await keeper.call("get") == 3, "its worker process never died: memory intact"
    record = await phoenix.state()
    assert (record["state"], record["num_restarts"]) == ("ALIVE", 1)
    assert await phoenix.call("get") == 100, "restarted: the constructor ran again"
    on_head = [a for a in await driver.gcs.actors() if a["name"] == "on-head"]
    assert [a["state"] for a in on_head] == ["DEAD"]
    assert on_head[0]["death_cause"].startswith("The actor died because its node has died.")
