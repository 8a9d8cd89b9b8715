"""HTTPS for ``emu serve --token`` and ``--tls``, with the world's cluster CA, as kind sets it up.

kubectl (client-go's clientcmd) sends credentials only over TLS, so a server that asks for any
must speak HTTPS. As in a kind cluster, one CA stands behind everything: the world's cluster CA
(`emu.apiserver.cluster_ca`, the one ``kube-root-ca.crt`` publishes and the csrsigning controller
signs with) signs the serving certificate (for ``127.0.0.1``, ``localhost``, ``kubernetes``,
``kubernetes.default.svc`` and the bound host) and kind's admin client certificate (``CN=kubernetes-
admin``, ``O=system:masters``), and the kubeconfig carries it as ``certificate-authority-data``.

The server asks every client for a certificate and accepts one the CA signed (x509 client
authentication, kube-apiserver's ``--client-ca-file``): kind's admin certificate, or one a
CertificateSigningRequest for ``kubernetes.io/kube-apiserver-client`` got in the world. OpenSSL
checks the chain but not the dates (`client_identity` checks those against the world's clock, as
kube-apiserver checks them against its own: a certificate issued with ``expirationSeconds``
expires on the virtual clock). A client without a certificate is not refused by TLS: it may
authenticate with a bearer token.
"""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from ..apiserver.cluster_ca import cluster_ca
from ..kernel.paced import real_now_as_virtual

#: OpenSSL's ``X509_V_FLAG_NO_CHECK_TIME``: verify the chain, leave the dates to the world's
#: clock (Python's ssl passes ``verify_flags`` to OpenSSL as they are).
_NO_CHECK_TIME = 0x200000
#: kubeadm's certificates (the serving one, the admin's): a year.
VALIDITY = 365 * 24 * 3600
#: kind's admin user and group (kubeadm's ``kubernetes-admin`` in ``system:masters``).
ADMIN_USER = "kubernetes-admin"
ADMIN_GROUP = "system:masters"


@attrs.frozen
class ServingTLS:
    """The PEMs ``emu serve`` needs: the CA, the serving certificate and key, and kind's admin
    client certificate and key (for the kubeconfig)."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    admin_cert_pem: bytes
    admin_key_pem: bytes

    def server_context(self, directory: Path) -> ssl.SSLContext:
        cert, key = directory / "serve.crt", directory / "serve.key"
        cert.write_bytes(self.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(self.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(cert), str(key))
        ctx.load_verify_locations(cadata=self.ca_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL  # a client may come with a token instead
        ctx.verify_flags |= _NO_CHECK_TIME
        return ctx


def _key_and_csr(common_name: str, organizations: tuple[str, ...] = (),
                 sans: list[Any] | None = None) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(name)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(key, hashes.SHA256())


def _key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def serving_tls(host: str, seed: int) -> ServingTLS:
    """Certificates for a server bound to ``host`` in a world of ``seed``, valid from now (the
    machine's clock: clients check the serving certificate against theirs)."""
    from cryptography import x509

    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"), x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"), x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        addr = ipaddress.ip_address(host)
        if str(addr) != "127.0.0.1":
            sans.append(x509.IPAddress(addr))
    except ValueError:
        sans.append(x509.DNSName(host))
    ca = cluster_ca(seed)
    now = real_now_as_virtual()
    key, csr = _key_and_csr("kube-apiserver", sans=sans)
    cert = ca.sign(csr, ["digital signature", "key encipherment", "server auth"], VALIDITY, now)
    admin_key, admin_csr = _key_and_csr(ADMIN_USER, (ADMIN_GROUP,))
    admin = ca.sign(admin_csr, ["digital signature", "key encipherment", "client auth"],
                    VALIDITY, now)
    return ServingTLS(ca.cert_pem.encode(), cert.encode(), _key_pem(key), admin.encode(),
                      _key_pem(admin_key))


@attrs.frozen
class ClientIdentity:
    """Who a verified client certificate says its holder is (kube's x509 authenticator:
    ``CommonNameUserConversion``): the user is the subject's CN, its groups the O values."""

    user: str
    groups: tuple[str, ...]


def client_identity(peer: dict[str, Any], now: datetime) -> ClientIdentity | str:
    """The identity of ``peer`` (``SSLSocket.getpeercert()`` of a certificate the CA signed), or
    why it does not authenticate at ``now`` (the world's clock): kube's x509 authenticator
    refuses a certificate outside its dates and one without a common name."""
    try:
        not_before = datetime.fromtimestamp(ssl.cert_time_to_seconds(peer["notBefore"]), UTC)
        not_after = datetime.fromtimestamp(ssl.cert_time_to_seconds(peer["notAfter"]), UTC)
    except (KeyError, ValueError):
        return "x509: the certificate has no validity period"
    if now < not_before or now > not_after:
        return (f"x509: certificate has expired or is not yet valid: current time "
                f"{now:%Y-%m-%dT%H:%M:%SZ} is outside {not_before:%Y-%m-%dT%H:%M:%SZ} .. "
                f"{not_after:%Y-%m-%dT%H:%M:%SZ}")
    user = ""
    groups: list[str] = []
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName" and value not in groups:
                groups.append(value)
    if not user:
        return "x509: the certificate's subject has no common name"
    return ClientIdentity(user, tuple(groups))
