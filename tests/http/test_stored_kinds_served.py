"""The stored-only built-in kinds over HTTP: in discovery with kube's scope, short names and
categories, and in Tables with kube's printer columns (what ``kubectl get pdb,hpa,sc`` needs)."""

from __future__ import annotations

import httpx

from emu.http.discovery import AGGREGATED
from emu.http.transport import BASE_URL, httpx_transport

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim))


async def test_discovery_lists_them_with_kubes_scope_and_names(sim):
    async with client(sim) as c:
        groups = {g["name"]: g for g in (await c.get("/apis")).json()["groups"]}
        for name in ("policy", "autoscaling", "storage.k8s.io", "admissionregistration.k8s.io",
                     "scheduling.k8s.io", "certificates.k8s.io", "apiregistration.k8s.io"):
            assert name in groups, name
        assert groups["autoscaling"]["preferredVersion"]["version"] == "v2"
        storage = {r["name"]: r for r in (await c.get("/apis/storage.k8s.io/v1")).json()[
            "resources"]}
        assert storage["storageclasses"]["shortNames"] == ["sc"]
        assert not storage["storageclasses"]["namespaced"]
        assert storage["csistoragecapacities"]["namespaced"]
        assert "volumeattachments/status" in storage
        core = {r["name"]: r for r in (await c.get("/api/v1")).json()["resources"]}
        assert core["resourcequotas"]["shortNames"] == ["quota"]
        assert core["limitranges"]["shortNames"] == ["limits"]
        agg = (await c.get("/apis", headers={"accept": AGGREGATED})).json()
        found = {(item["metadata"]["name"], v["version"], r["resource"]): r
                 for item in agg["items"] for v in item["versions"] for r in v["resources"]}
        hpa = found[("autoscaling", "v2", "horizontalpodautoscalers")]
        assert (hpa["scope"], hpa["shortNames"], hpa["categories"]) == (
            "Namespaced", ["hpa"], ["all"])
        pdb = found[("policy", "v1", "poddisruptionbudgets")]
        assert (pdb["scope"], pdb["shortNames"]) == ("Namespaced", ["pdb"])
        hooks = found[("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")]
        assert (hooks["scope"], hooks["categories"]) == ("Cluster", ["api-extensions"])


async def test_pdb_and_hpa_print_kubes_columns(sim):
    async with client(sim) as c:
        pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
        r = await c.post(pdbs, json={"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                     "metadata": {"name": "p"}, "spec": {
                                         "maxUnavailable": "25%",
                                         "selector": {"matchLabels": {"a": "b"}}}})
        assert r.status_code == 201, r.text
        table = (await c.get(pdbs, headers={"accept": TABLE})).json()
        assert [col["name"] for col in table["columnDefinitions"]] == [
            "Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
        assert table["rows"][0]["cells"][:4] == ["p", "N/A", "25%", 0]
        hpas = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
        r = await c.post(hpas, json={"apiVersion": "autoscaling/v2",
                                     "kind": "HorizontalPodAutoscaler",
                                     "metadata": {"name": "h"}, "spec": {
                                         "scaleTargetRef": {"apiVersion": "apps/v1",
                                                            "kind": "Deployment", "name": "d"},
                                         "maxReplicas": 4}})
        assert r.status_code == 201, r.text
        table = (await c.get(hpas, headers={"accept": TABLE})).json()
        assert [col["name"] for col in table["columnDefinitions"]] == [
            "Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"]
        assert table["rows"][0]["cells"][:6] == [
            "h", "Deployment/d", "cpu: <unknown>/80%", 1, 4, 0]


CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def csr(name: str) -> dict:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": "LS0t", "signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": ["client auth"]}}


async def test_a_csr_is_approved_through_its_approval_subresource(sim):
    async with client(sim) as c:
        created = (await c.post(CSRS, json=csr("me"))).json()
        sent = {**created, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "KubectlApprove",
             "message": "This CSR was approved by kubectl certificate approve."}]}}
        r = await c.put(f"{CSRS}/me/approval", json=sent)
        assert r.status_code == 200, r.text
        cond = r.json()["status"]["conditions"][0]
        assert (cond["type"], cond["reason"]) == ("Approved", "KubectlApprove")
        assert cond["lastUpdateTime"] == cond["lastTransitionTime"]
        assert r.json()["spec"] == created["spec"]
        # an approval may not also deny, nor drop the Approved condition
        both = {**r.json(), "status": {"conditions": [
            {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}}
        r2 = await c.put(f"{CSRS}/me/approval", json=both)
        assert r2.status_code == 422
        assert "Approved and Denied conditions are mutually exclusive" in r2.json()["message"]
        table = (await c.get(CSRS, headers={"accept": TABLE})).json()
        assert table["rows"][0]["cells"][-1] == "Approved"
        disc = {r["name"] for r in (await c.get("/apis/certificates.k8s.io/v1")).json()[
            "resources"]}
        assert {"certificatesigningrequests/approval",
                "certificatesigningrequests/status"} <= disc
