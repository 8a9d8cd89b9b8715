"""kube-controller-manager's csrsigning controller: approved CertificateSigningRequests of the
built-in signers get a certificate from the world's cluster CA (`emu.apiserver.cluster_ca`),
which ``kube-root-ca.crt`` publishes, so ``kubectl certificate approve X`` then ``kubectl get
csr X -o jsonpath='{.status.certificate}' | base64 -d`` gives a certificate that verifies
against it.

Ports ``signer.handle`` and ``signer.duration`` (pkg/controller/certificates/signer/signer.go),
the signers' checks (``isKubeletServing``, ``isKubeletClient``, ``isKubeAPIServerClient``:
``ValidateKubeletServingCSR``, ``ValidateKubeletClientCSR``, ``validAPIServerClientUsages`` of
pkg/apis/certificates/helpers.go) and the certificate controller's skip of a request that
already has a certificate (pkg/controller/certificates/certificate_controller.go). One process
(``csrsigning-controller``) does what kube's four signing controllers do, one per signer name;
``kubernetes.io/legacy-unknown`` cannot be asked for through certificates.k8s.io/v1 (its
validation refuses it). A request for another signer is left alone, as kube leaves it to that
signer.

A request that is approved but whose ``spec.request`` is not a PEM ``CERTIFICATE REQUEST`` gets a
``Failed`` condition here (kube-apiserver refuses such a request at creation; see
docs/deviations.md), as one whose names or usages its signer does not allow does in kube
(reason ``SignerValidationFailure``, the check's text as message).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from ..apiserver.cluster_ca import DEFAULT_SIGNING_DURATION, cluster_ca
from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import KeyQueue, Obj

if TYPE_CHECKING:
    from cryptography import x509

    from .cluster import KubeCluster

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
SIGNERS = (KUBE_APISERVER_CLIENT, KUBELET_CLIENT, KUBELET_SERVING)
#: ``signer.duration``'s lower bound: twice the backdating.
MIN_DURATION = 600

_SERVING_USAGES = ({"digital signature", "key encipherment", "server auth"},
                   {"digital signature", "server auth"})
_CLIENT_USAGES = ({"digital signature", "key encipherment", "client auth"},
                  {"digital signature", "client auth"})


class SignerError(Exception):
    """Why a signer refuses a request: kube's text (the ``Failed`` condition's message)."""


def parse_csr(request: Any) -> x509.CertificateSigningRequest:
    """``ParseCSR`` of ``spec.request`` (base64 of PEM, as JSON carries ``[]byte``)."""
    from cryptography import x509

    try:
        pem = base64.b64decode(str(request), validate=True)
    except (binascii.Error, ValueError):
        pem = b""
    start = pem.find(b"-----BEGIN ")
    if start < 0 or not pem[start:].startswith(b"-----BEGIN CERTIFICATE REQUEST-----"):
        raise SignerError("PEM block type must be CERTIFICATE REQUEST")
    try:
        return x509.load_pem_x509_csr(pem[start:])
    except ValueError as exc:
        raise SignerError(f"x509: malformed certificate request: {exc}") from None


def _names(req: x509.CertificateSigningRequest) -> tuple[list[str], list[str], list[str],
                                                           list[str]]:
    from cryptography import x509

    try:
        sans = req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], [], [], []
    return ([str(n) for n in sans.get_values_for_type(x509.DNSName)],
            [str(n) for n in sans.get_values_for_type(x509.IPAddress)],
            [str(n) for n in sans.get_values_for_type(x509.RFC822Name)],
            [str(n) for n in sans.get_values_for_type(x509.UniformResourceIdentifier)])


def _subject(req: x509.CertificateSigningRequest) -> tuple[list[str], str]:
    from cryptography.x509.oid import NameOID

    orgs = [str(a.value) for a in req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    cns = req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return orgs, str(cns[0].value) if cns else ""


def validate_kubelet_serving_csr(req: x509.CertificateSigningRequest, usages: set[str]) -> None:
    """``ValidateKubeletServingCSR``."""
    orgs, cn = _subject(req)
    dns, ips, emails, uris = _names(req)
    if orgs != ["system:nodes"]:
        raise SignerError("subject organization is not system:nodes")
    if not dns and not ips:
        raise SignerError("DNS or IP subjectAltName is required")
    if emails:
        raise SignerError("Email subjectAltNames are not allowed")
    if uris:
        raise SignerError("URI subjectAltNames are not allowed")
    if usages not in _SERVING_USAGES:
        raise SignerError("usages did not match [digital signature key encipherment server auth]")
    if not cn.startswith("system:node:"):
        raise SignerError("subject common name does not begin with system:node:")


def validate_kubelet_client_csr(req: x509.CertificateSigningRequest, usages: set[str]) -> None:
    """``ValidateKubeletClientCSR``."""
    orgs, cn = _subject(req)
    dns, ips, emails, uris = _names(req)
    if orgs != ["system:nodes"]:
        raise SignerError("subject organization is not system:nodes")
    if dns:
        raise SignerError("DNS subjectAltNames are not allowed")
    if emails:
        raise SignerError("Email subjectAltNames are not allowed")
    if ips:
        raise SignerError("IP subjectAltNames are not allowed")
    if uris:
        raise SignerError("URI subjectAltNames are not allowed")
    if not cn.startswith("system:node:"):
        raise SignerError("subject common name does not begin with system:node:")
    if usages not in _CLIENT_USAGES:
        raise SignerError("usages did not match [client auth digital signature key encipherment]")


def valid_apiserver_client_usages(usages: list[str]) -> None:
    """``validAPIServerClientUsages``."""
    has_client_auth = False
    for usage in usages:
        if usage in ("digital signature", "key encipherment"):
            continue
        if usage == "client auth":
            has_client_auth = True
            continue
        raise SignerError(f"invalid usage for client certificate: {usage}")
    if not has_client_auth:
        raise SignerError("missing required usage for client certificate: client auth")


def check_request(signer: str, req: x509.CertificateSigningRequest, usages: list[str]) -> None:
    """The check of ``signer`` (one of `SIGNERS`) on a parsed request: `SignerError` if it
    refuses it."""
    if signer == KUBELET_SERVING:
        validate_kubelet_serving_csr(req, set(usages))
    elif signer == KUBELET_CLIENT:
        validate_kubelet_client_csr(req, set(usages))
    else:
        valid_apiserver_client_usages(usages)


def duration(expiration_seconds: Any, cert_ttl: int = DEFAULT_SIGNING_DURATION) -> int:
    """``signer.duration``: the requested ``expirationSeconds`` within [10 minutes, the
    signing duration], or the signing duration when none is asked for."""
    if not isinstance(expiration_seconds, int) or isinstance(expiration_seconds, bool):
        return cert_ttl
    return max(MIN_DURATION, min(expiration_seconds, cert_ttl))


def _true(csr: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status", "True") == "True"
               for c in (csr.get("status") or {}).get("conditions") or () if isinstance(c, dict))


class CSRSigningController:
    """The csrsigning controller process (``csrsigning-controller``)."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.client: Client | None = None
        self.csrs: Informer | None = None
        self.queue: KeyQueue | None = None

    async def main(self, process: Process) -> None:
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "csrsigning")
        self.csrs = Informer(self.client, "CertificateSigningRequest")
        self.csrs.add_event_handler(FuncHandler(
            on_add=self._changed, on_update=lambda _o, n: self._changed(n)))
        process.spawn(self.csrs.run())
        await self.csrs.wait_synced()
        await self.queue.run(self.sync)

    def _changed(self, csr: Obj) -> None:
        assert self.queue is not None
        self.queue.add(csr["metadata"]["name"])

    async def sync(self, name: str) -> None:
        """``signer.handle`` for whichever built-in signer the request names."""
        assert self.csrs is not None and self.client is not None
        csr = self.csrs.get(name)
        if csr is None:
            return
        status = csr.get("status") or {}
        if status.get("certificate") or not _true(csr, "Approved") or _true(csr, "Denied") \
                or _true(csr, "Failed"):
            return
        spec = csr.get("spec") or {}
        signer = spec.get("signerName")
        if signer not in SIGNERS:
            return
        usages = [str(u) for u in spec.get("usages") or ()]
        now = clock.now()
        try:
            req = parse_csr(spec.get("request"))
            check_request(str(signer), req, usages)
        except SignerError as err:
            stamp = clock.rfc3339(now)
            failed = {"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                      "message": str(err), "lastUpdateTime": stamp, "lastTransitionTime": stamp}
            status = {**status, "conditions": [*(status.get("conditions") or ()), failed]}
        else:
            pem = cluster_ca(self.cluster.world.seed).sign(
                req, usages, duration(spec.get("expirationSeconds")), now)
            status = {**status, "certificate": base64.b64encode(pem.encode()).decode()}
        try:
            await self.client.update_status({**csr, "status": status})
        except ApiError as err:
            if not is_not_found(err):
                raise
