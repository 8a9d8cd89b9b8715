"""Ray Serve: the controller (a detached actor), replicas and proxies on nodes, and the
dashboard's Serve REST handlers.

Follows ``python/ray/serve/_private/{controller,application_state,deployment_state,proxy}.py`` and
``dashboard/modules/serve/serve_head.py`` (FACTS §5):
- the controller is the detached actor ``SERVE_CONTROLLER_ACTOR`` (namespace ``serve``,
  ``max_restarts=-1``, preferring the head node); it checkpoints its state into the GCS internal KV
  (namespace ``serve``) on every change and restores it when it starts, so Serve state survives a
  head restart exactly when the GCS's storage does;
- ``PUT`` is declarative: a change to lightweight options only (``num_replicas``,
  ``user_config``, autoscaling, ...) keeps the running replicas (scaling to the new count); other
  new or changed apps go DEPLOYING (the build task takes the app's
  ``build_seconds``; a ``fail_message`` makes it DEPLOY_FAILED), then their deployments UPDATING
  while replicas start (``replica_start_seconds``), then HEALTHY/RUNNING; apps missing from the
  body are DELETING until their replicas stopped, then gone;
- replica health: every 10 s; 3 consecutive failures (node gone or replica missing) replace the
  replica, and the deployment and app are UNHEALTHY until the replacement runs;
- proxies (``EveryNode``): on the head node and every node with a replica, on port 8000 (or
  the first config's ``http_options.port``), with ``/-/healthz`` (``success``; 503 "Route
  table is not populated yet." / "No replicas are available yet." on a worker node without
  running replicas / "This node is being drained.") and ``/-/routes``; other paths go to a
  replica of the app with the longest matching route prefix.

Over 500 lines because the controller's state machine, the node side it drives and the REST
handlers share one schema (the ServeInstanceDetails shape); apart they would duplicate it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from emu.kernel.network import NetworkError

from .config import ServeAppBehaviour
from .net import HttpRequest, RpcError, json_response, response, serve_http

if TYPE_CHECKING:
    from .raylet import Raylet
    from .workloads import ActorRuntime

SERVE_PORT = 8000
CONTROLLER_NAME = "SERVE_CONTROLLER_ACTOR"
SERVE_NAMESPACE = "serve"
CHECKPOINT_KEY = "serve-controller-checkpoint"
CONTROL_LOOP_PERIOD_S = 1.0
REPLICA_HEALTH_PERIOD_S = 10.0
REPLICA_HEALTH_THRESHOLD = 3

HEALTHY_MESSAGE = "success"
DRAINING_MESSAGE = "This node is being drained."
NO_ROUTES_MESSAGE = "Route table is not populated yet."
NO_REPLICAS_MESSAGE = "No replicas are available yet."

EMPTY_DETAILS: dict[str, Any] = {
    "deploy_mode": "MULTI_APP", "controller_info": {}, "proxies": {}, "applications": {},
    "target_capacity": None,
}

_APP_PRIORITY = ("DEPLOY_FAILED", "UNHEALTHY", "DEPLOYING")


def validate_deploy_config(body: Any) -> dict[str, Any]:
    """``ServeDeploySchema`` validation; raises ``ValueError`` with the reason."""
    if not isinstance(body, dict):
        raise ValueError("1 validation error for ServeDeploySchema\n  value is not a valid dict")
    apps = body.get("applications") or []
    if not isinstance(apps, list):
        raise ValueError("applications: value is not a valid list")
    names: list[str] = []
    prefixes: list[str] = []
    for app in apps:
        if not isinstance(app, dict) or not app.get("import_path"):
            raise ValueError("1 validation error for ServeDeploySchema\napplications -> "
                             "import_path\n  field required (type=value_error.missing)")
        if "host" in app or "port" in app:
            raise ValueError("host and port are not allowed inside an application; set them "
                             "in http_options")
        name = app.get("name", "default")
        if not name:
            raise ValueError("Application names must be nonempty.")
        names.append(name)
        prefix = app.get("route_prefix", "/")
        if prefix is not None:
            prefixes.append(prefix)
    for label, values in (("names", names), ("route_prefix", prefixes)):
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise ValueError(f"Found duplicate application {label}: {dupes}. Application "
                             f"{label} must be unique.")
    return body


def _deployment_names(app: dict[str, Any]) -> list[tuple[str, int, float]]:
    listed = app.get("deployments") or []
    if listed:
        return [(d["name"], int(d.get("num_replicas", 1) or 1),
                 float((d.get("ray_actor_options") or {}).get("num_cpus", 1.0)))
                for d in listed]
    attr = str(app["import_path"]).replace(":", ".").rsplit(".", 1)[-1]
    return [(attr, 1, 1.0)]


#: Deployment options real Serve applies without restarting replicas (a "lightweight update").
LIGHTWEIGHT_OPTIONS = ("num_replicas", "user_config", "autoscaling_config",
                       "max_ongoing_requests", "max_queued_requests",
                       "graceful_shutdown_wait_loop_s", "graceful_shutdown_timeout_s",
                       "health_check_period_s", "health_check_timeout_s", "logging_config")


def _code_of(app: dict[str, Any]) -> dict[str, Any]:
    """An app's config without its lightweight options: equal code means no replica restart."""
    out = dict(app)
    out["deployments"] = [{k: v for k, v in d.items() if k not in LIGHTWEIGHT_OPTIONS}
                          for d in app.get("deployments") or []]
    return out


class ServeController:
    """The Serve controller actor (hosted by a raylet; see `emu.ray.workloads`)."""

    def __init__(self) -> None:
        self.rt: ActorRuntime | None = None
        self.state: dict[str, Any] = {"apps": {}, "proxy_location": "EveryNode",
                                      "http_options": {"host": "0.0.0.0", "port": SERVE_PORT},
                                      "target_capacity": None}
        self._saved = b""
        self._seq = 0
        self._pushed: dict[str, bytes] = {}
        self._failures: dict[str, int] = {}
        self._last_health = 0.0

    async def _attach_runtime(self, rt: ActorRuntime) -> None:
        self.rt = rt
        saved = await rt.gcs.kv_get(SERVE_NAMESPACE, CHECKPOINT_KEY)
        if saved:
            self.state = orjson.loads(saved)
            self._saved = saved
            rt.log("serve_controller_recovered", apps=sorted(self.state["apps"]))
        rt.spawn(self._loop(), name="serve:control-loop")

    @property
    def _rt(self) -> ActorRuntime:
        assert self.rt is not None
        return self.rt

    def ping(self) -> str:
        return "pong"

    # -- API --------------------------------------------------------------------------------------

    async def deploy_apps(self, config: dict[str, Any]) -> None:
        """Apply a declarative config: new and changed apps redeploy, missing apps are deleted."""
        validate_deploy_config(config)
        now = self._rt.now
        http = config.get("http_options")
        if isinstance(http, dict) and not self.state["apps"]:
            # Serve starts its proxies with the first config's http_options; a later config
            # can't move them (Ray warns and keeps the running options)
            self.state["http_options"] = {"host": str(http.get("host", "0.0.0.0")),
                                          "port": int(http.get("port", SERVE_PORT))}
        self.state["proxy_location"] = config.get("proxy_location", "EveryNode")
        self.state["target_capacity"] = config.get("target_capacity")
        wanted = {a.get("name", "default"): a for a in config.get("applications") or []}
        apps: dict[str, Any] = self.state["apps"]
        for name, app in apps.items():
            if name not in wanted:
                app["status"] = "DELETING"
                app["message"] = "Deleting application."
        for name, spec in wanted.items():
            current = apps.get(name)
            if current is not None and current["config"] == spec \
                    and current["status"] != "DELETING":
                continue
            if current is not None and current["status"] != "DELETING" and current["built"] \
                    and _code_of(current["config"]) == _code_of(spec):
                await self._lightweight_update(current, spec)
                continue
            old_replicas = self._all_replicas(current) if current else []
            apps[name] = {
                "name": name, "route_prefix": spec.get("route_prefix", "/"),
                "import_path": spec["import_path"], "config": spec, "status": "DEPLOYING",
                "message": "", "last_deployed_time_s": now, "deploy_started": now,
                "built": False, "docs_path": None,
                "deployments": {
                    d: {"name": d, "status": "UPDATING",
                        "status_trigger": "CONFIG_UPDATE_STARTED", "message": "",
                        "target_num_replicas": n, "num_cpus": cpus, "replicas": {}}
                    for d, n, cpus in _deployment_names(spec)},
            }
            await self._stop_replicas(old_replicas)
        await self._checkpoint()
        await self._reconcile()

    async def _lightweight_update(self, app: dict[str, Any], spec: dict[str, Any]) -> None:
        """Only lightweight options changed (``num_replicas``, ``user_config``, autoscaling, ...):
        as real Serve, the running replicas stay (no outage); a deployment scaled down stops its
        newest surplus replicas, one scaled up starts more."""
        app["config"] = spec
        for dep_name, n, _cpus in _deployment_names(spec):
            dep = app["deployments"].get(dep_name)
            if dep is None or dep["target_num_replicas"] == n:
                continue
            surplus = sorted(dep["replicas"])[n:]
            dep["target_num_replicas"] = n
            await self._stop_replicas([dep["replicas"].pop(rid) for rid in surplus])
            dep.update(status="UPSCALING" if surplus == [] else "DOWNSCALING",
                       status_trigger="CONFIG_UPDATE_STARTED", message="")
        self._rt.log("serve_lightweight_update", app=app["name"])

    async def shutdown(self) -> None:
        """``serve.shutdown()``: stop everything and forget the checkpoint."""
        for app in self.state["apps"].values():
            await self._stop_replicas(self._all_replicas(app))
        self.state["apps"] = {}
        await self._push_routes(force=True)
        await self._rt.gcs.kv_del(SERVE_NAMESPACE, CHECKPOINT_KEY)
        self._saved = b""

    def get_details(self) -> dict[str, Any]:
        rt = self._rt
        apps: dict[str, Any] = {}
        for name, app in sorted(self.state["apps"].items()):
            deployments = {}
            for dname, dep in app["deployments"].items():
                deployments[dname] = {
                    "name": dname, "status": dep["status"],
                    "status_trigger": dep["status_trigger"], "message": dep["message"],
                    "deployment_config": {"name": dname,
                                          "num_replicas": dep["target_num_replicas"]},
                    "target_num_replicas": dep["target_num_replicas"],
                    "required_resources": {"CPU": dep["num_cpus"]},
                    "replicas": [
                        {"replica_id": rid, "state": r["state"], "node_id": r["node_id"],
                         "node_ip": r["node_ip"], "actor_name": f"SERVE_REPLICA::{name}#{rid}",
                         "start_time_s": r["start_time_s"], "pid": None}
                        for rid, r in sorted(dep["replicas"].items())],
                }
            apps[name] = {
                "name": name, "route_prefix": app["route_prefix"], "docs_path": None,
                "status": app["status"], "message": app["message"],
                "last_deployed_time_s": app["last_deployed_time_s"],
                "deployed_app_config": app["config"], "source": "declarative",
                "deployments": deployments,
            }
        proxies = {node_id: {"node_id": node_id, "status": "HEALTHY"}
                   for node_id in sorted(self._pushed)}
        return {
            "controller_info": {"node_id": rt.node_id, "node_ip": rt.node_ip,
                                "actor_id": rt.actor_id, "actor_name": CONTROLLER_NAME},
            "proxy_location": self.state["proxy_location"],
            "http_options": self.state["http_options"], "grpc_options": {"port": 9000},
            "proxies": proxies, "deploy_mode": "MULTI_APP", "applications": apps,
            "target_capacity": self.state["target_capacity"], "target_groups": [],
        }

    # -- control loop -----------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            try:
                await self._reconcile()
            except (NetworkError, RpcError) as err:
                self._rt.log("serve_control_loop_error", error=str(err))
            await self._rt.sleep(CONTROL_LOOP_PERIOD_S)

    @staticmethod
    def _all_replicas(app: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for dep in app["deployments"].values() for r in dep["replicas"].values()]

    async def _checkpoint(self) -> None:
        blob = orjson.dumps(self.state, option=orjson.OPT_SORT_KEYS)
        if blob != self._saved:
            await self._rt.gcs.kv_put(SERVE_NAMESPACE, CHECKPOINT_KEY, blob)
            self._saved = blob

    def _behaviour(self, app: dict[str, Any]) -> ServeAppBehaviour:
        return self._rt.config.serve_behaviour(app["import_path"])

    async def _reconcile(self) -> None:
        rt = self._rt
        nodes = await rt.gcs.alive_nodes()
        alive = {n["node_id"]: n for n in nodes}
        health_due = rt.now - self._last_health >= REPLICA_HEALTH_PERIOD_S
        states = await self._replica_states(alive) if health_due or self._starting() else {}
        if health_due:
            self._last_health = rt.now
        for name, app in list(self.state["apps"].items()):
            if app["status"] == "DELETING":
                if app.get("stopping"):  # replicas were told to stop on an earlier pass
                    del self.state["apps"][name]
                    continue
                await self._stop_replicas(self._all_replicas(app))
                for dep in app["deployments"].values():
                    dep["replicas"] = {}
                app["stopping"] = True
                continue
            behaviour = self._behaviour(app)
            if not app["built"]:
                if rt.now < app["deploy_started"] + behaviour.build_seconds:
                    continue
                if behaviour.fail_message is not None:
                    app.update(status="DEPLOY_FAILED", message=behaviour.fail_message, built=True)
                    for dep in app["deployments"].values():
                        dep.update(status="DEPLOY_FAILED", message=behaviour.fail_message)
                    continue
                app["built"] = True
            if app["status"] == "DEPLOY_FAILED":
                continue
            for dep in app["deployments"].values():
                await self._reconcile_deployment(app, dep, alive, states, health_due, behaviour)
            statuses = [d["status"] for d in app["deployments"].values()]
            status = next((s for s in _APP_PRIORITY
                           if s in statuses or (s == "DEPLOYING" and "UPDATING" in statuses)),
                          "RUNNING")
            app["status"] = status
            app["message"] = "" if status == "RUNNING" else app["message"]
        await self._push_routes()
        await self._checkpoint()

    def _starting(self) -> bool:
        return any(r["state"] == "STARTING" for app in self.state["apps"].values()
                   for r in self._all_replicas(app))

    async def _replica_states(self, alive: dict[str, Any]) -> dict[str, str | None]:
        """replica id → its state on its node, or None if the node didn't answer."""
        by_node: dict[str, list[str]] = {}
        for app in self.state["apps"].values():
            for rid, replica in ((rid, r) for dep in app["deployments"].values()
                                 for rid, r in dep["replicas"].items()):
                by_node.setdefault(replica["node_id"], []).append(rid)
        states: dict[str, str | None] = {}
        for node_id, rids in sorted(by_node.items()):
            node = alive.get(node_id)
            answer: dict[str, str] = {}
            if node is not None:
                try:
                    answer = await self._rt.call(node["raylet_address"],
                                                 {"method": "ListReplicas"},
                                                 verb="ListReplicas", timeout=30.0)
                except (NetworkError, RpcError):
                    answer = {}
            for rid in rids:
                states[rid] = answer.get(rid)
        return states

    async def _reconcile_deployment(self, app: dict[str, Any], dep: dict[str, Any],
                                    alive: dict[str, Any], states: dict[str, str | None],
                                    health_due: bool, behaviour: ServeAppBehaviour) -> None:
        for rid, replica in list(dep["replicas"].items()):
            state = states.get(rid, replica["state"]) if rid in states else replica["state"]
            if state is None or replica["node_id"] not in alive:
                if health_due or replica["node_id"] not in alive:
                    self._failures[rid] = self._failures.get(rid, 0) + 1
                if self._failures.get(rid, 0) >= REPLICA_HEALTH_THRESHOLD \
                        or replica["node_id"] not in alive:
                    del dep["replicas"][rid]
                    self._failures.pop(rid, None)
                    if dep["status"] == "HEALTHY":
                        dep.update(status="UNHEALTHY", status_trigger="HEALTH_CHECK_FAILED",
                                   message=f"Replica {rid} failed its health check.")
                        app["message"] = f"Deployment '{dep['name']}' is UNHEALTHY."
                continue
            self._failures.pop(rid, None)
            replica["state"] = state
        missing = dep["target_num_replicas"] - len(dep["replicas"])
        for _ in range(max(missing, 0)):
            node = self._pick_node(alive, dep["num_cpus"], dep)
            if node is None:
                break
            self._seq += 1
            rid = f"{self._rt.actor_id[:4]}{self._seq:04d}"
            try:
                await self._rt.call(node["raylet_address"], {
                    "method": "StartReplica", "replica_id": rid, "app": app["name"],
                    "deployment": dep["name"], "import_path": app["import_path"],
                    "start_seconds": behaviour.replica_start_seconds}, verb="StartReplica")
            except (NetworkError, RpcError):
                continue
            dep["replicas"][rid] = {"replica_id": rid, "node_id": node["node_id"],
                                    "node_ip": node["node_ip"],
                                    "raylet_address": node["raylet_address"],
                                    "state": "STARTING", "start_time_s": self._rt.now}
        running = sum(1 for r in dep["replicas"].values() if r["state"] == "RUNNING")
        if running >= dep["target_num_replicas"] and dep["status"] != "HEALTHY":
            trigger = "UPSCALE_COMPLETED" if dep["status"] == "UNHEALTHY" \
                else "CONFIG_UPDATE_COMPLETED"
            dep.update(status="HEALTHY", status_trigger=trigger, message="")

    @staticmethod
    def _pick_node(alive: dict[str, Any], num_cpus: float,
                   dep: dict[str, Any]) -> dict[str, Any] | None:
        """Serve's default spread: the feasible node with the fewest of this deployment's
        replicas (registration order breaks ties)."""
        feasible = [n for n in alive.values() if float(n["resources"].get("CPU", 0.0)) >= num_cpus]
        if not feasible:
            return None
        load = {n["node_id"]: 0 for n in feasible}
        for replica in dep["replicas"].values():
            if replica["node_id"] in load:
                load[replica["node_id"]] += 1
        return min(feasible, key=lambda n: load[n["node_id"]])

    async def _push_routes(self, force: bool = False) -> None:
        """Tell each proxy node its route table (the controller's long-poll broadcast)."""
        if self.state["proxy_location"] == "Disabled":
            return
        nodes = await self._rt.gcs.alive_nodes()
        routes = {app["route_prefix"]: name for name, app in sorted(self.state["apps"].items())
                  if app["route_prefix"] is not None and app["built"]
                  and app["status"] != "DEPLOY_FAILED"}
        endpoints: dict[str, list[list[str]]] = {}
        replica_nodes: set[str] = set()
        for name, app in sorted(self.state["apps"].items()):
            for dep in app["deployments"].values():
                for rid, r in sorted(dep["replicas"].items()):
                    replica_nodes.add(r["node_id"])
                    if r["state"] == "RUNNING":
                        endpoints.setdefault(name, []).append([r["raylet_address"], rid])
        for node in nodes:
            qualifies = node.get("is_head") or (
                self.state["proxy_location"] == "EveryNode" and node["node_id"] in replica_nodes)
            if not qualifies and node["node_id"] not in self._pushed:
                continue
            message = {"method": "UpdateRoutes", "routes": routes, "endpoints": endpoints,
                       "draining": not qualifies,
                       "port": int(self.state["http_options"].get("port", SERVE_PORT))}
            blob = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
            if not force and self._pushed.get(node["node_id"]) == blob:
                continue
            try:
                await self._rt.call(node["raylet_address"], message, verb="UpdateRoutes")
                self._pushed[node["node_id"]] = blob
            except (NetworkError, RpcError):
                self._pushed.pop(node["node_id"], None)
        alive_ids = {n["node_id"] for n in nodes}
        for node_id in [n for n in self._pushed if n not in alive_ids]:
            del self._pushed[node_id]

    async def _stop_replicas(self, replicas: list[dict[str, Any]]) -> None:
        by_address: dict[str, list[str]] = {}
        for r in replicas:
            by_address.setdefault(r["raylet_address"], []).append(r["replica_id"])
        for address, rids in sorted(by_address.items()):
            with contextlib.suppress(NetworkError, RpcError):
                await self._rt.call(address, {"method": "StopReplica", "replica_ids": rids},
                                    verb="StopReplica")


class NodeServe:
    """A node's Serve side: its replicas and its proxy (started on the first route update)."""

    def __init__(self, raylet: Raylet) -> None:
        self.raylet = raylet
        self.replicas: dict[str, dict[str, Any]] = {}
        self.routes: dict[str, str] | None = None
        self.endpoints: dict[str, list[list[str]]] = {}
        self.draining = False
        self.proxy_address: str | None = None
        self._rr = 0
        self.requests = 0
        #: Called when the proxy's health may have changed (the container's readiness).
        self.on_change: Callable[[], None] | None = None

    def methods(self) -> dict[str, Any]:
        return {"StartReplica": self.rpc_start_replica, "StopReplica": self.rpc_stop_replica,
                "ListReplicas": self.rpc_list_replicas, "ReplicaRequest": self.rpc_request,
                "UpdateRoutes": self.rpc_update_routes}

    async def rpc_start_replica(self, req: dict[str, Any]) -> dict[str, Any]:
        rid = req["replica_id"]
        if rid in self.replicas:
            return {}
        self.replicas[rid] = {"app": req["app"], "deployment": req["deployment"],
                              "import_path": req["import_path"], "state": "STARTING"}

        async def start() -> None:
            await self.raylet.ctx.process.sleep(float(req.get("start_seconds", 0.0)))
            if rid in self.replicas:
                self.replicas[rid]["state"] = "RUNNING"

        self.raylet.ctx.process.spawn(start(), name=f"serve:replica-{rid}")
        return {}

    async def rpc_stop_replica(self, req: dict[str, Any]) -> dict[str, Any]:
        for rid in req["replica_ids"]:
            self.replicas.pop(rid, None)
        return {}

    async def rpc_list_replicas(self, req: dict[str, Any]) -> dict[str, str]:
        return {rid: r["state"] for rid, r in sorted(self.replicas.items())}

    async def rpc_request(self, req: dict[str, Any]) -> dict[str, Any]:
        replica = self.replicas.get(req["replica_id"])
        if replica is None or replica["state"] != "RUNNING":
            raise RpcError("UNAVAILABLE", f"replica {req['replica_id']} is not running here")
        request = req["request"]
        behaviour = self.raylet.config.serve_behaviour(replica["import_path"])
        if behaviour.handler is None:
            return response(200, f"{replica['app']}: {request.get('path', '/')}")
        result = behaviour.handler(request)
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, dict) and "status" in result:
            return result
        return response(200, str(result))

    async def rpc_update_routes(self, req: dict[str, Any]) -> dict[str, Any]:
        self.routes = dict(req["routes"])
        self.endpoints = {k: [list(e) for e in v] for k, v in req["endpoints"].items()}
        self.draining = bool(req.get("draining"))
        port = int(req.get("port", SERVE_PORT))
        if self.proxy_address is not None and not self.proxy_address.endswith(f":{port}"):
            # the first config's http_options arrived after an empty route table had started
            # the proxy: Serve (re)starts its proxies on the configured port
            self.raylet.ctx.network.unregister(self.proxy_address)
            self.proxy_address = None
        if self.proxy_address is None:
            self.proxy_address = serve_http(self.raylet.ctx, port, self._proxy)
            self.raylet.log("serve_proxy_started", address=self.proxy_address)
        if self.on_change is not None:
            self.on_change()
        return {}

    def ready(self) -> tuple[bool, str]:
        if self.draining:
            return False, DRAINING_MESSAGE
        if self.routes is None or not self.routes:
            return False, NO_ROUTES_MESSAGE
        if not self.raylet.is_head and not any(self.endpoints.values()):
            return False, NO_REPLICAS_MESSAGE
        return True, HEALTHY_MESSAGE

    async def _proxy(self, request: HttpRequest) -> dict[str, Any]:
        if request.path in ("/-/healthz", "/-/routes"):
            healthy, message = self.ready()
            if request.path == "/-/healthz" or not healthy:
                return response(200 if healthy else 503, message)
            return json_response(200, self.routes)
        routes = self.routes or {}
        match = None
        for prefix in sorted(routes, key=len, reverse=True):
            if prefix == "/" or request.path == prefix or request.path.startswith(prefix + "/"):
                match = prefix
                break
        if match is None:
            return response(404, f"Path '{request.path}' not found. Please ping "
                                 "http://.../-/routes for route table.")
        app = routes[match]
        endpoints = self.endpoints.get(app) or []
        payload = {"method": request.method, "path": request.path, "body": request.body,
                   "headers": request.headers}
        self.requests += 1
        for i in range(len(endpoints)):
            self._rr += 1
            address, rid = endpoints[(self._rr + i) % len(endpoints)]
            try:
                result: dict[str, Any] = await self.raylet.ctx.call(
                    address, {"method": "ReplicaRequest", "replica_id": rid, "request": payload},
                    verb="ReplicaRequest", timeout=30.0)
                return result
            except (NetworkError, RpcError):
                continue
        return response(503, f"No replicas of application '{app}' are available.")
