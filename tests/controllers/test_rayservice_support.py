"""Shared builders for the RayService controller tests (no tests here).

KubeRay's Go tests build one ``rayServiceTemplate`` (a head, a worker group of three, the fruit
Serve app) and drive it against envtest with a fake dashboard. These helpers build the same CR;
`world` runs the whole stack instead — kubelets, the fake Ray with its dashboard and Serve
proxies, and the operator — so nothing is faked between the controller and Ray.
"""

from __future__ import annotations

import copy
from typing import Any

from controllers.operator import install_kuberay
from emu.kube import cluster as kube_cluster
from emu.ray.images import register_ray_programs

NS = "default"
RAY_IMAGE = "rayproject/ray:2.46.0"


def serve_config_v2(app: str = "app1", import_path: str = "fruit.deployment_graph") -> str:
    """``serveConfigV2Template``."""
    return f"""
applications:
- name: {app}
  import_path: {import_path}
  route_prefix: /fruit
  deployments:
    - name: MangoStand
      num_replicas: 1
      ray_actor_options:
        num_cpus: 0.1
"""


def rayservice(name: str = "rs", *, replicas: int = 1, app: str = "app1",
               ray_version: str = "2.46.0", annotations: dict[str, str] | None = None,
               upgrade_type: str | None = "NewCluster", **spec: Any) -> dict[str, Any]:
    """``rayServiceTemplate``: a head and one worker group running the Serve app."""
    body: dict[str, Any] = {
        "serveConfigV2": serve_config_v2(app),
        "rayClusterConfig": {
            "rayVersion": ray_version,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": RAY_IMAGE}]}}},
            "workerGroupSpecs": [{
                "groupName": "small-group", "replicas": replicas, "minReplicas": 0,
                "maxReplicas": 10000, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker",
                                                      "image": RAY_IMAGE}]}}}],
        },
    }
    if upgrade_type is not None:
        body["upgradeStrategy"] = {"type": upgrade_type}
    body.update(spec)
    meta: dict[str, Any] = {"name": name, "namespace": NS,
                            "annotations": dict(annotations or {"foo": "bar"})}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta, "spec": body}


def with_ray_version(rs: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(rs)
    out["spec"]["rayClusterConfig"]["rayVersion"] = version
    return out


async def world(sim: Any, *, nodes: int = 3, **install: Any) -> tuple[Any, Any]:
    """Kubelets, the fake Ray image, and a KubeRay leader."""
    kube = kube_cluster.install(sim, nodes=nodes, **install.pop("kube", {}))
    register_ray_programs(sim.programs)
    await kube.wait_ready()
    kuberay = await install_kuberay(sim, **install)
    await kuberay.wait_for_leader(timeout=120)
    return kube, kuberay


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return {}


def active_name(rs: dict[str, Any] | None) -> str:
    return ((rs or {}).get("status") or {}).get("activeServiceStatus", {}).get(
        "rayClusterName", "")


def pending_name(rs: dict[str, Any] | None) -> str:
    return ((rs or {}).get("status") or {}).get("pendingServiceStatus", {}).get(
        "rayClusterName", "")


def is_ready(rs: dict[str, Any] | None) -> bool:
    return condition(rs, "Ready").get("status") == "True"
