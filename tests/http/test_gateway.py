"""The Kubernetes REST API through the in-process httpx transport, on virtual time: discovery,
every verb, subresources, list and watch, errors as Status, Tables, server-side apply, faults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest

import emu
from emu.http.gateway import caller_identity
from emu.http.tables import human_duration, json_path
from emu.http.transport import BASE_URL, httpx_transport

CM = "/api/v1/namespaces/default/configmaps"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def client(sim, **kw) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim, **kw),
                             headers={"user-agent": "test-client/1.0"})


def cm(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}, "data": {"k": "1"}}


async def test_discovery_lists_builtins_and_kuberay(sim):
    async with client(sim) as c:
        version = (await c.get("/version")).json()
        assert version["major"] == "1"
        # the world's own Kubernetes version (KubeConfig.kubernetes_version), as clients that
        # gate on it (KubeRay's SidecarSubmitterRestart) read it through the API server
        assert version["gitVersion"] == sim.api.version
        assert (await c.get("/api")).json()["versions"] == ["v1"]
        groups = {g["name"] for g in (await c.get("/apis")).json()["groups"]}
        assert {"apps", "batch", "ray.io", "coordination.k8s.io"} <= groups
        core = {r["name"]: r for r in (await c.get("/api/v1")).json()["resources"]}
        assert core["pods"]["namespaced"] and "pods/status" in core and "pods/log" in core
        assert core["configmaps"]["shortNames"] == ["cm"]
        assert not core["namespaces"]["namespaced"]
        ray = {r["name"] for r in (await c.get("/apis/ray.io/v1")).json()["resources"]}
        assert {"rayclusters", "rayjobs", "rayservices", "rayclusters/status"} <= ray
        assert (await c.get("/apis/nope.io/v1")).status_code == 404


async def test_crd_applied_at_run_time_is_discovered_and_served(sim):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "greetings.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Greeting", "plural": "greetings",
                              "singular": "greeting"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "additionalPrinterColumns": [
                                      {"name": "Text", "type": "string",
                                       "jsonPath": ".spec.text"}],
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    async with client(sim) as c:
        r = await c.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
        assert r.status_code == 201, r.text
        assert (await c.get("/apis/example.com")).json()["preferredVersion"]["version"] == "v1"
        path = "/apis/example.com/v1/namespaces/default/greetings"
        r = await c.post(path, json={"apiVersion": "example.com/v1", "kind": "Greeting",
                                     "metadata": {"name": "hi"}, "spec": {"text": "hello"}})
        assert r.status_code == 201, r.text
        table = (await c.get(path, headers={"accept": TABLE})).json()
        assert [col["name"] for col in table["columnDefinitions"]] == ["Name", "Text"]
        assert table["rows"][0]["cells"] == ["hi", "hello"]
        index = (await c.get("/openapi/v3")).json()["paths"]
        doc = (await c.get(index["apis/example.com/v1"]["serverRelativeURL"])).json()
        schemas = doc["components"]["schemas"]
        assert schemas["com.example.v1.Greeting"]["x-kubernetes-group-version-kind"] == [
            {"group": "example.com", "version": "v1", "kind": "Greeting"}]
        # the document names the version /version reports, as kube-apiserver's do
        assert doc["info"]["version"] == (await c.get("/version")).json()["gitVersion"]


async def test_a_crds_other_served_versions_are_discovered_and_refused_by_name(sim):
    """envtest waits until every served version of a CRD is in discovery (KubeRay's have v1 and
    v1alpha1): both are listed; requests at the non-storage version get a 404 that says why."""
    version = {"served": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                    "versions": [{"name": "v1", "storage": True, **version},
                                 {"name": "v1alpha1", "storage": False, **version},
                                 {"name": "v0", "storage": False, **version, "served": False}]}}
    async with client(sim) as c:
        r = await c.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
        assert r.status_code == 201, r.text
        group = (await c.get("/apis/example.com")).json()
        assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha1"]
        assert group["preferredVersion"]["version"] == "v1"
        listed = (await c.get("/apis/example.com/v1alpha1")).json()
        assert listed["groupVersion"] == "example.com/v1alpha1"
        assert [r["name"] for r in listed["resources"]] == ["gadgets"]
        assert (await c.get("/apis/example.com/v0")).status_code == 404
        agg = (await c.get("/apis", headers={
            "accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
        )).json()
        [item] = [i for i in agg["items"] if i["metadata"].get("name") == "example.com"]
        assert [(v["version"], v["resources"][0]["responseKind"]["version"])
                for v in item["versions"]] == [("v1", "v1"), ("v1alpha1", "v1alpha1")]
        assert (await c.get("/apis/example.com/v1/namespaces/default/gadgets")).status_code == 200
        r = await c.get("/apis/example.com/v1alpha1/namespaces/default/gadgets")
        assert r.status_code == 404
        assert r.json()["message"] == (
            "example.com/v1alpha1 gadgets is listed in discovery (the CustomResourceDefinition "
            "serves it) but the emulator serves Gadget at its storage version example.com/v1 "
            "only (no conversion between versions)")


async def test_every_verb_on_configmaps(sim):
    async with client(sim) as c:
        r = await c.post(CM, json=cm("a", app="x"))
        assert r.status_code == 201
        created = r.json()
        assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
        got = (await c.get(f"{CM}/a")).json()
        assert got == created
        got["data"]["k"] = "2"
        updated = (await c.put(f"{CM}/a", json=got)).json()
        assert updated["data"]["k"] == "2"
        stale = (await c.put(f"{CM}/a", json=got))
        assert stale.status_code == 409
        assert stale.json()["reason"] == "Conflict" and stale.json()["kind"] == "Status"
        merge = await c.patch(f"{CM}/a", content=b'{"data":{"m":"1"}}',
                              headers={"content-type": "application/merge-patch+json"})
        assert merge.json()["data"] == {"k": "2", "m": "1"}
        jp = await c.patch(f"{CM}/a", content=b'[{"op":"remove","path":"/data/m"}]',
                           headers={"content-type": "application/json-patch+json"})
        assert jp.json()["data"] == {"k": "2"}
        smp = await c.patch(f"{CM}/a", content=b'{"metadata":{"labels":{"s":"1"}}}',
                            headers={"content-type": "application/strategic-merge-patch+json"})
        assert smp.json()["metadata"]["labels"] == {"app": "x", "s": "1"}
        gone = await c.delete(f"{CM}/a")
        assert gone.status_code == 200 and gone.json()["status"] == "Success"
        missing = await c.get(f"{CM}/a")
        assert missing.status_code == 404
        assert missing.json()["message"] == 'configmaps "a" not found'


async def test_list_selectors_and_pagination(sim):
    async with client(sim) as c:
        for i in range(5):
            await c.post(CM, json=cm(f"c{i}", tier="even" if i % 2 == 0 else "odd"))
        r = await c.get(CM, params={"labelSelector": "tier=even"})
        assert [i["metadata"]["name"] for i in r.json()["items"]] == ["c0", "c2", "c4"]
        r = await c.get(CM, params={"fieldSelector": "metadata.name=c3"})
        assert [i["metadata"]["name"] for i in r.json()["items"]] == ["c3"]
        names, token = [], None
        for _ in range(5):
            params = {"limit": "2", **({"continue": token} if token else {})}
            page = (await c.get(CM, params=params)).json()
            names += [i["metadata"]["name"] for i in page["items"]]
            token = page["metadata"].get("continue")
            if not token:
                break
        assert names == [f"c{i}" for i in range(5)]
        everywhere = (await c.get("/api/v1/configmaps")).json()
        assert len(everywhere["items"]) == 5 and everywhere["kind"] == "ConfigMapList"


async def _events(resp: httpx.Response, count: int) -> list[dict]:
    out = []
    async for line in resp.aiter_lines():
        if line.strip():
            out.append(orjson.loads(line))
            if len(out) == count:
                break
    return out


async def test_watch_streams_from_a_resource_version(sim):
    async with client(sim) as c:
        first = (await c.post(CM, json=cm("w"))).json()
        rv = first["metadata"]["resourceVersion"]
        for i in range(3):
            await c.patch(f"{CM}/w", content=orjson.dumps({"data": {"k": str(i)}}),
                          headers={"content-type": "application/merge-patch+json"})
        async with c.stream("GET", CM, params={"watch": "1", "resourceVersion": rv}) as resp:
            assert resp.status_code == 200
            events = await _events(resp, 3)
        assert [e["type"] for e in events] == ["MODIFIED"] * 3
        assert [e["object"]["data"]["k"] for e in events] == ["0", "1", "2"]


async def test_watch_bookmarks_and_gone(sim):
    async with client(sim) as c:
        rv = (await c.post(CM, json=cm("b"))).json()["metadata"]["resourceVersion"]
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with c.stream("GET", CM, params=params) as resp:
            start = sim.now
            [bookmark] = await _events(resp, 1)
        assert bookmark["type"] == "BOOKMARK" and sim.now - start == pytest.approx(60.0)
        for i in range(30):
            await c.post(CM, json=cm(f"fill{i}"))
        async with c.stream("GET", CM, params={"watch": "1", "resourceVersion": "1"}) as resp:
            [err] = await _events(resp, 1)
        assert err["type"] == "ERROR" and err["object"]["code"] == 410
        assert err["object"]["reason"] in ("Gone", "Expired")


test_watch_bookmarks_and_gone = pytest.mark.emu(history_window=10)(
    test_watch_bookmarks_and_gone)


async def test_errors_are_status_objects(sim):
    async with client(sim) as c:
        bad = await c.post(CM, content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and bad.json()["kind"] == "Status"
        assert bad.json()["reason"] == "BadRequest"
        wrong = await c.post(CM, content=b"x", headers={"content-type": "text/csv"})
        assert wrong.status_code == 415
        unknown = await c.get("/api/v1/namespaces/default/widgets")
        assert unknown.status_code == 404 and unknown.json()["kind"] == "Status"
        dup = await c.post(CM, json=cm("d"))
        dup = await c.post(CM, json=cm("d"))
        assert dup.status_code == 409 and dup.json()["reason"] == "AlreadyExists"
        invalid = await c.post(CM, json=cm("Bad_Name"))
        assert invalid.status_code == 422 and invalid.json()["reason"] == "Invalid"
        mismatch = await c.put(f"{CM}/other", json=cm("d"))
        assert mismatch.status_code == 400


async def test_token_and_body_limit(sim):
    transport = httpx_transport(sim, token="s3cret", max_body=1000)
    async with httpx.AsyncClient(base_url=BASE_URL, transport=transport) as c:
        assert (await c.get(CM)).status_code == 401
        auth = {"authorization": "Bearer s3cret"}
        assert (await c.get(CM, headers=auth)).status_code == 200
        big = cm("big")
        big["data"]["k"] = "x" * 2000
        r = await c.post(CM, json=big, headers=auth)
        assert r.status_code == 413 and r.json()["reason"] == "RequestEntityTooLarge"
        assert sim.api.list("ConfigMap", "default")["items"] == []


async def test_tables_for_builtins_and_kuberay(sim):
    async with client(sim) as c:
        await c.post(CM, json=cm("t"))
        await sim.sleep(150)
        table = (await c.get(CM, headers={"accept": TABLE})).json()
        assert table["kind"] == "Table"
        assert [col["name"] for col in table["columnDefinitions"]] == ["Name", "Data", "Age"]
        assert table["rows"][0]["cells"] == ["t", 1, "2m30s"]
        assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
        rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
              "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                  "containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}}}
        r = await c.post("/apis/ray.io/v1/namespaces/default/rayclusters", json=rc)
        assert r.status_code == 201, r.text
        table = (await c.get("/apis/ray.io/v1/namespaces/default/rayclusters/rc",
                             headers={"accept": TABLE},
                             params={"includeObject": "Object"})).json()
        names = [col["name"] for col in table["columnDefinitions"]]
        assert names[:3] == ["Name", "desired workers", "available workers"]
        assert "status" in names and "head pod IP" in names
        assert table["rows"][0]["object"]["kind"] == "RayCluster"


def test_human_duration_and_json_path():
    assert [human_duration(s) for s in (5, 119, 150, 600, 3 * 3600 + 60, 30 * 3600,
                                        3 * 86400 + 3600, 400 * 86400)] == [
        "5s", "119s", "2m30s", "10m", "3h1m", "30h", "3d1h", "400d"]
    obj = {"status": {"head": {"podIP": "10.0.0.1"}, "list": [{"a": 1}]}}
    assert json_path(obj, ".status.head.podIP") == "10.0.0.1"
    assert json_path(obj, ".status.list[0].a") == 1
    assert json_path(obj, ".status.missing.x") is None
    assert caller_identity("kubectl/v1.32.4 (linux/amd64)") == "kubectl"
    assert caller_identity("") == "http"


async def test_status_and_scale_subresources(sim):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    path = "/apis/apps/v1/namespaces/default/deployments"
    async with client(sim) as c:
        r = await c.post(path, json=dep)
        assert r.status_code == 201, r.text
        scale = (await c.get(f"{path}/d/scale")).json()
        assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
        assert scale["status"]["selector"] == "app=d"
        r = await c.patch(f"{path}/d/scale", content=b'{"spec":{"replicas":4}}',
                          headers={"content-type": "application/merge-patch+json"})
        assert r.json()["spec"]["replicas"] == 4
        assert sim.api.get("Deployment", "d")["spec"]["replicas"] == 4
        obj = (await c.get(f"{path}/d")).json()
        obj["status"] = {"observedGeneration": 99}
        obj["spec"]["replicas"] = 7  # ignored by /status
        after = (await c.put(f"{path}/d/status", json=obj)).json()
        assert after["status"] == {"observedGeneration": 99}
        assert after["spec"]["replicas"] == 4
        r = await c.put(f"{path}/d/scale", json={"spec": {"replicas": -1}})
        assert r.status_code == 422


APPLY = {"content-type": "application/apply-patch+yaml"}


async def test_server_side_apply_conflicts_force_and_removal(sim):
    async with client(sim) as c:
        url = f"{CM}/ssa"
        first = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: '1', b: '2'}\n"
        r = await c.patch(url, content=first, headers=APPLY, params={"fieldManager": "alice"})
        assert r.status_code == 200, r.text
        rv = r.json()["metadata"]["resourceVersion"]
        again = await c.patch(url, content=first, headers=APPLY, params={"fieldManager": "alice"})
        assert again.json()["metadata"]["resourceVersion"] == rv  # a no-op apply writes nothing
        bob = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: '9'}\n"
        r = await c.patch(url, content=bob, headers=APPLY, params={"fieldManager": "bob"})
        assert r.status_code == 409
        status = r.json()
        # kube's printManager names an Apply manager alone ("using v1" is for Update ones)
        assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
        assert status["details"]["causes"][0]["field"] == ".data.a"
        same = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {b: '2'}\n"
        r = await c.patch(url, content=same, headers=APPLY, params={"fieldManager": "bob"})
        assert r.status_code == 200  # the same value: shared ownership, no conflict
        r = await c.patch(url, content=bob, headers=APPLY,
                          params={"fieldManager": "bob", "force": "true"})
        assert r.status_code == 200 and r.json()["data"] == {"a": "9", "b": "2"}
        managers = {m["manager"]: m["fieldsV1"] for m in r.json()["metadata"]["managedFields"]}
        assert managers == {"alice": {"f:data": {"f:b": {}}},
                            "bob": {"f:data": {"f:a": {}}}}
        # alice stops applying b, but bob no longer owns b either: b is removed.
        only = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {}\n"
        r = await c.patch(url, content=only, headers=APPLY, params={"fieldManager": "alice"})
        assert r.json()["data"] == {"a": "9"}
        r = await c.patch(url, content=first, headers=APPLY)
        assert r.status_code == 400  # fieldManager is required


async def test_faults_reach_http_callers(sim):
    async with client(sim, identity="my-tool") as c:
        await c.post(CM, json=cm("f"))
        sim.faults.outage("apiserver")
        with pytest.raises(httpx.ConnectError):
            await c.get(f"{CM}/f")
        with pytest.raises(httpx.ConnectError):
            await c.get("/api/v1")  # discovery is down too
        sim.faults.restore("apiserver")
        sim.faults.lose_responses(caller="my-tool", verb="create")
        start = sim.now
        with pytest.raises(httpx.ReadTimeout):
            await c.post(CM, json=cm("lost"))
        assert sim.now - start >= 30.0
        assert sim.api.get("ConfigMap", "lost", "default")  # applied; the answer was lost
        sim.faults.fail_requests(caller="my-tool", verb="get", code=503, count=1)
        r = await c.get(f"{CM}/f")
        assert r.status_code == 503 and r.json()["kind"] == "Status"
        sim.faults.partition("my-tool", "apiserver")
        with pytest.raises(httpx.ReadTimeout):
            await c.get(f"{CM}/f")
        sim.faults.heal()
        sim.faults.latency(2.0, caller="my-tool")
        start = sim.now
        assert (await c.get(f"{CM}/f")).status_code == 200
        assert sim.now - start == pytest.approx(4.0)
        sim.faults.latency(0.0, caller="my-tool")
        # another identity is not affected by my-tool's partition
        sim.faults.partition("my-tool", "apiserver")
        async with client(sim, identity="other") as other:
            assert (await other.get(f"{CM}/f")).status_code == 200


async def _lightkube_session(sim) -> tuple[list[str], str]:
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap

    lk = emu.lightkube_client(sim)
    seen: list[str] = []
    first = await lk.create(ConfigMap(metadata=ObjectMeta(name="lk"), data={"n": "0"}))

    async def writer() -> None:
        for i in range(1, 4):
            await sim.sleep(sim.rng.uniform(1, 10))
            await lk.patch(ConfigMap, "lk", {"data": {"n": str(i)}})

    task = asyncio.get_running_loop().create_task(writer())
    async for kind, obj in lk.watch(ConfigMap, namespace="default",
                                    resource_version=first.metadata.resourceVersion):
        seen.append(f"{kind}:{obj.data['n']}@{sim.now:.3f}")
        if len(seen) == 3:
            break
    await task
    assert [o.metadata.name async for o in lk.list(ConfigMap, namespace="default")] == ["lk"]
    return seen, sim.trace.digest()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lightkube_in_process_is_deterministic(seed):
    runs = [emu.run(_lightkube_session, seed=seed) for _ in range(2)]
    assert runs[0] == runs[1]
    assert [s.split("@")[0] for s in runs[0][0]] == ["MODIFIED:1", "MODIFIED:2", "MODIFIED:3"]


async def _kr8s_session(sim) -> tuple[list[str], str]:
    from kr8s.asyncio.objects import ConfigMap

    api = await emu.kr8s_api(sim)
    seen: list[str] = []
    first = await ConfigMap({"metadata": {"name": "k8"}, "data": {"n": "0"}}, api=api)
    await first.create()

    async def writer() -> None:
        for i in range(1, 4):
            await sim.sleep(sim.rng.uniform(1, 10))
            cm = await ConfigMap.get("k8", namespace="default", api=api)
            await cm.patch({"data": {"n": str(i)}})

    task = asyncio.get_running_loop().create_task(writer())
    async for kind, obj in api.watch("configmaps", namespace="default",
                                     since=first.metadata.resourceVersion):
        seen.append(f"{kind}:{obj.data['n']}@{sim.now:.3f}")
        if len(seen) == 3:
            break
    await task
    assert [o.name async for o in api.get("configmaps", namespace="default")] == ["k8"]
    with pytest.raises(Exception, match="already exists"):
        await ConfigMap({"metadata": {"name": "k8"}}, api=api).create()
    return seen, sim.trace.digest()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kr8s_in_process_is_deterministic(seed):
    runs = [emu.run(_kr8s_session, seed=seed) for _ in range(2)]
    assert runs[0] == runs[1]
    assert [s.split("@")[0] for s in runs[0][0]] == ["MODIFIED:1", "MODIFIED:2", "MODIFIED:3"]
    # the writer's random sleeps are virtual: the three events arrive at seeded times
    assert float(runs[0][0][-1].split("@")[1]) > 3


async def test_kr8s_in_process_sees_faults_on_virtual_time(sim):
    from kr8s import APITimeoutError
    from kr8s.asyncio.objects import ConfigMap

    api = await emu.kr8s_api(sim, identity="my-operator")
    sim.faults.partition("my-operator", "apiserver")
    start = sim.now
    with pytest.raises(APITimeoutError):
        await ConfigMap({"metadata": {"name": "cut"}, "data": {}}, api=api).create()
    assert sim.now - start == pytest.approx(30.0)  # the network's timeout, in virtual seconds
    sim.faults.heal()
    sim.faults.latency(1.5, caller="my-operator")
    start = sim.now
    await ConfigMap({"metadata": {"name": "slow"}, "data": {}}, api=api).create()
    assert sim.now - start == pytest.approx(3.0)  # 1.5 s each way
    assert sim.api.get("ConfigMap", "slow", "default")["metadata"]["name"] == "slow"
    assert sim.trace.select("write")  # the write went through the API server, traced


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw)


async def test_protobuf_bodies_of_the_typed_generators(sim):
    proto = {"content-type": "application/vnd.kubernetes.protobuf"}
    meta = _field(1, b"pb") + _field(11, _field(1, b"app") + _field(2, b"x"))
    raw = _field(1, meta) + _field(2, _field(1, b"k") + _field(2, b"v"))
    async with client(sim) as c:
        r = await c.post(CM, content=_envelope("v1", "ConfigMap", raw), headers=proto)
        assert r.status_code == 201, r.text
        assert r.json()["data"] == {"k": "v"} and r.json()["metadata"]["labels"] == {"app": "x"}
        r = await c.post("/apis/apps/v1/namespaces/default/statefulsets",
                         content=_envelope("apps/v1", "StatefulSet", _field(1, meta)),
                         headers=proto)
        assert r.status_code == 415 and "must be sent as JSON" in r.json()["message"]
        r = await c.post(CM, content=b"\x01\x02", headers=proto)
        assert r.status_code == 400


async def test_namespace_status_and_finalize_paths(sim):
    async with client(sim) as c:
        r = await c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "team"}})
        assert r.status_code == 201
        status = (await c.get("/api/v1/namespaces/team/status")).json()
        assert status["metadata"]["name"] == "team" and status["status"]["phase"] == "Active"
        r = await c.post("/api/v1/namespaces/team/configmaps", json=cm("inside"))
        assert r.status_code == 201 and r.json()["metadata"]["namespace"] == "team"
        listed = (await c.get("/api/v1/namespaces/team/configmaps")).json()
        assert [i["metadata"]["name"] for i in listed["items"]] == ["inside"]
        r = await c.delete("/api/v1/namespaces/team")
        assert r.status_code == 200  # emptied and removed at once here (no finalizers)
        assert (await c.get("/api/v1/namespaces/team/configmaps/inside")).status_code == 404
        assert (await c.get("/apis/nope.example.com")).status_code == 404


async def test_paths_with_empty_segments_or_no_leading_slash_route_as_their_segments(sim):
    from emu.http.gateway import Gateway
    from emu.http.wire import HttpRequest

    gw = Gateway(sim)
    sim.api.create(cm("a") | {"metadata": {"name": "a", "namespace": "default"}})
    for path in (CM + "/a", CM + "/a/", "/" + CM + "//a", CM.lstrip("/") + "/a"):
        r = await gw.handle(HttpRequest("GET", path, (), {}, b""))
        assert r.status == 200 and orjson.loads(r.body)["metadata"]["name"] == "a", path
    assert (await gw.handle(HttpRequest("GET", "/", (), {}, b""))).status == 404


_SESSION_SCRIPT = """
import emu, test_gateway
print(emu.run(test_gateway._lightkube_session, seed=5)[1])
"""


def test_lightkube_digest_is_the_same_under_other_hash_seeds():
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    digests = set()
    for hash_seed in ("1", "977"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
        done = subprocess.run([sys.executable, "-c", _SESSION_SCRIPT], env=env, timeout=120,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        digests.add(done.stdout.strip().splitlines()[-1])
    assert len(digests) == 1


async def _rayjob_with_lightkube(sim) -> tuple[str, float]:
    import yaml
    from lightkube.generic_resource import create_namespaced_resource

    rayjob_kind = create_namespaced_resource("ray.io", "v1", "RayJob", "rayjobs")
    await sim.install_kuberay()
    lk = emu.lightkube_client(sim)
    manifest = yaml.safe_load((Path(__file__).parent / "manifests" / "rayjob.yaml").read_text())
    created = await lk.create(rayjob_kind(manifest), namespace="default")
    async for _kind, obj in lk.watch(rayjob_kind, namespace="default",
                                     resource_version=created.metadata.resourceVersion):
        status = obj.get("status") or {}
        if status.get("jobDeploymentStatus") == "Complete":
            return status.get("jobStatus", ""), sim.now
    raise AssertionError("the watch ended before the RayJob completed")


def test_a_rayjob_completes_for_an_in_process_lightkube_client():
    job_status, at = emu.run(_rayjob_with_lightkube, seed=3, cluster=True)
    assert job_status == "SUCCEEDED"
    assert at < 300  # virtual seconds: the whole RayJob costs no real waiting


async def _ticker(ctx) -> int:
    ctx.set_ready()
    for n in range(3):
        await asyncio.sleep(5)
        ctx.process.log("tick", n=n)
    return 0


@pytest.mark.emu(cluster=True)
async def test_pod_logs_and_follow(sim):
    sim.programs.register("emu-test/ticker", _ticker)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tick"},
           "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "emu-test/ticker:1"}]}}
    path = "/api/v1/namespaces/default/pods/tick"
    async with client(sim) as c:
        assert (await c.post("/api/v1/namespaces/default/pods", json=pod)).status_code == 201
        await sim.wait_for("Pod", "tick", lambda p: (p.get("status") or {}).get("phase")
                           == "Running")
        lines = []
        async with c.stream("GET", f"{path}/log", params={"follow": "true"}) as resp:
            assert resp.headers["content-type"].startswith("text/plain")
            async for line in resp.aiter_lines():
                lines.append(line)
        events = [line.split()[1] for line in lines if line]
        assert events[:1] == ["process_started"]
        assert [e for e in events if e == "tick"] == ["tick"] * 3
        assert events[-1] in ("process_exited", "process_stopped")
        done = await c.get(f"{path}/log", params={"follow": "true"})  # exited: returns at once
        assert done.text.count(" tick ") == 3
        last = await c.get(f"{path}/log", params={"tailLines": "2"})
        assert len(last.text.splitlines()) == 2 and last.text.splitlines()[-1] == lines[-1]
        bad = await c.get(f"{path}/log", params={"container": "nope"})
        assert bad.status_code == 400


async def test_aggregated_discovery_when_asked_first(sim):
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json")
    async with client(sim) as c:
        r = await c.get("/apis", headers={"accept": accept})
        assert r.headers["content-type"] == ("application/json;g=apidiscovery.k8s.io;v=v2;"
                                             "as=APIGroupDiscoveryList")
        groups = {g["metadata"]["name"]: g for g in r.json()["items"]}
        ray = {res["resource"]: res for res in groups["ray.io"]["versions"][0]["resources"]}
        assert ray["rayjobs"]["responseKind"] == {"group": "ray.io", "version": "v1",
                                                  "kind": "RayJob"}
        assert ray["rayjobs"]["scope"] == "Namespaced"
        assert [s["subresource"] for s in ray["rayjobs"]["subresources"]] == ["status"]
        core = (await c.get("/api", headers={"accept": accept})).json()
        assert core["items"][0]["metadata"] == {}
        pods = next(res for res in core["items"][0]["versions"][0]["resources"]
                    if res["resource"] == "pods")
        assert {s["subresource"] for s in pods["subresources"]} == {"status", "log", "eviction"}
        legacy = (await c.get("/apis")).json()  # without the Accept: the legacy document
        assert legacy["kind"] == "APIGroupList"


SCALED_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "pools.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Pool", "plural": "pools", "singular": "pool"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}, "scale": {
                               "specReplicasPath": ".spec.size",
                               "statusReplicasPath": ".status.ready",
                               "labelSelectorPath": ".status.selector"}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def test_scale_subresource_of_a_crd(sim):
    path = "/apis/example.com/v1/namespaces/default/pools"
    async with client(sim) as c:
        r = await c.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                         json=SCALED_CRD)
        assert r.status_code == 201, r.text
        found = {res["name"] for res in (await c.get("/apis/example.com/v1")).json()["resources"]}
        assert "pools/scale" in found
        r = await c.post(path, json={"apiVersion": "example.com/v1", "kind": "Pool",
                                     "metadata": {"name": "p"}, "spec": {"size": 2}})
        assert r.status_code == 201, r.text
        scale = (await c.get(f"{path}/p/scale")).json()
        assert scale["spec"] == {"replicas": 2} and scale["status"] == {"replicas": 0}
        r = await c.put(f"{path}/p/scale", json={**scale, "spec": {"replicas": 5}})
        assert r.status_code == 200 and r.json()["spec"]["replicas"] == 5
        assert sim.api.get("Pool", "p", "default")["spec"]["size"] == 5
        assert (await c.get(f"{CM}/x/scale")).status_code == 404  # ConfigMaps do not scale


async def test_watch_list_streams_the_initial_state_then_a_bookmark(sim):
    async with client(sim) as c:
        for name in ("w1", "w2"):
            await c.post(CM, json=cm(name))
        params = {"watch": "1", "sendInitialEvents": "true", "allowWatchBookmarks": "true",
                  "resourceVersionMatch": "NotOlderThan", "resourceVersion": ""}
        async with c.stream("GET", CM, params=params) as resp:
            events = await _events(resp, 3)
        assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
        annotations = events[2]["object"]["metadata"]["annotations"]
        assert annotations == {"k8s.io/initial-events-end": "true"}
        bad = await c.get(CM, params={"watch": "1", "sendInitialEvents": "true"})
        assert bad.status_code == 422  # watch-lists need allowWatchBookmarks and the match
