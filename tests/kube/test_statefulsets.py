"""StatefulSets: ordered Pods named by ordinal, each with its own PVCs, recreated under the same
name; the helper kinds samples create are served."""

from __future__ import annotations

import pytest
from kube_helpers import is_true

from emu.apiserver.errors import ApiError
from emu.kube import cluster as kc

STS = {
    "apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "redis", "namespace": "default"},
    "spec": {
        "serviceName": "redis", "replicas": 3,
        "selector": {"matchLabels": {"app": "redis"}},
        "template": {"metadata": {"labels": {"app": "redis"}},
                     "spec": {"containers": [{"name": "redis", "image": "example/app:1",
                                              "volumeMounts": [{"name": "data",
                                                                "mountPath": "/data"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                  "spec": {"accessModes": ["ReadWriteOnce"],
                                           "resources": {"requests": {"storage": "1Gi"}}}}],
    },
}


def pod_names(sim):
    return sorted(p["metadata"]["name"] for p in sim.api.list("Pod", "default")["items"])


async def test_pods_come_up_in_order_with_their_own_claims(sim):
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(STS)
    for i in range(3):
        await sim.wait_for("Pod", f"redis-{i}", is_true("Ready"))
    for i in (1, 2):  # an ordinal is created only once the one before is Ready
        before = sim.api.get("Pod", f"redis-{i - 1}", "default")
        ready_at = next(c["lastTransitionTime"] for c in before["status"]["conditions"]
                        if c["type"] == "Ready")
        assert sim.api.get("Pod", f"redis-{i}", "default")["metadata"][
            "creationTimestamp"] >= ready_at
    p1 = sim.api.get("Pod", "redis-1", "default")
    assert p1["spec"]["hostname"] == "redis-1" and p1["spec"]["subdomain"] == "redis"
    assert p1["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-redis-1"}} in \
        p1["spec"]["volumes"]
    claims = sorted(c["metadata"]["name"]
                    for c in sim.api.list("PersistentVolumeClaim", "default")["items"])
    assert claims == ["data-redis-0", "data-redis-1", "data-redis-2"]
    sts = await sim.wait_for("StatefulSet", "redis",
                             lambda s: (s.get("status") or {}).get("readyReplicas") == 3)
    assert sts["status"]["replicas"] == 3


async def test_a_deleted_pod_comes_back_with_the_same_name_and_claim(sim):
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(STS)
    await sim.wait_for("StatefulSet", "redis",
                       lambda s: (s.get("status") or {}).get("readyReplicas") == 3)
    old_uid = sim.api.get("Pod", "redis-1", "default")["metadata"]["uid"]
    await sim.client().delete("Pod", "redis-1", "default")
    back = await sim.wait_for("Pod", "redis-1", lambda p: p["metadata"]["uid"] != old_uid
                              and is_true("Ready")(p), timeout=120)
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-redis-1"}} in \
        back["spec"]["volumes"]


async def test_scale_down_removes_the_highest_ordinal_and_keeps_claims(sim):
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(STS)
    await sim.wait_for("StatefulSet", "redis",
                       lambda s: (s.get("status") or {}).get("readyReplicas") == 3)
    await sim.client().patch("StatefulSet", "redis", {"spec": {"replicas": 1}}, "default")
    await sim.wait_for("StatefulSet", "redis",
                       lambda s: (s.get("status") or {}).get("replicas") == 1, timeout=120)
    await sim.sleep(5)
    assert pod_names(sim) == ["redis-0"]
    assert len(sim.api.list("PersistentVolumeClaim", "default")["items"]) == 3


async def test_statefulset_without_selector_is_invalid(sim):
    bad = {**STS, "spec": {k: x for k, x in STS["spec"].items() if k != "selector"}}
    with pytest.raises(ApiError) as err:
        await sim.apply(bad)
    assert err.value.code == 422
    assert "spec.selector" in str(err.value)


@pytest.mark.parametrize("manifest", [
    {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"},
     "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
         "service": {"name": "s", "port": {"number": 80}}}}]}}]}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"},
     "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
    {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
     "metadata": {"name": "istio"}, "spec": {"controllerName": "istio.io/gateway-controller"}},
    {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "g"},
     "spec": {"gatewayClassName": "istio",
              "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}},
    {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
     "metadata": {"name": "r"}, "spec": {"parentRefs": [{"name": "g"}]}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "reader"},
     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
     "metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                             "kind": "ClusterRole", "name": "reader"},
     "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]},
])
async def test_helper_kinds_are_served(sim, manifest):
    created = await sim.apply(manifest)
    assert created["metadata"]["uid"]


@pytest.mark.parametrize("manifest,field", [
    ({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"},
      "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {
          "service": {"name": "s", "port": {"number": 80}}}}]}}]}},
     "spec.rules[0].http.paths[0].pathType"),
    ({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "g"},
      "spec": {"listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}},
     "spec.gatewayClassName"),
    ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
      "metadata": {"name": "rb"}, "roleRef": {"kind": "Secret", "name": "x"}}, "roleRef.kind"),
])
async def test_helper_kinds_are_validated(sim, manifest, field):
    with pytest.raises(ApiError) as err:
        await sim.apply(manifest)
    assert err.value.code == 422
    assert field in str(err.value)
