"""A self-signed certificate for ``emu serve --token``: kubectl (client-go's clientcmd) sends
credentials only over TLS, so a server that asks for a bearer token must speak HTTPS.

The certificate is its own CA (``basicConstraints CA:TRUE``) for ``127.0.0.1``, ``localhost``
and the bound host, valid for a day; the kubeconfig carries it as ``certificate-authority-data``.
"""

from __future__ import annotations

import ipaddress
import ssl
from datetime import timedelta
from pathlib import Path

import attrs

from ..kernel.paced import wall_now


@attrs.frozen
class SelfSigned:
    cert_pem: bytes
    key_pem: bytes

    def server_context(self, directory: Path) -> ssl.SSLContext:
        cert, key = directory / "serve.crt", directory / "serve.key"
        cert.write_bytes(self.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(self.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(cert), str(key))
        return ctx


def self_signed(host: str) -> SelfSigned:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kuberay-emu")])
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"),
                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        addr = ipaddress.ip_address(host)
        if str(addr) != "127.0.0.1":
            sans.append(x509.IPAddress(addr))
    except ValueError:
        sans.append(x509.DNSName(host))
    now = wall_now()  # a real certificate needs the real date
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return SelfSigned(cert.public_bytes(serialization.Encoding.PEM),
                      key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
