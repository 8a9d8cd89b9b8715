"""Real kubectl reading the built-in kinds' OpenAPI: ``explain`` below the top level, and
``apply -f`` of a ``kind: List``, which kubectl validates client-side with ``/openapi/v2``'s
protobuf (an unknown nested field is refused there, before any request)."""

from __future__ import annotations

import json

import pytest
from serving import Served

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]


def test_explain_reaches_nested_fields_of_built_in_kinds(served: Served):
    out = served.kubectl("explain", "deployment.spec.replicas").stdout
    assert "FIELD: replicas <integer>" in out and "Number of desired pods" in out
    rec = served.kubectl("explain", "pod.spec.containers", "--recursive").stdout
    assert "FIELD: containers <[]Container>" in rec
    for field in ("livenessProbe\t<Probe>", "containerPort\t<integer> -required-",
                  "resources\t<ResourceRequirements>"):
        assert field in rec, field
    pdb = served.kubectl("explain", "poddisruptionbudgets.spec.minAvailable").stdout
    assert "minAvailable <IntOrString>" in pdb


def deployment(name: str, **container: object) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                                           **container}]}}}}


def test_apply_of_a_list_is_validated_with_v2_and_applied(served: Served):
    items = [{"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "listed", "namespace": "default"}, "data": {"k": "v"}},
             deployment("listed", ports=[{"containerPort": 80}])]
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    out = served.kubectl("apply", "-f", "-", stdin=json.dumps(doc)).stdout
    assert "configmap/listed created" in out and "deployment.apps/listed created" in out
    bad = {"apiVersion": "v1", "kind": "List", "items": [deployment("bad", bogus=1)]}
    refused = served.kubectl("apply", "-f", "-", stdin=json.dumps(bad), check=False)
    assert refused.returncode != 0
    assert 'unknown field "bogus" in io.k8s.api.core.v1.Container' in refused.stderr
    assert served.kubectl("get", "deployment", "bad", "-n", "default",
                          check=False).returncode != 0
