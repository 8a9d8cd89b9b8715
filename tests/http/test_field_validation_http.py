"""``fieldValidation`` over HTTP (what kubectl sends: Strict): duplicate fields in a JSON or YAML
body are refused with kube-apiserver's 400 text; without the parameter (client-go's default,
the server's Warn) the last value counts and each dropped or repeated field comes back as a
``Warning`` header, as kube-apiserver sends it; Ignore drops them without a word."""

from __future__ import annotations

import httpx

from emu.http.transport import BASE_URL, httpx_transport

CM = "/api/v1/namespaces/default/configmaps"
TWICE_JSON = (b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, '
              b'"data": {"k": "1", "k": "2"}, "immutable": false, "immutable": true}')
TWICE_YAML = b"""apiVersion: v1
kind: ConfigMap
metadata:
  name: y
data:
  k: "1"
  k: "2"
"""


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim))


async def test_strict_refuses_a_json_field_given_twice_with_kubes_text(sim):
    async with client(sim) as c:
        resp = await c.post(CM, params={"fieldValidation": "Strict"}, content=TWICE_JSON,
                            headers={"content-type": "application/json"})
        assert resp.status_code == 400
        assert resp.json()["message"] == (
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
            'duplicate field "k", duplicate field "immutable"')
        assert (await c.get(f"{CM}/a")).status_code == 404
        resp = await c.post(CM, content=TWICE_JSON, headers={"content-type": "application/json"})
        assert resp.status_code == 201
        assert resp.json()["data"] == {"k": "2"}


async def test_strict_refuses_a_yaml_key_given_twice_with_kubes_line(sim):
    async with client(sim) as c:
        resp = await c.post(CM, params={"fieldValidation": "Strict"}, content=TWICE_YAML,
                            headers={"content-type": "application/yaml"})
        assert resp.status_code == 400
        assert resp.json()["message"].endswith(
            'strict decoding error: yaml: unmarshal errors:\n  line 7: key "k" already set in map')
        resp = await c.post(CM, params={"fieldValidation": "Ignore"}, content=TWICE_YAML,
                            headers={"content-type": "application/yaml"})
        assert resp.status_code == 201


def warnings(resp: httpx.Response) -> list[str]:
    return resp.headers.get_list("warning")


async def test_warn_names_each_dropped_field_in_a_warning_header(sim):
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "colour": "red"}, "spek": {},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicee": "x"}]}}
    async with client(sim) as c:
        resp = await c.post("/api/v1/namespaces/default/pods", json=body)
        assert resp.status_code == 201, resp.text
        # document order at every depth, as kube-apiserver's decoder walks the body
        assert warnings(resp) == [
            '299 - "unknown field \\"metadata.colour\\""',
            '299 - "unknown field \\"spek\\""',
            '299 - "unknown field \\"spec.containers[0].imagePullPolicee\\""']
        assert "imagePullPolicee" not in resp.text
        stored = resp.json()
        stored["spec"]["activeDeadlineSeconds"] = 50
        stored["spec"]["hostnam"] = "h"
        resp = await c.put("/api/v1/namespaces/default/pods/p", json=stored,
                           params={"fieldValidation": "Warn"})
        assert resp.status_code == 200, resp.text
        assert warnings(resp) == ['299 - "unknown field \\"spec.hostnam\\""']
        resp = await c.patch("/api/v1/namespaces/default/pods/p",
                             json={"metadata": {"labels": {"a": "b"}}, "statu": {}},
                             headers={"content-type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text
        assert warnings(resp) == ['299 - "unknown field \\"statu\\""']
        resp = await c.patch("/api/v1/namespaces/default/pods/p",
                             json={"metadata": {"labels": {"a": "c"}}, "statu": {}},
                             params={"fieldValidation": "Ignore"},
                             headers={"content-type": "application/merge-patch+json"})
        assert resp.status_code == 200 and warnings(resp) == []
        resp = await c.get("/api/v1/namespaces/default/pods/p")
        assert warnings(resp) == []


async def test_warn_names_a_repeated_json_field_and_a_repeated_yaml_key(sim):
    async with client(sim) as c:
        resp = await c.post(CM, content=TWICE_JSON, headers={"content-type": "application/json"})
        assert resp.status_code == 201
        assert warnings(resp) == ['299 - "duplicate field \\"k\\""',
                                  '299 - "duplicate field \\"immutable\\""']
        resp = await c.post(CM, content=TWICE_YAML, headers={"content-type": "application/yaml"})
        assert resp.status_code == 201
        # kube splits the yaml error into one warning per line (parseYAMLWarnings)
        assert warnings(resp) == ['299 - "line 7: key \\"k\\" already set in map"']
        resp = await c.post(CM, content=TWICE_JSON.replace(b'"a"', b'"b"'),
                            params={"fieldValidation": "Ignore"},
                            headers={"content-type": "application/json"})
        assert resp.status_code == 201 and warnings(resp) == []


async def test_warn_names_a_custom_resources_pruned_fields(sim):
    body = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc"},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}},
                "bogus": 1}}
    async with client(sim) as c:
        resp = await c.post("/apis/ray.io/v1/namespaces/default/rayclusters", json=body)
        assert resp.status_code == 201, resp.text
        assert warnings(resp) == ['299 - "unknown field \\"spec.bogus\\""']
        assert "bogus" not in resp.text


def test_a_warning_header_is_kubes_quoted_string_and_control_characters_are_dropped():
    from emu.http.gateway import _headers, warning_header

    assert warning_header('a "b" \\ c') == '299 - "a \\"b\\" \\\\ c"'
    # a repeat is sent once; a text with a control character not at all (kube's recorder
    # refuses it: a header cannot carry it)
    assert _headers(["x", "x", "two\nlines", "y"]) == (
        ("Warning", '299 - "x"'), ("Warning", '299 - "y"'))


async def test_a_compact_body_is_still_checked_for_a_repeated_field(sim):
    # a compact body that is its decoded value's own encoding cannot repeat a key, so the
    # gateway skips the slower check for it; a compact body that does repeat one is not that
    compact_twice = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},'
                     b'"data":{"k":"1","k":"2"}}')
    compact_once = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":{"k":"1"}}'
    async with client(sim) as c:
        resp = await c.post(CM, content=compact_twice, headers={"content-type": "application/json"})
        assert resp.status_code == 201
        assert warnings(resp) == ['299 - "duplicate field \\"k\\""']
        resp = await c.post(CM, content=compact_once, headers={"content-type": "application/json"})
        assert resp.status_code == 201 and warnings(resp) == []
        resp = await c.post(CM, params={"fieldValidation": "Strict"},
                            content=compact_twice.replace(b'"c"', b'"e"'),
                            headers={"content-type": "application/json"})
        assert resp.status_code == 400 and 'duplicate field "k"' in resp.json()["message"]
