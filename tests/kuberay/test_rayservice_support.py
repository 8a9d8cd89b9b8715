"""Shared builders for the RayService controller tests (no tests here).

KubeRay's Go tests build one ``rayServiceTemplate`` (a head, a worker group of three, the fruit
Serve app) and drive it against envtest with a fake dashboard. These helpers build the same CR;
`world` runs the whole stack instead — kubelets, the fake Ray with its dashboard and Serve
proxies, and the operator — so nothing is faked between the controller and Ray.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from emu.apiserver.errors import Conflict
from emu.kube import cluster as kube_cluster
from emu.kuberay.operator import install_kuberay
from emu.ray.images import register_ray_programs
from emu.runtime import HttpClient

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
    if sim.ray_config is None:
        sim.ray_config = register_ray_programs(sim.programs)
    await kube.wait_ready()
    kuberay = await install_kuberay(sim, **install)
    await kuberay.wait_for_leader(timeout=120)
    return kube, kuberay


async def update_rs(sim: Any, name: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    """Get, change, Update; again on a Conflict (``retry.RetryOnConflict``)."""
    client = sim.client()
    for _ in range(10):
        rs = await client.get("RayService", name, NS)
        mutate(rs)
        try:
            await client.update(rs)
            return
        except Conflict:
            continue
    raise AssertionError(f"RayService {name} kept conflicting")


def bump_ray_version(version: str) -> Callable[[dict[str, Any]], None]:
    def mutate(rs: dict[str, Any]) -> None:
        rs["spec"]["rayClusterConfig"]["rayVersion"] = version
    return mutate


async def selector_cluster(sim: Any, svc: str) -> str | None:
    obj = await sim.get("Service", svc)
    return None if obj is None else obj["spec"]["selector"].get("ray.io/cluster")


def writes(sim: Any, kind: str, name: str | None = None, verb: str | None = None
           ) -> list[tuple[float, str, str]]:
    """API server writes of ``kind`` (and ``name``/``verb``): (time, verb, name)."""
    out = []
    for e in sim.trace.select("write", "kube-apiserver"):
        f = e.fields
        if f.get("kind") == kind and (name is None or f.get("name") == name) and \
                (verb is None or f.get("verb") == verb):
            out.append((e.t, f.get("verb", ""), f.get("name", "")))
    return out


class Traffic:
    """A client process sending ``GET /fruit`` to the serve Service every ``interval`` seconds
    (each through kube-proxy to one endpoint ready in the EndpointSlice at that moment)."""

    def __init__(self, sim: Any, rs_name: str = "rs", *, interval: float = 0.1) -> None:
        self.sim = sim
        self.address = f"{rs_name}-serve-svc.{NS}.svc.cluster.local:8000"
        self.interval = interval
        self.results: list[tuple[float, bool]] = []
        self.process = sim.start_process("traffic", self._run)

    async def _run(self, process: Any) -> None:
        http = HttpClient(self.sim.network, process)
        while True:
            t = self.sim.now
            try:
                resp = await http.request(self.address, "GET", "/fruit")
                ok = resp.status == 200
            except Exception:
                ok = False
            self.results.append((t, ok))
            await asyncio.sleep(self.interval)

    def stop(self) -> None:
        self.process.crash("traffic stopped")

    def failures(self, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(1 for t, ok in self.results if since <= t < until and not ok)

    def sent(self, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(1 for t, _ in self.results if since <= t < until)


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
