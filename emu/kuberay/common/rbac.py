"""ServiceAccount, Role and RoleBinding for the in-tree autoscaler sidecar.

Port of ``ray-operator/controllers/ray/common/rbac.go``. The emulator does not run an autoscaler
(SPEC §7.3), but a RayCluster with ``enableInTreeAutoscaling`` still gets these objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..utils import constant as C
from ..utils import util
from ..utils.util import Obj, dig


def _labels(cluster: Mapping[str, Any]) -> dict[str, str]:
    return {C.RAY_CLUSTER_LABEL_KEY: dig(cluster, "metadata", "name") or "",
            C.KUBERNETES_APPLICATION_NAME_LABEL_KEY: C.APPLICATION_NAME,
            C.KUBERNETES_CREATED_BY_LABEL_KEY: C.COMPONENT_NAME}


def build_service_account(cluster: Mapping[str, Any]) -> Obj:
    """Port of `BuildServiceAccount` (rbac.go): named after the head group's service account."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": util.get_head_group_service_account_name(cluster),
                         "namespace": dig(cluster, "metadata", "namespace"), "labels": _labels(cluster)}}


def build_role(cluster: Mapping[str, Any]) -> Obj:
    """Port of `BuildRole` (rbac.go): pods get/list/watch/patch, pods/resize patch, rayclusters get/patch."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": dig(cluster, "metadata", "name"),
                         "namespace": dig(cluster, "metadata", "namespace"), "labels": _labels(cluster)},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
                {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
            ]}


def build_role_binding(cluster: Mapping[str, Any]) -> Obj:
    """Port of `BuildRoleBinding` (rbac.go): binds the (clipped) service account to the (clipped) Role."""
    namespace = dig(cluster, "metadata", "namespace")
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": dig(cluster, "metadata", "name"), "namespace": namespace,
                         "labels": _labels(cluster)},
            "subjects": [{"kind": "ServiceAccount",
                          "name": util.check_name(util.get_head_group_service_account_name(cluster)),
                          "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": util.check_name(dig(cluster, "metadata", "name") or "")}}
