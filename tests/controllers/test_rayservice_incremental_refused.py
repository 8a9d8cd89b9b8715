"""``NewClusterWithIncrementalUpgrade`` is not ported: such a RayService is refused with a condition
that says so (rather than run a hybrid of blue/green and incremental), after Go's own checks."""

from __future__ import annotations

from typing import Any

from controllers.rayservice import INCREMENTAL_UPGRADE_REFUSED, validate_ray_service
from controllers.utils import constant as C
from controllers.utils.features import DEFAULTS, RAY_SERVICE_INCREMENTAL_UPGRADE, FeatureGates


def incremental_service(**options: Any) -> dict[str, Any]:
    group = {"groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 5,
             "rayStartParams": {},
             "template": {"spec": {"containers": [{"name": "w", "image": "ray"}]}}}
    upgrade = {"maxSurgePercent": 50, "stepSizePercent": 25, "intervalSeconds": 30,
               "gatewayClassName": "istio", **options}
    return {"metadata": {"name": "rs"}, "spec": {
        "rayClusterConfig": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "ray"}]}}},
            "workerGroupSpecs": [group]},
        "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                            "clusterUpgradeOptions": upgrade}}}


def test_a_valid_incremental_upgrade_service_is_refused_with_a_clear_message():
    reason, err = validate_ray_service(incremental_service(), DEFAULTS)
    assert (reason, str(err)) == (C.INVALID_RAY_SERVICE_SPEC, INCREMENTAL_UPGRADE_REFUSED)
    assert "NewClusterWithIncrementalUpgrade" in INCREMENTAL_UPGRADE_REFUSED


def test_gos_own_validation_errors_come_first():
    reason, err = validate_ray_service(incremental_service(gatewayClassName=""), DEFAULTS)
    assert (reason, str(err)) == (
        C.INVALID_RAY_SERVICE_SPEC,
        "The RayService spec is invalid: gatewayClassName is required for "
        "NewClusterWithIncrementalUpgrade")


def test_with_the_gate_off_the_type_is_not_incremental_and_not_refused():
    gates = FeatureGates({RAY_SERVICE_INCREMENTAL_UPGRADE: False})
    assert validate_ray_service(incremental_service(), gates) == ("", None)
