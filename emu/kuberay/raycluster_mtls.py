"""The RayCluster mTLS controller (feature gate ``RayClusterMTLS``, alpha, off by default).

Port of ``raycluster_mtls_controller.go``. A controller of its own beside the RayCluster
reconciler (Go runs it separately so certificates are made independently of Pods), registered by
main.go only when the gate is on *and* cert-manager's ``cert-manager.io/v1`` API is served
(`cert_manager_api_available`, checked once at start as main.go's discovery call is).

For a RayCluster with ``tlsOptions.enabled`` it builds cert-manager's PKI chain, each object
controlled by the RayCluster (so the garbage collector removes them with it):

1. Issuer ``ray-selfsigned-issuer-<cluster>`` (``selfSigned``);
2. Certificate ``ray-ca-certificate-<cluster>`` (CA, RSA 4096, ~10 years) into Secret
   ``<cluster>-ca-secret-<uid[:8]>``;
3. Issuer ``ray-ca-issuer-<cluster>`` (``ca`` from that Secret);
4. Certificates ``ray-head-cert-<cluster>`` / ``ray-worker-cert-<cluster>`` (90 days, renewed 15
   days before) into ``ray-head-secret-<cluster>`` / ``ray-worker-secret-<cluster>``, DNS SANs
   ``localhost`` (and the head Service's FQDN for the head), IP SANs ``127.0.0.1`` plus the live
   Pods' IPs of that node type — updated when they change, which makes cert-manager reissue.

Each issued Secret gets an owner reference to its Certificate. Then both leaf Certificates must be
Ready at their current generation (`is_certificate_ready`): if not, a ``MTLSCertsNotReady`` Event
and a 30 s requeue; if so, ``MTLSPKIReady``, an expiry check and a 1 min requeue — which is how
new Pod IPs reach the certificates (the controller does not watch Pods).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from emu.apiserver.errors import ApiError, is_not_found
from emu.runtime import Request, Result

from .raycluster import VIRTUAL_EPOCH, EventRecorder, _loop_time
from .utils import constant as C
from .utils import util
from .utils.features import DEFAULTS, RAY_CLUSTER_MTLS, FeatureGates
from .utils.util import Obj, dig

#: ``mtlsDefaultRequeueDuration`` / ``mtlsPeriodicCheckDuration``.
MTLS_DEFAULT_REQUEUE = 30.0
MTLS_PERIODIC_CHECK = 60.0
CERT_MANAGER_API_VERSION = "cert-manager.io/v1"
_HOUR = 3600.0


def _go_duration(seconds: float) -> str:
    """``metav1.Duration`` as Go marshals it (``87600h0m0s``)."""
    total = int(seconds)
    return f"{total // 3600}h{total % 3600 // 60}m{total % 60}s"


def tls_resource_labels(cluster_name: str, component: str) -> dict[str, str]:
    """Port of `tlsResourceLabels`."""
    return {C.KUBERNETES_APPLICATION_NAME_LABEL_KEY: C.APPLICATION_NAME,
            C.KUBERNETES_CREATED_BY_LABEL_KEY: C.COMPONENT_NAME,
            "app.kubernetes.io/component": component,
            C.RAY_CLUSTER_LABEL_KEY: cluster_name}


def leaf_cert_key_usages() -> list[str]:
    """Port of `leafCertKeyUsages`."""
    return ["digital signature", "key encipherment", "server auth", "client auth"]


def is_certificate_ready(cert: Mapping[str, Any]) -> bool:
    """Port of `isCertificateReady`: the Ready condition is True *and* observed the current
    generation (a stale Ready after a SAN change does not count)."""
    for cond in dig(cert, "status", "conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True" and int(cond.get("observedGeneration") or 0)
                        == int(dig(cert, "metadata", "generation") or 0))
    return False


def normalize_ips(pod_ips: list[str]) -> list[str]:
    """Port of `normalizeIPs`: sorted, de-duplicated, without "", always with 127.0.0.1."""
    return sorted({ip for ip in pod_ips if ip} | {"127.0.0.1"})


def certificate_needs_update(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Port of `certificateNeedsUpdate`: DNS names or IP addresses differ as sets (Go's
    `setsEqual` also compares lengths, so duplicates count)."""
    def differ(a: list[str], b: list[str]) -> bool:
        return len(a) != len(b) or not set(b) <= set(a)

    return differ(list(existing.get("dnsNames") or []), list(desired.get("dnsNames") or [])) or \
        differ(list(existing.get("ipAddresses") or []), list(desired.get("ipAddresses") or []))


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


class RayClusterMTLSController:
    """Port of ``RayClusterMTLSController``."""

    def __init__(self, client: Any, *, env: Mapping[str, str] | None = None,
                 gates: FeatureGates = DEFAULTS,
                 clock: Callable[[], float] = _loop_time) -> None:
        self.client = client
        self.env = dict(env or {})
        self.gates = gates
        self._clock = clock
        self.recorder = EventRecorder(client, "raycluster-mtls-controller", clock=clock)

    async def reconcile(self, request: Request) -> Result:
        """Port of `Reconcile`: nothing for a deleted, externally managed or TLS-less cluster."""
        try:
            instance = await self.client.get("RayCluster", request.name, request.namespace)
        except ApiError as err:
            if is_not_found(err):
                return Result()
            raise
        if dig(instance, "metadata", "deletionTimestamp"):
            return Result()
        if util.managed_by_external_controller(dig(instance, "spec", "managedBy")) is not None:
            return Result()
        if not util.is_tls_enabled(instance.get("spec"), self.gates):
            return Result()
        return await self.handle_auto_generate(instance)

    async def handle_auto_generate(self, instance: Obj) -> Result:
        """Port of `handleAutoGenerate`: the five steps in order, then readiness."""
        steps = ((self.reconcile_self_signed_issuer, "self-signed issuer"),
                 (self.reconcile_ca_certificate, "CA certificate"),
                 (self.reconcile_ca_issuer, "CA issuer"),
                 (self.reconcile_head_certificate, "head certificate"),
                 (self.reconcile_worker_certificate, "worker certificate"))
        for step, name in steps:
            try:
                await step(instance)
            except Exception as err:
                self.recorder.eventf(instance, "Warning", C.MTLS_FAILED_TO_RECONCILE,
                                     C.RECONCILE_ACTION, f"Failed to reconcile mTLS {name}: {err}")
                raise
        ready = await self.check_tls_certificates_ready(instance)
        if not ready:
            self.recorder.eventf(instance, "Normal", C.MTLS_CERTS_NOT_READY, C.RECONCILE_ACTION,
                                 "Waiting for cert-manager to issue mTLS certificates")
            return Result(requeue_after=MTLS_DEFAULT_REQUEUE)
        self.recorder.eventf(instance, "Normal", C.MTLS_PKI_READY, C.RECONCILE_ACTION,
                             "mTLS PKI is ready: CA, head, and worker certificates issued")
        await self.check_tls_certificate_expiry(instance)
        return Result(requeue_after=MTLS_PERIODIC_CHECK)

    async def _get(self, kind: str, name: str, namespace: str) -> Obj | None:
        try:
            obj: Obj = await self.client.get(kind, name, namespace)
            return obj
        except ApiError as err:
            if is_not_found(err):
                return None
            raise

    async def ensure_secret_owned_by_certificate(self, cert: Obj) -> None:
        """Port of `ensureSecretOwnedByCertificate`: the issued Secret gets a (non-controller)
        owner reference to its Certificate, written on every pass as Go's Update is; nothing
        while cert-manager has not issued it."""
        namespace = dig(cert, "metadata", "namespace") or ""
        secret = await self._get("Secret", dig(cert, "spec", "secretName") or "", namespace)
        if secret is None:
            return
        refs: list[Obj] = secret.setdefault("metadata", {}).setdefault("ownerReferences", [])
        ref = {"apiVersion": cert.get("apiVersion", CERT_MANAGER_API_VERSION),
               "kind": cert.get("kind", "Certificate"), "name": dig(cert, "metadata", "name"),
               "uid": dig(cert, "metadata", "uid")}
        for i, existing in enumerate(refs):  # SetOwnerReference: same group, kind and name
            if existing.get("kind") == ref["kind"] and existing.get("name") == ref["name"] and \
                    str(existing.get("apiVersion", "")).split("/")[0] == "cert-manager.io":
                refs[i] = {**existing, **ref}
                break
        else:
            refs.append(ref)
        await self.client.update(secret)

    async def reconcile_issuer(self, instance: Obj, issuer_name: str, component: str,
                               issuer_config: Obj) -> None:
        """Port of `reconcileIssuer`: create when missing; an Issuer's spec is never updated."""
        namespace = dig(instance, "metadata", "namespace") or ""
        if await self._get("Issuer", issuer_name, namespace) is not None:
            return
        issuer: Obj = {"apiVersion": CERT_MANAGER_API_VERSION, "kind": "Issuer",
                       "metadata": {"name": issuer_name, "namespace": namespace,
                                    "labels": tls_resource_labels(
                                        dig(instance, "metadata", "name") or "", component)},
                       "spec": issuer_config}
        util.set_controller_reference(instance, issuer)
        await self.client.create(issuer)

    async def reconcile_self_signed_issuer(self, instance: Obj) -> None:
        """Port of `reconcileSelfSignedIssuer`."""
        await self.reconcile_issuer(
            instance, util.get_self_signed_issuer_name(dig(instance, "metadata", "name") or ""),
            "selfsigned-issuer", {"selfSigned": {}})

    async def reconcile_ca_certificate(self, instance: Obj) -> None:
        """Port of `reconcileCACertificate`: create when missing (never updated, so cert-manager
        never reissues the CA); then the Secret's owner reference."""
        name = dig(instance, "metadata", "name") or ""
        namespace = dig(instance, "metadata", "namespace") or ""
        cert_name = util.get_ca_cert_name(name)
        existing = await self._get("Certificate", cert_name, namespace)
        if existing is None:
            cert: Obj = {
                "apiVersion": CERT_MANAGER_API_VERSION, "kind": "Certificate",
                "metadata": {"name": cert_name, "namespace": namespace,
                             "labels": tls_resource_labels(name, "ca-certificate")},
                "spec": {"secretName": util.get_ca_secret_name(
                             name, str(dig(instance, "metadata", "uid") or "")),
                         "isCA": True, "commonName": f"ray-ca-{name}",
                         "privateKey": {"algorithm": "RSA", "size": 4096},
                         "duration": _go_duration(24 * _HOUR * 3650),
                         "renewBefore": _go_duration(24 * _HOUR * 30),
                         "usages": ["cert sign", "crl sign"],
                         "issuerRef": {"name": util.get_self_signed_issuer_name(name),
                                       "kind": "Issuer", "group": "cert-manager.io"}}}
            util.set_controller_reference(instance, cert)
            await self.client.create(cert)
            return
        await self.ensure_secret_owned_by_certificate(existing)

    async def reconcile_ca_issuer(self, instance: Obj) -> None:
        """Port of `reconcileCAIssuer`."""
        name = dig(instance, "metadata", "name") or ""
        await self.reconcile_issuer(
            instance, util.get_ca_issuer_name(name), "ca-issuer",
            {"ca": {"secretName": util.get_ca_secret_name(
                name, str(dig(instance, "metadata", "uid") or ""))}})

    async def reconcile_head_certificate(self, instance: Obj) -> None:
        """Port of `reconcileHeadCertificate`: head Pod IPs only, so a worker scaling never
        reissues the head certificate."""
        namespace = dig(instance, "metadata", "namespace") or ""
        dns = sorted(_unique(["localhost", util.generate_fqdn_service_name(
            instance, namespace, self.env)]))
        await self._reconcile_leaf(instance, C.HEAD_NODE, "head-certificate", dns, "head")

    async def reconcile_worker_certificate(self, instance: Obj) -> None:
        """Port of `reconcileWorkerCertificate`: one certificate for every worker Pod."""
        await self._reconcile_leaf(instance, C.WORKER_NODE, "worker-certificate",
                                   sorted(_unique(["localhost"])), "worker")

    async def _reconcile_leaf(self, instance: Obj, node_type: str, component: str,
                              dns_names: list[str], what: str) -> None:
        name = dig(instance, "metadata", "name") or ""
        namespace = dig(instance, "metadata", "namespace") or ""
        cert_name = util.get_tls_cert_name(name, node_type)
        ips = normalize_ips(await self.get_pod_ips(instance, node_type))
        labels = tls_resource_labels(name, component)
        desired: Obj = {"secretName": util.get_tls_secret_name(name, node_type),
                        "duration": _go_duration(2160 * _HOUR),
                        "renewBefore": _go_duration(360 * _HOUR),
                        "dnsNames": dns_names, "ipAddresses": ips,
                        "usages": leaf_cert_key_usages(),
                        "issuerRef": {"name": util.get_ca_issuer_name(name), "kind": "Issuer",
                                      "group": "cert-manager.io"}}
        existing = await self._get("Certificate", cert_name, namespace)
        if existing is None:
            cert: Obj = {"apiVersion": CERT_MANAGER_API_VERSION, "kind": "Certificate",
                         "metadata": {"name": cert_name, "namespace": namespace,
                                      "labels": labels},
                         "spec": desired}
            util.set_controller_reference(instance, cert)
            await self.client.create(cert)
            return
        if dig(existing, "metadata", "labels") != labels or \
                certificate_needs_update(existing.get("spec") or {}, desired):
            existing["metadata"]["labels"] = labels
            existing["spec"] = desired
            util.set_controller_reference(instance, existing)
            self.recorder.eventf(instance, "Normal", C.MTLS_CERTIFICATES_UPDATED, C.UPDATE_ACTION,
                                 f"Updated {what} certificate SANs (IPs: [{' '.join(ips)}])")
            existing = await self.client.update(existing)
        await self.ensure_secret_owned_by_certificate(existing)

    async def get_pod_ips(self, instance: Obj, node_type: str) -> list[str]:
        """Port of `getPodIPs`: the IPs of the cluster's live Pods of ``node_type`` (not being
        deleted, not Succeeded or Failed)."""
        pods = await self.client.list(
            "Pod", dig(instance, "metadata", "namespace"),
            label_selector={C.RAY_CLUSTER_LABEL_KEY: dig(instance, "metadata", "name") or "",
                            C.RAY_NODE_TYPE_LABEL_KEY: node_type})
        out: list[str] = []
        for pod in pods:
            if dig(pod, "metadata", "deletionTimestamp") or \
                    dig(pod, "status", "phase") in ("Succeeded", "Failed"):
                continue
            if dig(pod, "status", "podIP"):
                out.append(str(dig(pod, "status", "podIP")))
        return out

    async def check_tls_certificates_ready(self, instance: Obj) -> bool:
        """Port of `checkTLSCertificatesReady` (a missing Certificate is an error)."""
        name = dig(instance, "metadata", "name") or ""
        for cert_name in (util.get_tls_cert_name(name, C.HEAD_NODE),
                          util.get_tls_cert_name(name, C.WORKER_NODE)):
            cert = await self.client.get("Certificate", cert_name,
                                         dig(instance, "metadata", "namespace"))
            if not is_certificate_ready(cert):
                return False
        return True

    async def check_tls_certificate_expiry(self, instance: Obj) -> None:
        """Port of `checkTLSCertificateExpiry`: a Warning for a certificate whose
        ``status.notAfter`` is less than 24 hours away."""
        name = dig(instance, "metadata", "name") or ""
        now = self._clock()
        for cert_name in (util.get_tls_cert_name(name, C.HEAD_NODE),
                          util.get_tls_cert_name(name, C.WORKER_NODE),
                          util.get_ca_cert_name(name)):
            cert = await self._get("Certificate", cert_name,
                                   dig(instance, "metadata", "namespace") or "")
            not_after = dig(cert or {}, "status", "notAfter")
            if not not_after:
                continue
            remaining = _seconds_since_epoch(str(not_after)) - now
            if remaining < 24 * _HOUR:
                self.recorder.eventf(
                    instance, "Warning", C.MTLS_CERTIFICATE_EXPIRING_SOON, C.RECONCILE_ACTION,
                    f"TLS certificate {cert_name} expires in {remaining / _HOUR:.1f} hours; Ray "
                    f"does not hot-reload certs so a pod restart will be needed after renewal")

    def setup_with_manager(self, mgr: Any) -> Any:
        """Port of `SetupWithManager`: named ``raycluster-mtls``, For RayCluster (every change),
        Owns Issuer and Certificate."""
        return (mgr.new_controller().named("raycluster-mtls")
                .for_("RayCluster", api_version="ray.io/v1")
                .owns("Issuer").owns("Certificate")
                .complete(self))


def _seconds_since_epoch(stamp: str) -> float:
    """Virtual seconds of an RFC 3339 time (the world's timestamps start at its epoch)."""
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (when - VIRTUAL_EPOCH).total_seconds()


async def cert_manager_api_available(client: Any) -> bool:
    """main.go's `certManagerAPIAvailable`: whether ``cert-manager.io/v1`` is served. The
    emulated API has no discovery endpoint, so a one-item list of Certificates stands in (404:
    not served; any other answer, even a refusal, means the API exists)."""
    try:
        await client.list("Certificate", limit=1, api_version=CERT_MANAGER_API_VERSION)
    except ApiError as err:
        return not is_not_found(err)
    except Exception:  # the API server unreachable: Go's discovery error → false
        return False
    return True


def setup(mgr: Any, ctx: Any) -> RayClusterMTLSController | None:
    """main.go: the mTLS controller only with the gate on and cert-manager's API served."""
    if not ctx.gates.enabled(RAY_CLUSTER_MTLS) or not getattr(ctx, "cert_manager_available",
                                                              False):
        return None
    controller = RayClusterMTLSController(mgr.get_client(), env=ctx.env, gates=ctx.gates)
    controller.setup_with_manager(mgr)
    return controller
