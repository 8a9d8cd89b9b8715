"""The DaemonSet controller: one Pod per eligible Node, pinned as kube pins it, and its status."""

from __future__ import annotations

from kube_helpers import template

import emu.kube.cluster as kc
from emu.kube.config import DEFAULT_CONTROLLERS
from emu.kube.daemonsets import DAEMON_TOLERATIONS, daemon_pod_tolerations

WITH_DAEMONSETS = (*DEFAULT_CONTROLLERS, "daemonset")


def daemonset(name: str, image: str = "example/agent:1", **spec: object) -> dict:
    labels = {"app": name}
    tmpl = template(image, labels)
    tmpl["spec"].update(spec)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}, "template": tmpl}}


async def pods_by_node(sim, app: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in await sim.client().list("Pod", "default", label_selector=f"app={app}"):
        if not p["metadata"].get("deletionTimestamp"):
            out.setdefault(p["spec"].get("nodeName", ""), []).append(p)
    return out


def settled(desired: int, ready: int | None = None):
    ready = desired if ready is None else ready
    return lambda ds: (ds.get("status") or {}).get("desiredNumberScheduled") == desired and \
        (ds.get("status") or {}).get("numberReady") == ready and \
        (ds.get("status") or {}).get("currentNumberScheduled") == desired


async def test_a_daemonset_runs_one_pod_per_node_pinned_by_the_metadata_name_affinity(sim):
    cluster = kc.install(sim, nodes=3, controllers=WITH_DAEMONSETS)
    await cluster.wait_ready()
    await sim.apply(daemonset("agent"))
    ds = await sim.wait_for("DaemonSet", "agent", settled(3), namespace="default")
    assert ds["status"]["numberAvailable"] == 3 and ds["status"]["updatedNumberScheduled"] == 3
    assert ds["status"]["numberMisscheduled"] == 0
    assert ds["status"]["observedGeneration"] == 1
    by_node = await pods_by_node(sim, "agent")
    assert sorted(by_node) == ["node-1", "node-2", "node-3"]
    for node, pods in by_node.items():
        assert len(pods) == 1
        pod = pods[0]
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                           "values": [node]}]}]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
        assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
        assert "controller-revision-hash" in pod["metadata"]["labels"]
        keys = [(t.get("key"), t.get("effect")) for t in pod["spec"]["tolerations"]]
        assert keys == list(DAEMON_TOLERATIONS)


async def test_node_selector_and_taints_decide_which_nodes_run_the_daemon(sim):
    cluster = kc.install(sim, nodes=2, controllers=WITH_DAEMONSETS, node_pools=[
        {"name": "gpu", "count": 1, "labels": {"accel": "gpu"},
         "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}])
    await cluster.wait_ready()
    await sim.apply(daemonset("plain"))
    await sim.apply(daemonset("gpu-agent", nodeSelector={"accel": "gpu"},
                              tolerations=[{"key": "gpu", "operator": "Exists"}]))
    await sim.wait_for("DaemonSet", "plain", settled(2), namespace="default")
    await sim.wait_for("DaemonSet", "gpu-agent", settled(1), namespace="default")
    assert sorted(await pods_by_node(sim, "plain")) == ["node-1", "node-2"]
    assert sorted(await pods_by_node(sim, "gpu-agent")) == ["gpu-1"]


async def test_a_new_node_gets_a_daemon_pod_and_a_node_that_stops_matching_loses_it(sim):
    cluster = kc.install(sim, nodes=2, controllers=WITH_DAEMONSETS)
    await cluster.wait_ready()
    await sim.apply(daemonset("agent", nodeSelector={"role": "edge"}))
    for node in ("node-1", "node-2"):
        await sim.client().patch("Node", node, {"metadata": {"labels": {"role": "edge"}}})
    await sim.wait_for("DaemonSet", "agent", settled(2), namespace="default")
    cluster.add_node("node-3")
    await sim.wait_for("Node", "node-3", lambda n: True)
    await sim.client().patch("Node", "node-3", {"metadata": {"labels": {"role": "edge"}}})
    await sim.wait_for("DaemonSet", "agent", settled(3), namespace="default", timeout=60)
    await sim.client().patch("Node", "node-1", {"metadata": {"labels": {"role": None}}})
    await sim.wait_for("DaemonSet", "agent", settled(2), namespace="default", timeout=60)
    assert sorted(await pods_by_node(sim, "agent")) == ["node-2", "node-3"]


async def test_an_untolerated_no_execute_taint_evicts_the_daemon_pod_no_schedule_does_not(sim):
    cluster = kc.install(sim, nodes=2, controllers=WITH_DAEMONSETS)
    await cluster.wait_ready()
    await sim.apply(daemonset("agent"))
    await sim.wait_for("DaemonSet", "agent", settled(2), namespace="default")
    await sim.client().patch("Node", "node-1", {"spec": {"taints": [
        {"key": "maintenance", "effect": "NoSchedule"}]}})
    await sim.sleep(5)
    assert sorted(await pods_by_node(sim, "agent")) == ["node-1", "node-2"]
    await sim.client().patch("Node", "node-2", {"spec": {"taints": [
        {"key": "drain", "effect": "NoExecute"}]}})
    await sim.wait_for("DaemonSet", "agent", lambda ds: ds["status"].get(
        "desiredNumberScheduled") == 0 and ds["status"].get("numberMisscheduled") == 1,
        namespace="default", timeout=60)
    assert sorted(await pods_by_node(sim, "agent")) == ["node-1"]


async def test_a_rolling_update_replaces_pods_one_node_at_a_time(sim):
    cluster = kc.install(sim, nodes=3, controllers=WITH_DAEMONSETS)
    await cluster.wait_ready()
    await sim.apply(daemonset("agent", image="example/agent:1"))
    await sim.wait_for("DaemonSet", "agent", settled(3), namespace="default")
    seen: list[int] = []

    def tracked(ds: dict) -> bool:
        status = ds.get("status") or {}
        seen.append(int(status.get("numberUnavailable") or 0))
        return ds["metadata"]["generation"] == status.get("observedGeneration") == 2 and \
            status.get("updatedNumberScheduled") == 3 and status.get("numberAvailable") == 3

    await sim.apply(daemonset("agent", image="example/agent:2"))
    await sim.wait_for("DaemonSet", "agent", tracked, namespace="default", timeout=120)
    assert max(seen) == 1  # maxUnavailable 1: never two Nodes without their daemon
    images = {p["spec"]["containers"][0]["image"]
              for pods in (await pods_by_node(sim, "agent")).values() for p in pods}
    assert images == {"example/agent:2"}


async def test_a_deleted_daemon_pod_is_replaced_on_its_node(sim):
    cluster = kc.install(sim, nodes=2, controllers=WITH_DAEMONSETS)
    await cluster.wait_ready()
    await sim.apply(daemonset("agent"))
    await sim.wait_for("DaemonSet", "agent", settled(2), namespace="default")
    victim = (await pods_by_node(sim, "agent"))["node-1"][0]["metadata"]["name"]
    await sim.client().delete("Pod", victim, "default")
    await sim.wait_until(lambda: _replaced(sim, victim), timeout=60, every=0.5)


async def _replaced(sim, victim: str) -> bool:
    by_node = await pods_by_node(sim, "agent")
    return [p["metadata"]["name"] for p in by_node.get("node-1", [])] not in ([], [victim])


def test_daemon_pods_on_the_host_network_also_tolerate_network_unavailable():
    added = daemon_pod_tolerations({"hostNetwork": True,
                                    "tolerations": [{"key": "x", "operator": "Exists"}]})
    assert added[0] == {"key": "x", "operator": "Exists"}
    assert {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
            "effect": "NoSchedule"} in added
    assert len(added) == 1 + len(DAEMON_TOLERATIONS) + 1
