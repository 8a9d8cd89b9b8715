from __future__ import annotations

import asyncio

import pytest

import emu
from emu.client.informer import FuncHandler, Informer


def _cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": dict(data)}


async def test_client_verbs_round_trip_through_the_network(sim):
    c = sim.client("my-test")
    created = await c.create(_cm("a", k="1"))
    got = await c.get("ConfigMap", "a", "default")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    got["data"]["k"] = "2"
    updated = await c.update(got)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    with pytest.raises(emu.Conflict) as info:
        await c.update(created)
    assert info.value.code == 409
    assert str(info.value) == ('Operation cannot be fulfilled on configmaps "a": the object has '
                               "been modified; please apply your changes to the latest version "
                               "and try again")
    items = await c.list("ConfigMap", "default")
    assert [o["metadata"]["name"] for o in items] == ["a"]
    assert items.resource_version == str(sim.api.resource_version)
    patched = await c.patch("ConfigMap", "a", {"data": {"x": "y"}}, "default")
    assert patched["data"] == {"k": "2", "x": "y"}
    await c.delete("ConfigMap", "a", "default")
    with pytest.raises(emu.NotFound, match='^configmaps "a" not found$'):
        await c.get("ConfigMap", "a", "default")


async def test_an_outage_reaches_a_process_client_but_not_the_observer(sim):
    async def idle(proc):
        await asyncio.Event().wait()

    proc = sim.start_process("operator-0", idle)
    c = sim.client(process=proc)
    await c.create(_cm("a"))
    sim.faults.outage("apiserver", duration=60)
    with pytest.raises(emu.ConnectionRefused):
        await c.get("ConfigMap", "a", "default")
    assert (await sim.get("ConfigMap", "a"))["metadata"]["name"] == "a"
    await sim.sleep(60)
    assert (await c.get("ConfigMap", "a", "default"))["metadata"]["name"] == "a"


async def test_fail_requests_by_verb_and_kind_fails_only_those(sim):
    c = sim.client()
    sim.faults.fail_requests(verb="create", kind="ConfigMap", code=503, count=1)
    with pytest.raises(emu.ApiError) as info:
        await c.create(_cm("a"))
    assert (info.value.code, info.value.reason) == (503, "ServiceUnavailable")
    assert await sim.get("ConfigMap", "a") is None
    await c.create(_cm("a"))
    assert await sim.get("ConfigMap", "a") is not None


async def test_a_lost_create_response_leaves_the_object_created_and_a_retry_gets_already_exists(sim):
    c = sim.client()
    sim.faults.lose_responses(verb="create", kind="Job")
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "demo-job", "namespace": "default"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    with pytest.raises(emu.Timeout):
        await c.create(job)
    assert await sim.get("Job", "demo-job") is not None
    with pytest.raises(emu.AlreadyExists, match='^jobs.batch "demo-job" already exists$'):
        await c.create(job)


async def test_the_informer_lists_then_follows_changes_in_order(sim):
    c = sim.client()
    await c.create(_cm("a"))
    seen = []
    inf = Informer(c, "ConfigMap", namespace="default")
    inf.add_event_handler(FuncHandler(
        on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
        on_update=lambda old, new: seen.append(("update", new["metadata"]["name"])),
        on_delete=lambda o: seen.append(("delete", o["metadata"]["name"]))))
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()
    await c.create(_cm("b"))
    await c.patch("ConfigMap", "a", {"data": {"k": "v"}}, "default")
    await c.delete("ConfigMap", "b", "default")
    await sim.sleep(0.1)
    task.cancel()
    assert seen == [("add", "a"), ("add", "b"), ("update", "a"), ("delete", "b")]
    assert inf.keys() == ["default/a"]


async def test_an_informer_with_lag_serves_stale_reads_until_the_lag_passes(sim):
    c = sim.client()
    await c.create(_cm("a", v="1"))
    inf = Informer(c, "ConfigMap", namespace="default", lag=5.0)
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()
    await c.patch("ConfigMap", "a", {"data": {"v": "2"}}, "default")
    await sim.sleep(4.9)
    stale = inf.get("a", "default")["data"]["v"]
    await sim.sleep(0.2)
    fresh = inf.get("a", "default")["data"]["v"]
    task.cancel()
    assert (stale, fresh) == ("1", "2")


async def test_an_informer_relists_after_410_gone_and_keeps_the_cache_right(sim):
    c = sim.client()
    await c.create(_cm("a"))
    inf = Informer(c, "ConfigMap", namespace="default")
    inf.last_resource_version = "1"
    sim.api.store.window = 2  # a tiny history window, so resuming from the past is gone
    for i in range(5):
        await c.create(_cm(f"x{i}"))
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()
    await sim.sleep(1)
    task.cancel()
    assert inf.keys() == ["default/a"] + [f"default/x{i}" for i in range(5)]


async def test_an_informer_rewatches_after_a_partition_heals(sim):
    async def idle(proc):
        await asyncio.Event().wait()

    proc = sim.start_process("controller", idle)
    c = sim.client(process=proc)
    inf = Informer(c, "ConfigMap", namespace="default")
    proc.spawn(inf.run())
    await inf.wait_synced()
    sim.faults.partition("controller", "apiserver", duration=20)
    await sim.client().create(_cm("during"))
    await sim.sleep(5)
    assert inf.get("during", "default") is None
    await sim.sleep(60)
    assert inf.get("during", "default") is not None


async def test_apply_creates_then_updates_and_prunes_only_fields_it_applied(sim):
    await sim.apply("""
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: default}
data: {a: "1", b: "2"}
""")
    await sim.client("someone-else").patch("ConfigMap", "cfg", {"data": {"theirs": "x"}}, "default")
    out = await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "cfg", "namespace": "default"},
                           "data": {"a": "10"}})
    assert out["data"] == {"a": "10", "theirs": "x"}


async def test_apply_takes_multi_document_yaml_and_defaults_the_namespace(sim):
    out = await sim.apply("""
apiVersion: v1
kind: ConfigMap
metadata: {name: one}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
""")
    assert [(o["kind"], o["metadata"].get("namespace")) for o in out] == [
        ("ConfigMap", "default"), ("Namespace", None)]


async def test_a_malformed_manifest_is_refused_whole_and_changes_nothing(sim):
    manifest = """
apiVersion: v1
kind: ConfigMap
metadata: {name: fine}
---
kind: ConfigMap
metadata: {name: broken}
"""
    with pytest.raises(emu.BadRequest, match="^document 2: 'apiVersion' is missing or not a string$"):
        await sim.apply(manifest)
    assert await sim.get("ConfigMap", "fine") is None


async def test_wait_for_returns_when_the_predicate_holds(sim):
    async def later():
        await sim.sleep(7)
        await sim.client().create(_cm("late", ready="yes"))

    asyncio.ensure_future(later())
    obj = await sim.wait_for("ConfigMap", "late", lambda o: o["data"]["ready"] == "yes")
    assert obj["metadata"]["name"] == "late"
    assert sim.now == 7.0


async def test_wait_for_times_out_naming_the_object_and_its_last_state(sim):
    await sim.client().create(_cm("never"))
    with pytest.raises(emu.WaitTimeout) as info:
        await sim.wait_for("ConfigMap", "never", lambda o: False, timeout=30)
    assert str(info.value) == ("ConfigMap default/never: condition not met within 30s (virtual, "
                               "now t=30.000s)\n"
                               "  waiting for: lambda o: False\n"
                               "  last seen: resourceVersion 5\n"
                               "  status: None")


async def test_informer_selector_lists_follow_label_changes_and_deletes(sim):
    c = sim.client()
    for i in range(6):
        cm = _cm(f"cm-{i}")
        cm["metadata"]["labels"] = {"group": "a" if i % 2 else "b", "n": str(i)}
        await c.create(cm)
    other = _cm("elsewhere")
    other["metadata"]["namespace"] = "kube-system"
    other["metadata"]["labels"] = {"group": "a"}
    await c.create(other)
    inf = Informer(c, "ConfigMap")
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()

    def names(ns=None, sel=None):
        return [o["metadata"]["name"] for o in inf.peek_list(ns, sel)]

    assert names("default", "group=a") == ["cm-1", "cm-3", "cm-5"]
    assert names(None, {"group": "a"}) == ["cm-1", "cm-3", "cm-5", "elsewhere"]
    assert names("default", "group in (a,b),n!=2") == ["cm-0", "cm-1", "cm-3", "cm-4", "cm-5"]
    await c.patch("ConfigMap", "cm-1", {"metadata": {"labels": {"group": "b"}}}, "default")
    await c.delete("ConfigMap", "cm-3", "default")
    await sim.sleep(0.1)
    assert names("default", "group=a") == ["cm-5"]
    assert names("default", "group=b") == ["cm-0", "cm-1", "cm-2", "cm-4"]
    assert names("kube-system") == ["elsewhere"]
    task.cancel()
