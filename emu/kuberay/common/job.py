"""Kubernetes Jobs and Services that KubeRay builds around Ray jobs and GCS cleanup.

Port of ``ray-operator/controllers/ray/common/job.go`` plus the pure builders of the RayJob and
RayCluster reconcilers that make batch Jobs: the submitter Job (``createNewK8sJob``,
``getSubmitterTemplate``, ``configureSubmitterContainer``, ``getSubmitterContainer``,
``constructRayClusterForRayJob`` in rayjob_controller.go) and the Redis cleanup Job
(``buildRedisCleanupJob`` in raycluster_controller.go).

The submitter's shell command is what makes a retried submitter Pod safe: it asks
``ray job status <id>`` first and only submits (``--no-wait``, fixed ``--submission-id``) when that
fails, then follows the logs, so the same submission id is never submitted twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import yaml

from ..utils import constant as C
from ..utils import util
from ..utils.features import DEFAULTS, SIDECAR_SUBMITTER_RESTART, FeatureGates
from ..utils.util import EMPTY_ENV, Obj, dig
from . import pod as pod_builders
from .service import build_owner_head_service

#: The submitter Job's default ``backoffLimit`` (``createNewK8sJob``): three attempts at most.
DEFAULT_SUBMITTER_BACKOFF_LIMIT = 2
#: The Redis cleanup Job's ``activeDeadlineSeconds`` and ``backoffLimit`` (``buildRedisCleanupJob``).
REDIS_CLEANUP_JOB_ACTIVE_DEADLINE_SECONDS = 300
REDIS_CLEANUP_JOB_BACKOFF_LIMIT = 0


def build_head_service_for_ray_job(ray_job: Mapping[str, Any], ray_cluster: Mapping[str, Any],
                                   env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `BuildHeadServiceForRayJob` (job.go): ``<rayjob>-head-svc`` on the cluster's head Pod."""
    return build_owner_head_service(ray_cluster, ray_job, C.RAY_JOB_CRD, env)


def get_runtime_env_json(ray_job: Mapping[str, Any]) -> str:
    """Port of `getRuntimeEnvJson` (job.go): ``runtimeEnvYAML`` as compact JSON (keys sorted), or ""."""
    text = dig(ray_job, "spec", "runtimeEnvYAML") or ""
    if not text:
        return ""
    return json.dumps(yaml.safe_load(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _parse_semver(text: str) -> tuple[int, int, int] | None:
    # Masterminds semver.NewVersion, leniently: "v" prefix, missing minor/patch, pre-release ignored.
    match = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+][0-9A-Za-z.+-]*)?$", text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0)


def get_metadata_json_for_submit_command(ray_job: Mapping[str, Any], metadata: Mapping[str, str]) -> str:
    """Port of `getMetadataJSONForSubmitCommand` (job.go): ``--metadata-json`` needs Ray ≥ 2.6.0.

    Only an explicit ``rayClusterSpec.rayVersion`` below 2.6.0 (or unparsable) is refused.
    """
    ray_version = dig(ray_job, "spec", "rayClusterSpec", "rayVersion") or ""
    if dig(ray_job, "spec", "rayClusterSpec") is not None and ray_version:
        parsed = _parse_semver(ray_version)
        if parsed is None:
            raise ValueError(f"failed to parse Ray version: {ray_version}: Invalid Semantic Version")
        if parsed < (2, 6, 0):
            raise ValueError("the Ray version must be at least 2.6.0 to use the metadata field")
    return json.dumps(dict(sorted(metadata.items())), separators=(",", ":"), ensure_ascii=False)


def _go_quote(text: str) -> str:
    # strconv.Quote for the strings that occur here (JSON and ASCII prose).
    return json.dumps(text, ensure_ascii=False)


def build_job_submit_command(ray_job: Mapping[str, Any], submission_mode: str,
                             gates: FeatureGates = DEFAULTS) -> list[str]:
    """Port of `BuildJobSubmitCommand` (job.go): the submitter's shell words.

    K8sJobMode (address ``http://<status.dashboardURL>``)::

        until <python health check of <address>/api/gcs_healthz> >/dev/null 2>&1 ;
          do echo "Waiting for Ray Dashboard GCS to become healthy at <address> ..." ; sleep 2 ; done ;
        if ! ray job status --address <address> <id> >/dev/null 2>&1 ;
          then ray job submit --address <address> --no-wait [--runtime-env-json ...]
               [--metadata-json ...] --submission-id <id> [--entrypoint-num-cpus ...] -- <entrypoint> ;
        fi ; ray job logs --address <address> --follow <id>

    SidecarMode probes ``localhost`` and submits blocking, without the status check unless the
    SidecarSubmitterRestart gate is on. Other modes raise ``ValueError``.
    """
    spec = ray_job.get("spec") or {}
    port = C.DEFAULT_DASHBOARD_PORT
    if submission_mode == C.SIDECAR_MODE:
        head = util.head_container(spec.get("rayClusterSpec") or {})
        port = util.find_container_port(head, C.DASHBOARD_PORT_NAME, C.DEFAULT_DASHBOARD_PORT)
        address = f"http://127.0.0.1:{port}"
    elif submission_mode == C.K8S_JOB_MODE:
        address = dig(ray_job, "status", "dashboardURL") or ""
        if not address.startswith("http://"):
            address = "http://" + address
    else:
        raise ValueError(f"unsupported submission mode for job submit command: {submission_mode}")

    job_id = dig(ray_job, "status", "jobId") or ""
    entrypoint = (spec.get("entrypoint") or "").strip()
    if submission_mode == C.SIDECAR_MODE:
        health_url = f"http://localhost:{port}/{C.RAY_DASHBOARD_GCS_HEALTH_PATH}"
    else:
        health_url = f"{address}/{C.RAY_DASHBOARD_GCS_HEALTH_PATH}"
    health_cmd = C.BASE_PYTHON_HEALTH_COMMAND.format(health_url,
                                                     C.RAY_DASHBOARD_GCS_HEALTH_CHECK_TIMEOUT_SECONDS)
    cmd = ["until", health_cmd, ">/dev/null", "2>&1", ";",
           "do", "echo", _go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."), ";",
           "sleep", "2", ";", "done", ";"]
    needs_status_check = submission_mode == C.K8S_JOB_MODE or (
        submission_mode == C.SIDECAR_MODE and gates.enabled(SIDECAR_SUBMITTER_RESTART))
    if needs_status_check:
        cmd += ["if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null", "2>&1", ";",
                "then"]
    cmd += ["ray", "job", "submit", "--address", address]
    if needs_status_check:
        cmd.append("--no-wait")
    runtime_env_json = get_runtime_env_json(ray_job)
    if runtime_env_json:
        cmd += ["--runtime-env-json", _go_quote(runtime_env_json)]
    metadata = spec.get("metadata") or {}
    if metadata:
        cmd += ["--metadata-json", _go_quote(get_metadata_json_for_submit_command(ray_job, metadata))]
    if job_id:
        cmd += ["--submission-id", job_id]
    num_cpus = float(spec.get("entrypointNumCpus") or 0)
    if num_cpus > 0:
        cmd += ["--entrypoint-num-cpus", f"{num_cpus:f}"]
    num_gpus = float(spec.get("entrypointNumGpus") or 0)
    if num_gpus > 0:
        cmd += ["--entrypoint-num-gpus", f"{num_gpus:f}"]
    if spec.get("entrypointResources"):
        cmd += ["--entrypoint-resources", _go_quote(spec["entrypointResources"])]
    cmd += ["--", entrypoint, ";"]
    if needs_status_check:
        cmd += ["fi", ";", "ray", "job", "logs", "--address", address, "--follow", job_id]
    return cmd


def get_default_submitter_container(ray_cluster_spec: Mapping[str, Any]) -> Obj:
    """Port of `GetDefaultSubmitterContainer` (job.go): ``ray-job-submitter`` with the head image.

    Requests 500m/200Mi, limits 1/1Gi.
    """
    return {
        "name": C.SUBMITTER_CONTAINER_NAME,
        "image": util.head_container(ray_cluster_spec).get("image", ""),
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                      "requests": {"cpu": "500m", "memory": "200Mi"}},
    }


def get_submitter_template(ray_job_spec: Mapping[str, Any], ray_cluster_spec: Mapping[str, Any]) -> Obj:
    """Port of `GetSubmitterTemplate` (job.go): the user's ``submitterPodTemplate`` or the default.

    The default has one `get_default_submitter_container` and ``restartPolicy: Never``.
    """
    if ray_job_spec.get("submitterPodTemplate") is not None:
        return util.deep_copy(ray_job_spec["submitterPodTemplate"])
    return {"spec": {"containers": [get_default_submitter_container(ray_cluster_spec)],
                     "restartPolicy": "Never"}}


def configure_submitter_container(container: Obj, ray_job: Mapping[str, Any],
                                  ray_cluster: Mapping[str, Any] | None, submission_mode: str,
                                  gates: FeatureGates = DEFAULTS, env: Mapping[str, str] = EMPTY_ENV) -> None:
    """Port of `configureSubmitterContainer` (rayjob_controller.go).

    Sets ``/bin/bash -ce -- "<build_job_submit_command joined by spaces>"`` unless a K8sJobMode user
    container has its own command, then appends ``PYTHONUNBUFFERED=1``, ``RAY_DASHBOARD_ADDRESS``
    (= ``status.dashboardURL``) and ``RAY_JOB_SUBMISSION_ID`` (= ``status.jobId``), and token auth.
    """
    job_cmd = build_job_submit_command(ray_job, submission_mode, gates)
    if not container.get("command") or submission_mode == C.SIDECAR_MODE:
        container["command"] = util.get_container_command(["e"], env)
        container["args"] = [" ".join(job_cmd)]
    env_list = container.setdefault("env", [])
    env_list.append({"name": C.PYTHON_UNBUFFERED_ENV_VAR_NAME, "value": "1"})
    env_list.append({"name": C.RAY_DASHBOARD_ADDRESS, "value": dig(ray_job, "status", "dashboardURL") or ""})
    env_list.append({"name": C.RAY_JOB_SUBMISSION_ID, "value": dig(ray_job, "status", "jobId") or ""})
    if ray_cluster is not None and util.is_auth_enabled(ray_cluster.get("spec") or {}):
        pod_builders.set_container_token_auth_env_vars(dig(ray_cluster, "metadata", "name") or "", container,
                                                       dig(ray_cluster, "spec", "authOptions"))


def get_ray_job_submitter_template(ray_job: Mapping[str, Any], ray_cluster: Mapping[str, Any],
                                   gates: FeatureGates = DEFAULTS, env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `getSubmitterTemplate` (rayjob_controller.go; renamed to not clash with job.go's).

    `get_submitter_template` with its first container configured for K8sJobMode, the token volume
    for K8s token auth, and labels ``ray.io/originated-from-cr-name``,
    ``ray.io/originated-from-crd=RayJob``, ``app.kubernetes.io/created-by=kuberay-operator``.
    """
    template = get_submitter_template(ray_job.get("spec") or {}, ray_cluster.get("spec") or {})
    container = template["spec"]["containers"][C.RAY_CONTAINER_INDEX]
    configure_submitter_container(container, ray_job, ray_cluster, C.K8S_JOB_MODE, gates, env)
    if util.is_k8s_auth_enabled(dig(ray_cluster, "spec", "authOptions")):
        pod_builders.add_ray_token_volume(template["spec"])
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels[C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY] = dig(ray_job, "metadata", "name") or ""
    labels[C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY] = C.RAY_JOB_CRD
    labels[C.KUBERNETES_CREATED_BY_LABEL_KEY] = C.COMPONENT_NAME
    return template


def build_submitter_job(ray_job: Mapping[str, Any], submitter_template: Mapping[str, Any]) -> Obj:
    """Port of the Job that `RayJobReconciler.createNewK8sJob` (rayjob_controller.go) creates.

    Named exactly like the RayJob (that fixed name is how a new leader finds a Job its predecessor
    created), labels ``ray.io/originated-from-cr-name``, ``ray.io/originated-from-crd=RayJob``,
    ``app.kubernetes.io/created-by``; ``backoffLimit`` = ``submitterConfig.backoffLimit`` or 2; the
    RayJob as controller owner.
    """
    name = dig(ray_job, "metadata", "name") or ""
    backoff_limit = dig(ray_job, "spec", "submitterConfig", "backoffLimit")
    job: Obj = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": dig(ray_job, "metadata", "namespace"),
            "labels": {C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: name,
                       C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: C.RAY_JOB_CRD,
                       C.KUBERNETES_CREATED_BY_LABEL_KEY: C.COMPONENT_NAME},
        },
        "spec": {
            "backoffLimit": DEFAULT_SUBMITTER_BACKOFF_LIMIT if backoff_limit is None else int(backoff_limit),
            "template": util.deep_copy(dict(submitter_template)),
        },
    }
    util.set_controller_reference(ray_job, job)
    return job


def get_submitter_container(ray_job: Mapping[str, Any], ray_cluster: Mapping[str, Any],
                            gates: FeatureGates = DEFAULTS, env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `getSubmitterContainer` (rayjob_controller.go): the SidecarMode submitter container.

    With SidecarSubmitterRestart it restarts on failure by itself (``restartPolicy: OnFailure``).
    """
    container = get_default_submitter_container(ray_cluster.get("spec") or {})
    configure_submitter_container(container, ray_job, ray_cluster, C.SIDECAR_MODE, gates, env)
    if gates.enabled(SIDECAR_SUBMITTER_RESTART):
        container["restartPolicy"] = "OnFailure"
    return container


def construct_ray_cluster_for_ray_job(ray_job: Mapping[str, Any], ray_cluster_name: str,
                                      gates: FeatureGates = DEFAULTS,
                                      env: Mapping[str, str] = EMPTY_ENV) -> Obj:
    """Port of `RayJobReconciler.constructRayClusterForRayJob` (rayjob_controller.go).

    Labels = the RayJob's plus origin labels and ``ray.io/job-submission-mode``; annotations = the
    RayJob's (SidecarMode adds ``ray.io/disable-provisioned-head-restart: "true"``); spec = a copy
    of ``rayClusterSpec``; owner = the RayJob. SidecarMode appends the submitter container to the
    head and forces the head's ``restartPolicy: Never``.
    """
    meta = ray_job.get("metadata") or {}
    mode = dig(ray_job, "spec", "submissionMode") or ""
    labels = dict(meta.get("labels") or {})
    labels[C.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY] = meta.get("name", "")
    labels[C.RAY_ORIGINATED_FROM_CRD_LABEL_KEY] = C.RAY_JOB_CRD
    labels[C.RAY_JOB_SUBMISSION_MODE_LABEL_KEY] = mode
    annotations = dict(meta.get("annotations") or {})
    if mode == C.SIDECAR_MODE:
        annotations[C.DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION_KEY] = "true"
    cluster: Obj = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"labels": labels, "annotations": annotations, "name": ray_cluster_name,
                     "namespace": meta.get("namespace")},
        "spec": util.deep_copy(dig(ray_job, "spec", "rayClusterSpec") or {}),
    }
    util.set_controller_reference(ray_job, cluster)
    if mode == C.SIDECAR_MODE:
        sidecar = get_submitter_container(ray_job, cluster, gates, env)
        head_pod_spec = cluster["spec"]["headGroupSpec"]["template"]["spec"]
        head_pod_spec["containers"].append(sidecar)
        head_pod_spec["restartPolicy"] = "Never"
    return cluster


# ---------------------------------------------------------------------------------------------
# Redis cleanup Job (RayClusterReconciler.buildRedisCleanupJob)
# ---------------------------------------------------------------------------------------------

_CLEANUP_PREAMBLE = (
    'echo "To get more information about manually deleting the storage namespace in Redis and removing the '
    "RayCluster's finalizer, please check "
    'https://docs.ray.io/en/master/cluster/kubernetes/user-guides/kuberay-gcs-ft.html for more details." && '
    'python -c "from ray._private.gcs_utils import cleanup_redis_storage; '
    "from urllib.parse import urlparse; "
    "import os; "
    "import sys; "
    "redis_address = os.getenv('RAY_REDIS_ADDRESS', '').split(',')[0]; "
    "redis_address = redis_address if '://' in redis_address else 'redis://' + redis_address; "
    "parsed = urlparse(redis_address); "
)
_CLEANUP_CALL_WITH_USERNAME = (
    "sys.exit(1) if not cleanup_redis_storage(host=parsed.hostname, port=parsed.port, "
    "username=os.getenv('REDIS_USERNAME', parsed.username), "
    "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), use_ssl=parsed.scheme=='rediss', "
    "storage_namespace=os.getenv('RAY_external_storage_namespace')) else None\""
)
_CLEANUP_CALL = (
    "sys.exit(1) if not cleanup_redis_storage(host=parsed.hostname, port=parsed.port, "
    "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), use_ssl=parsed.scheme=='rediss', "
    "storage_namespace=os.getenv('RAY_external_storage_namespace')) else None\""
)


def build_redis_cleanup_job(instance: Mapping[str, Any],
                            options: pod_builders.PodBuildOptions = pod_builders.DEFAULT_OPTIONS) -> Obj:
    """Port of `RayClusterReconciler.buildRedisCleanupJob` (raycluster_controller.go).

    Built from the head Pod, so it inherits the head's Redis env (``RAY_REDIS_ADDRESS``,
    ``REDIS_PASSWORD``/``REDIS_USERNAME``, ``RAY_external_storage_namespace``): node-type label
    ``redis-cleanup``, only the Ray container, no probes, a ``python -c`` calling Ray's
    ``cleanup_redis_storage`` on the first address (``redis://`` added when schemeless) that exits 1
    on failure, ``RAY_redis_db_connect_retries=120`` and ``_wait_milliseconds=500``, 200m/256Mi,
    ``restartPolicy: Never``. Job ``<cluster>-redis-cleanup`` (trimmed to 63), ``backoffLimit: 0``,
    ``activeDeadlineSeconds: 300``, the RayCluster as controller owner.
    """
    pod = pod_builders.build_head_pod(instance, options)
    pod["metadata"]["labels"][C.RAY_NODE_TYPE_LABEL_KEY] = C.REDIS_CLEANUP_NODE
    container = pod["spec"]["containers"][C.RAY_CONTAINER_INDEX]
    pod["spec"]["containers"] = [container]
    inits = [c for c in pod["spec"].get("initContainers") or []
             if c.get("name") != C.WAIT_FOR_TLS_IP_SAN_CONTAINER_NAME]
    if "initContainers" in pod["spec"]:
        pod["spec"]["initContainers"] = inits
    container["command"] = util.get_container_command([], options.env)
    uses_username = util.env_var_exists(C.REDIS_USERNAME, container.get("env"))
    call = _CLEANUP_CALL_WITH_USERNAME if uses_username else _CLEANUP_CALL
    container["args"] = [_CLEANUP_PREAMBLE + call]
    container.pop("livenessProbe", None)
    container.pop("readinessProbe", None)
    container.setdefault("env", []).extend([
        {"name": "RAY_redis_db_connect_retries", "value": "120"},
        {"name": "RAY_redis_db_connect_wait_milliseconds", "value": "500"},
    ])
    container["resources"] = {"limits": {"cpu": "200m", "memory": "256Mi"},
                              "requests": {"cpu": "200m", "memory": "256Mi"}}
    pod["spec"]["restartPolicy"] = "Never"
    name = dig(instance, "metadata", "name") or ""
    pod_meta = dict(pod["metadata"])
    pod_meta.pop("ownerReferences", None)
    job: Obj = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": util.trim_job_name(f"{name}-redis-cleanup"),
                     "namespace": dig(instance, "metadata", "namespace"),
                     "labels": util.deep_copy(pod["metadata"].get("labels") or {}),
                     "annotations": util.deep_copy(pod["metadata"].get("annotations") or {})},
        "spec": {
            "backoffLimit": REDIS_CLEANUP_JOB_BACKOFF_LIMIT,
            "template": {"metadata": pod_meta, "spec": pod["spec"]},
            "activeDeadlineSeconds": REDIS_CLEANUP_JOB_ACTIVE_DEADLINE_SECONDS,
        },
    }
    util.set_controller_reference(instance, job)
    return job
