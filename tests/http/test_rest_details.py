"""Per-kind REST details as kube-apiserver's registries answer them: which kinds a DELETE returns
(``ReturnDeletedObject``), a Service's default status, and error bodies byte for byte as Go's
``json.Encoder`` writes a ``metav1.Status``."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from emu.http.transport import BASE_URL, httpx_transport

NS = "/api/v1/namespaces/default"


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim))


def svc(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}]}}


async def test_deleting_a_service_returns_the_service(sim):
    async with client(sim) as c:
        assert (await c.post(f"{NS}/services", json=svc("s"))).status_code == 201
        r = await c.delete(f"{NS}/services/s")
        assert r.status_code == 200
        body = r.json()
        assert (body["kind"], body["metadata"]["name"]) == ("Service", "s")


async def test_kinds_without_return_deleted_object_answer_a_status(sim):
    async with client(sim) as c:
        await c.post(f"{NS}/configmaps", json={"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "c"}})
        r = await c.delete(f"{NS}/configmaps/c")
        body = r.json()
        assert (body["kind"], body["status"]) == ("Status", "Success")
        assert "group" not in body["details"]  # core kinds: Go omits the empty group


async def test_service_accounts_and_claims_return_the_deleted_object(sim):
    async with client(sim) as c:
        await c.post(f"{NS}/serviceaccounts", json={"apiVersion": "v1", "kind": "ServiceAccount",
                                                    "metadata": {"name": "sa"}})
        assert (await c.delete(f"{NS}/serviceaccounts/sa")).json()["kind"] == "ServiceAccount"


async def test_a_service_has_an_empty_load_balancer_status(sim):
    async with client(sim) as c:
        created = (await c.post(f"{NS}/services", json=svc("s"))).json()
        assert created["status"] == {"loadBalancer": {}}
        got = (await c.get(f"{NS}/services/s")).json()
        assert got["status"] == {"loadBalancer": {}}
        sent = {**svc("s"), "metadata": got["metadata"], "status": {}}
        put = (await c.put(f"{NS}/services/s/status", json=sent)).json()
        assert put["status"] == {"loadBalancer": {}}


async def test_error_bodies_are_kubes_bytes(sim):
    async with client(sim) as c:
        r = await c.get(f"{NS}/configmaps/nope")
        assert r.status_code == 404
        assert r.content == (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            b'"message":"configmaps \\"nope\\" not found","reason":"NotFound",'
            b'"details":{"name":"nope","kind":"configmaps"},"code":404}\n')
        r = await c.get("/apis/apps/v1/namespaces/default/deployments/nope")
        assert r.content.endswith(
            b'"details":{"name":"nope","group":"apps","kind":"deployments"},"code":404}\n')


async def test_a_watch_timeout_is_in_wall_seconds_under_speed(sim):
    """Under ``emu serve --speed 10`` (a paced loop with ``speed``) a watch asked to last 2 s
    lasts 2 wall seconds, 20 virtual ones; on a plain virtual loop, 2 virtual seconds."""
    loop = asyncio.get_running_loop()
    for speed, lasts in ((None, 2.0), (10.0, 20.0)):
        if speed is not None:
            loop.speed = speed  # type: ignore[attr-defined]
        async with client(sim) as c:
            start = loop.time()
            async with c.stream("GET", f"{NS}/configmaps", params={
                    "watch": "1", "timeoutSeconds": "2"}) as resp:
                [line async for line in resp.aiter_lines()]
            assert loop.time() - start == pytest.approx(lasts, abs=0.5)


async def test_a_put_to_an_applied_object_is_recorded_as_its_field_managers_update(sim):
    async with client(sim) as c:
        url = f"{NS}/configmaps/applied"
        body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {a: '1'}\n"
        r = await c.patch(url, content=body, params={"fieldManager": "gitops"},
                          headers={"content-type": "application/apply-patch+yaml"})
        live = r.json()
        live["data"] = {"a": "2"}
        r = await c.put(url, json=live, params={"fieldManager": "operator"})
        managers = [(m["manager"], m["operation"], m["fieldsV1"])
                    for m in r.json()["metadata"]["managedFields"]]
        assert managers == [("operator", "Update", {"f:data": {"f:a": {}}})]
        r = await c.patch(url, content=body, params={"fieldManager": "gitops"},
                          headers={"content-type": "application/apply-patch+yaml"})
        assert r.status_code == 409
        assert r.json()["message"].startswith(
            'Apply failed with 1 conflict: conflict with "operator" using v1 at ')
