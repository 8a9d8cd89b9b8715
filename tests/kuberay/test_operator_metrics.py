"""The operator serves /metrics (controller-runtime's metrics server), which the Helm chart's
probes target: its Pod becomes Ready and its Deployment Available."""

from __future__ import annotations

import pytest

from emu.kube import cluster as kube_cluster
from emu.kuberay.operator import metrics_port


async def test_operator_deployment_becomes_available_and_answers_metrics(sim):
    kube = kube_cluster.install(sim, nodes=1)
    await kube.wait_ready()
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=120)

    def available(d):
        return any(c.get("type") == "Available" and c.get("status") == "True"
                   for c in (d.get("status") or {}).get("conditions") or [])

    dep = await sim.wait_for("Deployment", "kuberay-operator", available, timeout=120)
    assert dep["status"]["readyReplicas"] == 1
    pod = sim.api.list("Pod", "default", label_selector="app.kubernetes.io/name=kuberay-operator")
    ip = pod["items"][0]["status"]["podIP"]
    answer = await sim.network.call(sim.processes.get("kube-apiserver"), f"{ip}:8080",
                                    {"method": "GET", "path": "/metrics", "headers": {},
                                     "body": ""})
    assert answer["status"] == 200


@pytest.mark.parametrize("addr,port", [(":8080", 8080), ("0.0.0.0:9090", 9090), ("0", None),
                                       ("", None)])
def test_metrics_port(addr, port):
    assert metrics_port(addr) == port
