"""The Ray autoscaler sidecar KubeRay adds with ``enableInTreeAutoscaling: true``.

Why: autoscaling samples must do what they do on a real cluster — add workers when work cannot be
placed, remove idle ones — through the RayCluster, as KubeRay's autoscaler does
(``ray kuberay-autoscaler``, ``ray/autoscaler/_private/kuberay``). Every
``AUTOSCALER_UPDATE_INTERVAL_S`` (5 s) the sidecar:

- reads the RayCluster (through the API server, as the head Pod's ServiceAccount) and the
  cluster's state from the GCS (alive nodes, actors);
- **scales up** for demand no node can place: each actor pending creation is matched to the first
  worker group (in spec order) whose node shape (``num-cpus`` / the CPU limit, GPUs,
  ``rayStartParams.resources``) fits it, and that group's ``replicas`` grow by the Pods needed,
  capped at ``maxReplicas``;
- **scales down** a worker node idle (no live actor on it) for ``idleTimeoutSeconds`` (the
  group's, else ``autoscalerOptions.idleTimeoutSeconds``, else 60 s): its Pod goes into the
  group's ``scaleStrategy.workersToDelete`` and ``replicas`` drops by one, never below
  ``minReplicas``;
- writes the RayCluster with its resourceVersion (a conflict is retried next round).

Not emulated: task demand (the fake Ray queues tasks in the driver, not the GCS), resource
occupancy (a node with free CPUs but busy ones still counts as placeable), placement groups,
``upscalingMode`` and autoscaler v2's instance manager (both versions behave as above).
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from emu.apiserver.errors import ApiError
from emu.client.client import Client
from emu.kernel import clock
from emu.kernel.network import NetworkError
from emu.kernel.programs import ContainerContext

from .gcs_client import GCS_PORT, GcsClient
from .net import RpcError
from .serve import CHECKPOINT_KEY, SERVE_NAMESPACE

AUTOSCALER_UPDATE_INTERVAL_S = 5.0
DEFAULT_IDLE_TIMEOUT_S = 60.0
_CPU = re.compile(r"^(\d+(?:\.\d+)?)(m?)$")


def _cpus(value: Any) -> float:
    match = _CPU.match(str(value).strip())
    if match is None:
        return 0.0
    number = float(match.group(1))
    return number / 1000.0 if match.group(2) else number


def group_shape(group: dict[str, Any]) -> dict[str, float]:
    """The Ray resources one node of a worker group has (what ``ray start`` would get)."""
    params = group.get("rayStartParams") or {}
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    res = containers[0].get("resources") or {}
    limits = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    shape: dict[str, float] = {}
    if "num-cpus" in params:
        shape["CPU"] = float(params["num-cpus"])
    elif "cpu" in limits:
        shape["CPU"] = float(math.ceil(_cpus(limits["cpu"])))
    gpus = params.get("num-gpus") or next(
        (v for k, v in limits.items() if k.endswith("gpu")), None)
    if gpus is not None:
        shape["GPU"] = float(gpus)
    if params.get("resources"):
        try:
            custom = orjson.loads(str(params["resources"]).strip("'\"` ").replace('\\"', '"'))
        except orjson.JSONDecodeError:
            custom = {}
        if isinstance(custom, dict):
            shape.update({str(k): float(v) for k, v in custom.items()})
    return shape


def fits(demand: dict[str, float], shape: dict[str, float]) -> bool:
    return all(shape.get(k, 0.0) >= v for k, v in demand.items() if v > 0)


def actor_demand(actor: dict[str, Any]) -> dict[str, float]:
    return {"CPU": float(actor.get("num_cpus", 1.0)),
            **{str(k): float(v) for k, v in (actor.get("resources") or {}).items()}}


class Autoscaler:
    """One autoscaler sidecar (`run` is its loop)."""

    def __init__(self, ctx: ContainerContext, name: str, namespace: str) -> None:
        self.ctx = ctx
        self.name = name
        self.namespace = namespace
        self.client = Client(ctx.network, process=ctx.process)
        self.gcs = GcsClient(ctx.call, f"127.0.0.1:{GCS_PORT}")
        self.idle_since: dict[str, float] = {}

    @property
    def now(self) -> float:
        return clock.now()

    async def run(self) -> int:
        self.ctx.set_ready(True)
        while True:
            try:
                await self.update()
            except (ApiError, NetworkError, RpcError) as err:
                self.ctx.process.log("autoscaler_update_failed", error=str(err)[:200])
            await self.ctx.process.sleep(AUTOSCALER_UPDATE_INTERVAL_S)

    async def update(self) -> None:
        """One round: scale up for unplaceable actors, scale down idle workers."""
        cluster = await self.client.get("RayCluster", self.name, self.namespace)
        spec = cluster.get("spec") or {}
        groups: list[dict[str, Any]] = spec.get("workerGroupSpecs") or []
        nodes = await self.gcs.alive_nodes()
        actors = await self.gcs.actors() + await self.serve_replicas()
        changed = self.scale_up(groups, nodes, actors)
        changed = self.scale_down(spec, groups, nodes, actors) or changed
        if changed:
            # A JSON patch, as Ray's KubeRay node provider sends (its Role allows get and patch
            # on rayclusters, not update); the resourceVersion test keeps the round atomic.
            await self.client.patch("RayCluster", self.name, [
                {"op": "test", "path": "/metadata/resourceVersion",
                 "value": cluster["metadata"]["resourceVersion"]},
                {"op": "replace", "path": "/spec/workerGroupSpecs", "value": groups},
            ], self.namespace, patch_type="json")

    async def serve_replicas(self) -> list[dict[str, Any]]:
        """Serve's replicas as the actors they are in Ray: one ALIVE actor per placed replica
        (its node is busy) and one pending per replica no node could take (demand), read from
        the Serve controller's checkpoint in the GCS KV (`emu.ray.serve`)."""
        blob = await self.gcs.kv_get(SERVE_NAMESPACE, CHECKPOINT_KEY)
        if not blob:
            return []
        out: list[dict[str, Any]] = []
        for app in orjson.loads(blob).get("apps", {}).values():
            for dep in (app.get("deployments") or {}).values():
                for replica in (dep.get("replicas") or {}).values():
                    out.append({"state": "ALIVE", "node_id": replica.get("node_id")})
                out.extend({"state": "PENDING_CREATION", "num_cpus": dep.get("num_cpus", 1.0)}
                           for _ in range(int(dep.get("unplaced", 0))))
        return out

    def scale_up(self, groups: list[dict[str, Any]], nodes: list[dict[str, Any]],
                 actors: list[dict[str, Any]]) -> bool:
        pending = [a for a in actors if a.get("state") == "PENDING_CREATION"
                   and not a.get("node_id") and not a.get("head")]
        wanted: dict[int, int] = {}
        for actor in pending:
            demand = actor_demand(actor)
            if any(fits(demand, {k: float(v) for k, v in (n.get("resources") or {}).items()})
                   for n in nodes):
                continue  # placeable now: the GCS will place it
            for i, group in enumerate(groups):
                if fits(demand, group_shape(group)):
                    wanted[i] = wanted.get(i, 0) + 1
                    break
        changed = False
        for i, extra in sorted(wanted.items()):
            group = groups[i]
            current = int(group.get("replicas") or 0)
            target = min(current + extra, int(group.get("maxReplicas", 2147483647)))
            if target > current:
                group["replicas"] = target
                changed = True
                self.ctx.process.log("autoscaler_scale_up", group=group.get("groupName"),
                                     replicas=target)
        return changed

    def scale_down(self, spec: dict[str, Any], groups: list[dict[str, Any]],
                   nodes: list[dict[str, Any]], actors: list[dict[str, Any]]) -> bool:
        busy = {a.get("node_id") for a in actors if a.get("state") in ("ALIVE", "RESTARTING")}
        default_idle = float((spec.get("autoscalerOptions") or {}).get(
            "idleTimeoutSeconds") or DEFAULT_IDLE_TIMEOUT_S)
        changed = False
        alive_pods = {str(n.get("node_name", "")) for n in nodes}
        for group in groups:  # deletions done: the node provider clears workersToDelete
            doomed = (group.get("scaleStrategy") or {}).get("workersToDelete") or []
            kept = [p for p in doomed if p in alive_pods]
            if kept != doomed:
                group["scaleStrategy"]["workersToDelete"] = kept
                changed = True
        alive_ids = set()
        for node in sorted(nodes, key=lambda n: str(n.get("node_name", ""))):
            node_id = str(node.get("node_id"))
            alive_ids.add(node_id)
            if node.get("is_head") or node_id in busy:
                self.idle_since.pop(node_id, None)
                continue
            since = self.idle_since.setdefault(node_id, self.now)
            pod = str(node.get("node_name", ""))
            matching = [g for g in groups
                        if pod.startswith(f"{self.name}-{g.get('groupName')}-worker-")]
            if not matching:
                continue
            group = matching[0]
            idle = float(group.get("idleTimeoutSeconds") or default_idle)
            replicas = int(group.get("replicas") or 0)
            strategy = group.setdefault("scaleStrategy", {})
            doomed = strategy.setdefault("workersToDelete", [])
            if self.now - since < idle or replicas <= int(group.get("minReplicas") or 0) \
                    or pod in doomed:
                continue
            doomed.append(pod)
            group["replicas"] = replicas - 1
            changed = True
            self.ctx.process.log("autoscaler_scale_down", group=group.get("groupName"), pod=pod,
                                 idle_for=self.now - since)
        for node_id in [n for n in self.idle_since if n not in alive_ids]:
            del self.idle_since[node_id]
        return changed


async def autoscaler_program(ctx: ContainerContext, command_line: str) -> int:
    """``ray kuberay-autoscaler --cluster-name N --cluster-namespace NS``."""
    name = _flag(command_line, "cluster-name") or ctx.env.get("RAY_CLUSTER_NAME", "")
    namespace = _flag(command_line, "cluster-namespace") or \
        ctx.env.get("RAY_CLUSTER_NAMESPACE", "default")
    if not name or name.startswith("$("):
        name = ctx.env.get("RAY_CLUSTER_NAME", "")
    if namespace.startswith("$("):
        namespace = ctx.env.get("RAY_CLUSTER_NAMESPACE", "default")
    return await Autoscaler(ctx, name, namespace).run()


def _flag(text: str, name: str) -> str | None:
    match = re.search(rf"--{name}[= ](\S+)", text)
    return match.group(1) if match else None
