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
