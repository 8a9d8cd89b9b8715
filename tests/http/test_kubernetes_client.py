"""The official ``kubernetes`` Python client against ``emu serve``: list with selectors, watch
with resourceVersion resume, patch, 409 on a stale replace, 404 as an ApiException."""

from __future__ import annotations

import pytest
from serving import Served, require

pytestmark = pytest.mark.external


@pytest.fixture
def core(served: Served):
    try:
        from kubernetes import client, config
    except ImportError:
        require(False, "the kubernetes package")
        raise
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    v1 = client.CoreV1Api(api)
    name = "py-client"
    try:
        v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except client.ApiException as err:
        assert err.status == 409
    yield v1, name
    api.close()


def test_list_patch_and_stale_replace(core):
    from kubernetes import client

    v1, ns = core
    for i in range(4):
        v1.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=f"cm{i}", labels={"parity": str(i % 2)}),
            data={"i": str(i)}))
    odd = v1.list_namespaced_config_map(ns, label_selector="parity=1")
    assert [c.metadata.name for c in odd.items] == ["cm1", "cm3"]
    assert int(odd.metadata.resource_version) > 0
    page = v1.list_namespaced_config_map(ns, limit=3)
    assert len(page.items) == 3 and page.metadata._continue
    rest = v1.list_namespaced_config_map(ns, limit=3, _continue=page.metadata._continue)
    # the root-CA publisher's ConfigMap is in every namespace, as in kube
    assert [c.metadata.name for c in rest.items] == ["cm3", "kube-root-ca.crt"]
    patched = v1.patch_namespaced_config_map("cm0", ns, {"data": {"i": "patched"}})
    assert patched.data == {"i": "patched"}
    stale = v1.read_namespaced_config_map("cm1", ns)
    fresh = v1.read_namespaced_config_map("cm1", ns)
    fresh.data = {"i": "first"}
    v1.replace_namespaced_config_map("cm1", ns, fresh)
    stale.data = {"i": "second"}
    with pytest.raises(client.ApiException) as err:
        v1.replace_namespaced_config_map("cm1", ns, stale)
    assert err.value.status == 409 and "Conflict" in err.value.body
    with pytest.raises(client.ApiException) as err:
        v1.read_namespaced_config_map("nope", ns)
    assert err.value.status == 404


def test_watch_resumes_from_resource_version(core):
    from kubernetes import client, watch

    v1, ns = core
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="watched"), data={"n": "0"}))
    start = v1.list_namespaced_config_map(ns, field_selector="metadata.name=watched")
    rv = start.metadata.resource_version
    for n in (1, 2):
        v1.patch_namespaced_config_map("watched", ns, {"data": {"n": str(n)}})
    seen = []
    w = watch.Watch()
    for event in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv,
                          field_selector="metadata.name=watched", timeout_seconds=30):
        seen.append((event["type"], event["object"].data["n"]))
        rv = event["object"].metadata.resource_version
        if len(seen) == 2:
            w.stop()
    assert seen == [("MODIFIED", "1"), ("MODIFIED", "2")]
    # resume from the last version seen: only what happened after it arrives
    v1.patch_namespaced_config_map("watched", ns, {"data": {"n": "3"}})
    w = watch.Watch()
    for event in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv,
                          field_selector="metadata.name=watched", timeout_seconds=30):
        seen.append((event["type"], event["object"].data["n"]))
        w.stop()
    assert seen[-1] == ("MODIFIED", "3") and len(seen) == 3


def test_410_gone_then_relist_and_rewatch_with_a_small_history_window(tmp_path):
    """``emu serve --history-window``: a watch from a compacted version ends with the 410 the
    client raises (after its one retry), an expired continue token is 410 too, and the usual
    recovery (relist, watch from the list's version) sees the next change."""
    try:
        from kubernetes import client, config, watch
    except ImportError:
        require(False, "the kubernetes package")
        raise
    from serving import start_serve

    srv = start_serve(tmp_path, "--history-window", "30", "--speed", "20")
    try:
        api = config.new_client_from_config(config_file=str(srv.kubeconfig))
        v1 = client.CoreV1Api(api)
        for name in ("a", "b"):
            v1.create_namespaced_config_map("default", client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name), data={"n": "0"}))
        page = v1.list_namespaced_config_map("default", limit=1)
        assert page.metadata._continue
        old = page.metadata.resource_version
        for n in range(40):
            v1.patch_namespaced_config_map("a", "default", {"data": {"n": str(n)}})
        with pytest.raises(client.ApiException) as err:
            for _ in watch.Watch().stream(v1.list_namespaced_config_map, "default",
                                          resource_version=old, timeout_seconds=30):
                pass
        assert err.value.status == 410 and "too old resource version" in err.value.reason
        with pytest.raises(client.ApiException) as err:
            v1.list_namespaced_config_map("default", limit=1, _continue=page.metadata._continue)
        assert err.value.status == 410 and "Expired" in err.value.body
        fresh = v1.list_namespaced_config_map("default")
        v1.patch_namespaced_config_map("b", "default", {"data": {"n": "after"}})
        w = watch.Watch()
        seen = []
        for event in w.stream(v1.list_namespaced_config_map, "default",
                              resource_version=fresh.metadata.resource_version,
                              timeout_seconds=30):
            seen.append((event["type"], event["object"].metadata.name,
                         event["object"].data["n"]))
            w.stop()
        assert seen == [("MODIFIED", "b", "after")]
        api.close()
    finally:
        assert srv.stop() == 0
