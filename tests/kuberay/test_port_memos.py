"""The port's speed-ups change no result: copies share nothing, memoised pure functions answer
what the unmemoised ones answer, and nothing a caller can mutate is shared between calls.

`emu.kuberay.utils.util.deep_copy` copies by one orjson round trip, `ContentMemo` memoises by a
JSON document's content, and a few string functions (`parse_quantity`, `rfc3339`) are
memoised by their arguments. Each test states a claim the old,
unmemoised code met too.
"""

from __future__ import annotations

import enum
import random
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest

from emu.kuberay.common import pod as pod_builders
from emu.kuberay.raycluster import (
    VIRTUAL_EPOCH,
    _calculate_desired_resources,
    calculate_desired_resources,
    rfc3339,
)
from emu.kuberay.utils import util


def _spec(cpu: str = "100m", replicas: int = 2) -> dict:
    container = {"name": "ray", "image": "rayproject/ray:2.46.0",
                 "resources": {"requests": {"cpu": cpu, "memory": "128Mi"},
                               "limits": {"nvidia.com/gpu": "1"}}}
    return {"rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "containers": [dict(container)], "tolerations": [{"key": "k"}]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": replicas, "minReplicas": 0,
                                  "maxReplicas": 4, "rayStartParams": {},
                                  "template": {"spec": {"containers": [dict(container)]}}}]}


class _Color(enum.IntEnum):
    RED = 1


def test_deep_copy_is_equal_and_shares_no_container_with_its_input() -> None:
    obj = {"a": [{"b": 1.5, "c": None, "d": True}], "e": {"f": "é\u2028"}, "g": -0.0}
    copy = util.deep_copy(obj)
    assert copy == obj
    copy["a"][0]["b"] = 2
    copy["e"]["f"] = "x"
    assert obj == {"a": [{"b": 1.5, "c": None, "d": True}], "e": {"f": "é\u2028"}, "g": -0.0}


def test_deep_copy_keeps_what_orjson_refuses_as_the_walk_did() -> None:
    # an enum member, an integer past 64 bits and a non-string key are walked, not encoded
    obj: dict[str, Any] = {"color": _Color.RED, "big": 2**80, "nested": [{1: "one"}]}
    copy = util.deep_copy(obj)
    assert copy == obj
    assert type(copy["color"]) is _Color
    assert copy["nested"][0] is not obj["nested"][0]


def test_deep_copy_of_a_scalar_or_foreign_object_is_what_it_was() -> None:
    assert util.deep_copy("s") == "s"
    assert util.deep_copy(None) is None
    assert util.deep_copy((1, [2])) == (1, [2])  # not a dict or list: copy.deepcopy


def test_content_key_is_the_same_for_dicts_in_any_order_and_tells_1_from_1_0_and_true() -> None:
    assert util.content_key({"a": 1, "b": {"c": 2, "d": 3}}) == \
        util.content_key({"b": {"d": 3, "c": 2}, "a": 1})
    keys = {util.content_key({"x": v}) for v in (1, 1.0, True, "1")}
    assert len(keys) == 4
    assert util.content_key({1: "non-string key"}) is None


def test_content_memo_answers_what_the_function_answers_and_computes_each_content_once() -> None:
    calls: list[object] = []

    def size(obj: dict) -> int:
        calls.append(obj)
        return len(obj)

    memo = util.ContentMemo(size)
    assert memo({"a": 1, "b": 2}) == 2
    assert memo({"b": 2, "a": 1}) == 2
    assert memo({"a": 1}) == 1
    assert len(calls) == 2


def test_content_memo_never_keeps_an_exception() -> None:
    calls = 0

    def fail(obj: dict) -> int:
        nonlocal calls
        calls += 1
        raise ValueError("bad")

    memo = util.ContentMemo(fail)
    for _ in range(2):
        with pytest.raises(ValueError, match="^bad$"):
            memo({"a": 1})
    assert calls == 2


def test_content_memo_forgets_everything_when_full_and_computes_what_orjson_refuses() -> None:
    calls = 0

    def count(obj: object) -> int:
        nonlocal calls
        calls += 1
        return calls

    memo = util.ContentMemo(count, bound=2)
    memo({"a": 1})
    memo({"a": 2})
    memo({"a": 3})  # full: forgets both, keeps this one
    assert memo({"a": 3}) == 3
    assert memo({"a": 1}) == 4
    assert memo({1: "x"}) == 5 and memo({1: "x"}) == 6


def test_spec_hash_is_the_unmemoised_hash_for_every_spec_and_ignores_the_masked_fields() -> None:
    rng = random.Random(7)
    for _ in range(50):
        spec = _spec(cpu=rng.choice(["100m", "1", "2500m"]), replicas=rng.randrange(5))
        if rng.random() < 0.5:
            spec["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] = str(rng.randrange(3))
        expected = util._hash_without_replicas_and_workers_to_delete(spec)
        assert util.generate_hash_without_replicas_and_workers_to_delete(spec) == expected
    a, b = _spec(replicas=1), _spec(replicas=3)
    b["headGroupSpec"]["template"]["spec"]["tolerations"] = []
    assert util.generate_hash_without_replicas_and_workers_to_delete(a) == \
        util.generate_hash_without_replicas_and_workers_to_delete(b)
    assert util.generate_hash_without_replicas_and_workers_to_delete(_spec(cpu="1")) != \
        util.generate_hash_without_replicas_and_workers_to_delete(_spec(cpu="2"))


def test_desired_resources_are_the_unmemoised_ones_and_each_call_gets_its_own_dict() -> None:
    cluster = {"spec": _spec(cpu="1500m", replicas=3)}
    first = calculate_desired_resources(cluster)
    assert first == _calculate_desired_resources(cluster["spec"]) == {
        "desiredCPU": "6", "desiredMemory": "512Mi", "desiredGPU": "4", "desiredTPU": "0"}
    first["desiredCPU"] = "changed by the caller"
    assert calculate_desired_resources(cluster)["desiredCPU"] == "6"


def test_a_malformed_quantity_is_refused_every_time_and_a_good_one_parses_exactly() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="^quantities must match the regular expression"):
            pod_builders.parse_quantity("12abc")
    assert pod_builders.parse_quantity(" 1500m ") == Fraction(3, 2)
    assert pod_builders.parse_quantity("2Gi") == 2 * 2**30
    assert pod_builders.parse_quantity(3) == 3


def test_rfc3339_is_the_strftime_text_at_and_around_second_boundaries() -> None:
    rng = random.Random(3)
    times = [0.0, 0.9999994, 0.9999996, 59.5, -0.25, -1.0000004, 86399.9999996, 1e7 + 0.5]
    times += [rng.uniform(-1e4, 1e7) for _ in range(500)]
    for seconds in times * 2:  # the second pass reads the memo
        assert rfc3339(seconds) == (VIRTUAL_EPOCH + timedelta(seconds=seconds)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"), seconds


def test_build_pod_leaves_its_template_alone_unless_told_it_owns_it() -> None:
    template = {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.46.0"}]}}
    kept = util.deep_copy(template)
    args: tuple[Any, ...] = (pod_builders.C.HEAD_NODE, {}, "6379", False, pod_builders.C.RAY_CLUSTER_CRD, "")
    pod = pod_builders.build_pod(template, *args)
    assert template == kept
    owned = pod_builders.build_pod(util.deep_copy(template), *args, copy_template=False)
    assert owned == pod
