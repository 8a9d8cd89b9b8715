"""The garbage collector: background, foreground and orphan propagation; namespace deletion."""

from __future__ import annotations

import emu.kube.cluster as kc


def cm(name: str, owner: dict | None = None, *, block: bool = False,
       finalizers: list[str] | None = None, namespace: str = "default") -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"],
                                    "blockOwnerDeletion": block}]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


async def test_background_deletion_removes_dependents_after_the_owner(sim):
    kc.install(sim, nodes=0)
    client = sim.client()
    owner = await client.create(cm("owner"))
    await client.create(cm("child", owner))
    grand = await client.get("ConfigMap", "child", "default")
    await client.create(cm("grandchild", grand))
    await sim.sleep(1)
    await client.delete("ConfigMap", "owner", "default")
    assert await sim.get("ConfigMap", "owner") is None
    await sim.sleep(1)
    assert await sim.get("ConfigMap", "child") is None
    assert await sim.get("ConfigMap", "grandchild") is None


async def test_a_dependent_with_another_live_owner_stays_and_loses_the_dead_reference(sim):
    kc.install(sim, nodes=0)
    client = sim.client()
    a = await client.create(cm("a"))
    b = await client.create(cm("b"))
    child = cm("child", a)
    child["metadata"]["ownerReferences"].append(cm("x", b)["metadata"]["ownerReferences"][0])
    await client.create(child)
    await sim.sleep(1)
    await client.delete("ConfigMap", "a", "default")
    await sim.sleep(1)
    left = await sim.get("ConfigMap", "child")
    assert [r["name"] for r in left["metadata"]["ownerReferences"]] == ["b"]


async def test_foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone(sim):
    kc.install(sim, nodes=0)
    client = sim.client()
    owner = await client.create(cm("owner"))
    await client.create(cm("child", owner, block=True, finalizers=["example.com/hold"]))
    await sim.sleep(1)
    await client.delete("ConfigMap", "owner", "default", propagation_policy="Foreground")
    await sim.sleep(5)
    held = await sim.get("ConfigMap", "owner")
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert held["metadata"]["deletionTimestamp"]
    child = await sim.get("ConfigMap", "child")
    assert child["metadata"]["deletionTimestamp"], "the dependent is being deleted"
    await client.patch("ConfigMap", "child", {"metadata": {"finalizers": None}}, "default")
    await sim.sleep(1)
    assert await sim.get("ConfigMap", "child") is None
    assert await sim.get("ConfigMap", "owner") is None


async def test_orphan_deletion_removes_the_owner_reference_and_keeps_the_dependent(sim):
    kc.install(sim, nodes=0)
    client = sim.client()
    owner = await client.create(cm("owner"))
    await client.create(cm("child", owner))
    await sim.sleep(1)
    await client.delete("ConfigMap", "owner", "default", propagation_policy="Orphan")
    await sim.sleep(1)
    assert await sim.get("ConfigMap", "owner") is None
    child = await sim.get("ConfigMap", "child")
    assert not child["metadata"].get("ownerReferences")
    assert not child["metadata"].get("deletionTimestamp")


async def test_deleting_a_namespace_removes_its_objects_and_running_pods(sim):
    from kube_helpers import is_true, pod, ready_after

    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, nodes=1, standard_cluster=False)
    await cluster.wait_ready()
    client = sim.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await client.create(cm("settings", namespace="team"))
    await client.create(pod("worker", namespace="team"))
    await sim.wait_for("Pod", "worker", is_true("Ready"), namespace="team")
    await client.delete("Namespace", "team")
    await sim.sleep(5)
    assert await sim.get("Namespace", "team", namespace=None) is None
    assert await sim.get("ConfigMap", "settings", namespace="team") is None
    assert await sim.get("Pod", "worker", namespace="team") is None
    assert cluster.container_process("team", "worker", "app").alive is False


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


async def test_kinds_served_after_the_collector_started_are_collected_too(sim):
    # a user's CRD created mid-run: its objects' dependents follow them out, and they follow
    # their owners out (kube's collector picks new kinds up at its next discovery sync)
    kc.install(sim, nodes=0)
    await sim.sleep(1)
    client = sim.client()
    await client.create(WIDGET_CRD)
    widget = await client.create({"apiVersion": "example.com/v1", "kind": "Widget",
                                  "metadata": {"name": "w", "namespace": "default"}})
    child = cm("child")
    child["metadata"]["ownerReferences"] = [{"apiVersion": "example.com/v1", "kind": "Widget",
                                             "name": "w", "uid": widget["metadata"]["uid"]}]
    await client.create(child)
    owner = await client.create(cm("owner"))
    await client.create({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "owned", "namespace": "default",
                                      "ownerReferences": cm("x", owner)["metadata"][
                                          "ownerReferences"]}})
    await sim.sleep(1)
    await client.delete("Widget", "w", "default")
    await client.delete("ConfigMap", "owner", "default")
    await sim.sleep(1)
    assert await sim.get("ConfigMap", "child") is None
    assert await sim.get("Widget", "owned") is None


async def test_a_restarted_collector_listens_for_new_kinds_once(sim):
    cluster = kc.install(sim, nodes=0)
    await sim.sleep(1)
    cluster.restart("garbage-collector")
    await sim.sleep(1)
    assert len(sim.api.kinds.listeners) == 1
