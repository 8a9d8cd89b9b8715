"""kube-apiserver semantics a mutation sample (scripts/mutation.py) showed no test pinned: the
namespace scope of a collection delete, and which write owns ``status`` for a kind with a status
subresource (registry/rest: ``PrepareForUpdate`` of the main resource copies the stored status,
the /status strategy copies the stored spec and metadata)."""

from __future__ import annotations

from typing import Any

import pytest
from conformance_objects import cm, raycluster

from emu.apiserver.errors import ApiError
from emu.apiserver.server import APIServer


def _names(api: APIServer, kind: str, ns: str | None = None) -> list[tuple[str, str]]:
    return sorted((o["metadata"].get("namespace", ""), o["metadata"]["name"])
                  for o in api.list(kind, ns)["items"])


def test_a_namespaced_delete_collection_stays_in_its_namespace(api: APIServer) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    for ns in ("default", "other"):
        api.create(cm("a", ns, labels={"app": "x"}))
        api.create(cm("b", ns, labels={"app": "x"}))
    out = api.delete_collection("ConfigMap", "other", label_selector="app=x")
    # each item is what the delete answered: a Success Status naming the object, as kube's
    # registry returns for kinds that do not return the deleted object
    assert sorted(o["details"]["name"] for o in out["items"]) == ["a", "b"]
    assert _names(api, "ConfigMap") == [("default", "a"), ("default", "b")]


def test_delete_collection_answers_a_list_at_the_current_revision(api: APIServer) -> None:
    api.create(cm("a"))
    out = api.delete_collection("ConfigMap", "default")
    rv = api.list("ConfigMap")["metadata"]["resourceVersion"]
    assert out["apiVersion"] == "v1" and out["kind"] == "ConfigMapList"
    assert out["metadata"]["resourceVersion"] == rv
    assert _names(api, "ConfigMap") == []


def test_delete_collection_of_a_cluster_scoped_kind_ignores_the_namespace(api: APIServer) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone",
                                                                     "labels": {"t": "1"}}})
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kept"}})
    out = api.delete_collection("Namespace", "default", label_selector="t=1")
    assert [o["details"]["name"] for o in out["items"]] == ["gone"]  # found despite "default"
    assert "kept" in [n for _, n in _names(api, "Namespace")]
    assert "gone" not in [n for _, n in _names(api, "Namespace")]


def test_update_keeps_the_stored_status_of_a_kind_with_a_status_subresource(
        api: APIServer) -> None:
    obj = api.create(raycluster())
    obj["status"] = {"state": "ready"}
    stored = api.update_status(obj)
    stored["status"] = {"state": "failed"}
    stored["spec"]["rayVersion"] = "2.10.0"
    out = api.update(stored)
    assert out["status"] == {"state": "ready"}
    assert out["spec"]["rayVersion"] == "2.10.0"
    del out["status"]
    out["spec"]["rayVersion"] = "2.11.0"
    again = api.update(out)
    assert again["status"] == {"state": "ready"}  # a write without status does not clear it
    assert api.get("RayCluster", "rc", "default")["status"] == {"state": "ready"}


def test_an_update_that_only_changes_status_of_a_subresource_kind_is_a_no_op(
        api: APIServer) -> None:
    obj = api.create(raycluster())
    stored = api.update_status({**obj, "status": {"state": "ready"}})
    stored["status"] = {"state": "other"}
    out = api.update(stored)
    assert out["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert out["status"] == {"state": "ready"}


def test_update_status_without_status_clears_it(api: APIServer) -> None:
    obj = api.create(raycluster())
    stored = api.update_status({**obj, "status": {"state": "ready"}})
    del stored["status"]
    out = api.update_status(stored)
    assert "status" not in out
    assert "status" not in api.get("RayCluster", "rc", "default")


def test_update_status_keeps_the_stored_spec_and_generation(api: APIServer) -> None:
    obj = api.create(raycluster())
    sent: dict[str, Any] = {**obj, "status": {"state": "ready"},
                            "spec": {**obj["spec"], "rayVersion": "0.0.1"}}
    out = api.update_status(sent)
    assert out["spec"] == obj["spec"]
    assert out["metadata"]["generation"] == obj["metadata"]["generation"] == 1


def test_update_moves_no_object_to_another_namespace(api: APIServer) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    obj = api.create(cm("a"))
    obj["metadata"]["namespace"] = "other"
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.code == 404
    assert api.get("ConfigMap", "a", "default")["data"] == {"k": "v"}


def test_the_spec_change_of_an_update_bumps_generation_by_one(api: APIServer) -> None:
    obj = api.create(raycluster())
    for expected in (2, 3):
        obj["spec"]["rayVersion"] = f"2.{expected}.0"
        obj = api.update(obj)
        assert obj["metadata"]["generation"] == expected
    obj["metadata"]["labels"] = {"a": "b"}
    obj = api.update(obj)
    assert obj["metadata"]["generation"] == 3


def test_a_finalizer_that_is_not_a_qualified_name_is_422(api: APIServer) -> None:
    """ValidateObjectMeta: each finalizer is a qualified name, on create and on update."""
    with pytest.raises(ApiError) as err:
        api.create(cm("a", finalizers=["Bad Name!"]))
    assert err.value.code == 422
    assert 'metadata.finalizers: Invalid value: "Bad Name!": name part must consist of' in \
        err.value.message
    obj = api.create(cm("b", finalizers=["example.com/ok"]))
    obj["metadata"]["finalizers"] = ["example.com/ok", "example.com/no way"]
    with pytest.raises(ApiError) as err:
        api.update(obj)
    assert err.value.code == 422 and "metadata.finalizers" in err.value.message
    assert api.get("ConfigMap", "b", "default")["metadata"]["finalizers"] == ["example.com/ok"]


def test_an_all_namespaces_continue_token_must_name_a_namespace(api: APIServer) -> None:
    import base64

    import orjson

    api.create(cm("a"))
    rv = int(api.list("ConfigMap")["metadata"]["resourceVersion"])
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "a\x00"})
    token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    with pytest.raises(ApiError) as err:
        api.list("ConfigMap", limit=1, continue_=token)
    assert (err.value.code, err.value.message) == (
        400, "invalid continue token: continue key is not valid: the start key 'a' names no "
             "namespace")
    # the same token is fine within a namespace: the key is relative to it
    assert api.list("ConfigMap", "default", limit=1, continue_=token)["items"] == []
