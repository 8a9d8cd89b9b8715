"""Head, serve and headless Services for RayClusters, RayJobs and RayServices.

Port of ``ray-operator/controllers/ray/common/service.go``. Deviation: Go builds port lists by
iterating a map and only the plain head Service sorts them; here every generated port list is sorted
by name, so the output never depends on iteration order.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..utils import constant as C
from ..utils import util
from ..utils.features import DEFAULTS, FeatureGates
from ..utils.util import EMPTY_ENV, Obj, dig

SERVE_PORT_MISSING_MESSAGE = (
    "Please specify a port named 'serve' (or with the prefix 'serve-', e.g. 'serve-grpc') "
    "in the Ray head container; otherwise, the Kubernetes service for Ray Serve will not be created.")


def head_service_labels(cluster: Mapping[str, Any]) -> dict[str, str]:
    """Port of `HeadServiceLabels` (service.go): the five labels that select a cluster's head Pod."""
    name = dig(cluster, "metadata", "name") or ""
    return {
        C.RAY_CLUSTER_LABEL_KEY: name,
        C.RAY_NODE_TYPE_LABEL_KEY: C.HEAD_NODE,
        C.RAY_ID_LABEL_KEY: util.check_label(util.generate_identifier(name, C.HEAD_NODE)),
        C.KUBERNETES_APPLICATION_NAME_LABEL_KEY: C.APPLICATION_NAME,
        C.KUBERNETES_CREATED_BY_LABEL_KEY: C.COMPONENT_NAME,
    }


def _get_ports_from_cluster(cluster: Mapping[str, Any]) -> dict[str, int]:
    ports: dict[str, int] = {}
    container = util.head_container(cluster.get("spec") or {})
    for port in container.get("ports") or []:
        number = int(port.get("containerPort", 0))
        ports[port.get("name") or f"{number}-port"] = number
    return ports


def get_service_ports(cluster: Mapping[str, Any]) -> dict[str, int]:
    """Port of `getServicePorts` (service.go).

    The head container's ports (unnamed ones named ``<port>-port``), or the defaults (client 10001,
    gcs-server 6379, dashboard 8265, metrics 8080, serve 8000) if it declares none; ``metrics`` is
    always present.
    """
    ports = _get_ports_from_cluster(cluster)
    if not ports:
        ports = {C.CLIENT_PORT_NAME: C.DEFAULT_CLIENT_PORT, C.GCS_SERVER_PORT_NAME: C.DEFAULT_GCS_SERVER_PORT,
                 C.DASHBOARD_PORT_NAME: C.DEFAULT_DASHBOARD_PORT, C.METRICS_PORT_NAME: C.DEFAULT_METRICS_PORT,
                 C.SERVING_PORT_NAME: C.DEFAULT_SERVING_PORT}
    ports.setdefault(C.METRICS_PORT_NAME, C.DEFAULT_METRICS_PORT)
    return ports


def is_serving_port(name: str) -> bool:
    """Port of `isServingPort` (service.go): "serve" or "serve-…"."""
    return name == C.SERVING_PORT_NAME or name.startswith(C.SERVING_PORT_NAME + "-")


def _finish_user_provided_service(service: Obj, labels: Mapping[str, str], default_name: str,
                                  default_namespace: str, default_type: str) -> None:
    # setLabelsforUserProvidedService, setNameforUserProvidedService,
    # setNamespaceforUserProvidedService, setServiceTypeForUserProvidedService.
    # In Go the user's Service is a typed corev1.Service: the client always sends its
    # apiVersion and kind, whether or not the manifest spelled them out.
    service["apiVersion"] = "v1"
    service["kind"] = "Service"
    meta = service.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(labels)
    if not meta.get("name"):
        meta["name"] = default_name
    meta["namespace"] = default_namespace
    spec = service.setdefault("spec", {})
    if not spec.get("type"):
        if default_type:
            spec["type"] = default_type
        else:
            spec.pop("type", None)


def build_service_for_head_pod(cluster: Mapping[str, Any], labels: Mapping[str, str] | None = None,
                               annotations: Mapping[str, str] | None = None,
                               env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `BuildServiceForHeadPod` (service.go).

    Name `generate_head_service_name` (``<cluster>-head-svc`` or the user's ``headService`` name);
    selector and labels = the five head labels (values from ``labels`` where given); ports from
    `get_service_ports` with appProtocol ``tcp``, sorted by name. Headless (``clusterIP: None``,
    ``publishNotReadyAddresses: true``) unless ``ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE=true`` or a
    non-ClusterIP ``serviceType``. A user ``headService`` is the base: its selector is replaced,
    given annotations win, the generated ports are appended, and name/namespace/type are filled in.
    """
    labels = dict(labels or {})
    default_labels = head_service_labels(cluster)
    selector = {k: labels.get(k, v) for k, v in default_labels.items()}
    labels_for_service = dict(selector)
    annotations = dict(annotations or {})
    spec = cluster.get("spec") or {}
    cluster_name = dig(cluster, "metadata", "name") or ""
    default_name = util.generate_head_service_name(C.RAY_CLUSTER_CRD, spec, cluster_name)
    default_namespace = dig(cluster, "metadata", "namespace") or ""
    default_type = dig(spec, "headGroupSpec", "serviceType") or ""
    ports = [{"name": name, "port": port, "appProtocol": C.DEFAULT_SERVICE_APP_PROTOCOL}
             for name, port in sorted(get_service_ports(cluster).items())]

    user_service = dig(spec, "headGroupSpec", "headService")
    if user_service is not None:
        service: Obj = copy.deepcopy(user_service)
        service.setdefault("spec", {})["selector"] = selector
        service.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
        service["spec"]["ports"] = list(service["spec"].get("ports") or []) + ports
        _finish_user_provided_service(service, labels_for_service, default_name, default_namespace,
                                      default_type)
        return service

    svc_spec: Obj = {"selector": selector, "ports": ports}
    if default_type:
        svc_spec["type"] = default_type
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": default_name, "namespace": default_namespace, "labels": labels_for_service},
        "spec": svc_spec,
    }
    if annotations:
        service["metadata"]["annotations"] = annotations
    cluster_ip_service = env.get(C.ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE, "").lower() == "true"
    if not cluster_ip_service and default_type in ("", "ClusterIP"):
        # At most one head Pod: a headless Service, not hiding the head while it is unready.
        svc_spec["clusterIP"] = "None"
        svc_spec["publishNotReadyAddresses"] = True
    return service


def build_owner_head_service(cluster: Mapping[str, Any], owner: Mapping[str, Any], crd_type: str,
                             env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """The shared body of `BuildHeadServiceForRayService` and `BuildHeadServiceForRayJob`.

    The cluster's head Service renamed ``<owner>-head-svc`` in the owner's namespace, with the
    owner as origin in its labels; the selector still picks ``cluster``'s head Pod.
    """
    service = build_service_for_head_pod(cluster, None, None, env)
    owner_name = dig(owner, "metadata", "name") or ""
    service["metadata"]["name"] = util.generate_head_service_name(crd_type, {}, owner_name)
    service["metadata"]["namespace"] = dig(owner, "metadata", "namespace")
    service["metadata"]["labels"] = {
        C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: owner_name,
        C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: crd_type,
        C.RAY_NODE_TYPE_LABEL_KEY: C.HEAD_NODE,
        C.RAY_ID_LABEL_KEY: util.check_label(util.generate_identifier(owner_name, C.HEAD_NODE)),
    }
    return service


def build_head_service_for_ray_service(ray_service: Mapping[str, Any], ray_cluster: Mapping[str, Any],
                                       env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `BuildHeadServiceForRayService` (service.go).

    ``<rayservice>-head-svc`` selecting the given cluster's head Pod (the cluster's head Service
    spec), labelled with the RayService as origin; the controller re-points it at switchover.
    """
    return build_owner_head_service(ray_cluster, ray_service, C.RAY_SERVICE_CRD, env)


def build_serve_service(ray_service: Mapping[str, Any] | None, ray_cluster: Mapping[str, Any],
                        is_ray_service: bool, gates: FeatureGates = DEFAULTS) -> Obj:
    """Port of `BuildServeService` (service.go).

    Name ``<rayservice>-serve-svc`` (per cluster ``<cluster>-serve-svc`` for a standalone cluster or
    an incremental upgrade); selector ``ray.io/cluster=<cluster>`` plus ``ray.io/serve=true`` for
    RayService; ports named ``serve``/``serve-*``; type from the head group's ``serviceType``. For a
    RayService a user ``serveService`` is the base (selector replaced, user ports win by name).
    No serving port (and no user Service) raises ``ValueError`` with KubeRay's message.
    """
    ray_service = ray_service or {}
    name = dig(ray_cluster, "metadata", "name") or ""
    namespace = dig(ray_cluster, "metadata", "namespace") or ""
    crd_type = C.RAY_CLUSTER_CRD
    rs_spec = ray_service.get("spec") or {}
    incremental = util.is_incremental_upgrade_enabled(rs_spec, gates)
    if is_ray_service:
        if not incremental:
            name = dig(ray_service, "metadata", "name") or ""
        namespace = dig(ray_service, "metadata", "namespace") or ""
        crd_type = C.RAY_SERVICE_CRD
    labels = {
        C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: name,
        C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: crd_type,
        C.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY: util.generate_serve_service_label(name),
    }
    selector = {C.RAY_CLUSTER_LABEL_KEY: dig(ray_cluster, "metadata", "name") or ""}
    if is_ray_service:
        selector[C.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY] = C.ENABLE_RAY_CLUSTER_SERVING_SERVICE_TRUE
    default_name = util.generate_serve_service_name(name)
    if is_ray_service:
        default_type = dig(rs_spec, "rayClusterConfig", "headGroupSpec", "serviceType") or ""
    else:
        default_type = dig(ray_cluster, "spec", "headGroupSpec", "serviceType") or ""
    ports = [{"name": port_name, "port": port}
             for port_name, port in sorted(get_service_ports(ray_cluster).items())
             if is_serving_port(port_name)]

    user_service = rs_spec.get("serveService")
    if is_ray_service:
        if not ports and user_service is None:
            raise ValueError(SERVE_PORT_MISSING_MESSAGE)
        if user_service is not None and not incremental:
            service: Obj = copy.deepcopy(user_service)
            service.setdefault("spec", {})["selector"] = selector
            service.setdefault("metadata", {}).setdefault("annotations", {})
            user_ports = {p.get("name", ""): p for p in service["spec"].get("ports") or []}
            if ports:
                service["spec"]["ports"] = [copy.deepcopy(user_ports.get(p["name"], p)) for p in ports]
            _finish_user_provided_service(service, labels, default_name, namespace, default_type)
            return service
    if not ports:
        raise ValueError(SERVE_PORT_MISSING_MESSAGE)
    svc_spec: Obj = {"selector": selector, "ports": ports}
    if default_type:
        svc_spec["type"] = default_type
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": default_name, "namespace": namespace, "labels": labels},
            "spec": svc_spec}


def build_serve_service_for_ray_service(ray_service: Mapping[str, Any], ray_cluster: Mapping[str, Any],
                                        gates: FeatureGates = DEFAULTS) -> Obj:
    """Port of `BuildServeServiceForRayService` (service.go)."""
    return build_serve_service(ray_service, ray_cluster, True, gates)


def build_serve_service_for_ray_cluster(ray_cluster: Mapping[str, Any],
                                        gates: FeatureGates = DEFAULTS) -> Obj:
    """Port of `BuildServeServiceForRayCluster` (service.go): ``<cluster>-serve-svc``."""
    return build_serve_service(None, ray_cluster, False, gates)


def build_headless_service_for_ray_cluster(ray_cluster: Mapping[str, Any]) -> Obj:
    """Port of `BuildHeadlessServiceForRayCluster` (service.go): ``<cluster>-headless`` over workers."""
    name = dig(ray_cluster, "metadata", "name") or ""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{name}{C.DASH_SYMBOL}{C.HEADLESS_SERVICE_SUFFIX}",
                     "namespace": dig(ray_cluster, "metadata", "namespace"),
                     "labels": {C.RAY_CLUSTER_HEADLESS_SERVICE_LABEL_KEY: name}},
        "spec": {"clusterIP": "None",
                 "selector": {C.RAY_CLUSTER_LABEL_KEY: name, C.RAY_NODE_TYPE_LABEL_KEY: C.WORKER_NODE},
                 "type": "ClusterIP", "publishNotReadyAddresses": True},
    }


def get_serve_port(cluster: Mapping[str, Any] | None) -> int:
    """Port of `GetServePort` (service.go): the head container's ``serve`` port, else 8000."""
    if cluster is None:
        return C.DEFAULT_SERVING_PORT
    container = util.head_container(cluster.get("spec") or {})
    if not container:
        return C.DEFAULT_SERVING_PORT
    return util.find_container_port(container, C.SERVING_PORT_NAME, C.DEFAULT_SERVING_PORT)
