"""StorageClass provisioning over HTTP with the real kubectl: kind's ``standard`` class applied,
a PersistentVolumeClaim waiting for its first consumer, then bound once a Pod using it is
scheduled, with kube's Events in ``kubectl get events``."""

from __future__ import annotations

import json

import pytest
from serving import Served

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]

STANDARD = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "standard", "annotations": {
                "storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}


def test_a_claim_waits_for_its_first_consumer_then_binds(served: Served):
    served.kubectl("create", "namespace", "sc")
    served.kubectl("apply", "-f", "-", stdin=json.dumps(STANDARD))
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "sc"},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Gi"}}}}
    served.kubectl("apply", "-f", "-", stdin=json.dumps(claim))
    served.kubectl("wait", "-n", "sc", "--for=jsonpath={.reason}=WaitForFirstConsumer",
                   "event", "--field-selector", "involvedObject.name=data", "--timeout=60s")
    got = json.loads(served.kubectl("get", "pvc", "data", "-n", "sc", "-o", "json").stdout)
    assert got["spec"]["storageClassName"] == "standard"
    assert got["status"]["phase"] == "Pending"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user", "namespace": "sc"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "volumeMounts": [{"name": "d", "mountPath": "/d"}]}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}
    served.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    served.kubectl("wait", "-n", "sc", "--for=jsonpath={.status.phase}=Bound", "pvc/data",
                   "--timeout=60s")
    served.kubectl("wait", "-n", "sc", "--for=condition=PodScheduled", "pod/user",
                   "--timeout=60s")
    bound = json.loads(served.kubectl("get", "pvc", "data", "-n", "sc", "-o", "json").stdout)
    node = json.loads(served.kubectl("get", "pod", "user", "-n", "sc", "-o", "json").stdout)[
        "spec"]["nodeName"]
    assert bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    table = served.kubectl("get", "pv").stdout
    assert bound["spec"]["volumeName"] in table and "standard" in table
    events = served.kubectl("get", "events", "-n", "sc").stdout
    assert "ProvisioningSucceeded" in events and "ExternalProvisioning" in events
