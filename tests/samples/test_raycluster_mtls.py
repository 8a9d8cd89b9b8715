"""The mTLS controller and checkMTLSSecretsReady, ported from KubeRay's Go tests
(raycluster_mtls_controller_test.go: TestMTLSController_*, TestCertificateNeedsUpdate,
TestCheckMTLSSecretsReady_*), on the emulated API server with cert-manager's CRDs served and
no cert-manager running (the tests play cert-manager, as the Go tests do)."""

from __future__ import annotations

import pytest

from emu.apiserver.kinds import cert_manager_crds
from emu.kuberay.raycluster import RayClusterReconciler, RayClusterReconcilerOptions
from emu.kuberay.raycluster_mtls import (
    MTLS_DEFAULT_REQUEUE,
    MTLS_PERIODIC_CHECK,
    RayClusterMTLSController,
    cert_manager_api_available,
    certificate_needs_update,
)
from emu.kuberay.utils.features import FeatureGates
from emu.runtime import Request, Result

GATES = FeatureGates({"RayClusterMTLS": True})
NS = "default"


def _cluster(name: str, tls: bool | None = True) -> dict:
    spec: dict = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:2.55.1"}]}}}}
    if tls is not None:
        spec["tlsOptions"] = {"enabled": tls}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


async def _world(sim, cluster: dict, *pods: dict) -> tuple[RayClusterMTLSController, Request]:
    client = sim.client("test")
    for crd in cert_manager_crds():
        await client.create(crd)
    await client.create(cluster)
    for pod in pods:
        await _create_pod(client, pod)
    controller = RayClusterMTLSController(sim.client("kuberay-operator"), gates=GATES)
    return controller, Request(NS, cluster["metadata"]["name"])


async def _create_pod(client, pod: dict) -> None:
    created = await client.create(pod)  # create drops a Pod's status, as kube-apiserver does
    await client.update_status({**created, "status": pod["status"]})


def _pod(name: str, cluster: str, node_type: str, ip: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": {"podIP": ip}}


async def _mark_ready(sim, cluster: str) -> None:
    """``markMTLSCertificatesReady``: cert-manager's Ready=True at the current generation."""
    client = sim.client("cert-manager")
    for name in (f"ray-head-cert-{cluster}", f"ray-worker-cert-{cluster}"):
        cert = await client.get("Certificate", name, NS)
        cert["status"] = {"conditions": [{"type": "Ready", "status": "True",
                                          "observedGeneration": cert["metadata"]["generation"]}]}
        await client.update_status(cert)


async def _names(sim, kind: str) -> list[str]:
    return [o["metadata"]["name"] for o in await sim.client().list(kind, NS)]


async def test_mtls_controller_auto_generate_creates_full_pki(sim):
    controller, req = await _world(sim, _cluster("test-cluster"))
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_DEFAULT_REQUEUE)
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_DEFAULT_REQUEUE)
    await _mark_ready(sim, "test-cluster")
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_PERIODIC_CHECK)
    client = sim.client()
    issuer = await client.get("Issuer", "ray-selfsigned-issuer-test-cluster", NS)
    assert issuer["spec"] == {"selfSigned": {}}
    ca = await client.get("Certificate", "ray-ca-certificate-test-cluster", NS)
    uid = (await client.get("RayCluster", "test-cluster", NS))["metadata"]["uid"]
    assert (ca["spec"]["isCA"], ca["spec"]["privateKey"]["size"], ca["spec"]["secretName"]) == (
        True, 4096, f"test-cluster-ca-secret-{uid[:8]}")
    ca_issuer = await client.get("Issuer", "ray-ca-issuer-test-cluster", NS)
    assert ca_issuer["spec"] == {"ca": {"secretName": f"test-cluster-ca-secret-{uid[:8]}"}}
    head = await client.get("Certificate", "ray-head-cert-test-cluster", NS)
    assert head["spec"]["dnsNames"] == ["localhost",
                                        "test-cluster-head-svc.default.svc.cluster.local"]
    assert head["spec"]["ipAddresses"] == ["127.0.0.1"]
    worker = await client.get("Certificate", "ray-worker-cert-test-cluster", NS)
    assert (worker["spec"]["dnsNames"], worker["spec"]["ipAddresses"]) == (["localhost"],
                                                                          ["127.0.0.1"])
    for obj in (issuer, ca, ca_issuer, head, worker):
        assert obj["metadata"]["labels"]["ray.io/cluster"] == "test-cluster"
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"


async def test_mtls_controller_auto_generate_idempotent(sim):
    controller, req = await _world(sim, _cluster("test-cluster"))
    await controller.reconcile(req)
    await _mark_ready(sim, "test-cluster")
    await controller.reconcile(req)
    await controller.reconcile(req)
    assert len(await _names(sim, "Issuer")) == 2
    assert len(await _names(sim, "Certificate")) == 3


async def test_mtls_controller_auto_generate_updates_ip_addresses(sim):
    head = _pod("test-cluster-head-0", "test-cluster", "head", "10.244.0.5")
    controller, req = await _world(sim, _cluster("test-cluster"), head)
    await controller.reconcile(req)
    await _mark_ready(sim, "test-cluster")
    await controller.reconcile(req)
    client = sim.client()
    cert = await client.get("Certificate", "ray-head-cert-test-cluster", NS)
    assert cert["spec"]["ipAddresses"] == ["10.244.0.5", "127.0.0.1"]
    worker = _pod("test-cluster-worker-0", "test-cluster", "worker", "10.244.0.6")
    worker["metadata"]["finalizers"] = ["test/hold"]
    await _create_pod(client, worker)
    await controller.reconcile(req)
    cert = await client.get("Certificate", "ray-head-cert-test-cluster", NS)
    assert "10.244.0.6" not in cert["spec"]["ipAddresses"]
    wcert = await client.get("Certificate", "ray-worker-cert-test-cluster", NS)
    assert wcert["spec"]["ipAddresses"] == ["10.244.0.6", "127.0.0.1"]
    assert wcert["metadata"]["generation"] == 2  # a new generation: cert-manager reissues
    await client.delete("Pod", "test-cluster-worker-0", NS)  # terminating, held by finalizer
    await controller.reconcile(req)
    wcert = await client.get("Certificate", "ray-worker-cert-test-cluster", NS)
    assert wcert["spec"]["ipAddresses"] == ["127.0.0.1"]


@pytest.mark.parametrize("tls", [None, False])
async def test_mtls_controller_disabled_is_no_op(sim, tls):
    controller, req = await _world(sim, _cluster("disabled-cluster", tls))
    assert await controller.reconcile(req) == Result()
    assert await _names(sim, "Issuer") == [] and await _names(sim, "Certificate") == []


async def test_mtls_controller_cert_readiness_blocks_reconciliation(sim):
    controller, req = await _world(sim, _cluster("ready-cluster"))
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_DEFAULT_REQUEUE)
    client = sim.client()
    head = await client.get("Certificate", "ray-head-cert-ready-cluster", NS)
    head["status"] = {"conditions": [{"type": "Ready", "status": "True",
                                      "observedGeneration": 1}]}
    await client.update_status(head)
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_DEFAULT_REQUEUE)
    await _mark_ready(sim, "ready-cluster")
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_PERIODIC_CHECK)


async def test_mtls_controller_stale_ready_condition_does_not_count(sim):
    controller, req = await _world(sim, _cluster("stale"))
    await controller.reconcile(req)
    client = sim.client()
    for name in ("ray-head-cert-stale", "ray-worker-cert-stale"):
        cert = await client.get("Certificate", name, NS)
        cert["status"] = {"conditions": [{"type": "Ready", "status": "True",
                                          "observedGeneration": 0}]}
        await client.update_status(cert)
    assert await controller.reconcile(req) == Result(requeue_after=MTLS_DEFAULT_REQUEUE)


async def test_mtls_controller_deletion_and_missing_cluster_are_no_ops(sim):
    cluster = _cluster("del-noop")
    cluster["metadata"]["finalizers"] = ["some-other-finalizer"]
    controller, req = await _world(sim, cluster)
    await sim.client().delete("RayCluster", "del-noop", NS)
    assert await controller.reconcile(req) == Result()
    assert await controller.reconcile(Request(NS, "nope")) == Result()
    assert await _names(sim, "Certificate") == []


async def test_mtls_controller_secret_gets_owner_ref_to_certificate(sim):
    controller, req = await _world(sim, _cluster("owner-ref-test"))
    await controller.reconcile(req)
    client = sim.client()
    await client.create({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                         "metadata": {"name": "ray-head-secret-owner-ref-test", "namespace": NS},
                         "stringData": {"tls.crt": "c", "tls.key": "k", "ca.crt": "a"}})
    await controller.reconcile(req)
    await controller.reconcile(req)  # idempotent: still one reference
    secret = await client.get("Secret", "ray-head-secret-owner-ref-test", NS)
    cert = await client.get("Certificate", "ray-head-cert-owner-ref-test", NS)
    assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in
            secret["metadata"]["ownerReferences"]] == [
        ("Certificate", "ray-head-cert-owner-ref-test", cert["metadata"]["uid"], None)]


def test_certificate_needs_update():
    base = {"dnsNames": ["localhost", "svc"], "ipAddresses": ["127.0.0.1"]}
    assert not certificate_needs_update(base, {"dnsNames": ["svc", "localhost"],
                                               "ipAddresses": ["127.0.0.1"]})
    assert certificate_needs_update(base, {**base, "ipAddresses": ["127.0.0.1", "10.0.0.1"]})
    assert certificate_needs_update(base, {**base, "dnsNames": ["localhost"]})
    assert not certificate_needs_update({}, {"dnsNames": [], "ipAddresses": []})


async def _check(sim, name: str) -> str | None:
    reconciler = RayClusterReconciler(sim.client("kuberay-operator"),
                                      RayClusterReconcilerOptions(gates=GATES,
                                                                  cert_manager_available=True))
    cluster = await sim.client().get("RayCluster", name, NS)
    try:
        await reconciler.check_mtls_secrets_ready(cluster)
    except RuntimeError as err:
        return str(err)
    return None


async def _secret(sim, name: str, keys: tuple[str, ...] = ("tls.crt", "tls.key", "ca.crt")):
    await sim.client().create({"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": name, "namespace": NS},
                               "stringData": {k: "x" for k in keys}})


async def test_check_mtls_secrets_ready_auto_generate_secrets_present(sim):
    controller, req = await _world(sim, _cluster("c"))
    await controller.reconcile(req)
    await _mark_ready(sim, "c")
    await _secret(sim, "ray-head-secret-c")
    await _secret(sim, "ray-worker-secret-c")
    assert await _check(sim, "c") is None


async def test_check_mtls_secrets_ready_auto_generate_cert_not_ready(sim):
    controller, req = await _world(sim, _cluster("c"))
    await controller.reconcile(req)
    assert await _check(sim, "c") == ("mTLS secrets not ready: certificate ray-head-cert-c is "
                                      "not ready at current generation 1")


async def test_check_mtls_secrets_ready_auto_generate_secret_missing_or_missing_key(sim):
    controller, req = await _world(sim, _cluster("c"))
    await controller.reconcile(req)
    await _mark_ready(sim, "c")
    await _secret(sim, "ray-head-secret-c")
    message = await _check(sim, "c")
    assert message is not None and message.startswith(
        "mTLS secrets not ready: secret ray-worker-secret-c not found: ")
    await _secret(sim, "ray-worker-secret-c", ("tls.crt", "tls.key"))
    assert await _check(sim, "c") == ("mTLS secrets not ready: secret ray-worker-secret-c "
                                      "missing required key ca.crt")


async def test_cert_manager_api_is_available_only_once_its_crds_are_served(sim):
    client = sim.client("kuberay-operator")
    assert not await cert_manager_api_available(client)
    for crd in cert_manager_crds():
        await sim.client().create(crd)
    assert await cert_manager_api_available(client)
