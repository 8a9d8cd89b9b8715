"""Create: system fields, generateName, defaults, validation, namespaces, size, nothing half-done."""

from __future__ import annotations

import pytest
from conformance_objects import cm, deployment, job, pod, raycluster, service

from emu.apiserver.errors import ApiError
from emu.apiserver.kinds import JOB_UID_LABEL
from emu.apiserver.server import APIServer


def test_create_sets_uid_creation_timestamp_resource_version_and_generation(api, clock):
    clock.advance(90)
    before = api.resource_version
    out = api.create(raycluster())
    meta = out["metadata"]
    assert meta["uid"] and len(meta["uid"]) == 36
    assert meta["creationTimestamp"] == "2026-01-01T00:01:30Z"
    assert meta["resourceVersion"] == str(before + 1)
    assert meta["generation"] == 1
    assert api.resource_version == before + 1


def test_kinds_without_spec_semantics_have_no_generation(api):
    assert "generation" not in api.create(cm())["metadata"]


def test_uids_come_from_the_seeded_rng_so_two_servers_agree(clock):
    from emu.kernel.rng import SimRandom
    a = APIServer(clock=clock, rng=SimRandom(5)).create(cm())
    b = APIServer(clock=clock, rng=SimRandom(5)).create(cm())
    assert a["metadata"]["uid"] == b["metadata"]["uid"]


def test_create_of_an_existing_name_is_409_already_exists(api):
    api.create(cm("x"))
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.create(cm("x"))
    assert (err.value.code, err.value.reason) == (409, "AlreadyExists")
    assert err.value.message == 'configmaps "x" already exists'
    assert api.resource_version == rv


def test_already_exists_names_the_group_for_crds(api):
    api.create(raycluster("x"))
    with pytest.raises(ApiError) as err:
        api.create(raycluster("x"))
    assert err.value.message == 'rayclusters.ray.io "x" already exists'


def test_generate_name_appends_five_random_characters(api):
    obj = cm("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "job-"
    out = api.create(obj)
    name = out["metadata"]["name"]
    assert name.startswith("job-") and len(name) == 9
    assert out["metadata"]["generateName"] == "job-"


def test_generate_name_retries_on_a_collision(api, clock):
    from emu.kernel.rng import SimRandom
    probe = SimRandom(1)
    probe.uid(), probe.uid(), probe.uid(), probe.uid()  # the four initial namespaces
    first = "x-" + probe.name_suffix(5)
    api.create(cm(first))
    obj = cm("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "x-"
    out = api.create(obj)
    assert out["metadata"]["name"] != first


def test_missing_name_and_generate_name_is_422(api):
    obj = cm("")
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.code == 422
    assert err.value.message == ('ConfigMap "" is invalid: metadata.name: Required value: name '
                                 "or generateName is required")


def test_invalid_subdomain_name_is_422_with_kube_message(api):
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.create(cm("Bad_Name"))
    assert err.value.reason == "Invalid"
    assert err.value.message == (
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase '
        "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
        "must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    assert err.value.details["causes"] == [{
        "reason": "FieldValueInvalid", "field": "metadata.name",
        "message": err.value.message.split("metadata.name: ", 1)[1]}]
    assert api.resource_version == rv


def test_namespace_names_must_be_rfc1123_labels(api):
    with pytest.raises(ApiError) as err:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}})
    assert err.value.message == (
        'Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": a lowercase RFC 1123 '
        "label must consist of lower case alphanumeric characters or '-', and must start and end "
        "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation "
        "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def test_service_names_must_be_dns1035_labels(api):
    with pytest.raises(ApiError) as err:
        api.create(service("1abc"))
    assert err.value.message == (
        'Service "1abc" is invalid: metadata.name: Invalid value: "1abc": a DNS-1035 label must '
        "consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
        "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def test_names_longer_than_253_characters_are_invalid(api):
    with pytest.raises(ApiError) as err:
        api.create(cm("a" * 254))
    assert "must be no more than 253 characters" in err.value.message


def test_pod_without_containers_is_invalid(api):
    obj = pod()
    obj["spec"]["containers"] = []
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == 'Pod "p" is invalid: spec.containers: Required value'


def test_pod_container_needs_name_and_image(api):
    obj = pod()
    obj["spec"]["containers"] = [{}]
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == ('Pod "p" is invalid: [spec.containers[0].name: Required value, '
                                 "spec.containers[0].image: Required value]")
    assert [c["field"] for c in err.value.details["causes"]] == [
        "spec.containers[0].name", "spec.containers[0].image"]


def test_pod_image_pull_policy_must_be_a_supported_value(api):
    obj = pod()
    obj["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes"
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == (
        'Pod "p" is invalid: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "IfNotPresent", "Never"')


def test_job_template_restart_policy_defaults_to_always_and_is_rejected(api):
    with pytest.raises(ApiError) as err:
        api.create(job(restart=None))
    assert err.value.message == (
        'Job.batch "j" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
        '"Always": supported values: "OnFailure", "Never"')


def test_job_without_template_is_invalid(api):
    obj = job()
    del obj["spec"]["template"]
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == 'Job.batch "j" is invalid: spec.template: Required value'


def test_service_without_ports_is_invalid_unless_headless(api):
    with pytest.raises(ApiError) as err:
        api.create(service(ports=[]))
    assert err.value.message == 'Service "s" is invalid: spec.ports: Required value'
    headless = api.create(service("h", ports=[], clusterIP="None"))
    assert headless["spec"]["clusterIP"] == "None"


def test_labels_that_are_not_strings_are_400_decode_errors(api):
    obj = cm(labels={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert (err.value.code, err.value.reason) == (400, "BadRequest")
    assert err.value.message == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "number into Go struct field ObjectMeta.metadata.labels of type string")


def test_replicas_that_are_not_integers_are_400_decode_errors(api):
    obj = deployment()
    obj["spec"]["replicas"] = "three"
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal '
        "string into Go struct field spec.replicas of type int32")


def test_negative_replicas_are_invalid(api):
    obj = deployment()
    obj["spec"]["replicas"] = -1
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == ('Deployment.apps "d" is invalid: spec.replicas: Invalid value: '
                                 "-1: must be greater than or equal to 0")


def test_invalid_label_values_are_422(api):
    with pytest.raises(ApiError) as err:
        api.create(cm(labels={"app": "has space"}))
    assert err.value.message.startswith(
        'ConfigMap "c" is invalid: metadata.labels: Invalid value: "has space": a valid label '
        "must be an empty string or consist of alphanumeric characters")


def test_creating_in_a_missing_namespace_is_404(api):
    rv = api.resource_version
    with pytest.raises(ApiError) as err:
        api.create(cm(ns="nowhere"))
    assert (err.value.code, err.value.message) == (404, 'namespaces "nowhere" not found')
    assert api.resource_version == rv


def test_default_and_kube_system_namespaces_exist_from_the_start(api):
    names = [n["metadata"]["name"] for n in api.list("Namespace")["items"]]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert api.get("Namespace", "default")["status"]["phase"] == "Active"


def test_objects_over_one_and_a_half_mebibytes_are_413(api):
    """etcd's limit, for kinds with no smaller limit of their own (a ConfigMap's 1 MiB is 422)."""
    rv = api.resource_version
    big = raycluster("big")
    big["spec"]["headGroupSpec"]["rayStartParams"] = {"blob": "x" * (1536 * 1024)}
    with pytest.raises(ApiError) as err:
        api.create(big)
    assert (err.value.code, err.value.reason) == (413, "RequestEntityTooLarge")
    assert err.value.message.startswith('rayclusters.ray.io "big" is too large: ')
    assert api.resource_version == rv
    with pytest.raises(ApiError):
        api.get("RayCluster", "big")


def test_a_body_that_is_not_an_object_is_400(api):
    with pytest.raises(ApiError) as err:
        api.create(["not", "a", "dict"])  # type: ignore[arg-type]
    assert (err.value.code, err.value.message) == (
        400, "the body of the request must be a JSON object, not list")


def test_a_body_without_kind_is_400(api):
    with pytest.raises(ApiError) as err:
        api.create({"metadata": {"name": "x"}})
    assert err.value.code == 400
    assert err.value.message == """Object 'Kind' is missing in '{"metadata":{"name":"x"}}'"""


def test_create_with_a_resource_version_is_refused(api):
    obj = cm()
    obj["metadata"]["resourceVersion"] = "3"
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.message == "resourceVersion should not be set on objects to be created"


def test_create_does_not_mutate_the_callers_object(api):
    obj = pod()
    api.create(obj)
    assert obj == pod()


def test_returned_objects_are_fresh_dicts(api):
    out = api.create(cm())
    out["data"]["k"] = "changed"
    assert api.get("ConfigMap", "c")["data"] == {"k": "v"}
    got = api.get("ConfigMap", "c")
    got["data"]["k"] = "also changed"
    assert api.get("ConfigMap", "c")["data"] == {"k": "v"}


def test_dry_run_create_validates_and_stores_nothing(api):
    rv = api.resource_version
    out = api.create(cm(), dry_run=True)
    assert out["metadata"]["name"] == "c"
    assert api.resource_version == rv
    with pytest.raises(ApiError):
        api.get("ConfigMap", "c")


def test_create_drops_a_client_sent_status_for_kinds_with_a_status_subresource(api):
    obj = raycluster()
    obj["status"] = {"state": "ready"}
    assert "status" not in api.create(obj)


# -- defaulting ------------------------------------------------------------------------------------


def test_pod_defaults(api):
    obj = pod(image="ray:2.9")
    obj["spec"]["containers"].append({"name": "side", "image": "ray"})
    out = api.create(obj)
    spec = out["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert [c["imagePullPolicy"] for c in spec["containers"]] == ["IfNotPresent", "Always"]
    assert out["status"]["phase"] == "Pending"


def test_latest_tag_defaults_pull_policy_to_always(api):
    out = api.create(pod(image="registry:5000/ray:latest"))
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_service_defaults_and_deterministic_cluster_ips(api):
    a = api.create(service("a", ports=[{"port": 80, "name": "http"}, {"port": 443,
                                                                     "name": "https"}]))
    b = api.create(service("b"))
    assert a["spec"]["type"] == "ClusterIP"
    assert a["spec"]["sessionAffinity"] == "None"
    assert a["spec"]["ports"][0]["protocol"] == "TCP"
    assert a["spec"]["ports"][1]["targetPort"] == 443
    assert (a["spec"]["clusterIP"], b["spec"]["clusterIP"]) == ("10.96.0.1", "10.96.0.2")
    assert a["spec"]["clusterIPs"] == ["10.96.0.1"]


def test_node_port_services_get_node_ports(api):
    out = api.create(service("np", type="NodePort"))
    assert out["spec"]["ports"][0]["nodePort"] == 30000


def test_job_defaults_and_generated_selector(api):
    out = api.create(job())
    spec = out["spec"]
    uid = out["metadata"]["uid"]
    assert (spec["backoffLimit"], spec["completions"], spec["parallelism"]) == (6, 1, 1)
    assert spec["selector"] == {"matchLabels": {JOB_UID_LABEL: uid}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels[JOB_UID_LABEL] == uid
    assert labels["batch.kubernetes.io/job-name"] == "j"
    assert labels["controller-uid"] == uid


def test_deployment_defaults(api):
    spec = api.create(deployment())["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["template"]["spec"]["restartPolicy"] == "Always"


def test_namespace_defaults(api):
    out = api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert out["status"] == {"phase": "Active"}
    assert out["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    assert "namespace" not in out["metadata"]


def test_cluster_scoped_objects_lose_a_namespace_they_were_given(api):
    out = api.create({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": "n1", "namespace": "default"},
                      "status": {"capacity": {"cpu": "4"}}})
    assert "namespace" not in out["metadata"]
    assert out["status"] == {"capacity": {"cpu": "4"}}  # nodes keep the status they register


def test_orphan_and_foreground_finalizers_together_are_422(api):
    """``ValidateFinalizers`` (apimachinery objectmeta.go), on create and on update."""
    with pytest.raises(ApiError) as err:
        api.create(cm(finalizers=["orphan", "foregroundDeletion"]))
    assert err.value.code == 422
    assert err.value.message == (
        'ConfigMap "c" is invalid: metadata.finalizers: Invalid value: '
        '["orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion cannot be '
        "both set")
    created = api.create(cm(finalizers=["orphan"]))
    created["metadata"]["finalizers"].append("foregroundDeletion")
    with pytest.raises(ApiError) as err:
        api.update(created)
    assert err.value.code == 422


def test_a_built_in_kinds_finalizer_without_a_domain_must_be_standard(api):
    """Core's ``validateKubeFinalizerName``; custom resources take any qualified name."""
    with pytest.raises(ApiError) as err:
        api.create(cm(finalizers=["cleanup"]))
    assert err.value.message == (
        'ConfigMap "c" is invalid: metadata.finalizers[0]: Invalid value: "cleanup": name is '
        "neither a standard finalizer name nor is it fully qualified")
    api.create(cm(finalizers=["kubernetes", "example.com/x"]))
    rc = raycluster()
    rc["metadata"]["finalizers"] = ["cleanup"]
    api.create(rc)


def test_an_event_cannot_own_an_object(api):
    obj = cm()
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Event", "name": "e",
                                           "uid": "u"}]
    with pytest.raises(ApiError) as err:
        api.create(obj)
    assert err.value.code == 422
    assert "/v1, Kind=Event is disallowed from being an owner" in err.value.message
