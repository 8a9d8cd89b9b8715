"""Shared builders for the RayCluster controller tests (no tests here).

KubeRay's Go tests build one ``testRayCluster`` (a head and one worker group of three) and drive
Pods by writing their status, because envtest has no kubelet. These helpers do the same against
the emulated API server: `raycluster` builds the CR, `start_kuberay` runs an operator replica
(leader election off, KubeRay's cache selectors), `set_pods_running` plays the kubelet.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from emu.kuberay.operator import Configuration, operator_config
from emu.kuberay.raycluster import (
    EventRecorder,
    RayClusterReconciler,
    RayClusterReconcilerOptions,
)
from emu.kuberay.utils.features import FeatureGates
from emu.runtime import start_operator

NS = "default"


def raycluster(name: str = "raycluster-sample", *, replicas: int | None = 3,
               min_replicas: int = 0, max_replicas: int = 4, group: str = "small-group",
               annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """``testRayCluster``: a head and one worker group."""
    worker: dict[str, Any] = {
        "groupName": group, "minReplicas": min_replicas, "maxReplicas": max_replicas,
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-worker",
                                              "image": "rayproject/ray:2.46.0"}]}},
    }
    if replicas is not None:
        worker["replicas"] = replicas
    body: dict[str, Any] = {
        "rayVersion": "2.46.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{
                "name": "ray-head", "image": "rayproject/ray:2.46.0",
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                              "limits": {"cpu": "1", "memory": "2Gi"}}}]}},
        },
        "workerGroupSpecs": [worker],
    }
    body.update(spec)
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": body}


def start_kuberay(sim: Any, *, env: dict[str, str] | None = None, gates: str = "",
                  name: str = "kuberay-operator", reconcile_concurrency: int = 1) -> Any:
    """One operator replica with leader election off (KubeRay's flags otherwise)."""
    from emu.kuberay.utils.features import parse_feature_gates

    config = Configuration(enable_leader_election=False,
                           reconcile_concurrency=reconcile_concurrency)
    op = operator_config(config, parse_feature_gates(gates), env=env or {}, pod_namespace=NS)
    return start_operator(sim, name, op)


def reconciler(sim: Any, *, env: dict[str, str] | None = None,
               gates: FeatureGates | None = None) -> RayClusterReconciler:
    """A reconciler on a plain (uncached) client, for tests that call one function, as the Go
    unit tests call ``reconcilePods`` on a fake client."""
    options = RayClusterReconcilerOptions(env=env or {}, gates=gates or FeatureGates())
    proc = sim.processes.find("raycluster-controller")
    if proc is None or not proc.alive:
        proc = sim.start_process("raycluster-controller", _idle)
    client = sim.client(process=proc)
    recorder = EventRecorder(client, "raycluster-controller", spawn=proc.spawn)
    return RayClusterReconciler(client, options, recorder=recorder)


async def _idle(process: Any) -> None:
    """The process the direct-call reconciler's Event writes belong to (ended with the run)."""
    await asyncio.Event().wait()


async def pods(sim: Any, selector: str = "") -> list[dict[str, Any]]:
    return list(await sim.client().list("Pod", NS, label_selector=selector or None))


async def worker_pods(sim: Any, cluster: str = "raycluster-sample") -> list[dict[str, Any]]:
    return await pods(sim, f"ray.io/cluster={cluster},ray.io/node-type=worker")


async def head_pods(sim: Any, cluster: str = "raycluster-sample") -> list[dict[str, Any]]:
    return await pods(sim, f"ray.io/cluster={cluster},ray.io/node-type=head")


async def set_pod_status(sim: Any, pod: dict[str, Any], phase: str, *, ready: bool | None = None,
                         terminated: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write a Pod's status as a kubelet would (envtest's ``updateHeadPodToRunningAndReady``)."""
    c = sim.client("kubelet")
    live = await c.get("Pod", pod["metadata"]["name"], NS)
    status: dict[str, Any] = {"phase": phase, "podIP": "10.0.0.1"}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    name = live["spec"]["containers"][0]["name"]
    state: dict[str, Any] = {"running": {}} if terminated is None else {"terminated": terminated}
    status["containerStatuses"] = [{"name": name, "state": state, "ready": bool(ready)}]
    live["status"] = status
    updated: dict[str, Any] = await c.update_status(live)
    return updated


async def set_pods_running(sim: Any, cluster: str = "raycluster-sample") -> None:
    for pod in await pods(sim, f"ray.io/cluster={cluster}"):
        await set_pod_status(sim, pod, "Running", ready=True)


async def events(sim: Any, reason: str | None = None) -> list[dict[str, Any]]:
    items = list(await sim.client().list("Event", NS))
    items.sort(key=lambda e: e["metadata"]["name"])
    return [e for e in items if reason is None or e["reason"] == reason]


async def get_cluster(sim: Any, name: str = "raycluster-sample") -> dict[str, Any]:
    obj: dict[str, Any] = await sim.client().get("RayCluster", name, NS)
    return obj


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return dict(cond)
    return None


def with_replicas(cluster: dict[str, Any], replicas: int) -> dict[str, Any]:
    out = copy.deepcopy(cluster)
    out["spec"]["workerGroupSpecs"][0]["replicas"] = replicas
    return out
