"""List: namespaces, label and field selectors, order, resourceVersion; kind resolution."""

from __future__ import annotations

import pytest
from conformance_objects import cm, pod

from emu.apiserver.errors import ApiError
from emu.apiserver.kinds import KindInfo


def names(result):
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in result["items"]]


@pytest.fixture
def labelled(api):
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    api.create(cm("b", labels={"app": "web", "tier": "front"}))
    api.create(cm("a", labels={"app": "db"}))
    api.create(cm("c", labels={"app": "web", "tier": "back"}))
    api.create(cm("d"))
    api.create(cm("a", "other", labels={"app": "web"}))
    return api


def test_list_is_a_typed_list_with_the_current_revision(labelled):
    out = labelled.list("ConfigMap", "default")
    assert out["apiVersion"] == "v1" and out["kind"] == "ConfigMapList"
    assert out["metadata"] == {"resourceVersion": str(labelled.resource_version)}


def test_list_is_scoped_to_a_namespace_and_sorted_like_etcd_keys(labelled):
    assert names(labelled.list("ConfigMap", "default")) == [
        ("default", "a"), ("default", "b"), ("default", "c"), ("default", "d")]
    assert names(labelled.list("ConfigMap")) == [
        ("default", "a"), ("default", "b"), ("default", "c"), ("default", "d"), ("other", "a")]


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=web", ["b", "c"]),
    ("app==web", ["b", "c"]),
    ("app!=web", ["a", "d"]),
    ("app in (db,web)", ["a", "b", "c"]),
    ("app notin (web)", ["a", "d"]),
    ("tier", ["b", "c"]),
    ("!tier", ["a", "d"]),
    ("app=web,tier=back", ["c"]),
    ("app=web,!tier", []),
    ("app=none", []),
])
def test_label_selectors(labelled, selector, expected):
    out = labelled.list("ConfigMap", "default", label_selector=selector)
    assert [o["metadata"]["name"] for o in out["items"]] == expected


def test_label_selector_dict_form_is_accepted(labelled):
    out = labelled.list("ConfigMap", "default", label_selector={
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]})
    assert [o["metadata"]["name"] for o in out["items"]] == ["b"]


def test_a_bad_label_selector_is_400(labelled):
    with pytest.raises(ApiError) as err:
        labelled.list("ConfigMap", label_selector="app in web")
    assert (err.value.code, err.value.message) == (
        400, "unable to parse requirement: invalid label selector \"app in web\": found 'web', "
             "expected: '('")


def test_field_selector_on_name_and_namespace(labelled):
    assert names(labelled.list("ConfigMap", field_selector="metadata.name=a")) == [
        ("default", "a"), ("other", "a")]
    assert names(labelled.list("ConfigMap", field_selector="metadata.namespace!=default")) == [
        ("other", "a")]


def test_pod_field_selectors_on_phase_and_node(api):
    api.create(pod("x", node="n1"))
    api.create(pod("y", node="n2"))
    api.create(pod("z"))
    assert [o["metadata"]["name"] for o in
            api.list("Pod", field_selector="spec.nodeName=n1")["items"]] == ["x"]
    assert [o["metadata"]["name"] for o in
            api.list("Pod", field_selector="spec.nodeName==")["items"]] == ["z"]
    assert [o["metadata"]["name"] for o in
            api.list("Pod", field_selector="status.phase=Pending,spec.nodeName!=n1")["items"]
            ] == ["y", "z"]


def test_unsupported_field_selector_is_400(api):
    with pytest.raises(ApiError) as err:
        api.list("ConfigMap", field_selector="status.phase=Running")
    assert (err.value.code, err.value.message) == (
        400, "field label not supported: status.phase")


def test_list_at_a_future_resource_version_times_out(api):
    with pytest.raises(ApiError) as err:
        api.list("ConfigMap", resource_version=str(api.resource_version + 10))
    assert err.value.code == 504


def test_kinds_resolve_by_kind_plural_short_name_and_api_version(api):
    api.create(cm("x"))
    for kind, version in (("ConfigMap", None), ("configmaps", None), ("cm", None),
                          ("ConfigMap", "v1")):
        assert api.get(kind, "x", api_version=version)["metadata"]["name"] == "x"


def test_bare_event_is_core_and_api_version_picks_events_k8s_io(api):
    core = api.create({"apiVersion": "v1", "kind": "Event",
                       "metadata": {"name": "e1", "namespace": "default"},
                       "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started"})
    new = api.create({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                      "metadata": {"name": "e2", "namespace": "default"}, "reason": "Started"})
    assert core["apiVersion"] == "v1" and new["apiVersion"] == "events.k8s.io/v1"
    assert names(api.list("Event")) == [("default", "e1")]
    assert names(api.list("Event", api_version="events.k8s.io/v1")) == [("default", "e2")]


def test_unknown_kind_is_404_and_changes_nothing(api):
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.create({"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "x"}})
    assert (err.value.code, err.value.reason) == (404, "NotFound")
    assert err.value.message == 'the server doesn\'t have a resource type "Foo"'
    with pytest.raises(ApiError):
        api.list("Foo")
    assert api.resource_version == rv


def test_known_kind_in_a_wrong_version_is_404(api):
    with pytest.raises(ApiError) as err:
        api.create({"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "x"}})
    assert err.value.message == 'no matches for kind "Deployment" in version "v1"'


def test_a_custom_resource_kind_can_be_registered_at_runtime(api):
    api.kinds.register(KindInfo("example.com", "v1alpha1", "Widget", "widgets",
                                has_status=True, has_generation=True))
    out = api.create({"apiVersion": "example.com/v1alpha1", "kind": "Widget",
                      "metadata": {"name": "w"}, "spec": {"size": 1}})
    assert out["metadata"]["generation"] == 1
    assert names(api.list("widgets")) == [("default", "w")]
    with pytest.raises(ApiError) as err:
        api.get("Widget", "nope")
    assert err.value.message == 'widgets.example.com "nope" not found'


def test_cluster_scoped_kinds_ignore_the_namespace(api):
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert api.get("Node", "n1", "whatever")["metadata"]["name"] == "n1"
    assert names(api.list("Node", "whatever")) == [("", "n1")]


def test_label_index_follows_label_changes(api):
    obj = api.create(cm(labels={"app": "a"}))
    obj["metadata"]["labels"] = {"app": "b"}
    api.update(obj)
    assert api.list("ConfigMap", label_selector="app=a")["items"] == []
    assert len(api.list("ConfigMap", label_selector="app=b")["items"]) == 1
    api.delete("ConfigMap", "c")
    assert api.list("ConfigMap", label_selector="app=b")["items"] == []
