"""Watch: replay from a resourceVersion, synthetic ADDED, 410, selectors, bookmarks, close."""

from __future__ import annotations

import asyncio

import pytest
from conformance_objects import cm, loop_server, pod

from emu.apiserver.request import ApiRequest
from emu.kernel.network import CallInfo

INFO = CallInfo("test", "test", "kube-apiserver")


def drain(stream, n):
    async def take():
        return [await stream.__anext__() for _ in range(n)]
    return take()


def summary(events):
    return [(e["type"], e["object"]["metadata"].get("name"),
             e["object"]["metadata"]["resourceVersion"]) for e in events]


def test_watch_from_a_revision_delivers_every_later_change_in_commit_order(run):
    async def main():
        api = loop_server()
        start = api.resource_version
        a = api.create(cm("a"))
        a["data"] = {"k": "2"}
        a = api.update(a)
        api.create(cm("b"))
        api.delete("ConfigMap", "a")
        stream = api.watch("ConfigMap", "default", resource_version=str(start))
        events = await drain(stream, 4)
        assert summary(events) == [
            ("ADDED", "a", str(start + 1)), ("MODIFIED", "a", str(start + 2)),
            ("ADDED", "b", str(start + 3)), ("DELETED", "a", str(start + 4))]
        assert stream.pending == 0
        stream.close()
    run(main)


def test_watch_delivers_live_changes_after_the_replay_exactly_once(run):
    async def main():
        api = loop_server()
        api.create(cm("a"))
        rv = api.resource_version
        stream = api.watch("ConfigMap", resource_version=str(rv - 1))
        api.create(cm("b"))
        events = await drain(stream, 2)
        assert summary(events) == [("ADDED", "a", str(rv)), ("ADDED", "b", str(rv + 1))]
        assert stream.pending == 0
    run(main)


def test_watch_without_revision_starts_with_synthetic_added_events(run):
    async def main():
        api = loop_server()
        api.create(cm("b"))
        api.create(cm("a"))
        for rv in (None, "0"):
            stream = api.watch("ConfigMap", "default", resource_version=rv)
            events = await drain(stream, 2)
            assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
                ("ADDED", "a"), ("ADDED", "b")]
            stream.close()
    run(main)


def test_watch_from_a_compacted_revision_gets_410_and_ends(run):
    async def main():
        api = loop_server(history_window=3)
        start = api.resource_version
        for i in range(5):
            api.create(cm(f"c{i}"))
        stream = api.watch("ConfigMap", resource_version=str(start))
        event = await stream.__anext__()
        assert event["type"] == "ERROR"
        assert event["object"] == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {start} ({api.store.compacted})",
            "reason": "Expired", "code": 410}
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
    run(main)


def test_watch_from_the_oldest_retained_revision_is_served(run):
    async def main():
        api = loop_server(history_window=3)
        for i in range(5):
            api.create(cm(f"c{i}"))
        stream = api.watch("ConfigMap", resource_version=str(api.store.compacted))
        events = await drain(stream, 3)
        assert [e["type"] for e in events] == ["ADDED"] * 3
    run(main)


def test_label_selector_watch_sends_deleted_when_an_object_stops_matching(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap", label_selector="app=web",
                           resource_version=str(api.resource_version))
        obj = api.create(cm(labels={"app": "db"}))
        obj["metadata"]["labels"] = {"app": "web"}
        obj = api.update(obj)
        obj["data"] = {"k": "2"}
        obj = api.update(obj)
        obj["metadata"]["labels"] = {"app": "db"}
        obj = api.update(obj)
        events = await drain(stream, 3)
        rv = int(obj["metadata"]["resourceVersion"])
        assert summary(events) == [("ADDED", "c", str(rv - 2)), ("MODIFIED", "c", str(rv - 1)),
                                   ("DELETED", "c", str(rv))]
        assert events[2]["object"]["metadata"]["labels"] == {"app": "web"}
        assert stream.pending == 0
    run(main)


def test_field_selector_watch_filters_pods_by_node(run):
    async def main():
        api = loop_server()
        stream = api.watch("Pod", field_selector="spec.nodeName=n1")
        api.create(pod("a", node="n2"))
        api.create(pod("b", node="n1"))
        events = await drain(stream, 1)
        assert [e["object"]["metadata"]["name"] for e in events] == ["b"]
        assert stream.pending == 0
    run(main)


def test_namespaced_watch_sees_only_its_namespace(run):
    async def main():
        api = loop_server()
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
        mine = api.watch("ConfigMap", "default")
        every = api.watch("ConfigMap")
        api.create(cm("x", "other"))
        api.create(cm("y", "default"))
        assert [e["object"]["metadata"]["name"] for e in await drain(mine, 1)] == ["y"]
        assert [e["object"]["metadata"]["name"] for e in await drain(every, 2)] == ["x", "y"]
        assert mine.pending == 0
    run(main)


def test_finalizer_flow_is_visible_as_modified_then_deleted(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap")
        api.create(cm(finalizers=["x.io/f"]))
        obj = api.delete("ConfigMap", "c")
        obj["metadata"]["finalizers"] = []
        api.update(obj)
        events = await drain(stream, 3)
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
        assert "deletionTimestamp" in events[1]["object"]["metadata"]
        assert stream.pending == 0
    run(main)


def test_bookmarks_arrive_after_sixty_idle_virtual_seconds(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap", allow_bookmarks=True,
                           resource_version=str(api.resource_version))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        event = await stream.__anext__()
        assert loop.time() - t0 == 60.0
        assert event == {"type": "BOOKMARK", "object": {
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": str(api.resource_version)}}}
        stream.close()
    run(main)


def test_no_bookmarks_unless_asked(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap", resource_version=str(api.resource_version))
        loop = asyncio.get_running_loop()
        loop.call_later(600, api.create, cm())
        event = await stream.__anext__()
        assert event["type"] == "ADDED" and loop.time() == 600
    run(main)


def test_close_ends_a_pending_next_promptly(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap", resource_version=str(api.resource_version))
        loop = asyncio.get_running_loop()
        loop.call_later(5, stream.close)
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        assert loop.time() == 5
        api.create(cm())
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        assert api.watches.count() == 0
    run(main)


def test_async_for_iterates_until_closed(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap", resource_version=str(api.resource_version))
        api.create(cm("a"))
        api.create(cm("b"))
        seen = []
        async for event in stream:
            seen.append(event["object"]["metadata"]["name"])
            if len(seen) == 2:
                stream.close()
        assert seen == ["a", "b"]
    run(main)


def test_server_side_timeout_ends_the_watch(run):
    async def main():
        api = loop_server()
        stream = api.watch("ConfigMap", timeout_seconds=300)
        loop = asyncio.get_running_loop()
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        assert loop.time() == 300
    run(main)


def test_fan_out_reaches_only_watchers_of_the_kind_and_namespace(run):
    async def main():
        api = loop_server()
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
        pods = [api.watch("Pod", "other") for _ in range(50)]
        cms = [api.watch("ConfigMap", "default") for _ in range(3)]
        assert sum(s.pending for s in pods + cms) == 0
        api.create(cm("x"))
        assert [s.pending for s in cms] == [1, 1, 1]
        assert sum(s.pending for s in pods) == 0
    run(main)


def test_open_watch_over_the_request_interface_filters_by_name(run):
    async def main():
        api = loop_server()
        req = ApiRequest("watch", "ConfigMap", namespace="default", name="b",
                         options={"resource_version": str(api.resource_version)})
        stream = await api.open_watch(req, INFO)
        api.create(cm("a"))
        api.create(cm("b"))
        assert [e["object"]["metadata"]["name"] for e in await drain(stream, 1)] == ["b"]
        assert stream.pending == 0
    run(main)


def test_each_watcher_gets_its_own_fresh_object(run):
    async def main():
        api = loop_server()
        one = api.watch("ConfigMap")
        two = api.watch("ConfigMap")
        api.create(cm())
        a = await one.__anext__()
        a["object"]["data"]["k"] = "mutated"
        b = await two.__anext__()
        assert b["object"]["data"] == {"k": "v"}
    run(main)
