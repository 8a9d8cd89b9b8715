"""List pagination (``limit``/``continue``), ``resourceVersionMatch`` and get at a version, as
kube-apiserver serves them over etcd: pages of one consistent snapshot, 410 once compacted."""

from __future__ import annotations

import base64

import orjson
import pytest
from conformance_objects import cm

from emu.apiserver.errors import ApiError, BadRequest, Gone, Invalid, ServerTimeout
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom


def names(result):
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in result["items"]]


@pytest.fixture
def seven(api):
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    for n in "gfedcba":
        api.create(cm(n, labels={"odd": str(ord(n) % 2)}))
    api.create(cm("a", "other"))
    return api


def test_limit_returns_pages_with_a_continue_token_and_remaining_count(seven):
    first = seven.list("ConfigMap", "default", limit=3)
    assert names(first) == [("default", n) for n in "abc"]
    assert first["metadata"]["remainingItemCount"] == 4
    token = first["metadata"]["continue"]
    second = seven.list("ConfigMap", "default", limit=3, continue_=token)
    assert names(second) == [("default", n) for n in "def"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    third = seven.list("ConfigMap", "default", limit=3, continue_=second["metadata"]["continue"])
    assert names(third) == [("default", "g")]
    assert "continue" not in third["metadata"] and "remainingItemCount" not in third["metadata"]


def test_the_token_is_kubes_encoding(seven):
    token = seven.list("ConfigMap", limit=2)["metadata"]["continue"]
    data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert data == {"v": "meta.k8s.io/v1", "rv": seven.resource_version, "start": "default/b\x00"}


def test_pages_across_namespaces_and_an_exact_fit_ends_without_token(seven):
    seen = []
    token = None
    while True:
        page = seven.list("ConfigMap", limit=4, continue_=token)
        seen += names(page)
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == names(seven.list("ConfigMap"))
    exact = seven.list("ConfigMap", "default", limit=7)
    assert len(exact["items"]) == 7 and "continue" not in exact["metadata"]


def test_later_pages_read_the_first_pages_snapshot(seven):
    first = seven.list("ConfigMap", "default", limit=2)
    seven.delete("ConfigMap", "c", "default")
    seven.create(cm("cc"))
    seven.update({**seven.get("ConfigMap", "d", "default"), "data": {"k": "changed"}})
    rest = seven.list("ConfigMap", "default", continue_=first["metadata"]["continue"])
    assert names(rest) == [("default", n) for n in "cdefg"]
    assert rest["items"][1]["data"] == {"k": "v"}
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_selectors_filter_pages_and_give_no_remaining_count(seven):
    page = seven.list("ConfigMap", "default", label_selector="odd=1", limit=2)
    assert names(page) == [("default", "a"), ("default", "c")]
    assert "remainingItemCount" not in page["metadata"]
    rest = seven.list("ConfigMap", "default", label_selector="odd=1",
                      continue_=page["metadata"]["continue"])
    assert names(rest) == [("default", "e"), ("default", "g")]


def test_a_continuation_past_compaction_is_410_with_an_inconsistent_token(clock):
    api = APIServer(clock=clock, rng=SimRandom(1), history_window=3)
    for n in "abcde":
        api.create(cm(n))
    first = api.list("ConfigMap", "default", limit=2)
    for n in "fghij":
        api.create(cm(n))
    with pytest.raises(Gone) as err:
        api.list("ConfigMap", "default", limit=2, continue_=first["metadata"]["continue"])
    assert err.value.code == 410 and "continue parameter is too old" in err.value.message
    token = err.value.status["metadata"]["continue"]
    assert ApiError.from_status(err.value.status).continue_token == token  # type: ignore[attr-defined]
    rest = api.list("ConfigMap", "default", continue_=token)
    assert names(rest)[0] == ("default", "c") and len(rest["items"]) == 8
    assert rest["metadata"]["resourceVersion"] == str(api.resource_version)


@pytest.mark.parametrize("token", ["!!!", base64.urlsafe_b64encode(b"[1]").decode(),
                                   base64.urlsafe_b64encode(b'{"v":"x","rv":3,"start":"a"}').decode(),
                                   base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":0,"start":"a"}').decode(),
                                   base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":3,"start":""}').decode()])
def test_a_bad_token_is_400(seven, token):
    rev = seven.resource_version
    with pytest.raises(BadRequest, match="invalid continue token"):
        seven.list("ConfigMap", "default", continue_=token)
    assert seven.resource_version == rev


@pytest.mark.parametrize(("token", "why"), [
    ("!!!", "illegal base64 data at input byte 0"),
    ("abcde", "illegal base64 data at input byte 4"),  # a dangling sixth of a quantum
    ("YQ==", "illegal base64 data at input byte 2"),  # kube's tokens are unpadded
    (base64.urlsafe_b64encode(b"[1]").decode(),
     "json: cannot unmarshal array into Go value of type storage.continueToken"),
])
def test_a_bad_token_says_what_go_would_say(seven, token, why):
    with pytest.raises(BadRequest) as err:
        seven.list("ConfigMap", "default", continue_=token)
    assert str(err.value) == f"invalid continue token: continue key is not valid: {why}"


def test_continue_with_a_resource_version_is_400(seven):
    token = seven.list("ConfigMap", limit=1)["metadata"]["continue"]
    with pytest.raises(BadRequest, match="specifying resource version is not allowed"):
        seven.list("ConfigMap", continue_=token, resource_version="5")


def test_a_bad_limit_is_400_and_zero_means_no_limit(seven):
    with pytest.raises(BadRequest):
        seven.list("ConfigMap", limit="ten")
    assert len(seven.list("ConfigMap", "default", limit=0)["items"]) == 7


def test_exact_reads_an_older_state_and_410_once_compacted(clock):
    api = APIServer(clock=clock, rng=SimRandom(1), history_window=3)
    api.create(cm("a"))
    rev = api.resource_version
    api.create(cm("b"))
    api.delete("ConfigMap", "a", "default")
    old = api.list("ConfigMap", "default", resource_version=str(rev),
                   resource_version_match="Exact")
    assert names(old) == [("default", "a")] and old["metadata"]["resourceVersion"] == str(rev)
    now = api.list("ConfigMap", "default", resource_version=str(rev),
                   resource_version_match="NotOlderThan")
    assert names(now) == [("default", "b")]
    for n in "cdef":
        api.create(cm(n))
    with pytest.raises(Gone, match="The resourceVersion for the provided list is too old"):
        api.list("ConfigMap", "default", resource_version=str(rev), resource_version_match="Exact")
    with pytest.raises(ServerTimeout, match="Too large resource version"):
        api.list("ConfigMap", resource_version=str(api.resource_version + 1),
                 resource_version_match="Exact")


@pytest.mark.parametrize(("opts", "text"), [
    ({"resource_version_match": "Exact"}, "forbidden unless resourceVersion is provided"),
    ({"resource_version_match": "Exact", "resource_version": "0"}, 'forbidden for resourceVersion "0"'),
    ({"resource_version_match": "Newest", "resource_version": "3"}, "Unsupported value"),
])
def test_bad_resource_version_match_is_422_list_options(seven, opts, text):
    with pytest.raises(Invalid, match=text) as err:
        seven.list("ConfigMap", **opts)
    assert err.value.details["kind"] == "ListOptions"


def test_get_at_a_resource_version_is_not_older_than(seven):
    rv = seven.resource_version
    assert seven.get("ConfigMap", "a", "default", resource_version="1")["metadata"]["name"] == "a"
    with pytest.raises(ServerTimeout):
        seven.get("ConfigMap", "a", "default", resource_version=str(rv + 1))


async def test_client_pages_and_list_all(sim):
    c = sim.client("pager")
    for i in range(5):
        await c.create(cm(f"p{i}"))
    page = await c.list("ConfigMap", "default", limit=2)
    assert [o["metadata"]["name"] for o in page] == ["p0", "p1"]
    assert page.continue_ and page.remaining_item_count == 3
    rest = await c.list("ConfigMap", "default", continue_=page.continue_)
    assert [o["metadata"]["name"] for o in rest] == ["p2", "p3", "p4"] and not rest.continue_
    everything = await c.list_all("ConfigMap", "default", limit=2)
    assert [o["metadata"]["name"] for o in everything] == [f"p{i}" for i in range(5)]
    again = await c.get("ConfigMap", "p0", "default", resource_version=page.resource_version)
    assert again["metadata"]["name"] == "p0"
    exact = await c.list("ConfigMap", "default", resource_version=page.resource_version,
                         resource_version_match="Exact")
    assert len(exact) == 5
