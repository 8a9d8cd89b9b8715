"""The eviction API and PodDisruptionBudget status (`emu.apiserver.disruption`)."""

from __future__ import annotations

from typing import Any

import pytest

from emu.apiserver.errors import ApiError
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom

Obj = dict[str, Any]


@pytest.fixture
def api() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(1))


def pod(api: APIServer, name: str, ready: bool = True, app: str = "web") -> None:
    api.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]}})
    p = api.get("Pod", name, "default")
    p["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    api.update_status(p)


def pdb(api: APIServer, name: str = "budget", **spec: Any) -> None:
    api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}})


def status(api: APIServer, name: str = "budget") -> Obj:
    out: Obj = api.get("PodDisruptionBudget", name, "default")["status"]
    return out


def counts(api: APIServer) -> tuple[int, int, int, int]:
    s = status(api)
    return (s["currentHealthy"], s["desiredHealthy"], s["expectedPods"], s["disruptionsAllowed"])


def test_the_budget_status_follows_its_pods(api: APIServer) -> None:
    for n in ("a", "b", "c"):
        pod(api, n)
    pod(api, "other", app="db")
    pdb(api, minAvailable=2)
    assert counts(api) == (3, 2, 3, 1)
    s = status(api)
    assert s["observedGeneration"] == 1
    assert [(c["type"], c["status"], c["reason"]) for c in s["conditions"]] == [
        ("DisruptionAllowed", "True", "SufficientPods")]
    pod(api, "d", ready=False)
    assert counts(api) == (3, 2, 4, 1)
    api.delete("Pod", "a", "default", grace_period_seconds=0)
    assert counts(api) == (2, 2, 3, 0)
    assert status(api)["conditions"][0]["reason"] == "InsufficientPods"


@pytest.mark.parametrize(("spec", "want"), [
    ({"maxUnavailable": 1}, (4, 3, 4, 1)),
    ({"maxUnavailable": "50%"}, (4, 2, 4, 2)),
    ({"minAvailable": "30%"}, (4, 2, 4, 2)),
    ({"minAvailable": 4}, (4, 4, 4, 0)),
])
def test_min_available_and_max_unavailable(api: APIServer, spec: Obj,
                                           want: tuple[int, ...]) -> None:
    for n in ("a", "b", "c", "d"):
        pod(api, n)
    pdb(api, **spec)
    assert counts(api) == want


def test_eviction_honours_the_budget(api: APIServer) -> None:
    for n in ("a", "b", "c"):
        pod(api, n)
    pdb(api, minAvailable=2)
    assert api.evict("a", "default") == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                         "status": "Success", "code": 201}
    assert api.get("Pod", "a", "default")["metadata"]["deletionTimestamp"]
    assert "disruptedPods" not in status(api)  # its deletion is seen: no longer "disrupted"
    assert counts(api) == (2, 2, 3, 0)
    with pytest.raises(ApiError) as err:
        api.evict("b", "default")
    assert (err.value.code, err.value.reason, err.value.message) == (
        429, "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.")
    assert err.value.status["details"] == {"causes": [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget budget needs 2 healthy pods and has 2 currently"}]}
    assert api.get("Pod", "b", "default")["metadata"].get("deletionTimestamp") is None
    # a Pod with no budget, an unready one under a healthy budget, a missing one
    pod(api, "free", app="db")
    api.evict("free", "default")
    pod(api, "sick", ready=False)
    api.evict("sick", "default")
    with pytest.raises(ApiError) as err:
        api.evict("nope", "default")
    assert err.value.code == 404


def test_graceful_eviction_marks_the_pod_disrupted(api: APIServer) -> None:
    for n in ("a", "b", "c"):
        pod(api, n)
    pdb(api, maxUnavailable=1)
    api.evict("a", "default", body={"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": {"name": "a"},
                                    "deleteOptions": {"gracePeriodSeconds": 30}})
    assert api.get("Pod", "a", "default")["metadata"]["deletionTimestamp"]
    assert counts(api) == (2, 2, 3, 0)
    with pytest.raises(ApiError, match="disruption budget"):
        api.evict("b", "default")


def test_two_budgets_for_one_pod_is_an_error(api: APIServer) -> None:
    pod(api, "a")
    pdb(api, "one", minAvailable=0)
    pdb(api, "two", minAvailable=0)
    with pytest.raises(ApiError) as err:
        api.evict("a", "default")
    assert (err.value.code, err.value.message) == (
        500, "This pod has more than one PodDisruptionBudget, which the eviction subresource "
             "does not support.")
