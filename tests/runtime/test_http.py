from __future__ import annotations

import asyncio

import pytest

import emu
from emu.runtime import HttpClient


async def _dashboard(sim):
    got = []

    async def handler(payload, info):
        got.append((info.src, payload["method"], payload["path"], payload["body"]))
        if payload["path"] == "/api/jobs/missing":
            return {"status": 404, "body": "Job missing does not exist"}
        return {"status": 200, "headers": {"content-type": "application/json"},
                "body": '{"job_id": "raysubmit_1"}'}

    async def head(proc):
        sim.network.register("rc-head-svc.default.svc.cluster.local:8265", handler, process=proc)
        await asyncio.Event().wait()

    sim.start_process("rc-head", head)

    async def idle(proc):
        await asyncio.Event().wait()

    operator = sim.start_process("operator-0", idle)
    await sim.sleep(0)
    return got, HttpClient(sim.network, operator)


async def test_a_request_reaches_the_dashboard_from_the_operator_process_with_a_json_body(sim):
    got, http = await _dashboard(sim)
    resp = await http.request("rc-head-svc.default.svc.cluster.local:8265", "post", "/api/jobs/",
                              {"entrypoint": "python x.py"})
    assert (resp.status, resp.json()) == (200, {"job_id": "raysubmit_1"})
    assert got == [("operator-0", "POST", "/api/jobs/", '{"entrypoint":"python x.py"}')]


async def test_error_statuses_are_responses_not_exceptions(sim):
    _, http = await _dashboard(sim)
    resp = await http.request("rc-head-svc.default.svc.cluster.local:8265", "GET",
                              "/api/jobs/missing")
    assert (resp.status, resp.body) == (404, "Job missing does not exist")


async def test_a_partition_from_the_head_times_out_after_the_dashboard_client_timeout(sim):
    _, http = await _dashboard(sim)
    sim.faults.partition("operator-0", "rc-head")
    with pytest.raises(emu.Timeout):
        await http.request("rc-head-svc.default.svc.cluster.local:8265", "GET", "/api/version")
    assert sim.now == 2.0


async def test_a_slow_dashboard_times_out_after_the_client_timeout_like_gos_http_client(sim):
    async def slow(payload, info):
        await sim.sleep(30)
        return {"status": 200, "body": "late"}

    sim.network.register("slow-svc.default.svc.cluster.local:8265", slow)
    http = HttpClient(sim.network, None)
    with pytest.raises(emu.Timeout, match=r"^GET http://slow-svc.default.svc.cluster.local:8265"
                                          r"/api/version: context deadline exceeded"):
        await http.request("slow-svc.default.svc.cluster.local:8265", "GET", "/api/version")
    assert sim.now == 2.0
