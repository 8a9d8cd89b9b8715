"""A built-in kind's unknown fields at any depth, as kube-apiserver's strict decoder finds them
(`emu.apiserver.builtin_fields`): ``fieldValidation=Strict`` refuses them with kube's text, an
explicit Warn or Ignore drops them, and the world's own writes (no mode) are not walked."""

from __future__ import annotations

from typing import Any

import pytest

from emu.apiserver import builtin_fields
from emu.apiserver.errors import BadRequest


def deployment(name: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                                           **container}]}}}}


def pod(name: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", **container}]}}


def test_unknown_fields_walks_references_lists_and_maps_in_document_order():
    node = builtin_fields.kind_node("apps", "v1", "Deployment")
    assert node is not None
    body = deployment("d", bogus=1, resources={"limits": {"cpu": "1"}},
                      env=[{"name": "A", "value": "1", "valu": "2"}])
    body["spec"]["template"]["metadata"]["annotations"] = {"any": "key"}
    body["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1, "maxSurg": 2}}
    body["spek"] = {}
    assert builtin_fields.unknown_fields(node, body) == [
        "spec.template.spec.containers[0].bogus",
        "spec.template.spec.containers[0].env[0].valu",
        "spec.strategy.rollingUpdate.maxSurg",
        "spek"]
    assert builtin_fields.unknown_fields(node, deployment("ok")) == []
    # a kind no shipped release has (a custom resource's): nothing to walk
    assert builtin_fields.kind_node("example.com", "v1", "Thing") is None


def test_the_newest_shipped_release_is_used_so_newer_fields_the_emulator_supports_pass():
    # containers[].restartPolicyRules is a 1.34 field; the server reports 1.33
    node = builtin_fields.kind_node("", "v1", "Pod")
    assert node is not None
    rules = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
    assert builtin_fields.unknown_fields(node, pod("p", restartPolicy="Never",
                                                   restartPolicyRules=rules)) == []
    release = builtin_fields.release_of("", "v1", "Pod")
    assert release is not None and release >= "v1.34"


def test_prune_nested_copies_what_it_changes_and_leaves_the_input_alone():
    node = builtin_fields.kind_node("", "v1", "Pod")
    assert node is not None
    body = pod("p", imagePullPolicyy="Always")
    sent_spec = body["spec"]
    out = dict(body)
    builtin_fields.prune_nested(node, out)
    assert out["spec"]["containers"] == [{"name": "c", "image": "busybox"}]
    assert sent_spec["containers"][0]["imagePullPolicyy"] == "Always"  # the caller's, unchanged


async def test_strict_refuses_nested_unknown_fields_with_kubes_text(sim):
    with pytest.raises(BadRequest) as err:
        await sim.apply(deployment("strict", imagePullPolicyy="Always"))
    assert str(err.value) == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy"')
    assert await sim.get("Deployment", "strict") is None
    c = sim.client()
    with pytest.raises(BadRequest) as err:
        await c.create(pod("p", imagePullPolicyy="Always"))
    assert str(err.value) == ('Pod in version "v1" cannot be handled as a Pod: strict decoding '
                              'error: unknown field "spec.containers[0].imagePullPolicyy"')
    await c.create(deployment("kept"))
    with pytest.raises(BadRequest, match=r'unknown field "spec\.template\.spec\.containers\[0\]'
                                         r'\.portz"'):
        await c.patch("Deployment", "kept", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "portz": []}]}}}}, "default")
    # top-level, metadata and nested unknown fields together, in the body's order
    body = deployment("many", bogus=1)
    body["metadata"]["bogusMeta"] = 1
    body["spek"] = 1
    with pytest.raises(BadRequest) as err:
        await c.create(body)
    assert str(err.value).endswith(
        'strict decoding error: unknown field "metadata.bogusMeta", unknown field '
        '"spec.template.spec.containers[0].bogus", unknown field "spek"')


async def test_status_writes_are_checked_too(sim):
    c = sim.client()
    made = await c.create(pod("s"))
    made["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False",
                                                          "reasn": "x"}]}
    with pytest.raises(BadRequest, match=r'unknown field "status\.conditions\[0\]\.reasn"'):
        await c.update_status(made)


async def test_warn_and_ignore_drop_nested_unknown_fields_as_kubes_decoder_does(sim):
    c = sim.client()
    for mode in ("Warn", "Ignore"):
        made = await c.create(deployment(f"d-{mode.lower()}", bogus=1,
                                         imagePullPolicy="Always"), field_validation=mode)
        assert made["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
        assert "bogus" not in made["spec"]["template"]["spec"]["containers"][0]
        stored = await sim.get("Deployment", f"d-{mode.lower()}")
        assert "bogus" not in stored["spec"]["template"]["spec"]["containers"][0]
    made = await c.create(pod("w"), field_validation="Warn")
    made["spec"]["containers"][0]["imagePullPolicyy"] = "Never"
    made["spec"]["containers"][0]["image"] = "busybox:2"
    updated = await c.update(made, field_validation="Ignore")
    assert updated["spec"]["containers"][0]["image"] == "busybox:2"
    assert "imagePullPolicyy" not in updated["spec"]["containers"][0]
