"""Crafted worlds: objects written straight into the API server, no operator, so each test shows
exactly the state an invariant must catch (or must let pass)."""

from __future__ import annotations

from typing import Any

from emu import Simulation

NS = "default"


def pod(name: str, *, cluster: str, node_type: str = "head", phase: str = "Running",
        ready: bool = True, owner: dict[str, Any] | None = None,
        extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS,
                            "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type,
                                       **(extra_labels or {})}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"], "controller": True}


def create(sim: Simulation, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj`` (and write its status, which create ignores) directly in the API server."""
    status = obj.get("status")
    out: dict[str, Any] = sim.api.create(obj, caller="test")
    if status is not None:
        out["status"] = status
        out = sim.api.update_status(out, caller="test")
    return out


def set_status(sim: Simulation, kind: str, name: str, **status: Any) -> dict[str, Any]:
    obj = sim.api.get(kind, name, NS)
    obj["status"] = {**(obj.get("status") or {}), **status}
    out: dict[str, Any] = sim.api.update_status(obj, caller="test")
    return out


def delete(sim: Simulation, kind: str, name: str) -> None:
    sim.api.delete(kind, name, NS, caller="test")


HEAD_GROUP: dict[str, Any] = {"rayStartParams": {}, "template": {"spec": {"containers": [
    {"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}


def raycluster(name: str, *, workers: int = 0, labels: dict[str, str] | None = None,
               owner: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"rayVersion": "2.46.0", "headGroupSpec": HEAD_GROUP,
                            "workerGroupSpecs": []}
    if workers:
        spec["workerGroupSpecs"] = [{
            "groupName": "workers", "replicas": workers, "minReplicas": 0, "maxReplicas": 10,
            "rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}}}]
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    obj: dict[str, Any] = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
                           "spec": spec}
    if status:
        obj["status"] = status
    return obj


def rayjob(name: str, *, finalizers: list[str] | None = None, **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if finalizers:
        meta["finalizers"] = finalizers
    obj: dict[str, Any] = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta,
                           "spec": {"entrypoint": "python -c 'pass'",
                                    "rayClusterSpec": {"rayVersion": "2.46.0",
                                                       "headGroupSpec": HEAD_GROUP}}}
    if status:
        obj["status"] = status
    return obj


def rayservice(name: str, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "ray.io/v1", "kind": "RayService",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"rayClusterConfig": {"rayVersion": "2.46.0",
                                                         "headGroupSpec": HEAD_GROUP}}}
    if status:
        obj["status"] = status
    return obj


def serve_service(rs: dict[str, Any], cluster: str) -> dict[str, Any]:
    name = rs["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{name}-serve-svc", "namespace": NS,
                         "labels": {"ray.io/originated-from-cr-name": name,
                                    "ray.io/originated-from-crd": "RayService"},
                         "ownerReferences": [owner_ref(rs)]},
            "spec": {"selector": {"ray.io/cluster": cluster, "ray.io/serve": "true"},
                     "ports": [{"name": "serve", "port": 8000}]}}


def repoint(sim: Simulation, service: str, cluster: str) -> None:
    svc = sim.api.get("Service", service, NS)
    svc["spec"]["selector"]["ray.io/cluster"] = cluster
    sim.api.update(svc, caller="test")
