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

A volume's directory is ``<workdir>/volumes/<pv name>`` (or its ``hostPath`` / ``local`` path,
placed inside the work directory); the kubelet mounts it into `ContainerContext.volumes`, and it
survives the Pods that used it. Not emulated: PVC protection finalizers, volume expansion,
WaitForFirstConsumer, access-mode enforcement between Nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_already_exists, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.process import Process
from .common import KeyQueue, Obj, parse_quantity

if TYPE_CHECKING:
    from .cluster import KubeCluster

DEFAULT_STORAGE_CLASS = "standard"
PROVISIONER = "emu.kube/hostpath"


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

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
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
            pv = await self.provision(pvc)
        await self.bind(pvc, pv)

    async def provision(self, pvc: Obj) -> Obj:
        assert self.client is not None and self.process is not None
        meta = pvc["metadata"]
        spec = pvc.get("spec") or {}
        name = f"pvc-{meta['uid']}"
        path = self.cluster.workdir / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        pv = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": name,
                           "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
              "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests")
                                                or {}).get("storage", "1Gi")},
                       "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                       "persistentVolumeReclaimPolicy":
                           self.cluster.config.provisioned_reclaim_policy,
                       "storageClassName": _claim_class(pvc),
                       "volumeMode": spec.get("volumeMode", "Filesystem"),
                       "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
                       "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                    "namespace": meta["namespace"], "name": meta["name"],
                                    "uid": meta["uid"]}}}
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
