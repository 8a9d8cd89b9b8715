"""PersistentVolumeClaims bound to PersistentVolumes backed by a directory that outlives Pods.

`PersistentVolumeController` (``pkg/controller/volume/persistentvolume``, ``syncClaim``,
``syncVolume``, and a hostPath provisioner in place of a CSI driver):
- a pending claim binds to the smallest Available volume of its storage class that has its access
  modes and enough capacity (a volume pre-bound through ``claimRef`` or ``spec.volumeName`` is
  honoured); with none, and a storage class other than ``""``, a volume ``pvc-<claim uid>`` is
  provisioned with `KubeConfig.provisioned_reclaim_policy` (a default StorageClass's ``Delete``);
- binding writes the volume's ``claimRef`` and ``Bound`` phase, then the claim's ``volumeName``,
  the ``bind-completed`` annotations and its ``Bound`` status with capacity and access modes;
- when the claim is gone the volume is ``Released``; with ``Delete`` it is deleted and its
  directory removed, with ``Retain`` both stay.

A claim that names a StorageClass follows the class (``provisionClaim``,
``setClaimProvisioner`` and sig-storage-lib-external-provisioner's ``provisionClaimOperation``):
- a missing class leaves it Pending with the Warning ``ProvisioningFailed``
  (``storageclass.storage.k8s.io "x" not found``), retried when the class appears;
- ``volumeBindingMode: WaitForFirstConsumer``: the Normal ``WaitForFirstConsumer`` Event until
  the scheduler picks a Node for a Pod using the claim and writes the claim's
  ``volume.kubernetes.io/selected-node`` annotation;
- then the claim gets the ``storage-provisioner`` annotations and the Normal
  ``ExternalProvisioning`` Event, and the class's provisioner (played by this process for any
  provisioner name) records ``Provisioning``, creates ``pvc-<uid>`` with the class's
  ``reclaimPolicy``, the ``pv.kubernetes.io/provisioned-by`` annotation and, for a selected
  Node, node affinity to it, and records ``ProvisioningSucceeded``.
A claim with no class at all (none given and no default StorageClass for the DefaultStorageClass
admission to fill in) is provisioned as before, through the implicit class ``standard``
(`DEFAULT_STORAGE_CLASS`): worlds without StorageClasses keep working as they did.
StorageClasses are watched only from the first claim that names one.

A volume's directory is ``<workdir>/volumes/<pv name>`` (or its ``hostPath`` / ``local`` path,
placed inside the work directory); the kubelet mounts it into `ContainerContext.volumes`, and it
survives the Pods that used it. Not emulated: PVC protection finalizers, volume expansion,
access-mode enforcement between Nodes, retroactive default class assignment.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.process import Process
from .common import KeyQueue, Obj, parse_quantity
from .events import EventRecorder

if TYPE_CHECKING:
    from .cluster import KubeCluster

DEFAULT_STORAGE_CLASS = "standard"
PROVISIONER = "emu.kube/hostpath"
#: The annotation the scheduler writes on a WaitForFirstConsumer claim (``AnnSelectedNode``).
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The annotations naming the provisioner a claim waits for (``setClaimProvisioner``).
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
#: The annotation marking the default StorageClass (DefaultStorageClass admission).
IS_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def standard_storage_class() -> Obj:
    """kind's default StorageClass: ``standard``, rancher's local-path provisioner,
    WaitForFirstConsumer, Delete (what `install_standard_storage_class` creates)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "standard", "annotations": {IS_DEFAULT_CLASS: "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}


async def install_standard_storage_class(sim: Any) -> dict[str, Any]:
    """Create kind's ``standard`` StorageClass in ``sim`` (a `emu.Simulation`) as the cluster's
    default class, so claims without a class get it and are provisioned when their first Pod is
    scheduled; returns the stored class (an existing ``standard`` class is left as it is)."""
    client = sim.client("storage-class-install")
    try:
        created: Obj = await client.create(standard_storage_class())
        return created
    except ApiError as err:
        if not is_already_exists(err):
            raise
    found: Obj = await client.get("StorageClass", "standard")
    return found


def delayed_binding(storage_class: Obj | None) -> bool:
    """Whether a class binds its claims only once a Pod using them is scheduled."""
    return storage_class is not None and \
        storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"


def explicit_class(pvc: Obj) -> str | None:
    """The StorageClass a claim names (None when it names none, or ``""``: no class)."""
    cls = (pvc.get("spec") or {}).get("storageClassName")
    return str(cls) if cls else None


def pv_directory(cluster: KubeCluster, pv: Obj) -> Path:
    """The host directory behind a PersistentVolume, created if missing."""
    spec = pv.get("spec") or {}
    raw = (spec.get("hostPath") or {}).get("path") or (spec.get("local") or {}).get("path")
    workdir = cluster.workdir
    if raw:
        path = Path(raw)
        if workdir not in path.parents and path != workdir:
            path = workdir / "hostpath" / str(raw).lstrip("/")
    else:
        path = workdir / "volumes" / pv["metadata"]["name"]
    path.mkdir(parents=True, exist_ok=True)
    return path


def _storage(obj: Obj, *path: str) -> float:
    cur: object = obj
    for p in path:
        cur = (cur or {}).get(p) if isinstance(cur, dict) else None
    return parse_quantity(cur) if cur is not None else 0.0


def _claim_class(pvc: Obj) -> str:
    cls = (pvc.get("spec") or {}).get("storageClassName")
    return DEFAULT_STORAGE_CLASS if cls is None else str(cls)


class PersistentVolumeController:
    """The PV controller process."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.claims: Informer | None = None
        self.volumes: Informer | None = None
        self.queue: KeyQueue | None = None
        #: StorageClasses, watched from the first claim that names one (`_need_classes`).
        self.classes: Informer | None = None
        self.events: EventRecorder | None = None

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
        self.events = EventRecorder(self.client, process, "persistentvolume-controller")
        self.queue = KeyQueue(process, "persistentvolume")
        self.claims = Informer(self.client, "PersistentVolumeClaim")
        self.volumes = Informer(self.client, "PersistentVolume")
        self.claims.add_event_handler(FuncHandler(
            on_add=self._claim_changed, on_update=lambda _o, n: self._claim_changed(n),
            on_delete=self._claim_deleted))
        self.volumes.add_event_handler(FuncHandler(
            on_add=self._volume_changed, on_update=lambda _o, n: self._volume_changed(n)))
        for inf in (self.claims, self.volumes):
            process.spawn(inf.run())
        for inf in (self.claims, self.volumes):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _claim_changed(self, pvc: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"claim:{pvc['metadata']['namespace']}/{pvc['metadata']['name']}")

    async def _need_classes(self) -> Informer:
        """The StorageClass informer, started (and synced) on first use."""
        assert self.client is not None and self.process is not None
        if self.classes is None:
            self.classes = Informer(self.client, "StorageClass")
            self.classes.add_event_handler(FuncHandler(
                on_add=self._class_changed, on_update=lambda _o, n: self._class_changed(n)))
            self.process.spawn(self.classes.run())
        await self.classes.wait_synced()
        return self.classes

    def _class_changed(self, storage_class: Obj) -> None:
        """A class appeared or changed: its pending claims are synced again."""
        assert self.queue is not None and self.claims is not None
        name = storage_class["metadata"]["name"]
        for pvc in self.claims.peek_list():
            if explicit_class(pvc) == name and (pvc.get("status") or {}).get("phase") != "Bound":
                self._claim_changed(pvc)

    def _claim_deleted(self, pvc: Obj) -> None:
        assert self.queue is not None
        volume = (pvc.get("spec") or {}).get("volumeName")
        if volume:
            self.queue.add(f"volume:{volume}")

    def _volume_changed(self, pv: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"volume:{pv['metadata']['name']}")
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref:
            self.queue.add(f"claim:{ref.get('namespace')}/{ref.get('name')}")

    async def sync(self, key: str) -> None:
        kind, _, rest = key.partition(":")
        if kind == "claim":
            await self.sync_claim(rest)
        else:
            await self.sync_volume(rest)

    # -- claims ----------------------------------------------------------------------------------

    def find_volume(self, pvc: Obj) -> Obj | None:
        """``findBestMatchForClaim``: the smallest fitting Available volume."""
        assert self.volumes is not None
        spec = pvc.get("spec") or {}
        want = _storage(spec, "resources", "requests", "storage")
        modes = set(spec.get("accessModes") or [])
        cls = _claim_class(pvc)
        uid = pvc["metadata"]["uid"]
        best: tuple[float, str, Obj] | None = None
        for pv in self.volumes.peek_list():
            pspec = pv.get("spec") or {}
            ref = pspec.get("claimRef")
            if ref:
                if ref.get("uid") == uid or (not ref.get("uid") and ref.get("name") ==
                                             pvc["metadata"]["name"] and ref.get("namespace")
                                             == pvc["metadata"]["namespace"]):
                    return pv
                continue
            if (pv.get("status") or {}).get("phase") not in (None, "Pending", "Available"):
                continue
            if str(pspec.get("storageClassName") or "") != cls and not (
                    cls == DEFAULT_STORAGE_CLASS and spec.get("storageClassName") is None
                    and not pspec.get("storageClassName")):
                continue
            if not modes <= set(pspec.get("accessModes") or []):
                continue
            size = _storage(pspec, "capacity", "storage")
            if size < want:
                continue
            cand = (size, pv["metadata"]["name"], pv)
            if best is None or cand[:2] < best[:2]:
                best = cand
        return best[2] if best is not None else None

    async def sync_claim(self, key: str) -> None:
        """``syncClaim``: bind a pending claim (provisioning a volume when none fits)."""
        assert self.claims is not None and self.volumes is not None and self.client is not None
        ns, _, name = key.partition("/")
        pvc = self.claims.get(name, ns)
        if pvc is None or pvc["metadata"].get("deletionTimestamp"):
            return
        spec = pvc.get("spec") or {}
        if (pvc.get("status") or {}).get("phase") == "Bound" and spec.get("volumeName"):
            return
        pv = None
        if spec.get("volumeName"):
            pv = self.volumes.get(spec["volumeName"])
            if pv is None:
                return  # waits for that volume to appear
        else:
            pv = self.find_volume(pvc)
        if pv is None:
            if _claim_class(pvc) == "":
                return
            if explicit_class(pvc) is not None:
                pv = await self.provision_claim(pvc)
                if pv is None:
                    return
            else:
                pv = await self.provision(pvc)
        await self.bind(pvc, pv)

    def _event(self, obj: Obj, event_type: str, reason: str, message: str,
               provisioner: str | None = None) -> None:
        assert self.events is not None
        self.events.event({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **obj},
                          event_type, reason, message, component=provisioner)

    async def provision_claim(self, pvc: Obj) -> Obj | None:
        """``provisionClaim`` for a claim naming a StorageClass: the class's volume, or None
        while the claim must wait (class missing, no consumer yet)."""
        assert self.client is not None
        classes = await self._need_classes()
        name = explicit_class(pvc)
        assert name is not None
        storage_class = classes.get(name)
        if storage_class is None:
            self._event(pvc, "Warning", "ProvisioningFailed",
                        f'storageclass.storage.k8s.io "{name}" not found')
            return None
        annotations = pvc["metadata"].get("annotations") or {}
        node = annotations.get(SELECTED_NODE)
        if delayed_binding(storage_class) and not node:
            self._event(pvc, "Normal", "WaitForFirstConsumer",
                        "waiting for first consumer to be created before binding")
            return None
        provisioner = str(storage_class.get("provisioner") or "")
        if annotations.get(STORAGE_PROVISIONER) != provisioner:
            pvc = await self.client.update({**pvc, "metadata": {**pvc["metadata"], "annotations": {
                **annotations, BETA_STORAGE_PROVISIONER: provisioner,
                STORAGE_PROVISIONER: provisioner}}})
            self._event(pvc, "Normal", "ExternalProvisioning",
                        f"Waiting for a volume to be created either by the external provisioner "
                        f"'{provisioner}' or manually by the system administrator. If volume "
                        f"creation is delayed, please verify that your volume creation is "
                        f"healthy.")
        meta = pvc["metadata"]
        self._event(pvc, "Normal", "Provisioning", f"External provisioner is provisioning "
                    f'volume for claim "{meta["namespace"]}/{meta["name"]}"', provisioner)
        pv = await self.provision(pvc, storage_class, node)
        self._event(pvc, "Normal", "ProvisioningSucceeded",
                    f"Successfully provisioned volume {pv['metadata']['name']}", provisioner)
        return pv

    async def provision(self, pvc: Obj, storage_class: Obj | None = None,
                        node: str | None = None) -> Obj:
        """Create the claim's volume ``pvc-<uid>``: the class's provisioner and reclaim policy
        (the implicit class's without one), pinned to ``node`` when the scheduler chose it."""
        assert self.client is not None and self.process is not None
        meta = pvc["metadata"]
        spec = pvc.get("spec") or {}
        name = f"pvc-{meta['uid']}"
        path = self.cluster.workdir / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        if storage_class is None:
            provisioner = PROVISIONER
            reclaim = self.cluster.config.provisioned_reclaim_policy
        else:
            provisioner = str(storage_class.get("provisioner") or "")
            reclaim = str(storage_class.get("reclaimPolicy") or "Delete")
        pv: Obj = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": name,
                           "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
              "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests")
                                                or {}).get("storage", "1Gi")},
                       "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                       "persistentVolumeReclaimPolicy": reclaim,
                       "storageClassName": _claim_class(pvc),
                       "volumeMode": spec.get("volumeMode", "Filesystem"),
                       "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
                       "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                    "namespace": meta["namespace"], "name": meta["name"],
                                    "uid": meta["uid"]}}}
        if node:  # a node-local volume, as local-path provisions it
            pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                      "values": [node]}]}]}}
        # the path relative to the run's work directory: a temporary directory's name must not
        # reach the trace (the digest would differ between runs of the same seed)
        self.process.log("volume_provisioned", claim=f"{meta['namespace']}/{meta['name']}",
                         volume=name, path=str(path.relative_to(self.cluster.workdir)))
        try:
            return await self.client.create(pv)
        except ApiError as err:
            if not is_already_exists(err):
                raise
            return await self.client.get("PersistentVolume", name)

    async def bind(self, pvc: Obj, pv: Obj) -> None:
        """``bind``: the volume first (claimRef, Bound), then the claim."""
        assert self.client is not None
        meta = pvc["metadata"]
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
               "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
               "resourceVersion": meta["resourceVersion"]}
        if (pv.get("spec") or {}).get("claimRef") != ref:
            pv = await self.client.update({**pv, "spec": {**pv["spec"], "claimRef": ref}})
        if (pv.get("status") or {}).get("phase") != "Bound":
            pv = await self.client.update_status({**pv, "status": {"phase": "Bound"}})
        annotations = {**(meta.get("annotations") or {}),
                       "pv.kubernetes.io/bind-completed": "yes",
                       "pv.kubernetes.io/bound-by-controller": "yes"}
        pvc = await self.client.update({**pvc, "metadata": {**meta, "annotations": annotations},
                                        "spec": {**pvc["spec"],
                                                 "volumeName": pv["metadata"]["name"]}})
        await self.client.update_status({**pvc, "status": {
            "phase": "Bound", "accessModes": list(pv["spec"].get("accessModes") or []),
            "capacity": dict(pv["spec"].get("capacity") or {})}})

    # -- volumes ---------------------------------------------------------------------------------

    async def sync_volume(self, name: str) -> None:
        """``syncVolume``: release a volume whose claim is gone, then reclaim it."""
        assert self.claims is not None and self.volumes is not None and self.client is not None
        assert self.process is not None
        pv = self.volumes.get(name)
        if pv is None or pv["metadata"].get("deletionTimestamp"):
            return
        spec = pv.get("spec") or {}
        phase = (pv.get("status") or {}).get("phase")
        ref = spec.get("claimRef")
        if not ref:
            if phase != "Available":
                await self.client.update_status({**pv, "status": {"phase": "Available"}})
            return
        claim = self.claims.get(ref.get("name", ""), ref.get("namespace"))
        if claim is not None and (not ref.get("uid") or claim["metadata"]["uid"] == ref["uid"]):
            return
        if not ref.get("uid"):
            return  # pre-bound to a claim that does not exist yet
        try:
            live = await self.client.get("PersistentVolumeClaim", ref.get("name", ""),
                                         ref.get("namespace"))
            if live["metadata"]["uid"] == ref["uid"]:
                return  # the cache is behind
        except ApiError as err:
            if not is_not_found(err):
                raise
        if phase != "Released":
            pv = await self.client.update_status({**pv, "status": {"phase": "Released"}})
        if spec.get("persistentVolumeReclaimPolicy") == "Delete":
            directory = pv_directory(self.cluster, pv)
            self.process.log("volume_deleted", volume=name, path=str(directory))
            try:
                await self.client.delete("PersistentVolume", name)
            except ApiError as err:
                if not is_not_found(err):
                    raise
            self.cluster.remove_dir(directory)
