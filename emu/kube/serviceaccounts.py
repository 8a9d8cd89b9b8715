"""Two per-namespace controllers of kube-controller-manager that a standard cluster runs.

`ServiceAccountController` (``pkg/controller/serviceaccount/serviceaccounts_controller.go``:
``syncNamespace``, ``ServiceAccountsToEnsure``): every active Namespace has a ServiceAccount
``default``; one deleted is created again.

`RootCACertPublisher` (``pkg/controller/certificates/rootcacertpublisher/publisher.go``:
``syncNamespace``): every active Namespace has the ConfigMap ``kube-root-ca.crt`` whose
``ca.crt`` is the world's cluster CA (`emu.kube.standard.root_ca_pem`) with kube's description
annotation; one deleted is created again, one whose data or annotation changed is put back.

Both are keyed by Namespace, act on what their informers hold and skip a terminating
Namespace, as the real ones do. Tokens are not theirs: no token Secret is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.process import Process
from .common import KeyQueue, Obj

if TYPE_CHECKING:
    from .cluster import KubeCluster

DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
#: The annotation the publisher writes (``DescriptionAnnotation``).
DESCRIPTION = "kubernetes.io/description"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.")


class _PerNamespace:
    """Shared shape: a Namespace informer and one of the owned kind named ``name``, a queue of
    Namespace names, `sync` per Namespace."""

    kind = ""
    name = ""
    queue_name = ""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.client: Client | None = None
        self.namespaces: Informer | None = None
        self.owned: Informer | None = None
        self.queue: KeyQueue | None = None

    async def main(self, process: Process) -> None:
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, self.queue_name)
        self.namespaces = Informer(self.client, "Namespace")
        self.owned = Informer(self.client, self.kind, field_selector=f"metadata.name={self.name}")
        self.namespaces.add_event_handler(FuncHandler(
            on_add=self._ns_changed, on_update=lambda _o, n: self._ns_changed(n)))
        self.owned.add_event_handler(FuncHandler(
            on_update=lambda _o, n: self._owned_changed(n), on_delete=self._owned_changed))
        for inf in (self.namespaces, self.owned):
            process.spawn(inf.run())
        for inf in (self.namespaces, self.owned):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _ns_changed(self, ns: Obj) -> None:
        assert self.queue is not None
        self.queue.add(ns["metadata"]["name"])

    def _owned_changed(self, obj: Obj) -> None:
        assert self.queue is not None
        self.queue.add(obj["metadata"].get("namespace") or "default")

    def _active(self, namespace: str) -> bool:
        assert self.namespaces is not None
        ns = self.namespaces.get(namespace)
        return ns is not None and not ns["metadata"].get("deletionTimestamp") and \
            (ns.get("status") or {}).get("phase", "Active") == "Active"

    async def _create(self, obj: Obj) -> None:
        assert self.client is not None
        try:
            await self.client.create(obj)
        except ApiError as err:
            # gone meanwhile, or terminating: the Namespace's next event brings it back
            if not (is_already_exists(err) or is_not_found(err) or err.code == 403):
                raise

    async def sync(self, namespace: str) -> None:
        raise NotImplementedError


class ServiceAccountController(_PerNamespace):
    """The ServiceAccount controller process (``serviceaccount-controller``)."""

    kind = "ServiceAccount"
    name = DEFAULT_SERVICE_ACCOUNT
    queue_name = "serviceaccount"

    async def sync(self, namespace: str) -> None:
        """``syncNamespace``: create the ``default`` ServiceAccount where it is missing."""
        assert self.owned is not None
        if not self._active(namespace) or self.owned.get(self.name, namespace) is not None:
            return
        await self._create({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": self.name, "namespace": namespace}})


class RootCACertPublisher(_PerNamespace):
    """The root-CA publisher process (``root-ca-cert-publisher``)."""

    kind = "ConfigMap"
    name = ROOT_CA_CONFIGMAP
    queue_name = "root_ca_cert_publisher"

    def __init__(self, cluster: KubeCluster, ca_pem: str) -> None:
        super().__init__(cluster)
        self.ca_pem = ca_pem

    async def sync(self, namespace: str) -> None:
        """``syncNamespace``: create the ConfigMap, or put its data and annotation back."""
        assert self.owned is not None and self.client is not None
        if not self._active(namespace):
            return
        data = {"ca.crt": self.ca_pem}
        cm = self.owned.get(self.name, namespace)
        if cm is None:
            await self._create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": self.name, "namespace": namespace,
                                             "annotations": {DESCRIPTION: ROOT_CA_DESCRIPTION}},
                                "data": data})
            return
        annotations = dict(cm["metadata"].get("annotations") or {})
        if cm.get("data") == data and annotations.get(DESCRIPTION) == ROOT_CA_DESCRIPTION and \
                not cm.get("binaryData"):
            return
        annotations[DESCRIPTION] = ROOT_CA_DESCRIPTION
        cm = {**cm, "metadata": {**cm["metadata"], "annotations": annotations}, "data": data}
        cm.pop("binaryData", None)
        try:
            await self.client.update(cm)
        except ApiError as err:
            if not is_not_found(err):
                raise
