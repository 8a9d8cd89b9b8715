"""Kubernetes' own OpenAPI schemas of the built-in kinds (from kubernetes-validate), in
``/openapi/v3`` and ``/openapi/v2`` (JSON and gnostic protobuf): nested fields, kube's
extensions, references that all resolve, and the conversion from the package's JSON Schema."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from emu.apiserver.server import KUBERNETES_VERSION
from emu.http import k8s_openapi, protobuf
from emu.http.transport import BASE_URL, httpx_transport

PB = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim))


def refs(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):  # not JSONSchemaProps' "$ref" field
                out.add(value)
            else:
                out |= refs(value)
    elif isinstance(node, list):
        for item in node:
            out |= refs(item)
    return out


def types(node: Any) -> list[Any]:
    if isinstance(node, dict):
        found = [node["type"]] if "type" in node else []
        for key, value in node.items():
            if key == "properties":
                for prop in value.values():
                    found += types(prop)
            elif key != "type":
                found += types(value)
        return found
    if isinstance(node, list):
        return [t for item in node for t in types(item)]
    return []


async def test_v3_built_in_documents_are_complete_with_kube_extensions(sim):
    async with client(sim) as c:
        index = (await c.get("/openapi/v3")).json()["paths"]
        for key, entry in index.items():
            doc = (await c.get(entry["serverRelativeURL"])).json()
            schemas = doc["components"]["schemas"]
            for ref in refs(doc):
                assert ref.startswith("#/components/schemas/"), (key, ref)
                assert ref.removeprefix("#/components/schemas/") in schemas, (key, ref)
            assert all(isinstance(t, str) and t != "null" for t in types(schemas)), key
        apps = (await c.get("/openapi/v3/apis/apps/v1")).json()["components"]["schemas"]
    dep = apps["io.k8s.api.apps.v1.Deployment"]
    assert dep["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert "enum" not in dep["properties"]["kind"]
    assert dep["properties"]["spec"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}]
    replicas = apps["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]
    assert replicas["type"] == "integer" and replicas["format"] == "int32"
    containers = apps["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert apps["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["oneOf"] == [
        {"type": "integer"}, {"type": "string"}]
    assert apps["io.k8s.apimachinery.pkg.api.resource.Quantity"]["oneOf"] == [
        {"type": "string"}, {"type": "number"}]


async def test_v2_json_and_protobuf_hold_every_definition_and_the_custom_kinds(sim):
    async with client(sim) as c:
        r = await c.get("/openapi/v2")
        assert r.headers["content-type"].startswith("application/json")
        doc = r.json()
        pb = await c.get("/openapi/v2", headers={"accept": PB})
    assert doc["swagger"] == "2.0"
    defs = doc["definitions"]
    for ref in refs(doc):
        assert ref.removeprefix("#/definitions/") in defs, ref
    assert defs["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["$ref"] == \
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    assert "io.k8s.api.policy.v1.PodDisruptionBudget" in defs
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    ray = defs["io.ray.v1.RayCluster"]
    assert ray["x-kubernetes-group-version-kind"] == [
        {"group": "ray.io", "version": "v1", "kind": "RayCluster"}]
    assert "headGroupSpec" in ray["properties"]["spec"]["properties"]
    assert any(p.endswith("/namespaces/{namespace}/deployments") for p in doc["paths"])

    assert pb.status_code == 200
    assert pb.headers["content-type"] == \
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    top = protobuf.fields(pb.content)
    assert top[1] == [b"2.0"]
    named = {}
    for entry in protobuf.fields(top[9][0])[1]:
        parts = protobuf.fields(entry)
        named[parts[1][0].decode()] = protobuf.fields(parts[2][0])
    assert sorted(named) == sorted(defs)
    dep = named["io.k8s.api.apps.v1.Deployment"]
    assert protobuf.fields(dep[22][0])[1] == [b"object"]
    extensions = {protobuf.fields(e)[1][0].decode(): protobuf.fields(e)[2][0] for e in dep[31]}
    gvk = orjson.loads(protobuf.fields(extensions["x-kubernetes-group-version-kind"])[2][0])
    assert gvk == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    props = {protobuf.fields(p)[1][0].decode(): protobuf.fields(protobuf.fields(p)[2][0])
             for p in protobuf.fields(dep[25][0])[1]}
    assert props["spec"][1] == [b"#/definitions/io.k8s.api.apps.v1.DeploymentSpec"]


def test_schema_version_follows_the_reported_release():
    assert k8s_openapi.schema_version(KUBERNETES_VERSION) == "v1.33.0-local"
    assert k8s_openapi.schema_version("v1.33.7") == "v1.33.0-local"
    oldest = k8s_openapi.schema_version("v1.1.0")
    assert oldest.startswith("v1.") and oldest <= "v1.33.0-local"
    assert k8s_openapi.schema_version("v1.999.0") >= "v1.33.0-local"
    with pytest.raises(ValueError, match="not a Kubernetes version: 'latest'"):
        k8s_openapi.schema_version("latest")


def test_a_crd_schema_in_v2_keeps_what_v2_knows():
    schema = {"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"},
                                                               {"type": "string"}],
                 "description": "a port"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"a": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3},
                 "x-kubernetes-list-type": "set"},
        "name": {"type": "string", "nullable": True, "x-kubernetes-validations": []}},
        "required": ["name"]}
    assert k8s_openapi.crd_schema_v2(schema) == {"type": "object", "required": ["name"],
                                                 "properties": {
        "port": {"description": "a port"},
        "free": {"type": "object"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "name": {"type": "string"}}}
