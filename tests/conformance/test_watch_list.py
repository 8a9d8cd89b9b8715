"""Watch-lists (``sendInitialEvents``), watches from a future resourceVersion, and the watch and
write options `Client` passes through."""

from __future__ import annotations

import asyncio

import pytest
from conformance_objects import cm, loop_server

from emu.apiserver.errors import Invalid, ServerTimeout


def summary(events):
    return [(e["type"], e["object"]["metadata"].get("name"),
             e["object"]["metadata"]["resourceVersion"]) for e in events]


def test_send_initial_events_then_an_annotated_bookmark_then_changes(run):
    async def main():
        api = loop_server()
        api.create(cm("a"))
        api.create(cm("b"))
        rv = str(api.resource_version)
        stream = api.watch("ConfigMap", "default", send_initial_events=True,
                           resource_version_match="NotOlderThan", allow_bookmarks=True)
        api.create(cm("c"))
        events = [await stream.__anext__() for _ in range(4)]
        assert summary(events)[:2] == [("ADDED", "a", str(int(rv) - 1)), ("ADDED", "b", rv)]
        assert events[2] == {"type": "BOOKMARK", "object": {
            "kind": "ConfigMap", "apiVersion": "v1", "metadata": {
                "resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}}}
        assert summary(events)[3] == ("ADDED", "c", str(int(rv) + 1))
        stream.close()
    run(main)


@pytest.mark.parametrize(("opts", "text"), [
    ({"send_initial_events": True, "allow_bookmarks": True},
     "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
    ({"send_initial_events": True, "resource_version_match": "NotOlderThan"},
     "sendInitialEvents requires setting allowWatchBookmarks to true"),
    ({"resource_version_match": "NotOlderThan", "resource_version": "1"},
     "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"),
])
def test_bad_watch_list_options_are_422(api, opts, text):
    with pytest.raises(Invalid, match=text):
        api.watch("ConfigMap", **opts)


def test_a_watch_list_from_a_future_version_is_504(api):
    with pytest.raises(ServerTimeout, match="Too large resource version"):
        api.watch("ConfigMap", send_initial_events=True, resource_version_match="NotOlderThan",
                  allow_bookmarks=True, resource_version=str(api.resource_version + 5))


def test_send_initial_events_false_starts_now_with_nothing_first(run):
    async def main():
        api = loop_server()
        api.create(cm("a"))
        stream = api.watch("ConfigMap", send_initial_events=False,
                           resource_version_match="NotOlderThan", allow_bookmarks=True)
        api.create(cm("b"))
        assert summary([await stream.__anext__()])[0][:2] == ("ADDED", "b")
        stream.close()
    run(main)


def test_a_future_start_gets_no_bookmark_below_it_and_no_change_at_or_below_it(run):
    """Regression: a bookmark carried the current revision, below the watch's start, and every
    write in between was delivered although the client asked for what follows its version."""
    async def main():
        api = loop_server()
        start = api.resource_version + 2
        stream = api.watch("ConfigMap", allow_bookmarks=True, resource_version=str(start))
        loop = asyncio.get_running_loop()
        loop.call_later(100, api.create, cm("a"))   # start - 1
        loop.call_later(101, api.create, cm("b"))   # start
        loop.call_later(300, api.create, cm("c"))   # start + 1
        events = []
        while len(events) < 2:
            events.append(await stream.__anext__())
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[0]["object"]["metadata"]["name"] == "c"
        assert int(events[1]["object"]["metadata"]["resourceVersion"]) >= start
        stream.close()
    run(main)


async def test_client_passes_watch_list_timeout_and_dry_run_options(sim):
    c = sim.client("opts")
    await c.create(cm("a"))
    stream = await c.watch("ConfigMap", "default", send_initial_events=True,
                           resource_version_match="NotOlderThan", allow_bookmarks=True,
                           timeout_seconds=30)
    got = []
    async for event in stream:
        got.append(event["type"])
    assert got == ["ADDED", "BOOKMARK"]   # then the 30 s timeout ends it
    before = (await c.get("ConfigMap", "a", "default"))["metadata"]["resourceVersion"]
    obj = await c.get("ConfigMap", "a", "default")
    obj["data"] = {"k": "dry"}
    await c.update(obj, dry_run=True)
    await c.patch("ConfigMap", "a", {"data": {"k": "dry"}}, "default", dry_run=True)
    await c.delete("ConfigMap", "a", "default", dry_run=True)
    await c.delete_collection("ConfigMap", "default", dry_run=True)
    after = await c.get("ConfigMap", "a", "default")
    assert after["metadata"]["resourceVersion"] == before and after["data"] == {"k": "v"}
