"""ConfigMap and Secret field types and limits as kube-apiserver checks them: decoder errors are
400, validation errors 422 with kube's messages, and a refused write changes nothing."""

from __future__ import annotations

import base64

import pytest
from conformance_objects import cm

from emu.apiserver.errors import BadRequest, Invalid, RequestEntityTooLarge
from emu.apiserver.request import ApiRequest
from emu.apiserver.validation import base64_error


def secret(name="s", data=None, **fields):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
            **({"data": data} if data is not None else {}), **fields}


def refused(api, exc, text, fn, *args, **kw):
    rev = api.resource_version
    with pytest.raises(exc) as err:
        fn(*args, **kw)
    assert text in err.value.message, err.value.message
    assert api.resource_version == rev
    return err.value


@pytest.mark.parametrize(("obj", "text"), [
    ({**cm("a"), "data": "notamap"}, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
     "json: cannot unmarshal string into Go struct field ConfigMap.data of type "
     "map[string]string"),
    ({**cm("a"), "data": {"k": 1}},
     "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"),
    ({**cm("a"), "data": {"k": None}},
     "json: cannot unmarshal null into Go struct field ConfigMap.data of type string"),
    ({**cm("a"), "binaryData": {"b": "not base64!"}}, "illegal base64 data at input byte 3"),
    ({**cm("a"), "immutable": "yes"},
     "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool"),
    (secret(data={"k": "abc"}), "illegal base64 data at input byte 0"),
    (secret(data={"k": "YWJj$"}), "illegal base64 data at input byte 4"),
    (secret(data=["x"]), "json: cannot unmarshal array into Go struct field Secret.data of type "
     "map[string][]uint8"),
    (secret(stringData={"k": 2}), "Go struct field Secret.stringData of type string"),
    (secret(type=3), "Go struct field Secret.type of type v1.SecretType"),
])
def test_wrong_types_are_400_with_the_decoders_message(api, obj, text):
    refused(api, BadRequest, text, api.create, obj)


def test_wrong_types_in_an_update_are_400_too(api):
    api.create(cm("a"))
    obj = api.get("ConfigMap", "a", "default")
    obj["data"] = {"k": ["v"]}
    refused(api, BadRequest, "Go struct field ConfigMap.data of type string", api.update, obj)
    refused(api, BadRequest, "of type string", api.patch, "ConfigMap", "a", {"data": {"n": 5}},
            namespace="default")


@pytest.mark.parametrize(("key", "text"), [
    ("bad key", "a valid config key must consist of alphanumeric characters"),
    ("..", "must not be '..'"),
    ("..x", "must not start with '..'"),
    ("k" * 254, "must be no more than 253 characters"),
])
def test_bad_keys_are_422(api, key, text):
    err = refused(api, Invalid, text, api.create, cm("a", data={key: "v"}))
    assert err.details["causes"][0]["field"] == f"data[{key}]"
    refused(api, Invalid, text, api.create,
            secret(data={key: base64.b64encode(b"v").decode()}))


def test_a_key_in_both_data_and_binary_data_is_422(api):
    refused(api, Invalid, 'binaryData[k]: Invalid value: "k": duplicate of key present in data',
            api.create, {**cm("a", data={"k": "v"}), "binaryData": {"k": "dg=="}})


def test_more_than_one_mib_of_data_is_422_and_one_mib_is_fine(api):
    big = "x" * (1024 * 1024)
    api.create(cm("ok", data={"k": big}))
    refused(api, Invalid, '"too-big" is invalid: []: Too long: must have at most 1048576 bytes',
            api.create, cm("too-big", data={"k": big, "l": "y"}))
    raw = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    refused(api, Invalid, "data: Too long: must have at most 1048576 bytes", api.create,
            secret(data={"k": raw}))


def test_a_request_over_three_mib_is_413(api):
    body = cm("a", data={f"k{i}": "x" * (1024 * 1024) for i in range(3)})
    refused(api, RequestEntityTooLarge, "Request entity too large: limit is 3145728", api.serve,
            ApiRequest("create", "ConfigMap", None, "default", "a", body))


def test_string_data_is_merged_into_data_as_base64(api):
    out = api.create(secret(data={"a": "YQ=="}, stringData={"b": "bee", "a": "ay"}))
    assert out["data"] == {"a": base64.b64encode(b"ay").decode(), "b": "YmVl"}
    assert "stringData" not in out and out["type"] == "Opaque"


def test_typed_secrets_need_their_keys_and_type_is_immutable(api):
    refused(api, Invalid, "data[tls.crt]: Required value", api.create,
            secret(type="kubernetes.io/tls", data={"tls.key": "eA=="}))
    api.create(secret(data={"a": "YQ=="}))
    obj = api.get("Secret", "s", "default")
    obj["type"] = "kubernetes.io/basic-auth"
    refused(api, Invalid, 'type: Invalid value: "kubernetes.io/basic-auth": field is immutable',
            api.update, obj)


def test_an_immutable_config_map_keeps_its_data_and_stays_immutable(api):
    api.create({**cm("a"), "immutable": True})
    obj = api.get("ConfigMap", "a", "default")
    obj["data"] = {"k": "changed"}
    refused(api, Invalid, "data: Forbidden: field is immutable when `immutable` is set",
            api.update, obj)
    refused(api, Invalid, "immutable: Forbidden: field is immutable when `immutable` is set",
            api.patch, "ConfigMap", "a", {"immutable": False}, namespace="default")
    api.patch("ConfigMap", "a", {"metadata": {"labels": {"x": "y"}}}, namespace="default")


@pytest.mark.parametrize(("text", "at"), [("", None), ("YQ==", None), ("YWI=", None),
                                          ("YWJj", None), ("YWJ\njZA==", None), ("abc", 0),
                                          ("abcdefg", 4), ("YQ=", 3), ("Y===", 1), ("ab$c", 2),
                                          ("YQ==YQ==", 4)])
def test_base64_errors_at_gos_offsets(text, at):
    assert base64_error(text) == at


@pytest.mark.parametrize(("kind_obj", "text"), [
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "c", "image": "i", "ports": "eighty"}]}},
     'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go '
     "struct field Container.spec.containers.ports of type []v1.ContainerPort"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}},
     "cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports."
     "containerPort of type int32"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "c", "image": "i", "ports": [
          {"containerPort": 80}, {"containerPort": 2**31}]}]}},
     "cannot unmarshal number 2147483648 into Go struct field ContainerPort.spec.containers."
     "ports.containerPort of type int32"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "c", "image": "i", "env": [
          {"name": "A", "value": "a"}, {"name": "B", "value": True}]}]}},
     "cannot unmarshal bool into Go struct field EnvVar.spec.containers.env.value of type "
     "string"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [
          {"name": "v", "mountPath": "/v", "readOnly": True},
          {"name": "w", "mountPath": "/w", "readOnly": "yes"}]}]}},
     "cannot unmarshal string into Go struct field VolumeMount.spec.containers.volumeMounts."
     "readOnly of type bool"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "c", "image": "i", "command": "sleep 1"}]}},
     "cannot unmarshal string into Go struct field Container.spec.containers.command of type "
     "[]string"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": {}}},
     "cannot unmarshal object into Go struct field PodSpec.spec.containers of type "
     "[]v1.Container"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "terminationGracePeriodSeconds": 1.5, "containers": [{"name": "c", "image": "i"}]}},
     "cannot unmarshal number 1.5 into Go struct field PodSpec.spec."
     "terminationGracePeriodSeconds of type int64"),
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
      "spec": {"ports": [{"port": 80}], "selector": {"app": 1}}},
     "cannot unmarshal number into Go struct field ServiceSpec.spec.selector of type string"),
    ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
      "spec": {"suspend": "no", "template": {"spec": {"containers": []}}}},
     "cannot unmarshal string into Go struct field JobSpec.spec.suspend of type bool"),
])
def test_nested_field_types_of_built_in_kinds_are_400(api, kind_obj, text):
    refused(api, BadRequest, text, api.create, kind_obj)


def test_list_elements_of_right_scalar_types_are_accepted(api):
    """Ports, env vars and mounts whose fields all hold the right scalars (the shape check's
    fast path) are stored; a null field still gets the full check, which lets it pass."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i",
                                    "ports": [{"containerPort": 80, "name": "http"},
                                              {"containerPort": 81, "protocol": None}],
                                    "env": [{"name": "A", "value": "a"}, {"name": "B"}],
                                    "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                      "readOnly": False}]}],
                    "volumes": [{"name": "v", "emptyDir": {}}]}}
    out = api.create(pod)
    assert out["spec"]["containers"][0]["ports"][0]["containerPort"] == 80
    assert out["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is False
