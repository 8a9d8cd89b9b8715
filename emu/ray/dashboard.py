"""The dashboard on the head (port 8265): version and GCS health, the Jobs REST API, the Serve
REST API and the state API's actor list (``GET /api/v0/actors``, `emu.ray.state_api`), with the
status codes and texts KubeRay's dashboard client sees (SPEC §5, FACTS §4 and §5).

Requests and responses are the HTTP-shaped dicts of `emu.ray.net`. Notable answers:
- ``POST /api/jobs/`` with a used submission id: 500 whose body is the head's traceback wrapping
  the agent's 400 (current Ray, where the head proxies to the agent) and contains
  "Please use a different submission_id"; with ``RayConfig.job_head_proxies_to_agent`` False, the
  older 400 with the agent's traceback;
- ``GET /api/jobs/<id>`` for an unknown id: 404 ``Job <id> does not exist``;
- ``GET /api/serve/applications/`` with no Serve controller: 200 with the empty shape; the
  controller unreachable: 503 "The GCS may be down, please retry later";
- ``PUT /api/serve/applications/``: 200 with an empty body, 400 for an invalid config;
- with the GCS unreachable, the dashboard hangs as the real one does (retrying until the GCS is
  back) and only then answers: ``/api/gcs_healthz`` 503 after 1 s, job list and submit 500 after
  30 s (submit: "No available agent to submit job, please try again later."), job get and logs
  500 after 59 s (the bodies: ``503: Health check failed: Timed out while waiting for GCS to
  become available.`` and aiohttp's plain 500 page); ``RayConfig.dashboard_waits_for_gcs =
  False`` answers at once.

Every submission received is appended to ``RayConfig.records.submissions``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from emu.kernel.network import NetworkError
from emu.kernel.programs import ContainerContext

from . import state_api
from .config import RayConfig, SubmissionRecord
from .jobs import TERMINAL, JobManager, duplicate_message, submit_request_error
from .net import HttpRequest, RpcError, json_response, response, serve_http
from .serve import CONTROLLER_NAME, EMPTY_DETAILS, SERVE_NAMESPACE, validate_deploy_config
from .workloads import RayClient, RayError

T = TypeVar("T")

DASHBOARD_PORT = 8265
SESSION_NAMESPACE = "session"
#: How long the real dashboard (Ray 2.60) hangs on a GCS that is down before it answers: the
#: health check 503 after ~1 s, job list and submit 500 after ~30 s, job get and logs after ~59 s.
GCS_WAIT_HEALTH_S = 1.0
GCS_WAIT_LIST_S = 30.0
GCS_WAIT_GET_S = 59.0
SESSION_KEY = "session_name"
#: aiohttp's answer to a handler's unhandled exception (``RequestHandler.handle_error``): what
#: the real dashboard's job routes answer once their GCS call gives up.
INTERNAL_ERROR_BODY = "500 Internal Server Error\n\nServer got itself in trouble"
#: The GCS client's error once the GCS has not answered (the health check's 503 carries it after
#: ``<status>: <reason>``, aiohttp's text for an ``HTTPServiceUnavailable(reason=...)``).
GCS_TIMEOUT = "Timed out while waiting for GCS to become available."

_HEAD_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "ray/dashboard/modules/job/job_head.py", in submit_job\n'
    "    resp = await job_agent_client.submit_job_internal(submit_request)\n"
    '  File "ray/dashboard/modules/job/job_head.py", in submit_job_internal\n'
    "    await self._raise_error(resp)\n"
    '  File "ray/dashboard/modules/job/job_head.py", in _raise_error\n'
    '    raise RuntimeError(f"Request failed with status code {status}: {error_text}.")\n'
    "RuntimeError: Request failed with status code 400: {agent}.\n"
)
_AGENT_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "ray/dashboard/modules/job/job_agent.py", in submit_job\n'
    "    submission_id = await self.get_job_manager().submit_job(\n"
    '  File "ray/dashboard/modules/job/job_manager.py", in submit_job\n'
    "    raise ValueError(\n"
    "ValueError: {message}\n"
)


#: The head's 400 for a submit body ``JobSubmitRequest`` rejects (``parse_and_validate_request``);
#: the ``TypeError`` line follows.
_INVALID_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "ray/dashboard/modules/job/utils.py", in parse_and_validate_request\n'
    "    return validate_request_type(json_data, request_type)\n"
    '  File "ray/dashboard/modules/job/utils.py", in validate_request_type\n'
    "    return request_type(**json_data)\n"
)

_VERSION_TAG = re.compile(r":(\d+\.\d+\.\d+)(?:[-@]|$)")


def ray_version_of(image: str, default: str) -> str:
    """The Ray version a head reports: its image's tag (``rayproject/ray:2.41.0-py310`` →
    2.41.0), as the real image runs that Ray; ``default`` for an untagged or custom image."""
    found = _VERSION_TAG.search(image)
    return found.group(1) if found else default


def duplicate_submission_body(submission_id: str, through_head: bool = True) -> str:
    """The body Ray answers for a reused submission id (500 through the head, 400 from the
    agent)."""
    agent = _AGENT_TRACE.replace("{message}", duplicate_message(submission_id))
    return _HEAD_TRACE.replace("{agent}", agent) if through_head else agent


def driver_info(job: dict[str, Any]) -> dict[str, Any]:
    """``DriverInfo`` of a driver in the GCS JOB table: its job id, its address and pid (as
    strings, as the real dashboard answers them)."""
    return {"id": job["job_id"], "node_ip_address": job.get("driver_ip_address"),
            "pid": job.get("driver_pid")}


def job_details(submission_id: str, info: dict[str, Any],
                drivers: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``JobDetails`` of a submission job; ``drivers``: the GCS JOB table by job id, for the
    driver info of a job whose entrypoint connected to Ray."""
    driver = None
    if info.get("job_id"):
        record = (drivers or {}).get(info["job_id"]) or {"job_id": info["job_id"]}
        driver = driver_info(record)
    return {
        "type": "SUBMISSION", "job_id": info.get("job_id"), "submission_id": submission_id,
        "driver_info": driver, "status": info["status"], "entrypoint": info["entrypoint"],
        "message": info.get("message"), "error_type": info.get("error_type"),
        "start_time": info.get("start_time"), "end_time": info.get("end_time"),
        "metadata": info.get("metadata"), "runtime_env": info.get("runtime_env"),
        "driver_agent_http_address": info.get("driver_agent_http_address"),
        "driver_node_id": info.get("driver_node_id"),
        "driver_exit_code": info.get("driver_exit_code"),
    }


def driver_job_details(job: dict[str, Any]) -> dict[str, Any]:
    """``JobDetails`` of a driver that was not submitted (``ray.init`` from a script)."""
    return {
        "type": "DRIVER", "job_id": job["job_id"], "submission_id": None,
        "driver_info": driver_info(job),
        "status": "SUCCEEDED" if job.get("is_dead") else "RUNNING",
        "entrypoint": job.get("entrypoint") or "", "message": None, "error_type": None,
        "start_time": job.get("start_time_ms"), "end_time": job.get("end_time_ms"),
        "metadata": {}, "runtime_env": {}, "driver_agent_http_address": None,
        "driver_node_id": job.get("driver_node_id"), "driver_exit_code": None,
    }


def _internal(job: dict[str, Any]) -> bool:
    return str(job.get("ray_namespace") or "").startswith("_ray_internal")


class Dashboard:
    """The head's dashboard process: HTTP on 8265 over a GCS client and a job manager."""

    def __init__(self, ctx: ContainerContext, config: RayConfig, *, gcs_address: str,
                 session_name: str, port: int = DASHBOARD_PORT) -> None:
        self.ctx = ctx
        self.config = config
        self.session_name = session_name
        self.port = port
        self.client = RayClient(ctx.network, gcs_address, process=ctx.process, rng=ctx.rng)
        self.jobs = JobManager(self.client, ctx.env, ctx.rng, ctx.process.log)
        self._manager_started = False
        self.ray_version = ray_version_of(str(ctx.container.get("image") or ""),
                                          config.ray_version)

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def run(self) -> int:
        await self._session_name()
        serve_http(self.ctx, self.port, self.handle)
        if not self.config.lazy_job_manager:
            self._job_manager()
        elif self.config.job_manager_starts_after is not None:
            self.ctx.process.spawn(self._start_manager_later(
                self.config.job_manager_starts_after), name="dashboard:manager-timer")
        await asyncio.Event().wait()
        return 0

    async def _start_manager_later(self, delay: float) -> None:
        await self.ctx.process.sleep(delay)
        self._job_manager()

    def _job_manager(self) -> JobManager:
        """``get_job_manager()``: the manager starts (and recovers the running jobs it finds)
        on first use."""
        if not self._manager_started:
            self._manager_started = True
            self.ctx.process.spawn(self.jobs.recover_running_jobs(), name="dashboard:recover")
        return self.jobs

    async def _session_name(self) -> None:
        """The head keeps the session name it finds in the internal KV (``session`` /
        ``session_name``), so a head restarted on a Redis-backed GCS reports the old one; else it
        stores its own."""
        while True:
            try:
                stored = await self.client.gcs.kv_get(SESSION_NAMESPACE, SESSION_KEY)
                if stored:
                    self.session_name = stored.decode()
                else:
                    await self.client.gcs.kv_put(SESSION_NAMESPACE, SESSION_KEY,
                                                 self.session_name.encode(), False)
                return
            except NetworkError:
                await asyncio.sleep(1.0)

    async def handle(self, req: HttpRequest) -> dict[str, Any]:
        path = req.path.rstrip("/") or "/"
        try:
            if path == "/api/version" and req.method == "GET":
                return json_response(200, {"version": "4", "ray_version": self.ray_version,
                                           "ray_commit": "emu", "session_name": self.session_name})
            if path == "/api/gcs_healthz" and req.method == "GET":
                return await self._gcs_healthz()
            if path == "/api/jobs":
                if req.method == "POST":
                    return await self._submit(req)
                if req.method == "GET":
                    return await self._waiting(GCS_WAIT_LIST_S, self._list_jobs)
            if path.startswith("/api/jobs/"):
                rest = path[len("/api/jobs/"):]
                budget = GCS_WAIT_GET_S if req.method == "GET" else GCS_WAIT_LIST_S
                return await self._waiting(budget, lambda: self._job_route(req, rest))
            if path == "/api/serve/applications":
                return await self._serve(req)
            if path == "/api/v0/actors" and req.method == "GET":
                return await self._list_actors(req)
        except NetworkError:
            return response(500, INTERNAL_ERROR_BODY)
        return response(404, f"404: Not Found ({req.method} {req.path})")

    async def _waiting(self, budget: float, op: Callable[[], Awaitable[T]]) -> T:
        """Run ``op``; while the GCS is unreachable, retry it once a second for ``budget``
        seconds (the real dashboard's GCS client hangs until the GCS is back or its call times
        out), then let the `NetworkError` through. Immediate with
        ``RayConfig.dashboard_waits_for_gcs`` False."""
        start = self.now
        while True:
            try:
                return await op()
            except NetworkError:
                left = budget - (self.now - start)
                # (within float rounding of the budget counts as spent: a wait of ~1e-14 s
                # can't move virtual time, so it would spin forever)
                if not self.config.dashboard_waits_for_gcs or left <= 1e-9:
                    raise
                await asyncio.sleep(min(1.0, left))

    async def _gcs_healthz(self) -> dict[str, Any]:
        try:
            await self._waiting(GCS_WAIT_HEALTH_S, self.client.gcs.check_alive)
        except NetworkError:
            return response(503, f"503: Health check failed: {GCS_TIMEOUT}")
        except RpcError as err:
            return response(503, f"503: Health check failed: {err}")
        return response(200, "success")

    # -- jobs ---------------------------------------------------------------------------------------

    async def _submit(self, req: HttpRequest) -> dict[str, Any]:
        try:
            body = req.json()
        except ValueError as err:
            return self._record("", "", response(400, f"Invalid JSON in request body: {err}"))
        if not isinstance(body, dict):
            body = {}
        invalid = submit_request_error(body)
        if invalid is not None:
            return self._record("", "", response(400, _INVALID_TRACE + f"TypeError: {invalid}\n"))
        sid = str(body.get("submission_id") or body.get("job_id") or "")
        try:
            submission_id = await self._waiting(GCS_WAIT_LIST_S,
                                                lambda: self._job_manager().submit(body))
        except ValueError:
            through_head = self.config.job_head_proxies_to_agent
            text = duplicate_submission_body(sid, through_head)
            return self._record(sid, body["entrypoint"], response(500 if through_head else 400,
                                                                  text))
        except NetworkError:
            return self._record(sid, body["entrypoint"], response(
                500, "No available agent to submit job, please try again later."))
        return self._record(submission_id, body["entrypoint"], json_response(
            200, {"job_id": submission_id, "submission_id": submission_id}))

    def _record(self, sid: str, entrypoint: str, answer: dict[str, Any]) -> dict[str, Any]:
        self.config.records.submissions.append(SubmissionRecord(
            self.now, self.ctx.pod_name or self.ctx.process.name, sid, entrypoint,
            int(answer["status"])))
        self.ctx.process.log("job_submission_received", submission_id=sid,
                             status=answer["status"])
        return answer

    async def _list_jobs(self) -> dict[str, Any]:
        infos = await self.jobs.info.all()
        jobs = await self.client.gcs.jobs()
        drivers = {job["job_id"]: job for job in jobs}
        out = [job_details(sid, info, drivers) for sid, info in infos.items()]
        for job in jobs:
            if not job.get("submission_id") and not _internal(job):
                out.append(driver_job_details(job))
        return json_response(200, out)

    async def _job_route(self, req: HttpRequest, rest: str) -> dict[str, Any]:
        parts = rest.split("/")
        sid = parts[0]
        action = "/".join(parts[1:])
        info = await self.jobs.info.get(sid)
        if info is None:
            drivers = [j for j in await self.client.gcs.jobs()
                       if j["job_id"] == sid and not _internal(j)]
            if drivers and req.method == "GET" and not action:
                return json_response(200, driver_job_details(drivers[0]))
            return response(404, f"Job {sid} does not exist")
        if req.method == "GET" and not action:
            by_id = {job["job_id"]: job for job in await self.client.gcs.jobs()} \
                if info.get("job_id") else {}
            return json_response(200, job_details(sid, info, by_id))
        if req.method == "POST" and action == "stop":
            return json_response(200, {"stopped": await self._job_manager().stop(sid)})
        if req.method == "DELETE" and not action:
            try:
                deleted = await self._job_manager().delete(sid)
            except RuntimeError as err:
                return response(500, f"Traceback (most recent call last):\nRuntimeError: {err}\n")
            return json_response(200, {"deleted": deleted})
        if req.method == "GET" and action == "logs":
            self._job_manager()
            return json_response(200, {"logs": await self._logs(sid, info)})
        return response(404, f"404: Not Found ({req.method} {req.path})")

    async def _logs(self, sid: str, info: dict[str, Any]) -> str:
        """The driver's log, read from its node (empty while unknown or once the node is gone)."""
        node_id = info.get("driver_node_id")
        if not node_id:
            return ""
        nodes = {n["node_id"]: n for n in await self.client.gcs.nodes()}
        node = nodes.get(node_id)
        if node is None or node["state"] != "ALIVE":
            return ""
        try:
            logs: str = await self.client.call(node["raylet_address"],
                                               {"method": "GetJobLogs", "submission_id": sid},
                                               verb="GetJobLogs", timeout=5.0)
        except (NetworkError, RpcError):
            return ""
        return logs

    # -- state API --------------------------------------------------------------------------------

    async def _list_actors(self, req: HttpRequest) -> dict[str, Any]:
        """``GET /api/v0/actors`` (`emu.ray.state_api`); 500 with Ray's GCS failure text once
        the GCS has not answered for the state API's 30 s timeout."""
        try:
            actors = await self._waiting(GCS_WAIT_LIST_S, self.client.gcs.actors)
        except NetworkError:
            return json_response(500, state_api.rest_body(False, state_api.GCS_QUERY_FAILURE,
                                                          None))
        status, body = state_api.list_actors(actors, req.query_all)
        return json_response(status, body)

    # -- serve --------------------------------------------------------------------------------------

    async def _controller(self) -> Any:
        record = await self.client.gcs.named_actor(CONTROLLER_NAME, SERVE_NAMESPACE)
        if record is None or record["state"] == "DEAD":
            return None
        from .workloads import ActorHandle

        return ActorHandle(self.client, record)

    async def _serve(self, req: HttpRequest) -> dict[str, Any]:
        if req.method == "GET":
            api_type = req.query.get("api_type")
            if api_type not in (None, "declarative", "imperative"):
                return response(400, f"Invalid 'api_type' value: {api_type!r}. Must be one of "
                                     "'imperative' or 'declarative'.")
            controller = await self._controller()
            if controller is None:
                return json_response(200, EMPTY_DETAILS)
            try:
                details = await controller.call("get_details", timeout=10.0)
            except RayError:
                return response(503, "Failed to get Serve details from the controller. The GCS "
                                     "may be down, please retry later.")
            return json_response(200, details)
        if req.method == "PUT":
            try:
                config = validate_deploy_config(req.json())
            except ValueError as err:
                return response(400, str(err))
            controller = await self._controller()
            try:
                if controller is None:
                    controller = await self.client.create_actor(
                        "emu.ray.serve:ServeController", name=CONTROLLER_NAME,
                        namespace=SERVE_NAMESPACE, detached=True, max_restarts=-1,
                        max_task_retries=-1, num_cpus=0.0, head=True, soft=True, timeout=60.0)
                await controller.call("deploy_apps", config, timeout=60.0)
            except RayError as err:
                if "validation" in str(err) or "duplicate" in str(err):
                    return response(400, str(err))
                return response(500, f"Failed to deploy the Serve config: {err}")
            except RpcError as err:
                return response(500, f"Failed to deploy the Serve config: {err}")
            return response(200, "")
        if req.method == "DELETE":
            controller = await self._controller()
            if controller is not None:
                try:
                    await controller.call("shutdown", timeout=60.0)
                    await self.client.kill(controller)
                except (RayError, RpcError) as err:
                    return response(500, f"Failed to shut down Serve: {err}")
            return response(200, "")
        return response(405, "Method Not Allowed")


__all__ = ["DASHBOARD_PORT", "TERMINAL", "Dashboard", "duplicate_submission_body"]
