"""The request interface: `APIServer.handle` maps an `ApiRequest` onto the verbs, through a network."""

from __future__ import annotations

import pytest
from conformance_objects import cm, loop_server, raycluster

from emu.apiserver.errors import ApiError
from emu.apiserver.request import ApiRequest
from emu.kernel.network import CallInfo, Network
from emu.kernel.trace import Trace

INFO = CallInfo("operator-0", "host-a", "kube-apiserver")


def test_handle_serves_every_verb(run):
    async def main():
        api = loop_server()
        created = await api.handle(ApiRequest("create", "ConfigMap", namespace="default",
                                              body=cm()), INFO)
        assert created["metadata"]["name"] == "c"
        got = await api.handle(ApiRequest("get", "configmaps", namespace="default", name="c"),
                               INFO)
        got["data"] = {"k": "2"}
        updated = await api.handle(ApiRequest("update", "ConfigMap", namespace="default",
                                              name="c", body=got), INFO)
        assert updated["data"] == {"k": "2"}
        patched = await api.handle(ApiRequest("patch", "ConfigMap", namespace="default",
                                              name="c", body={"data": {"k": "3"}},
                                              options={"patch_type": "merge"}), INFO)
        assert patched["data"] == {"k": "3"}
        listed = await api.handle(ApiRequest("list", "ConfigMap", namespace="default"), INFO)
        assert [o["metadata"]["name"] for o in listed["items"]] == ["c"]
        deleted = await api.handle(ApiRequest("delete", "ConfigMap", namespace="default",
                                              name="c"), INFO)
        assert deleted["status"] == "Success"
    run(main)


def test_handle_records_the_calling_process(run):
    async def main():
        seen = []
        api = loop_server(trace=lambda event, **f: seen.append(f["caller"]))
        await api.handle(ApiRequest("create", "ConfigMap", namespace="default", body=cm()), INFO)
        assert seen[-1] == "operator-0"
    run(main)


def test_handle_update_status(run):
    async def main():
        api = loop_server()
        obj = api.create(raycluster())
        obj["status"] = {"state": "ready"}
        out = await api.handle(ApiRequest("update_status", "RayCluster", api_version="ray.io/v1",
                                          namespace="default", name="rc", body=obj), INFO)
        assert out["status"] == {"state": "ready"}
    run(main)


def test_a_body_kind_that_differs_from_the_request_is_400(run):
    async def main():
        api = loop_server()
        with pytest.raises(ApiError) as err:
            await api.handle(ApiRequest("create", "Secret", namespace="default", body=cm()), INFO)
        assert (err.value.code, err.value.message) == (
            400, "the kind in the data (ConfigMap) does not match the kind of the request "
                 "(Secret)")
    run(main)


def test_a_body_kind_that_is_not_a_string_is_400(run):
    async def main():
        api = loop_server()
        body = {**cm(), "kind": 123}
        with pytest.raises(ApiError) as err:
            await api.handle(ApiRequest("create", "ConfigMap", namespace="default", body=body),
                             INFO)
        assert (err.value.code, err.value.message) == (
            400, "the kind in the data (123) does not match the kind of the request (ConfigMap)")
    run(main)


def test_a_body_api_version_that_differs_from_the_request_is_400(run):
    async def main():
        api = loop_server()
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}}
        with pytest.raises(ApiError) as err:
            await api.handle(ApiRequest("create", "Event", api_version="events.k8s.io/v1",
                                        namespace="default", body=body), INFO)
        assert (err.value.code, err.value.message) == (
            400, "the API version in the data (v1) does not match the expected API version "
                 "(events.k8s.io/v1)")
    run(main)


def test_a_body_namespace_that_differs_from_the_request_is_400(run):
    async def main():
        api = loop_server()
        with pytest.raises(ApiError) as err:
            await api.handle(ApiRequest("create", "ConfigMap", namespace="kube-system",
                                        body=cm()), INFO)
        assert (err.value.code, err.value.message) == (
            400, "the namespace of the provided object does not match the namespace sent on the "
                 "request")
    run(main)


def test_a_body_without_kind_takes_the_requests(run):
    async def main():
        api = loop_server()
        body = {"metadata": {"name": "x"}, "data": {}}
        out = await api.handle(ApiRequest("create", "ConfigMap", namespace="kube-system",
                                          body=body), INFO)
        assert (out["kind"], out["metadata"]["namespace"]) == ("ConfigMap", "kube-system")
        assert body == {"metadata": {"name": "x"}, "data": {}}
    run(main)


def test_a_non_dict_body_is_400(run):
    async def main():
        api = loop_server()
        with pytest.raises(ApiError) as err:
            await api.handle(ApiRequest("create", "ConfigMap", body="text"), INFO)
        assert (err.value.code, err.value.message) == (
            400, "the body of a create request must be a JSON object, not str")
    run(main)


def test_unknown_verbs_are_405(run):
    async def main():
        api = loop_server()
        with pytest.raises(ApiError) as err:
            await api.handle(ApiRequest("explode", "ConfigMap"), INFO)
        assert (err.value.code, err.value.message) == (405, 'verb "explode" is not supported')
    run(main)


def test_the_server_is_reachable_over_the_kernel_network(run):
    async def main():
        import asyncio
        loop = asyncio.get_running_loop()
        net = Network(loop.time, Trace(loop.time))
        api = loop_server()
        net.register("kube-apiserver", api.handle, stream_handler=api.open_watch)
        watch = await net.stream(None, "kube-apiserver", ApiRequest("watch", "ConfigMap"),
                                 kind="ConfigMap")
        await net.call(None, "kube-apiserver",
                       ApiRequest("create", "ConfigMap", namespace="default", body=cm()),
                       verb="create", kind="ConfigMap")
        event = await watch.__anext__()
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "c")
        with pytest.raises(ApiError) as err:
            await net.call(None, "kube-apiserver",
                           ApiRequest("get", "ConfigMap", namespace="default", name="zz"))
        assert err.value.message == 'configmaps "zz" not found'
        net.outage("kube-apiserver")
        from emu.kernel.network import ConnectionReset
        with pytest.raises(ConnectionReset):
            await watch.__anext__()
    run(main)
