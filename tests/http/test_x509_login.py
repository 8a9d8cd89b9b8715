"""x509 client-certificate login (`emu.http.tls`): a certificate the world's cluster CA signed
logs in as its CN in its O groups, RBAC applies to that user, and it stops logging in when its
dates say so on the world's clock; ``emu serve --tls`` serves HTTPS with kind's admin certificate
in its kubeconfig, and a certificate a CertificateSigningRequest got logs in with real kubectl."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from serving import Served, require, start_serve

import emu.kube.cluster as kc
from emu.http.gateway import Gateway
from emu.http.tls import ClientIdentity, client_identity, serving_tls
from emu.http.wire import HttpRequest

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = orjson.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
PODS = "/api/v1/namespaces/default/pods"


def key_and_request(cn: str, *orgs: str) -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    req = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return key, req.public_bytes(serialization.Encoding.PEM)


def csr(name: str, pem: bytes, seconds: int) -> dict:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(),
                     "signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": ["digital signature", "client auth"],
                     "expirationSeconds": seconds}}


def peer(cert: x509.Certificate) -> dict:
    """What ``SSLSocket.getpeercert()`` answers for ``cert`` (OpenSSL's date format)."""
    names = {"CN": "commonName", "O": "organizationName"}
    subject = tuple(((names[a.rfc4514_attribute_name], a.value),) for a in cert.subject)
    return {"subject": subject,
            "notBefore": cert.not_valid_before_utc.strftime("%b %d %H:%M:%S %Y GMT"),
            "notAfter": cert.not_valid_after_utc.strftime("%b %d %H:%M:%S %Y GMT")}


def request(method: str, path: str, cert: dict | None, body: bytes = b"") -> HttpRequest:
    req = HttpRequest(method, path, (), {"content-type": "application/json",
                                         "user-agent": "kubectl/v1.32.4"}, body)
    req.peer = cert
    return req


def test_an_identity_is_the_cn_and_the_os_within_the_dates():
    now = datetime(2026, 6, 1, tzinfo=UTC)
    cert = {"subject": ((("organizationName", "devs"),), (("organizationName", "ops"),),
                        (("commonName", "alice"),)),
            "notBefore": "May 31 00:00:00 2026 GMT", "notAfter": "Jun  2 00:00:00 2026 GMT"}
    assert client_identity(cert, now) == ClientIdentity("alice", ("devs", "ops"))
    late = client_identity(cert, now + timedelta(days=2))
    assert isinstance(late, str) and "certificate has expired or is not yet valid" in late
    assert isinstance(client_identity(cert, now - timedelta(days=2)), str)
    nameless = {**cert, "subject": ((("organizationName", "devs"),),)}
    assert client_identity(nameless, now) == "x509: the certificate's subject has no common name"


async def test_a_signed_certificate_logs_in_rbac_applies_and_it_expires(sim):
    cluster = kc.install(sim, standard_cluster=True)
    await cluster.wait_ready()
    sim.rbac.enable()
    client = sim.client()
    _, pem = key_and_request("alice", "devs")
    await client.create(csr("alice", pem, 600))
    obj = await sim.get("CertificateSigningRequest", "alice")
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                     "reason": "KubectlApprove", "message": "ok"}]}
    await client.update_status(obj)
    done = await sim.wait_for("CertificateSigningRequest", "alice",
                              lambda o: (o.get("status") or {}).get("certificate"), timeout=5)
    alice = peer(x509.load_pem_x509_certificate(base64.b64decode(done["status"]["certificate"])))
    gw = Gateway(sim, client_certs=True)

    who = await gw.handle(request("POST", WHOAMI, alice, REVIEW))
    assert who.status == 201
    assert orjson.loads(who.body)["status"]["userInfo"] == {
        "username": "alice", "groups": ["devs", "system:authenticated"]}
    # RBAC is the user's: nothing until a binding names its group
    assert (await gw.handle(request("GET", PODS, alice))).status == 403
    await client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                         "metadata": {"name": "read-pods", "namespace": "default"},
                         "rules": [{"apiGroups": [""], "resources": ["pods"],
                                    "verbs": ["list"]}]})
    await client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "devs-read-pods", "namespace": "default"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                     "name": "read-pods"},
                         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                       "name": "devs"}]})
    assert (await gw.handle(request("GET", PODS, alice))).status == 200
    # no credential at all: 401, as kube-apiserver answers an anonymous request it refuses
    assert (await gw.handle(request("GET", PODS, None))).status == 401
    # expirationSeconds counts on the virtual clock
    await sim.sleep(601)
    assert (await gw.handle(request("GET", PODS, alice))).status == 401


@pytest.fixture(scope="module")
def tls_served(tmp_path_factory: pytest.TempPathFactory):
    require(shutil.which("kubectl") is not None, "kubectl")
    srv = start_serve(tmp_path_factory.mktemp("tls"), "--standard-cluster", "--tls",
                      "--speed", "5")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.external
def test_emu_serve_tls_logs_kubectl_in_as_kinds_admin(tls_served: Served):
    who = json.loads(tls_served.kubectl("auth", "whoami", "-o", "json").stdout)
    assert who["status"]["userInfo"] == {
        "username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
    config = yaml.safe_load(tls_served.kubeconfig.read_text())
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
    root = json.loads(tls_served.kubectl("get", "configmap", "kube-root-ca.crt", "-o",
                                         "json").stdout)
    assert root["data"]["ca.crt"].encode() == ca  # one CA, as in kind
    # TLS lets a client without a certificate in; the API server refuses it
    context = ssl.create_default_context(cadata=ca.decode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(tls_served.url + PODS, context=context, timeout=30)
    assert refused.value.code == 401


@pytest.mark.external
def test_a_certificate_from_a_csr_logs_kubectl_in(tls_served: Served, tmp_path: Path):
    key, pem = key_and_request("bob", "qa")
    tls_served.kubectl("apply", "-f", "-", stdin=json.dumps(csr("bob", pem, 3600)))
    tls_served.kubectl("certificate", "approve", "bob")
    tls_served.kubectl("wait", "csr/bob", "--for=jsonpath={.status.certificate}",
                       "--timeout=60s")
    cert = json.loads(tls_served.kubectl("get", "csr", "bob", "-o", "json").stdout)[
        "status"]["certificate"]
    config = yaml.safe_load(tls_served.kubeconfig.read_text())
    config["users"][0]["user"] = {
        "client-certificate-data": cert,
        "client-key-data": base64.b64encode(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())).decode()}
    bob = tmp_path / "bob.kubeconfig"
    bob.write_text(yaml.safe_dump(config))
    who = tls_served.kubectl("--kubeconfig", str(bob), "auth", "whoami", "-o", "json")
    assert json.loads(who.stdout)["status"]["userInfo"] == {
        "username": "bob", "groups": ["qa", "system:authenticated"]}


def test_the_serving_certificate_is_the_cluster_cas():
    certs = serving_tls("127.0.0.1", seed=3)
    ca = x509.load_pem_x509_certificate(certs.ca_pem)
    for pem in (certs.cert_pem, certs.admin_cert_pem):
        x509.load_pem_x509_certificate(pem).verify_directly_issued_by(ca)
    admin = x509.load_pem_x509_certificate(certs.admin_cert_pem)
    assert admin.subject.rfc4514_string() == "CN=kubernetes-admin,O=system:masters"
    serving = x509.load_pem_x509_certificate(certs.cert_pem)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in names.get_values_for_type(x509.DNSName)
