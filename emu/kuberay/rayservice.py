"""The RayService controller: Serve on a RayCluster, and the blue/green switch between clusters.

Port of ``ray-operator/controllers/ray/rayservice_controller.go`` (SPEC §4). Functions keep Go's
names in snake_case and Go's order; the banners below follow the Go file. It is long (about
1,800 lines) because the Go file is 2,400 lines of one reconciler whose steps share the instance,
the two in-memory maps and the dashboard clients; the builders it calls live in
`emu.kuberay.common`.

What the reconciler reads and writes: the API server through the manager's client (reads from the
informer cache) and each cluster's Ray dashboard and Serve proxies over the emulated network, from
the operator's process. Its in-memory state is exactly KubeRay's (SPEC §1.8), lost with the
process: the Serve config cache (``serve_configs``, an LRU of 1000 RayServices, cluster → last
applied ``serveConfigV2``), so a new leader PUTs every config once more; and the old-cluster
deletion deadlines (``ray_cluster_deletion_timestamps``, keyed by cluster name only — a quirk), so
a new leader deletes a dangling cluster one full delay after *it* first saw it.

Errors follow Go's ``(ctrl.Result, error)``: `RayServiceReconciler.reconcile` raises the error (the
controller backs off and ignores the Result, as controller-runtime does) or returns the Result.
Go's ``panic`` (Services pointing at different clusters, or at an unknown one) raises
`RayServicePanic`, which the work queue treats as an error, as controller-runtime's recovered
panics are.

The incremental upgrade (``NewClusterWithIncrementalUpgrade`` with the
``RayServiceIncrementalUpgrade`` gate) is ported as Go has it: per-cluster serve Services, a
Gateway and an HTTPRoute whose backend weights move by ``stepSizePercent`` every
``intervalSeconds`` up to the pending cluster's ``target_capacity``, target capacities moved by
``maxSurgePercent`` through Serve config PUTs, promotion when the active capacity is 0 and the
pending traffic 100, and the rollback when the spec goes back to the active cluster's (or to a
third spec). The Gateway and HTTPRoute only become ready where a Gateway API implementation runs
(`emu.kube.gateway`, ``KubeConfig(gateway_classes=...)``), as on a real cluster.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import attrs
import yaml

from emu.apiserver.errors import ApiError
from emu.runtime import Request, Result
from emu.runtime.predicate import (
    AnnotationChangedPredicate,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    or_,
)

from .common import association as assoc
from .common import service as service_builders
from .dashboard_client import RayDashboardClient
from .raycluster import EventRecorder, _loop_time, go_duration, parse_time, rfc3339
from .utils import consistency, util, validation
from .utils import constant as C
from .utils.features import (
    DEFAULTS,
    RAY_CLUSTER_STATUS_CONDITIONS,
    RAY_SERVICE_INCREMENTAL_UPGRADE,
    FeatureGates,
)
from .utils.util import Obj, dig

#: ``ServiceDefaultRequeueDuration``.
SERVICE_DEFAULT_REQUEUE_DURATION = 2.0
#: ``RayClusterDeletionDelayDuration``: how long a dangling cluster lives after it is first seen.
RAY_CLUSTER_DELETION_DELAY_DURATION = 60.0
#: The operator's environment variable that turns zero-downtime upgrades off.
ENABLE_ZERO_DOWNTIME = "ENABLE_ZERO_DOWNTIME"
#: KubeRay's dashboard and proxy clients: ``http.Client{Timeout: 2 * time.Second}``.
HTTP_CLIENT_TIMEOUT = float(C.RAY_HTTP_CLIENT_DIRECT_TIMEOUT_SECONDS)
#: ``RayServeProxyHealthPath``.
RAY_SERVE_PROXY_HEALTH_PATH = "/" + C.RAY_SERVE_PROXY_HEALTH_PATH

_SERVE_UPDATE_HELP = (
    "fail to create / update Serve applications. If you observe this error consistently, "
    "please check \"Issue 5: Fail to create / update Serve applications.\" in "
    "https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting/rayservice-troubleshooting."
    "html#kuberay-raysvc-troubleshoot for more details. err: ")
_SERVE_STATUS_HELP = (
    "failed to get Serve application statuses from the dashboard. If you observe this error "
    "consistently, please check https://docs.ray.io/en/latest/cluster/kubernetes/troubleshooting/"
    "rayservice-troubleshooting.html for more details. err: ")


class RayServicePanic(RuntimeError):
    """A Go ``panic`` in the RayService controller; controller-runtime recovers it as an error."""


class Client(Protocol):
    """What the reconciler needs of a client: the manager's `CachedClient` or a plain `Client`."""

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    async def list(self, kind: str, namespace: str | None = None, *,
                   label_selector: str | dict[str, str] | None = None) -> Any: ...

    async def create(self, obj: Obj, *, namespace: str | None = None) -> Obj: ...

    async def update(self, obj: Obj) -> Obj: ...

    async def update_status(self, obj: Obj) -> Obj: ...

    async def delete(self, kind: str, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None) -> Obj: ...

    async def delete_collection(self, kind: str, namespace: str | None = None, *,
                                label_selector: str | dict[str, str] | None = None) -> Obj: ...


class HttpRequester(Protocol):
    """What the dashboard and proxy clients need: `emu.runtime.HttpClient`."""

    async def request(self, address: str, method: str, path: str, body: Any = None) -> Any: ...


DashboardClientFunc = Callable[[Obj, str], RayDashboardClient]
#: ``httpProxyClientFunc(podIP, namespace, podName, port)`` → its ``CheckProxyActorHealth``.
ProxyHealthFunc = Callable[[str, str, str, int], Awaitable[None]]


async def _with_client_timeout(call: Awaitable[Any]) -> Any:
    """``http.Client{Timeout: 2 * time.Second}``: the whole exchange, a slow server included (the
    emulated network times out only lost packets, so the client bounds the wait itself)."""
    try:
        return await asyncio.wait_for(call, HTTP_CLIENT_TIMEOUT)
    except TimeoutError:
        raise TimeoutError(f"context deadline exceeded (Client.Timeout exceeded while awaiting "
                           f"headers) after {HTTP_CLIENT_TIMEOUT:g}s") from None


def make_dashboard_client_func(http: HttpRequester) -> DashboardClientFunc:
    """``GetDashboardClient``: a `RayDashboardClient` whose transport sends to ``url`` (the head
    Service's ``host:port``) with ``http``. Network errors propagate, as ``client.Do``'s do."""

    def dashboard_client_func(_cluster: Obj, url: str) -> RayDashboardClient:
        async def send(method: str, path: str, body: dict[str, Any] | None
                       ) -> tuple[int, Any]:
            resp = await _with_client_timeout(http.request(url, method, path, body))
            try:
                parsed = resp.json()
            except ValueError:
                parsed = resp.body
            return int(resp.status), "" if parsed is None else parsed

        return RayDashboardClient(send, dashboard_url=f"http://{url}")

    return dashboard_client_func


def make_proxy_health_func(http: HttpRequester) -> ProxyHealthFunc:
    """Port of `RayHttpProxyClient.CheckProxyActorHealth` (httpproxy_httpclient.go): GET
    ``http://<podIP>:<port>/-/healthz``; anything but 200 is an error."""

    async def check_proxy_actor_health(pod_ip: str, _namespace: str, _pod: str, port: int) -> None:
        resp = await _with_client_timeout(
            http.request(f"{pod_ip}:{port}", "GET", RAY_SERVE_PROXY_HEALTH_PATH))
        if int(resp.status) != 200:
            raise RuntimeError(f"CheckProxyActorHealth fails. status code: {resp.status}, "
                               f"body: {str(resp.body)[:4096]}")

    return check_proxy_actor_health


@attrs.frozen
class RayServiceReconcilerOptions:
    """What Go reads from the process: the environment (``os.Getenv``) and the feature gates."""

    env: Mapping[str, str] = attrs.field(factory=dict)
    gates: FeatureGates = DEFAULTS


class _ServeConfigLRU:
    """``lru.New(ServeConfigLRUSize)``: RayService key → (cluster name → Serve config)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, dict[str, str]] = OrderedDict()

    def get(self, key: str) -> dict[str, str] | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: str, value: dict[str, str]) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


# ---------------------------------------------------------------------------------------------
# Reconciler
# ---------------------------------------------------------------------------------------------


class RayServiceReconciler:
    """Port of ``RayServiceReconciler``."""

    def __init__(self, client: Client, *, dashboard_client_func: DashboardClientFunc,
                 http_proxy_client_func: ProxyHealthFunc,
                 options: RayServiceReconcilerOptions | None = None,
                 recorder: EventRecorder | None = None,
                 clock: Callable[[], float] = _loop_time,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self.options = options or RayServiceReconcilerOptions()
        self.recorder = recorder or EventRecorder(client, "rayservice-controller", clock=clock)
        self.serve_configs = _ServeConfigLRU(C.SERVE_CONFIG_LRU_SIZE)
        #: Cluster name → virtual time after which it is deleted (never cleaned, as in Go).
        self.ray_cluster_deletion_timestamps: dict[str, float] = {}
        self.dashboard_client_func = dashboard_client_func
        self.http_proxy_client_func = http_proxy_client_func
        self._clock = clock
        self._rng = rng or random.Random(0)

    def now(self) -> str:
        return rfc3339(self._clock())

    def _event(self, obj: Mapping[str, Any], event_type: str, reason: str, action: str,
               message: str) -> None:
        self.recorder.eventf(obj, event_type, reason, action, message)

    async def _update_status(self, instance: Obj) -> None:
        """``r.Status().Update``; the instance takes the new resourceVersion, as Go's does."""
        updated = await self.client.update_status(instance)
        instance["metadata"]["resourceVersion"] = dig(updated, "metadata", "resourceVersion")

    async def reconcile(self, request: Request) -> Result:
        """Port of `RayServiceReconciler.Reconcile` (rayservice_controller.go).

        SPEC §4.3: cleanup of the Serve config cache and of dangling clusters first; deletion and
        finalizer; validation; suspend; the initializing-timeout terminal state; clusters; head
        Pod serve labels (an error when a head Pod is missing ends the pass here); Serve; the
        Services when a cluster is ready; status; a status write when it changed; requeue 2 s.
        """
        try:
            instance = await self.get_ray_service_instance(request)
        except ApiError as err:
            if err.code == 404:
                return Result()
            raise
        original = util.deep_copy(instance)
        spec = instance.setdefault("spec", {})
        name = instance["metadata"]["name"]
        namespace = instance["metadata"].get("namespace", "")

        if util.managed_by_external_controller(spec.get("managedBy")) is not None:
            return Result()

        self.clean_up_serve_config_cache(instance)
        has_ray_clusters_to_clean = await self.clean_up_ray_cluster_instance(instance)

        meta = instance["metadata"]
        if meta.get("deletionTimestamp"):
            if not has_ray_clusters_to_clean:
                meta["finalizers"] = [f for f in meta.get("finalizers") or []
                                      if f != C.RAY_SERVICE_FINALIZER]
                await self.client.update(instance)
                return Result()
            return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION)

        if C.RAY_SERVICE_FINALIZER not in (meta.get("finalizers") or []):
            meta.setdefault("finalizers", []).append(C.RAY_SERVICE_FINALIZER)
            await self.client.update(instance)
            return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION)

        err_type, verr = validate_ray_service(instance, self.options.gates)
        if verr is not None:
            self._event(instance, "Warning", err_type, C.VALIDATE_ACTION,
                        f"{namespace}/{name}: {verr}")
            set_condition(instance, C.RAY_SERVICE_READY, "False", C.RAY_SERVICE_VALIDATION_FAILED,
                          str(verr), self.now())
            instance["status"]["lastUpdateTime"] = self.now()
            await self._update_status(instance)
            return Result()

        result, suspend_err = await self.handle_suspend(instance)
        try:
            await self.update_status_if_changed(original, instance)
        except Exception as update_err:
            if suspend_err is None:
                suspend_err = update_err
        if suspend_err is not None:
            raise suspend_err
        if suspend_is_operative(instance):
            return result

        if is_initializing_timeout(instance):
            if has_ray_clusters_to_clean:
                return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION)
            return Result()

        try:
            active, pending = await self.reconcile_ray_cluster(instance)
        except ApiError as err:
            if err.code == 404:
                return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION)
            raise

        incremental = util.is_incremental_upgrade_enabled(spec, self.options.gates)
        if incremental and util.is_status_condition_true(dig(instance, "status", "conditions"),
                                                         C.UPGRADE_IN_PROGRESS):
            if active is None:
                self._event(instance, "Warning", C.ROLLBACK_IMPOSSIBLE, C.RECONCILE_ACTION,
                            "Active cluster not found, rollback cannot be initiated")
            elif pending is not None:
                self.reconcile_rollback_state(instance, active, pending)

        exclude_head = bool(spec.get("excludeHeadPodFromServeSvc"))
        await self.update_head_pod_serve_label(instance, active, exclude_head)
        await self.update_head_pod_serve_label(instance, pending, exclude_head)

        is_active_ready = is_pending_ready = False
        active_apps: dict[str, Obj] | None = None
        pending_apps: dict[str, Obj] | None = None
        if pending is not None:
            is_pending_ready, pending_apps = await self.reconcile_serve(instance, pending)
        # the active cluster when there is no pending one; during an incremental upgrade both
        if active is not None and (
                (pending is None and not self.should_prepare_new_cluster(instance, active, None,
                                                                         False))
                or (pending is not None and incremental)):
            is_active_ready, active_apps = await self.reconcile_serve(instance, active)

        http_route: Obj | None = None
        if incremental:
            await self.reconcile_per_cluster_serve_service(instance, active)
            await self.reconcile_per_cluster_serve_service(instance, pending)
            try:
                await self.reconcile_gateway(instance)
                http_route = await self.reconcile_http_route(instance, is_pending_ready)
            except ApiError as err:
                if err.code == 404:
                    return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION)
                raise

        head_svc: Obj | None = None
        serve_svc: Obj | None = None
        if is_pending_ready or is_active_ready:
            target = active
            upgrading = incremental and util.is_status_condition_true(
                dig(instance, "status", "conditions"), C.UPGRADE_IN_PROGRESS)
            if is_pending_ready and not upgrading:
                target = pending
            assert target is not None
            head_svc, serve_svc = await self.reconcile_services_to_ready_cluster(instance, target)
            if head_svc is None or serve_svc is None:
                raise RayServicePanic(
                    f"Either head service ({head_svc}) or serve service ({serve_svc}) is nil "
                    "before calculating RayService status. This should never happen. Please open "
                    "a GitHub issue in the KubeRay repository.")

        await self.calculate_status(instance, head_svc, serve_svc, active, pending,
                                    active_apps, pending_apps, http_route)

        if consistency.inconsistent_ray_service_statuses(original.get("status"),
                                                         instance.get("status"),
                                                         self.options.gates):
            instance["status"]["lastUpdateTime"] = self.now()
            await self._update_status(instance)
        return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION)

    # -- suspend -------------------------------------------------------------------------------

    async def handle_suspend(self, instance: Obj) -> tuple[Result, Exception | None]:
        """Port of `RayServiceReconciler.handleSuspend` (rayservice_controller.go).

        (no suspend) → Suspending (status only, committed by the caller's write) → owned
        resources deleted → Suspended → (spec.suspend false) resumed, Ready re-armed as
        Initializing. Once Suspending is stored the deletion runs to completion."""
        status = instance.setdefault("status", {})
        conditions = status.setdefault("conditions", [])
        now = self.now()
        suspend = bool(dig(instance, "spec", "suspend"))
        generation = dig(instance, "metadata", "generation") or 0
        is_suspending = util.is_status_condition_true(conditions, C.RAY_SERVICE_SUSPENDING)
        is_suspended = util.is_status_condition_true(conditions, C.RAY_SERVICE_SUSPENDED)

        if is_suspended:
            if not suspend:
                status["observedGeneration"] = generation
                set_condition(instance, C.RAY_SERVICE_SUSPENDED, "False", C.RAY_SERVICE_RESUMED,
                              "Spec.Suspend is false; RayService has resumed.", now)
                util.remove_status_condition(conditions, C.RAY_SERVICE_READY)
                set_condition(instance, C.RAY_SERVICE_READY, "False", C.RAY_SERVICE_INITIALIZING,
                              "RayService is initializing after resuming from suspend.", now)
                util.remove_status_condition(conditions, C.UPGRADE_IN_PROGRESS)
                set_condition(instance, C.UPGRADE_IN_PROGRESS, "False",
                              C.RAY_SERVICE_INITIALIZING,
                              "RayService is initializing after resuming from suspend.", now)
            return Result(), None

        if not is_suspending:
            if not suspend:
                return Result(), None
            status["observedGeneration"] = generation
            set_condition(instance, C.RAY_SERVICE_SUSPENDING, "True", C.SUSPEND_REQUESTED,
                          "Spec.Suspend is true; will delete all Kubernetes resources owned by "
                          "this RayService.", now)
            set_condition(instance, C.RAY_SERVICE_READY, "False", C.SUSPEND_IN_PROGRESS,
                          "RayService is suspending.", now)
            set_condition(instance, C.UPGRADE_IN_PROGRESS, "False", C.SUSPEND_IN_PROGRESS,
                          "No upgrade in progress.", now)
            set_condition(instance, C.ROLLBACK_IN_PROGRESS, "False", C.SUSPEND_IN_PROGRESS,
                          "No rollback in progress.", now)
            status["activeServiceStatus"] = {}
            status["pendingServiceStatus"] = {}
            status["numServeEndpoints"] = 0
            status["serviceStatus"] = C.NOT_RUNNING
            return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION), None

        try:
            all_deleted = await self.delete_ray_service_owned_resources(instance)
        except Exception as err:
            return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION), err
        if not all_deleted:
            set_condition(instance, C.RAY_SERVICE_SUSPENDING, "True", C.SUSPEND_IN_PROGRESS,
                          "Waiting for all Kubernetes resources owned by this RayService to be "
                          "deleted.", now)
            return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION), None
        done = "All owned resources have been deleted."
        set_condition(instance, C.RAY_SERVICE_SUSPENDING, "False", C.SUSPEND_COMPLETE, done, now)
        set_condition(instance, C.RAY_SERVICE_SUSPENDED, "True", C.SUSPEND_COMPLETE, done, now)
        set_condition(instance, C.RAY_SERVICE_READY, "False", C.SUSPEND_COMPLETE,
                      "RayService is suspended.", now)
        set_condition(instance, C.UPGRADE_IN_PROGRESS, "False", C.SUSPEND_COMPLETE,
                      "No upgrade in progress.", now)
        set_condition(instance, C.ROLLBACK_IN_PROGRESS, "False", C.SUSPEND_COMPLETE,
                      "No rollback in progress.", now)
        return Result(requeue_after=SERVICE_DEFAULT_REQUEUE_DURATION), None

    async def delete_ray_service_owned_resources(self, instance: Obj) -> bool:
        """Port of `RayServiceReconciler.deleteRayServiceOwnedResources`
        (rayservice_controller.go): delete the RayService's clusters and Services (background),
        and for an incremental upgrade its Gateway and HTTPRoute; True when none remained."""
        opts = assoc.ray_service_ray_clusters_association_options(instance)
        all_deleted = True
        for kind, noun, fail_reason, done_reason in (
                ("RayCluster", "RayCluster", C.FAILED_TO_DELETE_RAY_CLUSTER,
                 C.DELETED_RAY_CLUSTER),
                ("Service", "Service", C.FAILED_TO_DELETE_SERVICE, C.DELETED_SERVICE)):
            items = list(await self.client.list(kind, opts.namespace,
                                                label_selector=dict(opts.labels)))
            for obj in items:
                all_deleted = False
                if dig(obj, "metadata", "deletionTimestamp"):
                    continue
                obj_name = obj["metadata"]["name"]
                obj_ns = obj["metadata"].get("namespace", "")
                try:
                    await self.client.delete(kind, obj_name, obj_ns,
                                             propagation_policy="Background")
                except ApiError as err:
                    if err.code != 404:
                        self._event(instance, "Warning", fail_reason, C.DELETE_ACTION,
                                    f"Failed to delete the {noun} {obj_ns}/{obj_name} during "
                                    f"suspend: {err}")
                        raise
                self._event(instance, "Normal", done_reason, C.DELETE_ACTION,
                            f"Deleted the {noun} {obj_ns}/{obj_name} during suspend")
        if util.is_incremental_upgrade_enabled(instance.get("spec"), self.options.gates):
            for kind, key, fail_reason, done_reason in (
                    ("Gateway", assoc.ray_service_gateway_namespaced_name(instance),
                     C.FAILED_TO_DELETE_GATEWAY, C.DELETED_GATEWAY),
                    ("HTTPRoute", assoc.ray_service_http_route_namespaced_name(instance),
                     C.FAILED_TO_DELETE_HTTP_ROUTE, C.DELETED_HTTP_ROUTE)):
                try:
                    obj = await self.client.get(kind, key.name, key.namespace)
                except ApiError as err:
                    if err.code == 404:
                        continue
                    raise
                all_deleted = False
                if dig(obj, "metadata", "deletionTimestamp"):
                    continue
                try:
                    await self.client.delete(kind, key.name, key.namespace,
                                             propagation_policy="Background")
                except ApiError as err:
                    if err.code != 404:
                        self._event(instance, "Warning", fail_reason, C.DELETE_ACTION,
                                    f"Failed to delete the {kind} {key.namespace}/{key.name} "
                                    f"during suspend: {err}")
                        raise
                self._event(instance, "Normal", done_reason, C.DELETE_ACTION,
                            f"Deleted the {kind} {key.namespace}/{key.name} during suspend")
        return all_deleted

    async def update_status_if_changed(self, original: Obj, instance: Obj) -> None:
        """Port of `RayServiceReconciler.updateStatusIfChanged` (rayservice_controller.go)."""
        if not consistency.inconsistent_ray_service_statuses(original.get("status"),
                                                             instance.get("status"),
                                                             self.options.gates):
            return
        instance["status"]["lastUpdateTime"] = self.now()
        await self._update_status(instance)

    # -- Services and promotion ----------------------------------------------------------------

    async def reconcile_services_to_ready_cluster(self, instance: Obj, cluster: Obj
                                                  ) -> tuple[Obj | None, Obj | None]:
        """Port of `RayServiceReconciler.reconcileServicesToReadyCluster`
        (rayservice_controller.go): the head Service, then the serve Service — two separate
        writes; an error on the second leaves the first switched."""
        head_svc = await self.reconcile_services(instance, cluster, C.HEAD_SERVICE)
        serve_svc = await self.reconcile_services(instance, cluster, C.SERVING_SERVICE)
        return head_svc, serve_svc

    async def calculate_status(self, instance: Obj, head_svc: Obj | None, serve_svc: Obj | None,
                               active: Obj | None, pending: Obj | None,
                               active_apps: dict[str, Obj] | None,
                               pending_apps: dict[str, Obj] | None,
                               http_route: Obj | None = None) -> None:
        """Port of `RayServiceReconciler.calculateStatus` (rayservice_controller.go).

        Copies the clusters' statuses and application statuses; for an incremental upgrade, the
        traffic percentages from the HTTPRoute's weights (and when they last moved); promotes
        pending when both Services were reconciled and point at it (incremental: when the upgrade
        is complete); completes a rollback; records a fresh pending name (with its initial
        target capacity) when a new cluster is needed; counts serve endpoints from EndpointSlices
        (per-cluster Services, summed, during an incremental upgrade); then the conditions and
        ``serviceStatus``."""
        incremental = util.is_incremental_upgrade_enabled(instance.get("spec"), self.options.gates)
        status = instance.setdefault("status", {})
        status["observedGeneration"] = dig(instance, "metadata", "generation") or 0
        active_status = status.setdefault("activeServiceStatus", {})
        pending_status = status.setdefault("pendingServiceStatus", {})
        active_status["rayClusterStatus"] = util.deep_copy((active or {}).get("status") or {})
        pending_status["rayClusterStatus"] = util.deep_copy((pending or {}).get("status") or {})
        _set_apps(active_status, active_apps)
        _set_apps(pending_status, pending_apps)

        is_pending_serving = False
        if head_svc is not None and serve_svc is not None:
            if incremental:
                old_active = active_status.get("trafficRoutedPercent", -1)
                old_pending = pending_status.get("trafficRoutedPercent", -1)
                active_weight, pending_weight = get_weights_from_http_route(http_route, instance)
                now = self.now()
                if active_weight >= 0:
                    active_status["trafficRoutedPercent"] = active_weight
                    if active_weight != old_active:
                        active_status["lastTrafficMigratedTime"] = now
                if pending_weight >= 0 and pending is not None:
                    pending_status["trafficRoutedPercent"] = pending_weight
                    if pending_weight != old_pending:
                        pending_status["lastTrafficMigratedTime"] = now
            is_pending_serving = reconcile_promotion_and_serving_status(
                head_svc, serve_svc, instance, pending, self.options.gates)

        conditions = status.setdefault("conditions", [])
        if util.is_status_condition_true(conditions, C.ROLLBACK_IN_PROGRESS) and \
                should_complete_incremental_rollback(status.get("activeServiceStatus") or {},
                                                     status.get("pendingServiceStatus") or {},
                                                     pending):
            status["pendingServiceStatus"] = {}
            pending = None
            util.remove_status_condition(conditions, C.ROLLBACK_IN_PROGRESS)
            set_condition(instance, C.UPGRADE_IN_PROGRESS, "False", C.NO_PENDING_CLUSTER,
                          "Rollback complete, active Ray cluster exists and no pending Ray "
                          "cluster", self.now())

        if self.should_prepare_new_cluster(instance, active, pending, is_pending_serving):
            status["pendingServiceStatus"] = {
                "rayClusterName": util.generate_ray_cluster_name(instance["metadata"]["name"],
                                                                 self._rng)}
            if incremental:
                if not dig(status, "activeServiceStatus", "rayClusterName"):
                    if dig(status, "activeServiceStatus", "targetCapacity") is None:
                        status["pendingServiceStatus"]["targetCapacity"] = 100
                elif status["pendingServiceStatus"].get("targetCapacity") is None:
                    status["pendingServiceStatus"]["targetCapacity"] = 0

        nn = assoc.ray_service_serve_service_namespaced_name(instance)
        if incremental and active is not None:
            # the per-cluster Serve Services carry the traffic during an incremental upgrade
            nn = assoc.NamespacedName(nn.namespace,
                                      util.generate_serve_service_name(active["metadata"]["name"]))
        num = await self.calculate_num_serve_endpoints_from_slices(nn.namespace, nn.name)
        if incremental and pending is not None:
            pnn = assoc.ray_cluster_serve_service_namespaced_name(pending)
            num += await self.calculate_num_serve_endpoints_from_slices(pnn.namespace, pnn.name)
        if num > 2**31 - 1:
            raise RuntimeError("numServeEndpoints exceeds math.MaxInt32")
        status["numServeEndpoints"] = num

        calculate_conditions(self, instance)
        status["serviceStatus"] = C.NOT_RUNNING
        if util.is_status_condition_true(status.get("conditions"), C.RAY_SERVICE_READY):
            status["serviceStatus"] = C.RUNNING

    # -- SetupWithManager ----------------------------------------------------------------------

    def setup_with_manager(self, mgr: Any, reconcile_concurrency: int) -> Any:
        """Port of `RayServiceReconciler.SetupWithManager` (rayservice_controller.go).

        For RayService (generation, label or annotation changes), Owns RayCluster and Service;
        MaxConcurrentReconciles = ``reconcile_concurrency``."""
        from emu.runtime import ControllerOptions

        return (mgr.new_controller()
                .for_("RayService", api_version="ray.io/v1", predicates=(or_(
                    GenerationChangedPredicate(), LabelChangedPredicate(),
                    AnnotationChangedPredicate()),))
                .owns("RayCluster").owns("Service")
                .with_options(ControllerOptions(max_concurrent_reconciles=reconcile_concurrency))
                .complete(self))

    async def get_ray_service_instance(self, request: Request) -> Obj:
        """Port of `RayServiceReconciler.getRayServiceInstance` (rayservice_controller.go)."""
        return await self.client.get("RayService", request.name, request.namespace)

    # -- clusters ------------------------------------------------------------------------------

    async def reconcile_ray_cluster(self, instance: Obj) -> tuple[Obj | None, Obj | None]:
        """Port of `RayServiceReconciler.reconcileRayCluster` (rayservice_controller.go).

        Creates the recorded pending cluster when it does not exist yet (the second phase of
        the two-phase creation); otherwise updates the active, then the pending cluster in
        place when only worker groups were appended (or, for active, the KubeRay version
        changed)."""
        active = await self.get_ray_cluster_by_namespaced_name(
            assoc.ray_service_active_ray_cluster_namespaced_name(instance))
        pending = await self.get_ray_cluster_by_namespaced_name(
            assoc.ray_service_pending_ray_cluster_namespaced_name(instance))

        if dig(instance, "status", "pendingServiceStatus", "rayClusterName") and pending is None:
            pending = await self.create_ray_cluster_instance(instance)
            return active, pending

        for cluster, is_active, which in ((active, True, "active"), (pending, False, "pending")):
            if cluster is None or not self.should_update_cluster(instance, cluster, is_active):
                continue
            goal = construct_ray_cluster_for_ray_service(instance, cluster["metadata"]["name"],
                                                         self.options.gates)
            modify_ray_cluster(cluster, goal)
            ns, cname = cluster["metadata"].get("namespace", ""), cluster["metadata"]["name"]
            try:
                updated = await self.client.update(cluster)
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_UPDATE_RAY_CLUSTER, C.UPDATE_ACTION,
                            f"Failed to update the {which} RayCluster {ns}/{cname}: {err}")
                raise
            cluster["metadata"]["resourceVersion"] = dig(updated, "metadata", "resourceVersion")
            self._event(instance, "Normal", C.UPDATED_RAY_CLUSTER, C.UPDATE_ACTION,
                        f"Updated the {which} RayCluster {ns}/{cname}")
        return active, pending

    async def clean_up_ray_cluster_instance(self, instance: Obj) -> bool:
        """Port of `RayServiceReconciler.cleanUpRayClusterInstance` (rayservice_controller.go).

        Every cluster the RayService made that is neither active nor pending (every one while
        the RayService is being deleted) is dangling: the first time this process sees it, it
        stores now + delay (``rayClusterDeletionDelaySeconds``, else 60 s; 0 while deleting);
        once that time has passed, it deletes it. Returns whether any cluster is dangling."""
        opts = assoc.ray_service_ray_clusters_association_options(instance)
        clusters = list(await self.client.list("RayCluster", opts.namespace,
                                               label_selector=dict(opts.labels)))
        deleting = bool(dig(instance, "metadata", "deletionTimestamp"))
        delay = RAY_CLUSTER_DELETION_DELAY_DURATION
        custom = dig(instance, "spec", "rayClusterDeletionDelaySeconds")
        if custom is not None:
            delay = float(custom)
        if deleting:
            delay = 0.0
        active_name = dig(instance, "status", "activeServiceStatus", "rayClusterName") or ""
        pending_name = dig(instance, "status", "pendingServiceStatus", "rayClusterName") or ""
        has_clusters_to_clean = False
        now = self._clock()
        for cluster in clusters:
            cname = cluster["metadata"]["name"]
            ns = cluster["metadata"].get("namespace", "")
            if not deleting and cname in (active_name, pending_name):
                continue
            has_clusters_to_clean = True
            deadline = self.ray_cluster_deletion_timestamps.get(cname)
            if deadline is not None or deleting:
                if deleting or (deadline is not None and now > deadline):
                    try:
                        await self.client.delete("RayCluster", cname, ns,
                                                 propagation_policy="Background")
                    except Exception as err:
                        self._event(instance, "Warning", C.FAILED_TO_DELETE_RAY_CLUSTER,
                                    C.DELETE_ACTION,
                                    f"Failed to delete the RayCluster {ns}/{cname}: {err}")
                        raise
                    self._event(instance, "Normal", C.DELETED_RAY_CLUSTER, C.DELETE_ACTION,
                                f"Deleted the RayCluster {ns}/{cname}")
            else:
                self.ray_cluster_deletion_timestamps[cname] = now + delay
        return has_clusters_to_clean

    async def get_ray_cluster_by_namespaced_name(self, key: assoc.NamespacedName) -> Obj | None:
        """Port of `RayServiceReconciler.getRayClusterByNamespacedName`: None for an empty name
        or NotFound."""
        if not key.name:
            return None
        try:
            return await self.client.get("RayCluster", key.name, key.namespace)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    def clean_up_serve_config_cache(self, instance: Obj) -> None:
        """Port of `RayServiceReconciler.cleanUpServeConfigCache` (rayservice_controller.go):
        forget the configs of clusters that are neither active nor pending."""
        keep = (dig(instance, "status", "activeServiceStatus", "rayClusterName") or "",
                dig(instance, "status", "pendingServiceStatus", "rayClusterName") or "")
        configs = self.serve_configs.get(_cache_key(instance))
        if configs is None:
            return
        for cluster_name in [k for k in configs if k not in keep]:
            del configs[cluster_name]

    def should_update_cluster(self, instance: Obj, cluster: Obj | None, is_active: bool) -> bool:
        """Port of `shouldUpdateCluster` (rayservice_controller.go)."""
        if cluster is None:
            return False
        if is_active:
            if util.is_status_condition_true(dig(instance, "status", "conditions"),
                                             C.UPGRADE_IN_PROGRESS):
                return False
            if util.annotations_of(cluster).get(C.KUBE_RAY_VERSION) != C.KUBERAY_VERSION:
                return True
        if is_cluster_spec_hash_equal(instance, cluster, False):
            return False
        return is_cluster_spec_hash_equal(instance, cluster, True)

    def should_prepare_new_cluster(self, instance: Obj, active: Obj | None, pending: Obj | None,
                                   is_pending_serving: bool) -> bool:
        """Port of `shouldPrepareNewCluster` (rayservice_controller.go).

        Never while the Services point at pending (or a rollback runs); always when there is no
        cluster at all; otherwise when the spec hash differs from the pending cluster's (else the
        active one's) beyond appended worker groups, and zero-downtime upgrades are enabled."""
        if is_pending_serving:
            return False
        if util.is_status_condition_true(dig(instance, "status", "conditions"),
                                         C.ROLLBACK_IN_PROGRESS):
            return False
        if active is None and pending is None:
            return True
        cluster = pending if pending is not None else active
        assert cluster is not None
        if is_cluster_spec_hash_equal(instance, cluster, False):
            return False
        if is_cluster_spec_hash_equal(instance, cluster, True):
            return False
        return is_zero_downtime_upgrade_enabled(dig(instance, "spec", "upgradeStrategy"),
                                                self.options.env, self.options.gates)

    async def create_ray_cluster_instance(self, instance: Obj) -> Obj:
        """Port of `RayServiceReconciler.createRayClusterInstance` (rayservice_controller.go):
        Create the recorded pending cluster (AlreadyExists from a stale cache is an error)."""
        key = assoc.ray_service_pending_ray_cluster_namespaced_name(instance)
        cluster = construct_ray_cluster_for_ray_service(instance, key.name, self.options.gates)
        try:
            created = await self.client.create(cluster)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_CREATE_RAY_CLUSTER, C.CREATE_ACTION,
                        f"Failed to create the RayCluster {key.namespace}/{key.name}: {err}")
            raise
        self._event(instance, "Normal", C.CREATED_RAY_CLUSTER, C.CREATE_ACTION,
                    f"Created the RayCluster {key.namespace}/{key.name}")
        return created

    # -- Serve ---------------------------------------------------------------------------------

    async def update_serve_deployment(self, instance: Obj, dashboard: RayDashboardClient,
                                      cluster_name: str) -> None:
        """Port of `RayServiceReconciler.updateServeDeployment` (rayservice_controller.go): PUT
        ``serveConfigV2`` (YAML → JSON; for an incremental upgrade with the cluster's
        ``targetCapacity`` in status as ``target_capacity``), then cache it for the cluster."""
        text = dig(instance, "spec", "serveConfigV2") or ""
        try:
            config = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"error converting YAML to JSON: {err}") from err
        if not isinstance(config, dict):
            raise ValueError("error unmarshaling JSON: cannot unmarshal into map[string]interface {}")
        if util.is_incremental_upgrade_enabled(instance.get("spec"), self.options.gates):
            active_status = dig(instance, "status", "activeServiceStatus") or {}
            pending_status = dig(instance, "status", "pendingServiceStatus") or {}
            target_capacity = None
            if cluster_name == active_status.get("rayClusterName") and \
                    active_status.get("targetCapacity") is not None:
                target_capacity = active_status["targetCapacity"]
            elif cluster_name == pending_status.get("rayClusterName") and \
                    pending_status.get("targetCapacity") is not None:
                target_capacity = pending_status["targetCapacity"]
            if target_capacity is not None:
                config["target_capacity"] = target_capacity
        try:
            await dashboard.update_deployments(config)
        except Exception as err:
            raise RuntimeError(_SERVE_UPDATE_HELP + str(err)) from err
        self.cache_serve_config(instance, cluster_name)

    def get_serve_config_from_cache(self, instance: Obj, cluster_name: str) -> str:
        """Port of `RayServiceReconciler.getServeConfigFromCache`: "" when not cached."""
        configs = self.serve_configs.get(_cache_key(instance))
        if configs is None:
            return ""
        return configs.get(cluster_name, "")

    def cache_serve_config(self, instance: Obj, cluster_name: str) -> None:
        """Port of `RayServiceReconciler.cacheServeConfig`: an empty config is not cached."""
        config = dig(instance, "spec", "serveConfigV2") or ""
        if not config:
            return
        key = _cache_key(instance)
        configs = self.serve_configs.get(key)
        if configs is None:
            configs = {}
            self.serve_configs.add(key, configs)
        configs[cluster_name] = config

    async def reconcile_services(self, instance: Obj, cluster: Obj, service_type: str) -> Obj:
        """Port of `RayServiceReconciler.reconcileServices` (rayservice_controller.go).

        Build the head or serve Service for ``cluster``; if it exists and its ``ray.io/cluster``
        selector already names the cluster, return it untouched; else keep its clusterIP,
        replace the whole spec and Update; NotFound → Create, owned by the RayService."""
        if service_type == C.HEAD_SERVICE:
            new_svc = service_builders.build_head_service_for_ray_service(
                instance, cluster, self.options.env)
        elif service_type == C.SERVING_SERVICE:
            new_svc = service_builders.build_serve_service_for_ray_service(
                instance, cluster, self.options.gates)
        else:
            raise RayServicePanic(f"unknown service type {service_type}. This should never "
                                  "happen. Please open an issue in the KubeRay repository.")
        namespace = instance["metadata"].get("namespace", "")
        svc_name = new_svc["metadata"]["name"]
        try:
            old_svc = await self.client.get("Service", svc_name, namespace)
        except ApiError as err:
            if err.code != 404:
                raise
            util.set_controller_reference(instance, new_svc)
            try:
                created = await self.client.create(new_svc)
            except Exception as cerr:
                self._event(instance, "Warning", C.FAILED_TO_CREATE_SERVICE, C.CREATE_ACTION,
                            f"Failed to create the service {new_svc['metadata'].get('namespace')}"
                            f"/{svc_name}, {cerr}")
                raise
            self._event(instance, "Normal", C.CREATED_SERVICE, C.CREATE_ACTION,
                        f"Created the service {new_svc['metadata'].get('namespace')}/{svc_name}")
            return created
        if util.get_ray_cluster_name_from_service(new_svc) == \
                util.get_ray_cluster_name_from_service(old_svc):
            return old_svc
        new_spec = util.deep_copy(new_svc["spec"])
        old_spec = old_svc.get("spec") or {}
        if old_spec.get("clusterIP"):
            new_spec["clusterIP"] = old_spec["clusterIP"]
        if old_spec.get("clusterIPs"):
            # The API server would default clusterIPs from clusterIP; ours keeps them immutable.
            new_spec["clusterIPs"] = list(old_spec["clusterIPs"])
        old_svc["spec"] = new_spec
        ns = old_svc["metadata"].get("namespace", "")
        try:
            updated = await self.client.update(old_svc)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_UPDATE_SERVICE, C.UPDATE_ACTION,
                        f"Failed to update the service {ns}/{svc_name}, {err}")
            raise
        self._event(instance, "Normal", C.UPDATED_SERVICE, C.UPDATE_ACTION,
                    f"Updated the service {ns}/{svc_name}")
        return updated

    async def reconcile_serve(self, instance: Obj, cluster: Obj
                              ) -> tuple[bool, dict[str, Obj] | None]:
        """Port of `RayServiceReconciler.reconcileServe` (rayservice_controller.go).

        Not ready, without a dashboard call, while the cluster's ``HeadPodReady`` is not True
        (the RayCluster controller's view; without the conditions gate, the head Pod itself).
        Otherwise GET the application statuses, PUT the config when
        `check_if_need_submit_serve_applications` says so, and return (all RUNNING, statuses)."""
        if self.options.gates.enabled(RAY_CLUSTER_STATUS_CONDITIONS):
            if not util.is_status_condition_true(dig(cluster, "status", "conditions"),
                                                 C.HEAD_POD_READY):
                return False, None
        else:
            try:
                if not await self.is_head_pod_running_and_ready(cluster):
                    return False, None
            except Exception:
                return False, None

        url = await util.fetch_head_service_url(self.client, cluster, C.DASHBOARD_PORT_NAME,
                                                self.options.env)
        if not url:
            return False, None
        dashboard = self.dashboard_client_func(cluster, url)
        cluster_name = cluster["metadata"]["name"]
        skip_config_update = False
        is_active = cluster_name == dig(instance, "status", "activeServiceStatus",
                                        "rayClusterName")
        incremental = util.is_incremental_upgrade_enabled(instance.get("spec"), self.options.gates)
        conditions = dig(instance, "status", "conditions")
        upgrading = incremental and util.is_status_condition_true(conditions,
                                                                  C.UPGRADE_IN_PROGRESS)
        rolling_back = incremental and util.is_status_condition_true(conditions,
                                                                     C.ROLLBACK_IN_PROGRESS)
        if is_active and upgrading and not rolling_back:
            # the new config goes to the pending cluster only
            skip_config_update = True
        elif not is_active and rolling_back:
            # the pending cluster is being phased out: no disruptive redeploy
            skip_config_update = True
        cached = self.get_serve_config_from_cache(instance, cluster_name)
        is_ready, apps = await get_and_check_serve_status(dashboard)
        should_update, _reason = check_if_need_submit_serve_applications(
            cached, dig(instance, "spec", "serveConfigV2") or "", apps)
        ns = cluster["metadata"].get("namespace", "")
        if should_update and not skip_config_update:
            try:
                await self.update_serve_deployment(instance, dashboard, cluster_name)
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_UPDATE_SERVE_APPLICATIONS,
                            C.UPDATE_ACTION, f"Failed to update serve applications to the "
                                             f"RayCluster {ns}/{cluster_name}: {err}")
                raise
            self._event(instance, "Normal", C.UPDATED_SERVE_APPLICATIONS, C.UPDATE_ACTION,
                        f"Updated serve applications to the RayCluster {ns}/{cluster_name}")
        if upgrading:
            needed, _reason = await self.check_if_need_target_capacity_update(instance)
            if needed:
                try:
                    await self.reconcile_serve_target_capacity(instance, cluster, dashboard)
                except Exception as err:
                    self._event(instance, "Warning", C.FAILED_TO_UPDATE_TARGET_CAPACITY,
                                C.UPDATE_ACTION, f"Failed to update target_capacity of serve "
                                                 f"applications to the RayCluster "
                                                 f"{ns}/{cluster_name}: {err}")
                    raise
                # Go's message has "to to" (sic)
                self._event(instance, "Normal", C.UPDATED_SERVE_TARGET_CAPACITY, C.UPDATE_ACTION,
                            f"Updated target_capacity of serve applications to to the RayCluster "
                            f"{ns}/{cluster_name}")
        return is_ready, apps

    # -- incremental upgrade (NewClusterWithIncrementalUpgrade) ---------------------------------

    def create_gateway(self, instance: Obj) -> Obj:
        """Port of `RayServiceReconciler.createGateway` (rayservice_controller.go): Gateway
        ``<rayservice>-gateway`` of ``gatewayClassName`` with one HTTP listener on port 80."""
        options = util.get_ray_service_cluster_upgrade_options(instance.get("spec"))
        if options is None:
            raise ValueError("Missing RayService ClusterUpgradeOptions during upgrade.")
        key = assoc.ray_service_gateway_namespaced_name(instance)
        return {"apiVersion": GATEWAY_API_VERSION, "kind": "Gateway",
                "metadata": {"name": key.name, "namespace": key.namespace},
                "spec": {"gatewayClassName": options.get("gatewayClassName", ""),
                         "listeners": [{"name": C.GATEWAY_LISTENER_PORT_NAME, "protocol": "HTTP",
                                        "port": C.DEFAULT_GATEWAY_LISTENER_PORT}]}}

    async def reconcile_gateway(self, instance: Obj) -> None:
        """Port of `RayServiceReconciler.reconcileGateway` (rayservice_controller.go): create
        the Gateway (owned by the RayService), or update its spec when the managed fields
        differ."""
        desired = self.create_gateway(instance)
        meta = desired["metadata"]
        try:
            existing = await self.client.get("Gateway", meta["name"], meta["namespace"])
        except ApiError as err:
            if err.code != 404:
                raise
            util.set_controller_reference(instance, desired)
            try:
                await self.client.create(desired)
            except Exception as cerr:
                self._event(instance, "Warning", C.FAILED_TO_CREATE_GATEWAY, C.CREATE_ACTION,
                            f"Failed to create Gateway for RayService {meta['namespace']}/"
                            f"{meta['name']}: {cerr}")
                raise
            self._event(instance, "Normal", C.CREATED_GATEWAY, C.CREATE_ACTION,
                        f"Created Gateway for RayService {meta['namespace']}/{meta['name']}")
            return
        if is_gateway_equal(existing, desired):
            return
        existing["spec"] = desired["spec"]
        try:
            await self.client.update(existing)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_UPDATE_GATEWAY, C.UPDATE_ACTION,
                        f"Failed to update the Gateway {meta['namespace']}/{meta['name']}: {err}")
            raise
        self._event(instance, "Normal", C.UPDATED_GATEWAY, C.UPDATE_ACTION,
                    f"Updated the Gateway {meta['namespace']}/{meta['name']}")

    def calculate_traffic_routed_percent(self, instance: Obj, is_pending_ready: bool
                                         ) -> tuple[int, int]:
        """Port of `RayServiceReconciler.calculateTrafficRoutedPercent`
        (rayservice_controller.go): the (active, pending) weights. They stay put once the cluster
        traffic moves to has reached its target capacity; otherwise, once ``intervalSeconds``
        have passed since that cluster's ``lastTrafficMigratedTime``, ``stepSizePercent`` moves
        to it (to pending only when it is ready; back to active during a rollback)."""
        status = instance.get("status") or {}
        active_status = status.get("activeServiceStatus") or {}
        pending_status = status.get("pendingServiceStatus") or {}
        active_weight = int(_deref(active_status.get("trafficRoutedPercent"), 100))
        pending_weight = int(_deref(pending_status.get("trafficRoutedPercent"), 0))
        options = util.get_ray_service_cluster_upgrade_options(instance.get("spec"))
        if options is None:
            raise ValueError("ClusterUpgradeOptions are not set during upgrade.")
        pending_capacity = int(_deref(pending_status.get("targetCapacity"), 0))
        active_capacity = int(_deref(active_status.get("targetCapacity"), 100))
        rolling_back = util.is_status_condition_true(status.get("conditions"),
                                                     C.ROLLBACK_IN_PROGRESS)
        if (pending_weight == pending_capacity and not rolling_back) or \
                (rolling_back and active_weight == active_capacity):
            return active_weight, pending_weight
        interval = float(options.get("intervalSeconds") or 0)
        step = int(options.get("stepSizePercent") or 0)
        last = (active_status if rolling_back else pending_status).get("lastTrafficMigratedTime")
        if last is None or self._clock() - parse_time(last) >= interval:
            if rolling_back:
                active_weight = min(100, active_weight + step, active_capacity)
                pending_weight = 100 - active_weight
            elif is_pending_ready:
                pending_weight = min(100, pending_weight + step, pending_capacity)
                active_weight = 100 - pending_weight
        return active_weight, pending_weight

    async def create_http_route(self, instance: Obj, is_pending_ready: bool) -> Obj | None:
        """Port of `RayServiceReconciler.createHTTPRoute` (rayservice_controller.go): the
        desired HTTPRoute ``<rayservice>-httproute`` on the Gateway, one ``PathPrefix /`` rule
        whose backends are the active (and pending) cluster's per-cluster serve Service with the
        weights of `calculate_traffic_routed_percent`; None without an active cluster."""
        gkey = assoc.ray_service_gateway_namespaced_name(instance)
        gateway = await self.client.get("Gateway", gkey.name, gkey.namespace)
        active = await self.get_ray_cluster_by_namespaced_name(
            assoc.ray_service_active_ray_cluster_namespaced_name(instance))
        if active is None:
            return None
        pending = await self.get_ray_cluster_by_namespaced_name(
            assoc.ray_service_pending_ray_cluster_namespaced_name(instance))
        active_weight, pending_weight = self.calculate_traffic_routed_percent(instance,
                                                                              is_pending_ready)
        gw_ns = gateway["metadata"].get("namespace", "")
        backend_refs = [{
            "name": util.generate_serve_service_name(active["metadata"]["name"]),
            "namespace": gw_ns, "port": service_builders.get_serve_port(active),
            "weight": active_weight}]
        if pending is not None:
            backend_refs.append({
                "name": util.generate_serve_service_name(pending["metadata"]["name"]),
                "namespace": gw_ns, "port": service_builders.get_serve_port(pending),
                "weight": pending_weight})
        return {"apiVersion": GATEWAY_API_VERSION, "kind": "HTTPRoute",
                "metadata": {"name": f"{instance['metadata']['name']}-httproute",
                             "namespace": gw_ns},
                "spec": {"parentRefs": [{"name": gateway["metadata"]["name"],
                                         "namespace": gw_ns}],
                         "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                    "backendRefs": backend_refs}]}}

    async def reconcile_http_route(self, instance: Obj, is_pending_ready: bool) -> Obj | None:
        """Port of `RayServiceReconciler.reconcileHTTPRoute` (rayservice_controller.go): create
        the HTTPRoute (owned by the RayService) or update its spec when the managed fields
        differ; returns the route as it now is (None without an active cluster)."""
        desired = await self.create_http_route(instance, is_pending_ready)
        if desired is None:
            return None
        key = assoc.ray_service_http_route_namespaced_name(instance)
        meta = desired["metadata"]
        try:
            existing = await self.client.get("HTTPRoute", key.name, key.namespace)
        except ApiError as err:
            if err.code != 404:
                raise
            util.set_controller_reference(instance, desired)
            try:
                await self.client.create(desired)
            except Exception as cerr:
                self._event(instance, "Warning", C.FAILED_TO_CREATE_HTTP_ROUTE, C.CREATE_ACTION,
                            f"Failed to create the HTTPRoute for RayService {meta['namespace']}/"
                            f"{meta['name']}: {cerr}")
                raise
            self._event(instance, "Normal", C.CREATED_HTTP_ROUTE, C.CREATE_ACTION,
                        f"Created HTTPRoute for RayService {meta['namespace']}/{meta['name']}")
            return desired
        if not is_http_route_equal(existing, desired):
            existing["spec"] = desired["spec"]
            ens = existing["metadata"].get("namespace", "")
            ename = existing["metadata"]["name"]
            try:
                updated = await self.client.update(existing)
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_UPDATE_HTTP_ROUTE, C.UPDATE_ACTION,
                            f"Failed to update the HTTPRoute {ens}/{ename}: {err}")
                raise
            existing["metadata"]["resourceVersion"] = dig(updated, "metadata",
                                                          "resourceVersion")
            self._event(instance, "Normal", C.UPDATED_HTTP_ROUTE, C.UPDATE_ACTION,
                        f"Updated the HTTPRoute {ens}/{ename}")
        return existing

    async def check_if_need_target_capacity_update(self, instance: Obj) -> tuple[bool, str]:
        """Port of `RayServiceReconciler.checkIfNeedTargetCapacityUpdate`
        (rayservice_controller.go): whether a target_capacity step is due, and why. Nothing
        moves until the Gateway is Accepted and Programmed and the HTTPRoute is Accepted with
        its refs resolved by the Gateway API implementation."""
        status = instance.get("status") or {}
        active_status = status.get("activeServiceStatus") or {}
        pending_status = status.get("pendingServiceStatus") or {}
        if not active_status.get("rayClusterName") or not pending_status.get("rayClusterName"):
            return False, ("Both active and pending RayCluster instances are required for "
                           "NewClusterWithIncrementalUpgrade.")
        gkey = assoc.ray_service_gateway_namespaced_name(instance)
        try:
            gateway = await self.client.get("Gateway", gkey.name, gkey.namespace)
        except ApiError as err:
            return False, f"Failed to retrieve Gateway for RayService: {err}"
        if not is_gateway_ready(gateway):
            return False, "Gateway for RayService NewClusterWithIncrementalUpgrade is not ready."
        rkey = assoc.ray_service_http_route_namespaced_name(instance)
        try:
            route = await self.client.get("HTTPRoute", rkey.name, rkey.namespace)
        except ApiError as err:
            return False, f"Failed to retrieve HTTPRoute for RayService: {err}"
        if not is_http_route_ready(gateway, route):
            return False, "HTTPRoute for RayService NewClusterWithIncrementalUpgrade is not ready."
        if active_status.get("targetCapacity") is None or \
                active_status.get("trafficRoutedPercent") is None:
            return True, "Active RayServiceStatus missing TargetCapacity or TrafficRoutedPercent."
        if pending_status.get("targetCapacity") is None or \
                pending_status.get("trafficRoutedPercent") is None:
            return True, "Pending RayServiceStatus missing TargetCapacity or TrafficRoutedPercent."
        active_capacity = int(active_status["targetCapacity"])
        pending_capacity = int(pending_status["targetCapacity"])
        pending_traffic = int(pending_status["trafficRoutedPercent"])
        if util.is_status_condition_true(status.get("conditions"), C.ROLLBACK_IN_PROGRESS):
            if active_capacity == 100 and pending_capacity == 0:
                return False, ("Rollback complete: all traffic has been restored to the active "
                               "cluster.")
            return True, "Rollback in progress: traffic is being restored to the active cluster."
        if active_capacity == 0 and pending_capacity == 100:
            return False, ("All traffic has migrated to the upgraded cluster and "
                           "NewClusterWithIncrementalUpgrade is complete.")
        if pending_capacity < 100 or pending_traffic < 100:
            return True, "Pending RayCluster has not finished scaling up."
        return True, "Active RayCluster TargetCapacity has not finished scaling down."

    async def apply_serve_target_capacity(self, instance: Obj, cluster: Obj,
                                          dashboard: RayDashboardClient, goal: int) -> None:
        """Port of `RayServiceReconciler.applyServeTargetCapacity` (rayservice_controller.go):
        PUT the cluster's cached config (else the spec's) with ``target_capacity`` = ``goal``
        unless it already says so, then record ``goal`` as the cluster's targetCapacity."""
        cname = cluster["metadata"]["name"]
        cached = self.get_serve_config_from_cache(instance, cname) or \
            dig(instance, "spec", "serveConfigV2") or ""
        try:
            config = yaml.safe_load(cached) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"error converting YAML to JSON: {err}") from err
        current = config.get("target_capacity")
        # Go type-asserts float64, which a YAML integer never is (quirk): only a
        # target_capacity written as a float short-circuits here
        if isinstance(current, float) and int(current) == goal:
            return
        config["target_capacity"] = goal
        try:
            await dashboard.update_deployments(config)
        except Exception as err:
            raise RuntimeError(_SERVE_UPDATE_HELP + str(err)) from err
        status = instance.setdefault("status", {})
        if cname == dig(status, "activeServiceStatus", "rayClusterName"):
            status.setdefault("activeServiceStatus", {})["targetCapacity"] = goal
        elif cname == dig(status, "pendingServiceStatus", "rayClusterName"):
            status.setdefault("pendingServiceStatus", {})["targetCapacity"] = goal

    async def reconcile_serve_target_capacity(self, instance: Obj, cluster: Obj,
                                              dashboard: RayDashboardClient) -> None:
        """Port of `RayServiceReconciler.reconcileServeTargetCapacity`
        (rayservice_controller.go): one ``maxSurgePercent`` step of target_capacity for this
        cluster, if it is the one to move. Upgrade: once the pending traffic has caught up with
        its capacity, the active cluster goes down while the two add up to more than 100, else
        the pending cluster goes up. Rollback: the mirror image, once the active traffic has
        caught up."""
        status = instance.setdefault("status", {})
        active_status = status.setdefault("activeServiceStatus", {})
        pending_status = status.setdefault("pendingServiceStatus", {})
        if active_status.get("targetCapacity") is None:
            active_status["targetCapacity"] = 100
        if pending_status.get("targetCapacity") is None:
            pending_status["targetCapacity"] = 0
        active_capacity = int(active_status["targetCapacity"])
        pending_capacity = int(pending_status["targetCapacity"])
        pending_traffic = int(_deref(pending_status.get("trafficRoutedPercent"), 0))
        options = util.get_ray_service_cluster_upgrade_options(instance.get("spec"))
        if options is None:
            raise ValueError("Missing RayService ClusterUpgradeOptions during upgrade")
        max_surge = int(_deref(options.get("maxSurgePercent"), 100))
        cname = cluster["metadata"]["name"]
        if util.is_status_condition_true(status.get("conditions"), C.ROLLBACK_IN_PROGRESS):
            active_traffic = int(_deref(active_status.get("trafficRoutedPercent"), 0))
            if active_capacity != active_traffic:
                return
            if active_capacity + pending_capacity > 100:
                if cname == pending_status.get("rayClusterName"):
                    await self.apply_serve_target_capacity(
                        instance, cluster, dashboard, max(0, pending_capacity - max_surge))
            elif cname == active_status.get("rayClusterName"):
                await self.apply_serve_target_capacity(
                    instance, cluster, dashboard, min(100, active_capacity + max_surge))
            return
        if pending_capacity != pending_traffic:
            return  # traffic is still moving to the pending cluster
        if cname == active_status.get("rayClusterName"):
            if active_capacity + pending_capacity > 100:
                await self.apply_serve_target_capacity(
                    instance, cluster, dashboard, max(0, active_capacity - max_surge))
        elif cname == pending_status.get("rayClusterName") and \
                active_capacity + pending_capacity <= 100:
            await self.apply_serve_target_capacity(
                instance, cluster, dashboard, min(100, pending_capacity + max_surge))

    async def reconcile_per_cluster_serve_service(self, instance: Obj,
                                                  cluster: Obj | None) -> None:
        """Port of `RayServiceReconciler.reconcilePerClusterServeService`
        (rayservice_controller.go): create ``<cluster>-serve-svc`` (owned by the cluster, so it
        goes with it) when missing; an existing one is left as it is."""
        if cluster is None:
            return
        desired = service_builders.build_serve_service(instance, cluster, True,
                                                       self.options.gates)
        util.set_controller_reference(cluster, desired)
        meta = desired["metadata"]
        try:
            await self.client.get("Service", meta["name"], meta.get("namespace"))
        except ApiError as err:
            if err.code != 404:
                raise
            await self.client.create(desired)

    def reconcile_rollback_state(self, instance: Obj, active: Obj, pending: Obj) -> None:
        """Port of `RayServiceReconciler.reconcileRollbackState` (rayservice_controller.go).

        The goal spec's hash against the two clusters': back to the active cluster's → start a
        rollback; the pending cluster's → cancel a rollback; a third spec → roll back first (a
        fresh upgrade starts once the rollback has completed)."""
        target = util.generate_hash_without_replicas_and_workers_to_delete(
            ray_cluster_spec_for_hashing(instance))
        original = util.annotations_of(active).get(
            C.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY, "")
        pending_hash = util.annotations_of(pending).get(
            C.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY, "")
        conditions = instance.setdefault("status", {}).setdefault("conditions", [])
        rolling_back = util.is_status_condition_true(conditions, C.ROLLBACK_IN_PROGRESS)
        if target == original:
            if not rolling_back:
                set_condition(instance, C.ROLLBACK_IN_PROGRESS, "True",
                              C.DESIRED_CLUSTER_SPEC_CHANGED,
                              "Goal state reverted to original cluster, rolling back.", self.now())
            return
        if target == pending_hash:
            if rolling_back:
                util.remove_status_condition(conditions, C.ROLLBACK_IN_PROGRESS)
            return
        if not rolling_back:
            set_condition(instance, C.ROLLBACK_IN_PROGRESS, "True", C.DESIRED_CLUSTER_SPEC_CHANGED,
                          "Goal state changed mid-upgrade, rolling back to original cluster.",
                          self.now())

    async def update_head_pod_serve_label(self, instance: Obj, cluster: Obj | None,
                                          exclude_head_pod_from_serve_svc: bool) -> None:
        """Port of `RayServiceReconciler.updateHeadPodServeLabel` (rayservice_controller.go).

        A referenced cluster without a head Pod is an error (the pass ends before any status
        is computed). ``ray.io/serve`` = "false" when the head is excluded, else whether the
        head's Serve proxy answers ``/-/healthz`` with 200; the Pod is updated on a change."""
        if cluster is None:
            return
        head_pod = await assoc.get_ray_cluster_head_pod(self.client, cluster)
        cname = cluster["metadata"]["name"]
        cns = cluster["metadata"].get("namespace", "")
        if head_pod is None:
            raise RuntimeError(f"found 0 head. cluster name {cname}, namespace {cns}")
        containers = dig(head_pod, "spec", "containers") or [{}]
        serving_port = util.find_container_port(containers[C.RAY_CONTAINER_INDEX],
                                                C.SERVING_PORT_NAME, C.DEFAULT_SERVING_PORT)
        labels = head_pod["metadata"].setdefault("labels", {})
        old_label = labels.get(C.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY, "")
        new_label = C.ENABLE_RAY_CLUSTER_SERVING_SERVICE_FALSE
        if not exclude_head_pod_from_serve_svc:
            try:
                await self.http_proxy_client_func(dig(head_pod, "status", "podIP") or "",
                                                  head_pod["metadata"].get("namespace", ""),
                                                  head_pod["metadata"]["name"], serving_port)
                healthy = True
            except Exception:
                healthy = False
            new_label = "true" if healthy else "false"
        if old_label == new_label:
            return
        labels[C.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY] = new_label
        pns, pname = head_pod["metadata"].get("namespace", ""), head_pod["metadata"]["name"]
        try:
            await self.client.update(head_pod)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_UPDATE_HEAD_POD_SERVE_LABEL,
                        C.UPDATE_ACTION, f'Failed to update the serve label to "{new_label}" for '
                                         f"the Head Pod {pns}/{pname}: {err}")
            raise
        self._event(instance, "Normal", C.UPDATED_HEAD_POD_SERVE_LABEL, C.UPDATE_ACTION,
                    f'Updated the serve label to "{new_label}" for the Head Pod {pns}/{pname}')

    async def calculate_num_serve_endpoints_from_slices(self, namespace: str, name: str) -> int:
        """Port of `RayServiceReconciler.calculateNumServeEndpointsFromSlices`: unique Pod UIDs
        among ready endpoints of the EndpointSlices labelled ``kubernetes.io/service-name``."""
        slices = await self.client.list("EndpointSlice", namespace,
                                        label_selector={"kubernetes.io/service-name": name})
        uids: dict[str, None] = {}
        for endpoint_slice in slices:
            for endpoint in endpoint_slice.get("endpoints") or []:
                if not dig(endpoint, "conditions", "ready"):
                    continue
                uid = dig(endpoint, "targetRef", "uid")
                if uid:
                    uids[uid] = None
        return len(uids)

    async def is_head_pod_running_and_ready(self, cluster: Obj) -> bool:
        """Port of `RayServiceReconciler.isHeadPodRunningAndReady` (rayservice_controller.go)."""
        head_pod = await assoc.get_ray_cluster_head_pod(self.client, cluster)
        if head_pod is None:
            raise RuntimeError(f"found 0 head. cluster name {cluster['metadata']['name']}, "
                               f"namespace {cluster['metadata'].get('namespace', '')}")
        return util.is_running_and_ready(head_pod)


# ---------------------------------------------------------------------------------------------
# Free functions of rayservice_controller.go
# ---------------------------------------------------------------------------------------------


def _deref(value: Any, default: Any) -> Any:
    """``ptr.Deref``: the value, or ``default`` when unset."""
    return default if value is None else value


#: The Gateway API group/version the RayService controller writes.
GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"


def is_gateway_ready(gateway: Mapping[str, Any] | None) -> bool:
    """Port of `IsGatewayReady` (util.go): ``Accepted`` and ``Programmed`` are True."""
    if gateway is None:
        return False
    conditions = dig(gateway, "status", "conditions")
    return util.is_status_condition_true(conditions, "Accepted") and \
        util.is_status_condition_true(conditions, "Programmed")


def is_http_route_ready(gateway: Mapping[str, Any], route: Mapping[str, Any] | None) -> bool:
    """Port of `IsHTTPRouteReady` (util.go): the route's status entry for this Gateway has
    ``Accepted`` and ``ResolvedRefs`` True."""
    if route is None:
        return False
    for parent in dig(route, "status", "parents") or []:
        ref = parent.get("parentRef") or {}
        if ref.get("name") != dig(gateway, "metadata", "name"):
            continue
        if ref.get("namespace") is not None and \
                ref.get("namespace") != dig(gateway, "metadata", "namespace"):
            continue
        conditions = parent.get("conditions")
        if util.is_status_condition_true(conditions, "Accepted") and \
                util.is_status_condition_true(conditions, "ResolvedRefs"):
            return True
    return False


def get_weights_from_http_route(route: Mapping[str, Any] | None, instance: Mapping[str, Any]
                                ) -> tuple[int, int]:
    """Port of `GetWeightsFromHTTPRoute` (util.go): (active, pending) weights of the first
    rule's backends whose name *contains* the cluster's name; -1 where none is found."""
    active_name = dig(instance, "status", "activeServiceStatus", "rayClusterName") or ""
    pending_name = dig(instance, "status", "pendingServiceStatus", "rayClusterName") or ""
    active_weight = pending_weight = -1
    rules = dig(route, "spec", "rules") if route is not None else None
    if not rules or not (rules[0].get("backendRefs") or []):
        return active_weight, pending_weight
    for ref in rules[0]["backendRefs"]:
        name = str(ref.get("name", ""))
        weight = int(_deref(ref.get("weight"), 0))
        if active_name and active_name in name:
            active_weight = weight
        if pending_name and pending_name in name:
            pending_weight = weight
    return active_weight, pending_weight


def is_http_route_equal(existing: Mapping[str, Any] | None,
                        desired: Mapping[str, Any] | None) -> bool:
    """Port of `IsHTTPRouteEqual` (util.go): hostnames, parentRefs (name, namespace), rules'
    matches and filters, and each backendRef's name, namespace, weight (default 1) and port."""
    if existing is None or desired is None:
        return existing is desired
    es, ds = existing.get("spec") or {}, desired.get("spec") or {}
    if (es.get("hostnames") or []) != (ds.get("hostnames") or []):
        return False
    eps, dps = es.get("parentRefs") or [], ds.get("parentRefs") or []
    if len(eps) != len(dps):
        return False
    for e, d in zip(eps, dps, strict=True):
        if e.get("name") != d.get("name") or \
                (e.get("namespace") or "") != (d.get("namespace") or ""):
            return False
    ers, drs = es.get("rules") or [], ds.get("rules") or []
    if len(ers) != len(drs):
        return False
    for er, dr in zip(ers, drs, strict=True):
        if er.get("matches") != dr.get("matches"):
            return False
        if (er.get("filters") or []) != (dr.get("filters") or []):
            return False
        ebs, dbs = er.get("backendRefs") or [], dr.get("backendRefs") or []
        if len(ebs) != len(dbs):
            return False
        for eb, db in zip(ebs, dbs, strict=True):
            if eb.get("name") != db.get("name") or \
                    (eb.get("namespace") or "") != (db.get("namespace") or "") or \
                    _deref(eb.get("weight"), 1) != _deref(db.get("weight"), 1) or \
                    _deref(eb.get("port"), 0) != _deref(db.get("port"), 0):
                return False
    return True


def is_gateway_equal(existing: Mapping[str, Any] | None, desired: Mapping[str, Any] | None
                     ) -> bool:
    """Port of `IsGatewayEqual` (util.go): the class name and each listener's name, protocol
    and port."""
    if existing is None or desired is None:
        return existing is desired
    es, ds = existing.get("spec") or {}, desired.get("spec") or {}
    if es.get("gatewayClassName") != ds.get("gatewayClassName"):
        return False
    els, dls = es.get("listeners") or [], ds.get("listeners") or []
    if len(els) != len(dls):
        return False
    return all(e.get("name") == d.get("name") and e.get("protocol") == d.get("protocol")
               and e.get("port") == d.get("port") for e, d in zip(els, dls, strict=True))


def should_complete_incremental_rollback(active_status: Mapping[str, Any],
                                         pending_status: Mapping[str, Any],
                                         pending_cluster: Mapping[str, Any] | None) -> bool:
    """Port of `shouldCompleteIncrementalRollback` (rayservice_controller.go): the active cluster
    is back at 100% capacity and traffic, and the pending one is at 0/0 or unhealthy (its
    ``HeadPodReady`` is not True)."""
    pending_healthy = pending_cluster is not None and util.is_status_condition_true(
        dig(pending_cluster, "status", "conditions"), C.HEAD_POD_READY)
    return _deref(active_status.get("targetCapacity"), -1) == 100 and \
        _deref(active_status.get("trafficRoutedPercent"), -1) == 100 and \
        (not pending_healthy or (_deref(pending_status.get("targetCapacity"), -1) == 0 and
                                 _deref(pending_status.get("trafficRoutedPercent"), -1) == 0))


def _cache_key(instance: Mapping[str, Any]) -> str:
    return f"{dig(instance, 'metadata', 'namespace') or ''}/{dig(instance, 'metadata', 'name')}"


def _set_apps(service_status: Obj, apps: dict[str, Obj] | None) -> None:
    # Go assigns the map; a nil map is omitted from the JSON.
    if apps:
        service_status["applicationStatuses"] = apps
    else:
        service_status.pop("applicationStatuses", None)


def set_condition(instance: Obj, condition_type: str, status: str, reason: str, message: str,
                  now: str) -> None:
    """Port of `setCondition` (rayservice_controller.go): ``meta.SetStatusCondition`` with the
    status's observedGeneration."""
    st = instance.setdefault("status", {})
    util.set_status_condition(st.setdefault("conditions", []), {
        "type": condition_type, "status": status, "reason": reason, "message": message,
        "observedGeneration": st.get("observedGeneration", 0)}, now)


def validate_ray_service(instance: Obj, gates: FeatureGates = DEFAULTS
                         ) -> tuple[str, Exception | None]:
    """Port of `validateRayService` (rayservice_controller.go): metadata, then spec; the event
    reason of the first failure and its error."""
    try:
        validation.validate_ray_service_metadata(instance.get("metadata") or {})
    except ValueError as err:
        return C.INVALID_RAY_SERVICE_METADATA, err
    try:
        validation.validate_ray_service_spec(instance, gates)
    except ValueError as err:
        return C.INVALID_RAY_SERVICE_SPEC, err
    return "", None


def suspend_is_operative(instance: Mapping[str, Any]) -> bool:
    """Port of `suspendIsOperative` (rayservice_controller.go): Suspending or Suspended is True,
    so the suspend state machine owns this pass."""
    conditions = dig(instance, "status", "conditions")
    return util.is_status_condition_true(conditions, C.RAY_SERVICE_SUSPENDING) or \
        util.is_status_condition_true(conditions, C.RAY_SERVICE_SUSPENDED)


def reconcile_promotion_and_serving_status(head_svc: Obj, serve_svc: Obj, instance: Obj,
                                           pending_cluster: Obj | None = None,
                                           gates: FeatureGates = DEFAULTS) -> bool:
    """Port of `reconcilePromotionAndServingStatus` (rayservice_controller.go).

    Reads where the Services point: they must agree and name the active or pending cluster
    (else `RayServicePanic`). Blue/green: if that is not the active one, pending is promoted
    (active := the whole pending status, pending := empty). Incremental upgrade: promoted only
    while UpgradeInProgress, no rollback, and the upgrade complete (active capacity 0, pending
    traffic 100), or when there is no active cluster yet. Returns whether the Services point at
    the (pre-promotion) pending cluster."""
    points_to = util.get_ray_cluster_name_from_service(head_svc)
    if points_to != util.get_ray_cluster_name_from_service(serve_svc):
        raise RayServicePanic("headSvc and serveSvc are not pointing to the same cluster")
    status = instance.setdefault("status", {})
    pending_name = dig(status, "pendingServiceStatus", "rayClusterName") or ""
    active_name = dig(status, "activeServiceStatus", "rayClusterName") or ""
    if points_to not in (pending_name, active_name):
        raise RayServicePanic("clusterName from services is not equal to pendingCluster or "
                              "activeCluster")
    conditions = status.get("conditions")
    if util.is_incremental_upgrade_enabled(instance.get("spec"), gates):
        if util.is_status_condition_true(conditions, C.UPGRADE_IN_PROGRESS):
            should_promote = not util.is_status_condition_true(
                conditions, C.ROLLBACK_IN_PROGRESS) and \
                util.is_incremental_upgrade_complete(instance, pending_cluster)
        else:
            should_promote = active_name == "" and pending_name != ""
    else:
        should_promote = active_name != points_to
    if should_promote:
        status["activeServiceStatus"] = status.get("pendingServiceStatus") or {}
        status["pendingServiceStatus"] = {}
    return points_to == pending_name


def calculate_conditions(r: RayServiceReconciler, instance: Obj) -> None:
    """Port of `calculateConditions` (rayservice_controller.go).

    First time: Ready and UpgradeInProgress False/Initializing. Ready True with endpoints,
    True → False ZeroServeEndpoints when they drop to 0, otherwise the initializing timeout;
    UpgradeInProgress from which cluster names are set."""
    status = instance.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    now = r.now()
    if not conditions:
        message = "RayService is initializing"
        set_condition(instance, C.RAY_SERVICE_READY, "False", C.RAY_SERVICE_INITIALIZING,
                      message, now)
        set_condition(instance, C.UPGRADE_IN_PROGRESS, "False", C.RAY_SERVICE_INITIALIZING,
                      message, now)
    if (status.get("numServeEndpoints") or 0) > 0:
        set_condition(instance, C.RAY_SERVICE_READY, "True", C.NON_ZERO_SERVE_ENDPOINTS,
                      "Number of serve endpoints is greater than 0", now)
    elif util.is_status_condition_true(conditions, C.RAY_SERVICE_READY):
        set_condition(instance, C.RAY_SERVICE_READY, "False", C.ZERO_SERVE_ENDPOINTS,
                      "Number of serve endpoints dropped to 0", now)
    else:
        mark_failed_on_initializing_timeout(r, instance)

    active_name = dig(status, "activeServiceStatus", "rayClusterName") or ""
    pending_name = dig(status, "pendingServiceStatus", "rayClusterName") or ""
    if active_name and pending_name:
        set_condition(instance, C.UPGRADE_IN_PROGRESS, "True", C.BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
                      "Both active and pending Ray clusters exist", now)
    elif active_name:
        set_condition(instance, C.UPGRADE_IN_PROGRESS, "False", C.NO_PENDING_CLUSTER,
                      "Active Ray cluster exists and no pending Ray cluster", now)
    else:
        cond = util.find_status_condition(conditions, C.UPGRADE_IN_PROGRESS)
        if cond is None or cond.get("reason") not in (C.RAY_SERVICE_INITIALIZING,
                                                      C.RAY_SERVICE_INITIALIZING_TIMEOUT_REASON):
            set_condition(instance, C.UPGRADE_IN_PROGRESS, "Unknown", C.NO_ACTIVE_CLUSTER,
                          "No active Ray cluster exists, and the RayService is not initializing. "
                          "Please open a GitHub issue in the KubeRay repository.", now)


def is_zero_downtime_upgrade_enabled(upgrade_strategy: Mapping[str, Any] | None,
                                     env: Mapping[str, str], gates: FeatureGates = DEFAULTS
                                     ) -> bool:
    """Port of `isZeroDowntimeUpgradeEnabled` (rayservice_controller.go).

    ``upgradeStrategy.type`` wins: NewCluster (or NewClusterWithIncrementalUpgrade with its
    gate) → True, anything else → False; without a type, ``ENABLE_ZERO_DOWNTIME=false``
    (any case) → False; default True."""
    upgrade_type = (upgrade_strategy or {}).get("type")
    if upgrade_type is not None:
        allowed = [C.RAY_SERVICE_NEW_CLUSTER]
        if gates.enabled(RAY_SERVICE_INCREMENTAL_UPGRADE):
            allowed.append(C.RAY_SERVICE_NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE)
        return upgrade_type in allowed
    return env.get(ENABLE_ZERO_DOWNTIME, "").lower() != "false"


def is_cluster_spec_hash_equal(instance: Mapping[str, Any], cluster: Mapping[str, Any],
                               partial: bool) -> bool:
    """Port of `isClusterSpecHashEqual` (rayservice_controller.go).

    Compares the cluster's hash annotation with the RayService's cluster spec; ``partial``
    hashes only the first ``ray.io/num-worker-groups`` worker groups (groups appended at the
    end). An unreadable group count counts as equal (Go returns true on that error)."""
    cluster_hash = util.annotations_of(cluster).get(
        C.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY, "")
    goal = ray_cluster_spec_for_hashing(instance)
    goal_hash = ""
    if not partial:
        goal_hash = util.generate_hash_without_replicas_and_workers_to_delete(goal)
    else:
        try:
            cluster_groups = int(util.annotations_of(cluster).get(C.NUM_WORKER_GROUPS_KEY, ""))
        except ValueError:
            return True
        groups = goal.get("workerGroupSpecs") or []
        if len(groups) >= cluster_groups:
            goal["workerGroupSpecs"] = groups[:cluster_groups]
            goal_hash = util.generate_hash_without_replicas_and_workers_to_delete(goal)
    return cluster_hash == goal_hash


def modify_ray_cluster(current: Obj, goal: Obj) -> None:
    """Port of `modifyRayCluster` (rayservice_controller.go): the goal's spec (keeping the
    current ``suspend``), labels and annotations onto the current cluster."""
    cm, gm = current["metadata"], goal["metadata"]
    if cm.get("name") != gm.get("name") or cm.get("namespace") != gm.get("namespace"):
        raise RayServicePanic(
            f"currentCluster and goalCluster have different names or namespaces: "
            f"{cm.get('namespace')}/{cm.get('name')} != {gm.get('namespace')}/{gm.get('name')}")
    existing_suspend = (current.get("spec") or {}).get("suspend")
    current["spec"] = util.deep_copy(goal["spec"])
    if existing_suspend is None:
        current["spec"].pop("suspend", None)
    else:
        current["spec"]["suspend"] = existing_suspend
    cm["labels"] = dict(gm.get("labels") or {})
    cm["annotations"] = dict(gm.get("annotations") or {})


def ray_cluster_spec_for_hashing(instance: Mapping[str, Any]) -> Obj:
    """Port of `rayClusterSpecForHashing` (rayservice_controller.go): a copy of the cluster spec
    without ``suspend`` (propagated only at creation; Kueue owns it afterwards)."""
    spec: Obj = util.deep_copy(dig(instance, "spec", "rayClusterConfig") or {})
    spec.pop("suspend", None)
    return spec


def construct_ray_cluster_for_ray_service(instance: Mapping[str, Any], cluster_name: str,
                                          gates: FeatureGates = DEFAULTS) -> Obj:
    """Port of `constructRayClusterForRayService` (rayservice_controller.go).

    Labels: the RayService's plus the two origin labels; annotations: the RayService's plus the
    spec hash, the worker-group count and the KubeRay version; spec: a copy; owner: the
    RayService. A pending cluster of an incremental upgrade (an active cluster exists) starts
    with its worker groups' ``replicas`` cleared, so it grows from ``minReplicas`` with the
    autoscaler as its ``target_capacity`` rises."""
    labels = dict(util.labels_of(instance))
    labels[C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY] = instance["metadata"]["name"]
    labels[C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY] = C.RAY_SERVICE_CRD
    annotations = dict(util.annotations_of(instance))
    annotations[C.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY] = \
        util.generate_hash_without_replicas_and_workers_to_delete(
            ray_cluster_spec_for_hashing(instance))
    cluster_spec = util.deep_copy(dig(instance, "spec", "rayClusterConfig") or {})
    annotations[C.NUM_WORKER_GROUPS_KEY] = str(len(cluster_spec.get("workerGroupSpecs") or []))
    annotations[C.KUBE_RAY_VERSION] = C.KUBERAY_VERSION
    if util.is_incremental_upgrade_enabled(instance.get("spec"), gates) and \
            dig(instance, "status", "activeServiceStatus", "rayClusterName"):
        for group in cluster_spec.get("workerGroupSpecs") or []:
            group.pop("replicas", None)
    cluster: Obj = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": cluster_name, "namespace": instance["metadata"].get("namespace"),
                     "labels": labels, "annotations": annotations},
        "spec": cluster_spec,
    }
    util.set_controller_reference(instance, cluster)
    return cluster


def check_if_need_submit_serve_applications(cached: str, serve_config_v2: str,
                                            serve_applications: Mapping[str, Any] | None
                                            ) -> tuple[bool, str]:
    """Port of `checkIfNeedSubmitServeApplications` (rayservice_controller.go)."""
    if cached == "":
        return True, "Nothing has been cached for the cluster."
    if not serve_applications:
        return True, ("No Serve application found in the RayCluster. A possible reason is that "
                      "the head Pod crashed and GCS FT was not enabled.")
    if cached != serve_config_v2:
        return True, "Current V2 Serve config doesn't match cached Serve config."
    return False, "Current V2 Serve config matches cached Serve config."


async def get_and_check_serve_status(dashboard: RayDashboardClient
                                     ) -> tuple[bool, dict[str, Obj]]:
    """Port of `getAndCheckServeStatus` (rayservice_controller.go).

    The applications (an unnamed one is "default") with their deployments; ready only when the
    list is non-empty and every application is exactly RUNNING. A dashboard error raises."""
    try:
        statuses = await dashboard.get_multi_application_status()
    except Exception as err:
        raise RuntimeError(_SERVE_STATUS_HELP + str(err)) from err
    is_ready = True
    apps: dict[str, Obj] = {}
    for app_name, app in statuses.items():
        app_status: Obj = {}
        if app.get("message"):
            app_status["message"] = app["message"]
        if app.get("status"):
            app_status["status"] = app["status"]
        if app.get("status") != C.APPLICATION_STATUS_RUNNING:
            is_ready = False
        deployments: Obj = {}
        for dep_name, dep in (app.get("deployments") or {}).items():
            deployments[dep_name] = {k: dep[k] for k in ("status", "message") if dep.get(k)}
        if deployments:
            app_status["serveDeploymentStatuses"] = deployments
        apps[app_name or C.DEFAULT_SERVE_APP_NAME] = app_status
    if not apps:
        is_ready = False
    return is_ready, apps


def get_initializing_timeout(instance: Mapping[str, Any]) -> float | None:
    """Port of `getInitializingTimeout` (rayservice_controller.go): the annotation as a Go
    duration or integer seconds; None when absent (or, impossibly after validation, bad)."""
    text = util.annotations_of(instance).get(C.RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION, "")
    if not text:
        return None
    seconds = validation.parse_go_duration(text)
    if seconds is not None:
        return seconds
    try:
        return float(int(text))
    except ValueError:
        return None


def is_initializing_timeout(instance: Mapping[str, Any]) -> bool:
    """Port of `isInitializingTimeout` (rayservice_controller.go): Ready False with reason
    InitializingTimeout — terminal, whatever the generation."""
    cond = util.find_status_condition(dig(instance, "status", "conditions"), C.RAY_SERVICE_READY)
    return cond is not None and cond.get("status") == "False" and \
        cond.get("reason") == C.RAY_SERVICE_INITIALIZING_TIMEOUT_REASON


def mark_failed_on_initializing_timeout(r: RayServiceReconciler, instance: Obj) -> None:
    """Port of `markFailedOnInitializingTimeout` (rayservice_controller.go): Ready False
    Initializing for longer than the annotation's timeout → clear both cluster names, Ready
    False InitializingTimeout, Warning event."""
    timeout = get_initializing_timeout(instance)
    if timeout is None:
        return
    cond = util.find_status_condition(dig(instance, "status", "conditions"), C.RAY_SERVICE_READY)
    if cond is None or cond.get("status") != "False" or \
            cond.get("reason") != C.RAY_SERVICE_INITIALIZING:
        return
    elapsed = r._clock() - parse_time(cond.get("lastTransitionTime") or r.now())
    if elapsed < timeout:
        return
    status = instance["status"]
    status.setdefault("activeServiceStatus", {})["rayClusterName"] = ""
    status.setdefault("pendingServiceStatus", {})["rayClusterName"] = ""
    set_condition(instance, C.RAY_SERVICE_READY, "False", C.RAY_SERVICE_INITIALIZING_TIMEOUT_REASON,
                  f"RayService failed to become ready within the configured timeout of "
                  f"{go_duration(timeout)}. Time spent initializing: {go_duration(elapsed)}",
                  r.now())
    r._event(instance, "Warning", C.RAY_SERVICE_INITIALIZING_TIMEOUT, C.RECONCILE_ACTION,
             f"RayService initializing timeout exceeded after {go_duration(elapsed)} "
             f"(configured timeout: {go_duration(timeout)})")


# ---------------------------------------------------------------------------------------------
# Operator wiring (main.go: NewRayServiceReconciler(...).SetupWithManager)
# ---------------------------------------------------------------------------------------------


def setup(mgr: Any, ctx: Any) -> RayServiceReconciler:
    """The `emu.kuberay.operator` hook: ``ray.NewRayServiceReconciler(ctx, mgr,
    provider).SetupWithManager(mgr, concurrency)`` with the HTTP client of the operator's process."""
    http = mgr.get_http_client()
    proc = mgr.process
    client = mgr.get_client()
    recorder = EventRecorder(client, "rayservice-controller", spawn=proc.spawn)
    reconciler = RayServiceReconciler(
        client, dashboard_client_func=make_dashboard_client_func(http),
        http_proxy_client_func=make_proxy_health_func(http),
        options=RayServiceReconcilerOptions(env=dict(ctx.env), gates=ctx.gates),
        recorder=recorder, rng=random.Random(f"{ctx.seed}:rayservice"))
    reconciler.setup_with_manager(mgr, ctx.config.reconcile_concurrency)
    return reconciler
