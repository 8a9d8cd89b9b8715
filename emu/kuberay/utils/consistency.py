"""Whether a freshly computed status differs enough from the stored one to be written.

Port of ``ray-operator/controllers/ray/utils/consistency.go``. Statuses are the ``status`` dicts of
the CRs; absent fields compare equal to their Go zero values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .features import DEFAULTS, RAY_SERVICE_INCREMENTAL_UPGRADE, FeatureGates

_REPLICA_FIELDS = ("readyWorkerReplicas", "availableWorkerReplicas", "desiredWorkerReplicas",
                   "minWorkerReplicas", "maxWorkerReplicas")


def _s(status: Mapping[str, Any] | None, key: str, zero: Any = "") -> Any:
    value = (status or {}).get(key)
    return zero if value is None else value


def _empty_as_none(value: Any) -> Any:
    return None if value in (None, {}, []) else value


def inconsistent_ray_cluster_status(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Port of `InconsistentRayClusterStatus` (consistency.go).

    Compares state, reason, the five replica counters, endpoints, head info and the whole
    conditions list; ``lastUpdateTime``, ``observedGeneration``, ``stateTransitionTimes`` and the
    desired resources do not trigger a write.
    """
    if _s(old, "state") != _s(new, "state") or _s(old, "reason") != _s(new, "reason"):
        return True
    if any(_s(old, f, 0) != _s(new, f, 0) for f in _REPLICA_FIELDS):
        return True
    if _empty_as_none(_s(old, "endpoints", None)) != _empty_as_none(_s(new, "endpoints", None)):
        return True
    if _empty_as_none(_s(old, "head", None)) != _empty_as_none(_s(new, "head", None)):
        return True
    return bool(_empty_as_none(_s(old, "conditions", None)) != _empty_as_none(_s(new, "conditions", None)))


def _inconsistent_ray_service_status(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None,
                                     gates: FeatureGates) -> bool:
    """Port of `inconsistentRayServiceStatus` (consistency.go); the embedded cluster status is ignored."""
    if _s(old, "rayClusterName") != _s(new, "rayClusterName"):
        return True
    old_apps = _s(old, "applicationStatuses", {})
    new_apps = _s(new, "applicationStatuses", {})
    if len(old_apps) != len(new_apps):
        return True
    for app_name, new_app in new_apps.items():
        if app_name not in old_apps:
            return True
        old_app = old_apps[app_name]
        if _s(old_app, "status") != _s(new_app, "status") or _s(old_app, "message") != _s(new_app, "message"):
            return True
        old_deps = _s(old_app, "serveDeploymentStatuses", {})
        new_deps = _s(new_app, "serveDeploymentStatuses", {})
        if len(old_deps) != len(new_deps):
            return True
        for dep_name, new_dep in new_deps.items():
            if dep_name not in old_deps:
                return True
            old_dep = old_deps[dep_name]
            if _s(old_dep, "status") != _s(new_dep, "status") or \
                    _s(old_dep, "message") != _s(new_dep, "message"):
                return True
    if gates.enabled(RAY_SERVICE_INCREMENTAL_UPGRADE):
        # Go compares these *pointers*; after the DeepCopy the controller makes, two non-nil
        # pointers are never equal, so any value present on both sides counts as a change (quirk).
        for key in ("trafficRoutedPercent", "targetCapacity", "lastTrafficMigratedTime"):
            old_v, new_v = (old or {}).get(key), (new or {}).get(key)
            if old_v is not None or new_v is not None:
                return True
    return False


def inconsistent_ray_service_statuses(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None,
                                      gates: FeatureGates = DEFAULTS) -> bool:
    """Port of `InconsistentRayServiceStatuses` (consistency.go).

    serviceStatus, numServeEndpoints, conditions, then active and pending service statuses.
    """
    if _s(old, "serviceStatus") != _s(new, "serviceStatus"):
        return True
    if _s(old, "numServeEndpoints", 0) != _s(new, "numServeEndpoints", 0):
        return True
    if _empty_as_none(_s(old, "conditions", None)) != _empty_as_none(_s(new, "conditions", None)):
        return True
    old_active, new_active = _s(old, "activeServiceStatus", {}), _s(new, "activeServiceStatus", {})
    if _inconsistent_ray_service_status(old_active, new_active, gates):
        return True
    return _inconsistent_ray_service_status(_s(old, "pendingServiceStatus", {}),
                                            _s(new, "pendingServiceStatus", {}), gates)
