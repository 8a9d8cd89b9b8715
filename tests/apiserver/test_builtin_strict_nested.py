"""``fieldValidation=Strict`` refuses a built-in kind's unknown nested fields, checked against
Kubernetes' own schema of the release the server reports (`emu.apiserver.k8s_schemas`), with
kube-apiserver's text; the other modes (the world's own processes send none) are unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from emu.apiserver import k8s_schemas
from emu.apiserver.errors import BadRequest
from emu.apiserver.server import KUBERNETES_VERSION


def deployment(name: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                                           **container}]}}}}


def test_unknown_fields_walks_references_lists_and_maps():
    body = deployment("d", bogus=1, resources={"limits": {"cpu": "1"}},
                      env=[{"name": "A", "value": "1", "valu": "2"}])
    body["spec"]["template"]["metadata"]["annotations"] = {"any": "key"}
    body["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1, "maxSurg": 2}}
    body["spek"] = {}
    assert k8s_schemas.unknown_fields(KUBERNETES_VERSION, "apps", "v1", "Deployment", body) == [
        "spec.strategy.rollingUpdate.maxSurg",
        "spec.template.spec.containers[0].bogus",
        "spec.template.spec.containers[0].env[0].valu",
        "spek"]
    assert k8s_schemas.unknown_fields(KUBERNETES_VERSION, "apps", "v1", "Deployment",
                                      deployment("ok")) == []
    # a kind the package has no schema for: nothing to say
    assert k8s_schemas.unknown_fields(KUBERNETES_VERSION, "example.com", "v1", "Thing",
                                      {"spec": {"x": 1}}) == []


async def test_strict_refuses_nested_unknown_fields_of_a_built_in_with_kubes_text(sim):
    with pytest.raises(BadRequest) as err:
        await sim.apply(deployment("strict", bogus=1))
    assert str(err.value) == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].bogus"')
    assert await sim.get("Deployment", "strict") is None
    c = sim.client()
    made = await c.create(deployment("kept"))
    with pytest.raises(BadRequest, match=r'unknown field "spec\.template\.spec\.containers\[0\]'
                                         r'\.portz"'):
        await c.patch("Deployment", "kept", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "portz": []}]}}}}, "default")
    # Warn and Ignore keep the old behaviour (the object is stored, unchanged otherwise)
    made = await c.create(deployment("warned", bogus=1), field_validation="Ignore")
    assert made["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
