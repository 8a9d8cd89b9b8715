"""LimitRanger and ResourceQuota admission (`emu.apiserver.admission`): kube's quantity text,
quota usage in status, the 403s with kube's messages, LimitRange defaults and bounds, and the
`FillQuota` fault."""

from __future__ import annotations

from typing import Any

import pytest

import emu
from emu.apiserver.errors import ApiError
from emu.apiserver.quantity import canonical, parse
from emu.apiserver.server import APIServer
from emu.faults import FillQuota, ReleaseQuota, UnperformedFaults
from emu.kernel.rng import SimRandom

Obj = dict[str, Any]


@pytest.fixture
def api() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(1))


def quota(hard: Obj, name: str = "q", **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": {"hard": hard, **spec}}


def pod(name: str, requests: Obj | None = None, limits: Obj | None = None,
        cname: str = "c") -> Obj:
    res: Obj = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": cname, "image": "i", "resources": res}]}}


def forbidden(api: APIServer, body: Obj) -> str:
    with pytest.raises(ApiError) as err:
        api.create(body, namespace="default")
    assert err.value.code == 403, err.value
    assert err.value.reason == "Forbidden"
    return err.value.message


def status(api: APIServer, name: str = "q") -> Obj:
    out: Obj = api.get("ResourceQuota", name, "default")["status"]
    return out


@pytest.mark.parametrize(("text", "want"), [
    ("1000m", "1"), ("1500m", "1500m"), ("0.5", "500m"), ("2000", "2k"), ("1024Mi", "1Gi"),
    ("1536Mi", "1536Mi"), ("1000Ki", "1000Ki"), ("512", "512"), ("1e3", "1e3"), ("0", "0"),
    (2, "2"), ("1G", "1G"), ("100Mi", "100Mi"), ("1.5Gi", "1536Mi"), ("0.1m", "100u"),
])
def test_quantities_print_as_kubes_canonical_text(text: Any, want: str) -> None:
    assert canonical(text) == want


def test_a_sum_keeps_the_format_of_its_first_nonzero_operand() -> None:
    assert str(parse("0").add(parse("1Gi"))) == "1Gi"
    assert str(parse("1Gi").add(parse("1G"))) == "2073741824"  # 1Gi + 1G is no power of 1024
    assert str(parse("512Mi").add(parse("512Mi"))) == "1Gi"
    with pytest.raises(ValueError, match="regular expression"):
        parse("12 cores")


def test_quota_status_tracks_usage_and_refuses_with_kubes_message(api: APIServer) -> None:
    api.create(quota({"pods": "2", "requests.memory": "1Gi", "count/configmaps": "5"}),
               namespace="default")
    assert status(api) == {"hard": {"pods": "2", "requests.memory": "1Gi",
                                    "count/configmaps": "5"},
                           "used": {"pods": "0", "requests.memory": "0",
                                    "count/configmaps": "0"}}
    api.create(pod("a", {"memory": "512Mi"}), namespace="default")
    assert status(api)["used"] == {"pods": "1", "requests.memory": "512Mi",
                                   "count/configmaps": "0"}
    assert forbidden(api, pod("b", {"memory": "600Mi"})) == (
        'pods "b" is forbidden: exceeded quota: q, requested: requests.memory=600Mi, '
        'used: requests.memory=512Mi, limited: requests.memory=1Gi')
    assert "b" not in {p["metadata"]["name"] for p in api.list("Pod", "default")["items"]}
    api.create(pod("b", {"memory": "512Mi"}), namespace="default")
    assert forbidden(api, pod("c", {"memory": "1"})) == (
        'pods "c" is forbidden: exceeded quota: q, requested: pods=1,requests.memory=1, '
        'used: pods=2,requests.memory=1Gi, limited: pods=2,requests.memory=1Gi')
    api.delete("Pod", "a", "default", grace_period_seconds=0)
    assert status(api)["used"]["pods"] == "1"
    api.create(pod("c", {"memory": "1"}), namespace="default")


def test_a_quota_on_compute_resources_requires_them_of_every_container(api: APIServer) -> None:
    api.create(quota({"limits.cpu": "4", "requests.memory": "1Gi"}), namespace="default")
    body = pod("p", {"cpu": "1"})
    body["spec"]["containers"].append({"name": "b", "image": "i"})
    assert forbidden(api, body) == (
        'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: b,c; '
        'requests.memory for: b,c')


def test_terminal_pods_free_their_share_but_still_count_as_objects(api: APIServer) -> None:
    api.create(quota({"pods": "1", "count/pods": "2"}), namespace="default")
    api.create(pod("a"), namespace="default")
    done = api.get("Pod", "a", "default")
    done["status"] = {**done["status"], "phase": "Succeeded"}
    api.update_status(done)
    assert status(api)["used"] == {"pods": "0", "count/pods": "1"}
    api.create(pod("b"), namespace="default")
    assert forbidden(api, pod("c")).endswith(
        "exceeded quota: q, requested: count/pods=1,pods=1, used: count/pods=2,pods=1, "
        "limited: count/pods=2,pods=1")


def test_object_counts_and_service_kinds(api: APIServer) -> None:
    api.create(quota({"services": "2", "services.loadbalancers": "0",
                      "count/deployments.apps": "0"}), namespace="default")
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"ports": [{"port": 80}]}}
    api.create(svc, namespace="default")
    lb = {**svc, "metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer",
                                                      "ports": [{"port": 80}]}}
    assert "exceeded quota: q, requested: services.loadbalancers=1, used: " \
           "services.loadbalancers=0, limited: services.loadbalancers=0" in forbidden(api, lb)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}},
               "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    assert forbidden(api, dep).startswith('deployments.apps "d" is forbidden: exceeded quota')
    # a namespace without quotas is not limited
    api.create({**dep, "metadata": {"name": "d", "namespace": "kube-public"}})


def test_raising_the_hard_limit_admits_again(api: APIServer) -> None:
    api.create(quota({"pods": "1"}), namespace="default")
    api.create(pod("a"), namespace="default")
    forbidden(api, pod("b"))
    q = api.get("ResourceQuota", "q", "default")
    q["spec"]["hard"]["pods"] = "3"
    api.update(q)
    assert status(api) == {"hard": {"pods": "3"}, "used": {"pods": "1"}}
    api.create(pod("b"), namespace="default")


def test_scoped_quotas_charge_only_their_pods(api: APIServer) -> None:
    api.create(quota({"pods": "0"}, scopes=["BestEffort"]), namespace="default")
    api.create(pod("burstable", {"cpu": "1"}), namespace="default")
    assert "exceeded quota: q" in forbidden(api, pod("besteffort"))


def test_a_priority_class_scoped_quota_charges_only_that_class(api: APIServer) -> None:
    for name, value in (("high", 1000), ("low", 10)):
        api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": name}, "value": value})
    api.create(quota({"pods": "1"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}),
        namespace="default")
    for name, klass in (("h1", "high"), ("l1", "low"), ("l2", "low")):
        body = pod(name)
        body["spec"]["priorityClassName"] = klass
        api.create(body, namespace="default")
    assert status(api)["used"] == {"pods": "1"}
    again = pod("h2")
    again["spec"]["priorityClassName"] = "high"
    assert "exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1" in \
        forbidden(api, again)


def test_limit_range_defaults_and_annotation(api: APIServer) -> None:
    api.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"},
                                     "defaultRequest": {"cpu": "100m",
                                                        "memory": "64Mi"}}]}},
               namespace="default")
    body = pod("p", {"memory": "1Gi"})
    created = api.create(body, namespace="default")
    assert created["spec"]["containers"][0]["resources"] == {
        "requests": {"memory": "1Gi", "cpu": "100m"}, "limits": {"cpu": "500m"}}
    assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container c; cpu limit for container c")
    assert body["spec"]["containers"][0]["resources"] == {"requests": {"memory": "1Gi"}}
    # only Pods are defaulted; a namespace without a LimitRange is left alone
    other = api.create({**pod("q"), "metadata": {"name": "q", "namespace": "kube-public"}})
    assert other["spec"]["containers"][0]["resources"] == {}


def test_limit_range_bounds_are_refused_with_kubes_messages(api: APIServer) -> None:
    api.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                "spec": {"limits": [
                    {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "10Mi"},
                     "maxLimitRequestRatio": {"memory": "2"}},
                    {"type": "Pod", "max": {"memory": "1Gi"}}]}},
               namespace="default")
    assert forbidden(api, pod("a", {"cpu": "500m", "memory": "100Mi"},
                              {"cpu": "2", "memory": "100Mi"})) == (
        'pods "a" is forbidden: maximum cpu usage per Container is 1, but limit is 2')
    assert forbidden(api, pod("b", {"memory": "5Mi"}, {"cpu": "1", "memory": "5Mi"})) == (
        'pods "b" is forbidden: minimum memory usage per Container is 10Mi, but request is 5Mi')
    assert forbidden(api, pod("c", {"memory": "100Mi"}, {"cpu": "1", "memory": "300Mi"})) == (
        'pods "c" is forbidden: memory max limit to request ratio per Container is 2, but '
        'provided ratio is 3.000000')
    msg = forbidden(api, pod("d", {"memory": "2Gi"}, {"cpu": "1", "memory": "2Gi"}))
    assert msg == 'pods "d" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 2Gi'
    api.create(pod("ok", {"memory": "100Mi"}, {"cpu": "1", "memory": "200Mi"}),
               namespace="default")


def test_a_dry_run_is_admitted_like_a_create_and_charges_nothing(api: APIServer) -> None:
    api.create(quota({"pods": "1"}), namespace="default")
    api.create(pod("a"), namespace="default", dry_run=True)
    assert status(api)["used"] == {"pods": "0"}
    api.create(pod("a"), namespace="default")
    with pytest.raises(ApiError) as err:
        api.create(pod("b"), namespace="default", dry_run=True)
    assert err.value.code == 403


# -- FillQuota ------------------------------------------------------------------------------------


def test_fill_quota_refuses_until_released() -> None:
    seen: list[str] = []

    async def main(sim: emu.Simulation) -> None:
        sim.api.create(quota({"pods": "10"}), namespace="default")
        sim.api.create(pod("a"), namespace="default")
        await sim.sleep(10)
        assert status(sim.api)["used"] == {"pods": "10"}
        with pytest.raises(ApiError) as err:
            sim.api.create(pod("b"), namespace="default")
        seen.append(err.value.message)
        await sim.sleep(20)
        assert status(sim.api)["used"] == {"pods": "1"}
        sim.api.create(pod("b"), namespace="default")
        sim.faults.fill_quota("default", "pods", duration=5)
        assert status(sim.api)["used"] == {"pods": "10"}
        await sim.sleep(6)
        assert status(sim.api)["used"] == {"pods": "2"}

    emu.run(main, faults=[FillQuota(at=5.0, namespace="default", resource="pods"),
                          ReleaseQuota(at=20.0, namespace="default", resource="pods")])
    assert seen == ['pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: '
                    'pods=10, limited: pods=10']


def test_fill_quota_without_a_quota_is_not_performed() -> None:
    async def main(sim: emu.Simulation) -> None:
        sim.api.create(quota({"pods": "10"}), namespace="default")
        await sim.sleep(10)

    with pytest.raises(UnperformedFaults) as err:
        emu.run(main, faults=[FillQuota(at=1.0, namespace="default", resource="requests.cpu"),
                              FillQuota(at=1.0, namespace="other", resource="pods")])
    text = str(err.value)
    assert "no ResourceQuota in namespace 'default' limits 'requests.cpu' (quotas there: " \
           "q (pods))" in text
    assert "no ResourceQuota in namespace 'other' limits 'pods' (quotas there: none)" in text
    with pytest.raises(ValueError, match="FillQuota: resource is a quota's resource name"):
        FillQuota(at=1.0, resource="")


# -- DefaultTolerationSeconds and ClusterIPs asked for ---------------------------------------------

def test_default_toleration_seconds_is_off_until_a_world_turns_it_on(api):
    plain = api.create(pod("plain"), namespace="default")
    assert "tolerations" not in plain["spec"]
    api.default_toleration_seconds = 120
    added = api.create(pod("added"), namespace="default")
    assert added["spec"]["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 120},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 120}]


def test_a_toleration_without_key_or_effect_covers_the_default_ones(api):
    api.default_toleration_seconds = 300
    manifest = pod("p")
    manifest["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready",
                                        "operator": "Exists"},
                                       {"operator": "Exists", "effect": "NoExecute"}]
    created = api.create(manifest, namespace="default")
    assert created["spec"]["tolerations"] == manifest["spec"]["tolerations"]


def service(name: str, ip: str | None = None) -> Obj:
    spec: Obj = {"ports": [{"port": 80}]}
    if ip is not None:
        spec["clusterIP"] = ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def test_a_cluster_ip_a_service_asked_for_is_never_allocated_to_another(api):
    api.create(service("dns", "10.96.0.2"), namespace="default")
    ips = [api.create(service(f"s{i}"), namespace="default")["spec"]["clusterIP"]
           for i in range(3)]
    assert ips == ["10.96.0.1", "10.96.0.3", "10.96.0.4"]
