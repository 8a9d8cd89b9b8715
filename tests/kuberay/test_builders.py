"""Head/worker Pods, Services and Jobs come out named, labelled and configured as KubeRay's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from emu.kuberay.common import association, gcs_ft, job, pod, service
from emu.kuberay.utils import constant as C
from emu.kuberay.utils.features import FeatureGates

NS = "default"


def cluster(name: str = "rc", **spec_extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{
                "name": "ray-head", "image": "rayproject/ray:2.46.0",
                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                "ports": [{"containerPort": 6379, "name": "gcs-server"},
                          {"containerPort": 8265, "name": "dashboard"},
                          {"containerPort": 10001, "name": "client"},
                          {"containerPort": 8000, "name": "serve"}],
            }]}},
        },
        "workerGroupSpecs": [{
            "groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 5, "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}},
        }],
    }
    spec.update(spec_extra)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": NS, "uid": "uid-1234"}, "spec": spec}


def redis_ft_cluster() -> dict[str, Any]:
    return cluster(gcsFaultToleranceOptions={
        "redisAddress": "redis:6379",
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "redis-password-secret",
                                                         "key": "password"}}},
    })


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def head(rc: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return pod.build_head_pod(rc, pod.PodBuildOptions(**kw))


def worker(rc: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return pod.build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], options=pod.PodBuildOptions(**kw))


# -- names and labels ------------------------------------------------------------------------------


def test_head_pod_uses_generate_name_cluster_head_and_the_seven_default_labels():
    p = head(cluster())
    assert p["metadata"]["generateName"] == "rc-head-"
    assert "name" not in p["metadata"]
    assert p["metadata"]["labels"] == {
        "ray.io/is-ray-node": "yes", "ray.io/cluster": "rc", "ray.io/node-type": "head",
        "ray.io/group": "headgroup", "ray.io/identifier": "rc-head",
        "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator",
    }


def test_deterministic_head_pod_name_is_cluster_head_without_generate_name():
    p = head(cluster(), env={"ENABLE_DETERMINISTIC_HEAD_POD_NAME": "true"})
    assert p["metadata"]["name"] == "rc-head"
    assert "generateName" not in p["metadata"]


def test_worker_pod_generate_name_is_cluster_group_worker_and_labels_name_the_group():
    p = worker(cluster())
    assert p["metadata"]["generateName"] == "rc-small-worker-"
    labels = p["metadata"]["labels"]
    assert (labels["ray.io/node-type"], labels["ray.io/group"], labels["ray.io/identifier"]) == \
        ("worker", "small", "rc-worker")
    assert labels["ray.io/worker-group-replica-index"] == "0"


def test_user_template_labels_cannot_override_cluster_node_type_or_group():
    rc = cluster()
    rc["spec"]["headGroupSpec"]["template"]["metadata"] = {"labels": {
        "ray.io/cluster": "evil", "ray.io/node-type": "worker", "ray.io/group": "x", "team": "a"}}
    labels = head(rc)["metadata"]["labels"]
    assert (labels["ray.io/cluster"], labels["ray.io/node-type"], labels["ray.io/group"], labels["team"]) == \
        ("rc", "head", "headgroup", "a")


def test_pods_are_controlled_by_their_ray_cluster():
    refs = worker(cluster())["metadata"]["ownerReferences"]
    assert refs == [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "uid-1234",
                     "controller": True, "blockOwnerDeletion": True}]


def test_ray_service_clusters_label_workers_serve_true_and_head_serve_false():
    rc = cluster()
    rc["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayService"}
    assert head(rc)["metadata"]["labels"]["ray.io/serve"] == "false"
    assert worker(rc)["metadata"]["labels"]["ray.io/serve"] == "true"


def test_building_a_pod_leaves_the_ray_cluster_untouched():
    rc = redis_ft_cluster()
    before = copy.deepcopy(rc)
    head(rc)
    worker(rc)
    assert rc == before


# -- ray start -----------------------------------------------------------------------------------


def test_head_command_is_ulimit_then_ray_start_head_with_sorted_flags_and_block():
    c = head(cluster())["spec"]["containers"][0]
    assert c["command"] == ["/bin/bash", "-c", "--"]
    assert c["args"] == [
        "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start --head  --block  "
        "--dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0  --memory=2147483648  "
        "--metrics-export-port=8080  --num-cpus=1 "]


def test_worker_command_starts_ray_at_the_head_service_fqdn_on_port_6379():
    c = worker(cluster())["spec"]["containers"][0]
    assert c["args"] == [
        "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start  "
        "--address=rc-head-svc.default.svc.cluster.local:6379  --block  --dashboard-agent-listen-port=52365  "
        "--metrics-export-port=8080 "]


def test_user_command_runs_before_the_generated_ray_start():
    rc = cluster()
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["command"] = ["echo", "hi"]
    args = head(rc)["spec"]["containers"][0]["args"][0]
    assert args.startswith(" echo  hi  && ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start --head ")


def test_boolean_start_params_are_switches_except_the_explicit_boolean_flags():
    assert pod.convert_param_map({"block": "true", "no-monitor": "false", "include-dashboard": "false",
                                  "num-cpus": "2"}) == " --block  --include-dashboard=false  --num-cpus=2 "


def test_worker_command_respects_a_custom_head_port():
    rc = cluster()
    rc["spec"]["headGroupSpec"]["rayStartParams"]["port"] = "6380"
    w = worker(rc)
    assert "--address=rc-head-svc.default.svc.cluster.local:6380 " in w["spec"]["containers"][0]["args"][0]
    assert env_of(w["spec"]["containers"][0])["RAY_PORT"] == "6380"


# -- env -----------------------------------------------------------------------------------------


def test_head_env_without_ft_has_cluster_name_port_address_and_no_redis_settings():
    p = head(cluster())
    env = env_of(p["spec"]["containers"][0])
    assert env["RAY_CLUSTER_NAME"] == {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}
    assert (env["RAY_PORT"], env["RAY_ADDRESS"]) == ("6379", "127.0.0.1:6379")
    assert not {"RAY_REDIS_ADDRESS", "REDIS_PASSWORD", "RAY_external_storage_namespace"} & set(env)
    assert p["metadata"]["annotations"]["ray.io/ft-enabled"] == "false"


def test_head_env_with_redis_ft_has_address_secret_password_and_uid_namespace():
    p = head(redis_ft_cluster())
    env = env_of(p["spec"]["containers"][0])
    assert env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert env["REDIS_PASSWORD"] == {"secretKeyRef": {"name": "redis-password-secret", "key": "password"}}
    assert env["RAY_external_storage_namespace"] == "uid-1234"
    assert p["metadata"]["annotations"] == {"ray.io/ft-enabled": "true",
                                            "ray.io/external-storage-namespace": "uid-1234"}
    assert "--redis-password=$REDIS_PASSWORD " in p["spec"]["containers"][0]["args"][0]


def test_external_storage_namespace_option_beats_annotation_beats_uid():
    rc = redis_ft_cluster()
    rc["metadata"]["annotations"] = {"ray.io/external-storage-namespace": "from-annotation"}
    assert gcs_ft.get_external_storage_namespace(rc) == "from-annotation"
    rc["spec"]["gcsFaultToleranceOptions"]["externalStorageNamespace"] = "from-options"
    assert gcs_ft.get_external_storage_namespace(rc) == "from-options"


def test_worker_reconnect_timeout_600_is_injected_only_with_gcs_ft():
    assert env_of(worker(redis_ft_cluster())["spec"]["containers"][0])[
        "RAY_gcs_rpc_server_reconnect_timeout_s"] == "600"
    assert "RAY_gcs_rpc_server_reconnect_timeout_s" not in env_of(worker(cluster())["spec"]["containers"][0])
    head_env = env_of(head(redis_ft_cluster())["spec"]["containers"][0])
    assert "RAY_gcs_rpc_server_reconnect_timeout_s" not in head_env


def test_legacy_ft_annotation_enables_ft_and_copies_redis_password_param_to_env():
    rc = cluster()
    rc["metadata"]["annotations"] = {"ray.io/ft-enabled": "TRUE"}
    rc["spec"]["headGroupSpec"]["rayStartParams"]["redis-password"] = "5241590000000000"
    env = env_of(head(rc)["spec"]["containers"][0])
    assert env["REDIS_PASSWORD"] == "5241590000000000"
    assert "RAY_REDIS_ADDRESS" not in env


def test_rocksdb_backend_sets_storage_env_and_mounts_the_cluster_pvc():
    rc = cluster(gcsFaultToleranceOptions={"backend": "rocksdb"})
    p = head(rc)
    c = p["spec"]["containers"][0]
    env = env_of(c)
    assert (env["RAY_gcs_storage"], env["RAY_gcs_storage_path"]) == ("rocksdb", "/data/gcs")
    assert {"name": "gcs-storage", "mountPath": "/data/gcs"} in c["volumeMounts"]
    volume = {"name": "gcs-storage", "persistentVolumeClaim": {"claimName": "rc-gcs-pvc"}}
    assert volume in p["spec"]["volumes"]
    assert "RAY_REDIS_ADDRESS" not in env


def test_rocksdb_pvc_defaults_to_1gi_read_write_once():
    pvc = gcs_ft.build_gcs_storage_pvc(cluster(gcsFaultToleranceOptions={"backend": "rocksdb"}))
    assert pvc["metadata"] == {"name": "rc-gcs-pvc", "namespace": NS, "labels": {"ray.io/cluster": "rc"}}
    assert pvc["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def test_ray_service_clusters_get_the_three_serve_timeouts():
    rc = cluster()
    rc["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayService"}
    env = env_of(head(rc)["spec"]["containers"][0])
    assert (env["RAY_timeout_ms_task_wait_for_death_info"], env["RAY_gcs_server_request_timeout_seconds"],
            env["RAY_SERVE_KV_TIMEOUT_S"]) == ("0", "5", "5")


# -- init container and probes -------------------------------------------------------------------


def test_workers_wait_for_gcs_in_an_init_container_that_health_checks_the_head():
    inits = worker(cluster())["spec"]["initContainers"]
    assert [i["name"] for i in inits] == ["wait-gcs-ready"]
    assert "ray health-check --address rc-head-svc.default.svc.cluster.local:6379 > /dev/null 2>&1" \
        in inits[0]["args"][0]
    assert env_of(inits[0])["FQ_RAY_IP"] == "rc-head-svc.default.svc.cluster.local"


def test_init_container_injection_can_be_disabled_by_the_operator_env():
    w = worker(cluster(), env={"ENABLE_INIT_CONTAINER_INJECTION": "false"})
    assert "initContainers" not in w["spec"]


def test_probes_are_injected_with_kuberay_timings_unless_disabled():
    c = head(cluster())["spec"]["containers"][0]
    assert (c["readinessProbe"]["failureThreshold"], c["readinessProbe"]["timeoutSeconds"]) == (10, 5)
    assert (c["livenessProbe"]["initialDelaySeconds"], c["livenessProbe"]["failureThreshold"]) == (30, 120)
    unprobed = head(cluster(), env={"ENABLE_PROBES_INJECTION": "false"})["spec"]["containers"][0]
    assert "readinessProbe" not in unprobed


# -- services ------------------------------------------------------------------------------------


def test_head_service_is_headless_named_cluster_head_svc_and_selects_the_head():
    svc = service.build_service_for_head_pod(cluster())
    assert svc["metadata"]["name"] == "rc-head-svc"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {
        "ray.io/cluster": "rc", "ray.io/node-type": "head", "ray.io/identifier": "rc-head",
        "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [
        ("client", 10001), ("dashboard", 8265), ("gcs-server", 6379), ("metrics", 8080), ("serve", 8000)]


def test_head_service_gets_a_cluster_ip_with_the_operator_flag_or_a_non_cluster_ip_type():
    assert "clusterIP" not in service.build_service_for_head_pod(
        cluster(), env={"ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE": "true"})["spec"]
    rc = cluster()
    rc["spec"]["headGroupSpec"]["serviceType"] = "NodePort"
    assert service.build_service_for_head_pod(rc)["spec"]["type"] == "NodePort"
    assert "clusterIP" not in service.build_service_for_head_pod(rc)["spec"]


def test_head_container_without_ports_gets_the_default_service_ports():
    rc = cluster()
    del rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]
    names = [p["name"] for p in service.build_service_for_head_pod(rc)["spec"]["ports"]]
    assert names == ["client", "dashboard", "gcs-server", "metrics", "serve"]


def test_ray_service_head_service_is_named_after_the_ray_service_and_selects_the_given_cluster():
    rs = {"metadata": {"name": "rs", "namespace": NS}, "spec": {"rayClusterConfig": cluster()["spec"]}}
    svc = service.build_head_service_for_ray_service(rs, cluster("rs-abcde"))
    assert svc["metadata"]["name"] == "rs-head-svc"
    assert svc["metadata"]["labels"] == {"ray.io/originated-from-cr-name": "rs",
                                         "ray.io/originated-from-crd": "RayService",
                                         "ray.io/node-type": "head", "ray.io/identifier": "rs-head"}
    assert svc["spec"]["selector"]["ray.io/cluster"] == "rs-abcde"


def test_ray_service_serve_service_selects_serving_pods_of_the_target_cluster():
    rs = {"metadata": {"name": "rs", "namespace": NS}, "spec": {"rayClusterConfig": cluster()["spec"]}}
    svc = service.build_serve_service_for_ray_service(rs, cluster("rs-abcde"))
    assert svc["metadata"]["name"] == "rs-serve-svc"
    assert svc["spec"]["selector"] == {"ray.io/cluster": "rs-abcde", "ray.io/serve": "true"}
    assert svc["spec"]["ports"] == [{"name": "serve", "port": 8000}]
    assert "clusterIP" not in svc["spec"]


def test_serve_service_without_a_serve_port_is_refused_with_kuberays_message():
    rc = cluster()
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 6379, "name": "gcs-server"}]
    with pytest.raises(ValueError) as err:
        service.build_serve_service_for_ray_cluster(rc)
    assert str(err.value) == (
        "Please specify a port named 'serve' (or with the prefix 'serve-', e.g. 'serve-grpc') in the Ray "
        "head "
        "container; otherwise, the Kubernetes service for Ray Serve will not be created.")


# -- jobs ----------------------------------------------------------------------------------------


def ray_job(**spec_extra: Any) -> dict[str, Any]:
    spec = {"entrypoint": "python /home/ray/samples/sample_code.py ", "rayClusterSpec": cluster()["spec"]}
    spec.update(spec_extra)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "demo-job", "namespace": NS,
                                                                        "uid": "job-uid"},
            "spec": spec,
            "status": {"jobId": "demo-job-x7k2p", "dashboardURL": "rc-head-svc.default.svc:8265"}}


def test_submitter_command_checks_job_status_before_submitting_with_the_submission_id_then_follows_logs():
    cmd = " ".join(job.build_job_submit_command(ray_job(), C.K8S_JOB_MODE))
    address = "http://rc-head-svc.default.svc:8265"
    assert cmd == (
        "until python -c \"import urllib.request; r=urllib.request.urlopen("
        f"'{address}/api/gcs_healthz', timeout=10); exit(0 if b'success' in r.read() else 1)\" >/dev/null "
        "2>&1 ; "
        f"do echo \"Waiting for Ray Dashboard GCS to become healthy at {address} ...\" ; sleep 2 ; done ; "
        f"if ! ray job status --address {address} demo-job-x7k2p >/dev/null 2>&1 ; "
        f"then ray job submit --address {address} --no-wait --submission-id demo-job-x7k2p "
        "-- python /home/ray/samples/sample_code.py ; "
        f"fi ; ray job logs --address {address} --follow demo-job-x7k2p")


def test_sidecar_submitter_submits_blocking_to_localhost_without_status_check():
    cmd = " ".join(job.build_job_submit_command(ray_job(), C.SIDECAR_MODE))
    assert "ray job status" not in cmd and "--no-wait" not in cmd
    assert "ray job submit --address http://127.0.0.1:8265 --submission-id demo-job-x7k2p" in cmd
    gated = " ".join(job.build_job_submit_command(ray_job(), C.SIDECAR_MODE,
                                                  FeatureGates({"SidecarSubmitterRestart": True})))
    assert "if ! ray job status --address http://127.0.0.1:8265 demo-job-x7k2p" in gated


def test_submitter_command_carries_runtime_env_metadata_and_entrypoint_resources():
    rj = ray_job(runtimeEnvYAML="pip:\n  - requests\nenv_vars:\n  A: b\n", metadata={"k": "v"},
                 entrypointNumCpus=1.5, entrypointResources='{"r": 1}')
    cmd = job.build_job_submit_command(rj, C.K8S_JOB_MODE)
    assert cmd[cmd.index("--runtime-env-json") + 1] == \
        '"{\\"env_vars\\":{\\"A\\":\\"b\\"},\\"pip\\":[\\"requests\\"]}"'
    assert cmd[cmd.index("--metadata-json") + 1] == '"{\\"k\\":\\"v\\"}"'
    assert cmd[cmd.index("--entrypoint-num-cpus") + 1] == "1.500000"
    assert cmd[cmd.index("--entrypoint-resources") + 1] == '"{\\"r\\": 1}"'


def test_submitter_job_is_named_like_the_ray_job_with_backoff_limit_2_and_origin_labels():
    rj = ray_job()
    template = job.get_ray_job_submitter_template(rj, cluster())
    k8s_job = job.build_submitter_job(rj, template)
    assert k8s_job["metadata"]["name"] == "demo-job"
    assert k8s_job["metadata"]["labels"] == {"ray.io/originated-from-cr-name": "demo-job",
                                             "ray.io/originated-from-crd": "RayJob",
                                             "app.kubernetes.io/created-by": "kuberay-operator"}
    assert k8s_job["spec"]["backoffLimit"] == 2
    assert k8s_job["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    container = k8s_job["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["command"]) == ("ray-job-submitter", ["/bin/bash", "-ce", "--"])
    assert env_of(container) == {"PYTHONUNBUFFERED": "1",
                                 "RAY_DASHBOARD_ADDRESS": "rc-head-svc.default.svc:8265",
                                 "RAY_JOB_SUBMISSION_ID": "demo-job-x7k2p"}
    assert k8s_job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_submitter_config_backoff_limit_overrides_the_default():
    rj = ray_job(submitterConfig={"backoffLimit": 0})
    template = job.get_ray_job_submitter_template(rj, cluster())
    assert job.build_submitter_job(rj, template)["spec"]["backoffLimit"] == 0


def test_sidecar_mode_cluster_gets_the_submitter_container_never_restart_and_no_head_restart():
    rj = ray_job(submissionMode="SidecarMode")
    rc = job.construct_ray_cluster_for_ray_job(rj, "demo-job-abcde")
    assert rc["metadata"]["annotations"] == {"ray.io/disable-provisioned-head-restart": "true"}
    assert rc["metadata"]["labels"]["ray.io/job-submission-mode"] == "SidecarMode"
    head_spec = rc["spec"]["headGroupSpec"]["template"]["spec"]
    assert [c["name"] for c in head_spec["containers"]] == ["ray-head", "ray-job-submitter"]
    assert head_spec["restartPolicy"] == "Never"


def test_redis_cleanup_job_is_built_from_the_head_and_deletes_the_storage_namespace():
    cleanup = job.build_redis_cleanup_job(redis_ft_cluster())
    assert cleanup["metadata"]["name"] == "rc-redis-cleanup"
    assert cleanup["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    assert (cleanup["spec"]["backoffLimit"], cleanup["spec"]["activeDeadlineSeconds"]) == (0, 300)
    pod_spec = cleanup["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    (container,) = pod_spec["containers"]
    assert "livenessProbe" not in container and "readinessProbe" not in container
    env = env_of(container)
    assert env["RAY_external_storage_namespace"] == "uid-1234" and env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert (env["RAY_redis_db_connect_retries"], env["RAY_redis_db_connect_wait_milliseconds"]) == \
        ("120", "500")
    assert "cleanup_redis_storage(host=parsed.hostname, port=parsed.port, password=" in container["args"][0]
    assert "storage_namespace=os.getenv('RAY_external_storage_namespace')" in container["args"][0]
    assert cleanup["metadata"]["ownerReferences"][0]["name"] == "rc"


def test_redis_cleanup_finalizer_flow_applies_only_to_redis_ft_unless_disabled():
    assert gcs_ft.is_gcs_ft_redis_cleanup_enabled(redis_ft_cluster())
    disabled = {"ENABLE_GCS_FT_REDIS_CLEANUP": "false"}
    assert not gcs_ft.is_gcs_ft_redis_cleanup_enabled(redis_ft_cluster(), disabled)
    rocksdb = cluster(gcsFaultToleranceOptions={"backend": "rocksdb"})
    assert not gcs_ft.is_gcs_ft_redis_cleanup_enabled(rocksdb)
    assert not gcs_ft.is_gcs_ft_redis_cleanup_enabled(cluster())


def test_gcs_ft_deletion_timeout_reads_a_positive_integer_annotation_else_300():
    rc = cluster()
    assert gcs_ft.get_gcs_ft_deletion_timeout(rc) == 300
    rc["metadata"]["annotations"] = {"ray.io/gcs-ft-deletion-timeout": "45"}
    assert gcs_ft.get_gcs_ft_deletion_timeout(rc) == 45
    rc["metadata"]["annotations"] = {"ray.io/gcs-ft-deletion-timeout": "-3"}
    assert gcs_ft.get_gcs_ft_deletion_timeout(rc) == 300


# -- associations --------------------------------------------------------------------------------


def test_association_selectors_find_head_pods_group_pods_services_and_cleanup_jobs():
    rc = cluster()
    assert association.ray_cluster_head_pods_association_options(rc).selector() == \
        "ray.io/cluster=rc,ray.io/node-type=head"
    assert association.ray_cluster_group_pods_association_options(rc, "small").selector() == \
        "ray.io/cluster=rc,ray.io/group=small"
    assert association.ray_cluster_head_service_list_options(rc).selector() == \
        "ray.io/cluster=rc,ray.io/identifier=rc-head,ray.io/node-type=head"
    assert association.ray_cluster_redis_cleanup_job_association_options(rc).selector() == \
        "ray.io/cluster=rc,ray.io/node-type=redis-cleanup"
    assert association.ray_job_k8s_job_namespaced_name(ray_job()) == \
        association.NamespacedName(NS, "demo-job")
