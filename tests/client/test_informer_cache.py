"""The informer cache keeps the API server's stored bytes and decodes on read.

What a handler or a reader gets is its own: mutating it changes neither the cache nor its
indexes. A cached object costs the informer a key and a reference to the store's bytes, not a
decoded tree.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import orjson

from emu.apiserver.watch import WatchEvent
from emu.client.informer import FuncHandler, Informer


def _cm(name, labels=None, **data):
    meta = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def _stored(sim, name, ns="default"):
    table = sim.api.store.tables[("", "ConfigMap")]
    return table.objs[(ns, name)].data


def _vandal(obj):
    """What a careless handler or caller might do to what it was given."""
    obj["data"] = {"vandal": "yes"}
    obj["metadata"]["labels"] = {"group": "vandal"}
    obj["metadata"]["name"] = "renamed"


async def test_handlers_mutating_their_objects_change_neither_cache_nor_indexes(sim):
    c = sim.client()
    await c.create(_cm("listed", {"group": "a"}, k="1"))
    inf = Informer(c, "ConfigMap", namespace="default")
    seen = []

    def on_update(old, new):
        seen.append((old["data"]["k"], new["data"]["k"]))
        _vandal(old)
        _vandal(new)

    def on_delete(obj):
        seen.append(("deleted", obj["metadata"]["name"]))
        _vandal(obj)

    # two handlers: each event's object is shared by them, and the second sees what the first did
    # (as client-go's handlers share one object), but the cache never does
    inf.add_event_handler(FuncHandler(on_add=_vandal, on_update=on_update, on_delete=on_delete))
    inf.add_event_handler(FuncHandler(on_add=lambda o: seen.append(("add", o["data"]))))
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()
    await c.create(_cm("watched", {"group": "a"}, k="1"))
    await c.patch("ConfigMap", "listed", {"data": {"k": "2"}}, "default")
    await sim.sleep(0.1)
    assert inf.get("listed", "default")["data"] == {"k": "2"}
    assert inf.get("watched", "default")["metadata"]["labels"] == {"group": "a"}
    assert [o["metadata"]["name"] for o in inf.list("default", "group=a")] == ["listed",
                                                                                "watched"]
    assert inf.list("default", "group=vandal") == []
    await c.delete("ConfigMap", "watched", "default")
    await sim.sleep(0.1)
    task.cancel()
    assert seen == [("add", {"vandal": "yes"}), ("add", {"vandal": "yes"}), ("1", "2"),
                    ("deleted", "watched")]
    assert inf.keys() == ["default/listed"]
    assert [o["metadata"]["name"] for o in inf.list(None, {"group": "a"})] == ["listed"]


async def test_readers_get_their_own_copies(sim):
    c = sim.client()
    await c.create(_cm("a", {"group": "a"}, k="1"))
    inf = Informer(c, "ConfigMap")
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()
    for got in (inf.get("a", "default"), *inf.list(), *inf.peek_list("default", "group=a")):
        _vandal(got)
    task.cancel()
    assert inf.get("a", "default")["data"] == {"k": "1"}
    assert inf.get("a", "default") is not inf.get("a", "default")
    assert [o["metadata"]["name"] for o in inf.peek_list("default", {"group": "a"})] == ["a"]


async def test_the_cache_holds_the_stores_own_bytes(sim):
    c = sim.client()
    await c.create(_cm("listed", {"group": "a"}, k="1"))
    inf = Informer(c, "ConfigMap", namespace="default")
    task = asyncio.ensure_future(inf.run())
    await inf.wait_synced()
    await c.create(_cm("watched", k="1"))
    await c.patch("ConfigMap", "listed", {"data": {"k": "2"}}, "default")
    await sim.sleep(0.1)
    task.cancel()
    # the same bytes object, not a copy: listed, watched, and updated
    assert inf._cache["default/listed"] is _stored(sim, "listed")
    assert inf._cache["default/watched"] is _stored(sim, "watched")
    # and the labels the indexes read are the store's too (nothing decoded is kept)
    table = sim.api.store.tables[("", "ConfigMap")]
    assert inf._labels["default/listed"] is table.objs[("default", "listed")].labels
    assert "default/watched" not in inf._labels


async def test_a_cached_object_costs_a_fraction_of_its_decoded_size(sim):
    c = sim.client()
    blob = {f"key-{i:03d}": f"value {i} " * 4 for i in range(100)}  # ~5 KB of JSON each
    for i in range(60):
        await c.create(_cm(f"listed-{i}", {"group": "a", "n": str(i)}, **blob))
    gc.collect()
    tracemalloc.start()
    try:
        inf = Informer(c, "ConfigMap", namespace="default")
        inf.add_event_handler(FuncHandler(on_add=lambda o: None))
        task = asyncio.ensure_future(inf.run())
        await inf.wait_synced()
        for i in range(60):
            await c.create(_cm(f"watched-{i}", {"group": "b", "n": str(i)}, **blob))
        await sim.sleep(0.1)
        assert len(inf.keys()) == 120
        names = [k.split("/")[1] for k in inf.keys()]  # noqa: SIM118 (a method, not a dict)
        json_size = sum(len(_stored(sim, name)) for name in names)
        gc.collect()
        with_informer = tracemalloc.get_traced_memory()[0]
        task.cancel()
        await sim.sleep(0.1)
        del inf, task
        gc.collect()
        informer = with_informer - tracemalloc.get_traced_memory()[0]
        # what one decoded object costs, for scale
        before = tracemalloc.get_traced_memory()[0]
        decoded = orjson.loads(_stored(sim, "listed-0"))
        decoded_size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert decoded and decoded_size > len(_stored(sim, "listed-0"))
    # bytes shared with the store cost the informer nothing: what it keeps is keys, index slots
    # (~0.6 kB an object here, most of it a label value of its own) and the labels of listed
    # objects, not a decoded tree (more than its JSON: 5 kB) per object
    assert 0 < informer < 0.25 * json_size, (informer, json_size)


async def test_watch_events_are_dicts_that_carry_the_stored_bytes(sim):
    c = sim.client()
    await c.create(_cm("a", {"group": "a"}, k="1"))
    stream = await c.watch("ConfigMap", "default", label_selector="group=a",
                           resource_version="0")
    first = await stream.__anext__()
    assert first == {"type": "ADDED", "object": orjson.loads(_stored(sim, "a"))}
    assert type(first) is WatchEvent and first.data is _stored(sim, "a")
    assert first.labels == {"group": "a"}
    # leaving the selector is a DELETED at the revision that moved it: the stored bytes are the
    # previous version's, so the event carries none
    await c.patch("ConfigMap", "a", {"metadata": {"labels": {"group": "b"}}}, "default")
    gone = await stream.__anext__()
    await stream.aclose()
    assert gone["type"] == "DELETED" and gone.data is None
    assert gone["object"]["metadata"]["resourceVersion"] == str(sim.api.resource_version)
    assert gone["object"]["metadata"]["labels"] == {"group": "a"}


async def test_an_event_without_stored_bytes_is_cached_from_its_object(sim):
    inf = Informer(sim.client(), "ConfigMap")
    obj = _cm("a", {"group": "a"}, k="1")
    obj["metadata"]["resourceVersion"] = "7"
    got = []
    inf.add_event_handler(FuncHandler(on_add=got.append,
                                      on_update=lambda old, new: got.append(old)))
    inf._apply({"type": "ADDED", "object": obj})
    obj["metadata"]["labels"]["group"] = "changed"  # the handlers' object, not the cache's
    assert [o["metadata"]["name"] for o in inf.list(None, "group=a")] == ["a"]
    newer = _cm("a", {"group": "a"}, k="2")
    inf._apply({"type": "MODIFIED", "object": newer})
    assert got[0] is obj and got[1]["data"] == {"k": "1"}
    assert inf.get("a", "default")["data"] == {"k": "2"}


async def test_a_relist_reports_changes_with_the_old_object_decoded(sim):
    async def idle(proc):
        await asyncio.Event().wait()

    proc = sim.start_process("controller", idle)
    c = sim.client(process=proc)
    outside = sim.client()
    for name in ("kept", "changed", "deleted"):
        await outside.create(_cm(name, {"group": "a"}, k="1"))
    inf = Informer(c, "ConfigMap", namespace="default")
    seen = []
    inf.add_event_handler(FuncHandler(
        on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
        on_update=lambda old, new: seen.append(("update", old["data"]["k"], new["data"]["k"])),
        on_delete=lambda o: seen.append(("delete", o["metadata"]["name"], o["data"]["k"]))))
    proc.spawn(inf.run())
    await inf.wait_synced()
    seen.clear()
    sim.faults.partition("controller", "apiserver", duration=20)
    await sim.sleep(1)
    await outside.patch("ConfigMap", "changed", {"data": {"k": "2"}}, "default")
    await outside.delete("ConfigMap", "deleted", "default")
    await outside.create(_cm("new", k="1"))
    store = sim.api.store  # compacted, as etcd compacts: the informer must relist
    store.history.clear()
    store.compacted = store.rev
    await sim.sleep(120)
    assert inf.relists >= 2, seen
    assert seen == [("delete", "deleted", "1"), ("update", "1", "2"), ("add", "new")]
    assert inf.keys() == ["default/changed", "default/kept", "default/new"]
    assert inf._cache["default/changed"] is _stored(sim, "changed")
