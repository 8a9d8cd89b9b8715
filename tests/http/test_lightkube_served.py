"""lightkube, whose models are generated from kube's OpenAPI and decoded strictly, against ``emu
serve --kuberay``: a served object missing a field kube's schema requires fails its decoding, so
listing every kind a platform tool reads checks the objects' shapes end to end."""

from __future__ import annotations

import os

import pytest
from serving import Served, require

pytestmark = pytest.mark.external


def test_lightkube_decodes_every_listed_builtin(served: Served):
    try:
        from lightkube import Client, KubeConfig
        from lightkube.resources.apps_v1 import Deployment, ReplicaSet
        from lightkube.resources.coordination_v1 import Lease
        from lightkube.resources.core_v1 import (
            ConfigMap,
            Event,
            Namespace,
            Node,
            Pod,
            Service,
            ServiceAccount,
        )
        from lightkube.resources.discovery_v1 import EndpointSlice
        from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding
    except ImportError:
        require(False, "the lightkube package")
        raise
    client = Client(KubeConfig.from_file(os.fspath(served.kubeconfig)))
    nodes = list(client.list(Node))
    assert nodes and all(n.status.nodeInfo.bootID for n in nodes)
    for kind in (Namespace, Pod, Service, ConfigMap, ServiceAccount, Event, Deployment,
                 ReplicaSet, Lease, EndpointSlice, ClusterRole, ClusterRoleBinding):
        list(client.list(kind, namespace="*") if kind.__name__ not in (
            "Namespace", "ClusterRole", "ClusterRoleBinding") else client.list(kind))
