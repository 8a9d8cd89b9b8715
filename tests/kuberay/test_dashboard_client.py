"""The dashboard client maps each status code the way KubeRay's does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from emu.apiserver.errors import BadRequest
from emu.kernel.loop import VirtualTimeLoop
from emu.kuberay.dashboard_client import (
    DashboardError,
    RayDashboardClient,
    SubmissionIdAlreadyUsedError,
    convert_ray_job_to_req,
)

T = TypeVar("T")


def vrun(fn: Callable[[], Awaitable[T]]) -> T:
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(fn())  # type: ignore[arg-type]


class FakeDashboard:
    """Answers by (method, path) and records every request."""

    def __init__(self, answers: dict[tuple[str, str], tuple[int, Any]]) -> None:
        self.answers = answers
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []

    async def send(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        return self.answers[(method, path)]


def client(answers: dict[tuple[str, str], tuple[int, Any]]) -> tuple[RayDashboardClient, FakeDashboard]:
    fake = FakeDashboard(answers)
    return RayDashboardClient(fake.send), fake


def test_job_info_404_is_a_bad_request_naming_the_job():
    c, _ = client({("GET", "/api/jobs/j-1"): (404, "Not Found")})
    with pytest.raises(BadRequest) as err:
        vrun(lambda: c.get_job_info("j-1"))
    assert str(err.value) == "Job j-1 does not exist on the cluster"


def test_job_info_is_decoded_from_json_and_a_text_body_is_an_error():
    info = {"job_id": "raysubmit_1", "submission_id": "j-1", "status": "RUNNING", "start_time": 1000}
    c, _ = client({("GET", "/api/jobs/j-1"): (200, info), ("GET", "/api/jobs/j-2"): (502, "bad gateway")})
    assert vrun(lambda: c.get_job_info("j-1")) == info
    with pytest.raises(DashboardError) as err:
        vrun(lambda: c.get_job_info("j-2"))
    assert str(err.value) == "GetJobInfo fail: bad gateway"


def test_submit_posts_the_submission_id_and_returns_the_job_id():
    c, fake = client({("POST", "/api/jobs/"): (200, {"job_id": "raysubmit_1", "submission_id": "j-1"})})
    request = {"entrypoint": "python x.py", "submission_id": "j-1"}
    assert vrun(lambda: c.submit_job_req(request)) == "raysubmit_1"
    assert fake.requests == [("POST", "/api/jobs/", {"entrypoint": "python x.py", "submission_id": "j-1"})]


def test_reused_submission_id_is_reported_as_already_used_with_the_id():
    body = "Job with submission_id j-1 already exists. Please use a different submission_id."
    c, _ = client({("POST", "/api/jobs/"): (500, body)})
    with pytest.raises(SubmissionIdAlreadyUsedError) as err:
        vrun(lambda: c.submit_job_req({"entrypoint": "python x.py", "submission_id": "j-1"}))
    assert str(err.value) == "submission ID 'j-1' already used, Please use a different submission_id"
    assert err.value.submission_id == "j-1"


def test_other_submit_failures_carry_the_status_line_and_body():
    c, _ = client({("POST", "/api/jobs/"): (503, "overloaded")})
    with pytest.raises(DashboardError) as err:
        vrun(lambda: c.submit_job_req({"entrypoint": "x"}))
    assert str(err.value) == "SubmitJob fail: 503 Service Unavailable overloaded"


def test_stop_of_an_already_finished_job_is_not_an_error():
    c, fake = client({("POST", "/api/jobs/j-1/stop"): (200, {"stopped": False}),
                      ("GET", "/api/jobs/j-1"): (200, {"status": "SUCCEEDED"})})
    vrun(lambda: c.stop_job("j-1"))
    assert [r[:2] for r in fake.requests] == [("POST", "/api/jobs/j-1/stop"), ("GET", "/api/jobs/j-1")]


def test_stop_that_leaves_a_running_job_is_an_error():
    c, _ = client({("POST", "/api/jobs/j-1/stop"): (200, {"stopped": False}),
                   ("GET", "/api/jobs/j-1"): (200, {"status": "RUNNING"})})
    with pytest.raises(DashboardError) as err:
        vrun(lambda: c.stop_job("j-1"))
    assert str(err.value) == "failed to stop job: {'status': 'RUNNING'}"


def test_list_jobs_and_job_logs_are_none_on_404():
    c, _ = client({("GET", "/api/jobs/"): (404, ""), ("GET", "/api/jobs/j-1/logs"): (404, "")})
    assert vrun(c.list_jobs) is None
    assert vrun(lambda: c.get_job_log("j-1")) is None


def test_update_deployments_puts_the_serve_config_and_fails_on_non_2xx():
    config = {"applications": [{"name": "app", "import_path": "m:app"}]}
    c, fake = client({("PUT", "/api/serve/applications/"): (200, "")})
    vrun(lambda: c.update_deployments(config))
    assert fake.requests == [("PUT", "/api/serve/applications/", config)]
    c, _ = client({("PUT", "/api/serve/applications/"): (500, "boom")})
    with pytest.raises(DashboardError) as err:
        vrun(lambda: c.update_deployments(config))
    assert str(err.value) == "UpdateDeployments fail: 500 Internal Server Error boom"


def test_multi_application_status_projects_serve_details_per_app():
    details = {"deploy_mode": "MULTI_APP", "applications": {"app": {
        "name": "app", "status": "RUNNING", "route_prefix": "/", "docs_path": None,
        "deployments": {"D": {"name": "D", "status": "HEALTHY", "message": "", "route_prefix": "/"}}}}}
    c, fake = client({("GET", "/api/serve/applications/?api_type=declarative"): (200, details)})
    assert vrun(c.get_multi_application_status) == {
        "app": {"name": "app", "status": "RUNNING", "deployments": {"D": {"name": "D", "status": "HEALTHY"}}}}
    assert fake.requests[0][:2] == ("GET", "/api/serve/applications/?api_type=declarative")


def test_serve_details_failure_is_wrapped_by_multi_application_status():
    c, _ = client({("GET", "/api/serve/applications/?api_type=declarative"): (503, "not ready")})
    with pytest.raises(DashboardError) as err:
        vrun(c.get_multi_application_status)
    assert str(err.value) == ("failed to get serve details: GetServeDetails fail: 503 Service Unavailable "
                              "not ready")


def test_http_mode_request_carries_entrypoint_submission_id_runtime_env_and_resources():
    rj = {"spec": {"entrypoint": "python x.py", "runtimeEnvYAML": "pip: [requests]", "metadata": {"a": "b"},
                   "entrypointNumCpus": 1, "entrypointResources": '{"r": 2}'},
          "status": {"jobId": "demo-job-x7k2p"}}
    assert convert_ray_job_to_req(rj) == {
        "entrypoint": "python x.py", "submission_id": "demo-job-x7k2p", "metadata": {"a": "b"},
        "runtime_env": {"pip": ["requests"]}, "entrypoint_num_cpus": 1.0, "entrypoint_resources": {"r": 2}}


def test_transport_errors_propagate_unchanged():
    async def refuse(method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        raise ConnectionRefusedError("head is down")

    c = RayDashboardClient(refuse)
    with pytest.raises(ConnectionRefusedError):
        vrun(lambda: c.get_job_info("j-1"))
