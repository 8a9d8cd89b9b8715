"""The dashboard's Jobs API: statuses, Ray's exact errors, head loss, and KubeRay's submitter."""

from __future__ import annotations

import asyncio

import pytest
from raytestworld import HEAD_SVC

from emu.ray.faults import fail_job
from emu.ray.jobs import pending_message

HEAD = "raycluster-head-0"
DASH = f"{HEAD_SVC}:8265"
#: The first line of a driver log (the virtual epoch is 2026-01-01 00:00:00 UTC).
RUNTIME_ENV = "2026-01-01 {t}\tINFO job_manager.py:581 -- Runtime env is setting up."

DUPLICATE_BODY = (
    "Traceback (most recent call last):\n"
    '  File "ray/dashboard/modules/job/job_head.py", in submit_job\n'
    "    resp = await job_agent_client.submit_job_internal(submit_request)\n"
    '  File "ray/dashboard/modules/job/job_head.py", in submit_job_internal\n'
    "    await self._raise_error(resp)\n"
    '  File "ray/dashboard/modules/job/job_head.py", in _raise_error\n'
    '    raise RuntimeError(f"Request failed with status code {status}: {error_text}.")\n'
    "RuntimeError: Request failed with status code 400: Traceback (most recent call last):\n"
    '  File "ray/dashboard/modules/job/job_agent.py", in submit_job\n'
    "    submission_id = await self.get_job_manager().submit_job(\n"
    '  File "ray/dashboard/modules/job/job_manager.py", in submit_job\n'
    "    raise ValueError(\n"
    "ValueError: Job with submission_id rayjob-1 already exists. Please use a different "
    "submission_id.\n.\n"
)


async def cluster(rw, env=None, volumes=None):
    head = rw.head(HEAD, env=env, volumes=volumes)
    await head.wait_ready()
    return head


async def submit(rw, entrypoint, sid=None, **extra):
    body = {"entrypoint": entrypoint, **extra}
    if sid:
        body["submission_id"] = sid
    return await rw.http(DASH, "POST", "/api/jobs/", body)


async def status(rw, sid):
    answer = await rw.http(DASH, "GET", f"/api/jobs/{sid}")
    assert answer.status == 200, answer.body
    return answer.json()


async def test_job_goes_pending_running_succeeded_with_rays_messages(ray_world):
    rw = ray_world
    await cluster(rw)
    answer = await submit(rw, "python -c 'import time; time.sleep(30)'", "rayjob-1",
                          metadata={"owner": "test"})
    assert (answer.status, answer.json()) == (200, {"job_id": "rayjob-1",
                                                    "submission_id": "rayjob-1"})
    await rw.sleep(1)
    running = await status(rw, "rayjob-1")
    assert (running["status"], running["message"]) == ("RUNNING", "Job is currently running.")
    assert running["metadata"] == {"owner": "test"}
    assert running["type"] == "SUBMISSION"
    await rw.sleep(30)
    done = await status(rw, "rayjob-1")
    assert (done["status"], done["message"]) == ("SUCCEEDED", "Job finished successfully.")
    assert done["end_time"] - done["start_time"] == 30_000
    # The entrypoint never calls ray.init: real Ray leaves the Ray job id and driver info null.
    assert (done["job_id"], done["driver_info"]) == (None, None)


async def test_an_entrypoint_that_calls_ray_init_gets_a_ray_job_id_and_driver_info(ray_world):
    rw = ray_world
    await cluster(rw)
    assert (await submit(rw, "python -c 'import ray; ray.init(); import time; time.sleep(5)'",
                         "rayjob-1")).status == 200
    await rw.sleep(10)
    done = await status(rw, "rayjob-1")
    # 01000000 is the dashboard's own driver (its job manager's ray.init), as in real Ray.
    assert (done["status"], done["job_id"], done["driver_info"]["id"]) == (
        "SUCCEEDED", "02000000", "02000000")
    # The driver's address and pid, as strings (Ray 2.60: "192.0.2.2", "19134").
    info = done["driver_info"]
    assert sorted(info) == ["id", "node_ip_address", "pid"]
    assert isinstance(info["node_ip_address"], str) and info["node_ip_address"].count(".") == 3
    assert isinstance(info["pid"], str) and info["pid"].isdigit()
    listed = (await rw.http(DASH, "GET", "/api/jobs/")).json()
    assert [j["driver_info"] for j in listed if j["submission_id"] == "rayjob-1"] == [info]


async def test_pending_message_hints_only_at_what_was_asked_for(ray_world):
    rw = ray_world
    await cluster(rw)
    rw.config.default_job.start_delay = 5
    await submit(rw, "sleep 1", "plain")
    await submit(rw, "sleep 1", "env", runtime_env={"env_vars": {"A": "1"}})
    assert (await status(rw, "plain"))["message"] == "Job has not started yet."
    assert (await status(rw, "env"))["message"] == (
        "Job has not started yet. It may be waiting for the runtime environment to be set up.")
    assert pending_message({"entrypoint_num_gpus": 1}) == (
        "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom "
        "resources) to become available.")
    assert (await status(rw, "plain"))["metadata"] is None


async def test_duplicate_submission_id_is_500_with_rays_exact_text(ray_world):
    rw = ray_world
    await cluster(rw)
    assert (await submit(rw, "python a.py", "rayjob-1")).status == 200
    again = await submit(rw, "python a.py", "rayjob-1")
    assert (again.status, again.body) == (500, DUPLICATE_BODY)
    assert "Please use a different submission_id" in again.body
    assert [r.status for r in rw.config.records.submissions] == [200, 500]
    assert len(rw.config.records.accepted("rayjob-1")) == 1


async def test_duplicate_submission_id_is_400_on_older_ray(ray_world):
    rw = ray_world
    rw.config.job_head_proxies_to_agent = False
    await cluster(rw)
    await submit(rw, "python a.py", "rayjob-1")
    again = await submit(rw, "python a.py", "rayjob-1")
    assert again.status == 400
    assert again.body.endswith("ValueError: Job with submission_id rayjob-1 already exists. "
                               "Please use a different submission_id.\n")


async def test_unknown_job_is_404_does_not_exist(ray_world):
    rw = ray_world
    await cluster(rw)
    answer = await rw.http(DASH, "GET", "/api/jobs/nope")
    assert (answer.status, answer.body) == (404, "Job nope does not exist")


async def test_failing_entrypoint_makes_the_job_failed_with_its_exit_code(ray_world):
    rw = ray_world
    fail_job(rw.config, "python train.py", exit_code=3, after=10, logs="boom")
    await cluster(rw)
    await submit(rw, "python train.py", "rayjob-1")
    await rw.sleep(11)
    done = await status(rw, "rayjob-1")
    assert done["status"] == "FAILED"
    assert done["driver_exit_code"] == 3
    assert done["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert done["message"] == (
        "Job entrypoint command failed with exit code 3, last available logs (truncated to "
        "20,000 chars):\n" + RUNTIME_ENV.format(t="00:00:00,500")
        + "\nRunning entrypoint for job rayjob-1: python train.py\nboom")


async def test_stop_ends_a_running_job_as_stopped_and_delete_needs_a_terminal_job(ray_world):
    rw = ray_world
    await cluster(rw)
    await submit(rw, "sleep 100", "rayjob-1")
    await rw.sleep(1)
    refused = await rw.http(DASH, "DELETE", "/api/jobs/rayjob-1")
    assert refused.status == 500
    assert refused.body.endswith("RuntimeError: Attempted to delete job with id 'rayjob-1', "
                                 "but it is in a non-terminal state RUNNING.\n")
    stop = await rw.http(DASH, "POST", "/api/jobs/rayjob-1/stop")
    assert stop.json() == {"stopped": True}
    await rw.sleep(1)
    # Ray 2.60 reads STOPPED ~1.5-2 s after the stop (RayConfig.job_stop_seconds, 1.5)
    assert (await status(rw, "rayjob-1"))["status"] == "RUNNING"
    await rw.sleep(1)
    stopped = await status(rw, "rayjob-1")
    assert (stopped["status"], stopped["message"]) == ("STOPPED", "Job was intentionally stopped.")
    again = await rw.http(DASH, "POST", "/api/jobs/rayjob-1/stop")
    assert again.json() == {"stopped": False}
    deleted = await rw.http(DASH, "DELETE", "/api/jobs/rayjob-1")
    assert deleted.json() == {"deleted": True}
    assert (await rw.http(DASH, "GET", "/api/jobs/rayjob-1")).status == 404


async def test_logs_come_from_the_driver_node(ray_world):
    rw = ray_world
    rw.config.jobs["python hello.py"] = rw.config.default_job.__class__(duration=1, logs="hello")
    await cluster(rw)
    await submit(rw, "python hello.py", "rayjob-1")
    await rw.sleep(2)
    logs = await rw.http(DASH, "GET", "/api/jobs/rayjob-1/logs")
    # Ray's driver log file: the job manager's runtime-env line, each line ending with a newline
    assert logs.json() == {"logs": RUNTIME_ENV.format(t="00:00:00,500") + "\nRunning entrypoint "
                                   "for job rayjob-1: python hello.py\nhello\n"}


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_job_whose_driver_ran_on_a_lost_head_fails_lazily_with_ft_and_is_unknown_without(
        ray_world, backend):
    rw = ray_world
    env = {}
    if backend == "redis":
        await rw.redis().wait_ready()
        env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "uid-1"}
    head = await cluster(rw, env)
    await submit(rw, "python -c 'import ray; ray.init(); import time; time.sleep(1000)'",
                 "rayjob-1")
    await rw.sleep(2)
    head.crash()
    await rw.sleep(10)
    await head.replace(HEAD + "-b").wait_ready()
    answer = await rw.http(DASH, "GET", "/api/jobs/rayjob-1")
    if backend == "memory":
        assert (answer.status, answer.body) == (404, "Job rayjob-1 does not exist")
        return
    # The new head's job manager only starts on a submit/stop/delete/logs request: GET polling
    # alone keeps seeing RUNNING, as with real Ray.
    for _ in range(50):
        assert (await status(rw, "rayjob-1"))["status"] == "RUNNING"
        await rw.sleep(1)
    assert (await rw.http(DASH, "GET", "/api/jobs/rayjob-1/logs")).status == 200
    await rw.sleep(3)
    job = await status(rw, "rayjob-1")
    assert (job["status"], job["message"], job["error_type"]) == (
        "FAILED", "Unexpected error occurred: failed to get job supervisor.",
        "JOB_SUPERVISOR_ACTOR_START_FAILURE")
    drivers = await rw.driver().gcs.jobs()
    # the old dashboard's driver, the entrypoint's, the new dashboard's
    assert [(j["job_id"], j["is_dead"]) for j in drivers] == [
        ("01000000", True), ("02000000", True), ("03000000", False)]


@pytest.mark.parametrize("starts_after", [None, 60.0])
async def test_a_lost_heads_job_stays_running_under_get_polling_unless_a_timer_is_set(
        ray_world, starts_after):
    """Real Ray's job manager starts only on a submit, stop, delete or logs request: GET
    polling alone sees the lost head's job RUNNING (measured for 73 s; here 10 minutes).
    ``job_manager_starts_after`` starts it by itself."""
    rw = ray_world
    rw.config.job_manager_starts_after = starts_after
    await rw.redis().wait_ready()
    env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "uid-1"}
    head = await cluster(rw, env)
    await submit(rw, "sleep 1000", "rayjob-1")
    await rw.sleep(2)
    head.crash()
    await rw.sleep(10)
    await head.replace(HEAD + "-b").wait_ready()
    await rw.sleep(55)
    assert (await status(rw, "rayjob-1"))["status"] == "RUNNING"
    await rw.sleep(10)
    if starts_after is not None:
        assert (await status(rw, "rayjob-1"))["status"] == "FAILED"
        return
    for _ in range(60):
        assert (await status(rw, "rayjob-1"))["status"] == "RUNNING"
        await rw.sleep(10)
    assert (await rw.http(DASH, "POST", "/api/jobs/rayjob-1/stop")).json() == {"stopped": False}
    await rw.sleep(3)
    job = await status(rw, "rayjob-1")
    assert (job["status"], job["message"], job["error_type"]) == (
        "FAILED", "Unexpected error occurred: failed to get job supervisor.",
        "JOB_SUPERVISOR_ACTOR_START_FAILURE")


async def test_old_head_is_marked_dead_as_soon_as_a_new_head_registers(ray_world):
    rw = ray_world
    await rw.redis().wait_ready()
    env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "uid-1"}
    head = await cluster(rw, env)
    old = [n["node_id"] for n in await rw.driver().gcs.nodes()]
    head.crash()
    await rw.sleep(10)
    new_head = head.replace(HEAD + "-b")
    await new_head.wait_ready()
    nodes = {n["node_id"]: n["state"] for n in await rw.driver().gcs.nodes()}
    assert nodes[old[0]] == "DEAD"
    assert sorted(nodes.values()) == ["ALIVE", "DEAD"]


def submitter_command(sid: str, entrypoint: str) -> str:
    """KubeRay's K8sJobMode submitter (``BuildJobSubmitCommand``), as the Job's bash runs it."""
    address = f"http://{DASH}"
    return (
        f"until python3 -c \"import urllib.request; urllib.request.urlopen('{address}/api/"
        f"gcs_healthz', timeout=2)\" >/dev/null 2>&1 ; do echo \"Waiting for Ray Dashboard "
        f"GCS to become healthy at {address} ...\" ; sleep 2 ; done ; "
        f"if ! ray job status --address {address} {sid} >/dev/null 2>&1 ; then "
        f"ray job submit --address {address} --no-wait --metadata-json "
        f"\"{{\\\"team\\\":\\\"a\\\"}}\" --submission-id {sid} -- {entrypoint} ; fi ; "
        f"ray job logs --address {address} --follow {sid}")


async def test_kuberay_submitter_submits_once_and_a_retried_submitter_reattaches(ray_world):
    rw = ray_world
    script = submitter_command("rayjob-1", "python sample_code.py --sleep 60")
    first = rw.pod("rayjob-submitter-1", command=["/bin/bash", "-ce", "--"], args=[script],
                   env={"RAY_DASHBOARD_ADDRESS": DASH, "RAY_JOB_SUBMISSION_ID": "rayjob-1"})
    await rw.sleep(7)  # the head isn't there yet: the submitter waits for gcs_healthz
    assert rw.config.records.submissions == []
    await cluster(rw)
    await rw.sleep(10)
    first.crash()  # the submitter Pod is lost while following the logs
    retry = rw.pod("rayjob-submitter-2", command=["/bin/bash", "-ce", "--"], args=[script],
                   env={"RAY_DASHBOARD_ADDRESS": DASH, "RAY_JOB_SUBMISSION_ID": "rayjob-1"})
    assert await retry.wait_exit(120) == 0
    assert [(s.submission_id, s.status) for s in rw.config.records.submissions] == [
        ("rayjob-1", 200)]
    done = await status(rw, "rayjob-1")
    assert (done["status"], done["metadata"]) == ("SUCCEEDED", {"team": "a"})
    assert done["entrypoint"] == "python sample_code.py --sleep 60"


async def test_dashboard_reports_the_ray_version_of_its_image(ray_world):
    from emu.ray.dashboard import ray_version_of

    rw = ray_world
    rw.pod(HEAD, "rayproject/ray:2.41.0-py310", ["/bin/bash", "-c", "--"],
           ["ray start --head --num-cpus=0 --block"], hostname=HEAD_SVC)
    await rw.until(lambda: True)
    await rw.sleep(10)
    version = (await rw.http(DASH, "GET", "/api/version")).json()
    assert version["ray_version"] == "2.41.0"
    assert ray_version_of("my/custom-image:latest", "2.46.0") == "2.46.0"
    assert ray_version_of("rayproject/ray:2.52.1", "2.46.0") == "2.52.1"


@pytest.mark.parametrize(("waits", "health_at", "list_at", "get_at"),
                         [(True, 1.0, 30.0, 59.0), (False, 0.0, 0.0, 0.0)])
async def test_dashboard_hangs_while_the_gcs_is_down_as_real_ray(ray_world, waits, health_at,
                                                                  list_at, get_at):
    rw = ray_world
    rw.config.dashboard_waits_for_gcs = waits
    head = await cluster(rw)
    await submit(rw, "sleep 1000", "rayjob-1")
    await rw.sleep(2)
    rw.world.network.outage(head.child("gcs_server").name)
    start = rw.now

    bodies = {}

    async def timed(path):
        answer = await rw.http(DASH, "GET", path)
        bodies[path] = answer.body
        return path, answer.status, rw.now - start

    answers = await asyncio.gather(timed("/api/gcs_healthz"), timed("/api/jobs/"),
                                   timed("/api/jobs/rayjob-1"))
    assert answers == [("/api/gcs_healthz", 503, health_at), ("/api/jobs/", 500, list_at),
                       ("/api/jobs/rayjob-1", 500, get_at)]
    # the texts measured on Ray 2.60: aiohttp's 503 with the GCS client's reason, and its
    # plain 500 page for the job routes' unhandled error
    trouble = "500 Internal Server Error\n\nServer got itself in trouble"
    assert bodies == {"/api/gcs_healthz": "503: Health check failed: Timed out while waiting "
                                          "for GCS to become available.",
                      "/api/jobs/": trouble, "/api/jobs/rayjob-1": trouble}
    rw.world.network.restore(head.child("gcs_server").name)
    assert (await rw.http(DASH, "GET", "/api/gcs_healthz")).status == 200


async def test_a_request_waiting_on_the_gcs_succeeds_once_it_is_back(ray_world):
    rw = ray_world
    head = await cluster(rw)
    await submit(rw, "sleep 1000", "rayjob-1")
    await rw.sleep(2)
    gcs = head.child("gcs_server").name
    rw.world.network.outage(gcs)
    rw.world.loop.call_later(10, rw.world.network.restore, gcs)
    start = rw.now
    assert (await status(rw, "rayjob-1"))["status"] == "RUNNING"
    assert 10 <= rw.now - start <= 11


@pytest.mark.parametrize(("outage", "final"), [(30.0, "SUCCEEDED"), (90.0, "FAILED")])
async def test_a_job_finishing_during_a_long_gcs_outage_ends_failed(ray_world, outage, final):
    rw = ray_world
    head = await cluster(rw)
    await submit(rw, "sleep 10", "rayjob-1")
    await rw.sleep(5)
    gcs = head.child("gcs_server").name
    workers = [p.name for p in rw.world.processes.all()
               if "/raylet.worker-" in p.name and p.alive]
    # Only the supervisor loses the GCS (the head's raylet would otherwise end the container).
    rw.world.network.partition(workers[0], gcs)
    await rw.sleep(outage)
    rw.world.network.heal(workers[0], gcs)
    await submit(rw, "sleep 1", "other")  # a request that starts the job manager's monitoring
    await rw.sleep(10)
    job = await status(rw, "rayjob-1")
    assert job["status"] == final
    if final == "FAILED":
        # Its entrypoint exited 0, but the supervisor died before it could say so.
        assert (job["message"], job["error_type"], job["driver_exit_code"]) == (
            "Unexpected error occurred: failed to get job supervisor.",
            "JOB_SUPERVISOR_ACTOR_START_FAILURE", None)


async def test_a_job_ending_during_a_head_outage_longer_than_60s_fails_once_the_head_is_back(
        ray_world):
    """The supervisor runs on a worker whose raylet outlives the outage (KubeRay's 600 s with
    GCS FT); the job's driver ends while the head is gone, the supervisor's worker gives up on
    the GCS after 60 s and exits. Its raylet reports the exit once the new GCS answers, so the
    actor is not left ALIVE there: the job fails as on real Ray instead of staying RUNNING."""
    rw = ray_world
    await rw.redis().wait_ready()
    env = {"RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": "uid-1"}
    head = await cluster(rw, env)
    worker = rw.worker("raycluster-worker-0", env={"RAY_gcs_rpc_server_reconnect_timeout_s": "600"})
    await worker.wait_ready()
    answer = await submit(rw, "sleep 10", "rayjob-1", entrypoint_num_cpus=1)
    assert answer.status == 200, answer.body
    await rw.sleep(3)
    assert (await status(rw, "rayjob-1"))["status"] == "RUNNING"
    head.crash()
    await rw.sleep(90)
    head.start()
    await head.wait_ready()
    assert worker.alive
    assert (await rw.http(DASH, "GET", "/api/jobs/rayjob-1/logs")).status == 200
    await rw.sleep(5)
    job = await status(rw, "rayjob-1")
    assert (job["status"], job["message"], job["error_type"]) == (
        "FAILED", "Unexpected error occurred: failed to get job supervisor.",
        "JOB_SUPERVISOR_ACTOR_START_FAILURE")
    await rw.sleep(120)
    assert (await status(rw, "rayjob-1"))["status"] == "FAILED"


@pytest.mark.parametrize(("extra", "error"), [
    ({"metadata": "team-a"}, "TypeError: metadata must be a dict, got <class 'str'>"),
    ({"metadata": {"n": 1}}, "TypeError: metadata values must be strings, got <class 'int'>"),
    ({"runtime_env": ["pip"]}, "TypeError: runtime_env must be a dict, got <class 'list'>"),
    ({"entrypoint_num_cpus": "1"},
     "TypeError: entrypoint_num_cpus must be a number, got <class 'str'>"),
    ({"entrypoint_memory": 1.5},
     "TypeError: entrypoint_memory must be an integer, got <class 'float'>"),
    ({"submission_id": 7},
     "TypeError: submission_id must be a string if provided, got <class 'int'>"),
    ({"colour": "red"},
     "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'colour'"),
])
async def test_a_submit_body_of_the_wrong_types_is_400_with_rays_type_error(ray_world, extra,
                                                                          error):
    rw = ray_world
    await cluster(rw)
    answer = await submit(rw, "echo hi", None if "submission_id" in extra else "rayjob-1",
                          **extra)
    assert answer.status == 400
    assert answer.body.rstrip("\n").split("\n")[-1] == error
    assert (await rw.http(DASH, "GET", "/api/jobs/rayjob-1")).status == 404


async def test_null_fields_are_dropped_before_the_submit_is_checked(ray_world):
    rw = ray_world
    await cluster(rw)
    answer = await submit(rw, "echo hi", "rayjob-1", metadata=None, runtime_env=None)
    assert answer.status == 200, answer.body
