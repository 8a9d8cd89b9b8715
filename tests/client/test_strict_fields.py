"""A test's writes are strict by default (kubectl's ``--validate=strict``): an unknown field, or
a key given twice in YAML, is refused with kube-apiserver's 400 text instead of dropped; kube's
``fieldValidation`` relaxes it per client and per call; the world's own processes send none
(client-go's default), so the server's default (Warn: drop) holds for them."""

from __future__ import annotations

from typing import Any

import pytest

import emu
from emu.apiserver.errors import BadRequest
from emu.client.client import Client
from emu.scenarios._common import raycluster


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}, **extra}


def typo_cluster(name: str = "typo") -> dict[str, Any]:
    obj = raycluster(name)
    obj["spec"]["enableInTreeAutoscalling"] = True            # misspelt, one level down
    obj["spec"]["workerGroupSpecs"][0]["replica"] = 2         # misspelt, inside a list
    return obj


async def test_sim_apply_refuses_an_unknown_field_of_a_custom_resource_with_kubes_text(sim):
    with pytest.raises(BadRequest) as err:
        await sim.apply(typo_cluster())
    assert err.value.code == 400
    assert str(err.value) == (
        'RayCluster in version "v1" cannot be handled as a RayCluster: strict decoding error: '
        'unknown field "spec.enableInTreeAutoscalling", '
        'unknown field "spec.workerGroupSpecs[0].replica"')
    assert await sim.get("RayCluster", "typo") is None


async def test_sim_apply_refuses_an_unknown_top_level_field_of_a_built_in_kind(sim):
    # in the body's order, as kube's decoder meets them (cm() puts metadata before spek)
    with pytest.raises(BadRequest, match='ConfigMap in version "v1" cannot be handled as a '
                                         'ConfigMap: strict decoding error: unknown field '
                                         '"metadata.colour", unknown field "spek"'):
        await sim.apply({**cm("a", spek=1), "metadata": {"name": "a", "colour": "red"}})


async def test_a_tests_client_is_strict_on_create_update_and_patch(sim):
    c = sim.client()
    created = await c.create(raycluster("rc"))
    with pytest.raises(BadRequest, match='unknown field "spec.suspendd"'):
        await c.update({**created, "spec": {**created["spec"], "suspendd": True}})
    with pytest.raises(BadRequest, match='unknown field "spec.suspendd"'):
        await c.patch("RayCluster", "rc", {"spec": {"suspendd": True}}, "default")
    assert "suspendd" not in (await sim.get("RayCluster", "rc"))["spec"]


async def test_field_validation_relaxes_it_per_call_and_per_client(sim):
    c = sim.client()
    kept = await c.create(typo_cluster("per-call"), field_validation="Ignore")
    assert "enableInTreeAutoscalling" not in kept["spec"]  # dropped, as kube's default does
    warn = sim.client("lenient", field_validation="Warn")
    await warn.create(typo_cluster("per-client"))
    assert await sim.get("RayCluster", "per-client") is not None
    await sim.apply(typo_cluster("applied"), field_validation="Ignore")
    assert await sim.get("RayCluster", "applied") is not None


async def test_an_unknown_field_validation_value_is_refused_naming_the_choices(sim):
    with pytest.raises(ValueError, match=r"field_validation must be one of 'Ignore', 'Warn', "
                                         r"'Strict' or None .* not 'strict'"):
        sim.client(field_validation="strict")
    with pytest.raises(ValueError, match="not 'Loud'"):
        await sim.client().create(cm("a"), field_validation="Loud")


async def test_the_worlds_processes_keep_client_gos_default_and_drop_unknown_fields(sim):
    proc = sim.processes.start("writer", lambda process: sim.sleep(10**6))
    c = sim.client(process=proc)
    assert c.field_validation is None
    created = await c.create(typo_cluster("from-a-process"))
    assert "enableInTreeAutoscalling" not in created["spec"]
    raw = Client(sim.network, identity="raw")  # built directly: no fieldValidation sent
    assert raw.field_validation is None
    await raw.create(cm("b", spek=1))


async def test_a_yaml_key_given_twice_is_refused_with_kubes_line_and_key(sim):
    manifest = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: twice
data:
  a: "1"
  a: "2"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: once
  name: again
"""
    with pytest.raises(BadRequest) as err:
        await sim.apply(manifest)
    assert str(err.value) == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'yaml: unmarshal errors:\n  line 7: key "a" already set in map')
    assert await sim.get("ConfigMap", "twice") is None  # refused before anything was sent
    await sim.apply(manifest, field_validation="Warn")  # the last value counts
    assert (await sim.get("ConfigMap", "twice"))["data"] == {"a": "2"}
    assert await sim.get("ConfigMap", "again") is not None


def test_the_kuberay_operator_runs_unchanged_under_strict_test_writes():
    async def main(sim: emu.Simulation) -> None:
        await sim.install_kuberay()
        await sim.apply(raycluster("rc", workers=1))
        await sim.wait_for("RayCluster", "rc",
                           lambda o: (o.get("status") or {}).get("state") == "ready",
                           timeout=300)

    emu.run(main, seed=1, cluster=True, fail_on_panic=True)
