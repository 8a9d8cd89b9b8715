"""The standard cluster: what a fresh kind (kubeadm) cluster holds besides the user's Nodes.

`KubeConfig.standard_cluster` turns it on; `emu.kube.cluster.install` then adds:

- the control-plane Node `CONTROL_PLANE_NODE` (kind names it ``<cluster>-control-plane``, and
  the cluster in ``emu serve``'s kubeconfig is ``emu``), labelled
  ``node-role.kubernetes.io/control-plane: ""`` and tainted
  ``node-role.kubernetes.io/control-plane:NoSchedule``, so no user Pod lands there; its
  kubelet runs the control plane's static Pods (`static_pods`: etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler) and publishes them as mirror Pods
  ``<component>-emu-control-plane`` in ``kube-system`` (`mirror_pod`);
- kubeadm's `addons` (``kubeadm init phase addon``): CoreDNS (a Deployment of 2 replicas
  whose image runs `coredns_program` and passes its readiness probe, and the ``kube-dns``
  Service at `DNS_CLUSTER_IP`) and kube-proxy (a DaemonSet: one Pod per Node);
- kube-apiserver's endpoint reconciler (`APIServerEndpoints`): the ``default/kubernetes``
  Service at `KUBERNETES_CLUSTER_IP`, its Endpoints and EndpointSlice pointing at the control
  plane's ``6443``, restored when changed or deleted;
- the ServiceAccount controller and the root-CA publisher (`emu.kube.serviceaccounts`), the
  DaemonSet controller (`emu.kube.daemonsets`), the DefaultTolerationSeconds admission plugin
  and the Events of normal operation.

`boot` writes all of it as ``kind create cluster`` hands it over, before any process runs; from
then on the kubelets and controllers own it.

Everything here is an ordinary object or process of the world: delete the CoreDNS Deployment
or crash ``kube-apiserver-endpoints`` and the cluster runs on without it, as a real one would.
The CoreDNS and kube-proxy Pods are stand-ins: names resolve and Services route as they always
did in the emulator (the network and the ``kube-proxy`` process), whatever these Pods do.

Over 500 lines because most of it is data: the static Pods' and kubeadm's addon manifests,
written out as kube ships them, beside the boot that writes them and the two small processes
(CoreDNS's program, the endpoint reconciler) that only make sense with them.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.network import CallInfo, NetworkError
from ..kernel.process import Process
from ..kernel.programs import ContainerContext
from .common import Obj, template_hash

if TYPE_CHECKING:
    from .cluster import KubeCluster

#: The control-plane Node's name: kind's ``<cluster>-control-plane`` for the cluster ``emu``
#: (the name ``emu serve`` gives the cluster in its kubeconfig).
CONTROL_PLANE_NODE = "emu-control-plane"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
CONTROL_PLANE_TAINT: Obj = {"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}
#: The control-plane Node's address: outside the workers' ``10.0.x.y`` (`kubelet.node_ip`);
#: its Pod CIDR is ``10.244.0.0/24``, as a kind control plane's.
CONTROL_PLANE_IP = "10.1.0.2"
#: kube-apiserver's secure port, where ``default/kubernetes`` points.
APISERVER_PORT = 6443
KUBERNETES_CLUSTER_IP = "10.96.0.1"
DNS_CLUSTER_IP = "10.96.0.10"
SYSTEM_NAMESPACE = "kube-system"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: The images of a v1.33 kubeadm control plane (the component images take the cluster's
#: `KubeConfig.kubernetes_version`).
ETCD_IMAGE = "registry.k8s.io/etcd:3.5.21-0"
COREDNS_IMAGE = "registry.k8s.io/coredns/coredns:v1.12.0"
COREDNS_REPOSITORY = "coredns/coredns"

_RETRY = 1.0


# -- the control plane's static Pods ---------------------------------------------------------------

def _static_pod(component: str, image: str, command: list[str], cpu: str) -> Obj:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": component, "namespace": SYSTEM_NAMESPACE,
                     "labels": {"component": component, "tier": "control-plane"}},
        "spec": {
            "containers": [{"name": component, "image": image, "command": command,
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {"requests": {"cpu": cpu}}}],
            "hostNetwork": True, "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
            "priority": 2000001000, "priorityClassName": "system-node-critical",
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
        },
    }


def static_pods(version: str, ip: str = CONTROL_PLANE_IP) -> list[Obj]:
    """The manifests kubeadm writes to ``/etc/kubernetes/manifests`` (the parts a reader of
    ``kubectl get pod -o yaml`` looks at; no probes, see docs/deviations.md)."""
    return [
        _static_pod("etcd", ETCD_IMAGE, [
            "etcd", f"--advertise-client-urls=https://{ip}:2379", "--data-dir=/var/lib/etcd",
            f"--listen-client-urls=https://127.0.0.1:2379,https://{ip}:2379",
            "--name=" + CONTROL_PLANE_NODE], "100m"),
        _static_pod("kube-apiserver", f"registry.k8s.io/kube-apiserver:{version}", [
            "kube-apiserver", f"--advertise-address={ip}", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction", "--etcd-servers=https://127.0.0.1:2379",
            f"--secure-port={APISERVER_PORT}", "--service-cluster-ip-range=10.96.0.0/16"],
            "250m"),
        _static_pod("kube-controller-manager",
                    f"registry.k8s.io/kube-controller-manager:{version}", [
                        "kube-controller-manager", "--allocate-node-cidrs=true",
                        "--cluster-cidr=10.244.0.0/16", "--controllers=*,bootstrapsigner,"
                        "tokencleaner", "--leader-elect=true",
                        "--service-cluster-ip-range=10.96.0.0/16"], "200m"),
        _static_pod("kube-scheduler", f"registry.k8s.io/kube-scheduler:{version}", [
            "kube-scheduler", "--bind-address=127.0.0.1", "--leader-elect=true"], "100m"),
    ]


def preloaded_images(version: str) -> list[str]:
    """The images a kind node image ships (the control plane's, CoreDNS, kube-proxy): no
    system Pod pulls."""
    return [*(c["image"] for p in static_pods(version) for c in p["spec"]["containers"]),
            COREDNS_IMAGE, f"registry.k8s.io/kube-proxy:{version}"]


def config_hash(manifest: Obj) -> str:
    """The kubelet's ``kubernetes.io/config.hash`` of a static Pod (an md5 of its manifest
    there; any stable digest does)."""
    return hashlib.md5(repr(sorted(manifest["spec"].items())).encode(),
                       usedforsecurity=False).hexdigest()


def mirror_pod(manifest: Obj, node: Obj, seen: float) -> Obj:
    """``mirrorClient.CreateMirrorPod``: the static Pod named ``<name>-<node>``, bound to the
    Node, with the config annotations and an ownerReference to the Node."""
    meta = manifest["metadata"]
    node_meta = node["metadata"]
    digest = config_hash(manifest)
    annotations = {
        MIRROR_ANNOTATION: digest, "kubernetes.io/config.hash": digest,
        "kubernetes.io/config.seen": clock.rfc3339_micro(seen),
        "kubernetes.io/config.source": "file",
    }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{node_meta['name']}", "namespace": meta["namespace"],
            "labels": dict(meta["labels"]), "annotations": annotations,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_meta["name"],
                                 "uid": node_meta["uid"], "controller": True}],
        },
        "spec": {**manifest["spec"], "nodeName": node_meta["name"]},
    }


def is_mirror_pod(pod: Obj) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


# -- kubeadm's addons ------------------------------------------------------------------------------

_COREFILE = """.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
"""


def addons(version: str) -> list[Obj]:
    """What ``kubeadm init phase addon all`` applies: CoreDNS (ServiceAccount, ConfigMap,
    Deployment, the ``kube-dns`` Service) and kube-proxy (ServiceAccount, ConfigMap,
    DaemonSet). CoreDNS is pinned to the control plane (see docs/deviations.md)."""
    ns = SYSTEM_NAMESPACE
    dns_labels = {"k8s-app": "kube-dns"}
    control_plane_toleration = {"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}
    coredns = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": ns, "labels": dict(dns_labels)},
        "spec": {
            "replicas": 2, "selector": {"matchLabels": dict(dns_labels)},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}},
            "template": {
                "metadata": {"labels": dict(dns_labels)},
                "spec": {
                    "priorityClassName": "system-cluster-critical",
                    "serviceAccountName": "coredns",
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                    control_plane_toleration],
                    "nodeSelector": {"kubernetes.io/os": "linux", CONTROL_PLANE_LABEL: ""},
                    "containers": [{
                        "name": "coredns", "image": COREDNS_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "args": ["-conf", "/etc/coredns/Corefile"],
                        "resources": {"limits": {"memory": "170Mi"},
                                      "requests": {"cpu": "100m", "memory": "70Mi"}},
                        "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                  {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                                  {"containerPort": 9153, "name": "metrics",
                                   "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080},
                                          "initialDelaySeconds": 60, "timeoutSeconds": 5,
                                          "successThreshold": 1, "failureThreshold": 5},
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}},
                        "volumeMounts": [{"name": "config-volume",
                                          "mountPath": "/etc/coredns", "readOnly": True}],
                    }],
                    "dnsPolicy": "Default",
                    "volumes": [{"name": "config-volume", "configMap": {
                        "name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}],
                },
            },
        },
    }
    kube_dns = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": ns,
                     "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                                "kubernetes.io/name": "CoreDNS"},
                     "annotations": {"prometheus.io/port": "9153",
                                     "prometheus.io/scrape": "true"}},
        "spec": {"clusterIP": DNS_CLUSTER_IP, "selector": dict(dns_labels), "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
            {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153}]},
    }
    proxy_labels = {"k8s-app": "kube-proxy"}
    kube_proxy = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "kube-proxy", "namespace": ns, "labels": dict(proxy_labels)},
        "spec": {
            "selector": {"matchLabels": dict(proxy_labels)},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {
                "metadata": {"labels": dict(proxy_labels)},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": "kube-proxy", "hostNetwork": True,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{
                        "name": "kube-proxy", "image": f"registry.k8s.io/kube-proxy:{version}",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["/usr/local/bin/kube-proxy",
                                    "--config=/var/lib/kube-proxy/config.conf",
                                    "--hostname-override=$(NODE_NAME)"],
                        "env": [{"name": "NODE_NAME", "valueFrom": {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "kube-proxy",
                                          "mountPath": "/var/lib/kube-proxy"}],
                    }],
                    "volumes": [{"name": "kube-proxy", "configMap": {"name": "kube-proxy"}}],
                },
            },
        },
    }

    def service_account(name: str) -> Obj:
        return {"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": ns}}

    return [
        service_account("coredns"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": ns},
         "data": {"Corefile": _COREFILE}},
        coredns, kube_dns,
        service_account("kube-proxy"),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "kube-proxy", "namespace": ns, "labels": dict(proxy_labels)},
         "data": {"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                                 "kind: KubeProxyConfiguration\nclusterCIDR: 10.244.0.0/16\n"
                                 "mode: iptables\n"}},
        kube_proxy,
    ]


def boot(cluster: KubeCluster) -> None:
    """Write the standard cluster as ``kind create cluster`` hands it over, before any process
    runs: the control-plane Node, the mirror Pods, kube-apiserver's ``default/kubernetes``,
    each Namespace's ServiceAccount and root-CA ConfigMap, kind's default ``standard``
    StorageClass, kubeadm's `addons` with their
    ReplicaSet and Pods (bound, their containers started on their Nodes' runtimes) and the
    status each owner would write. Each object is written under its component's name,
    straight into the API server: the boot's own scheduling, image pulls and Events are not
    replayed (see docs/deviations.md). What comes next is ordinary: every kubelet adopts its
    running containers, the controllers find their objects as they would have left them, and
    from then on they own them.
    """
    from .daemonsets import (
        calculate_ds_status,
        daemon_pod_tolerations,
        new_daemon_pod,
        node_should_run_daemon_pod,
    )
    from .deployments import (
        REVISION_ANNOTATION,
        calculate_deployment_status,
        calculate_rs_status,
        new_replica_pod,
        new_replica_set,
    )
    from .volumes import standard_storage_class

    api = cluster.world.api  # type: ignore[attr-defined]
    # kube-apiserver's ServiceAccount admission (a kind cluster has the ServiceAccounts it
    # looks up; a bare world has none, so it stays off there)
    api.service_account_admission = True
    version = cluster.config.kubernetes_version
    cp = cluster.control_plane
    assert cp is not None
    cp_kubelet = f"kubelet-{cp}"
    node = api.create(cluster.kubelets[cp].node_object(), caller=cp_kubelet)
    for manifest in cluster.static_pods.get(cp, []):
        _run_pod(cluster, api, cp, mirror_pod(manifest, node, 0.0), cp_kubelet)
    for obj in (kubernetes_service(), kubernetes_endpoints(CONTROL_PLANE_IP),
                kubernetes_endpoint_slice(CONTROL_PLANE_IP)):
        api.create(obj, caller="kube-apiserver")
    for ns in api.list("Namespace")["items"]:
        name = ns["metadata"]["name"]
        api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": name}},
                   caller="serviceaccount-controller")
        api.create(root_ca_configmap(name, root_ca_pem(cluster.world.seed)),
                   caller="root-ca-cert-publisher")
    # kind's default StorageClass (its local-path provisioner is not a Pod here: the
    # persistentvolume-controller provisions for it, see docs/deviations.md)
    api.create(standard_storage_class(), caller="kind")
    for obj in addons(version):
        created = api.create(obj, caller="kubeadm")
        if created["kind"] == "Deployment":
            spec = created["spec"]
            replicas = int(spec.get("replicas", 1))
            rs = api.create(new_replica_set(created, template_hash(spec["template"]), replicas,
                                            []), caller="deployment-controller")
            pods = []
            for _ in range(replicas):
                pod = new_replica_pod(rs)
                pod["spec"] = {**pod["spec"], "nodeName": cp}  # its nodeSelector's one Node
                pods.append(_run_pod(cluster, api, cp, pod, "replicaset-controller"))
            rs_status, _ = calculate_rs_status(rs, pods, 0.0)
            rs = api.update_status({**rs, "status": rs_status}, caller="replicaset-controller")
            revision = rs["metadata"]["annotations"][REVISION_ANNOTATION]
            meta = {**created["metadata"], "annotations": {
                **(created["metadata"].get("annotations") or {}), REVISION_ANNOTATION: revision}}
            api.update_status({**created, "metadata": meta,
                               "status": calculate_deployment_status(created, rs, [], 0.0)},
                              caller="deployment-controller")
        elif created["kind"] == "DaemonSet":
            template_spec = created["spec"]["template"]["spec"]
            tolerations = daemon_pod_tolerations(template_spec)
            by_node: dict[str, list[Obj]] = {}
            placement: dict[str, tuple[bool, bool]] = {}
            for name in sorted([*cluster.node_names, cp]):
                placement[name] = node_should_run_daemon_pod(
                    cluster.kubelets[name].node_object(), tolerations, template_spec)
                if placement[name][0]:
                    pod = new_daemon_pod(created, name)
                    pod["spec"]["nodeName"] = name
                    by_node[name] = [_run_pod(cluster, api, name, pod, "daemonset-controller")]
            ds_status, _ = calculate_ds_status(created, by_node, placement, 0.0)
            api.update_status({**created, "status": ds_status}, caller="daemonset-controller")


def _run_pod(cluster: KubeCluster, api: Any, node: str, pod: Obj, caller: str) -> Obj:
    """Create the bound Pod, start its containers on the Node's runtime (the kubelet adopts
    them as after its own restart) and write the status the kubelet will find (a container
    with a readiness probe has passed it; the others' programs are ready as they start)."""
    from .kubelet import PodWorker

    pod = api.create(pod, caller=caller)
    kubelet = cluster.kubelets[node]
    runtime = cluster.runtime_for(node, kubelet.index)
    box = runtime.sandbox(pod)
    for c in pod["spec"].get("containers") or []:
        rec = runtime.create_container(box, c, init=False, attempt=0, delay=0.0, pod=pod,
                                       env={}, volumes={}, at_once=True)
        if c.get("readinessProbe"):
            rec.probe_ready = True
    worker = PodWorker(kubelet, pod)
    worker.assume_ready = True
    status = worker.generate_status(pod, box, terminal=False)
    out: Obj = api.update_status({**pod, "status": status}, caller=f"kubelet-{node}")
    return out


def root_ca_pem(seed: int) -> str:
    """The cluster's root CA certificate (``kube-root-ca.crt``'s ``ca.crt``) of worlds with
    ``seed``: the world's cluster CA (`emu.apiserver.cluster_ca`), which the csrsigning
    controller signs with."""
    from ..apiserver.cluster_ca import cluster_ca

    return cluster_ca(seed).cert_pem


def root_ca_configmap(namespace: str, ca_pem: str) -> Obj:
    """``kube-root-ca.crt`` as the root-CA publisher writes it."""
    from .serviceaccounts import DESCRIPTION, ROOT_CA_CONFIGMAP, ROOT_CA_DESCRIPTION

    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": namespace,
                         "annotations": {DESCRIPTION: ROOT_CA_DESCRIPTION}},
            "data": {"ca.crt": ca_pem}}


# -- CoreDNS's image -------------------------------------------------------------------------------

async def coredns_program(ctx: ContainerContext) -> int:
    """``coredns -conf /etc/coredns/Corefile``: serves DNS on 53, ``/health`` on 8080 (the
    liveness probe), ``/ready`` on 8181 (the readiness probe) and metrics on 9153. Names are
    resolved by the emulated network, so the DNS port answers nothing in particular."""

    async def http(payload: Any, info: CallInfo) -> dict[str, Any]:
        path = str((payload or {}).get("path", "")) if isinstance(payload, dict) else ""
        if path.split("?", 1)[0] in ("/health", "/ready"):
            return {"status": 200, "headers": {}, "body": "OK"}
        if path.split("?", 1)[0] == "/metrics":
            return {"status": 200, "headers": {}, "body": "# coredns metrics\n"}
        return {"status": 404, "headers": {}, "body": "404 page not found\n"}

    async def dns(payload: Any, info: CallInfo) -> None:
        return None

    ctx.listen(53, dns)
    for port in (8080, 8181, 9153):
        ctx.listen(port, http)
    ctx.set_ready(True)
    await asyncio.Event().wait()
    return 0


# -- kube-apiserver's endpoint reconciler --------------------------------------------------------

def kubernetes_service() -> Obj:
    """``default/kubernetes`` as the bootstrap controller creates it."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": KUBERNETES_CLUSTER_IP, "type": "ClusterIP",
                     "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                "targetPort": APISERVER_PORT}]}}


def kubernetes_endpoints(ip: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}],
                         "ports": [{"name": "https", "port": APISERVER_PORT,
                                    "protocol": "TCP"}]}]}


def kubernetes_endpoint_slice(ip: str) -> Obj:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": APISERVER_PORT, "protocol": "TCP"}]}


class APIServerEndpoints:
    """kube-apiserver's bootstrap controller and lease endpoint reconciler, for one API server
    (``pkg/controlplane/controller/kubernetesservice``: ``CreateOrUpdateMasterServiceIfNeeded``;
    ``pkg/controlplane/reconcilers``: ``ReconcileEndpoints`` through the endpoints adapter,
    which writes the Endpoints and the EndpointSlice): ``default/kubernetes`` exists with its
    port, and its Endpoints and EndpointSlice list the control plane at `APISERVER_PORT`.
    Kube re-checks every 10 s; this process acts on each change it watches instead."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.client: Client | None = None
        self._wake = asyncio.Event()

    async def main(self, process: Process) -> None:
        self.client = Client(self.cluster.world.network, process=process)
        self._wake = asyncio.Event()
        informers = []
        for kind in ("Service", "Endpoints", "EndpointSlice"):
            inf = Informer(self.client, kind, namespace="default",
                           field_selector="metadata.name=kubernetes")
            inf.add_event_handler(FuncHandler(
                on_add=lambda _o: self._wake.set(), on_update=lambda _o, _n: self._wake.set(),
                on_delete=lambda _o: self._wake.set()))
            process.spawn(inf.run())
            informers.append(inf)
        for inf in informers:
            await inf.wait_synced()
        services, endpoints, slices = informers
        while True:
            self._wake.clear()
            try:
                await self.reconcile(services, endpoints, slices)
            except (ApiError, NetworkError) as err:
                process.log("endpoint_reconcile_failed", error=str(err))
                await process.sleep(_RETRY)
                continue
            await self._wake.wait()

    async def reconcile(self, services: Informer, endpoints: Informer, slices: Informer) -> None:
        assert self.client is not None
        ip = CONTROL_PLANE_IP
        want_svc = kubernetes_service()
        svc = services.get("kubernetes", "default")
        if svc is None:
            await self._create(want_svc)
        elif (svc.get("spec") or {}).get("ports") != want_svc["spec"]["ports"]:
            svc = dict(svc)
            svc["spec"] = {**svc["spec"], "ports": want_svc["spec"]["ports"]}
            await self.client.update(svc)
        for informer, want, fields in (
                (endpoints, kubernetes_endpoints(ip), ("subsets",)),
                (slices, kubernetes_endpoint_slice(ip), ("addressType", "endpoints", "ports"))):
            have = informer.get("kubernetes", "default")
            if have is None:
                await self._create(want)
            elif any(have.get(f) != want[f] for f in fields):
                await self.client.update({**have, **{f: want[f] for f in fields}})

    async def _create(self, obj: Obj) -> None:
        assert self.client is not None
        try:
            await self.client.create(obj)
        except ApiError as err:
            if not is_already_exists(err):
                raise


def system_pods_ready(cluster: KubeCluster) -> bool:
    """Whether the standard cluster's system Pods are there and Ready: the static Pods, every
    replica of CoreDNS and a kube-proxy Pod per Node (read from the API server directly, as an
    observer)."""
    api = getattr(cluster.world, "api", None)
    if api is None:
        return True
    try:
        pods = api.list("Pod", SYSTEM_NAMESPACE)["items"]
    except ApiError as err:
        if is_not_found(err):
            return False
        raise
    ready = sum(1 for p in pods if any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (p.get("status") or {}).get("conditions") or []))
    wanted = len(static_pods(cluster.config.kubernetes_version)) + 2 + \
        len(cluster.node_names) + 1
    return ready >= wanted


def register_programs(world: Any) -> None:
    """The system images' programs (CoreDNS); the rest run `idle_program`."""
    world.programs.register(COREDNS_REPOSITORY, coredns_program)
