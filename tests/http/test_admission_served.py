"""ResourceQuota and LimitRange admission over HTTP: the 403 body kube-apiserver sends, and the
quota's status as `kubectl describe quota` reads it."""

from __future__ import annotations

import httpx

from emu.http.transport import BASE_URL, httpx_transport

PODS = "/api/v1/namespaces/default/pods"


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim))


def pod(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


async def test_a_create_over_quota_is_kubes_403(sim):
    async with client(sim) as c:
        r = await c.post("/api/v1/namespaces/default/resourcequotas", json={
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
            "spec": {"hard": {"requests.cpu": "1", "pods": "5"}}})
        assert r.status_code == 201, r.text
        assert (await c.post(PODS, json=pod("a", "600m"))).status_code == 201
        r = await c.post(PODS, json=pod("b", "500m"))
        assert r.status_code == 403
        assert r.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'pods "b" is forbidden: exceeded quota: compute, requested: '
                       'requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1',
            "reason": "Forbidden", "details": {"name": "b", "kind": "pods"}, "code": 403}
        q = (await c.get("/api/v1/namespaces/default/resourcequotas/compute")).json()
        assert q["status"] == {"hard": {"requests.cpu": "1", "pods": "5"},
                               "used": {"requests.cpu": "600m", "pods": "1"}}


async def test_a_limit_range_default_is_on_the_served_pod(sim):
    async with client(sim) as c:
        r = await c.post("/api/v1/namespaces/default/limitranges", json={
            "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "64Mi"},
                                 "max": {"cpu": "2"}}]}})
        assert r.status_code == 201, r.text
        r = await c.post(PODS, json=pod("a", "1"))
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["containers"][0]["resources"] == {
            "requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "2"}}
        r = await c.post(PODS, json={**pod("b", "1"), "spec": {"containers": [{
            "name": "c", "image": "i", "resources": {"limits": {"cpu": "3"}}}]}})
        assert r.status_code == 403
        assert r.json()["message"] == ('pods "b" is forbidden: maximum cpu usage per Container '
                                       'is 2, but limit is 3')


async def test_eviction_over_http_honours_the_budget(sim):
    async with client(sim) as c:
        for name in ("a", "b"):
            body = {**pod(name, "100m"), "metadata": {"name": name, "labels": {"app": "w"}}}
            body["spec"]["nodeName"] = "node-1"
            assert (await c.post(PODS, json=body)).status_code == 201
            st = {"status": {"phase": "Running",
                             "conditions": [{"type": "Ready", "status": "True"}]}}
            r = await c.patch(f"{PODS}/{name}/status", json=st,
                              headers={"content-type": "application/merge-patch+json"})
            assert r.status_code == 200, r.text
        r = await c.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets", json={
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "w"}}}})
        assert r.status_code == 201, r.text
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}}
        r = await c.post(f"{PODS}/a/eviction", json=eviction)
        assert (r.status_code, r.json()["status"]) == (201, "Success")
        r = await c.post(f"{PODS}/b/eviction", json={**eviction, "metadata": {"name": "b"}})
        assert r.status_code == 429
        assert r.json()["message"] == ("Cannot evict pod as it would violate the pod's "
                                       "disruption budget.")
        assert r.json()["details"]["causes"][0]["reason"] == "DisruptionBudget"


async def test_a_webhook_that_is_down_is_kubes_500_over_http(sim):
    hook = {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "policy"},
            "webhooks": [{"name": "pods.policy.example.com", "sideEffects": "None",
                          "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
                          "clientConfig": {"service": {"namespace": "policy", "name": "svc"}},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                     "apiVersions": ["v1"], "resources": ["pods"]}]}]}
    async with client(sim) as c:
        r = await c.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                         json=hook)
        assert r.status_code == 201, r.text
        r = await c.post(PODS, json=pod("a", "1"))
        why = ('failed calling webhook "pods.policy.example.com": failed to call webhook: Post '
               '"https://svc.policy.svc:443?timeout=10s": service "svc" not found')
        assert r.status_code == 500
        assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": f"Internal error occurred: {why}",
                            "reason": "InternalError", "details": {"causes": [{"message": why}]},
                            "code": 500}
        sim.api.webhooks.register("policy", "svc", lambda review: {"allowed": True})
        assert (await c.post(PODS, json=pod("a", "1"))).status_code == 201
