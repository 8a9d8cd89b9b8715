"""GCS fault tolerance pieces that are not Pod env: the RocksDB PVC and the Redis finalizer rules.

Port of ``ray-operator/controllers/ray/common/gcs_ft.go`` (``BuildGCSStoragePVC``) and of the small
GCS-FT helpers of raycluster_controller.go that decide the finalizer flow (SPEC §2.11). Enablement and
backend selection live in `emu.kuberay.utils.util` (``is_gcs_fault_tolerance_enabled``,
``get_gcs_fault_tolerance_backend``) and the storage namespace in
`emu.kuberay.common.pod.get_external_storage_namespace`, where Go has them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..utils import constant as C
from ..utils import util
from ..utils.util import EMPTY_ENV, Obj, dig
from .pod import get_external_storage_namespace

__all__ = [
    "build_gcs_storage_pvc",
    "get_external_storage_namespace",
    "get_gcs_ft_deletion_timeout",
    "has_gcs_ft_finalizer",
    "is_gcs_ft_redis_cleanup_enabled",
]


def build_gcs_storage_pvc(instance: Mapping[str, Any]) -> Obj:
    """Port of `BuildGCSStoragePVC` (gcs_ft.go): the operator-managed ``<cluster>-gcs-pvc``.

    Access modes ``storage.accessModes`` or [ReadWriteOnce], size ``storage.size`` or 1Gi, the given
    storage class, label ``ray.io/cluster``. The caller sets (or, for Retain, omits) the owner.
    """
    storage = dig(instance, "spec", "gcsFaultToleranceOptions", "storage") or {}
    spec: Obj = {
        "accessModes": list(storage.get("accessModes") or ["ReadWriteOnce"]),
        "resources": {"requests": {"storage": storage.get("size") or C.GCS_STORAGE_DEFAULT_SIZE}},
    }
    if storage.get("storageClassName") is not None:
        spec["storageClassName"] = storage["storageClassName"]
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": util.get_gcs_storage_pvc_name(instance),
                     "namespace": dig(instance, "metadata", "namespace"),
                     "labels": {C.RAY_CLUSTER_LABEL_KEY: dig(instance, "metadata", "name") or ""}},
        "spec": util.deep_copy(spec),
    }


def is_gcs_ft_redis_cleanup_enabled(instance: Mapping[str, Any], env: Mapping[str, str] = EMPTY_ENV) -> bool:
    """The condition under which `rayClusterReconcile` (raycluster_controller.go) runs the Redis finalizer.

    ``ENABLE_GCS_FT_REDIS_CLEANUP`` is not "false", GCS FT is enabled (options or legacy annotation)
    and the backend is not RocksDB.
    """
    if env.get(C.ENABLE_GCS_FT_REDIS_CLEANUP, "").lower() == "false":
        return False
    spec = instance.get("spec") or {}
    if not util.is_gcs_fault_tolerance_enabled(spec, util.annotations_of(instance)):
        return False
    return not util.is_gcs_fault_tolerance_embedded(spec.get("gcsFaultToleranceOptions"))


def has_gcs_ft_finalizer(instance: Mapping[str, Any]) -> bool:
    """Port of `hasGCSFTFinalizer` (raycluster_controller.go)."""
    return C.GCS_FAULT_TOLERANCE_REDIS_CLEANUP_FINALIZER in (dig(instance, "metadata", "finalizers") or [])


def get_gcs_ft_deletion_timeout(instance: Mapping[str, Any]) -> float:
    """Port of `getGCSFTDeletionTimeout` (raycluster_controller.go), in seconds.

    Annotation ``ray.io/gcs-ft-deletion-timeout`` as a positive integer, else 300.
    """
    raw = util.annotations_of(instance).get(C.RAY_CLUSTER_GCSFT_DELETION_TIMEOUT_ANNOTATION)
    if raw is not None and re.fullmatch(r"[+-]?[0-9]+", raw) and int(raw) > 0:  # strconv.Atoi
        return float(int(raw))
    return float(C.RAYCLUSTER_GCS_FT_DELETION_TIMEOUT_DEFAULT)
