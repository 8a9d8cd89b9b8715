"""``fieldValidation`` over HTTP (what kubectl sends: Strict): duplicate fields in a JSON or YAML
body are refused with kube-apiserver's 400 text; without the parameter (client-go's default,
the server's Warn) the last value counts, as before."""

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
