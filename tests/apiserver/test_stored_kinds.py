"""The stored-only built-in kinds of kube 1.33's discovery (`emu.apiserver.storedkinds`): each is
created with kube's defaults and refused with kube's validation messages."""

from __future__ import annotations

from typing import Any

import pytest

from emu.apiserver.errors import ApiError
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom


@pytest.fixture
def api() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(1))


def obj(api_version: str, kind: str, name: str = "x", **body: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **body}


def invalid(api: APIServer, body: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as err:
        api.create(body, namespace="default")
    assert err.value.code == 422, err.value
    return err.value.message


VALID: list[tuple[dict[str, Any], dict[str, Any]]] = [
    # (object, fields the stored object must show)
    (obj("policy/v1", "PodDisruptionBudget", spec={
        "minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}),
     {"status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                 "expectedPods": 0}}),
    (obj("autoscaling/v2", "HorizontalPodAutoscaler", spec={
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
        "maxReplicas": 5}),
     {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
               "maxReplicas": 5, "minReplicas": 1, "metrics": [
                   {"type": "Resource", "resource": {"name": "cpu", "target": {
                       "type": "Utilization", "averageUtilization": 80}}}]},
      "status": {"desiredReplicas": 0}}),
    (obj("storage.k8s.io/v1", "StorageClass", provisioner="example.com/disk"),
     {"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
    (obj("storage.k8s.io/v1", "CSIDriver", name="disk.example.com", spec={}),
     {"spec": {"attachRequired": True, "podInfoOnMount": False, "storageCapacity": False,
               "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": False,
               "seLinuxMount": False, "volumeLifecycleModes": ["Persistent"]}}),
    (obj("storage.k8s.io/v1", "CSINode", spec={"drivers": [
        {"name": "disk.example.com", "nodeID": "n1"}]}), {}),
    (obj("storage.k8s.io/v1", "CSIStorageCapacity", storageClassName="sc", capacity="1Gi"),
     {}),
    (obj("storage.k8s.io/v1", "VolumeAttachment", spec={
        "attacher": "disk.example.com", "nodeName": "n1",
        "source": {"persistentVolumeName": "pv"}}), {}),
    (obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", webhooks=[{
        "name": "check.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "default", "name": "hook"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods"]}]}]),
     {"webhooks": [{"name": "check.example.com", "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"port": 443, "namespace": "default",
                                                 "name": "hook"}},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                               "apiVersions": ["v1"], "resources": ["pods"], "scope": "*"}],
                    "failurePolicy": "Fail", "matchPolicy": "Equivalent",
                    "namespaceSelector": {}, "objectSelector": {}, "timeoutSeconds": 10}]}),
    (obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", webhooks=[{
        "name": "mutate.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://hook.example.com/"}}]),
     {"webhooks": [{"name": "mutate.example.com", "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://hook.example.com/"},
                    "failurePolicy": "Fail", "matchPolicy": "Equivalent",
                    "namespaceSelector": {}, "objectSelector": {}, "timeoutSeconds": 10,
                    "reinvocationPolicy": "Never"}]}),
    (obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", spec={
        "validations": [{"expression": "object.spec.replicas <= 5"}]}),
     {"spec": {"validations": [{"expression": "object.spec.replicas <= 5"}],
               "failurePolicy": "Fail"}}),
    (obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", spec={
        "policyName": "p", "validationActions": ["Deny"]}), {}),
    (obj("scheduling.k8s.io/v1", "PriorityClass", value=1000),
     {"preemptionPolicy": "PreemptLowerPriority"}),
    (obj("certificates.k8s.io/v1", "CertificateSigningRequest", spec={
        "request": "LS0t", "signerName": "kubernetes.io/kube-apiserver-client",
        "usages": ["client auth"]}), {}),
    (obj("apiregistration.k8s.io/v1", "APIService", name="v1beta1.metrics.k8s.io", spec={
        "group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
        "versionPriority": 100, "service": {"namespace": "kube-system",
                                            "name": "metrics-server"}}), {}),
    (obj("v1", "ResourceQuota", spec={"hard": {"pods": "10"}}), {}),
    (obj("v1", "LimitRange", spec={"limits": [{"type": "Container", "max": {"cpu": "2"},
                                               "min": {"memory": "64Mi"}}]}),
     {"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"},
                           "min": {"memory": "64Mi"}, "default": {"cpu": "2"},
                           "defaultRequest": {"cpu": "2", "memory": "64Mi"}}]}}),
]


@pytest.mark.parametrize("body,shown", VALID, ids=[b["kind"] for b, _ in VALID])
def test_each_kind_is_stored_with_kubes_defaults(api: APIServer, body: dict[str, Any],
                                                 shown: dict[str, Any]) -> None:
    created = api.create(body, namespace="default")
    for key, value in shown.items():
        assert created[key] == value
    got = api.get(body["kind"], body["metadata"]["name"], "default",
                  api_version=body["apiVersion"])
    if body["kind"] == "PodDisruptionBudget":  # the budget's status follows its create
        status = got.pop("status")
        assert (status["observedGeneration"], status["expectedPods"],
                status["disruptionsAllowed"]) == (1, 0, 0)
        got["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
        created.pop("status")
        assert got == created
        return
    if body["kind"] == "ResourceQuota":  # the quota's usage is written just after its create
        assert got.pop("status") == {"hard": {"pods": "10"}, "used": {"pods": "0"}}
        got["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
        assert api.list("ResourceQuota", "default")["items"][0]["status"]["used"] == {
            "pods": "0"}
        assert got == created
        return
    assert got == created
    assert api.list(body["kind"], "default", api_version=body["apiVersion"])["items"] == [got]


def test_scopes_follow_kube(api: APIServer) -> None:
    cluster = {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "PriorityClass",
               "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
               "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
               "CertificateSigningRequest", "APIService"}
    for body, _ in VALID:
        info = api.kinds.resolve(body["kind"], body["apiVersion"])
        assert info.namespaced == (body["kind"] not in cluster), body["kind"]


def test_pdb_refuses_both_bounds_and_bad_percentages(api: APIServer) -> None:
    message = invalid(api, obj("policy/v1", "PodDisruptionBudget", spec={
        "minAvailable": 1, "maxUnavailable": "120%"}))
    assert "minAvailable and maxUnavailable cannot be both set" in message
    assert 'spec.maxUnavailable: Invalid value: "120%": must not be greater than 100%' in message


def test_hpa_needs_a_target_and_ordered_bounds(api: APIServer) -> None:
    message = invalid(api, obj("autoscaling/v2", "HorizontalPodAutoscaler", spec={
        "scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 3, "maxReplicas": 2}))
    assert message == (
        'HorizontalPodAutoscaler.autoscaling "x" is invalid: [spec.scaleTargetRef.name: '
        "Required value, spec.maxReplicas: Invalid value: 2: must be greater than or equal to "
        "`minReplicas`]")


def test_storage_class_parameters_are_immutable(api: APIServer) -> None:
    created = api.create(obj("storage.k8s.io/v1", "StorageClass", provisioner="a.io/x",
                             parameters={"type": "ssd"}))
    created["parameters"] = {"type": "hdd"}
    with pytest.raises(ApiError) as err:
        api.update(created)
    assert err.value.message == ('StorageClass.storage.k8s.io "x" is invalid: parameters: '
                                 "Forbidden: updates to parameters are forbidden.")


def test_webhooks_need_side_effects_review_versions_and_one_client(api: APIServer) -> None:
    message = invalid(api, obj("admissionregistration.k8s.io/v1",
                               "ValidatingWebhookConfiguration", webhooks=[{
                                   "name": "short.io", "clientConfig": {}}]))
    assert "webhooks[0].name: Invalid value: \"short.io\": should be a domain with at least " \
        "three segments separated by dots" in message
    assert "webhooks[0].clientConfig: Required value: exactly one of url or service is " \
        "required" in message
    assert "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun" \
        in message
    assert "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, " \
        "v1beta1" in message


def test_priority_class_value_is_bounded_and_immutable(api: APIServer) -> None:
    message = invalid(api, obj("scheduling.k8s.io/v1", "PriorityClass", value=2_000_000_000))
    assert "value: Forbidden: maximum allowed value of a user defined priority is 1000000000" \
        in message
    created = api.create(obj("scheduling.k8s.io/v1", "PriorityClass", value=5))
    created["value"] = 6
    with pytest.raises(ApiError) as err:
        api.update(created)
    assert "value: Forbidden: may not be changed in an update." in err.value.message


def test_api_service_is_named_version_dot_group(api: APIServer) -> None:
    message = invalid(api, obj("apiregistration.k8s.io/v1", "APIService", name="wrong", spec={
        "group": "g.io", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}))
    assert message == ('APIService.apiregistration.k8s.io "wrong" is invalid: metadata.name: '
                       'Invalid value: "wrong": must be `spec.version+"."+spec.group`: '
                       '"v1.g.io"')


def test_a_fresh_server_stores_none_of_them(api: APIServer) -> None:
    for body, _ in VALID:
        assert api.list(body["kind"], api_version=body["apiVersion"])["items"] == []
