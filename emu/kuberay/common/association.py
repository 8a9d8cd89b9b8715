"""Where a controller looks for the objects that belong to a CR: names and label selectors.

Port of ``ray-operator/controllers/ray/common/association.go``. Go's ``AssociationOptions`` (a
namespace plus ``MatchingLabels``) becomes `Association`, which the reconcilers hand to the client:
``client.list("Pod", a.namespace, label_selector=a.labels)`` or ``delete_collection`` with the same
arguments (Go's ``DeleteAllOf``). Names are ``NamespacedName`` pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from ..utils import constant as C
from ..utils import util
from ..utils.util import dig


@attrs.frozen
class NamespacedName:
    """``types.NamespacedName``."""

    namespace: str
    name: str


@attrs.frozen
class Association:
    """``AssociationOptions``: ``InNamespace(namespace)`` + ``MatchingLabels(labels)``."""

    namespace: str
    labels: Mapping[str, str]

    def selector(self) -> str:
        """The labels as a label-selector string, keys sorted (``k1=v1,k2=v2``)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))


def _ns(obj: Mapping[str, Any]) -> str:
    return dig(obj, "metadata", "namespace") or ""


def _name(obj: Mapping[str, Any]) -> str:
    return dig(obj, "metadata", "name") or ""


def ray_cluster_serve_service_namespaced_name(instance: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayClusterServeServiceNamespacedName` (association.go): ``<cluster>-serve-svc``."""
    return NamespacedName(_ns(instance), util.generate_serve_service_name(_name(instance)))


def ray_cluster_autoscaler_role_namespaced_name(instance: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayClusterAutoscalerRoleNamespacedName` (association.go)."""
    return NamespacedName(_ns(instance), _name(instance))


def ray_cluster_autoscaler_role_binding_namespaced_name(instance: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayClusterAutoscalerRoleBindingNamespacedName` (association.go)."""
    return NamespacedName(_ns(instance), _name(instance))


def ray_cluster_autoscaler_service_account_namespaced_name(instance: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayClusterAutoscalerServiceAccountNamespacedName` (association.go)."""
    return NamespacedName(_ns(instance), util.get_head_group_service_account_name(instance))


def ray_cluster_headless_service_list_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterHeadlessServiceListOptions` (association.go)."""
    return Association(_ns(instance), {C.RAY_CLUSTER_HEADLESS_SERVICE_LABEL_KEY: _name(instance)})


def ray_cluster_head_service_list_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterHeadServiceListOptions` (association.go): cluster, node-type head, identifier."""
    name = _name(instance)
    return Association(_ns(instance), {
        C.RAY_CLUSTER_LABEL_KEY: name,
        C.RAY_NODE_TYPE_LABEL_KEY: C.HEAD_NODE,
        C.RAY_ID_LABEL_KEY: util.check_label(util.generate_identifier(name, C.HEAD_NODE)),
    })


def ray_cluster_head_pods_association_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterHeadPodsAssociationOptions` (association.go): cluster + node-type head."""
    return Association(_ns(instance), {C.RAY_CLUSTER_LABEL_KEY: _name(instance),
                                       C.RAY_NODE_TYPE_LABEL_KEY: C.HEAD_NODE})


def ray_cluster_worker_pods_association_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterWorkerPodsAssociationOptions` (association.go): cluster + node-type worker."""
    return Association(_ns(instance), {C.RAY_CLUSTER_LABEL_KEY: _name(instance),
                                       C.RAY_NODE_TYPE_LABEL_KEY: C.WORKER_NODE})


def ray_cluster_redis_cleanup_job_association_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterRedisCleanupJobAssociationOptions` (association.go): node-type redis-cleanup."""
    return Association(_ns(instance), {C.RAY_CLUSTER_LABEL_KEY: _name(instance),
                                       C.RAY_NODE_TYPE_LABEL_KEY: C.REDIS_CLEANUP_NODE})


def ray_cluster_group_pods_association_options(instance: Mapping[str, Any], group: str) -> Association:
    """Port of `RayClusterGroupPodsAssociationOptions` (association.go): cluster + ``ray.io/group``."""
    return Association(_ns(instance), {C.RAY_CLUSTER_LABEL_KEY: _name(instance),
                                       C.RAY_NODE_GROUP_LABEL_KEY: group})


def ray_cluster_all_pods_association_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterAllPodsAssociationOptions` (association.go): every Pod of the cluster."""
    return Association(_ns(instance), {C.RAY_CLUSTER_LABEL_KEY: _name(instance)})


def ray_cluster_network_resources_options(instance: Mapping[str, Any]) -> Association:
    """Port of `RayClusterNetworkResourcesOptions` (association.go)."""
    return Association(_ns(instance), {C.RAY_CLUSTER_LABEL_KEY: _name(instance)})


def ray_service_ray_clusters_association_options(ray_service: Mapping[str, Any]) -> Association:
    """Port of `RayServiceRayClustersAssociationOptions` (association.go): clusters the RayService made."""
    return Association(_ns(ray_service), {C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: _name(ray_service),
                                          C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: C.RAY_SERVICE_CRD})


def ray_service_serve_service_namespaced_name(ray_service: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayServiceServeServiceNamespacedName` (association.go).

    ``spec.serveService.metadata.name`` if set (its namespace is deliberately ignored), else
    ``<rayservice>-serve-svc``.
    """
    custom = dig(ray_service, "spec", "serveService", "metadata", "name")
    if custom:
        return NamespacedName(_ns(ray_service), custom)
    return NamespacedName(_ns(ray_service), util.generate_serve_service_name(_name(ray_service)))


def ray_service_active_ray_cluster_namespaced_name(ray_service: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayServiceActiveRayClusterNamespacedName` (association.go)."""
    name = dig(ray_service, "status", "activeServiceStatus", "rayClusterName") or ""
    return NamespacedName(_ns(ray_service), name)


def ray_service_pending_ray_cluster_namespaced_name(ray_service: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayServicePendingRayClusterNamespacedName` (association.go)."""
    name = dig(ray_service, "status", "pendingServiceStatus", "rayClusterName") or ""
    return NamespacedName(_ns(ray_service), name)


def ray_job_k8s_job_namespaced_name(ray_job: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayJobK8sJobNamespacedName` (association.go): the submitter Job has the RayJob's name."""
    return NamespacedName(_ns(ray_job), _name(ray_job))


def ray_job_ray_cluster_namespaced_name(ray_job: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayJobRayClusterNamespacedName` (association.go): ``status.rayClusterName``."""
    return NamespacedName(_ns(ray_job), dig(ray_job, "status", "rayClusterName") or "")


def ray_service_gateway_namespaced_name(ray_service: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayServiceGatewayNamespacedName` (association.go): ``<rayservice>-gateway``."""
    return NamespacedName(_ns(ray_service), f"{_name(ray_service)}-gateway")


def ray_service_http_route_namespaced_name(ray_service: Mapping[str, Any]) -> NamespacedName:
    """Port of `RayServiceHTTPRouteNamespacedName` (association.go): ``<rayservice>-httproute``."""
    return NamespacedName(_ns(ray_service), f"{_name(ray_service)}-httproute")


class _Lister(Protocol):
    async def list(self, kind: str, namespace: str | None = None, *,
                   label_selector: str | dict[str, str] | None = None) -> Any: ...


class MultipleHeadPodsError(RuntimeError):
    """More than one Pod matched a cluster's head labels."""


async def get_ray_cluster_head_pod(reader: _Lister, instance: Mapping[str, Any]) -> dict[str, Any] | None:
    """Port of `GetRayClusterHeadPod` (association.go).

    None when no head Pod is listed; `MultipleHeadPodsError` ("found multiple heads. filter labels
    ...") when more than one is; list errors propagate. Terminating Pods count, as in Go.
    """
    options = ray_cluster_head_pods_association_options(instance)
    result = await reader.list("Pod", options.namespace, label_selector=dict(options.labels))
    items = list(result) if isinstance(result, list) else list(result.get("items") or [])
    if not items:
        return None
    if len(items) > 1:
        raise MultipleHeadPodsError(
            f"found multiple heads. filter labels [InNamespace({options.namespace}) "
            f"MatchingLabels({options.selector()})]")
    head: dict[str, Any] = items[0]
    return head
