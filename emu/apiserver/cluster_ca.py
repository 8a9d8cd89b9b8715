"""The world's cluster CA: what ``kube-root-ca.crt`` publishes and what kube-controller-manager's
csrsigning controller (`emu.kube.csrsigning`) signs approved CertificateSigningRequests with.

A kubeadm cluster's CA (``/etc/kubernetes/pki/ca.crt``, ``CN=kubernetes``) is made once at
``kubeadm init`` from the operating system's randomness. Here it is derived from the world's
seed, as the ServiceAccount signing key is (`emu.apiserver.tokens.signing_key`): an ECDSA P-256
key whose scalar is a SHA-256 of the seed, a self-signed certificate valid from the virtual
clock's epoch for ten years, and deterministic ECDSA signatures (RFC 6979), so the same seed
gives the same certificate bytes and every signed certificate is the same on a rerun. Anyone
who knows the seed can sign as this CA: it is an emulator's CA, never a secret.

`ClusterCA.sign` ports ``authority.CertificateAuthority.Sign`` with the csrsigning controller's
``PermissiveSigningPolicy`` (pkg/controller/certificates/authority): the request's subject,
public key and subject alternative names, the requested usages as key usages and extended key
usages, ``basicConstraints CA:FALSE``, the CA's key id as authority key id, a serial drawn from
the request (deterministic, where kube draws 128 random bits), ``notBefore`` five minutes before
now (backdated) and ``notAfter`` the TTL after now, capped at the CA's own ``notAfter``.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import timedelta
from typing import TYPE_CHECKING

from ..kernel.clock import EPOCH

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey

#: P-256's group order: a private scalar is in [1, n-1].
_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
#: How long the CA is valid from the epoch (kubeadm's CA: ten years).
CA_VALIDITY = timedelta(days=3650)
#: ``PermissiveSigningPolicy.Backdate`` in the csrsigning controller.
BACKDATE = timedelta(minutes=5)
#: kube-controller-manager's ``--cluster-signing-duration`` default: a year.
DEFAULT_SIGNING_DURATION = 365 * 24 * 3600


class ClusterCA:
    """One world's CA: its key, certificate and PEM (``cert_pem``)."""

    def __init__(self, seed: int) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        digest = hashlib.sha256(f"{seed}:cluster-ca-key".encode()).digest()
        self.key: EllipticCurvePrivateKey = ec.derive_private_key(
            int.from_bytes(digest, "big") % (_ORDER - 1) + 1, ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
        public = self.key.public_key()
        self.key_id = x509.SubjectKeyIdentifier.from_public_key(public)
        serial = int.from_bytes(hashlib.sha256(f"{seed}:cluster-ca-serial".encode()).digest()[:16],
                                "big") >> 1
        self.cert: x509.Certificate = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(public)
            .serial_number(serial or 1)
            .not_valid_before(EPOCH).not_valid_after(EPOCH + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=True,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(self.key_id, critical=False)
            .sign(self.key, hashes.SHA256(), ecdsa_deterministic=True))
        self.cert_pem: str = self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def sign(self, request: x509.CertificateSigningRequest, usages: list[str], ttl: float,
             now: float) -> str:
        """A certificate for ``request`` (checked by the caller), valid for ``ttl`` seconds
        from ``now`` (virtual seconds), as PEM."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        start = EPOCH + timedelta(seconds=now)
        end = min(start + timedelta(seconds=ttl), self.cert.not_valid_after_utc)
        serial = int.from_bytes(hashlib.sha256(
            request.public_bytes(serialization.Encoding.DER)
            + f"{now}".encode()).digest()[:16], "big") >> 1
        builder = (x509.CertificateBuilder().subject_name(request.subject)
                   .issuer_name(self.cert.subject).public_key(request.public_key())
                   .serial_number(serial or 1)
                   .not_valid_before(start - BACKDATE).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
                       self.key_id), critical=False))
        key_usage, extended = key_usages(usages)
        if key_usage is not None:
            builder = builder.add_extension(key_usage, critical=True)
        if extended:
            builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
        try:
            sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            pass
        else:
            builder = builder.add_extension(sans.value, critical=False)
        cert = builder.sign(self.key, hashes.SHA256(), ecdsa_deterministic=True)
        return cert.public_bytes(serialization.Encoding.PEM).decode()


#: ``keyUsageDict`` / ``extKeyUsageDict`` of the authority package: a usage's x509 meaning.
_KEY_USAGES = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment",
    "cert sign": "key_cert_sign", "crl sign": "crl_sign", "encipher only": "encipher_only",
    "decipher only": "decipher_only",
}
_EXT_USAGES = {
    "any": "ANY_EXTENDED_KEY_USAGE", "server auth": "SERVER_AUTH",
    "client auth": "CLIENT_AUTH", "code signing": "CODE_SIGNING",
    "email protection": "EMAIL_PROTECTION", "s/mime": "EMAIL_PROTECTION",
    "ipsec end system": "IPSEC_END_SYSTEM", "ipsec tunnel": "IPSEC_TUNNEL",
    "ipsec user": "IPSEC_USER", "timestamping": "TIME_STAMPING", "ocsp signing": "OCSP_SIGNING",
}


def key_usages(usages: list[str]) -> tuple[x509.KeyUsage | None, list[x509.ObjectIdentifier]]:
    """``keyUsagesFromStrings``: the KeyUsage extension (None when no usage is one) and the
    extended key usages, in the order given; an unknown usage is left out."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    flags = {flag: False for flag in (
        "digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
        "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")}
    extended: list[x509.ObjectIdentifier] = []
    for usage in usages:
        if usage in _KEY_USAGES:
            flags[_KEY_USAGES[usage]] = True
        elif usage in _EXT_USAGES:
            oid = getattr(ExtendedKeyUsageOID, _EXT_USAGES[usage])
            if oid not in extended:
                extended.append(oid)
    if flags["encipher_only"] or flags["decipher_only"]:
        flags["key_agreement"] = True  # x509 defines them only with keyAgreement
    if not any(flags.values()):
        return None, extended
    return x509.KeyUsage(**flags), extended


@functools.lru_cache(maxsize=64)
def cluster_ca(seed: int) -> ClusterCA:
    """The CA of worlds with ``seed`` (made once per process and seed)."""
    return ClusterCA(seed)
