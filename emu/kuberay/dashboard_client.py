"""The Ray dashboard client the RayJob and RayService controllers use (Jobs and Serve APIs).

Port of ``ray-operator/controllers/ray/utils/dashboardclient/dashboard_httpclient.go`` and the
request/response types of ``utils/types``. HTTP is an abstract async transport,
``send(method, path, body) -> (status_code, body)``, already bound to one dashboard (the emulated
network routes it to the head Service; connection errors and timeouts are raised by ``send`` and
propagate unchanged, like Go's ``client.Do`` errors). A body is a dict/list (JSON) or a str (raw text).

Status-code handling is KubeRay's (SPEC §5):
- ``get_job_info``: 404 → ``BadRequest("Job <id> does not exist on the cluster")`` (the RayJob
  controller tests for BadRequest); any other status whose body is JSON is decoded as job info
  (Go does not check the status here); non-JSON → ``GetJobInfo fail: <body>``;
- ``submit_job_req``: 500 containing "Please use a different submission_id" →
  `SubmissionIdAlreadyUsedError` (carrying the submission id, as Go returns it alongside the
  error); other non-2xx → ``SubmitJob fail: <status> <body>``;
- ``list_jobs`` / ``get_job_log``: 404 → None;
- serve calls: non-2xx → ``UpdateDeployments fail: ...`` / ``GetServeDetails fail: ...``;
- ``stop_job``: ``stopped: false`` is an error only if the job is not terminal.

Deviations: no auth header (token auth is not modelled; ``auth_token`` is kept for the record), and
Go's ``%v`` of a job-info struct pointer in "failed to stop job: ..." is rendered as the dict.
"""

from __future__ import annotations

import http
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import yaml

from emu.apiserver.errors import BadRequest

from .utils import constant as C

Body = dict[str, Any] | list[Any] | str
#: ``async def send(method, path, body) -> (status, body)``.
Send = Callable[[str, str, "dict[str, Any] | None"], Awaitable[tuple[int, Body]]]

SERVE_DETAILS_PATH = "/api/serve/applications/"
API_TYPE_PARAM = "declarative"
DEPLOY_PATH_V2 = "/api/serve/applications/"
JOB_PATH = "/api/jobs/"
DUPLICATE_SUBMISSION_TEXT = "Please use a different submission_id"


class DashboardError(Exception):
    """A dashboard call that KubeRay turns into an error; ``str()`` is Go's message."""


class SubmissionIdAlreadyUsedError(DashboardError):
    """The dashboard refused a reused ``submission_id`` (HTTP 500 with Ray's duplicate text)."""

    def __init__(self, submission_id: str) -> None:
        super().__init__(f"submission ID '{submission_id}' already used, "
                         "Please use a different submission_id")
        self.submission_id = submission_id


def _status_line(code: int) -> str:
    # net/http Response.Status: "404 Not Found".
    try:
        return f"{code} {http.HTTPStatus(code).phrase}"
    except ValueError:
        return str(code)


def _text(body: Body) -> str:
    return body if isinstance(body, str) else json.dumps(body)


def _ok(code: int) -> bool:
    return 200 <= code <= 299


def unmarshal_runtime_env_yaml(runtime_env_yaml: str) -> dict[str, Any] | None:
    """Port of `UnmarshalRuntimeEnvYAML` (dashboard_httpclient.go): the YAML as a map (None if empty)."""
    try:
        value = yaml.safe_load(runtime_env_yaml) if runtime_env_yaml else None
        if value is not None and not isinstance(value, dict):
            raise yaml.YAMLError(f"cannot unmarshal {type(value).__name__} into a map")
    except yaml.YAMLError as err:
        raise DashboardError(f"failed to unmarshal RuntimeEnvYAML: {runtime_env_yaml}: {err}") from err
    return value


def convert_ray_job_to_req(ray_job: Mapping[str, Any]) -> dict[str, Any]:
    """Port of `ConvertRayJobToReq` (dashboard_httpclient.go): the POST body for HTTPMode.

    ``entrypoint``, ``submission_id`` (= ``status.jobId``), ``metadata``, ``runtime_env`` from
    ``runtimeEnvYAML``, ``entrypoint_num_cpus``/``_gpus`` and ``entrypoint_resources`` (parsed
    from its JSON string); empty fields are omitted as Go's ``omitempty`` does.
    """
    spec = ray_job.get("spec") or {}
    request: dict[str, Any] = {"entrypoint": spec.get("entrypoint", "")}
    submission_id = (ray_job.get("status") or {}).get("jobId") or ""
    if submission_id:
        request["submission_id"] = submission_id
    if spec.get("metadata"):
        request["metadata"] = dict(spec["metadata"])
    if spec.get("runtimeEnvYAML"):
        runtime_env = unmarshal_runtime_env_yaml(spec["runtimeEnvYAML"])
        if runtime_env:
            request["runtime_env"] = runtime_env
    if spec.get("entrypointNumCpus"):
        request["entrypoint_num_cpus"] = float(spec["entrypointNumCpus"])
    if spec.get("entrypointNumGpus"):
        request["entrypoint_num_gpus"] = float(spec["entrypointNumGpus"])
    if spec.get("entrypointResources"):
        resources = json.loads(spec["entrypointResources"])
        if resources:
            request["entrypoint_resources"] = resources
    return request


def convert_serve_details_to_application_statuses(
        serve_details: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Port of `ConvertServeDetailsToApplicationStatuses` (dashboard_httpclient.go).

    Projects each application onto ``ServeApplicationStatus``: ``name``, ``status``, ``message`` and
    ``deployments`` (name → ``name``/``status``/``message``), dropping route prefixes and docs paths.
    """
    out: dict[str, dict[str, Any]] = {}
    for app_name, app in (serve_details.get("applications") or {}).items():
        deployments = {}
        for dep_name, dep in (app.get("deployments") or {}).items():
            deployments[dep_name] = {k: dep[k] for k in ("name", "status", "message") if dep.get(k)}
        status: dict[str, Any] = {"deployments": deployments, "status": app.get("status", "")}
        for key in ("name", "message"):
            if app.get(key):
                status[key] = app[key]
        out[app_name] = status
    return out


class RayDashboardClient:
    """Port of `RayDashboardClient` (dashboard_httpclient.go) over an abstract transport."""

    def __init__(self, send: Send, dashboard_url: str = "", auth_token: str = "") -> None:
        self._send = send
        self.dashboard_url = dashboard_url
        self.auth_token = auth_token

    # -- Serve -----------------------------------------------------------------------------------

    async def update_deployments(self, config: Mapping[str, Any]) -> None:
        """Port of `RayDashboardClient.UpdateDeployments`: PUT the Serve config (idempotent)."""
        code, body = await self._send("PUT", DEPLOY_PATH_V2, dict(config))
        if not _ok(code):
            raise DashboardError(f"UpdateDeployments fail: {_status_line(code)} {_text(body)}")

    async def get_serve_details(self) -> dict[str, Any]:
        """Port of `RayDashboardClient.GetServeDetails`: GET declarative applications."""
        code, body = await self._send("GET", f"{SERVE_DETAILS_PATH}?api_type={API_TYPE_PARAM}", None)
        if not _ok(code):
            raise DashboardError(f"GetServeDetails fail: {_status_line(code)} {_text(body)}")
        if not isinstance(body, dict):
            raise DashboardError(f"GetServeDetails failed. Failed to unmarshal bytes: {_text(body)}")
        return body

    async def get_multi_application_status(self) -> dict[str, dict[str, Any]]:
        """Port of `RayDashboardClient.GetMultiApplicationStatus`: app name → status (see converter)."""
        try:
            details = await self.get_serve_details()
        except DashboardError as err:
            raise DashboardError(f"failed to get serve details: {err}") from err
        return convert_serve_details_to_application_statuses(details)

    # -- Jobs ------------------------------------------------------------------------------------

    async def get_job_info(self, job_id: str) -> dict[str, Any]:
        """Port of `RayDashboardClient.GetJobInfo`: 404 raises ``BadRequest`` (job unknown to this GCS)."""
        code, body = await self._send("GET", JOB_PATH + job_id, None)
        if code == 404:
            raise BadRequest(f"Job {job_id} does not exist on the cluster")
        if not isinstance(body, dict):
            raise DashboardError(f"GetJobInfo fail: {_text(body)}")
        return body

    async def list_jobs(self) -> list[dict[str, Any]] | None:
        """Port of `RayDashboardClient.ListJobs`: None on 404."""
        code, body = await self._send("GET", JOB_PATH, None)
        if code == 404:
            return None
        if not isinstance(body, list):
            raise DashboardError(f"GetJobInfo fail: {_text(body)}")
        return body

    async def submit_job(self, ray_job: Mapping[str, Any]) -> str:
        """Port of `RayDashboardClient.SubmitJob`: `convert_ray_job_to_req` then `submit_job_req`."""
        return await self.submit_job_req(convert_ray_job_to_req(ray_job))

    async def submit_job_req(self, request: Mapping[str, Any]) -> str:
        """Port of `RayDashboardClient.SubmitJobReq`: POST the job; returns the ``job_id``.

        A reused ``submission_id`` raises `SubmissionIdAlreadyUsedError`.
        """
        code, body = await self._send("POST", JOB_PATH, dict(request))
        if not _ok(code):
            if code == 500 and DUPLICATE_SUBMISSION_TEXT in _text(body):
                raise SubmissionIdAlreadyUsedError(str(request.get("submission_id", "")))
            raise DashboardError(f"SubmitJob fail: {_status_line(code)} {_text(body)}")
        if not isinstance(body, dict):
            raise DashboardError(f"SubmitJob fail: {_text(body)}")
        return str(body.get("job_id", ""))

    async def get_job_log(self, job_id: str) -> str | None:
        """Port of `RayDashboardClient.GetJobLog`: the logs text, None on 404."""
        code, body = await self._send("GET", JOB_PATH + job_id + "/logs", None)
        if code == 404:
            return None
        if not isinstance(body, dict):
            raise DashboardError(f"GetJobLog fail: {_text(body)}")
        return str(body.get("logs", ""))

    async def stop_job(self, job_id: str) -> None:
        """Port of `RayDashboardClient.StopJob`: ``stopped: false`` is fine when the job already ended."""
        _code, body = await self._send("POST", JOB_PATH + job_id + "/stop", None)
        if not isinstance(body, dict):
            raise DashboardError(f"StopJob fail: {_text(body)}")
        if not body.get("stopped", False):
            info = await self.get_job_info(job_id)
            if not C.is_job_terminal(info.get("status", "")):
                raise DashboardError(f"failed to stop job: {info}")

    async def delete_job(self, job_id: str) -> None:
        """Port of `RayDashboardClient.DeleteJob`: fire the DELETE; the response is not inspected."""
        await self._send("DELETE", JOB_PATH + job_id, None)
