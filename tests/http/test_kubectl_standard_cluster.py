"""Real kubectl against ``emu serve`` (a standard cluster unless told otherwise): what a script
written for a fresh kind cluster reads first (the system Pods, the default ServiceAccount and
root-CA ConfigMap, the ``kubernetes`` Service, the control-plane Node); and the minimal world of
``--no-standard-cluster``, which has none of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from serving import start_serve

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]


def test_kubectl_sees_a_standard_cluster(tmp_path: Path):
    srv = start_serve(tmp_path, "--speed", "20")  # the default world
    try:
        srv.kubectl("wait", "-n", "kube-system", "pod", "--all", "--for=condition=Ready",
                    "--timeout=60s")
        table = srv.kubectl("get", "pods", "-n", "kube-system").stdout.splitlines()
        assert table[0].split()[:3] == ["NAME", "READY", "STATUS"]
        rows = {line.split()[0]: line.split() for line in table[1:]}
        for component in ("etcd", "kube-apiserver", "kube-controller-manager",
                          "kube-scheduler"):
            assert rows[f"{component}-emu-control-plane"][1:3] == ["1/1", "Running"]
        assert sum(name.startswith("coredns-") for name in rows) == 2
        assert sum(name.startswith("kube-proxy-") for name in rows) == 4  # 3 workers + CP
        sa_cm = srv.kubectl("get", "sa,cm", "-n", "default", "-o", "name").stdout.split()
        assert "serviceaccount/default" in sa_cm and "configmap/kube-root-ca.crt" in sa_cm
        svc = json.loads(srv.kubectl("get", "svc", "kubernetes", "-o", "json").stdout)
        assert svc["spec"]["clusterIP"] == "10.96.0.1"
        nodes = srv.kubectl("get", "nodes", "-l", "node-role.kubernetes.io/control-plane",
                            "-o", "name").stdout.split()
        assert nodes == ["node/emu-control-plane"]
        ds = srv.kubectl("get", "ds", "-n", "kube-system", "kube-proxy").stdout.splitlines()
        assert ds[0].split()[:4] == ["NAME", "DESIRED", "CURRENT", "READY"]
        assert ds[1].split()[1:4] == ["4", "4", "4"]
    finally:
        assert srv.stop() == 0


def test_no_standard_cluster_serves_a_minimal_world(tmp_path: Path):
    srv = start_serve(tmp_path, "--no-standard-cluster", "--speed", "20")
    try:
        assert srv.kubectl("get", "pods", "-n", "kube-system", "-o", "name").stdout.split() == []
        names = srv.kubectl("get", "sa,cm,svc", "-n", "default", "-o", "name").stdout.split()
        assert names == []
        nodes = srv.kubectl("get", "nodes", "-o", "name").stdout.split()
        assert nodes == ["node/node-1", "node/node-2", "node/node-3"]
    finally:
        assert srv.stop() == 0
