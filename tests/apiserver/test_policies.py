"""ValidatingAdmissionPolicy with CEL (`emu.apiserver.policies`): matching, kube's denial text,
validationActions, messageExpression, variables, params and failurePolicy."""

from __future__ import annotations

from typing import Any

import pytest

from emu.apiserver.errors import ApiError
from emu.apiserver.request import ApiRequest
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom

Obj = dict[str, Any]
ADM = "admissionregistration.k8s.io/v1"


@pytest.fixture
def api() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(1))


def policy(validations: list[Obj], name: str = "max-replicas", **spec: Any) -> Obj:
    return {"apiVersion": ADM, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                "validations": validations, **spec}}


def binding(actions: list[str], name: str = "b", policy_name: str = "max-replicas",
            **spec: Any) -> Obj:
    return {"apiVersion": ADM, "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": policy_name, "validationActions": actions, **spec}}


def deployment(name: str, replicas: int, **labels: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def refused(api: APIServer, body: Obj) -> ApiError:
    with pytest.raises(ApiError) as err:
        api.create(body)
    return err.value


def test_a_bound_policy_denies_with_kubes_text(api: APIServer) -> None:
    api.create(policy([{"expression": "object.spec.replicas <= 5"}]))
    api.create(deployment("unbound", 9))  # a policy without a binding does nothing
    api.create(binding(["Deny"]))
    api.create(deployment("small", 3))
    err = refused(api, deployment("big", 7))
    text = ("ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: "
            "failed expression: object.spec.replicas <= 5")
    assert (err.code, err.reason, err.message) == (
        422, "Invalid", f'deployments.apps "big" is forbidden: {text}')
    assert err.status["details"] == {"name": "big", "group": "apps", "kind": "deployments",
                                     "causes": [{"message": text}]}
    # updates too; other kinds are not matched
    small = api.get("Deployment", "small", "default")
    small["spec"]["replicas"] = 6
    with pytest.raises(ApiError, match="denied request"):
        api.update(small)
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
               namespace="default")


def test_messages_reasons_and_kubes_common_expressions(api: APIServer) -> None:
    api.create(policy([
        {"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
         "message": "a team label is required", "reason": "Forbidden"},
        {"expression": "object.metadata.name.startsWith('app-')",
         "messageExpression": "'name ' + object.metadata.name + ' must start with app-'"},
        {"expression": "object.metadata.name.lowerAscii() == object.metadata.name"},
    ]))
    api.create(binding(["Deny"]))
    err = refused(api, deployment("web", 1))
    assert (err.code, err.reason) == (403, "Forbidden")
    assert err.message.endswith("denied request: a team label is required")
    err = refused(api, deployment("web", 1, team="x"))
    assert err.message.endswith("denied request: name web must start with app-")
    api.create(deployment("app-web", 1, team="x"))


def test_warn_and_audit_record_without_refusing(api: APIServer) -> None:
    api.create(policy([{"expression": "object.spec.replicas <= 5", "message": "too many"}]))
    api.create(binding(["Warn", "Audit"]))
    api.create(deployment("big", 7))
    assert api.policies.warnings == [
        "Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'b': "
        "too many"]
    assert api.policies.audit == [("max-replicas", "b", "too many")]
    # a request that collects warnings (an HTTP client's, sent on as Warning headers) gets it
    sink: list[str] = []
    api.serve(ApiRequest("create", "Deployment", "apps/v1", "default", None,
                         deployment("bigger", 9), {"warnings": sink, "field_validation": "Strict"}))
    assert sink == ["Validation failed for ValidatingAdmissionPolicy 'max-replicas' with "
                    "binding 'b': too many"]


def test_variables_params_and_binding_match_resources(api: APIServer) -> None:
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "limits", "namespace": "default"},
                "data": {"max": "4"}})
    api.create({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "prod", "labels": {"env": "prod"}}})
    api.create(policy(
        [{"expression": "variables.replicas <= int(params.data.max)",
          "messageExpression": "'at most ' + params.data.max + ' replicas'"}],
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        variables=[{"name": "replicas", "expression": "object.spec.replicas"}]))
    api.create(binding(["Deny"], paramRef={"name": "limits", "namespace": "default",
                                           "parameterNotFoundAction": "Deny"},
                       matchResources={"namespaceSelector": {"matchLabels": {"env": "prod"}}}))
    api.create(deployment("anywhere", 9))  # not in a prod namespace
    prod = {**deployment("x", 9), "metadata": {"name": "x", "namespace": "prod"}}
    assert refused(api, prod).message.endswith("denied request: at most 4 replicas")
    prod["spec"]["replicas"] = 4
    api.create(prod)


def test_failure_policy_on_an_expression_error(api: APIServer) -> None:
    api.create(policy([{"expression": "object.spec.missing > 1"}]))
    api.create(binding(["Deny"]))
    err = refused(api, deployment("a", 1))
    assert "denied request: expression 'object.spec.missing > 1' resulted in error: " in \
        err.message
    p = api.get("ValidatingAdmissionPolicy", "max-replicas")
    p["spec"]["failurePolicy"] = "Ignore"
    api.update(p)
    api.create(deployment("a", 1))


def test_match_conditions_and_exclusions(api: APIServer) -> None:
    api.create(policy([{"expression": "object.spec.replicas <= 1"}],
                      matchConditions=[{"name": "not-system",
                                        "expression": "!object.metadata.name.startsWith('sys')"}]))
    p = api.get("ValidatingAdmissionPolicy", "max-replicas")
    p["spec"]["matchConstraints"]["excludeResourceRules"] = [{
        "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
        "resources": ["deployments"], "resourceNames": ["excluded"]}]
    api.update(p)
    api.create(binding(["Deny"]))
    api.create(deployment("sys-thing", 3))
    api.create(deployment("excluded", 3))
    assert "denied request" in refused(api, deployment("other", 3)).message


def test_a_delete_is_validated_against_the_old_object(api: APIServer) -> None:
    api.create(policy([{"expression": "!has(oldObject.metadata.labels) || "
                                      "!('locked' in oldObject.metadata.labels)",
                        "message": "unlock it first"}]))
    p = api.get("ValidatingAdmissionPolicy", "max-replicas")
    p["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["DELETE"]
    api.update(p)
    api.create(binding(["Deny"]))
    api.create(deployment("locked", 1, locked="yes"))
    api.create(deployment("free", 1))
    with pytest.raises(ApiError) as err:
        api.delete("Deployment", "locked", "default")
    assert err.value.message == ('deployments.apps "locked" is forbidden: ValidatingAdmissionPolicy '
                                 "'max-replicas' with binding 'b' denied request: unlock it first")
    api.delete("Deployment", "free", "default")
