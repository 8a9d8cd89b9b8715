"""The gateway's fast paths send stored bytes as they are: each must say exactly what encoding
the decoded answer would (watch events of every kind, Lists, single objects)."""

from __future__ import annotations

import httpx
import orjson
import pytest

import emu
from emu.apiserver.errors import RequestEntityTooLarge
from emu.apiserver.request import ApiRequest
from emu.apiserver.server import APIServer
from emu.http.transport import BASE_URL, httpx_transport
from emu.kernel.rng import SimRandom

CM = "/api/v1/namespaces/default/configmaps"


def _cm(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "data": {"k": name}}


async def _drain(stream, *, encoded: bool) -> list:
    stream.encoded = encoded
    out = []
    while stream.pending:
        out.append(await stream.__anext__())
    return out


async def test_encoded_watch_events_equal_the_decoded_ones(sim):
    api = sim.api
    api.create(_cm("a", app="x"))
    pairs = [(api.watch("ConfigMap", "default", resource_version="0", allow_bookmarks=True,
                        label_selector=sel), api.watch(
        "ConfigMap", "default", resource_version="0", allow_bookmarks=True, label_selector=sel))
        for sel in (None, "app=x")]
    start = api.store.rev
    api.create(_cm("b", app="x"))
    obj = api.get("ConfigMap", "b", "default")
    obj["metadata"]["labels"] = {"app": "y"}  # leaves the selector: DELETED at the new version
    api.update(obj)
    api.delete("ConfigMap", "a", "default")
    late = api.watch("ConfigMap", "default", resource_version=str(start),
                     send_initial_events=None)
    twin = api.watch("ConfigMap", "default", resource_version=str(start))
    pairs.append((late, twin))
    for plain, raw in pairs:
        want = await _drain(plain, encoded=False)
        raw.encoded = True
        first = await raw.__anext__()
        got = [first, *raw.take_chunk().splitlines(keepends=True)]
        assert got and all(line.endswith(b"\n") for line in got)
        assert [orjson.loads(line) for line in got] == want
        assert got == [orjson.dumps(e) + b"\n" for e in want]
    types = [e["type"] for e in [orjson.loads(x) for x in
                                 await _drain(api.watch("ConfigMap", "default",
                                                        resource_version=str(start),
                                                        label_selector="app=x"),
                                              encoded=True)]]
    assert types == ["ADDED", "DELETED", "DELETED"]
    # the initial-events bookmark and an ERROR event go through the decoded path
    wl, twin = (api.watch("ConfigMap", "default", send_initial_events=True,
                          allow_bookmarks=True, resource_version_match="NotOlderThan",
                          resource_version="") for _ in range(2))
    decoded = twin.take_ready()  # decoded dicts unless encoded lines are asked for
    wl.encoded = True
    events = [orjson.loads(x) for x in wl.take_chunk().splitlines()]
    assert events == decoded
    assert events[-1]["type"] == "BOOKMARK"
    assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end":
                                                               "true"}
    assert wl.take_ready() == [] and wl.take_chunk() == b"" and wl.delivered == len(events)
    wl.fail({"kind": "Status", "code": 410, "reason": "Expired"})
    (error,) = wl.take_ready()
    assert orjson.loads(error) == {"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                              "reason": "Expired"}}


async def test_lists_and_objects_over_http_are_the_stored_bytes(sim):
    async with __import__("httpx").AsyncClient(
            base_url=BASE_URL, transport=httpx_transport(sim, identity="t")) as c:
        for i in range(5):
            r = await c.post(CM, json=_cm(f"o{i}", shard=str(i % 2)))
            assert r.status_code == 201
            assert r.content == sim.api.store.tables[("", "ConfigMap")].objs[
                ("default", f"o{i}")].data
        r = await c.get(CM, params={"labelSelector": "shard=1"})
        want = sim.api.list("ConfigMap", "default", label_selector="shard=1")
        assert r.content == orjson.dumps(want)
        r = await c.get(CM, params={"limit": "2"})
        page = sim.api.list("ConfigMap", "default", limit=2)
        assert r.json() == page and r.content == orjson.dumps(page)
        empty = await c.get(CM, params={"labelSelector": "shard=9"})
        assert empty.json()["items"] == []
        # a dry-run update answers what would be stored, not what is stored
        obj = (await c.get(f"{CM}/o1")).json()
        obj["data"] = {"k": "dry"}
        r = await c.put(f"{CM}/o1", json=obj, params={"dryRun": "All"})
        assert r.status_code == 200 and r.json()["data"] == {"k": "dry"}
        assert (await c.get(f"{CM}/o1")).json()["data"] == {"k": "o1"}
        r = await c.patch(f"{CM}/o1", json={"data": {"k": "p"}},
                          headers={"content-type": "application/merge-patch+json"})
        assert r.json()["data"] == {"k": "p"}
        assert r.content == orjson.dumps(sim.api.get("ConfigMap", "o1", "default"))


def test_encoded_paths_keep_the_digest():
    async def session(sim: emu.Simulation) -> str:
        await test_lists_and_objects_over_http_are_the_stored_bytes(sim)
        return sim.trace.digest()

    assert emu.run(session, seed=4) == emu.run(session, seed=4)


def test_encoded_answers_are_the_stored_bytes_of_the_decoded_answers():
    # two servers with one seed: the same requests get the same answers, one side encoded
    api, twin = (APIServer(clock=lambda: 0.0, rng=SimRandom(9)) for _ in range(2))

    def both(verb, body=None, name=None, **options):
        req = ApiRequest(verb, "ConfigMap", "v1", "default", name, body, options)
        plain = twin.serve(ApiRequest(*req[:-1], {k: v for k, v in options.items()
                                                  if k != "encoded"}))
        return api.serve(req), plain

    def stored(name):
        return api.store.tables[("", "ConfigMap")].objs[("default", name)].data

    for i in range(3):
        got, want = both("create", _cm(f"e{i}", app="x"), encoded=True)
        assert got == stored(f"e{i}") and orjson.loads(got) == want
    got, want = both("get", name="e1", encoded=True)
    assert got == stored("e1") and orjson.loads(got) == want
    obj = orjson.loads(got)
    obj["data"] = {"k": "changed"}
    got, want = both("update", obj, "e1", encoded=True)
    assert got == stored("e1") and orjson.loads(got) == want
    assert want["data"] == {"k": "changed"}
    got, want = both("update", orjson.loads(got), "e1", encoded=True)  # changes nothing
    assert got == stored("e1") and orjson.loads(got) == want
    got, want = both("patch", {"data": {"k": "p"}}, "e2", encoded=True)
    assert got == stored("e2") and orjson.loads(got) == want and want["data"] == {"k": "p"}
    got, want = both("create", _cm("e9"), encoded=True, dry_run=True)  # decoded all the same
    assert got == want and "resourceVersion" not in got["metadata"]


async def test_a_json_body_is_limited_by_the_bytes_it_came_in(sim):
    """kube-apiserver's 3 MiB limit counts the request's bytes: a pretty-printed body over it
    is 413 even when its compact encoding is under it, from the HTTP gateway as from the
    API server measuring the encoding itself."""
    limit = 3 * 1024 * 1024
    padded = orjson.dumps(_cm("big"), option=orjson.OPT_INDENT_2)
    padded = padded.replace(b"\n", b"\n" + b" " * (limit // padded.count(b"\n") + 1))
    assert len(padded) > limit > len(orjson.dumps(orjson.loads(padded)))
    async with httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(
            sim, identity="t", max_body=2 * limit)) as c:
        r = await c.post(CM, content=padded, headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text
        assert r.json()["message"] == f"Request entity too large: limit is {limit}"
        r = await c.post(CM, content=orjson.dumps(orjson.loads(padded)),
                         headers={"content-type": "application/json"})
        assert r.status_code == 201
    with pytest.raises(RequestEntityTooLarge):  # in process: the encoding's size
        sim.api.serve(ApiRequest("create", "ConfigMap", "v1", "default", None, _cm("huge") | {
            "data": {"k": "x" * (limit + 1)}}))
    assert ("default", "huge") not in sim.api.store.tables[("", "ConfigMap")].objs
