"""The RayCluster controller: Pods, head Service, status, GCS fault tolerance.

Port of ``ray-operator/controllers/ray/raycluster_controller.go`` (SPEC §2). Functions keep Go's
names in snake_case and Go's order; the banners below match the Go file's sections. It is long
(about 1,400 lines) because the Go file is 2,500 lines of one reconciler whose steps share the
instance, the scale expectations and the event recorder; the builders it calls already live in
`emu.kuberay.common`.

What the reconciler reads and writes: only the API server, through the manager's client (reads from
the informer cache, writes to the API server), plus Events. Its in-memory state is exactly KubeRay's:
the scale expectations (`emu.kuberay.expectations`), lost when the process goes.

Errors follow Go's ``(ctrl.Result, error)``: the internal functions return ``(Result, error)``, and
`RayClusterReconciler.reconcile` raises the error (so the controller backs off and ignores the
Result, as controller-runtime does) or returns the Result.

Not ported (SPEC §7.3): the autoscaler Role/RoleBinding and Ingress/Route (the emulated API server
serves no RBAC or networking kinds: those steps log and do nothing), batch schedulers,
metrics, multi-host groups' per-replica naming beyond what the builders do. mTLS is ported: the
cert-manager check and `check_mtls_secrets_ready` here, the PKI in `emu.kuberay.raycluster_mtls`.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any, Protocol

import attrs

from emu.apiserver.errors import ApiError
from emu.runtime import Request, Result
from emu.runtime.predicate import (
    AnnotationChangedPredicate,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    or_,
)

from . import expectations as exp
from .common import association as assoc
from .common import gcs_ft, job, rbac, service
from .common import pod as pod_builders
from .utils import consistency, util, validation
from .utils import constant as C
from .utils.features import (
    DEFAULTS,
    RAY_CLUSTER_STATUS_CONDITIONS,
    RAY_MULTI_HOST_INDEXING,
    FeatureGates,
)
from .utils.util import Obj, dig

#: ``DefaultRequeueDuration``.
DEFAULT_REQUEUE_DURATION = 2.0
#: Requeue while the head Pod of a cluster being deleted is still there (Redis cleanup).
HEAD_POD_TERMINATION_REQUEUE = 10.0
#: The instant virtual time zero stands for: `emu.kernel.clock.EPOCH`. ``emu.kuberay`` may not
#: import the kernel, so the default clock repeats it (a test checks they agree).
VIRTUAL_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

_ContainerStatus = dict[str, Any]


class Client(Protocol):
    """What the reconciler needs of a client: the manager's `CachedClient` or a plain `Client`."""

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    async def list(self, kind: str, namespace: str | None = None, *,
                   label_selector: str | dict[str, str] | None = None) -> Any: ...

    async def create(self, obj: Obj, *, namespace: str | None = None) -> Obj: ...

    async def update(self, obj: Obj) -> Obj: ...

    async def update_status(self, obj: Obj) -> Obj: ...

    async def delete(self, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    async def delete_collection(self, kind: str, namespace: str | None = None, *,
                                label_selector: str | dict[str, str] | None = None) -> Obj: ...


def rfc3339(seconds: float) -> str:
    """``metav1.Time`` text for a virtual time (the API server's format)."""
    # The text has whole seconds: it is memoised by the whole second the microsecond-rounded
    # time falls in (strftime costs more than everything else here).
    delta = timedelta(seconds=seconds)
    whole = delta.days * 86400 + delta.seconds
    text = _RFC3339.get(whole)
    if text is None:
        if len(_RFC3339) >= 4096:
            _RFC3339.clear()
        text = _RFC3339[whole] = (VIRTUAL_EPOCH + delta).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


_RFC3339: dict[int, str] = {}


def parse_time(text: str) -> float:
    """Virtual seconds of a ``metav1.Time`` string."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (value - VIRTUAL_EPOCH).total_seconds()


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` (``5m0s``, ``1.5s``, ``1h0m0s``) for event messages."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    total = abs(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:.9f}".rstrip("0").rstrip(".")
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{sec_text}s"
    if minutes:
        return f"{sign}{int(minutes)}m{sec_text}s"
    return f"{sign}{sec_text}s"


# ---------------------------------------------------------------------------------------------
# Events (client-go's recorder, writing core/v1 Events)
# ---------------------------------------------------------------------------------------------


class EventRecorder:
    """``record.EventRecorder`` for one controller: ``eventf`` queues a core/v1 Event and a
    background task of the calling process writes it, so a slow or failing API server never blocks
    a reconcile (client-go's broadcaster drops what it cannot write, and so does this)."""

    def __init__(self, client: Client, component: str, *,
                 clock: Callable[[], float] = _loop_time,
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] | None = None
                 ) -> None:
        self.client = client
        self.component = component
        self._clock = clock
        #: Starts the writer task; by default a task of the calling process.
        self._spawn = spawn or asyncio.ensure_future
        self._queue: asyncio.Queue[Obj] | None = None
        self._task: asyncio.Task[None] | None = None
        self._seq = 0

    def eventf(self, obj: Mapping[str, Any], event_type: str, reason: str, action: str,
               message: str) -> None:
        """``Recorder.Eventf(obj, nil, type, reason, action, message)``."""
        meta = obj.get("metadata") or {}
        now = self._clock()
        self._seq += 1
        nanos = round(now * 1e9) + self._seq
        stamp = rfc3339(now)
        event: Obj = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', '')}.{nanos:x}",
                         "namespace": meta.get("namespace") or "default"},
            "involvedObject": {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                               "name": meta.get("name", ""),
                               "namespace": meta.get("namespace", ""),
                               "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": event_type, "action": action,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        if self._queue is None:
            self._queue = asyncio.Queue()
        self._queue.put_nowait(event)
        if self._task is None or self._task.done():
            self._task = self._spawn(self._sink(self._queue))

    async def _sink(self, queue: asyncio.Queue[Obj]) -> None:
        while not queue.empty():
            event = queue.get_nowait()
            try:
                await self.client.create(event)
            except (ApiError, OSError, TimeoutError):
                pass  # the broadcaster drops events it cannot write
            finally:
                queue.task_done()

    async def flush(self) -> None:
        """Wait until every queued Event has been written (or dropped)."""
        if self._queue is not None:
            await self._queue.join()


# ---------------------------------------------------------------------------------------------
# Reconciler
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class RayClusterReconcilerOptions:
    """Port of ``RayClusterReconcilerOptions`` plus what Go reads from the process: its environment
    (``os.Getenv``) and its feature gates."""

    head_sidecar_containers: tuple[Obj, ...] = ()
    worker_sidecar_containers: tuple[Obj, ...] = ()
    default_container_envs: tuple[Obj, ...] = ()
    default_pod_annotations: Mapping[str, str] = attrs.field(factory=dict)
    default_pod_labels: Mapping[str, str] = attrs.field(factory=dict)
    cert_manager_available: bool = False
    #: The operator's environment variables (``ENABLE_GCS_FT_REDIS_CLEANUP``, ...).
    env: Mapping[str, str] = attrs.field(factory=dict)
    gates: FeatureGates = DEFAULTS

    def pod_build_options(self) -> pod_builders.PodBuildOptions:
        return pod_builders.PodBuildOptions(
            env=self.env, gates=self.gates, default_container_envs=self.default_container_envs,
            head_sidecar_containers=self.head_sidecar_containers,
            worker_sidecar_containers=self.worker_sidecar_containers,
            default_pod_annotations=self.default_pod_annotations,
            default_pod_labels=self.default_pod_labels)


ReconcileFunc = Callable[[Obj], Awaitable[None]]


class RayClusterReconciler:
    """Port of ``RayClusterReconciler``."""

    def __init__(self, client: Client, options: RayClusterReconcilerOptions | None = None, *,
                 recorder: EventRecorder | None = None,
                 clock: Callable[[], float] = _loop_time,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self.options = options or RayClusterReconcilerOptions()
        self.recorder = recorder or EventRecorder(client, "raycluster-controller", clock=clock)
        self.ray_cluster_scale_expectation = exp.RayClusterScaleExpectation(client, clock=clock)
        self._clock = clock
        self._rng = rng or random.Random(0)
        self._pod_options = self.options.pod_build_options()

    @property
    def env(self) -> Mapping[str, str]:
        return self.options.env

    def now(self) -> str:
        return rfc3339(self._clock())

    def _gate(self, name: str) -> bool:
        return self.options.gates.enabled(name)

    def _event(self, obj: Mapping[str, Any], event_type: str, reason: str, action: str,
               message: str) -> None:
        self.recorder.eventf(obj, event_type, reason, action, message)

    async def reconcile(self, request: Request) -> Result:
        """Port of `RayClusterReconciler.Reconcile` (raycluster_controller.go)."""
        try:
            instance = await self.client.get("RayCluster", request.name, request.namespace)
        except ApiError as err:
            if err.code == 404:
                self.ray_cluster_scale_expectation.delete(request.name, request.namespace)
                return Result()
            raise
        # The cached client hands out copies, so the instance is ours to change.
        result, failure = await self.ray_cluster_reconcile(instance)
        if failure is not None:
            raise failure
        return result

    async def delete_all_pods(self, filters: assoc.Association) -> tuple[list[Obj], None]:
        """Port of `RayClusterReconciler.deleteAllPods` (raycluster_controller.go).

        Lists the Pods; if any is not already terminating, ``DeleteAllOf`` by the same labels.
        Errors propagate (callers wrap them)."""
        pods = list(await self.client.list("Pod", filters.namespace,
                                           label_selector=dict(filters.labels)))
        active = sum(1 for p in pods if not dig(p, "metadata", "deletionTimestamp"))
        if active > 0:
            await self.client.delete_collection("Pod", filters.namespace,
                                                label_selector=dict(filters.labels))
        return pods, None

    async def ray_cluster_reconcile(self, instance: Obj) -> tuple[Result, Exception | None]:
        """Port of `RayClusterReconciler.rayClusterReconcile` (raycluster_controller.go).

        SPEC §2.2: managedBy skip; defaults; validation (event, no status); the GCS FT finalizer
        block; the deletion short-cut; `reconcile_funcs` in order, stopping at the first error;
        `calculate_status`; `update_ray_cluster_status`; 2 s requeue on error or status change,
        else ``RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV`` (300 s).
        """
        name = dig(instance, "metadata", "name") or ""
        namespace = dig(instance, "metadata", "namespace") or ""
        spec = instance.setdefault("spec", {})
        annotations = util.annotations_of(instance)
        if util.managed_by_external_controller(spec.get("managedBy")) is not None:
            return Result(), None

        set_defaults(instance)

        for check, reason, text in (
                (lambda: validation.validate_ray_cluster_metadata(instance.get("metadata") or {}),
                 C.INVALID_RAY_CLUSTER_METADATA, "The RayCluster metadata is invalid"),
                (lambda: validation.validate_ray_cluster_spec(spec, annotations, self.options.gates),
                 C.INVALID_RAY_CLUSTER_SPEC, "The RayCluster spec is invalid")):
            try:
                check()
            except ValueError as err:
                self._event(instance, "Warning", reason, C.VALIDATE_ACTION,
                            f"{text} {namespace}/{name}: {err}")
                return Result(), None

        if util.is_autoscaling_enabled(spec) and util.is_autoscaling_v1_enabled(spec):
            groups = [g.get("groupName", "") for g in spec.get("workerGroupSpecs") or []
                      if dig(g, "template", "spec", "restartPolicy") not in (None, "", "Never")]
            if groups:
                msg = (f"restartPolicy for worker groups [{', '.join(groups)}] should be Never or "
                       f"unset when using autoscaler V1")
                self._event(instance, "Warning", C.INVALID_RAY_CLUSTER_SPEC, C.VALIDATE_ACTION,
                            f"RayCluster spec warning {namespace}/{name}: {msg}")

        if util.is_tls_enabled(spec, self.options.gates) and \
                not self.options.cert_manager_available:
            self._event(instance, "Warning", C.INVALID_RAY_CLUSTER_SPEC, C.VALIDATE_ACTION,
                        f"The RayCluster spec is invalid {namespace}/{name}: tlsOptions requires "
                        f"cert-manager, but cert-manager is not installed")
            return Result(), None

        try:
            validation.validate_ray_cluster_upgrade_options(instance)
        except ValueError as err:
            self._event(instance, "Warning", C.INVALID_RAY_CLUSTER_SPEC, C.VALIDATE_ACTION,
                        f"The RayCluster UpgradeStrategy is invalid {namespace}/{name}: {err}")
            return Result(), None

        try:
            validation.validate_ray_cluster_status(instance)
        except ValueError as err:
            self._event(instance, "Warning", C.INVALID_RAY_CLUSTER_STATUS, C.VALIDATE_ACTION,
                        f"The RayCluster status is invalid {namespace}/{name}, {err}")
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err

        original = util.deep_copy(instance)

        ft_result = await self._reconcile_gcs_ft_finalizer(instance)
        if ft_result is not None:
            return ft_result

        if dig(instance, "metadata", "deletionTimestamp"):
            return Result(), None

        reconcile_err: Exception | None = None
        for fn in self.reconcile_funcs():
            try:
                await fn(instance)
            except Exception as err:  # Go: if reconcileErr = fn(ctx, instance); reconcileErr != nil
                reconcile_err = err
                break

        calculate_err: Exception | None = None
        update_err: Exception | None = None
        inconsistent = False
        try:
            new_instance = await self.calculate_status(instance, reconcile_err)
        except Exception as err:
            calculate_err = err
        else:
            inconsistent, update_err = await self.update_ray_cluster_status(original, new_instance)

        err_out = reconcile_err or calculate_err or update_err
        if err_out is not None or inconsistent:
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err_out
        requeue = C.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS
        requeue_text = self.env.get(C.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV, "")
        if requeue_text:  # unset is the common case: no ValueError raised and caught each time
            try:
                requeue = int(requeue_text)
            except ValueError:
                pass
        return Result(requeue_after=float(requeue)), None

    def reconcile_funcs(self) -> list[ReconcileFunc]:
        """``reconcileFuncs``, in Go's order."""
        return [
            self.reconcile_autoscaler_service_account,
            self.reconcile_autoscaler_role,
            self.reconcile_autoscaler_role_binding,
            self.reconcile_ingress,
            self.reconcile_auth_secret,
            self.reconcile_head_service,
            self.reconcile_headless_service,
            self.reconcile_serve_service,
            self.reconcile_gcs_storage_pvc,
            self.reconcile_pods,
        ]

    # -- GCS fault tolerance: the Redis cleanup finalizer (inside rayClusterReconcile) ---------

    async def _reconcile_gcs_ft_finalizer(self, instance: Obj
                                          ) -> tuple[Result, Exception | None] | None:
        """The finalizer block of `rayClusterReconcile` (SPEC §2.11); None lets the reconcile go
        on."""
        spec = instance.get("spec") or {}
        options = spec.get("gcsFaultToleranceOptions")
        meta = instance["metadata"]
        finalizer = C.GCS_FAULT_TOLERANCE_REDIS_CLEANUP_FINALIZER
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and util.is_gcs_fault_tolerance_embedded(options) and \
                gcs_ft.has_gcs_ft_finalizer(instance):
            meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != finalizer]
            try:
                await self.client.update(instance)
            except Exception as err:
                return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err
            return Result(), None

        if not gcs_ft.is_gcs_ft_redis_cleanup_enabled(instance, self.env):
            return None
        if not deleting:
            if gcs_ft.has_gcs_ft_finalizer(instance):
                return None
            meta.setdefault("finalizers", []).append(finalizer)
            try:
                updated = await self.client.update(instance)
            except Exception as err:
                wrapped = RuntimeError(f"failed to add the finalizer {finalizer} to the "
                                       f"RayCluster: {err}")
                wrapped.__cause__ = err
                return Result(requeue_after=DEFAULT_REQUEUE_DURATION), wrapped
            meta["resourceVersion"] = dig(updated, "metadata", "resourceVersion")
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), None
        return await self._redis_cleanup(instance)

    async def _redis_cleanup(self, instance: Obj) -> tuple[Result, Exception | None]:
        """The deletion half of the finalizer block: head gone first, then the cleanup Job."""
        try:
            head_pods, _ = await self.delete_all_pods(
                assoc.ray_cluster_head_pods_association_options(instance))
            await self.delete_all_pods(assoc.ray_cluster_worker_pods_association_options(instance))
        except Exception as err:
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err
        if head_pods:
            return Result(requeue_after=HEAD_POD_TERMINATION_REQUEUE), None

        jobs_filter = assoc.ray_cluster_redis_cleanup_job_association_options(instance)
        try:
            jobs = list(await self.client.list("Job", jobs_filter.namespace,
                                               label_selector=dict(jobs_filter.labels)))
        except Exception as err:
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err

        if gcs_ft.has_gcs_ft_finalizer(instance):
            age = self._clock() - parse_time(instance["metadata"]["deletionTimestamp"])
            if age >= gcs_ft.get_gcs_ft_deletion_timeout(instance):
                return await self.force_remove_gcs_ft_finalizer(instance)

        if jobs:
            _condition, finished = util.is_job_finished(jobs[0])
            if finished:
                self._remove_finalizer(instance)
                try:
                    await self.client.update(instance)
                except Exception as err:
                    return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err
                return Result(), None
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), None

        cleanup_job = self.build_redis_cleanup_job(instance)
        job_ns, job_name = cleanup_job["metadata"]["namespace"], cleanup_job["metadata"]["name"]
        try:
            await self.client.create(cleanup_job)
        except ApiError as err:
            if err.code == 409 and err.reason == "AlreadyExists":
                return Result(requeue_after=DEFAULT_REQUEUE_DURATION), None
            self._event(instance, "Warning", C.FAILED_TO_CREATE_REDIS_CLEANUP_JOB,
                        C.CREATE_ACTION,
                        f"Failed to create Redis cleanup Job {job_ns}/{job_name}, {err}")
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_CREATE_REDIS_CLEANUP_JOB,
                        C.CREATE_ACTION,
                        f"Failed to create Redis cleanup Job {job_ns}/{job_name}, {err}")
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err
        self._event(instance, "Normal", C.CREATED_REDIS_CLEANUP_JOB, C.CREATE_ACTION,
                    f"Created Redis cleanup Job {job_ns}/{job_name}")
        return Result(requeue_after=DEFAULT_REQUEUE_DURATION), None

    @staticmethod
    def _remove_finalizer(instance: Obj) -> None:
        meta = instance["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or []
                              if f != C.GCS_FAULT_TOLERANCE_REDIS_CLEANUP_FINALIZER]

    # -- reconcileAuthSecret / Ingress ---------------------------------------------------------

    async def reconcile_auth_secret(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileAuthSecret` (raycluster_controller.go).

        Token auth without a user Secret or K8s auth: create ``<cluster>`` Secret with a random
        ``auth_token`` (from the seeded stream) unless it exists."""
        auth = dig(instance, "spec", "authOptions")
        # Go returns early only for no authOptions (a nil pointer) or mode Disabled: authOptions
        # without a mode, even empty, still gets its Secret.
        if auth is None or auth.get("mode") == C.AUTH_MODE_DISABLED:
            return
        if util.is_k8s_auth_enabled(auth) or auth.get("secretName"):
            return
        name = util.check_name(instance["metadata"]["name"])
        namespace = instance["metadata"].get("namespace")
        try:
            await self.client.get("Secret", name, namespace)
            return
        except ApiError as err:
            if err.code != 404:
                raise
        await self.create_auth_secret(instance, name)

    async def create_auth_secret(self, instance: Obj, secret_name: str) -> None:
        """Port of `RayClusterReconciler.createAuthSecret` (raycluster_controller.go)."""
        token = base64.b64encode(bytes(self._rng.getrandbits(8) for _ in range(32))).decode()
        secret: Obj = {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": instance["metadata"].get("namespace"),
                         "labels": {C.RAY_CLUSTER_LABEL_KEY: instance["metadata"]["name"]}},
            "stringData": {C.RAY_AUTH_TOKEN_SECRET_KEY: token},
        }
        util.set_controller_reference(instance, secret)
        await self.client.create(secret)

    async def reconcile_ingress(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileIngress` (raycluster_controller.go): not
        emulated (no networking.k8s.io kinds); ``enableIngress`` is accepted and ignored."""
        return None

    # -- reconcileHeadService ------------------------------------------------------------------

    async def reconcile_head_service(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileHeadService` (raycluster_controller.go).

        One head Service by labels → done; several → error; none → build and create (errors,
        AlreadyExists from a stale cache included, are returned)."""
        opts = assoc.ray_cluster_head_service_list_options(instance)
        services = list(await self.client.list("Service", opts.namespace,
                                               label_selector=dict(opts.labels)))
        if len(services) == 1:
            return
        if len(services) > 1:
            names = [s["metadata"]["name"] for s in services]
            raise RuntimeError(f"{len(services)} head service found {names}")
        labels: dict[str, str] = {}
        template_labels = dig(instance, "spec", "headGroupSpec", "template", "metadata",
                              "labels") or {}
        if C.KUBERNETES_APPLICATION_NAME_LABEL_KEY in template_labels:
            labels[C.KUBERNETES_APPLICATION_NAME_LABEL_KEY] = \
                template_labels[C.KUBERNETES_APPLICATION_NAME_LABEL_KEY]
        annotations = dict(dig(instance, "spec", "headServiceAnnotations") or {})
        head_svc = service.build_service_for_head_pod(instance, labels, annotations, self.env)
        if not dig(head_svc, "spec", "ports"):
            raise RuntimeError("ray head service does not have any ports set up. Service "
                               f"specification: {head_svc.get('spec')}")
        await self.create_service(head_svc, instance)

    # -- reconcileGCSStoragePVC (RocksDB) ------------------------------------------------------

    async def reconcile_gcs_storage_pvc(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileGCSStoragePVC` (raycluster_controller.go).

        Only for the embedded (RocksDB) backend. A user claim is only checked (Warning event when
        missing). The operator's ``<cluster>-gcs-pvc`` is adopted when it exists (drift reported,
        owner reference aligned with the deletion policy) or created (owned unless Retain)."""
        spec = instance.get("spec") or {}
        options = spec.get("gcsFaultToleranceOptions")
        if not util.is_gcs_fault_tolerance_enabled(spec, util.annotations_of(instance)) or \
                not util.is_gcs_fault_tolerance_embedded(options):
            return
        pvc_name = util.get_gcs_storage_pvc_name(instance)
        namespace = instance["metadata"].get("namespace")
        storage = (options or {}).get("storage") or {}
        if storage.get("claimName"):
            try:
                await self.client.get("PersistentVolumeClaim", pvc_name, namespace)
            except ApiError as err:
                if err.code == 404:
                    self._event(instance, "Warning", C.FAILED_TO_CREATE_PVC, C.VALIDATE_ACTION,
                                f'GcsFaultToleranceOptions.Storage.ClaimName "{pvc_name}" not '
                                f"found in namespace {namespace}; the head Pod will not start "
                                f"until it exists")
                    return
                raise
            return
        try:
            existing = await self.client.get("PersistentVolumeClaim", pvc_name, namespace)
        except ApiError as err:
            if err.code != 404:
                raise
        else:
            drift = gcs_storage_pvc_drift(gcs_ft.build_gcs_storage_pvc(instance), existing)
            if drift:
                self._event(instance, "Warning", C.FAILED_TO_CREATE_PVC, C.UPDATE_ACTION,
                            f"GCS storage PVC {namespace}/{pvc_name} already exists and cannot be "
                            f"reconfigured in place ({drift}); delete the PVC to recreate it with "
                            f"the new settings")
            await self.reconcile_gcs_storage_pvc_owner_ref(instance, existing)
            return
        pvc = gcs_ft.build_gcs_storage_pvc(instance)
        if not gcs_storage_retain_on_deletion(instance):
            util.set_controller_reference(instance, pvc)
        try:
            await self.client.create(pvc)
        except ApiError as err:
            if err.code == 409 and err.reason == "AlreadyExists":
                live = await self.client.get("PersistentVolumeClaim", pvc_name, namespace)
                await self.reconcile_gcs_storage_pvc_owner_ref(instance, live)
                return
            self._event(instance, "Warning", C.FAILED_TO_CREATE_PVC, C.CREATE_ACTION,
                        f"Failed to create GCS storage PVC {namespace}/{pvc_name}, {err}")
            raise
        self._event(instance, "Normal", C.CREATED_PVC, C.CREATE_ACTION,
                    f"Created GCS storage PVC {namespace}/{pvc_name}")

    async def reconcile_gcs_storage_pvc_owner_ref(self, instance: Obj, pvc: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileGCSStoragePVCOwnerRef` (raycluster_controller.go):
        Retain → drop our controller reference; otherwise → add it."""
        retain = gcs_storage_retain_on_deletion(instance)
        uid = instance["metadata"].get("uid")
        refs = dig(pvc, "metadata", "ownerReferences") or []
        owned = any(r.get("controller") and r.get("uid") == uid for r in refs)
        if retain and owned:
            pvc["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
            await self.client.update(pvc)
        elif not retain and not owned:
            util.set_controller_reference(instance, pvc)
            await self.client.update(pvc)

    # -- reconcileServeService / reconcileHeadlessService --------------------------------------

    async def reconcile_serve_service(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileServeService` (raycluster_controller.go): only
        with annotation ``ray.io/enable-serve-service: "true"``; create ``<cluster>-serve-svc`` if
        absent."""
        if util.annotations_of(instance).get(C.ENABLE_SERVE_SERVICE_KEY) != \
                C.ENABLE_SERVE_SERVICE_TRUE:
            return
        nn = assoc.ray_cluster_serve_service_namespaced_name(instance)
        try:
            await self.client.get("Service", nn.name, nn.namespace)
            return
        except ApiError as err:
            if err.code != 404:
                raise
        svc = service.build_serve_service_for_ray_cluster(instance, self.options.gates)
        util.set_controller_reference(instance, svc)
        await self.client.create(svc)

    async def reconcile_headless_service(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileHeadlessService` (raycluster_controller.go):
        only when some group has ``numOfHosts > 1``."""
        groups = dig(instance, "spec", "workerGroupSpecs") or []
        if not any(int(g.get("numOfHosts") or 1) > 1 for g in groups):
            return
        opts = assoc.ray_cluster_headless_service_list_options(instance)
        if list(await self.client.list("Service", opts.namespace,
                                       label_selector=dict(opts.labels))):
            return
        await self.create_service(service.build_headless_service_for_ray_cluster(instance),
                                  instance)

    # -- reconcilePods -------------------------------------------------------------------------

    async def reconcile_pods(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcilePods` (raycluster_controller.go).

        SPEC §2.5: suspend (two-phase with the conditions gate), Recreate upgrades, the head
        (expectations, `should_delete_pod`, the disable-provisioned-head-restart rule, creation),
        then each worker group (expectations, unhealthy Pods, ``workersToDelete``, scale up/down).
        """
        spec = instance["spec"]
        name = instance["metadata"]["name"]
        namespace = instance["metadata"].get("namespace") or ""
        cluster_hash = util.generate_hash_without_replicas_and_workers_to_delete(spec)

        suspend_status = util.find_ray_cluster_suspend_status(instance)
        gate_on = self._gate(RAY_CLUSTER_STATUS_CONDITIONS)
        suspend = bool(spec.get("suspend"))
        if suspend_status == C.RAY_CLUSTER_SUSPENDING or (not gate_on and suspend):
            try:
                await self.delete_all_pods(assoc.ray_cluster_all_pods_association_options(instance))
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_DELETE_POD_COLLECTION,
                            C.DELETE_ACTION, f"Failed deleting Pods due to suspension for "
                            f"RayCluster {namespace}/{name}, {err}")
                raise _join(C.ERR_FAILED_DELETE_ALL_PODS, err) from C.ERR_FAILED_DELETE_ALL_PODS
            self._event(instance, "Normal", C.DELETED_POD, C.DELETE_ACTION,
                        f"Deleted Pods for RayCluster {namespace}/{name} due to suspension")
            return
        if gate_on and (suspend_status == C.RAY_CLUSTER_SUSPENDED or suspend):
            return

        if await self.should_recreate_pods_for_upgrade(instance):
            try:
                await self.delete_all_pods(assoc.ray_cluster_all_pods_association_options(instance))
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_DELETE_POD_COLLECTION,
                            C.DELETE_ACTION, f"Failed deleting Pods due to spec change with "
                            f"Recreate upgradeStrategy for RayCluster {namespace}/{name}, {err}")
                raise _join(C.ERR_FAILED_DELETE_ALL_PODS, err) from C.ERR_FAILED_DELETE_ALL_PODS
            self.ray_cluster_scale_expectation.delete(name, namespace)
            self._event(instance, "Normal", C.DELETED_POD, C.DELETE_ACTION,
                        f"Deleted all Pods for RayCluster {namespace}/{name} due to spec change "
                        f"with Recreate upgradeStrategy")
            return

        head_opts = assoc.ray_cluster_head_pods_association_options(instance)
        head_pods = list(await self.client.list("Pod", head_opts.namespace,
                                                label_selector=dict(head_opts.labels)))
        if not await self.ray_cluster_scale_expectation.is_satisfied(namespace, name,
                                                                     exp.HEAD_GROUP):
            pass  # reconcile the head later
        elif len(head_pods) == 1:
            head_pod = head_pods[0]
            should_delete, reason = should_delete_pod(head_pod, C.HEAD_NODE)
            if should_delete:
                pod_ns, pod_name = head_pod["metadata"]["namespace"], head_pod["metadata"]["name"]
                facts = _pod_facts(head_pod)
                try:
                    await self.client.delete("Pod", pod_name, pod_ns)
                except Exception as err:
                    self._event(instance, "Warning", C.FAILED_TO_DELETE_HEAD_POD, C.DELETE_ACTION,
                                f"Failed deleting head Pod {pod_ns}/{pod_name}; {facts}, {err}")
                    raise _join(C.ERR_FAILED_DELETE_HEAD_POD, err) from C.ERR_FAILED_DELETE_HEAD_POD
                self.ray_cluster_scale_expectation.expect_scale_pod(
                    pod_ns, name, exp.HEAD_GROUP, pod_name, exp.DELETE)
                self._event(instance, "Normal", C.DELETED_HEAD_POD, C.DELETE_ACTION,
                            f"Deleted head Pod {pod_ns}/{pod_name}; {facts}")
                raise RuntimeError(reason)
        elif not head_pods:
            provisioned = util.is_status_condition_true(dig(instance, "status", "conditions"),
                                                        C.RAY_CLUSTER_PROVISIONED)
            if provisioned and should_skip_head_pod_restart(instance):
                return
            if util.is_tls_enabled(spec, self.options.gates):
                await self.check_mtls_secrets_ready(instance)
            try:
                await self.create_head_pod(instance, cluster_hash)
            except Exception as err:
                raise _join(C.ERR_FAILED_CREATE_HEAD_POD, err) from C.ERR_FAILED_CREATE_HEAD_POD
        else:
            names = [p["metadata"]["name"] for p in head_pods]
            raise RuntimeError(f"{len(head_pods)} head pods found {_go_list(names)}. "
                               f"Please delete extra head pods")

        for worker in spec.get("workerGroupSpecs") or []:
            await self._reconcile_worker_group(instance, worker)

    async def _reconcile_worker_group(self, instance: Obj, worker: Obj) -> None:
        """The body of `reconcilePods`' worker loop for one group."""
        name = instance["metadata"]["name"]
        namespace = instance["metadata"].get("namespace") or ""
        group = worker.get("groupName", "")
        if not await self.ray_cluster_scale_expectation.is_satisfied(namespace, name, group):
            return
        num_expected = util.get_worker_group_desired_replicas(worker)
        group_opts = assoc.ray_cluster_group_pods_association_options(instance, group)
        worker_pods = list(await self.client.list("Pod", group_opts.namespace,
                                                  label_selector=dict(group_opts.labels)))
        if worker.get("suspend"):
            try:
                await self.delete_all_pods(group_opts)
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_DELETE_WORKER_POD_COLLECTION,
                            C.DELETE_ACTION, f"Failed deleting worker Pods for suspended group "
                            f"{group} in RayCluster {namespace}/{name}, {err}")
                raise _join(C.ERR_FAILED_DELETE_WORKER_POD, err) from C.ERR_FAILED_DELETE_WORKER_POD
            self._event(instance, "Normal", C.DELETED_WORKER_POD, C.DELETE_ACTION,
                        f"Deleted all pods for suspended worker group {group} in RayCluster "
                        f"{namespace}/{name}")
            return

        # Multi-host groups take the single-host path here: per-replica atomic deletion
        # (reconcileMultiHostWorkerGroup) is not ported (SPEC §7.3).
        deleted: dict[str, None] = {}
        num_unhealthy = 0
        for pod in worker_pods:
            should_delete, _reason = should_delete_pod(pod, C.WORKER_NODE)
            if not should_delete:
                continue
            num_unhealthy += 1
            pod_ns, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            deleted[pod_name] = None
            facts = _pod_facts(pod)
            try:
                await self.client.delete("Pod", pod_name, pod_ns)
            except Exception as err:
                self._event(instance, "Warning", C.FAILED_TO_DELETE_WORKER_POD, C.DELETE_ACTION,
                            f"Failed deleting worker Pod {pod_ns}/{pod_name}; {facts}, {err}")
                raise _join(C.ERR_FAILED_DELETE_WORKER_POD, err) from C.ERR_FAILED_DELETE_WORKER_POD
            self.ray_cluster_scale_expectation.expect_scale_pod(pod_ns, name, group, pod_name,
                                                                exp.DELETE)
            self._event(instance, "Normal", C.DELETED_WORKER_POD, C.DELETE_ACTION,
                        f"Deleted worker Pod {pod_ns}/{pod_name}; {facts}")
        if num_unhealthy > 0:
            raise RuntimeError(f"delete {num_unhealthy} unhealthy worker Pods")

        strategy = worker.get("scaleStrategy") or {}
        for pod_name in strategy.get("workersToDelete") or []:
            try:
                await self.client.delete("Pod", pod_name, namespace)
            except ApiError as err:
                if err.code != 404:
                    self._event(instance, "Warning", C.FAILED_TO_DELETE_WORKER_POD,
                                C.DELETE_ACTION,
                                f"Failed deleting pod {namespace}/{pod_name}, {err}")
                    raise _join(C.ERR_FAILED_DELETE_WORKER_POD, err) from C.ERR_FAILED_DELETE_WORKER_POD
            else:
                self.ray_cluster_scale_expectation.expect_scale_pod(namespace, name, group,
                                                                    pod_name, exp.DELETE)
                deleted[pod_name] = None
                self._event(instance, "Normal", C.DELETED_WORKER_POD, C.DELETE_ACTION,
                            f"Deleted pod {namespace}/{pod_name}")
        worker.setdefault("scaleStrategy", {})["workersToDelete"] = []

        running = [p for p in worker_pods if p["metadata"]["name"] not in deleted]
        diff = num_expected - len(running)
        multi_host_indexing = self._gate(RAY_MULTI_HOST_INDEXING)
        used_indices: dict[int, None] = {}
        if multi_host_indexing:
            for pod in running:
                text = util.labels_of(pod).get(C.RAY_WORKER_REPLICA_INDEX_KEY)
                if text is not None and text.lstrip("-").isdigit():
                    used_indices[int(text)] = None
        if diff > 0:
            if util.is_tls_enabled(instance.get("spec"), self.options.gates):
                await self.check_mtls_secrets_ready(instance)
            if multi_host_indexing:
                index = 0
                for _ in range(diff):
                    while index in used_indices:
                        index += 1
                    used_indices[index] = None
                    try:
                        await self.create_worker_pod_with_index(instance, worker, "", index, 0)
                    except Exception as err:
                        raise _join(C.ERR_FAILED_CREATE_WORKER_POD, err) from C.ERR_FAILED_CREATE_WORKER_POD
            else:
                for _ in range(diff):
                    try:
                        await self.create_worker_pod(instance, worker)
                    except Exception as err:
                        raise _join(C.ERR_FAILED_CREATE_WORKER_POD, err) from C.ERR_FAILED_CREATE_WORKER_POD
        elif diff < 0:
            autoscaling = util.is_autoscaling_enabled(instance["spec"])
            random_delete = autoscaling and \
                self.env.get(C.ENABLE_RANDOM_POD_DELETE, "").lower() == "true"
            if autoscaling and not random_delete:
                return
            for pod in running[:-diff]:
                pod_ns, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                try:
                    await self.client.delete("Pod", pod_name, pod_ns)
                except ApiError as err:
                    if err.code != 404:
                        self._event(instance, "Warning", C.FAILED_TO_DELETE_WORKER_POD,
                                    C.DELETE_ACTION,
                                    f"Failed deleting Pod {pod_ns}/{pod_name}, {err}")
                        raise _join(C.ERR_FAILED_DELETE_WORKER_POD, err) from C.ERR_FAILED_DELETE_WORKER_POD
                self.ray_cluster_scale_expectation.expect_scale_pod(pod_ns, name, group,
                                                                    pod_name, exp.DELETE)
                self._event(instance, "Normal", C.DELETED_WORKER_POD, C.DELETE_ACTION,
                            f"Deleted Pod {pod_ns}/{pod_name}")

    async def should_recreate_pods_for_upgrade(self, instance: Obj) -> bool:
        """Port of `RayClusterReconciler.shouldRecreatePodsForUpgrade` (raycluster_controller.go).

        Upgrade strategy Recreate only: a head from another KubeRay version gets its annotations
        refreshed (no recreation); a head whose recreate-hash differs from the spec's → True."""
        if dig(instance, "spec", "upgradeStrategy", "type") != C.RAY_CLUSTER_RECREATE:
            return False
        expected = util.generate_hash_without_replicas_and_workers_to_delete(instance["spec"])
        opts = assoc.ray_cluster_head_pods_association_options(instance)
        try:
            head_pods = list(await self.client.list("Pod", opts.namespace,
                                                    label_selector=dict(opts.labels)))
        except Exception:
            return False
        if not head_pods:
            return False
        head = head_pods[0]
        annotations = head["metadata"].setdefault("annotations", {})
        version = annotations.get(C.KUBE_RAY_VERSION, "")
        if version and version != C.KUBERAY_VERSION:
            annotations[C.UPGRADE_STRATEGY_RECREATE_HASH_KEY] = expected
            annotations[C.KUBE_RAY_VERSION] = C.KUBERAY_VERSION
            try:
                await self.client.update(head)
            except Exception:
                pass  # Go logs the error and goes on
            return False
        actual = annotations.get(C.UPGRADE_STRATEGY_RECREATE_HASH_KEY, "")
        return bool(actual) and actual != expected

    # -- creating children ---------------------------------------------------------------------

    async def create_service(self, svc: Obj, instance: Obj) -> None:
        """Port of `RayClusterReconciler.createService` (raycluster_controller.go)."""
        util.set_controller_reference(instance, svc)
        ns, svc_name = svc["metadata"].get("namespace"), svc["metadata"]["name"]
        try:
            await self.client.create(svc)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_CREATE_SERVICE, C.CREATE_ACTION,
                        f"Failed creating service {ns}/{svc_name}, {err}")
            raise
        self._event(instance, "Normal", C.CREATED_SERVICE, C.CREATE_ACTION,
                    f"Created service {ns}/{svc_name}")

    async def create_head_pod(self, instance: Obj, cluster_hash: str) -> None:
        """Port of `RayClusterReconciler.createHeadPod` (raycluster_controller.go)."""
        pod = self.build_head_pod(instance)
        if cluster_hash:
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations[C.UPGRADE_STRATEGY_RECREATE_HASH_KEY] = cluster_hash
            annotations[C.KUBE_RAY_VERSION] = C.KUBERAY_VERSION
        ns = pod["metadata"].get("namespace")
        try:
            created = await self.client.create(pod)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_CREATE_HEAD_POD, C.CREATE_ACTION,
                        f"Failed to create head Pod {ns}/{_pod_name_of(pod)}, {err}")
            raise
        pod_name = created["metadata"]["name"]
        self.ray_cluster_scale_expectation.expect_scale_pod(
            created["metadata"]["namespace"], instance["metadata"]["name"], exp.HEAD_GROUP,
            pod_name, exp.CREATE)
        self._event(instance, "Normal", C.CREATED_HEAD_POD, C.CREATE_ACTION,
                    f"Created head Pod {created['metadata']['namespace']}/{pod_name}")

    async def create_worker_pod(self, instance: Obj, worker: Obj) -> None:
        """Port of `RayClusterReconciler.createWorkerPod` (raycluster_controller.go)."""
        await self._create_worker(instance, self.build_worker_pod(instance, worker, "", 0, 0),
                                  worker)

    async def create_worker_pod_with_index(self, instance: Obj, worker: Obj,
                                           replica_grp_name: str, replica_index: int,
                                           host_index: int) -> None:
        """Port of `RayClusterReconciler.createWorkerPodWithIndex` (raycluster_controller.go)."""
        pod = self.build_worker_pod(instance, worker, replica_grp_name, replica_index, host_index)
        await self._create_worker(instance, pod, worker)

    async def _create_worker(self, instance: Obj, pod: Obj, worker: Obj) -> None:
        namespace = instance["metadata"].get("namespace")
        name = instance["metadata"]["name"]
        try:
            created = await self.client.create(pod)
        except Exception as err:
            self._event(instance, "Warning", C.FAILED_TO_CREATE_WORKER_POD, C.CREATE_ACTION,
                        f"Failed to create worker Pod for the cluster {namespace}/{name}, {err}")
            raise
        meta = created["metadata"]
        self.ray_cluster_scale_expectation.expect_scale_pod(
            meta["namespace"], name, worker.get("groupName", ""), meta["name"], exp.CREATE)
        self._event(instance, "Normal", C.CREATED_WORKER_POD, C.CREATE_ACTION,
                    f"Created worker Pod {meta['namespace']}/{meta['name']}")

    def build_head_pod(self, instance: Obj) -> Obj:
        """Port of `RayClusterReconciler.buildHeadPod` (raycluster_controller.go), via the
        builders of `emu.kuberay.common.pod`."""
        return pod_builders.build_head_pod(instance, self._pod_options)

    def build_worker_pod(self, instance: Obj, worker: Obj, replica_grp_name: str,
                         replica_index: int, host_index: int) -> Obj:
        """Port of `RayClusterReconciler.buildWorkerPod` (raycluster_controller.go)."""
        return pod_builders.build_worker_pod(instance, worker, replica_grp_name, replica_index,
                                             host_index, self._pod_options)

    def build_redis_cleanup_job(self, instance: Obj) -> Obj:
        """Port of `RayClusterReconciler.buildRedisCleanupJob` (raycluster_controller.go)."""
        return job.build_redis_cleanup_job(instance, self._pod_options)

    # -- SetupWithManager ----------------------------------------------------------------------

    async def check_mtls_secrets_ready(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.checkMTLSSecretsReady` (raycluster_controller.go).

        Before creating Pods with TLS on: the head and worker Certificates are Ready at their
        current generation, and their Secrets hold ``tls.crt``, ``tls.key`` and ``ca.crt``;
        otherwise an error ``mTLS secrets not ready: …`` (the work queue's backoff retries)."""
        from .raycluster_mtls import is_certificate_ready

        name = dig(instance, "metadata", "name") or ""
        namespace = dig(instance, "metadata", "namespace") or ""
        try:
            for cert_name in (util.get_tls_cert_name(name, C.HEAD_NODE),
                              util.get_tls_cert_name(name, C.WORKER_NODE)):
                try:
                    cert = await self.client.get("Certificate", cert_name, namespace)
                except ApiError as err:
                    raise RuntimeError(f"certificate {cert_name} not found: {err}") from err
                if not is_certificate_ready(cert):
                    raise RuntimeError(f"certificate {cert_name} is not ready at current "
                                       f"generation {dig(cert, 'metadata', 'generation') or 0}")
            for secret_name in (util.get_tls_secret_name(name, C.HEAD_NODE),
                                util.get_tls_secret_name(name, C.WORKER_NODE)):
                try:
                    secret = await self.client.get("Secret", secret_name, namespace)
                except ApiError as err:
                    raise RuntimeError(f"secret {secret_name} not found: {err}") from err
                for key in ("tls.crt", "tls.key", "ca.crt"):
                    if key not in (secret.get("data") or {}):
                        raise RuntimeError(f"secret {secret_name} missing required key {key}")
        except RuntimeError as err:
            raise RuntimeError(f"mTLS secrets not ready: {err}") from err

    def setup_with_manager(self, mgr: Any, reconcile_concurrency: int) -> Any:
        """Port of `RayClusterReconciler.SetupWithManager` (raycluster_controller.go).

        For RayCluster (generation, label or annotation changes), Owns Pod, Service, Secret and
        PersistentVolumeClaim; MaxConcurrentReconciles = ``reconcile_concurrency``."""
        from emu.runtime import ControllerOptions

        return (mgr.new_controller()
                .for_("RayCluster", api_version="ray.io/v1", predicates=(or_(
                    GenerationChangedPredicate(), LabelChangedPredicate(),
                    AnnotationChangedPredicate()),))
                .owns("Pod").owns("Service").owns("Secret").owns("PersistentVolumeClaim")
                .with_options(ControllerOptions(max_concurrent_reconciles=reconcile_concurrency))
                .complete(self))

    # -- calculateStatus -----------------------------------------------------------------------

    async def calculate_status(self, instance: Obj, reconcile_err: Exception | None) -> Obj:
        """Port of `RayClusterReconciler.calculateStatus` (raycluster_controller.go).

        SPEC §2.9/§2.10: ReplicaFailure from the typed error, counters, the sticky ``ready``
        state, HeadPodReady, the one-shot RayClusterProvisioned, the suspend conditions,
        endpoints and head info. Returns a new object; ``instance`` is not changed."""
        new = util.deep_copy(instance)
        status: Obj = new.setdefault("status", {})
        conditions: list[Obj] = status.setdefault("conditions", [])
        now = self.now()
        gate_on = self._gate(RAY_CLUSTER_STATUS_CONDITIONS)
        if gate_on:
            if reconcile_err is not None:
                reason = C.ray_cluster_replica_failure_reason(reconcile_err)
                if reason:
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_REPLICA_FAILURE, "status": "True",
                        "reason": reason, "message": str(reconcile_err)}, now)
            else:
                util.remove_status_condition(conditions, C.RAY_CLUSTER_REPLICA_FAILURE)

        status["observedGeneration"] = dig(new, "metadata", "generation") or 0
        opts = assoc.ray_cluster_all_pods_association_options(new)
        pods = list(await self.client.list("Pod", opts.namespace,
                                           label_selector=dict(opts.labels)))
        status["readyWorkerReplicas"] = util.calculate_ready_replicas(pods)
        status["availableWorkerReplicas"] = util.calculate_available_replicas(pods)
        status["desiredWorkerReplicas"] = util.calculate_desired_replicas(new)
        status["minWorkerReplicas"] = util.calculate_min_replicas(new)
        status["maxWorkerReplicas"] = util.calculate_max_replicas(new)
        status.update(calculate_desired_resources(new))

        if reconcile_err is None and len(pods) == status["desiredWorkerReplicas"] + 1 and \
                util.check_all_pods_running(pods):
            status["state"] = C.READY
            status["reason"] = ""

        if gate_on:
            head_pod = await assoc.get_ray_cluster_head_pod(self.client, new)
            if head_pod is None:
                util.set_status_condition(conditions, {
                    "type": C.HEAD_POD_READY, "status": "False", "reason": C.HEAD_POD_NOT_FOUND,
                    "message": "Head Pod not found"}, now)
            else:
                util.set_status_condition(conditions,
                                          util.find_head_pod_ready_condition(head_pod), now)
            suspend_status = util.find_ray_cluster_suspend_status(new)
            if not util.is_status_condition_true(conditions, C.RAY_CLUSTER_PROVISIONED) and \
                    suspend_status != C.RAY_CLUSTER_SUSPENDED:
                if util.check_all_pods_running(pods):
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_PROVISIONED, "status": "True",
                        "reason": C.ALL_POD_RUNNING_AND_READY_FIRST_TIME,
                        "message": "All Ray Pods are ready for the first time"}, now)
                else:
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_PROVISIONED, "status": "False",
                        "reason": C.RAY_CLUSTER_PODS_PROVISIONING,
                        "message": "RayCluster Pods are being provisioned for first time"}, now)
            suspend = (instance.get("spec") or {}).get("suspend")
            if suspend_status == C.RAY_CLUSTER_SUSPENDING:
                if not pods:
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_PROVISIONED, "status": "False",
                        "reason": C.RAY_CLUSTER_PODS_PROVISIONING,
                        "message": "RayCluster has been suspended"}, now)
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_SUSPENDING, "reason": C.RAY_CLUSTER_SUSPENDING,
                        "status": "False"}, now)
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_SUSPENDED, "reason": C.RAY_CLUSTER_SUSPENDED,
                        "status": "True"}, now)
            elif suspend_status == C.RAY_CLUSTER_SUSPENDED:
                if suspend is not None and not suspend:
                    util.set_status_condition(conditions, {
                        "type": C.RAY_CLUSTER_SUSPENDED, "reason": C.RAY_CLUSTER_SUSPENDED,
                        "status": "False"}, now)
            else:
                util.set_status_condition(conditions, {
                    "type": C.RAY_CLUSTER_SUSPENDED, "reason": C.RAY_CLUSTER_SUSPENDED,
                    "status": "False"}, now)
                util.set_status_condition(conditions, {
                    "type": C.RAY_CLUSTER_SUSPENDING, "reason": C.RAY_CLUSTER_SUSPENDING,
                    "status": "True" if suspend else "False"}, now)

        if (new.get("spec") or {}).get("suspend") and not pods:
            status["state"] = C.SUSPENDED

        await self.update_endpoints(new)
        await self.update_head_info(new)

        status["lastUpdateTime"] = now
        if (instance.get("status") or {}).get("state", "") != status.get("state", ""):
            status.setdefault("stateTransitionTimes", {})[status.get("state", "")] = now
        if not conditions:
            del status["conditions"]
        return new

    async def get_head_service_ip_and_name(self, instance: Obj) -> tuple[str, str]:
        """Port of `RayClusterReconciler.getHeadServiceIPAndName` (raycluster_controller.go).

        For a headless Service the head Pod's IP is the service IP."""
        opts = assoc.ray_cluster_head_service_list_options(instance)
        services = list(await self.client.list("Service", opts.namespace,
                                               label_selector=dict(opts.labels)))
        name = instance["metadata"]["name"]

        def filters() -> str:  # only the errors print it
            return f"[InNamespace({opts.namespace}) MatchingLabels({opts.selector()})]"

        if not services:
            raise RuntimeError(f"unable to find head service. cluster name {name}, filter labels "
                               f"{filters()}")
        if len(services) > 1:
            raise RuntimeError(f"found multiple head services. cluster name {name}, filter "
                               f"labels {filters()}")
        svc = services[0]
        cluster_ip = dig(svc, "spec", "clusterIP") or ""
        if cluster_ip == "":
            raise RuntimeError(f"head service IP is empty. cluster name {name}, filter labels "
                               f"{filters()}")
        if cluster_ip == "None":
            head_pod = await assoc.get_ray_cluster_head_pod(self.client, instance)
            if head_pod is not None:
                return dig(head_pod, "status", "podIP") or "", svc["metadata"]["name"]
            return "", svc["metadata"]["name"]
        return cluster_ip, svc["metadata"]["name"]

    async def update_endpoints(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.updateEndpoints` (raycluster_controller.go): one entry
        per named port of the first head Service: nodePort, else targetPort."""
        opts = assoc.ray_cluster_head_service_list_options(instance)
        services = list(await self.client.list("Service", opts.namespace,
                                               label_selector=dict(opts.labels)))
        if not services:
            return
        endpoints = instance["status"].setdefault("endpoints", {})
        for port in dig(services[0], "spec", "ports") or []:
            port_name = port.get("name") or ""
            if not port_name:
                continue
            target = port.get("targetPort")
            if port.get("nodePort"):
                endpoints[port_name] = str(port["nodePort"])
            elif isinstance(target, int) and target != 0:
                endpoints[port_name] = str(target)
            elif isinstance(target, str) and target:
                endpoints[port_name] = target

    async def update_head_info(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.updateHeadInfo` (raycluster_controller.go)."""
        head_pod = await assoc.get_ray_cluster_head_pod(self.client, instance)
        head = instance["status"].setdefault("head", {})
        if head_pod is not None:
            head["podIP"] = dig(head_pod, "status", "podIP") or ""
            head["podName"] = head_pod["metadata"]["name"]
        else:
            head["podIP"] = ""
            head["podName"] = ""
        ip, svc_name = await self.get_head_service_ip_and_name(instance)
        head["serviceIP"] = ip
        head["serviceName"] = svc_name
        # Go's HeadInfo fields are omitempty: an empty one is absent on the wire.
        for key in [k for k, v in head.items() if v == ""]:
            del head[key]

    # -- autoscaler RBAC -----------------------------------------------------------------------

    async def reconcile_autoscaler_service_account(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileAutoscalerServiceAccount`
        (raycluster_controller.go): with in-tree autoscaling, the head's ServiceAccount exists or
        is created (a user-named one that is missing is an error and a Warning event)."""
        if not util.is_autoscaling_enabled(instance.get("spec")):
            return
        nn = assoc.ray_cluster_autoscaler_service_account_namespaced_name(instance)
        try:
            await self.client.get("ServiceAccount", nn.name, nn.namespace)
            return
        except ApiError as err:
            if err.code != 404:
                raise
            not_found = err
        if dig(instance, "spec", "headGroupSpec", "template", "spec",
               "serviceAccountName") == nn.name:
            msg = (f"If users specify ServiceAccountName for the head Pod, they need to create a "
                   f"ServiceAccount themselves. However, ServiceAccount {nn.name} is not found. "
                   f"Please create one. See the PR description of "
                   f"https://github.com/ray-project/kuberay/pull/1128 for more details.")
            self._event(instance, "Warning", C.AUTOSCALER_SERVICE_ACCOUNT_NOT_FOUND,
                        C.VALIDATE_ACTION, f"Failed to reconcile RayCluster "
                        f"{nn.namespace}/{instance['metadata']['name']}. {msg}")
            raise not_found
        sa: Obj = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": util.check_name(nn.name), "namespace": nn.namespace,
                                "labels": {C.RAY_CLUSTER_LABEL_KEY: instance["metadata"]["name"],
                                           C.KUBERNETES_APPLICATION_NAME_LABEL_KEY:
                                               C.APPLICATION_NAME,
                                           C.KUBERNETES_CREATED_BY_LABEL_KEY: C.COMPONENT_NAME}}}
        util.set_controller_reference(instance, sa)
        try:
            await self.client.create(sa)
        except ApiError as err:
            if err.code == 409 and err.reason == "AlreadyExists":
                return
            self._event(instance, "Warning", C.FAILED_TO_CREATE_SERVICE_ACCOUNT, C.CREATE_ACTION,
                        f"Failed creating service account {nn.namespace}/{sa['metadata']['name']}"
                        f", {err}")
            raise
        self._event(instance, "Normal", C.CREATED_SERVICE_ACCOUNT, C.CREATE_ACTION,
                    f"Created service account {nn.namespace}/{sa['metadata']['name']}")

    async def reconcile_autoscaler_role(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileAutoscalerRole` (raycluster_controller.go):
        with in-tree autoscaling, the autoscaler's Role exists or is created."""
        nn = assoc.ray_cluster_autoscaler_role_namespaced_name(instance)
        await self._ensure_autoscaler_rbac(instance, "Role", nn, rbac.build_role(instance),
                                           "role", C.FAILED_TO_CREATE_ROLE, C.CREATED_ROLE)

    async def reconcile_autoscaler_role_binding(self, instance: Obj) -> None:
        """Port of `RayClusterReconciler.reconcileAutoscalerRoleBinding`
        (raycluster_controller.go): as `reconcile_autoscaler_role`, for its RoleBinding."""
        nn = assoc.ray_cluster_autoscaler_role_binding_namespaced_name(instance)
        await self._ensure_autoscaler_rbac(
            instance, "RoleBinding", nn, rbac.build_role_binding(instance), "role binding",
            C.FAILED_TO_CREATE_ROLE_BINDING, C.CREATED_ROLE_BINDING)

    async def _ensure_autoscaler_rbac(self, instance: Obj, kind: str, nn: Any, obj: Obj,
                                      what: str, failed: str, created: str) -> None:
        """The shared body of the two Go functions: get; when NotFound, create (name clipped,
        controller reference set); AlreadyExists is success; other errors are a Warning."""
        if not util.is_autoscaling_enabled(instance.get("spec")):
            return
        try:
            await self.client.get(kind, nn.name, nn.namespace)
            return
        except ApiError as err:
            if err.code != 404:
                raise
        obj["metadata"]["name"] = util.check_name(obj["metadata"]["name"])
        util.set_controller_reference(instance, obj)
        meta = obj["metadata"]
        try:
            await self.client.create(obj)
        except ApiError as err:
            if err.code == 409 and err.reason == "AlreadyExists":
                return
            self._event(instance, "Warning", failed, C.CREATE_ACTION,
                        f"Failed creating {what} {meta['namespace']}/{meta['name']}, {err}")
            raise
        self._event(instance, "Normal", created, C.CREATE_ACTION,
                    f"Created {what} {meta['namespace']}/{meta['name']}")

    # -- updateRayClusterStatus and the finalizer helpers --------------------------------------

    async def update_ray_cluster_status(self, original: Obj, new: Obj
                                        ) -> tuple[bool, Exception | None]:
        """Port of `RayClusterReconciler.updateRayClusterStatus` (raycluster_controller.go):
        a status Update only when `inconsistent_ray_cluster_status`."""
        inconsistent = consistency.inconsistent_ray_cluster_status(original.get("status"),
                                                                   new.get("status"))
        if not inconsistent:
            return False, None
        try:
            await self.client.update_status(new)
        except Exception as err:
            return True, err
        return True, None

    async def force_remove_gcs_ft_finalizer(self, instance: Obj
                                            ) -> tuple[Result, Exception | None]:
        """Port of `RayClusterReconciler.forceRemoveGCSFTFinalizer` (raycluster_controller.go):
        drop the finalizer and warn ``ForceDeletedStuckCluster``."""
        age = self._clock() - parse_time(instance["metadata"]["deletionTimestamp"])
        self._remove_finalizer(instance)
        try:
            await self.client.update(instance)
        except Exception as err:
            return Result(requeue_after=DEFAULT_REQUEUE_DURATION), err
        storage_ns = util.annotations_of(instance).get(C.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY, "")
        self._event(instance, "Warning", C.FORCE_DELETED_STUCK_CLUSTER, C.CLEANUP_ACTION,
                    f"Force-removed GCS FT finalizer after {go_duration(age)} due to Redis cleanup "
                    f'timeout; Redis storage namespace "{storage_ns}" may need manual cleanup')
        return Result(), None


# ---------------------------------------------------------------------------------------------
# Free functions of raycluster_controller.go
# ---------------------------------------------------------------------------------------------

def _join(marker: Exception, err: BaseException) -> Exception:
    """``errors.Join(marker, err)``: the marker's text, a newline, the error's text; the marker
    is findable by `constant.ray_cluster_replica_failure_reason` through ``__cause__``."""
    joined = RuntimeError(f"{marker}\n{err}")
    joined.__cause__ = marker
    return joined


def _go_list(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"


def _pod_name_of(pod: Obj) -> str:
    return str(pod["metadata"].get("name") or "")


def _pod_facts(pod: Obj) -> str:
    return (f"Pod status: {dig(pod, 'status', 'phase') or ''}; Pod restart policy: "
            f"{dig(pod, 'spec', 'restartPolicy') or ''}; Ray container terminated status: "
            f"{format_terminated(get_ray_container_state_terminated(pod))}")


def format_terminated(state: Obj | None) -> str:
    """``%v`` of a ``*ContainerStateTerminated`` (its generated ``String``)."""
    if state is None:
        return "nil"
    return ("&ContainerStateTerminated{"
            f"ExitCode:{state.get('exitCode', 0)},Signal:{state.get('signal', 0)},"
            f"Reason:{state.get('reason', '')},Message:{state.get('message', '')},"
            f"StartedAt:{state.get('startedAt', '')},FinishedAt:{state.get('finishedAt', '')},"
            f"ContainerID:{state.get('containerID', '')},}}")


def should_skip_head_pod_restart(instance: Mapping[str, Any]) -> bool:
    """Port of `shouldSkipHeadPodRestart` (raycluster_controller.go): the annotation
    ``ray.io/disable-provisioned-head-restart`` is exactly ``"true"``."""
    return util.annotations_of(instance).get(
        C.DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION_KEY) == "true"


def should_delete_pod(pod: Mapping[str, Any], node_type: str) -> tuple[bool, str]:
    """Port of `shouldDeletePod` (raycluster_controller.go): (delete?, why).

    Failed/Succeeded → delete. Running with the Ray container terminated → delete only under
    restartPolicy Never. Anything else → keep."""
    name = dig(pod, "metadata", "name") or ""
    phase = dig(pod, "status", "phase") or ""
    if phase in ("Failed", "Succeeded"):
        return True, (f"The {node_type} Pod {name} status is {phase} which is a terminal state. "
                      f"KubeRay will delete the Pod and create new Pods in the next reconciliation "
                      f"if necessary.")
    terminated = get_ray_container_state_terminated(pod)
    term_text = format_terminated(terminated)
    restart_policy = dig(pod, "spec", "restartPolicy") or ""
    if phase == "Running" and terminated is not None:
        if restart_policy == "Never":
            return True, (f"The Pod status of the {node_type} Pod {name} is {phase}, and the Ray "
                          f"container terminated status is {term_text}. The container is unable "
                          f"to restart due to its restart policy {restart_policy}, so KubeRay "
                          f"will delete it.")
        return False, (f"The Pod status of the {node_type} Pod {name} is {phase}, and the Ray "
                       f"container terminated status is {term_text}. However, KubeRay will not "
                       f"delete the Pod because its restartPolicy is set to {restart_policy} and "
                       f"it should be able to restart automatically.")
    return False, (f"KubeRay does not need to delete the {node_type} Pod {name}. The Pod status "
                   f"is {phase}, and the Ray container terminated status is {term_text}.")


def get_ray_container_state_terminated(pod: Mapping[str, Any]) -> Obj | None:
    """Port of `getRayContainerStateTerminated` (raycluster_controller.go): the Ray container's
    (index 0, matched by name) terminated state, or None."""
    containers = dig(pod, "spec", "containers") or []
    if not containers:
        return None
    ray_name = containers[C.RAY_CONTAINER_INDEX].get("name")
    for status in dig(pod, "status", "containerStatuses") or []:
        if status.get("name") == ray_name:
            terminated = (status.get("state") or {}).get("terminated")
            return terminated if isinstance(terminated, dict) else None
    return None


def set_defaults(instance: Obj) -> None:
    """Port of `setDefaults` (raycluster_controller.go): nil ``rayStartParams`` become ``{}``."""
    spec = instance.setdefault("spec", {})
    head = spec.setdefault("headGroupSpec", {})
    if head.get("rayStartParams") is None:
        head["rayStartParams"] = {}
    for group in spec.get("workerGroupSpecs") or []:
        if group.get("rayStartParams") is None:
            group["rayStartParams"] = {}


def gcs_storage_retain_on_deletion(instance: Mapping[str, Any]) -> bool:
    """Port of `gcsStorageRetainOnDeletion` (raycluster_controller.go)."""
    policy = dig(instance, "spec", "gcsFaultToleranceOptions", "storage", "deletionPolicy")
    return policy == C.RETAIN_GCS_STORAGE_DELETION_POLICY


def gcs_storage_pvc_drift(desired: Mapping[str, Any], existing: Mapping[str, Any]) -> str:
    """Port of `gcsStoragePVCDrift` (raycluster_controller.go): size, class (when asked for),
    access modes; "" when none differ."""
    diffs: list[str] = []
    want = dig(desired, "spec", "resources", "requests", "storage") or "0"
    got = dig(existing, "spec", "resources", "requests", "storage") or "0"
    if pod_builders.parse_quantity(want) != pod_builders.parse_quantity(got):
        diffs.append(f"requested size {want} != current {got}")
    want_class = dig(desired, "spec", "storageClassName")
    got_class = dig(existing, "spec", "storageClassName")
    if want_class is not None and want_class != got_class:
        diffs.append(f"storageClassName {want_class} != current {got_class or '<default>'}")
    want_modes = list(dig(desired, "spec", "accessModes") or [])
    got_modes = list(dig(existing, "spec", "accessModes") or [])
    if sorted(want_modes) != sorted(got_modes):
        diffs.append(f"accessModes {_go_list(want_modes)} != current {_go_list(got_modes)}")
    return "; ".join(diffs)


def calculate_desired_resources(cluster: Mapping[str, Any]) -> dict[str, str]:
    """Port of `CalculateDesiredResources` (util.go) and `sumGPUs` (raycluster_controller.go), as
    the four status quantities (``desiredCPU``, ``desiredMemory``, ``desiredGPU``,
    ``desiredTPU``).

    A pure function of the spec, which a cluster keeps across reconciles, and exact fractions
    cost: the result is memoised by the spec's content (`util.ContentMemo`)."""
    return dict(_desired_resources_memo(cluster.get("spec") or {}))


def _calculate_desired_resources(spec: Mapping[str, Any]) -> dict[str, str]:
    totals: dict[str, Fraction] = {}

    def add(pod_spec: Mapping[str, Any], times: int) -> None:
        for container in pod_spec.get("containers") or []:
            res = dict((container.get("resources") or {}).get("requests") or {})
            for key, value in ((container.get("resources") or {}).get("limits") or {}).items():
                res.setdefault(key, value)
            for key, value in res.items():
                try:
                    amount = pod_builders.parse_quantity(value)
                except ValueError:
                    continue
                totals[key] = totals.get(key, Fraction(0)) + amount * times

    add(dig(spec, "headGroupSpec", "template", "spec") or {}, 1)
    for group in spec.get("workerGroupSpecs") or []:
        if group.get("suspend"):
            continue
        replicas = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        add(dig(group, "template", "spec") or {}, replicas)
    gpus = sum((v for k, v in totals.items() if pod_builders.is_gpu_resource_key(k)),
               Fraction(0))
    return {"desiredCPU": format_quantity(totals.get("cpu", Fraction(0))),
            "desiredMemory": format_quantity(totals.get("memory", Fraction(0)), binary=True),
            "desiredGPU": format_quantity(gpus),
            "desiredTPU": format_quantity(totals.get("google.com/tpu", Fraction(0)))}


_desired_resources_memo = util.ContentMemo(_calculate_desired_resources)


def format_quantity(value: Fraction, *, binary: bool = False) -> str:
    """A quantity's canonical text, simplified: ``2``, ``1500m``, ``3Gi``, ``512Mi``."""
    if binary and value > 0:
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                               ("Mi", 2**20), ("Ki", 2**10)):
            if value % factor == 0:
                return f"{int(value // factor)}{suffix}"
    if value.denominator == 1:
        return str(int(value))
    milli = value * 1000
    if milli.denominator == 1:
        return f"{int(milli)}m"
    return str(float(value))
