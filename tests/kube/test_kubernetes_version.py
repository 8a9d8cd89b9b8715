"""The cluster's Kubernetes version, and KubeRay's SidecarSubmitterRestart guard in main.go.

KubeRay's operator refuses to start with the SidecarSubmitterRestart gate on when the API
server's ``/version`` is older than 1.35 (the submitter's per-container restart rules are beta
only there): ``exitOnError(..., "SidecarSubmitterRestart feature gate requires K8s 1.35+")``.
"""

from __future__ import annotations

import pytest

from emu import Simulation
from emu.kube.config import KubeConfig
from emu.kuberay.operator import FlagError, install_kuberay, k8s_version_at_least

GATE = {"SidecarSubmitterRestart": True}


@pytest.mark.emu(cluster=KubeConfig(nodes=1))
async def test_the_version_defaults_to_v1_33_for_the_api_server_and_the_kubelets(
        sim: Simulation) -> None:
    info = await sim.client().server_version()
    assert (info["major"], info["minor"], info["gitVersion"]) == ("1", "33", "v1.33.0")
    node = await sim.wait_for("Node", "node-1", namespace=None)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.0"


@pytest.mark.emu(cluster=KubeConfig(nodes=1, kubernetes_version="v1.35.2"))
async def test_the_version_is_configurable(sim: Simulation) -> None:
    assert (await sim.client().server_version())["gitVersion"] == "v1.35.2"
    node = await sim.wait_for("Node", "node-1", namespace=None)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.2"


def test_a_malformed_version_is_refused() -> None:
    with pytest.raises(ValueError, match="kubernetes_version is a Kubernetes release like "
                                         "'v1.35.0', not '1.35'"):
        KubeConfig(kubernetes_version="1.35")


def test_version_comparison_follows_parse_generic() -> None:
    assert k8s_version_at_least("v1.35.0", 1, 35, 0)
    assert k8s_version_at_least("v1.36.1-gke.100", 1, 35, 0)
    assert k8s_version_at_least("1.35", 1, 35, 0)
    assert not k8s_version_at_least("v1.34.9", 1, 35, 0)
    assert not k8s_version_at_least("v1.33.0-emu", 1, 35, 0)
    with pytest.raises(ValueError, match='could not parse "latest" as version'):
        k8s_version_at_least("latest", 1, 35, 0)


@pytest.mark.emu(cluster=KubeConfig(nodes=1))
async def test_the_operator_pod_exits_1_with_the_gate_on_a_v1_33_cluster(
        sim: Simulation) -> None:
    await install_kuberay(sim, feature_gates=GATE)
    await sim.sleep(15)
    exits = sim.trace.select(event="operator_exit")
    assert exits, "the operator started"
    assert exits[0].fields["error"] == ("SidecarSubmitterRestart feature gate requires K8s "
                                       "1.35+: current version v1.33.0 is below 1.35")
    assert not sim.trace.select(event="leader_acquired")
    [pod] = await sim.client().list("Pod", "default")
    status = pod["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 1 and not status["ready"]


@pytest.mark.emu(cluster=KubeConfig(nodes=1, kubernetes_version="v1.35.0"))
async def test_the_operator_starts_with_the_gate_on_a_v1_35_cluster(sim: Simulation) -> None:
    await install_kuberay(sim, feature_gates=GATE)
    await sim.sleep(15)
    assert not sim.trace.select(event="operator_exit")
    assert sim.trace.select(event="leader_acquired")


async def test_a_direct_install_with_the_gate_on_an_old_api_server_is_refused(
        sim: Simulation) -> None:
    sim.api.version = "v1.34.3"
    with pytest.raises(FlagError, match=r"requires K8s 1\.35\+: current version v1\.34\.3 is "
                                        r"below 1\.35"):
        await install_kuberay(sim, feature_gates=GATE, direct=True)
    sim.api.version = "v1.35.0"
    kuberay = await install_kuberay(sim, feature_gates=GATE, direct=True,
                                    release_name="second")
    assert kuberay.replicas()
