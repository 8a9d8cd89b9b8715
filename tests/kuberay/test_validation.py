"""Validation refuses what KubeRay refuses, with KubeRay's whole message."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from emu.kuberay.utils import validation as v
from emu.kuberay.utils.features import FeatureGates

DNS1035 = ("[a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
           "alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]")


def cluster_spec() -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {},
                          "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}},
        "workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 5,
                              "rayStartParams": {},
                              "template": {"spec": {"containers": [{"name": "w", "image": "ray"}]}}}],
    }


def refused(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(v.ValidationError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def test_a_sample_shaped_cluster_spec_is_valid():
    v.validate_ray_cluster_spec(cluster_spec(), {})
    v.validate_ray_cluster_metadata({"name": "raycluster-kuberay"})


def test_cluster_name_longer_than_53_is_refused():
    assert refused(v.validate_ray_cluster_metadata, {"name": "a" * 54}) == \
        "RayCluster name should be no more than 53 characters"


def test_cluster_name_must_be_a_dns1035_label():
    assert refused(v.validate_ray_cluster_metadata, {"name": "1abc"}) == \
        f"RayCluster name should be a valid DNS1035 label: {DNS1035}"


def test_ray_job_and_ray_service_names_are_limited_to_47():
    assert refused(v.validate_ray_job_metadata, {"name": "a" * 48}) == \
        "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"
    assert refused(v.validate_ray_service_metadata, {"name": "a" * 48}) == \
        "The RayService metadata is invalid: RayService name should be no more than 47 characters"
    assert refused(v.validate_ray_job_metadata, {"name": "Job"}) == \
        f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: {DNS1035}"


def test_head_without_containers_is_refused():
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"] = []
    assert refused(v.validate_ray_cluster_spec, spec, {}) == \
        "headGroupSpec should have at least one container"


def test_worker_group_needs_min_and_max_without_autoscaling():
    spec = cluster_spec()
    del spec["workerGroupSpecs"][0]["maxReplicas"]
    assert refused(v.validate_ray_cluster_spec, spec, {}) == \
        "worker group small must set both minReplicas and maxReplicas when autoscaling is disabled"
    spec["enableInTreeAutoscaling"] = True
    v.validate_ray_cluster_spec(spec, {})


def test_min_replicas_greater_than_max_is_refused():
    spec = cluster_spec()
    spec["workerGroupSpecs"][0].update(minReplicas=6, maxReplicas=5)
    assert refused(v.validate_ray_cluster_spec, spec, {}) == \
        "worker group small has minReplicas 6 greater than maxReplicas 5"


def test_legacy_ft_annotation_with_options_is_refused():
    spec = cluster_spec()
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    assert refused(v.validate_ray_cluster_spec, spec, {"ray.io/ft-enabled": "true"}) == (
        "ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set. Please use only "
        "GcsFaultToleranceOptions to configure GCS fault tolerance")


def test_redis_address_env_without_ft_is_refused():
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "RAY_REDIS_ADDRESS",
                                                                          "value": "redis:6379"}]
    assert refused(v.validate_ray_cluster_spec, spec, {}) == (
        "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions "
        "is "
        "not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance")


def test_redis_password_param_with_ft_options_is_refused():
    spec = cluster_spec()
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    spec["headGroupSpec"]["rayStartParams"]["redis-password"] = "pw"
    assert refused(v.validate_ray_cluster_spec, spec, {}) == (
        "cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled - use "
        "GcsFaultToleranceOptions.RedisPassword instead")


def test_external_storage_namespace_annotation_with_ft_options_is_refused():
    spec = cluster_spec()
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    assert refused(v.validate_ray_cluster_spec, spec, {"ray.io/external-storage-namespace": "ns"}) == (
        "cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is enabled "
        "- "
        "use GcsFaultToleranceOptions.ExternalStorageNamespace instead")


def test_redis_username_outside_ft_options_is_refused():
    spec = cluster_spec()
    spec["headGroupSpec"]["rayStartParams"]["redis-username"] = "u"
    assert refused(v.validate_ray_cluster_spec, spec, {}) == (
        "cannot set redis username in rayStartParams or environment variables - use "
        "GcsFaultToleranceOptions.RedisUsername instead")


def test_rocksdb_backend_needs_its_feature_gate_and_no_redis_fields():
    spec = cluster_spec()
    spec["gcsFaultToleranceOptions"] = {"backend": "rocksdb"}
    assert refused(v.validate_ray_cluster_spec, spec, {}) == (
        "the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') "
        "requires "
        "the GCSFaultToleranceEmbeddedStorage feature gate to be enabled")
    gates = FeatureGates({"GCSFaultToleranceEmbeddedStorage": True})
    v.validate_ray_cluster_spec(spec, {}, gates)
    spec["gcsFaultToleranceOptions"]["redisAddress"] = "redis:6379"
    assert refused(v.validate_ray_cluster_spec, spec, {}, gates) == \
        "cannot set GcsFaultToleranceOptions.RedisAddress when backend is 'rocksdb'"


def test_rocksdb_storage_mount_set_by_the_user_is_refused():
    spec = cluster_spec()
    spec["gcsFaultToleranceOptions"] = {"backend": "rocksdb"}
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data/gcs"}]
    gates = FeatureGates({"GCSFaultToleranceEmbeddedStorage": True})
    assert refused(v.validate_ray_cluster_spec, spec, {}, gates) \
        == ('cannot set a volume mount named "gcs-storage" or mounted at /data/gcs in the head container '
            "when the "
            "embedded GCS FT backend is used - it is managed by KubeRay")


def test_redis_backend_with_storage_is_refused():
    spec = cluster_spec()
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "r:6379", "storage": {"size": "1Gi"}}
    assert refused(v.validate_ray_cluster_spec, spec, {}) == (
        "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to the "
        "'rocksdb' "
        "backend")


def test_group_labels_are_checked_with_kubernetes_label_syntax():
    spec = cluster_spec()
    spec["workerGroupSpecs"][0]["labels"] = {"bad key": "ok"}
    assert refused(v.validate_ray_cluster_spec, spec, {}) == (
        "invalid label key for small group: 'bad key', error: name part must consist of alphanumeric "
        "characters, "
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or "
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def test_suspended_group_with_autoscaling_is_refused():
    spec = cluster_spec()
    spec["enableInTreeAutoscaling"] = True
    spec["workerGroupSpecs"][0]["suspend"] = True
    assert refused(v.validate_ray_cluster_spec, spec, {}) == \
        "worker group small cannot be suspended with Autoscaler enabled"


def test_both_suspend_conditions_true_is_an_invalid_status():
    rc = {"status": {"conditions": [{"type": "RayClusterSuspending", "status": "True"},
                                    {"type": "RayClusterSuspended", "status": "True"}]}}
    assert refused(v.validate_ray_cluster_status, rc) == (
        "invalid RayCluster State: rayv1.RayClusterSuspending and rayv1.RayClusterSuspended conditions "
        "should not "
        "be both true")


def test_upgrade_strategy_is_refused_on_clusters_made_by_ray_job():
    rc = {"metadata": {"labels": {"ray.io/originated-from-crd": "RayJob"}},
          "spec": {"upgradeStrategy": {"type": "Recreate"}}}
    assert refused(v.validate_ray_cluster_upgrade_options, rc) == \
        "upgradeStrategy cannot be set when RayCluster is created by RayJob"


# -- RayJob ------------------------------------------------------------------------------------


def ray_job(**spec: Any) -> dict[str, Any]:
    base = {"entrypoint": "python x.py", "rayClusterSpec": cluster_spec()}
    base.update(spec)
    return {"metadata": {"name": "demo-job"}, "spec": base}


def test_a_plain_ray_job_is_valid():
    v.validate_ray_job_spec(ray_job())


@pytest.mark.parametrize(("spec", "message"), [
    ({"suspend": True}, "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is "
                        "not "
                        "allowed to be suspended"),
    ({"ttlSecondsAfterFinished": 10}, "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes "
                                      "set to "
                                      "false cannot have TTLSecondsAfterFinished"),
    ({"rayClusterSpec": None}, "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be "
                               "set"),
    ({"clusterSelector": {"ray.io/cluster": "rc"}, "backoffLimit": 1},
     "The RayJob spec is invalid: BackoffLimit is incompatible with ClusterSelector mode"),
    ({"submissionMode": "InteractiveMode", "backoffLimit": 2},
     "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"),
    ({"submissionMode": "SidecarMode", "submitterConfig": {"backoffLimit": 1}},
     "Currently, SidecarMode doesn't support SubmitterConfig"),
    ({"activeDeadlineSeconds": 0}, "The RayJob spec is invalid: activeDeadlineSeconds must be a positive "
                                   "integer"),
    ({"backoffLimit": -1}, "The RayJob spec is invalid: backoffLimit must be a positive integer"),
])
def test_ray_job_spec_errors_match_kuberay(spec, message):
    assert refused(v.validate_ray_job_spec, ray_job(**spec)) == message


def test_ray_job_wraps_cluster_spec_errors():
    rj = ray_job()
    rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplicas"] = -1
    assert refused(v.validate_ray_job_spec, rj) == \
        "The RayJob spec is invalid: worker group small has negative minReplicas -1"


def test_waiting_is_only_valid_in_interactive_mode():
    rj = ray_job()
    rj["status"] = {"jobDeploymentStatus": "Waiting"}
    assert refused(v.validate_ray_job_status, rj) == (
        "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not "
        "InteractiveMode")


def test_deletion_rules_report_every_problem_joined_by_newlines():
    rj = ray_job(deletionStrategy={"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}},
        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 10}},
        {"policy": "DeleteSelf", "condition": {}},
    ]})
    assert refused(v.validate_ray_job_spec, rj) == (
        "deletionRules[2]: exactly one of JobStatus and JobDeploymentStatus must be set\n"
        "for JobStatus 'SUCCEEDED': DeleteSelf TTL (10) must be >= DeleteCluster TTL (30)")


def test_legacy_deletion_policy_needs_both_sides():
    rj = ray_job(deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}})
    assert refused(v.validate_ray_job_spec, rj) == (
        "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy "
        "deletion "
        "policy fields of DeletionStrategy")


# -- RayService --------------------------------------------------------------------------------


def ray_service(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"rayClusterConfig": cluster_spec()}
    base.update(spec)
    return {"metadata": {"name": "rs"}, "spec": base}


def test_ray_service_upgrade_type_must_be_known():
    assert refused(v.validate_ray_service_spec, ray_service(upgradeStrategy={"type": "Blue"})) == (
        "The RayService spec is invalid: Spec.UpgradeStrategy.Type value Blue is invalid, valid options are "
        "NewClusterWithIncrementalUpgrade, NewCluster, or None")


def test_ray_service_may_not_name_the_head_service():
    rs = ray_service()
    rs["spec"]["rayClusterConfig"]["headGroupSpec"]["headService"] = {"metadata": {"name": "x"}}
    assert refused(v.validate_ray_service_spec, rs) == (
        "The RayService spec is invalid: spec.rayClusterConfig.headGroupSpec.headService.metadata.name "
        "should not "
        "be set")


def test_negative_cluster_deletion_delay_is_refused():
    assert refused(v.validate_ray_service_spec, ray_service(rayClusterDeletionDelaySeconds=-1)) == (
        "The RayService spec is invalid: Spec.RayClusterDeletionDelaySeconds should be a non-negative "
        "integer, "
        "got -1")


def test_incremental_upgrade_requires_the_autoscaler():
    assert refused(v.validate_ray_service_spec,
                   ray_service(upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"})) == \
        "The RayService spec is invalid: Ray Autoscaler is required for NewClusterWithIncrementalUpgrade"


@pytest.mark.parametrize(("value", "ok"), [("30m", True), ("1h30m", True), ("90", True), ("0s", False),
                                           ("-5", False), ("soon", False)])
def test_initializing_timeout_annotation_accepts_go_durations_and_positive_seconds(value, ok):
    meta = {"name": "rs", "annotations": {"ray.io/initializing-timeout": value}}
    if ok:
        v.validate_ray_service_metadata(copy.deepcopy(meta))
        return
    message = refused(v.validate_ray_service_metadata, meta)
    assert message.startswith("The RayService metadata is invalid: RayService annotations is invalid: ")
    expected = {
        "0s": "annotation ray.io/initializing-timeout must be a positive duration, got: 0s",
        "-5": "annotation ray.io/initializing-timeout must be a positive integer (seconds), got: -5",
        "soon": "annotation ray.io/initializing-timeout has invalid format: soon. Expected Go duration "
                "format "
                "(e.g., '5m', '1h') or positive integer seconds",
    }[value]
    assert message == "The RayService metadata is invalid: RayService annotations is invalid: " + expected
