"""KubeRay's names and numbers: labels, annotations, env names, ports, finalizers, events, defaults.

Port of ``ray-operator/controllers/ray/utils/constant.go`` plus the enum-like constants of
``apis/ray/v1/*_types.go`` and the few constants that live in ``util.go``, ``pod.go`` and
``rayjob_controller.go``. Every Go constant keeps its name, in UPPER_SNAKE form
(``RayClusterLabelKey`` -> ``RAY_CLUSTER_LABEL_KEY``); Go names that already are UPPER_SNAKE are
unchanged. The module is long because it is a table: it holds no logic besides
`ray_cluster_replica_failure_reason`.

Constants of features the emulator does not model (history server, network policy)
are kept so that validation messages and builders can name them exactly as KubeRay does.
"""

from __future__ import annotations

from typing import Final

# ---------------------------------------------------------------------------------------------
# Labels and annotations (constant.go)
# ---------------------------------------------------------------------------------------------

DEFAULT_SERVE_APP_NAME: Final = "default"

RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: Final = "ray.io/originated-from-cr-name"
RAY_ORIGINATED_FROM_CRD_LABEL_KEY: Final = "ray.io/originated-from-crd"
RAY_CLUSTER_LABEL_KEY: Final = "ray.io/cluster"
RAY_NODE_TYPE_LABEL_KEY: Final = "ray.io/node-type"
RAY_NODE_GROUP_LABEL_KEY: Final = "ray.io/group"
RAY_NODE_LABEL_KEY: Final = "ray.io/is-ray-node"
RAY_ID_LABEL_KEY: Final = "ray.io/identifier"
RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY: Final = "ray.io/serve"
RAY_CLUSTER_HEADLESS_SERVICE_LABEL_KEY: Final = "ray.io/headless-worker-svc"
HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY: Final = "ray.io/hash-without-replicas-and-workers-to-delete"
UPGRADE_STRATEGY_RECREATE_HASH_KEY: Final = "ray.io/upgrade-strategy-recreate-hash"
NUM_WORKER_GROUPS_KEY: Final = "ray.io/num-worker-groups"
#: Go's ``KubeRayVersion``: the *annotation key*; the version value is `KUBERAY_VERSION`.
KUBE_RAY_VERSION: Final = "ray.io/kuberay-version"
RAY_CRON_JOB_NAME_LABEL_KEY: Final = "ray.io/cronjob-name"
RAY_CRON_JOB_TIMESTAMP_ANNOTATION_KEY: Final = "ray.io/cronjob-scheduled-timestamp"
RAY_JOB_SUBMISSION_MODE_LABEL_KEY: Final = "ray.io/job-submission-mode"
DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION_KEY: Final = "ray.io/disable-provisioned-head-restart"

# RayMultiHostIndexing labels.
RAY_WORKER_REPLICA_NAME_KEY: Final = "ray.io/worker-group-replica-name"
RAY_WORKER_REPLICA_INDEX_KEY: Final = "ray.io/worker-group-replica-index"
RAY_HOST_INDEX_KEY: Final = "ray.io/replica-host-index"

#: The Ray container is the first application container of a head or worker Pod.
RAY_CONTAINER_INDEX: Final = 0

RAY_PRIORITY_CLASS_NAME: Final = "ray.io/priority-class-name"
RAY_GANG_SCHEDULING_ENABLED: Final = "ray.io/gang-scheduling-enabled"

# GCS fault tolerance annotations.
RAY_FT_ENABLED_ANNOTATION_KEY: Final = "ray.io/ft-enabled"
RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY: Final = "ray.io/external-storage-namespace"
RAY_CLUSTER_GCSFT_DELETION_TIMEOUT_ANNOTATION: Final = "ray.io/gcs-ft-deletion-timeout"

RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY: Final = "ray.io/overwrite-container-cmd"
RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION: Final = "ray.io/initializing-timeout"
RAY_JOB_CLUSTER_SELECTOR_KEY: Final = "ray.io/cluster"

ENABLE_SERVE_SERVICE_KEY: Final = "ray.io/enable-serve-service"
ENABLE_SERVE_SERVICE_TRUE: Final = "true"
ENABLE_RAY_CLUSTER_SERVING_SERVICE_TRUE: Final = "true"
ENABLE_RAY_CLUSTER_SERVING_SERVICE_FALSE: Final = "false"

KUBERNETES_APPLICATION_NAME_LABEL_KEY: Final = "app.kubernetes.io/name"
KUBERNETES_CREATED_BY_LABEL_KEY: Final = "app.kubernetes.io/created-by"

DASH_SYMBOL: Final = "-"

# ---------------------------------------------------------------------------------------------
# Finalizers
# ---------------------------------------------------------------------------------------------

GCS_FAULT_TOLERANCE_REDIS_CLEANUP_FINALIZER: Final = "ray.io/gcs-ft-redis-cleanup-finalizer"
RAY_JOB_STOP_JOB_FINALIZER: Final = "ray.io/rayjob-finalizer"
RAY_SERVICE_FINALIZER: Final = "ray.io/rayservice-finalizer"

# ---------------------------------------------------------------------------------------------
# Ports and port names
# ---------------------------------------------------------------------------------------------

DEFAULT_CLIENT_PORT: Final = 10001
DEFAULT_GCS_SERVER_PORT: Final = 6379
DEFAULT_DASHBOARD_PORT: Final = 8265
DEFAULT_METRICS_PORT: Final = 8080
DEFAULT_DASHBOARD_AGENT_LISTEN_PORT: Final = 52365
DEFAULT_SERVING_PORT: Final = 8000

CLIENT_PORT_NAME: Final = "client"
GCS_SERVER_PORT_NAME: Final = "gcs-server"
DASHBOARD_PORT_NAME: Final = "dashboard"
METRICS_PORT_NAME: Final = "metrics"
SERVING_PORT_NAME: Final = "serve"

GATEWAY_LISTENER_PORT_NAME: Final = "http"
DEFAULT_GATEWAY_LISTENER_PORT: Final = 80
DEFAULT_SERVICE_APP_PROTOCOL: Final = "tcp"

APPLICATION_NAME: Final = "kuberay"
COMPONENT_NAME: Final = "kuberay-operator"
HEADLESS_SERVICE_SUFFIX: Final = "headless"

# ---------------------------------------------------------------------------------------------
# Environment variables set on Ray containers
# ---------------------------------------------------------------------------------------------

RAY_CLUSTER_NAME: Final = "RAY_CLUSTER_NAME"
RAY_CLUSTER_NAMESPACE: Final = "RAY_CLUSTER_NAMESPACE"
RAY_IP: Final = "RAY_IP"
FQ_RAY_IP: Final = "FQ_RAY_IP"
RAY_PORT: Final = "RAY_PORT"
RAY_ADDRESS: Final = "RAY_ADDRESS"
RAY_REDIS_ADDRESS: Final = "RAY_REDIS_ADDRESS"
REDIS_PASSWORD: Final = "REDIS_PASSWORD"
REDIS_USERNAME: Final = "REDIS_USERNAME"
RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE: Final = "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE"
RAY_EXTERNAL_STORAGE_NS: Final = "RAY_external_storage_namespace"
RAY_GCS_STORAGE: Final = "RAY_gcs_storage"
RAY_GCS_STORAGE_PATH: Final = "RAY_gcs_storage_path"
RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S: Final = "RAY_gcs_rpc_server_reconnect_timeout_s"
RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO: Final = "RAY_timeout_ms_task_wait_for_death_info"
RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS: Final = "RAY_gcs_server_request_timeout_seconds"
RAY_SERVE_KV_TIMEOUT_S: Final = "RAY_SERVE_KV_TIMEOUT_S"
RAY_USAGE_STATS_KUBERAY_IN_USE: Final = "RAY_USAGE_STATS_KUBERAY_IN_USE"
RAY_USAGE_STATS_EXTRA_TAGS: Final = "RAY_USAGE_STATS_EXTRA_TAGS"
KUBERAY_GEN_RAY_START_CMD: Final = "KUBERAY_GEN_RAY_START_CMD"
KUBERAY_GEN_AUTOSCALER_START_CMD: Final = "KUBERAY_GEN_AUTOSCALER_START_CMD"
RAY_START_ULIMIT_OPEN_FILES: Final = "RAY_START_ULIMIT_OPEN_FILES"

RAY_USE_TLS: Final = "RAY_USE_TLS"
RAY_TLS_SERVER_CERT: Final = "RAY_TLS_SERVER_CERT"
RAY_TLS_SERVER_KEY: Final = "RAY_TLS_SERVER_KEY"
RAY_TLS_CA_CERT: Final = "RAY_TLS_CA_CERT"
RAY_TLS_VOLUME_NAME: Final = "ray-tls"
RAY_TLS_CERT_MOUNT_PATH: Final = "/etc/ray/tls"

RAY_SELF_SIGNED_ISSUER_PREFIX: Final = "ray-selfsigned-issuer"
RAY_CA_CERTIFICATE_PREFIX: Final = "ray-ca-certificate"
RAY_CA_ISSUER_PREFIX: Final = "ray-ca-issuer"
RAY_HEAD_CERT_PREFIX: Final = "ray-head-cert"
RAY_WORKER_CERT_PREFIX: Final = "ray-worker-cert"
RAY_HEAD_SECRET_PREFIX: Final = "ray-head-secret"
RAY_WORKER_SECRET_PREFIX: Final = "ray-worker-secret"
RAY_CA_SECRET_PREFIX: Final = "ca-secret"

# The submitter reads these: `ray job submit --address=http://$RAY_DASHBOARD_ADDRESS ...`.
RAY_DASHBOARD_ADDRESS: Final = "RAY_DASHBOARD_ADDRESS"
RAY_JOB_SUBMISSION_ID: Final = "RAY_JOB_SUBMISSION_ID"
#: ``PythonUnbufferedEnvVarName`` (rayjob_controller.go).
PYTHON_UNBUFFERED_ENV_VAR_NAME: Final = "PYTHONUNBUFFERED"

RAY_CLOUD_INSTANCE_ID: Final = "RAY_CLOUD_INSTANCE_ID"
RAY_NODE_TYPE_NAME: Final = "RAY_NODE_TYPE_NAME"
RAY_ENABLE_AUTOSCALER_V2: Final = "RAY_enable_autoscaler_v2"

RAY_AUTH_MODE_ENV_VAR: Final = "RAY_AUTH_MODE"
RAY_AUTH_TOKEN_ENV_VAR: Final = "RAY_AUTH_TOKEN"
RAY_AUTH_TOKEN_SECRET_KEY: Final = "auth_token"
RAY_ENABLE_K8S_TOKEN_AUTH_ENV_VAR: Final = "RAY_ENABLE_K8S_TOKEN_AUTH"
RAY_TOKEN_VOLUME_NAME: Final = "ray-token"
RAY_TOKEN_MOUNT_PATH: Final = "/var/run/secrets/ray.io/serviceaccount"

# Embedded RocksDB GCS storage.
GCS_STORAGE_VOLUME_NAME: Final = "gcs-storage"
GCS_STORAGE_MOUNT_PATH: Final = "/data/gcs"
GCS_STORAGE_ROCKS_DB_VALUE: Final = "rocksdb"
GCS_STORAGE_PVC_SUFFIX: Final = "-gcs-pvc"
GCS_STORAGE_DEFAULT_SIZE: Final = "1Gi"

# History server collector.
POD_IP: Final = "POD_IP"
RAY_ROLE: Final = "RAY_ROLE"
OWNER_KIND: Final = "OWNER_KIND"
OWNER_NAME: Final = "OWNER_NAME"
EVENTS_PORT: Final = "EVENTS_PORT"
STORAGE_ROOT_DIR: Final = "STORAGE_ROOT_DIR"
LOG_BATCHING: Final = "LOG_BATCHING"
PUSH_INTERVAL: Final = "PUSH_INTERVAL"
STORAGE_BACKEND: Final = "STORAGE_BACKEND"
GCS_BUCKET: Final = "GCS_BUCKET"
S3_BUCKET: Final = "S3_BUCKET"
S3_ENDPOINT: Final = "S3_ENDPOINT"
S3_REGION: Final = "S3_REGION"
AZURE_STORAGE_CONTAINER: Final = "AZURE_STORAGE_CONTAINER"
AZURE_STORAGE_CONNECTION_STRING: Final = "AZURE_STORAGE_CONNECTION_STRING"
AZURE_STORAGE_ACCOUNT_URL: Final = "AZURE_STORAGE_ACCOUNT_URL"
AZURE_STORAGE_AUTH_MODE: Final = "AZURE_STORAGE_AUTH_MODE"
ALIYUN_BUCKET: Final = "OSS_BUCKET"
ALIYUN_ENDPOINT: Final = "OSS_ENDPOINT"
ALIYUN_REGION: Final = "OSS_REGION"
RAY_ENABLE_RAY_EVENT: Final = "RAY_enable_ray_event"
RAY_ENABLE_CORE_WORKER_RAY_EVENT_TO_AGGREGATOR: Final = "RAY_enable_core_worker_ray_event_to_aggregator"
RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR: Final = "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR"
RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES: Final = (
    "RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES")
RAY_DASHBOARD_AGGREGATOR_AGENT_PUBLISHER_HTTP_ENDPOINT_EXPOSABLE_EVENT_TYPES: Final = (
    "RAY_DASHBOARD_AGGREGATOR_AGENT_PUBLISHER_HTTP_ENDPOINT_EXPOSABLE_EVENT_TYPES")
DEFAULT_RAY_EXPOSABLE_EVENT_TYPES: Final = ",".join([
    "TASK_DEFINITION_EVENT", "TASK_LIFECYCLE_EVENT", "ACTOR_TASK_DEFINITION_EVENT", "TASK_PROFILE_EVENT",
    "DRIVER_JOB_DEFINITION_EVENT", "DRIVER_JOB_LIFECYCLE_EVENT", "ACTOR_DEFINITION_EVENT",
    "ACTOR_LIFECYCLE_EVENT", "NODE_DEFINITION_EVENT", "NODE_LIFECYCLE_EVENT",
])

# ---------------------------------------------------------------------------------------------
# Operator environment variables (read from the operator process's env, never os.environ here)
# ---------------------------------------------------------------------------------------------

RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV: Final = "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV"
RAYCLUSTER_DEFAULT_REQUEUE_SECONDS: Final = 300
ENABLE_RANDOM_POD_DELETE: Final = "ENABLE_RANDOM_POD_DELETE"
ENABLE_GCS_FT_REDIS_CLEANUP: Final = "ENABLE_GCS_FT_REDIS_CLEANUP"
RAYCLUSTER_GCS_FT_DELETION_TIMEOUT_DEFAULT: Final = 300  # seconds
ENABLE_PROBES_INJECTION: Final = "ENABLE_PROBES_INJECTION"
USE_INGRESS_ON_OPENSHIFT: Final = "USE_INGRESS_ON_OPENSHIFT"
ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE: Final = "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE"
DELETE_RAYJOB_CR_AFTER_JOB_FINISHES: Final = "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES"
RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS: Final = (
    "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS")
DEFAULT_RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS: Final = 300
RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS: Final = "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS"
DEFAULT_RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS: Final = 300
ENABLE_LOGIN_SHELL: Final = "ENABLE_LOGIN_SHELL"
ENABLE_DETERMINISTIC_HEAD_POD_NAME: Final = "ENABLE_DETERMINISTIC_HEAD_POD_NAME"
#: ``EnableInitContainerInjectionEnvKey`` (pod.go).
ENABLE_INIT_CONTAINER_INJECTION_ENV_KEY: Final = "ENABLE_INIT_CONTAINER_INJECTION"
#: ``ClusterDomainEnvKey`` and ``DefaultDomainName`` (util.go).
CLUSTER_DOMAIN_ENV_KEY: Final = "CLUSTER_DOMAIN"
DEFAULT_DOMAIN_NAME: Final = "cluster.local"

# ---------------------------------------------------------------------------------------------
# Ray defaults, probes, health checks
# ---------------------------------------------------------------------------------------------

#: Injected on workers only, and only with GCS FT (Ray's own default is 60 s).
DEFAULT_WORKER_RAY_GCS_RECONNECT_TIMEOUT_S: Final = "600"
LOCAL_HOST: Final = "127.0.0.1"

DEFAULT_READINESS_PROBE_INITIAL_DELAY_SECONDS: Final = 10
DEFAULT_READINESS_PROBE_TIMEOUT_SECONDS: Final = 2
DEFAULT_HEAD_READINESS_PROBE_TIMEOUT_SECONDS: Final = 5
DEFAULT_READINESS_PROBE_PERIOD_SECONDS: Final = 5
DEFAULT_READINESS_PROBE_SUCCESS_THRESHOLD: Final = 1
DEFAULT_READINESS_PROBE_FAILURE_THRESHOLD: Final = 10
SERVE_READINESS_PROBE_FAILURE_THRESHOLD: Final = 1

DEFAULT_LIVENESS_PROBE_INITIAL_DELAY_SECONDS: Final = 30
DEFAULT_LIVENESS_PROBE_TIMEOUT_SECONDS: Final = 2
DEFAULT_HEAD_LIVENESS_PROBE_TIMEOUT_SECONDS: Final = 5
DEFAULT_LIVENESS_PROBE_PERIOD_SECONDS: Final = 5
DEFAULT_LIVENESS_PROBE_SUCCESS_THRESHOLD: Final = 1
DEFAULT_LIVENESS_PROBE_FAILURE_THRESHOLD: Final = 120

RAY_HTTP_CLIENT_DIRECT_TIMEOUT_SECONDS: Final = 2
RAY_HTTP_CLIENT_PROXY_TIMEOUT_SECONDS: Final = 10

RAY_AGENT_RAYLET_HEALTH_PATH: Final = "api/local_raylet_healthz"
RAY_DASHBOARD_GCS_HEALTH_PATH: Final = "api/gcs_healthz"
RAY_DASHBOARD_GCS_HEALTH_CHECK_TIMEOUT_SECONDS: Final = 10
RAY_SERVE_PROXY_HEALTH_PATH: Final = "-/healthz"
#: Go's ``BaseWgetHealthCommand`` as a Python format: timeout seconds, port, path (no leading slash).
BASE_WGET_HEALTH_COMMAND: Final = "wget --tries 1 -T {} -q -O- http://localhost:{}/{} | grep success"
#: Go's ``BasePythonHealthCommand`` as a Python format: url, timeout seconds.
BASE_PYTHON_HEALTH_COMMAND: Final = (
    'python -c "import urllib.request; r=urllib.request.urlopen(\'{}\', timeout={}); '
    "exit(0 if b'success' in r.read() else 1)\"")
RAY_NODE_HEALTH_PATH: Final = "/api/healthz"

RAY_NODE_HEAD_GROUP_LABEL_VALUE: Final = "headgroup"
RAY_NODE_SUBMITTER_GROUP_LABEL_VALUE: Final = "submittergroup"
SUBMITTER_CONTAINER_NAME: Final = "ray-job-submitter"
COLLECTOR_CONTAINER_NAME: Final = "ray-history-collector"

#: The operator's build version; the emulated operator reports KubeRay's HEAD value.
KUBERAY_VERSION: Final = "nightly"
#: The ``spec.managedBy`` value that means "this operator".
KUBE_RAY_CONTROLLER: Final = "ray.io/kuberay-operator"
SERVE_CONFIG_LRU_SIZE: Final = 1000

# 63 - len("-serve-svc") == 53; RayJob/RayService lose 6 more to GenerateRayClusterName's suffix.
MAX_RAY_CLUSTER_NAME_LENGTH: Final = 53
MAX_RAY_SERVICE_NAME_LENGTH: Final = MAX_RAY_CLUSTER_NAME_LENGTH - 6
MAX_RAY_JOB_NAME_LENGTH: Final = MAX_RAY_CLUSTER_NAME_LENGTH - 6
MAX_RAY_CRON_JOB_NAME_LENGTH: Final = MAX_RAY_JOB_NAME_LENGTH - 11

# ServiceType (constant.go): which RayService-owned Service a log line talks about.
HEAD_SERVICE: Final = "headService"
SERVING_SERVICE: Final = "serveService"

# pod.go
SHARED_MEMORY_VOLUME_NAME: Final = "shared-mem"
SHARED_MEMORY_VOLUME_MOUNT_PATH: Final = "/dev/shm"
PLASMA_DIRECTORY_PARAM_KEY: Final = "plasma-directory"
RAY_LOG_VOLUME_NAME: Final = "ray-logs"
RAY_LOG_VOLUME_MOUNT_PATH: Final = "/tmp/ray"
AUTOSCALER_CONTAINER_NAME: Final = "autoscaler"
RAY_HEAD_CONTAINER: Final = "ray-head"
WAIT_GCS_READY_CONTAINER_NAME: Final = "wait-gcs-ready"
WAIT_FOR_TLS_IP_SAN_CONTAINER_NAME: Final = "wait-for-tls-ip-san"

# util.go
SERVE_NAME: Final = "serve"
CONTAINERS_NOT_READY: Final = "ContainersNotReady"

# CRDType (util.go)
RAY_CLUSTER_CRD: Final = "RayCluster"
RAY_JOB_CRD: Final = "RayJob"
RAY_SERVICE_CRD: Final = "RayService"

# ---------------------------------------------------------------------------------------------
# RayCluster replica failures (constant.go): reasons for the ReplicaFailure condition
# ---------------------------------------------------------------------------------------------


class RayClusterReplicaFailure(Exception):
    """Port of ``errRayClusterReplicaFailure`` (constant.go): a marker error whose text is a reason.

    `calculate_status` looks for one in the reconcile error's cause chain (Go's ``errors.As``);
    reconcilers raise ``SomeError(...) from ERR_FAILED_CREATE_HEAD_POD`` or raise the marker itself.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


ERR_FAILED_DELETE_ALL_PODS: Final = RayClusterReplicaFailure("FailedDeleteAllPods")
ERR_FAILED_DELETE_HEAD_POD: Final = RayClusterReplicaFailure("FailedDeleteHeadPod")
ERR_FAILED_CREATE_HEAD_POD: Final = RayClusterReplicaFailure("FailedCreateHeadPod")
ERR_FAILED_DELETE_WORKER_POD: Final = RayClusterReplicaFailure("FailedDeleteWorkerPod")
ERR_FAILED_CREATE_WORKER_POD: Final = RayClusterReplicaFailure("FailedCreateWorkerPod")


def ray_cluster_replica_failure_reason(err: BaseException | None) -> str:
    """Port of `RayClusterReplicaFailureReason` (constant.go).

    Walks ``__cause__``/``__context__`` the way ``errors.As`` walks ``Unwrap``; "" when no marker.
    """
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, RayClusterReplicaFailure):
            return err.reason
        err = err.__cause__ if err.__cause__ is not None else err.__context__
    return ""


# ---------------------------------------------------------------------------------------------
# Kubernetes event reasons (K8sEventType) and actions (K8sEventAction)
# ---------------------------------------------------------------------------------------------

# RayCluster
INVALID_RAY_CLUSTER_STATUS: Final = "InvalidRayClusterStatus"
INVALID_RAY_CLUSTER_SPEC: Final = "InvalidRayClusterSpec"
INVALID_RAY_CLUSTER_METADATA: Final = "InvalidRayClusterMetadata"
CREATED_HEAD_POD: Final = "CreatedHeadPod"
FAILED_TO_CREATE_HEAD_POD: Final = "FailedToCreateHeadPod"
DELETED_HEAD_POD: Final = "DeletedHeadPod"
FAILED_TO_DELETE_HEAD_POD: Final = "FailedToDeleteHeadPod"
CREATED_WORKER_POD: Final = "CreatedWorkerPod"
FAILED_TO_CREATE_WORKER_POD: Final = "FailedToCreateWorkerPod"
DELETED_WORKER_POD: Final = "DeletedWorkerPod"
FAILED_TO_DELETE_WORKER_POD: Final = "FailedToDeleteWorkerPod"
FAILED_TO_DELETE_WORKER_POD_COLLECTION: Final = "FailedToDeleteWorkerPodCollection"
CREATED_REDIS_CLEANUP_JOB: Final = "CreatedRedisCleanupJob"
FAILED_TO_CREATE_REDIS_CLEANUP_JOB: Final = "FailedToCreateRedisCleanupJob"
FORCE_DELETED_STUCK_CLUSTER: Final = "ForceDeletedStuckCluster"
# RayJob
INVALID_RAY_JOB_SPEC: Final = "InvalidRayJobSpec"
INVALID_RAY_JOB_METADATA: Final = "InvalidRayJobMetadata"
INVALID_RAY_JOB_STATUS: Final = "InvalidRayJobStatus"
CREATED_RAY_JOB_SUBMITTER: Final = "CreatedRayJobSubmitter"
DELETED_RAY_JOB_SUBMITTER: Final = "DeletedRayJobSubmitter"
FAILED_TO_CREATE_RAY_JOB_SUBMITTER: Final = "FailedToCreateRayJobSubmitter"
FAILED_TO_DELETE_RAY_JOB_SUBMITTER: Final = "FailedToDeleteRayJobSubmitter"
CREATED_RAY_CLUSTER: Final = "CreatedRayCluster"
UPDATED_RAY_CLUSTER: Final = "UpdatedRayCluster"
DELETED_RAY_CLUSTER: Final = "DeletedRayCluster"
FAILED_TO_CREATE_RAY_CLUSTER: Final = "FailedToCreateRayCluster"
FAILED_TO_DELETE_RAY_CLUSTER: Final = "FailedToDeleteRayCluster"
FAILED_TO_UPDATE_RAY_CLUSTER: Final = "FailedToUpdateRayCluster"
RAY_CLUSTER_NOT_FOUND: Final = "RayClusterNotFound"
# Batch scheduler
BATCH_SCHEDULER_CLEANED_UP: Final = "BatchSchedulerCleanedUp"
FAILED_TO_CLEANUP_BATCH_SCHEDULER: Final = "FailedToCleanupBatchScheduler"
# RayCronJob
INVALID_RAY_CRON_JOB_SPEC: Final = "InvalidRayCronJobSpec"
SUSPENDED_RAY_CRON_JOB: Final = "SuspendedRayCronJob"
# RayService
CREATED_GATEWAY: Final = "CreatedGateway"
CREATED_HTTP_ROUTE: Final = "CreatedHTTPRoute"
INVALID_RAY_SERVICE_SPEC: Final = "InvalidRayServiceSpec"
INVALID_RAY_SERVICE_METADATA: Final = "InvalidRayServiceMetadata"
RAY_SERVICE_INITIALIZING_TIMEOUT: Final = "RayServiceInitializingTimeout"
ROLLBACK_IMPOSSIBLE: Final = "RollbackImpossible"
UPDATED_HEAD_POD_SERVE_LABEL: Final = "UpdatedHeadPodServeLabel"
UPDATED_GATEWAY: Final = "UpdatedGateway"
UPDATED_HTTP_ROUTE: Final = "UpdatedHTTPRoute"
UPDATED_SERVE_APPLICATIONS: Final = "UpdatedServeApplications"
UPDATED_SERVE_TARGET_CAPACITY: Final = "UpdatedServeTargetCapacity"
FAILED_TO_UPDATE_HEAD_POD_SERVE_LABEL: Final = "FailedToUpdateHeadPodServeLabel"
FAILED_TO_UPDATE_SERVE_APPLICATIONS: Final = "FailedToUpdateServeApplications"
FAILED_TO_UPDATE_TARGET_CAPACITY: Final = "FailedToUpdateTargetCapacity"
FAILED_TO_CREATE_GATEWAY: Final = "FailedToCreateGateway"
FAILED_TO_UPDATE_GATEWAY: Final = "FailedToUpdateGateway"
FAILED_TO_DELETE_GATEWAY: Final = "FailedToDeleteGateway"
FAILED_TO_CREATE_HTTP_ROUTE: Final = "FailedToCreateHTTPRoute"
FAILED_TO_UPDATE_HTTP_ROUTE: Final = "FailedToUpdateHTTPRoute"
FAILED_TO_DELETE_HTTP_ROUTE: Final = "FailedToDeleteHTTPRoute"
FAILED_TO_DELETE_SERVICE: Final = "FailedToDeleteService"
DELETED_GATEWAY: Final = "DeletedGateway"
DELETED_HTTP_ROUTE: Final = "DeletedHTTPRoute"
DELETED_SERVICE: Final = "DeletedService"
# Generic Pod
DELETED_POD: Final = "DeletedPod"
FAILED_TO_DELETE_POD: Final = "FailedToDeletePod"
FAILED_TO_DELETE_POD_COLLECTION: Final = "FailedToDeletePodCollection"
# Ingress and Route
CREATED_INGRESS: Final = "CreatedIngress"
FAILED_TO_CREATE_INGRESS: Final = "FailedToCreateIngress"
UPDATED_INGRESS: Final = "UpdatedIngress"
FAILED_TO_UPDATE_INGRESS: Final = "FailedToUpdateIngress"
CREATED_ROUTE: Final = "CreatedRoute"
FAILED_TO_CREATE_ROUTE: Final = "FailedToCreateRoute"
# Service
CREATED_SERVICE: Final = "CreatedService"
UPDATED_SERVICE: Final = "UpdatedService"
FAILED_TO_CREATE_SERVICE: Final = "FailedToCreateService"
FAILED_TO_UPDATE_SERVICE: Final = "FailedToUpdateService"
# ServiceAccount, PVC, Role, RoleBinding
CREATED_SERVICE_ACCOUNT: Final = "CreatedServiceAccount"
FAILED_TO_CREATE_SERVICE_ACCOUNT: Final = "FailedToCreateServiceAccount"
CREATED_PVC: Final = "CreatedPVC"
FAILED_TO_CREATE_PVC: Final = "FailedToCreatePVC"
AUTOSCALER_SERVICE_ACCOUNT_NOT_FOUND: Final = "AutoscalerServiceAccountNotFound"
CREATED_ROLE: Final = "CreatedRole"
FAILED_TO_CREATE_ROLE: Final = "FailedToCreateRole"
CREATED_ROLE_BINDING: Final = "CreatedRoleBinding"
FAILED_TO_CREATE_ROLE_BINDING: Final = "FailedToCreateRoleBinding"
# NetworkPolicy
CREATED_NETWORK_POLICY: Final = "CreatedNetworkPolicy"
UPDATED_NETWORK_POLICY: Final = "UpdatedNetworkPolicy"
DELETED_NETWORK_POLICY: Final = "DeletedNetworkPolicy"
FAILED_TO_CREATE_NETWORK_POLICY: Final = "FailedToCreateNetworkPolicy"
FAILED_TO_UPDATE_NETWORK_POLICY: Final = "FailedToUpdateNetworkPolicy"
FAILED_TO_DELETE_NETWORK_POLICY: Final = "FailedToDeleteNetworkPolicy"
NETWORK_POLICY_NAME_COLLISION: Final = "NetworkPolicyNameCollision"
# mTLS
MTLS_PKI_READY: Final = "MTLSPKIReady"
MTLS_CERTS_NOT_READY: Final = "MTLSCertsNotReady"
MTLS_FAILED_TO_RECONCILE: Final = "MTLSFailedToReconcile"
MTLS_CERTIFICATES_UPDATED: Final = "MTLSCertificatesUpdated"
MTLS_CERTIFICATE_EXPIRING_SOON: Final = "MTLSCertificateExpiringSoon"

# K8sEventAction
CREATE_ACTION: Final = "Create"
DELETE_ACTION: Final = "Delete"
UPDATE_ACTION: Final = "Update"
VALIDATE_ACTION: Final = "Validate"
RECONCILE_ACTION: Final = "Reconcile"
CLEANUP_ACTION: Final = "Cleanup"
SUSPEND_ACTION: Final = "Suspend"

# =============================================================================================
# rayv1 enum values (apis/ray/v1/*_types.go)
# =============================================================================================

# RayNodeType
HEAD_NODE: Final = "head"
WORKER_NODE: Final = "worker"
REDIS_CLEANUP_NODE: Final = "redis-cleanup"

# ClusterState (status.state; deprecated but still written)
READY: Final = "ready"
FAILED: Final = "failed"
SUSPENDED: Final = "suspended"

# RayCluster condition types
RAY_CLUSTER_PROVISIONED: Final = "RayClusterProvisioned"
HEAD_POD_READY: Final = "HeadPodReady"
RAY_CLUSTER_REPLICA_FAILURE: Final = "ReplicaFailure"
RAY_CLUSTER_SUSPENDING: Final = "RayClusterSuspending"
RAY_CLUSTER_SUSPENDED: Final = "RayClusterSuspended"
# RayCluster condition reasons
ALL_POD_RUNNING_AND_READY_FIRST_TIME: Final = "AllPodRunningAndReadyFirstTime"
RAY_CLUSTER_PODS_PROVISIONING: Final = "RayClusterPodsProvisioning"
HEAD_POD_NOT_FOUND: Final = "HeadPodNotFound"
HEAD_POD_RUNNING_AND_READY: Final = "HeadPodRunningAndReady"
UNKNOWN_REASON: Final = "Unknown"
# EventReason (raycluster_types.go)
RAY_CONFIG_ERROR: Final = "RayConfigError"
POD_RECONCILIATION_ERROR: Final = "PodReconciliationError"

# RayClusterUpgradeType
RAY_CLUSTER_RECREATE: Final = "Recreate"
RAY_CLUSTER_UPGRADE_NONE: Final = "None"
# AuthMode
AUTH_MODE_DISABLED: Final = "disabled"
AUTH_MODE_TOKEN: Final = "token"
# GcsFaultToleranceBackend
GCS_FT_BACKEND_REDIS: Final = "redis"
GCS_FT_BACKEND_ROCKS_DB: Final = "rocksdb"
# GCSStorageDeletionPolicy
DELETE_WITH_CLUSTER_GCS_STORAGE_DELETION_POLICY: Final = "DeleteWithCluster"
RETAIN_GCS_STORAGE_DELETION_POLICY: Final = "Retain"
# NetworkPolicyMode
NETWORK_POLICY_DENY_ALL: Final = "DenyAll"
NETWORK_POLICY_DENY_ALL_INGRESS: Final = "DenyAllIngress"
NETWORK_POLICY_DENY_ALL_EGRESS: Final = "DenyAllEgress"
# AutoscalerVersion
AUTOSCALER_VERSION_V1: Final = "v1"
AUTOSCALER_VERSION_V2: Final = "v2"

# JobStatus (mirrors Ray)
JOB_STATUS_NEW: Final = ""
JOB_STATUS_PENDING: Final = "PENDING"
JOB_STATUS_RUNNING: Final = "RUNNING"
JOB_STATUS_STOPPED: Final = "STOPPED"
JOB_STATUS_SUCCEEDED: Final = "SUCCEEDED"
JOB_STATUS_FAILED: Final = "FAILED"
ALL_JOB_STATUSES: Final = (JOB_STATUS_NEW, JOB_STATUS_PENDING, JOB_STATUS_RUNNING, JOB_STATUS_STOPPED,
                           JOB_STATUS_SUCCEEDED, JOB_STATUS_FAILED)
# JobDeploymentStatus
JOB_DEPLOYMENT_STATUS_NEW: Final = ""
JOB_DEPLOYMENT_STATUS_INITIALIZING: Final = "Initializing"
JOB_DEPLOYMENT_STATUS_RUNNING: Final = "Running"
JOB_DEPLOYMENT_STATUS_COMPLETE: Final = "Complete"
JOB_DEPLOYMENT_STATUS_FAILED: Final = "Failed"
JOB_DEPLOYMENT_STATUS_VALIDATION_FAILED: Final = "ValidationFailed"
JOB_DEPLOYMENT_STATUS_SUSPENDING: Final = "Suspending"
JOB_DEPLOYMENT_STATUS_SUSPENDED: Final = "Suspended"
JOB_DEPLOYMENT_STATUS_RETRYING: Final = "Retrying"
JOB_DEPLOYMENT_STATUS_WAITING: Final = "Waiting"
# JobFailedReason
SUBMISSION_FAILED: Final = "SubmissionFailed"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
PRE_RUNNING_DEADLINE_EXCEEDED: Final = "PreRunningDeadlineExceeded"
APP_FAILED: Final = "AppFailed"
JOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_EXCEEDED: Final = (
    "JobDeploymentStatusTransitionGracePeriodExceeded")
JOB_STATUS_CHECK_TIMEOUT_EXCEEDED: Final = "JobStatusCheckTimeoutExceeded"
VALIDATION_FAILED: Final = "ValidationFailed"
# JobSubmissionMode
K8S_JOB_MODE: Final = "K8sJobMode"
HTTP_MODE: Final = "HTTPMode"
INTERACTIVE_MODE: Final = "InteractiveMode"
SIDECAR_MODE: Final = "SidecarMode"
# DeletionPolicyType
DELETE_CLUSTER: Final = "DeleteCluster"
DELETE_WORKERS: Final = "DeleteWorkers"
DELETE_SELF: Final = "DeleteSelf"
DELETE_NONE: Final = "DeleteNone"

# ServiceStatus (RayService)
RUNNING: Final = "Running"
NOT_RUNNING: Final = ""
# RayServiceUpgradeType
RAY_SERVICE_NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE: Final = "NewClusterWithIncrementalUpgrade"
RAY_SERVICE_NEW_CLUSTER: Final = "NewCluster"
RAY_SERVICE_UPGRADE_NONE: Final = "None"
# ApplicationStatusEnum and DeploymentStatusEnum (Serve)
APPLICATION_STATUS_NOT_STARTED: Final = "NOT_STARTED"
APPLICATION_STATUS_DEPLOYING: Final = "DEPLOYING"
APPLICATION_STATUS_RUNNING: Final = "RUNNING"
APPLICATION_STATUS_DEPLOY_FAILED: Final = "DEPLOY_FAILED"
APPLICATION_STATUS_DELETING: Final = "DELETING"
APPLICATION_STATUS_UNHEALTHY: Final = "UNHEALTHY"
DEPLOYMENT_STATUS_UPDATING: Final = "UPDATING"
DEPLOYMENT_STATUS_HEALTHY: Final = "HEALTHY"
DEPLOYMENT_STATUS_UNHEALTHY: Final = "UNHEALTHY"
# RayService condition types
RAY_SERVICE_READY: Final = "Ready"
UPGRADE_IN_PROGRESS: Final = "UpgradeInProgress"
ROLLBACK_IN_PROGRESS: Final = "RollbackInProgress"
RAY_SERVICE_SUSPENDING: Final = "Suspending"
RAY_SERVICE_SUSPENDED: Final = "Suspended"
# RayService condition reasons
RAY_SERVICE_INITIALIZING: Final = "Initializing"
RAY_SERVICE_INITIALIZING_TIMEOUT_REASON: Final = "InitializingTimeout"  # Go: RayServiceInitializingTimeout
ZERO_SERVE_ENDPOINTS: Final = "ZeroServeEndpoints"
NON_ZERO_SERVE_ENDPOINTS: Final = "NonZeroServeEndpoints"
BOTH_ACTIVE_PENDING_CLUSTERS_EXIST: Final = "BothActivePendingClustersExist"
NO_PENDING_CLUSTER: Final = "NoPendingCluster"
NO_ACTIVE_CLUSTER: Final = "NoActiveCluster"
RAY_SERVICE_VALIDATION_FAILED: Final = "ValidationFailed"
DESIRED_CLUSTER_SPEC_CHANGED: Final = "DesiredClusterSpecChanged"
SUSPEND_REQUESTED: Final = "SuspendRequested"
SUSPEND_IN_PROGRESS: Final = "SuspendInProgress"
SUSPEND_COMPLETE: Final = "SuspendComplete"
RAY_SERVICE_RESUMED: Final = "RayServiceResumed"


def is_job_terminal(status: str) -> bool:
    """Port of `IsJobTerminal` (rayjob_types.go): STOPPED, SUCCEEDED and FAILED end a Ray job."""
    return status in (JOB_STATUS_STOPPED, JOB_STATUS_SUCCEEDED, JOB_STATUS_FAILED)


def is_job_deployment_terminal(status: str) -> bool:
    """Port of `IsJobDeploymentTerminal` (rayjob_types.go): Complete and Failed end a RayJob."""
    return status in (JOB_DEPLOYMENT_STATUS_COMPLETE, JOB_DEPLOYMENT_STATUS_FAILED)
