"""Naming, replica arithmetic, the spec hash, conditions and feature gates behave as util.go's."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from emu.kuberay.utils import consistency, util
from emu.kuberay.utils import constant as C
from emu.kuberay.utils.features import FeatureGateError, FeatureGates, parse_feature_gates

# -- names -------------------------------------------------------------------------------------


def test_pod_name_truncates_the_prefix_to_50_and_lowercases():
    assert util.pod_name("MyCluster", "head", True) == "mycluster-head-"
    assert util.pod_name("a" * 60, "worker", True) == "a" * 50 + "-worker-"
    assert util.pod_name("rc", "head", False) == "rc-head"


def test_check_name_keeps_the_last_50_characters_and_fixes_a_leading_digit_or_punctuation():
    assert util.check_name("x" * 10 + "y" * 50) == "y" * 50
    assert util.check_name("1abc") == "rabc"
    assert util.check_name("-abc") == "rabc"


def test_check_label_keeps_the_last_63_characters():
    assert util.check_label("a" * 5 + "b" * 63) == "b" * 63
    assert util.trim_job_name("-x") == "rx"


def test_head_service_name_is_cluster_head_svc_unless_the_cluster_names_its_head_service():
    assert util.generate_head_service_name(C.RAY_CLUSTER_CRD, {}, "rc") == "rc-head-svc"
    spec = {"headGroupSpec": {"headService": {"metadata": {"name": "custom"}}}}
    assert util.generate_head_service_name(C.RAY_CLUSTER_CRD, spec, "rc") == "custom"
    assert util.generate_head_service_name(C.RAY_SERVICE_CRD, spec, "rs") == "rs-head-svc"
    with pytest.raises(ValueError) as err:
        util.generate_head_service_name("Other", {}, "x")
    assert str(err.value) == "unknown CRD type: Other"


def test_fqdn_uses_the_cluster_domain_env_or_cluster_local():
    rc = {"metadata": {"name": "rc"}, "spec": {}}
    assert util.generate_fqdn_service_name(rc, "ns") == "rc-head-svc.ns.svc.cluster.local"
    assert util.generate_fqdn_service_name(rc, "ns", {"CLUSTER_DOMAIN": "corp"}) == "rc-head-svc.ns.svc.corp"


def test_serve_service_names_and_labels():
    assert util.generate_serve_service_name("rs") == "rs-serve-svc"
    assert util.generate_serve_service_label("rs") == "rs-serve"


def test_generated_ray_job_id_and_cluster_name_are_name_dash_five_characters_from_the_given_rng():
    job_id = util.generate_ray_job_id("demo-job", random.Random(7))
    assert job_id.startswith("demo-job-") and len(job_id) == len("demo-job-") + 5
    assert set(job_id[len("demo-job-"):]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert util.generate_ray_job_id("demo-job", random.Random(7)) == job_id
    assert util.generate_ray_cluster_name("rs", random.Random(7)) == "rs-" + job_id[-5:]


# -- replicas ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("group", "desired"), [
    ({"replicas": 3, "minReplicas": 1, "maxReplicas": 5}, 3),
    ({"replicas": 9, "minReplicas": 1, "maxReplicas": 5}, 5),
    ({"replicas": 0, "minReplicas": 2, "maxReplicas": 5}, 2),
    ({"minReplicas": 2, "maxReplicas": 5}, 2),
    ({"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "suspend": True}, 0),
    ({"replicas": 2, "minReplicas": 0, "maxReplicas": 5, "numOfHosts": 4}, 8),
    ({"replicas": 7}, 7),
])
def test_desired_replicas_clamp_into_min_max_times_hosts_and_are_zero_when_suspended(group, desired):
    assert util.get_worker_group_desired_replicas(group) == desired


def test_cluster_totals_sum_groups_and_skip_suspended_groups_for_min_and_max():
    rc = {"spec": {"workerGroupSpecs": [
        {"replicas": 2, "minReplicas": 1, "maxReplicas": 3},
        {"replicas": 4, "minReplicas": 2, "maxReplicas": 4, "suspend": True},
        {"replicas": 1, "minReplicas": 1},
    ]}}
    assert util.calculate_desired_replicas(rc) == 3
    assert util.calculate_min_replicas(rc) == 2
    assert util.calculate_max_replicas(rc) == 2**31 - 1  # saturates at int32


def pod(node_type: str, phase: str, ready: str | None) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"labels": {"ray.io/node-type": node_type}},
            "status": {"phase": phase, "conditions": conditions}}


def test_ready_and_available_count_only_workers():
    pods = [pod("head", "Running", "True"), pod("worker", "Running", "True"),
            pod("worker", "Running", "False"),
            pod("worker", "Pending", None)]
    assert (util.calculate_ready_replicas(pods), util.calculate_available_replicas(pods)) == (1, 2)


def test_all_pods_running_needs_at_least_one_pod_and_no_explicitly_unready_pod():
    assert not util.check_all_pods_running([])
    assert util.check_all_pods_running([pod("head", "Running", None)])
    assert not util.check_all_pods_running([pod("head", "Running", "False")])
    assert not util.check_all_pods_running([pod("head", "Pending", "True")])


def test_autoscaling_and_gcs_ft_predicates():
    assert util.is_autoscaling_enabled({"enableInTreeAutoscaling": True})
    assert not util.is_autoscaling_enabled({})
    assert util.is_gcs_fault_tolerance_enabled({}, {"ray.io/ft-enabled": "True"})
    assert util.is_gcs_fault_tolerance_enabled({"gcsFaultToleranceOptions": {}}, None)
    assert not util.is_gcs_fault_tolerance_enabled({}, {"ray.io/ft-enabled": "yes"})
    assert util.get_gcs_fault_tolerance_backend({}) == "redis"
    assert util.is_gcs_fault_tolerance_embedded({"backend": "rocksdb"})


def test_head_group_service_account_defaults_to_the_cluster_name():
    rc = {"metadata": {"name": "rc"}, "spec": {"headGroupSpec": {"template": {"spec": {}}}}}
    assert util.get_head_group_service_account_name(rc) == "rc"
    rc["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "sa"
    assert util.get_head_group_service_account_name(rc) == "sa"


def test_job_finished_reads_complete_failed_and_failure_target():
    assert util.is_job_finished({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == \
        ("Complete", True)
    failure_target = {"status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}}
    assert util.is_job_finished(failure_target) == \
        ("Failed", True)
    assert util.is_job_finished({"status": {}}) == ("", False)


def test_container_command_adds_login_shell_only_when_enabled():
    assert util.get_container_command(["e"]) == ["/bin/bash", "-ce", "--"]
    assert util.get_container_command([], {"ENABLE_LOGIN_SHELL": "true"}) == ["/bin/bash", "-cl", "--"]


# -- hash --------------------------------------------------------------------------------------


def spec() -> dict[str, Any]:
    return {
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"image": "ray:1"}]}}},
        "workerGroupSpecs": [{"groupName": "g", "replicas": 1, "minReplicas": 1, "maxReplicas": 3,
                              "rayStartParams": {},
                              "template": {"spec": {"containers": [{"image": "ray:1"}]}}}],
    }


def test_hash_ignores_replicas_min_max_and_workers_to_delete():
    base = util.generate_hash_without_replicas_and_workers_to_delete(spec())
    scaled = spec()
    group = scaled["workerGroupSpecs"][0]
    group.update(replicas=5, minReplicas=0, maxReplicas=10, scaleStrategy={"workersToDelete": ["p1"]})
    assert util.generate_hash_without_replicas_and_workers_to_delete(scaled) == base


def test_hash_ignores_tolerations_scheduling_gates_and_upgrade_strategy():
    base = util.generate_hash_without_replicas_and_workers_to_delete(spec())
    changed = spec()
    changed["headGroupSpec"]["template"]["spec"]["tolerations"] = [{"key": "k"}]
    changed["workerGroupSpecs"][0]["template"]["spec"]["schedulingGates"] = [{"name": "kueue"}]
    changed["upgradeStrategy"] = {"type": "Recreate"}
    assert util.generate_hash_without_replicas_and_workers_to_delete(changed) == base


def test_hash_changes_with_the_image_and_is_base32hex_of_sha1():
    base = util.generate_hash_without_replicas_and_workers_to_delete(spec())
    changed = spec()
    changed["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "ray:2"
    assert util.generate_hash_without_replicas_and_workers_to_delete(changed) != base
    assert len(base) == 32 and set(base) <= set("0123456789ABCDEFGHIJKLMNOPQRSTUV")


def test_hash_does_not_depend_on_key_order_and_does_not_modify_its_input():
    original = spec()
    reordered = dict(reversed(list(copy.deepcopy(original).items())))
    before = copy.deepcopy(original)
    assert util.generate_hash_without_replicas_and_workers_to_delete(reordered) == \
        util.generate_hash_without_replicas_and_workers_to_delete(original)
    assert original == before


# -- conditions --------------------------------------------------------------------------------


def test_set_condition_appends_with_now_and_changes_transition_time_only_on_status_change():
    conditions: list[dict[str, Any]] = []
    def cond(status: str, reason: str) -> dict[str, Any]:
        return {"type": "HeadPodReady", "status": status, "reason": reason}

    assert util.set_status_condition(conditions, cond("False", "A"), "t1")
    assert conditions == [{"type": "HeadPodReady", "status": "False", "reason": "A", "message": "",
                           "lastTransitionTime": "t1"}]
    assert util.set_status_condition(conditions, cond("False", "B"), "t2")
    assert conditions[0]["lastTransitionTime"] == "t1" and conditions[0]["reason"] == "B"
    assert not util.set_status_condition(conditions, cond("False", "B"), "t3")
    assert util.set_status_condition(conditions, cond("True", "B"), "t4")
    assert conditions[0]["lastTransitionTime"] == "t4"


def test_remove_and_query_conditions():
    conditions = [{"type": "RayClusterSuspending", "status": "True"}, {"type": "X", "status": "False"}]
    assert util.is_status_condition_true(conditions, "RayClusterSuspending")
    assert util.is_status_condition_false(conditions, "X")
    assert util.find_ray_cluster_suspend_status({"status": {"conditions": conditions}}) == \
        "RayClusterSuspending"
    assert util.remove_status_condition(conditions, "X") and not util.remove_status_condition(conditions, "X")
    assert conditions == [{"type": "RayClusterSuspending", "status": "True"}]


def test_head_pod_ready_condition_mirrors_pod_ready_and_explains_containers_not_ready():
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert util.find_head_pod_ready_condition(ready) == {
        "type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady", "message": ""}
    waiting = {"status": {
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                        "message": "containers with unready status: [ray-head]"}],
        "containerStatuses": [{"name": "ray-head", "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                                        "message": "back-off"}}}]}}
    assert util.find_head_pod_ready_condition(waiting) == {
        "type": "HeadPodReady", "status": "False", "reason": "CrashLoopBackOff",
        "message": "containers with unready status: [ray-head]; ray-head: back-off"}
    assert util.find_head_pod_ready_condition({"status": {}})["reason"] == "Unknown"


def test_replica_failure_reason_is_found_through_the_cause_chain():
    try:
        try:
            raise C.ERR_FAILED_CREATE_HEAD_POD
        except C.RayClusterReplicaFailure as marker:
            raise RuntimeError("create head pod: boom") from marker
    except RuntimeError as err:
        assert C.ray_cluster_replica_failure_reason(err) == "FailedCreateHeadPod"
    assert C.ray_cluster_replica_failure_reason(RuntimeError("plain")) == ""


# -- owner references --------------------------------------------------------------------------


def test_controller_reference_is_set_once_and_another_controller_is_refused():
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j", "uid": "u"}}
    obj: dict[str, Any] = {"metadata": {"name": "o", "namespace": "ns"}}
    util.set_controller_reference(owner, obj)
    util.set_controller_reference(owner, obj)
    assert len(obj["metadata"]["ownerReferences"]) == 1
    other = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s", "uid": "v"}}
    with pytest.raises(util.AlreadyOwnedError) as err:
        util.set_controller_reference(other, obj)
    assert str(err.value) == "Object ns/o is already owned by another RayJob controller j"


# -- consistency -------------------------------------------------------------------------------


def test_cluster_status_diff_ignores_last_update_time_and_observed_generation():
    old = {"state": "ready", "readyWorkerReplicas": 2, "lastUpdateTime": "t1", "observedGeneration": 1}
    assert not consistency.inconsistent_ray_cluster_status(
        old, dict(old, lastUpdateTime="t2", observedGeneration=2))
    assert consistency.inconsistent_ray_cluster_status(old, dict(old, readyWorkerReplicas=1))
    assert consistency.inconsistent_ray_cluster_status(old, dict(old, conditions=[{"type": "X"}]))


def test_ray_service_status_diff_ignores_the_embedded_cluster_status():
    old = {"serviceStatus": "Running", "activeServiceStatus": {"rayClusterName": "a",
                                                              "rayClusterStatus": {"state": "ready"}}}
    new = copy.deepcopy(old)
    new["activeServiceStatus"]["rayClusterStatus"] = {"state": ""}
    assert not consistency.inconsistent_ray_service_statuses(old, new)
    new["activeServiceStatus"]["applicationStatuses"] = {"default": {"status": "RUNNING"}}
    assert consistency.inconsistent_ray_service_statuses(old, new)


# -- feature gates -----------------------------------------------------------------------------


def test_feature_gate_defaults_match_kuberay():
    gates = FeatureGates()
    assert gates.enabled("RayClusterStatusConditions") and gates.enabled("RayJobDeletionPolicy")
    assert not gates.enabled("GCSFaultToleranceEmbeddedStorage")
    assert not gates.enabled("SidecarSubmitterRestart")


def test_feature_gates_parse_name_equals_bool_pairs():
    gates = parse_feature_gates("GCSFaultToleranceEmbeddedStorage=true, RayClusterStatusConditions=false,")
    assert gates.enabled("GCSFaultToleranceEmbeddedStorage")
    assert not gates.enabled("RayClusterStatusConditions")
    assert parse_feature_gates("") == FeatureGates()


@pytest.mark.parametrize(("text", "message"), [
    ("RayCronJob", "missing bool value for RayCronJob"),
    ("RayCronJob=yes",
     'invalid value of RayCronJob=yes, err: strconv.ParseBool: parsing "yes": invalid syntax'),
    ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
])
def test_feature_gate_parsing_errors_carry_component_base_messages(text, message):
    with pytest.raises(FeatureGateError) as err:
        parse_feature_gates(text)
    assert str(err.value) == message
