"""The csrsigning controller (`emu.kube.csrsigning`) and the world's cluster CA
(`emu.apiserver.cluster_ca`): an approved request of a built-in signer gets a certificate that
verifies against the CA ``kube-root-ca.crt`` publishes; a refused one a ``Failed`` condition with
kube's text."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import emu.kube.cluster as kc
from emu.apiserver.cluster_ca import cluster_ca
from emu.apiserver.errors import Invalid
from emu.kernel.clock import EPOCH
from emu.kube import csrsigning


def request_pem(cn: str, orgs: tuple[str, ...] = (), dns: tuple[str, ...] = ()) -> bytes:
    key = ec.derive_private_key(12345, ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def csr(name: str, pem: bytes, signer: str, usages: list[str], **spec: object) -> dict:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer,
                     "usages": usages, **spec}}


async def approve(sim, name: str) -> None:
    obj = await sim.get("CertificateSigningRequest", name)
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                     "reason": "KubectlApprove", "message": "ok"}]}
    await sim.client().update_status(obj)


async def world(sim):
    cluster = kc.install(sim, standard_cluster=True)
    await cluster.wait_ready()


def issued(obj: dict) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(obj["status"]["certificate"]))


async def test_an_approved_client_request_is_signed_by_the_ca_kube_root_ca_publishes(sim):
    await world(sim)
    client = sim.client()
    await client.create(csr("alice", request_pem("alice", ("devs",)),
                            csrsigning.KUBE_APISERVER_CLIENT,
                            ["digital signature", "client auth"], expirationSeconds=3600))
    await sim.sleep(1)
    assert "certificate" not in ((await sim.get("CertificateSigningRequest", "alice"))
                                 .get("status") or {})  # not approved yet: nothing signed
    start = sim.now
    await approve(sim, "alice")
    done = await sim.wait_for("CertificateSigningRequest", "alice",
                              lambda o: (o.get("status") or {}).get("certificate"), timeout=5)
    cert = issued(done)
    root = await sim.get("ConfigMap", "kube-root-ca.crt", namespace="default")
    ca = x509.load_pem_x509_certificate(root["data"]["ca.crt"].encode())
    cert.verify_directly_issued_by(ca)  # raises unless the CA's key signed it
    assert cert.subject.rfc4514_string() == "O=devs,CN=alice"
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # expirationSeconds on the virtual clock, backdated five minutes as kube does
    issued_at = cert.not_valid_after_utc - timedelta(seconds=3600)
    assert abs((issued_at - (EPOCH + timedelta(seconds=start))).total_seconds()) < 5
    assert cert.not_valid_before_utc == issued_at - timedelta(minutes=5)


async def test_expiration_below_ten_minutes_is_refused_and_the_default_is_a_year(sim):
    await world(sim)
    client = sim.client()
    with pytest.raises(Invalid, match="may not specify a duration less than 600 seconds"):
        await client.create(csr("short", request_pem("x"), csrsigning.KUBE_APISERVER_CLIENT,
                                ["client auth"], expirationSeconds=599))
    await client.create(csr("long", request_pem("x"), csrsigning.KUBE_APISERVER_CLIENT,
                            ["client auth"]))
    await approve(sim, "long")
    done = await sim.wait_for("CertificateSigningRequest", "long",
                              lambda o: (o.get("status") or {}).get("certificate"), timeout=5)
    cert = issued(done)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == \
        timedelta(days=365, minutes=5)


async def test_a_kubelet_serving_request_checked_by_its_signer(sim):
    await world(sim)
    client = sim.client()
    await client.create(csr("good", request_pem("system:node:n1", ("system:nodes",),
                                                ("n1.local",)),
                            csrsigning.KUBELET_SERVING,
                            ["digital signature", "server auth"]))
    await client.create(csr("bad-org", request_pem("system:node:n1", ("admins",), ("n1",)),
                            csrsigning.KUBELET_SERVING, ["digital signature", "server auth"]))
    await client.create(csr("bad-usage", request_pem("bob"), csrsigning.KUBE_APISERVER_CLIENT,
                            ["server auth"]))
    await client.create(csr("other-signer", request_pem("bob"), "example.com/mine",
                            ["client auth"]))
    for name in ("good", "bad-org", "bad-usage", "other-signer"):
        await approve(sim, name)
    good = await sim.wait_for("CertificateSigningRequest", "good",
                              lambda o: (o.get("status") or {}).get("certificate"), timeout=5)
    cert = issued(good)
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value \
        .get_values_for_type(x509.DNSName) == ["n1.local"]

    def failed(o: dict) -> dict | None:
        return next((c for c in (o.get("status") or {}).get("conditions") or ()
                     if c["type"] == "Failed"), None)

    bad = await sim.wait_for("CertificateSigningRequest", "bad-org", failed, timeout=5)
    cond = failed(bad)
    assert cond is not None and cond["reason"] == "SignerValidationFailure"
    assert cond["message"] == "subject organization is not system:nodes"
    assert "certificate" not in bad["status"]
    bad = await sim.wait_for("CertificateSigningRequest", "bad-usage", failed, timeout=5)
    assert failed(bad)["message"] == "invalid usage for client certificate: server auth"
    await sim.sleep(2)
    other = await sim.get("CertificateSigningRequest", "other-signer")
    assert "certificate" not in other["status"] and failed(other) is None


async def test_a_request_that_does_not_parse_fails(sim):
    await world(sim)
    await sim.client().create(csr("junk", b"not a pem block", csrsigning.KUBE_APISERVER_CLIENT,
                                  ["client auth"]))
    await approve(sim, "junk")
    done = await sim.wait_for("CertificateSigningRequest", "junk", lambda o: any(
        c["type"] == "Failed" for c in o["status"]["conditions"]), timeout=5)
    assert done["status"]["conditions"][-1]["message"] == \
        "PEM block type must be CERTIFICATE REQUEST"


async def test_legacy_unknown_cannot_be_asked_for_through_v1(sim):
    await world(sim)
    with pytest.raises(Invalid, match="the legacy signerName is not allowed via this API "
                                      "version"):
        await sim.client().create(csr("legacy", request_pem("x"),
                                      "kubernetes.io/legacy-unknown", ["client auth"]))


def test_the_cluster_ca_is_the_seeds_own_and_deterministic():
    one, again, other = cluster_ca(1), type(cluster_ca(1))(1), cluster_ca(2)
    assert one.cert_pem == again.cert_pem  # made again from the seed: the same bytes
    assert one.cert_pem != other.cert_pem
    cert = one.cert
    assert cert.subject.rfc4514_string() == "CN=kubernetes" and cert.subject == cert.issuer
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(cert)


async def test_kubectls_approve_then_get_over_http_gives_a_certificate_the_root_ca_verifies(sim):
    import httpx

    from emu.http.transport import BASE_URL, httpx_transport

    await world(sim)
    path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
    async with httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim)) as c:
        body = csr("bob", request_pem("bob"), csrsigning.KUBE_APISERVER_CLIENT,
                   ["client auth"], expirationSeconds=86400)
        created = (await c.post(path, json=body)).json()
        approved = {**created, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "KubectlApprove",
             "message": "This CSR was approved by kubectl certificate approve."}]}}
        r = await c.put(f"{path}/bob/approval", json=approved)
        assert r.status_code == 200, r.text
        await sim.wait_for("CertificateSigningRequest", "bob",
                           lambda o: (o.get("status") or {}).get("certificate"), timeout=5)
        got = (await c.get(f"{path}/bob")).json()
        root = (await c.get("/api/v1/namespaces/default/configmaps/kube-root-ca.crt")).json()
    cert = issued(got)
    ca = x509.load_pem_x509_certificate(root["data"]["ca.crt"].encode())
    cert.verify_directly_issued_by(ca)
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() == 86400 + 300
