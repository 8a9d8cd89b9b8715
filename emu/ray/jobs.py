"""Ray job submission: the dashboard's job manager and the job supervisor actor.

Follows ``python/ray/dashboard/modules/job/{job_manager,job_supervisor,common}.py`` (FACTS §4):
- a submission is a JSON record in the GCS internal KV (namespace ``job``,
  ``_ray_internal_job_info_<submission_id>``) written put-if-absent, so a duplicate id fails with
  "Job with submission_id X already exists. Please use a different submission_id.";
- the driver runs under a detached ``JobSupervisor`` actor (``_ray_internal_job_actor_<id>``),
  pinned to the head node unless entrypoint resources are given or
  ``RAY_JOB_ALLOW_DRIVER_ON_WORKER_NODES=1``; it registers the driver's job in the GCS ``JOB``
  table, runs the entrypoint's `JobBehaviour`, writes RUNNING then a terminal status, and exits;
- the manager monitors every non-terminal job once a second — also the ones it finds in KV when
  it starts (``_recover_running_jobs``): a missing supervisor fails the job ("Unexpected error
  occurred: failed to get job supervisor."), a dead one too ("Job supervisor actor died: ...");
  so a job whose driver ran on a lost head is FAILED after a restart with FT and unknown (404)
  without it;
- terminal statuses are final; a job still PENDING after 900 s fails.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import orjson

from emu.kernel import clock
from emu.kernel.network import NetworkError
from emu.kernel.process import ProcessGone

from .gcs_client import (
    DEFAULT_RECONNECT_TIMEOUT_S,
    JOB_NAMESPACE,
    GcsClient,
    job_id_hex,
    unix_ms,
)
from .net import RpcError
from .workloads import ActorDiedError, RayClient, RayError

if TYPE_CHECKING:
    from .workloads import ActorRuntime

JOB_INFO_PREFIX = "_ray_internal_job_info_"
JOB_ACTOR_PREFIX = "_ray_internal_job_actor_"
SUPERVISOR_NAMESPACE = "SUPERVISOR_ACTOR_RAY_NAMESPACE"
JOB_MONITOR_PERIOD_S = 1.0
JOB_START_TIMEOUT_S = 900.0
TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")
#: Drivers in a namespace with this prefix are Ray's own (the dashboard's): not listed as jobs.
INTERNAL_NAMESPACE = "_ray_internal_dashboard"

MESSAGES = {
    "PENDING": "Job has not started yet.",
    "RUNNING": "Job is currently running.",
    "STOPPED": "Job was intentionally stopped.",
    "SUCCEEDED": "Job finished successfully.",
    "FAILED": "Job failed.",
}

_SUBMIT_ALPHABET = "".join(sorted(set(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") - set("IloO0")))


def pending_message(info: dict[str, Any]) -> str:
    """``JobInfo.__post_init__``: the PENDING message hints at resources only when entrypoint
    resources were asked for, at the runtime env only when one was given."""
    message = MESSAGES["PENDING"]
    if any((info.get(k) or 0) > 0 for k in ("entrypoint_num_cpus", "entrypoint_num_gpus",
                                             "entrypoint_memory")) \
            or info.get("entrypoint_resources"):
        message += (" It may be waiting for resources (CPUs, GPUs, memory, custom resources) to "
                    "become available.")
    if info.get("runtime_env"):
        message += " It may be waiting for the runtime environment to be set up."
    return message


#: ``JobSubmitRequest``'s fields (``dashboard/modules/job/common.py``).
SUBMIT_FIELDS = ("entrypoint", "submission_id", "job_id", "runtime_env", "metadata",
                 "entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory",
                 "entrypoint_resources", "entrypoint_label_selector")


def _pytype(value: Any) -> str:
    """``type(value)`` as Python prints it, for a value decoded from JSON."""
    return f"<class '{type(value).__name__}'>"


def submit_request_error(body: dict[str, Any]) -> str | None:
    """``parse_and_validate_request`` → ``JobSubmitRequest(**body).__post_init__``: the
    ``TypeError`` message a submit body earns (keys whose value is null are dropped first, as
    ``strip_keys_with_value_none`` does), or None when it is valid."""
    body = {k: v for k, v in body.items() if v is not None}
    for key in body:
        if key not in SUBMIT_FIELDS:
            return f"JobSubmitRequest.__init__() got an unexpected keyword argument '{key}'"
    if "entrypoint" not in body:
        return "JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'"
    entrypoint = body["entrypoint"]
    if not isinstance(entrypoint, str):
        return f"entrypoint must be a string, got {_pytype(entrypoint)}"
    for key in ("submission_id", "job_id"):
        if key in body and not isinstance(body[key], str):
            return f"{key} must be a string if provided, got {_pytype(body[key])}"
    for key in ("runtime_env", "metadata"):
        if key not in body:
            continue
        value = body[key]
        if not isinstance(value, dict):
            return f"{key} must be a dict, got {_pytype(value)}"
        # JSON object keys are always strings; metadata values must be too.
        if key == "metadata":
            for v in value.values():
                if not isinstance(v, str):
                    return f"metadata values must be strings, got {_pytype(v)}"
    for key in ("entrypoint_num_cpus", "entrypoint_num_gpus"):
        if key in body and not isinstance(body[key], (int, float)):
            return f"{key} must be a number, got {_pytype(body[key])}"
    if "entrypoint_memory" in body and not isinstance(body["entrypoint_memory"], int):
        return ("entrypoint_memory must be an integer, "
                f"got {_pytype(body['entrypoint_memory'])}")
    if "entrypoint_resources" in body:
        value = body["entrypoint_resources"]
        if not isinstance(value, dict):
            return f"entrypoint_resources must be a dict, got {_pytype(value)}"
        for v in value.values():
            if not isinstance(v, (int, float)):
                return f"entrypoint_resources values must be numbers, got {_pytype(v)}"
    if "entrypoint_label_selector" in body:
        value = body["entrypoint_label_selector"]
        if not isinstance(value, dict):
            return f"entrypoint_label_selector must be a dict, got {_pytype(value)}"
        for v in value.values():
            if not isinstance(v, str):
                return f"entrypoint_label_selector values must be strings, got {_pytype(v)}"
    return None


def info_key(submission_id: str) -> str:
    return JOB_INFO_PREFIX + submission_id


def duplicate_message(submission_id: str) -> str:
    return (f"Job with submission_id {submission_id} already exists. "
            "Please use a different submission_id.")


class JobInfoClient:
    """``JobInfoStorageClient``: job records in the GCS internal KV."""

    def __init__(self, gcs: GcsClient) -> None:
        self.gcs = gcs

    async def get(self, submission_id: str) -> dict[str, Any] | None:
        raw = await self.gcs.kv_get(JOB_NAMESPACE, info_key(submission_id))
        return orjson.loads(raw) if raw else None

    async def put(self, submission_id: str, info: dict[str, Any], overwrite: bool = True) -> bool:
        return await self.gcs.kv_put(JOB_NAMESPACE, info_key(submission_id),
                                     orjson.dumps(info, option=orjson.OPT_SORT_KEYS), overwrite)

    async def put_status(self, submission_id: str, status: str, now: float,
                         message: str | None = None, **fields: Any) -> bool:
        """Move a job to ``status`` unless it is already terminal; whether it moved."""
        info = await self.get(submission_id)
        if info is None or info["status"] in TERMINAL:
            return False
        info.update(status=status, message=MESSAGES[status] if message is None else message,
                    **fields)
        if status in TERMINAL:
            info["end_time"] = unix_ms(now)
        await self.put(submission_id, info)
        return True

    async def all(self) -> dict[str, dict[str, Any]]:
        keys = await self.gcs.kv_keys(JOB_NAMESPACE, JOB_INFO_PREFIX)
        found = await self.gcs.kv_multi_get(JOB_NAMESPACE, keys) if keys else {}
        return {k[len(JOB_INFO_PREFIX):]: orjson.loads(v) for k, v in sorted(found.items())}


def runtime_env_line(now: float) -> str:
    """The first line of a job's driver log: the job manager's driver logger (Ray's
    ``LOGGER_FORMAT``, ``job_manager.py`` line 581 in Ray 2.60) says the runtime env is being set
    up, before the supervisor actor starts."""
    stamp = clock.to_datetime(now).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return f"{stamp}\tINFO job_manager.py:581 -- Runtime env is setting up."


class JobSupervisor:
    """The detached actor that runs one job's driver (a `JobBehaviour`) and reports its status."""

    def __init__(self, submission_id: str, entrypoint: str) -> None:
        self.submission_id = submission_id
        self.entrypoint = entrypoint
        self.rt: ActorRuntime | None = None
        self._driver: asyncio.Task[Any] | None = None
        self.stopped = False

    def _attach_runtime(self, rt: ActorRuntime) -> None:
        self.rt = rt

    def ping(self) -> str:
        return "pong"

    def run(self) -> None:
        assert self.rt is not None
        if self._driver is None:
            self._driver = self.rt.spawn(self._run(), name=f"job:{self.submission_id}")

    async def stop(self) -> bool:
        """SIGTERM to the driver: it ends at once (a fake driver has no cleanup); the status
        reads STOPPED `RayConfig.job_stop_seconds` later, as measured on real Ray."""
        self.stopped = True
        if self._driver is not None and not self._driver.done():
            self._driver.cancel()
            assert self.rt is not None
            self.rt.spawn(self._stopped(), name="job:stopped")
        return True

    async def _stopped(self) -> None:
        assert self.rt is not None
        if self.rt.config.job_stop_seconds:
            await self.rt.sleep(self.rt.config.job_stop_seconds)
        await self._finish("STOPPED", None, None)

    async def _retry(self, op: Any, give_up_after: float | None = None) -> Any:
        """A GCS write from the supervisor retries until the GCS is back (or the node dies).
        With ``give_up_after``, the supervisor's worker exits once the GCS has been unreachable
        that long (its core worker's GCS client gives up, ``gcs_rpc_server_reconnect_timeout_s``):
        the write never lands and the job manager later finds the supervisor dead."""
        rt = self.rt
        assert rt is not None
        since: float | None = None
        while True:
            try:
                return await op()
            except NetworkError as err:
                since = rt.now if since is None else since
                if give_up_after is not None and rt.now - since >= give_up_after:
                    rt.log("job_supervisor_gcs_lost", submission_id=self.submission_id,
                           seconds=rt.now - since)
                    rt.process.exit(1, f"the GCS was unreachable for {give_up_after:g}s: {err}")
                    raise ProcessGone("job supervisor exited: the GCS is gone") from err
                await rt.sleep(1.0)

    async def _set_up_runtime_env(self, info: JobInfoClient) -> None:
        """The runtime-env agent builds the job's environment on this node before the driver
        starts (`emu.ray.config.RuntimeEnvCosts`); the job stays PENDING. A node that built
        the same environment before reuses it."""
        rt = self.rt
        assert rt is not None
        record = await self._retry(lambda: info.get(self.submission_id)) or {}
        env = {k: v for k, v in (record.get("runtime_env") or {}).items() if k != "env_vars"}
        seconds = rt.config.runtime_env_costs.seconds(env)
        if not seconds:
            return
        cache: dict[str, None] = rt.raylet.runtime_env_cache
        key = orjson.dumps(env, option=orjson.OPT_SORT_KEYS).decode()
        if key in cache:
            return
        rt.log("runtime_env_setup", submission_id=self.submission_id, seconds=seconds)
        await rt.sleep(seconds)
        cache[key] = None

    def _logs(self) -> list[str]:
        assert self.rt is not None
        logs: dict[str, list[str]] = self.rt.raylet.job_logs
        return logs.setdefault(self.submission_id, [])

    async def _run(self) -> None:
        rt = self.rt
        assert rt is not None
        behaviour = rt.config.job_behaviour(self.entrypoint)
        info = JobInfoClient(rt.gcs)
        self._logs().append(runtime_env_line(rt.now))
        await self._set_up_runtime_env(info)
        if behaviour.start_delay:
            await rt.sleep(behaviour.start_delay)
        await self._retry(lambda: info.put_status(
            self.submission_id, "RUNNING", rt.now, driver_node_id=rt.node_id,
            driver_agent_http_address=f"http://{rt.node_ip}:52365"))
        logs = self._logs()
        logs.append(f"Running entrypoint for job {self.submission_id}: {self.entrypoint}")
        job_id: str | None = None
        if behaviour.connects(self.entrypoint) or rt.config.job_program(self.entrypoint):
            # The driver's ray.init (a registered program uses the Ray API): a Ray job id, the
            # driver in the GCS JOB table, and the id in the submission's record (real Ray
            # leaves both null for a driver that never connects).
            counter = int(await self._retry(lambda: rt.gcs.rpc("GetNextJobID")))
            job_id = counter.to_bytes(4, "little").hex()
            await self._retry(lambda: rt.gcs.add_job({
                "job_id": job_id, "driver_node_id": rt.node_id, "entrypoint": self.entrypoint,
                "submission_id": self.submission_id, "is_dead": False,
                "driver_ip_address": rt.node_ip, "driver_pid": str(rt.process.pid)}))
            self.job_id = job_id
            await self._retry(lambda: info.put_status(self.submission_id, "RUNNING", rt.now,
                                                      job_id=job_id))
        scripted = await self._run_scripted(job_id, logs)
        if scripted is not None:
            await self._end(scripted, logs)
            return
        done = 0.0
        store = rt.config.checkpoint_store(behaviour.checkpoint_store) \
            if behaviour.checkpoint_store else None
        key = behaviour.checkpoint_key or self.entrypoint
        if store is not None:
            done = float(store.load(key) or 0.0)
            if done:
                logs.append(f"Restored progress from checkpoint: {done:g}s done")
        while done < behaviour.duration:
            step = behaviour.duration - done
            if store is not None:
                step = min(step, behaviour.checkpoint_every)
            await rt.sleep(step)
            done += step
            if store is not None:
                store.save(key, done)
        if behaviour.logs:
            logs.extend(behaviour.logs.splitlines())
        await self._end(behaviour.exit_code, logs)

    async def _run_scripted(self, job_id: str | None, logs: list[str]) -> int | None:
        """A registered program, or simple shell, as the driver (`emu.ray.entrypoints`); its
        exit code, or None when neither applies."""
        from .entrypoints import JobContext, JobExit, is_simple_shell, run_shell

        rt = self.rt
        assert rt is not None
        program = rt.config.job_program(self.entrypoint)
        text = self.entrypoint.strip()
        if program is None and (text in rt.config.jobs or not is_simple_shell(text)):
            return None
        job = JobContext(self.entrypoint, self.submission_id, job_id, rt, logs)
        try:
            if program is not None:
                code = await program(job)
            else:
                seconds = rt.config.python_seconds
                code = await run_shell(job, text, rt.config.default_job.duration
                                       if seconds is None else seconds,
                                       rt.config.default_job.exit_code)
        except JobExit as exit_:
            return exit_.code
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as err:  # the driver raised: Python exits 1 with its traceback
            logs.append(f"{type(err).__name__}: {err}")
            return 1
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            # a mistake in the test's program, not a job outcome: say so where it shows (the
            # job fails with this in its logs and message) instead of the driver dying unseen
            logs.append(f"TypeError: the entrypoint program for {self.entrypoint!r} returned "
                        f"{code!r}; it must return an exit code (int) or None")
            return 1
        return int(code or 0)

    async def _end(self, code: int, logs: list[str]) -> None:
        if code == 0:
            await self._finish("SUCCEEDED", None, 0)
        else:
            tail = "\n".join(logs)[-20000:]
            await self._finish("FAILED", f"Job entrypoint command failed with exit code {code}, "
                                         f"last available logs (truncated to 20,000 chars):\n"
                                         f"{tail}", code)

    async def _finish(self, status: str, message: str | None, code: int | None) -> None:
        rt = self.rt
        assert rt is not None
        info = JobInfoClient(rt.gcs)
        fields: dict[str, Any] = {"driver_exit_code": code}
        if status == "FAILED":
            fields["error_type"] = "JOB_ENTRYPOINT_COMMAND_ERROR"
        await self._retry(lambda: info.put_status(self.submission_id, status, rt.now, message,
                                                  **fields),
                          give_up_after=DEFAULT_RECONNECT_TIMEOUT_S)
        job_id = getattr(self, "job_id", None)
        if job_id:
            await self._retry(lambda: rt.gcs.mark_job_finished(job_id))
        with contextlib.suppress(NetworkError, RpcError):
            await rt.gcs.kill_actor(rt.actor_id, no_restart=True, exit_actor=True)


class JobManager:
    """The dashboard's ``JobManager``: submissions, their monitoring, stop, delete, logs."""

    def __init__(self, client: RayClient, env: dict[str, str], rng: Any,
                 log: Any) -> None:
        self.client = client
        self.info = JobInfoClient(client.gcs)
        self.env = env
        self.rng = rng
        self.log = log
        self.recovered = asyncio.Event()
        self.monitored: dict[str, asyncio.Task[Any]] = {}
        self._background: list[asyncio.Future[Any]] = []

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def _monitor(self, submission_id: str) -> None:
        if submission_id not in self.monitored:
            self.monitored[submission_id] = asyncio.ensure_future(
                self._monitor_job(submission_id))

    async def recover_running_jobs(self) -> None:
        """Connect as the dashboard's internal driver, then ``_recover_running_jobs``: monitor
        every non-terminal job found in the KV."""
        while True:
            try:
                await self._connect_driver()
                jobs = await self.info.all()
                break
            except NetworkError:
                await asyncio.sleep(1.0)
        for submission_id, info in jobs.items():
            if info["status"] not in TERMINAL:
                self.log("job_recovered", submission_id=submission_id, status=info["status"])
                self._monitor(submission_id)
        self.recovered.set()

    async def _connect_driver(self) -> None:
        """The manager's own ``ray.init``: a driver job in the GCS (on the head node, in an
        internal namespace the job list hides) that owns the supervisor actors, as in real Ray
        (whose JOB table and ``JobCounter`` exist as soon as a job is submitted)."""
        if self.client.job_id:
            return
        head = await self.client.gcs.kv_get(JOB_NAMESPACE, "head_node_id")
        job_id = job_id_hex(int(await self.client.gcs.rpc("GetNextJobID")))
        await self.client.gcs.add_job({
            "job_id": job_id, "driver_node_id": head.decode() if head else None,
            "entrypoint": "", "submission_id": None, "is_dead": False,
            "ray_namespace": INTERNAL_NAMESPACE, "start_time_ms": unix_ms(self.now)})
        self.client.job_id = job_id

    def new_submission_id(self) -> str:
        return "raysubmit_" + "".join(self.rng.choice(_SUBMIT_ALPHABET) for _ in range(16))

    async def submit(self, req: dict[str, Any]) -> str:
        """``submit_job``; raises ``ValueError`` for a duplicate id."""
        await self.recovered.wait()
        submission_id = req.get("submission_id") or req.get("job_id") or self.new_submission_id()
        resources = {k: req.get(k) for k in ("entrypoint_num_cpus", "entrypoint_num_gpus",
                                             "entrypoint_memory")}
        specified = any((v or 0) > 0 for v in resources.values()) \
            or bool(req.get("entrypoint_resources"))
        info = {
            "status": "PENDING", "entrypoint": req["entrypoint"], "message": "",
            "error_type": None, "start_time": unix_ms(self.now), "end_time": None,
            "metadata": req.get("metadata"), "runtime_env": req.get("runtime_env"),
            "entrypoint_num_cpus": req.get("entrypoint_num_cpus") or 0,
            "entrypoint_num_gpus": req.get("entrypoint_num_gpus") or 0,
            "entrypoint_memory": req.get("entrypoint_memory") or 0,
            "entrypoint_resources": req.get("entrypoint_resources"),
            "driver_agent_http_address": None, "driver_node_id": None, "driver_exit_code": None,
            "job_id": None,
        }
        info["message"] = pending_message(info)
        if not await self.info.put(submission_id, info, overwrite=False):
            raise ValueError(duplicate_message(submission_id))
        on_workers = specified or self.env.get("RAY_JOB_ALLOW_DRIVER_ON_WORKER_NODES") == "1"
        try:
            supervisor = await self.client.create_actor(
                "emu.ray.jobs:JobSupervisor", submission_id, req["entrypoint"],
                name=JOB_ACTOR_PREFIX + submission_id, namespace=SUPERVISOR_NAMESPACE,
                detached=True, num_cpus=float(req.get("entrypoint_num_cpus") or 0),
                resources=dict(req.get("entrypoint_resources") or {}), head=not on_workers,
                timeout=JOB_START_TIMEOUT_S)
            await supervisor.call("run")
        except (RayError, RpcError) as err:
            await self.info.put_status(submission_id, "FAILED", self.now,
                                       f"Failed to start supervisor actor {submission_id}: "
                                       f"'{err}'", error_type="JOB_SUPERVISOR_ACTOR_START_FAILURE")
        self._monitor(submission_id)
        return submission_id

    async def _monitor_job(self, submission_id: str) -> None:
        """``_monitor_job_internal``: until the job is terminal, make sure its supervisor lives."""
        try:
            while True:
                try:
                    info = await self.info.get(submission_id)
                except NetworkError:
                    await asyncio.sleep(JOB_MONITOR_PERIOD_S)
                    continue
                if info is None or info["status"] in TERMINAL:
                    return
                if info["status"] == "PENDING" \
                        and unix_ms(self.now) - info["start_time"] > JOB_START_TIMEOUT_S * 1000:
                    await self.info.put_status(
                        submission_id, "FAILED", self.now,
                        f"Job supervisor actor failed to start within {JOB_START_TIMEOUT_S} "
                        "seconds. This timeout can be configured by setting the environment "
                        "variable RAY_JOB_START_TIMEOUT_SECONDS.",
                        error_type="JOB_SUPERVISOR_ACTOR_START_TIMEOUT")
                    return
                try:
                    supervisor = await self.client.get_actor(JOB_ACTOR_PREFIX + submission_id,
                                                             SUPERVISOR_NAMESPACE)
                except ValueError:
                    if info["status"] == "PENDING":
                        await asyncio.sleep(JOB_MONITOR_PERIOD_S)
                        continue
                    self.log("job_supervisor_missing", submission_id=submission_id)
                    await self.info.put_status(
                        submission_id, "FAILED", self.now,
                        "Unexpected error occurred: failed to get job supervisor.",
                        error_type="JOB_SUPERVISOR_ACTOR_START_FAILURE")
                    return
                except NetworkError:
                    await asyncio.sleep(JOB_MONITOR_PERIOD_S)
                    continue
                supervisor.max_task_retries = -1
                try:
                    await supervisor.call("ping")
                except ActorDiedError as err:
                    self.log("job_supervisor_died", submission_id=submission_id)
                    await self.info.put_status(submission_id, "FAILED", self.now,
                                               f"Job supervisor actor died: {err}",
                                               error_type="JOB_SUPERVISOR_ACTOR_DIED")
                    return
                except (RayError, NetworkError):
                    pass
                await asyncio.sleep(JOB_MONITOR_PERIOD_S)
        finally:
            self.monitored.pop(submission_id, None)

    async def stop(self, submission_id: str) -> bool:
        info = await self.info.get(submission_id)
        if info is None or info["status"] in TERMINAL:
            return False
        try:
            supervisor = await self.client.get_actor(JOB_ACTOR_PREFIX + submission_id,
                                                     SUPERVISOR_NAMESPACE)
        except ValueError:
            return False
        self._background.append(asyncio.ensure_future(_quietly(supervisor.call("stop"))))
        return True

    async def delete(self, submission_id: str) -> bool:
        info = await self.info.get(submission_id)
        if info is None:
            return False
        if info["status"] not in TERMINAL:
            raise RuntimeError(f"Attempted to delete job with id '{submission_id}', but it is "
                               f"in a non-terminal state {info['status']}.")
        await self.client.gcs.kv_del(JOB_NAMESPACE, info_key(submission_id))
        return True


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(RayError, NetworkError, RpcError):
        await awaitable
