"""A tiny cert-manager: its CRDs and a controller that issues each Certificate's Secret.

Why: KubeRay's mTLS (gate ``RayClusterMTLS``) needs cert-manager installed, as a real cluster
does — KubeRay creates Issuers and Certificates and waits for cert-manager to issue their Secrets
before it creates any Pod. `install_cert_manager` is ``kubectl apply -f cert-manager.yaml``: it
serves ``Certificate``, ``Issuer`` and ``ClusterIssuer`` (``cert-manager.io/v1``,
`emu.apiserver.kinds.cert_manager_crds`) and starts the ``cert-manager`` process.

What the controller does, after cert-manager's issuers and certificates controllers:

- an Issuer or ClusterIssuer is ``Ready`` when it can sign: ``selfSigned`` at once (reason
  ``IsReady``); ``ca`` once its Secret holds ``tls.crt`` and ``tls.key`` (``KeyPairVerified``,
  "Signing CA verified"; else ``ErrGetKeyPair``);
- a Certificate whose issuer is Ready is issued `CertManager.issue_delay` seconds later (key
  generation and the CertificateRequest round trip): its Secret (type ``kubernetes.io/tls``,
  cert-manager's annotations) gets ``tls.crt``, ``tls.key`` and ``ca.crt``, and the Certificate
  ``Ready=True`` (reason ``Ready``, "Certificate is up to date and has not expired") at its
  current generation, with ``notBefore``, ``notAfter`` (``spec.duration``, 90 days by default),
  ``renewalTime`` and ``revision``. A spec change (new SANs) is a new generation: Ready goes
  False (``Issuing``) until the Secret is reissued, as cert-manager's re-issuance does.

The key material is placeholder text, not X.509: ``tls.crt`` spells out its subject, issuer and
SANs (``X509v3 Subject Alternative Name: DNS:…, IP Address:…``, as ``openssl x509 -text`` prints
them), which is all the emulated programs read. ``ca.crt`` is the signing CA's certificate (a
self-signed certificate's own). Not emulated: renewal before expiry, CertificateRequests and
Orders, ACME/Vault issuers, private-key rotation policies, ``secretTemplate``.
"""

from __future__ import annotations

import base64
from typing import Any

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..apiserver.kinds import cert_manager_crds
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import KeyQueue, Obj, rfc3339, set_condition

PROCESS_NAME = "cert-manager"
#: Seconds from a Certificate's (re)issue request to its Secret (an estimate: cert-manager's
#: controllers, key generation and the CertificateRequest, typically one or two seconds).
DEFAULT_ISSUE_DELAY = 2.0
#: cert-manager's default ``spec.duration`` (90 days) and renewal at two thirds of it.
DEFAULT_DURATION = 90 * 24 * 3600.0


def parse_go_duration(text: str | None, default: float) -> float:
    """``metav1.Duration`` text (``2160h0m0s``) in seconds; ``default`` when absent or bad."""
    seconds = clock.parse_go_duration(str(text)) if text else None
    return default if seconds is None else seconds


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str | None) -> str:
    return base64.b64decode(text or "").decode(errors="replace")


def certificate_text(cert: Obj, issuer: str, serial: int) -> str:
    """The placeholder PEM of a Certificate's current spec (what ``tls.crt`` holds)."""
    spec = cert.get("spec") or {}
    sans = [f"DNS:{d}" for d in spec.get("dnsNames") or []] + \
        [f"IP Address:{ip}" for ip in spec.get("ipAddresses") or []]
    common = spec.get("commonName") or ""
    return ("-----BEGIN CERTIFICATE-----\n"
            "emu placeholder certificate (not X.509)\n"
            f"Serial Number: {serial}\n"
            f"Subject: CN={common}\n"
            f"Issuer: {issuer}\n"
            f"CA: {'TRUE' if spec.get('isCA') else 'FALSE'}\n"
            f"X509v3 Subject Alternative Name: {', '.join(sans)}\n"
            "-----END CERTIFICATE-----\n")


class CertManager:
    """The cert-manager controller process (issuers and certificates)."""

    def __init__(self, network: Any, *, issue_delay: float = DEFAULT_ISSUE_DELAY) -> None:
        self.network = network
        self.issue_delay = issue_delay
        self.process: Process | None = None
        self.client: Client | None = None
        self.certificates: Informer | None = None
        self.issuers: Informer | None = None
        self.cluster_issuers: Informer | None = None
        self.secrets: Informer | None = None
        self.queue: KeyQueue | None = None
        self._serial = 0
        #: Certificate key → (generation, time its issuance was requested).
        self._pending: dict[str, tuple[int, float]] = {}

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.network, process=process)
        self.queue = KeyQueue(process, "cert-manager")
        self.certificates = Informer(self.client, "Certificate")
        self.issuers = Informer(self.client, "Issuer")
        self.cluster_issuers = Informer(self.client, "ClusterIssuer")
        self.secrets = Informer(self.client, "Secret")
        self.certificates.add_event_handler(FuncHandler(
            on_add=self._cert_changed, on_update=lambda _o, n: self._cert_changed(n)))
        for inf in (self.issuers, self.cluster_issuers):
            inf.add_event_handler(FuncHandler(
                on_add=self._issuer_changed, on_update=lambda _o, n: self._issuer_changed(n)))
        self.secrets.add_event_handler(FuncHandler(
            on_add=self._secret_changed, on_update=lambda _o, n: self._secret_changed(n),
            on_delete=self._secret_changed))
        informers = (self.certificates, self.issuers, self.cluster_issuers, self.secrets)
        for inf in informers:
            process.spawn(inf.run())
        for inf in informers:
            await inf.wait_synced()
        await self.queue.run(self.sync)

    # -- event handlers: everything funnels into per-object keys ---------------------------------

    @staticmethod
    def _key(kind: str, obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        return f"{kind}/{meta.get('namespace') or ''}/{meta.get('name')}"

    def _cert_changed(self, cert: Obj) -> None:
        assert self.queue is not None
        self.queue.add(self._key("Certificate", cert))

    def _issuer_changed(self, issuer: Obj) -> None:
        assert self.queue is not None and self.certificates is not None
        kind = issuer.get("kind") or "Issuer"
        self.queue.add(self._key(kind, issuer))
        name = (issuer.get("metadata") or {}).get("name")
        ns = (issuer.get("metadata") or {}).get("namespace")
        for cert in self.certificates.list(ns if kind == "Issuer" else None):
            ref = (cert.get("spec") or {}).get("issuerRef") or {}
            if ref.get("name") == name and (ref.get("kind") or "Issuer") == kind:
                self._cert_changed(cert)

    def _secret_changed(self, secret: Obj) -> None:
        """A CA issuer waits for its Secret; a Certificate reissues a deleted Secret."""
        assert self.queue is not None and self.certificates is not None
        assert self.issuers is not None
        meta = secret.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        for issuer in self.issuers.list(ns):
            if ((issuer.get("spec") or {}).get("ca") or {}).get("secretName") == name:
                self.queue.add(self._key("Issuer", issuer))
        for cert in self.certificates.list(ns):
            if (cert.get("spec") or {}).get("secretName") == name:
                self._cert_changed(cert)

    # -- sync ------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        kind, ns, name = key.split("/", 2)
        if kind == "Certificate":
            await self.sync_certificate(ns, name)
        else:
            await self.sync_issuer(kind, ns, name)

    def _secret(self, ns: str, name: str) -> Obj | None:
        assert self.secrets is not None
        return self.secrets.get(name, ns)

    def issuer_state(self, issuer: Obj) -> tuple[bool, str, str]:
        """(ready, reason, message) of an issuer, as cert-manager's issuer controller sets it."""
        spec = issuer.get("spec") or {}
        if "selfSigned" in spec:
            return True, "IsReady", ""
        if "ca" in spec:
            secret_name = (spec.get("ca") or {}).get("secretName") or ""
            ns = (issuer.get("metadata") or {}).get("namespace") or "cert-manager"
            secret = self._secret(ns, secret_name)
            data = (secret or {}).get("data") or {}
            if secret is None:
                return False, "ErrGetKeyPair", (f"Error getting keypair for CA issuer: "
                                                f'secrets "{secret_name}" not found')
            if "tls.crt" not in data or "tls.key" not in data:
                return False, "ErrInvalidKeyPair", ("Error getting keypair for CA issuer: "
                                                    "the secret holds no tls.crt and tls.key")
            return True, "KeyPairVerified", "Signing CA verified"
        return False, "ErrInitIssuer", "the emulated cert-manager signs only selfSigned and ca"

    async def sync_issuer(self, kind: str, ns: str, name: str) -> None:
        assert self.client is not None
        informer = self.issuers if kind == "Issuer" else self.cluster_issuers
        assert informer is not None
        issuer = informer.get(name, ns or None)
        if issuer is None:
            return
        ready, reason, message = self.issuer_state(issuer)
        status = dict(issuer.get("status") or {})
        conditions = set_condition(list(status.get("conditions") or []), {
            "type": "Ready", "status": "True" if ready else "False", "reason": reason,
            "message": message, "lastTransitionTime": rfc3339(clock.now()),
            "observedGeneration": (issuer.get("metadata") or {}).get("generation", 1)})
        if conditions == status.get("conditions"):
            return
        try:
            await self.client.update_status({**issuer, "status": {**status,
                                                                   "conditions": conditions}})
        except ApiError as err:
            if not is_not_found(err):
                raise

    def _issuer_of(self, cert: Obj) -> Obj | None:
        ref = (cert.get("spec") or {}).get("issuerRef") or {}
        if (ref.get("kind") or "Issuer") == "ClusterIssuer":
            assert self.cluster_issuers is not None
            return self.cluster_issuers.get(ref.get("name") or "", None)
        assert self.issuers is not None
        return self.issuers.get(ref.get("name") or "", (cert.get("metadata") or {}).get(
            "namespace"))

    def _up_to_date(self, cert: Obj, secret: Obj | None) -> bool:
        if secret is None:
            return False
        data = secret.get("data") or {}
        if not all(k in data for k in ("tls.crt", "tls.key", "ca.crt")):
            return False
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        spec = cert.get("spec") or {}
        return (annotations.get("cert-manager.io/alt-names", "") == ",".join(
                    spec.get("dnsNames") or [])
                and annotations.get("cert-manager.io/ip-sans", "") == ",".join(
                    spec.get("ipAddresses") or [])
                and annotations.get("cert-manager.io/certificate-name") ==
                (cert.get("metadata") or {}).get("name"))

    async def sync_certificate(self, ns: str, name: str) -> None:
        assert self.certificates is not None and self.queue is not None
        cert = self.certificates.get(name, ns)
        if cert is None or (cert.get("metadata") or {}).get("deletionTimestamp"):
            self._pending.pop(f"Certificate/{ns}/{name}", None)
            return
        key = f"Certificate/{ns}/{name}"
        meta = cert.get("metadata") or {}
        generation = int(meta.get("generation") or 1)
        spec = cert.get("spec") or {}
        secret = self._secret(ns, str(spec.get("secretName") or ""))
        if self._up_to_date(cert, secret):
            self._pending.pop(key, None)
            await self._set_ready(cert, True, "Ready",
                                  "Certificate is up to date and has not expired")
            return
        issuer = self._issuer_of(cert)
        ready, _reason, _message = self.issuer_state(issuer) if issuer is not None \
            else (False, "", "")
        if not ready:
            ref = spec.get("issuerRef") or {}
            await self._set_ready(cert, False, "DoesNotExist" if secret is None else "Issuing",
                                  f"Issuing certificate as Secret does not exist; waiting for "
                                  f"{ref.get('kind') or 'Issuer'} \"{ref.get('name')}\" to be "
                                  f"ready")
            return
        pending = self._pending.get(key)
        if pending is None or pending[0] != generation:
            self._pending[key] = (generation, clock.now())
            await self._set_ready(cert, False, "DoesNotExist" if secret is None else "Issuing",
                                  "Issuing certificate as Secret does not exist"
                                  if secret is None else
                                  "Issuing certificate as Secret was previously issued by a "
                                  "different spec")
            self.queue.add_after(key, self.issue_delay)
            return
        due = pending[1] + self.issue_delay
        if clock.now() < due:
            self.queue.add_after(key, due - clock.now())
            return
        assert issuer is not None
        await self._issue(cert, issuer, secret)
        self._pending.pop(key, None)
        self.queue.add(key)

    async def _issue(self, cert: Obj, issuer: Obj, secret: Obj | None) -> None:
        """Write the Certificate's Secret (created, or updated in place)."""
        assert self.client is not None and self.process is not None
        meta = cert.get("metadata") or {}
        spec = cert.get("spec") or {}
        ns = meta.get("namespace") or ""
        issuer_meta = issuer.get("metadata") or {}
        self._serial += 1
        ca_spec = (issuer.get("spec") or {}).get("ca")
        if ca_spec:
            ca_secret = self._secret(issuer_meta.get("namespace") or "cert-manager",
                                     ca_spec.get("secretName") or "") or {}
            ca_text = _unb64((ca_secret.get("data") or {}).get("tls.crt"))
            subject = ""
            for line in ca_text.splitlines():
                if line.startswith("Subject: "):
                    subject = line.removeprefix("Subject: ")
            crt = certificate_text(cert, subject or f"issuer {issuer_meta.get('name')}",
                                   self._serial)
        else:  # self-signed: its own CA
            crt = certificate_text(cert, f"CN={spec.get('commonName') or ''}", self._serial)
            ca_text = crt
        key_text = ("-----BEGIN PRIVATE KEY-----\nemu placeholder key "
                    f"{meta.get('name')} #{self._serial}\n-----END PRIVATE KEY-----\n")
        annotations = {
            "cert-manager.io/alt-names": ",".join(spec.get("dnsNames") or []),
            "cert-manager.io/certificate-name": meta.get("name") or "",
            "cert-manager.io/common-name": spec.get("commonName") or "",
            "cert-manager.io/ip-sans": ",".join(spec.get("ipAddresses") or []),
            "cert-manager.io/issuer-group": (spec.get("issuerRef") or {}).get("group") or "",
            "cert-manager.io/issuer-kind": (spec.get("issuerRef") or {}).get("kind") or "Issuer",
            "cert-manager.io/issuer-name": (spec.get("issuerRef") or {}).get("name") or "",
            "cert-manager.io/uri-sans": "",
        }
        data = {"ca.crt": _b64(ca_text), "tls.crt": _b64(crt), "tls.key": _b64(key_text)}
        if secret is None:
            body: Obj = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                         "metadata": {"name": spec.get("secretName"), "namespace": ns,
                                      "annotations": annotations,
                                      "labels": {"controller.cert-manager.io/fao": "true"}},
                         "data": data}
            try:
                await self.client.create(body)
            except ApiError as err:
                if not is_already_exists(err):
                    raise
                return  # the informer has not seen it yet; the next sync updates it
        else:
            smeta = dict(secret.get("metadata") or {})
            smeta["annotations"] = {**(smeta.get("annotations") or {}), **annotations}
            await self.client.update({**secret, "metadata": smeta, "type": secret.get(
                "type") or "kubernetes.io/tls", "data": {**(secret.get("data") or {}), **data}})
        self.process.log("certificate_issued", certificate=f"{ns}/{meta.get('name')}",
                         secret=spec.get("secretName"), generation=meta.get("generation"),
                         ip_sans=list(spec.get("ipAddresses") or []))
        await self._set_issued_status(cert)

    async def _set_issued_status(self, cert: Obj) -> None:
        assert self.client is not None
        duration = parse_go_duration((cert.get("spec") or {}).get("duration"), DEFAULT_DURATION)
        renew_before = parse_go_duration((cert.get("spec") or {}).get("renewBefore"),
                                         duration / 3)
        now = clock.now()
        status = dict(cert.get("status") or {})
        status.update({"notBefore": rfc3339(now), "notAfter": rfc3339(now + duration),
                       "renewalTime": rfc3339(now + duration - renew_before),
                       "revision": int(status.get("revision") or 0) + 1})
        cert = {**cert, "status": status}
        await self._set_ready(cert, True, "Ready",
                              "Certificate is up to date and has not expired", force=True)

    async def _set_ready(self, cert: Obj, ready: bool, reason: str, message: str, *,
                         force: bool = False) -> None:
        assert self.client is not None
        status = dict(cert.get("status") or {})
        generation = (cert.get("metadata") or {}).get("generation", 1)
        conditions = set_condition(list(status.get("conditions") or []), {
            "type": "Ready", "status": "True" if ready else "False", "reason": reason,
            "message": message, "lastTransitionTime": rfc3339(clock.now()),
            "observedGeneration": generation})
        if conditions == status.get("conditions") and not force:
            return
        try:
            await self.client.update_status({**cert, "status": {**status,
                                                                 "conditions": conditions}})
        except ApiError as err:
            if not is_not_found(err) and err.code != 409:
                raise
            if err.code == 409:  # a newer generation arrived: its own sync follows
                assert self.queue is not None
                self.queue.add(f"Certificate/{(cert.get('metadata') or {}).get('namespace')}/"
                               f"{(cert.get('metadata') or {}).get('name')}")


async def install_cert_manager(sim: Any, *, issue_delay: float = DEFAULT_ISSUE_DELAY
                               ) -> CertManager:
    """Install cert-manager into ``sim`` (a `emu.Simulation`): its CRDs, then its controller
    as the process ``cert-manager``. Install it before KubeRay: the operator looks for
    cert-manager's API once, when it starts (main.go). The garbage collector starts watching
    cert-manager's kinds as they are served, so it collects Certificates and Issuers whose
    RayCluster is gone."""
    client = sim.client("cert-manager-install")
    for crd in cert_manager_crds():
        try:
            await client.create(crd)
        except ApiError as err:
            if not is_already_exists(err):
                raise
    manager = CertManager(sim.network, issue_delay=issue_delay)
    sim.processes.start(PROCESS_NAME, manager.main)
    return manager
