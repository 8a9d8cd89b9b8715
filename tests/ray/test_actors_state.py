"""Detached actors made by job drivers, their death causes in Ray's words, and the dashboard's
state API for actors (``GET /api/v0/actors``) with the body real Ray 2.60 answers."""

from __future__ import annotations

from raytestworld import HEAD_SVC

from emu.ray.faults import kill_raylet
from emu.ray.gcs import WORKER_CRASH_DETAIL

HEAD = "raycluster-head-0"
DASH = f"{HEAD_SVC}:8265"
LIST_COLUMNS = ["actor_id", "class_name", "state", "job_id", "name", "node_id", "pid",
                "ray_namespace"]
DETAIL_COLUMNS = [
    *LIST_COLUMNS, "serialized_runtime_env", "required_resources", "death_cause", "is_detached",
    "placement_group_id", "repr_name", "num_restarts",
    "num_restarts_due_to_lineage_reconstruction", "num_restarts_due_to_node_preemption",
    "call_site", "label_selector", "fallback_strategy"]


class Keeper:
    def ping(self):
        return "pong"


async def make_keepers(job):
    ray = job.init(namespace="actors")
    kept = await ray.create_actor(Keeper, name="keeper", detached=True, max_restarts=-1)
    owned = await ray.create_actor(Keeper, name="owned")
    job.print(await kept.call("ping"), await owned.call("ping"))


async def use_keeper(job):
    ray = job.init(namespace="actors")
    keeper = await ray.get_actor("keeper")
    job.print("found", await keeper.call("ping"))
    victim = await ray.create_actor(Keeper, name="victim", detached=True)
    await ray.kill(victim)


async def run(rw, sid, entrypoint):
    answer = await rw.http(DASH, "POST", "/api/jobs/", {"entrypoint": entrypoint,
                                                        "submission_id": sid})
    assert answer.status == 200, answer.body
    for _ in range(120):
        details = (await rw.http(DASH, "GET", f"/api/jobs/{sid}")).json()
        if details["status"] in ("SUCCEEDED", "FAILED", "STOPPED"):
            return details
        await rw.sleep(1)
    raise AssertionError(f"job {sid} never ended: {details}")


async def actors(rw, query=""):
    answer = await rw.http(DASH, "GET", "/api/v0/actors" + query)
    return answer.status, answer.json()


def by_name(body):
    return {row["name"]: row for row in body["data"]["result"]["result"]}


async def cluster(rw, env=None):
    head = rw.head(HEAD, extra="--num-cpus=1", env=env)
    await head.wait_ready()
    rw.config.entrypoint("python make_keepers.py", make_keepers)
    rw.config.entrypoint("python use_keeper.py", use_keeper)
    return head


async def test_the_list_has_ray_s_envelope_and_columns(ray_world):
    rw = ray_world
    await cluster(rw)
    job = await run(rw, "a", "python make_keepers.py")
    assert job["status"] == "SUCCEEDED", job
    status, body = await actors(rw)
    assert status == 200
    assert (body["result"], body["msg"], sorted(body["data"])) == (True, "", ["result"])
    listing = body["data"]["result"]
    assert {k: v for k, v in listing.items() if k != "result"} == {
        "total": 3, "num_after_truncation": 3, "num_filtered": 3,
        "partial_failure_warning": "", "warnings": None}
    rows = listing["result"]
    assert [list(row) for row in rows] == [LIST_COLUMNS] * 3
    assert [r["actor_id"] for r in rows] == sorted(r["actor_id"] for r in rows)
    named = by_name(body)
    assert (named["keeper"]["state"], named["keeper"]["class_name"],
            named["keeper"]["ray_namespace"], named["keeper"]["job_id"]) == (
        "ALIVE", "Keeper", "actors", job["job_id"])
    assert named["keeper"]["pid"] > 0 and named["keeper"]["node_id"]
    supervisor = named["_ray_internal_job_actor_a"]
    assert (supervisor["class_name"], supervisor["ray_namespace"], supervisor["state"]) == (
        "JobSupervisor", "SUPERVISOR_ACTOR_RAY_NAMESPACE", "DEAD")


async def test_a_non_detached_actor_dies_with_its_driver_in_ray_s_words(ray_world):
    rw = ray_world
    head = await cluster(rw)
    job = await run(rw, "a", "python make_keepers.py")
    status, body = await actors(rw, "?detail=true")
    assert status == 200
    named = by_name(body)
    assert list(named["owned"]) == DETAIL_COLUMNS
    owner = job["job_id"] + "ff" * 24
    ip = head.ip  # the driver ran on the head, and so did its actor
    assert named["owned"]["death_cause"] == {"actor_died_error_context": {
        "error_message": (f"The actor is dead because its owner has died. Owner Id: {owner} "
                          f"Owner Ip address: {ip} Owner worker exit type: INTENDED_USER_EXIT "
                          "Worker exit detail: Owner's worker process has crashed."),
        "owner_id": owner, "owner_ip_address": ip, "node_ip_address": ip,
        "pid": named["owned"]["pid"], "name": "owned", "ray_namespace": "actors",
        "class_name": "Keeper", "actor_id": named["owned"]["actor_id"], "reason": "OWNER_DIED",
        "never_started": False}}
    kept = named["keeper"]
    assert (kept["state"], kept["is_detached"], kept["death_cause"], kept["num_restarts"],
            kept["required_resources"], kept["serialized_runtime_env"]) == (
        "ALIVE", True, None, "0", {}, "{}")
    supervisor = named["_ray_internal_job_actor_a"]["death_cause"]["actor_died_error_context"]
    assert (supervisor["reason"], supervisor["error_message"]) == (
        "WORKER_DIED", "The actor is dead because its worker process has died. Worker exit "
                       "type: INTENDED_USER_EXIT Worker exit detail: Worker exits by an user "
                       "request. Worker exits with an exit code 0. exit_actor() is called.")


async def test_a_later_job_finds_the_detached_actor_by_name_and_kills_another(ray_world):
    rw = ray_world
    await cluster(rw)
    await run(rw, "a", "python make_keepers.py")
    job = await run(rw, "b", "python use_keeper.py")
    assert job["status"] == "SUCCEEDED", job
    logs = (await rw.http(DASH, "GET", "/api/jobs/b/logs")).json()["logs"]
    assert "found pong\n" in logs
    _status, body = await actors(rw, "?detail=1")
    victim = by_name(body)["victim"]
    assert victim["state"] == "DEAD"
    context = victim["death_cause"]["actor_died_error_context"]
    assert (context["reason"], context["error_message"]) == (
        "RAY_KILL", "The actor is dead because it was killed by `ray.kill`.")
    assert by_name(body)["keeper"]["state"] == "ALIVE"


async def test_filters_limit_and_bad_options_answer_as_ray_does(ray_world):
    rw = ray_world
    await cluster(rw)
    await run(rw, "a", "python make_keepers.py")
    status, body = await actors(
        rw, "?filter_keys=state&filter_predicates=%3D&filter_values=alive&limit=1")
    listing = body["data"]["result"]
    assert (status, listing["total"], listing["num_after_truncation"], listing["num_filtered"],
            [r["name"] for r in listing["result"]]) == (200, 3, 3, 1, ["keeper"])
    _status, body = await actors(
        rw, "?filter_keys=name&filter_predicates=!%3D&filter_values=KEEPER")
    assert sorted(by_name(body)) == ["_ray_internal_job_actor_a", "owned"]
    _status, body = await actors(rw, "?limit=1")
    assert (body["data"]["result"]["num_filtered"], len(body["data"]["result"]["result"])) == (
        3, 1)
    bad = {
        "?filter_keys=is_detached&filter_predicates=%3D&filter_values=true":
            "The given filter column is_detached is not supported. Enter filters with "
            "\u2013-filter key=value or \u2013-filter key!=value Supported filter columns: "
            "{'actor_id', 'class_name', 'job_id', 'name', 'node_id', 'pid', "
            "'placement_group_id', 'ray_namespace', 'repr_name', 'state'}",
        "?filter_keys=state&filter_predicates=%3D&filter_values=bogus":
            "Invalid actor state for filtering: BOGUS",
        "?filter_keys=name&filter_predicates=~&filter_values=x":
            "Unsupported filter predicate ~ is given. Available predicates: =, !=.",
        "?limit=abc": "invalid literal for int() with base 10: 'abc'",
        "?limit=100000": "Given limit 100000 exceeds the supported limit 10000. Use a lower "
                         "limit, or set the `RAY_MAX_LIMIT_FROM_API_SERVER` environment "
                         "variable to a larger value.",
        "?detail=maybe": "Failed to convert a value maybe of type <class 'str'> to "
                         "<class 'bool'>",
    }
    for query, message in bad.items():
        assert await actors(rw, query) == (400, {"result": False, "msg": message,
                                                 "data": {"result": None}}), query


async def test_a_detached_actor_is_alive_again_after_a_head_restart_only_with_redis(ray_world):
    rw = ray_world
    rw.redis()
    redis_env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "ns"}
    for env in (redis_env, None):
        head = await cluster(rw, env)
        await run(rw, "a", "python make_keepers.py")
        pid = by_name((await actors(rw))[1])["keeper"]["pid"]
        assert head.ctx is not None
        for handler in head.ctx.sigterm_handlers:  # ray start's SIGTERM: the node drains
            await handler()
        head.crash()
        await rw.sleep(10)
        head.start()
        await head.wait_ready()
        await rw.sleep(5)
        _status, body = await actors(rw, "?detail=true")
        named = by_name(body)
        if env is None:
            assert named == {}, "without fault tolerance the actors are gone with the head"
            continue
        kept = named["keeper"]
        assert (kept["state"], kept["num_restarts"],
                kept["num_restarts_due_to_node_preemption"], kept["death_cause"]) == (
            "ALIVE", "1", "1", None)
        assert kept["pid"] != pid, "a new worker on the new head"
        job = await run(rw, "b", "python use_keeper.py")
        assert job["status"] == "SUCCEEDED", job
        head.crash()
        await rw.sleep(1)


async def test_a_detached_actor_on_a_worker_outlives_a_head_crash_with_redis(ray_world):
    rw = ray_world
    rw.redis()
    env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "ns"}
    head = await cluster(rw, env)
    worker = rw.worker("worker-0", cpus=2)
    await worker.wait_ready()
    nodes = {n["node_name"]: n["node_id"] for n in await rw.driver().nodes()}

    async def pinned(job):
        ray = job.init(namespace="actors")
        await ray.create_actor(Keeper, name="pinned", detached=True,
                               node_id=nodes["worker-0"])

    rw.config.entrypoint("python pinned.py", pinned)
    await run(rw, "p", "python pinned.py")
    before = by_name((await actors(rw))[1])["pinned"]
    head.crash()
    await rw.sleep(5)
    head.start()
    await head.wait_ready()
    await rw.sleep(40)
    after = by_name((await actors(rw, "?detail=true"))[1])["pinned"]
    assert (after["state"], after["pid"], after["node_id"], after["num_restarts"]) == (
        "ALIVE", before["pid"], nodes["worker-0"], "0")


async def test_node_death_and_spent_restarts_give_ray_s_death_causes(ray_world):
    rw = ray_world
    await cluster(rw)
    for i in range(2):
        rw.worker(f"worker-{i}")
    driver = rw.driver()
    await driver.connect()
    nodes = {n["node_name"]: n["node_id"] for n in await driver.nodes()}
    await driver.create_actor(Keeper, name="plain", node_id=nodes["worker-0"])
    fragile = await driver.create_actor(Keeper, name="fragile", node_id=nodes["worker-1"],
                                        max_restarts=1, soft=True)
    kill_raylet(rw.world, "worker-0")
    await rw.sleep(30)
    for _ in range(2):
        record = await fragile.state()
        raylet_workers = [p for p in rw.world.processes.all()
                          if p.alive and p.name.endswith(f"worker-{fragile.actor_id}")]
        assert len(raylet_workers) == 1, record
        raylet_workers[0].crash("segfault")
        await rw.sleep(5)
    _status, body = await actors(rw, "?detail=true")
    named = by_name(body)
    plain = named["plain"]["death_cause"]["actor_died_error_context"]
    assert plain["reason"] == "NODE_DIED"
    assert plain["error_message"] == (
        f"The actor died because its node has died. Node Id: {nodes['worker-0']}\n\tthe "
        "actor's node was terminated unexpectedly: health check failed due to missing too "
        "many heartbeats")
    assert plain["node_death_info"] == {
        "reason": "UNEXPECTED_TERMINATION",
        "reason_message": "health check failed due to missing too many heartbeats"}
    assert named["plain"]["node_id"] == nodes["worker-0"], "the node it was last on"
    spent = named["fragile"]
    assert (spent["state"], spent["num_restarts"]) == ("DEAD", "1")
    context = spent["death_cause"]["actor_died_error_context"]
    assert (context["reason"], context["error_message"]) == (
        "WORKER_DIED", "The actor is dead because its worker process has died. Worker exit "
                       f"type: SYSTEM_ERROR Worker exit detail: {WORKER_CRASH_DETAIL}")


async def test_the_list_waits_for_a_lost_gcs_then_answers_ray_s_500(ray_world):
    rw = ray_world
    head = await cluster(rw)
    from emu.ray.faults import kill_gcs

    kill_gcs(rw.world, head.name, "TERM")
    start = rw.now
    status, body = await actors(rw)
    assert status == 500 and body["result"] is False and body["data"] == {"result": None}
    assert body["msg"].startswith("Failed to query data from GCS.")
    assert 29.0 <= rw.now - start <= 31.0
