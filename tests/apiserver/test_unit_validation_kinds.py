"""Validation helpers' messages and the kind registry."""

from __future__ import annotations

import pytest

from emu.apiserver import validation as v
from emu.apiserver.errors import ApiError
from emu.apiserver.kinds import KindInfo, KindRegistry, builtin_registry, default_pull_policy


def test_field_error_bodies_read_like_kube():
    assert v.invalid("spec.x", "a", "bad").message == 'Invalid value: "a": bad'
    assert v.invalid("spec.x", 3, "bad").message == "Invalid value: 3: bad"
    assert v.required("spec.x").message == "Required value"
    assert v.not_supported("f", "z", ("a", "b")).message == (
        'Unsupported value: "z": supported values: "a", "b"')
    assert v.duplicate("f", "n").message == 'Duplicate value: "n"'
    assert v.forbidden("f", "no").message == "Forbidden: no"


@pytest.mark.parametrize(("name", "ok"), [
    ("a", True), ("a.b-c", True), ("A", False), ("-a", False), ("a.", False), ("a_b", False),
])
def test_dns1123_subdomain(name, ok):
    assert (v.dns1123_subdomain("metadata.name", name) == []) is ok


def test_dns1123_label_rejects_dots_and_long_names():
    assert v.dns1123_label("f", "a.b")
    causes = v.dns1123_label("f", "a" * 64)
    assert [c.message for c in causes] == [
        f'Invalid value: "{"a" * 64}": must be no more than 63 characters']


def test_label_keys_may_have_a_dns_prefix():
    assert v.validate_labels({"ray.io/node-type": "head"}) == []
    assert v.validate_labels({"Bad_Prefix/x": "y"})
    assert v.validate_labels({"x": "y" * 64})


@pytest.mark.parametrize(("image", "policy"), [
    ("ray", "Always"), ("ray:latest", "Always"), ("ray:2.9", "IfNotPresent"),
    ("host:5000/ray", "Always"), ("host:5000/ray:1", "IfNotPresent"),
    ("ray@sha256:abc", "IfNotPresent"),
])
def test_default_pull_policy(image, policy):
    assert default_pull_policy(image) == policy


def test_registry_resolves_every_builtin_kind_by_each_name():
    reg = builtin_registry()
    for info in reg.all():
        for name in (info.kind, info.plural, info.kind.lower()):
            assert reg.resolve(name, info.api_version) is info
    assert reg.resolve("Event").api_version == "v1"
    assert reg.resolve("Event", "events.k8s.io/v1").group == "events.k8s.io"
    assert reg.resolve("RayJob", "ray.io").kind == "RayJob"


def test_builtin_kinds_have_status_subresources_where_kube_does():
    reg = builtin_registry()
    with_status = sorted(i.kind for i in reg.all() if i.has_status)
    assert with_status == sorted(["CustomResourceDefinition", "Namespace", "Node", "Pod",
                                  "Service", "PersistentVolumeClaim",
                                  "PersistentVolume", "Deployment", "ReplicaSet", "Job",
                                  "RayCluster", "RayJob", "RayService", "RayCronJob", "StatefulSet",
                                  "Ingress", "GatewayClass", "Gateway", "HTTPRoute",
                                  "ReplicationController", "DaemonSet", "CronJob",
                                  "PodDisruptionBudget", "HorizontalPodAutoscaler",
                                  "VolumeAttachment", "ValidatingAdmissionPolicy",
                                  "CertificateSigningRequest", "APIService", "ResourceQuota"])


def test_registering_replaces_a_kind_of_the_same_group_and_kind():
    reg = KindRegistry()
    first = reg.register(KindInfo("x.io", "v1", "W", "ws"))
    second = reg.register(KindInfo("x.io", "v2", "W", "ws"))
    assert reg.resolve("W") is second and reg.all() == [second]
    assert first.api_version == "x.io/v1"
    with pytest.raises(ApiError) as err:
        reg.resolve("W", "x.io/v1")
    assert err.value.message == 'no matches for kind "W" in version "x.io/v1"'


def test_kind_info_derives_resource_names():
    info = builtin_registry().resolve("rayclusters")
    assert (info.api_version, info.resource, info.list_kind) == (
        "ray.io/v1", "rayclusters.ray.io", "RayClusterList")
