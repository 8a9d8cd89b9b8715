"""Ray Serve: the controller (a detached actor), replicas and proxies on nodes, and the
dashboard's Serve REST handlers.

Follows ``python/ray/serve/_private/{controller,application_state,deployment_state,proxy}.py`` and
``dashboard/modules/serve/serve_head.py`` (FACTS §5):
- the controller is the detached actor ``SERVE_CONTROLLER_ACTOR`` (namespace ``serve``,
  ``max_restarts=-1``, preferring the head node); it checkpoints its state into the GCS internal KV
  (namespace ``serve``) on every change and restores it when it starts, so Serve state survives a
  head restart exactly when the GCS's storage does;
- ``PUT`` is declarative: a new app, or a new version of an app's code (``import_path``,
  ``runtime_env``, ``args``), goes DEPLOYING while its build task runs (``build_seconds``; a
  ``fail_message`` makes it DEPLOY_FAILED), the deployments already running keep serving
  meanwhile; then each deployment gets its target (``num_replicas`` or the autoscaling start,
  scaled by ``target_capacity``) and its version (the code and the heavyweight
  ``ray_actor_options``/placement options, Serve's ``DeploymentVersion``). Replicas of another
  version roll as Serve's ``_check_and_stop_outdated_version_replicas`` does (at most
  ``max(20% of the target, 1)`` stopping at a time, replacements started at once); options that
  keep the version (``num_replicas``, ``user_config``, ``max_ongoing_requests``,
  ``target_capacity``, ...) apply to the running replicas. Apps missing from the body are
  DELETING until their replicas stopped, then gone;
- a replica that stops drains: no new requests, then every ``graceful_shutdown_wait_loop_s`` a
  look at its in-flight requests, killed with them at ``graceful_shutdown_timeout_s``;
- replica health: every 10 s; 3 consecutive failures (node gone or replica missing) replace the
  replica, and the deployment and app are UNHEALTHY until the replacement runs; replicas no
  node can take are the autoscaler's demand (``unplaced``, read from the checkpoint);
- proxies (``EveryNode``): on the head node and every node with a replica, on port 8000 (or
  the first config's ``http_options.port``), with ``/-/healthz`` (``success``; 503 "Route
  table is not populated yet." / "No replicas are available yet." on a worker node without
  running replicas / "This node is being drained.") and ``/-/routes``; other paths go to a
  replica of the app with the longest matching route prefix, below its
  ``max_ongoing_requests``, or wait in a first-come queue until one has room; a proxy whose
  node lost its replicas drains for 30 s, then stops.

Over 500 lines because the controller's state machine, the node side it drives and the REST
handlers share one schema (the ServeInstanceDetails shape); apart they would duplicate it.
"""

from __future__ import annotations

import asyncio
import contextlib
import decimal
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from emu.kernel.network import ConnectionRefused, NetworkError

from .config import ServeAppBehaviour
from .net import HttpRequest, RpcError, answer_to_nobody, json_response, response, serve_http

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


def _base_replicas(dep: dict[str, Any]) -> int:
    """A deployment's replica count before ``target_capacity``: ``num_replicas``, or for an
    autoscaling deployment its ``initial_replicas`` else ``min_replicas`` (the fake does not
    autoscale on load, so it stays there)."""
    auto = dep.get("autoscaling_config")
    if isinstance(auto, dict) or dep.get("num_replicas") == "auto":
        auto = auto if isinstance(auto, dict) else {}
        initial = auto.get("initial_replicas")
        return int(initial if initial is not None else auto.get("min_replicas", 1))
    return int(dep.get("num_replicas", 1) if dep.get("num_replicas") is not None else 1)


def _deployment_names(app: dict[str, Any]) -> list[tuple[str, int, float]]:
    listed = app.get("deployments") or []
    if listed:
        return [(d["name"], _base_replicas(d),
                 float((d.get("ray_actor_options") or {}).get("num_cpus", 1.0)))
                for d in listed]
    attr = str(app["import_path"]).replace(":", ".").rsplit(".", 1)[-1]
    return [(attr, 1, 1.0)]


def capacity_adjusted(num_replicas: int, target_capacity: float | None) -> int:
    """Serve's ``get_capacity_adjusted_num_replicas``: ``num_replicas`` scaled by
    ``target_capacity`` percent, rounded half up, never below 1 unless the capacity or the count
    is 0."""
    if target_capacity is None or target_capacity == 100:
        return num_replicas
    if target_capacity == 0 or num_replicas == 0:
        return 0
    scaled = decimal.Decimal(num_replicas * target_capacity) / decimal.Decimal(100)
    return max(1, int(scaled.to_integral_value(rounding=decimal.ROUND_HALF_UP)))


#: Deployment options real Serve applies without restarting replicas (a "lightweight update").
#: Deployment options that restart replicas when they change (Serve's ``DeploymentVersion``
#: heavyweight fields); every other option (``num_replicas``, ``user_config``, autoscaling,
#: ``max_ongoing_requests``, graceful shutdown, health checks, logging) is applied in place.
HEAVYWEIGHT_OPTIONS = ("ray_actor_options", "placement_group_bundles",
                       "placement_group_strategy", "max_replicas_per_node")
#: App fields whose change rebuilds the app (its code): everything else is an option update.
APP_CODE_FIELDS = ("import_path", "runtime_env", "args")
#: Serve's deployment defaults for the options the fake acts on.
DEFAULT_MAX_ONGOING_REQUESTS = 5
DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S = 2.0
DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_S = 20.0
#: ``RAY_SERVE_PROXY_MIN_DRAINING_PERIOD_S``: a draining proxy keeps serving at least this long.
PROXY_MIN_DRAINING_PERIOD_S = 30.0


def _app_code(app: dict[str, Any]) -> dict[str, Any]:
    return {k: app.get(k) for k in APP_CODE_FIELDS}


def _deployment_version(app: dict[str, Any], name: str) -> str:
    """The replica version of deployment ``name``: its app's code and its heavyweight options.
    Replicas of another version are rolled (stopped and replaced), never reconfigured."""
    dep: dict[str, Any] = next((d for d in app.get("deployments") or [] if d.get("name") == name),
                               {})
    blob = orjson.dumps({"code": _app_code(app),
                         "options": {k: dep.get(k) for k in HEAVYWEIGHT_OPTIONS}},
                        option=orjson.OPT_SORT_KEYS)
    return hashlib.sha1(blob).hexdigest()[:12]


def _deployment_options(app: dict[str, Any], name: str) -> dict[str, float]:
    dep: dict[str, Any] = next((d for d in app.get("deployments") or [] if d.get("name") == name),
                               {})
    return {
        "max_ongoing_requests": float(dep.get("max_ongoing_requests")
                                      or DEFAULT_MAX_ONGOING_REQUESTS),
        "wait_loop_s": float(dep.get("graceful_shutdown_wait_loop_s")
                             or DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S),
        "timeout_s": float(dep.get("graceful_shutdown_timeout_s")
                           or DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_S),
    }


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
        """Apply a declarative config: new apps build and deploy, changed apps update (a code
        change rebuilds the app while its running deployments keep serving, then rolls their
        replicas; an options-only change applies at once), missing apps are deleted."""
        validate_deploy_config(config)
        now = self._rt.now
        http = config.get("http_options")
        if isinstance(http, dict) and not self.state["apps"]:
            # Serve starts its proxies with the first config's http_options; a later config
            # can't move them (Ray warns and keeps the running options)
            self.state["http_options"] = {"host": str(http.get("host", "0.0.0.0")),
                                          "port": int(http.get("port", SERVE_PORT))}
        self.state["proxy_location"] = config.get("proxy_location", "EveryNode")
        capacity_changed = self.state.get("target_capacity") != config.get("target_capacity")
        self.state["target_capacity"] = config.get("target_capacity")
        wanted = {a.get("name", "default"): a for a in config.get("applications") or []}
        apps: dict[str, Any] = self.state["apps"]
        for name, app in apps.items():
            if name not in wanted:
                app["status"] = "DELETING"
                app["message"] = "Deleting application."
                app.pop("target_config", None)
        for name, spec in wanted.items():
            current = apps.get(name)
            if current is None or current["status"] == "DELETING" or not current["built"]:
                if current is not None and current["status"] != "DELETING" \
                        and current.get("target_config", current["config"]) == spec:
                    continue  # the same config is still building
                old = current["deployments"] if current is not None else {}
                apps[name] = {
                    "name": name, "route_prefix": spec.get("route_prefix", "/"),
                    "import_path": spec["import_path"], "config": spec, "status": "DEPLOYING",
                    "message": "", "last_deployed_time_s": now, "deploy_started": now,
                    "built": False, "docs_path": None, "target_config": spec,
                    "deployments": old,  # replicas of a deleted app's redeploy roll or go
                }
                continue
            target = current.get("target_config", current["config"])
            if target == spec:
                if capacity_changed and "target_config" not in current:
                    self._apply_config(current, spec)  # a target_capacity step
                continue
            if _app_code(target) == _app_code(spec):
                current.pop("target_config", None)
                self._apply_config(current, spec)
                continue
            # new code: rebuild while the running deployments keep serving
            current.update(target_config=spec, status="DEPLOYING", message="",
                           deploy_started=now, last_deployed_time_s=now)
        await self._checkpoint()
        await self._reconcile()

    def _apply_config(self, app: dict[str, Any], spec: dict[str, Any]) -> None:
        """Make ``spec`` (built) the app's target, as Serve's ``apply_app_config`` does: each
        deployment's target replica count (``target_capacity`` applied) and version; a
        deployment no longer listed is deleted (its replicas stop gracefully). Replicas of an
        outdated version are rolled by `_reconcile_deployment`; the others stay (a lightweight
        update: ``user_config``, ``num_replicas``, autoscaling, ...)."""
        app.update(config=spec, import_path=spec["import_path"],
                   route_prefix=spec.get("route_prefix", "/"))
        deployments: dict[str, Any] = app["deployments"]
        listed = _deployment_names(spec)
        names = {d for d, _n, _c in listed}
        for dep_name, dep in deployments.items():
            if dep_name not in names and not dep.get("deleting"):
                dep.update(deleting=True, target_num_replicas=0, status="UPDATING",
                           status_trigger="DELETING", message="")
        # an update of deployments already running, none of whose replicas roll
        lightweight = any(not d.get("deleting") for d in deployments.values())
        for dep_name, base, cpus in listed:
            n = self._adjusted(base)
            version = _deployment_version(spec, dep_name)
            options = _deployment_options(spec, dep_name)
            dep = deployments.get(dep_name)
            if dep is None or dep.get("deleting"):
                deployments[dep_name] = {
                    "name": dep_name, "status": "UPDATING",
                    "status_trigger": "CONFIG_UPDATE_STARTED", "message": "",
                    "target_num_replicas": n, "num_cpus": cpus, "replicas":
                        dep["replicas"] if dep is not None else {},
                    "version": version, **options}
                continue
            old_n = dep["target_num_replicas"]
            rolled = dep.get("version") != version
            dep.update(target_num_replicas=n, num_cpus=cpus, version=version, **options)
            if rolled:
                lightweight = False
                dep.update(status="UPDATING", status_trigger="CONFIG_UPDATE_STARTED", message="")
            elif n != old_n:
                dep.update(status="UPSCALING" if n > old_n else "DOWNSCALING",
                           status_trigger="CONFIG_UPDATE_STARTED", message="")
        if lightweight:
            self._rt.log("serve_lightweight_update", app=app["name"])

    def _adjusted(self, num_replicas: int) -> int:
        return capacity_adjusted(num_replicas, self.state.get("target_capacity"))

    async def shutdown(self) -> None:
        """``serve.shutdown()``: stop everything and forget the checkpoint."""
        for app in self.state["apps"].values():
            await self._stop_replicas(self._all_replicas(app), graceful=False)
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
                if dep.get("deleting") and not dep["replicas"]:
                    continue
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
        states = await self._replica_states(alive) if health_due or self._in_transition() \
            else {}
        if health_due:
            self._last_health = rt.now
        for name, app in list(self.state["apps"].items()):
            if app["status"] == "DELETING":
                if not any(dep["replicas"] for dep in app["deployments"].values()):
                    del self.state["apps"][name]
                    continue
                for dep in app["deployments"].values():
                    dep.update(target_num_replicas=0, deleting=True)
            elif "target_config" in app:
                behaviour = rt.config.serve_behaviour(app["target_config"]["import_path"])
                if rt.now >= app["deploy_started"] + behaviour.build_seconds:
                    spec = app.pop("target_config")
                    if behaviour.fail_message is not None:
                        # the build failed: the running deployments (if any) stay as they are
                        app.update(status="DEPLOY_FAILED", message=behaviour.fail_message,
                                   built=True)
                        for dep in app["deployments"].values():
                            if not dep["replicas"]:
                                dep.update(status="DEPLOY_FAILED",
                                           message=behaviour.fail_message)
                    else:
                        app["built"] = True
                        self._apply_config(app, spec)
            behaviour = self._behaviour(app)
            for dep_name, dep in list(app["deployments"].items()):
                await self._reconcile_deployment(app, dep, alive, states, health_due, behaviour)
                if dep.get("deleting") and not dep["replicas"]:
                    del app["deployments"][dep_name]
            if app["status"] == "DELETING" or "target_config" in app \
                    or app["status"] == "DEPLOY_FAILED":
                continue
            # Serve's _determine_app_status: a deployment UPDATING, or scaling because of a
            # config update (num_replicas, target_capacity), keeps the app DEPLOYING
            statuses = [d["status"] for d in app["deployments"].values()]
            updating = any(d["status"] == "UPDATING" or (
                d["status"] in ("UPSCALING", "DOWNSCALING")
                and d["status_trigger"] == "CONFIG_UPDATE_STARTED")
                for d in app["deployments"].values())
            status = next((s for s in _APP_PRIORITY
                           if s in statuses or (s == "DEPLOYING" and updating)), "RUNNING")
            app["status"] = status
            app["message"] = "" if status == "RUNNING" else app["message"]
        await self._push_routes()
        await self._checkpoint()

    def _in_transition(self) -> bool:
        """Replicas starting or stopping: their nodes are asked every loop, not every 10 s."""
        return any(r["state"] in ("STARTING", "STOPPING")
                   for app in self.state["apps"].values() for r in self._all_replicas(app))

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
        """One pass of Serve's ``DeploymentState``: replica health and stops, the rolling
        update (``_check_and_stop_outdated_version_replicas``), scaling to the target, then the
        status."""
        version = dep.get("version", "")
        for rid, replica in list(dep["replicas"].items()):
            state = states.get(rid, replica["state"]) if rid in states else replica["state"]
            if replica["state"] == "STOPPING":
                if (rid in states and state is None) or replica["node_id"] not in alive:
                    del dep["replicas"][rid]  # stopped (drained, or killed at the timeout)
                continue
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
        target = dep["target_num_replicas"]
        replicas = dep["replicas"]

        def count(states: tuple[str, ...], *, same: bool | None = None) -> int:
            return sum(1 for r in replicas.values() if r["state"] in states and (
                same is None or (r.get("version", version) == version) == same))

        if target > 0:
            old_running = count(("STARTING", "RUNNING"), same=False)
            old_stopping = count(("STOPPING",), same=False)
            if target >= old_running + old_stopping:
                pending = target - count(("RUNNING",), same=True) - old_running
                rollout = max(int(0.2 * target), 1)
                max_to_stop = max(rollout - pending, 0)
                outdated = [r for _rid, r in sorted(replicas.items())
                            if r["state"] in ("STARTING", "RUNNING")
                            and r.get("version", version) != version][:max_to_stop]
                for r in outdated:
                    await self._stop_replicas([r], graceful=r["state"] == "RUNNING", dep=dep)
        missing = target - count(("STARTING", "RUNNING"))
        dep.pop("unplaced", None)
        for placed in range(max(missing, 0)):
            node = self._pick_node(alive, dep["num_cpus"], dep)
            if node is None:
                # pending replica actors: the autoscaler's demand (emu.ray.autoscaler)
                dep["unplaced"] = missing - placed
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
            replicas[rid] = {"replica_id": rid, "node_id": node["node_id"],
                             "node_ip": node["node_ip"],
                             "raylet_address": node["raylet_address"],
                             "state": "STARTING", "start_time_s": self._rt.now,
                             "version": version}
        if missing < 0:
            # downscale: starting replicas first, then the newest running ones
            live = [r for _rid, r in sorted(replicas.items(), reverse=True)
                    if r["state"] in ("STARTING", "RUNNING")]
            live.sort(key=lambda r: r["state"] != "STARTING")
            for r in live[:-missing]:
                await self._stop_replicas([r], graceful=r["state"] == "RUNNING", dep=dep)
        transitioning = count(("STARTING", "STOPPING"))
        running_same = count(("RUNNING",), same=True)
        if not transitioning and target == running_same == count(("RUNNING",)) \
                and dep["status"] != "HEALTHY" and not dep.get("deleting"):
            trigger = {"UNHEALTHY": "UPSCALE_COMPLETED", "UPSCALING": "UPSCALE_COMPLETED",
                       "DOWNSCALING": "DOWNSCALE_COMPLETED"}.get(dep["status"],
                                                                  "CONFIG_UPDATE_COMPLETED")
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
            if replica["node_id"] in load and replica["state"] != "STOPPING":
                load[replica["node_id"]] += 1
        return min(feasible, key=lambda n: load[n["node_id"]])

    async def _push_routes(self, force: bool = False) -> None:
        """Tell each proxy node its route table (the controller's long-poll broadcast): the
        RUNNING replicas of each app, with their ``max_ongoing_requests``."""
        if self.state["proxy_location"] == "Disabled":
            return
        nodes = await self._rt.gcs.alive_nodes()
        routes = {app["route_prefix"]: name for name, app in sorted(self.state["apps"].items())
                  if app["route_prefix"] is not None and app["built"]
                  and app["status"] != "DELETING"
                  and (app["status"] != "DEPLOY_FAILED" or self._all_replicas(app))}
        endpoints: dict[str, list[list[Any]]] = {}
        replica_nodes: set[str] = set()
        for name, app in sorted(self.state["apps"].items()):
            for dep in app["deployments"].values():
                limit = int(dep.get("max_ongoing_requests", DEFAULT_MAX_ONGOING_REQUESTS))
                for rid, r in sorted(dep["replicas"].items()):
                    replica_nodes.add(r["node_id"])
                    if r["state"] == "RUNNING":
                        endpoints.setdefault(name, []).append([r["raylet_address"], rid, limit])
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

    async def _stop_replicas(self, replicas: list[dict[str, Any]], *, graceful: bool = True,
                             dep: dict[str, Any] | None = None) -> None:
        """Stop replicas: each goes STOPPING (no new requests) and, when ``graceful``, drains on
        its node (``graceful_shutdown_wait_loop_s`` / ``graceful_shutdown_timeout_s`` of its
        deployment) before it exits; it leaves the controller's state once its node no longer
        lists it."""
        by_address: dict[str, list[str]] = {}
        for r in replicas:
            r["state"] = "STOPPING"
            by_address.setdefault(r["raylet_address"], []).append(r["replica_id"])
        options = dep or {}
        for address, rids in sorted(by_address.items()):
            with contextlib.suppress(NetworkError, RpcError):
                await self._rt.call(address, {
                    "method": "StopReplica", "replica_ids": rids, "graceful": graceful,
                    "wait_loop_s": float(options.get("wait_loop_s",
                                                     DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S)),
                    "timeout_s": float(options.get("timeout_s",
                                                   DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_S))},
                    verb="StopReplica")


class NodeServe:
    """A node's Serve side: its replicas and its proxy (started on the first route update)."""

    def __init__(self, raylet: Raylet) -> None:
        self.raylet = raylet
        self.replicas: dict[str, dict[str, Any]] = {}
        self.routes: dict[str, str] | None = None
        self.endpoints: dict[str, list[list[Any]]] = {}
        self.draining = False
        self.draining_since: float | None = None
        self.proxy_address: str | None = None
        self._rr = 0
        self.requests = 0
        #: Requests this proxy has sent to each replica and not yet had answered (its router's
        #: view of the replica's queue, capped by ``max_ongoing_requests``).
        self._sent: dict[str, int] = {}
        #: Requests the proxy is handling right now (a draining proxy waits for them).
        self.ongoing = 0
        #: Set whenever a replica may have become available (routes pushed, a request done).
        self._available = asyncio.Event()
        #: Bumped by every route update: a request forgets the replicas that refused it then.
        self._routes_generation = 0
        #: Requests queued per app: a new one queues behind them (first come, first served;
        #: the event wakes waiters in the order they started waiting).
        self._queued: dict[str, int] = {}
        #: Called when the proxy's health may have changed (the container's readiness).
        self.on_change: Callable[[], None] | None = None

    def methods(self) -> dict[str, Any]:
        return {"StartReplica": self.rpc_start_replica, "StopReplica": self.rpc_stop_replica,
                "ListReplicas": self.rpc_list_replicas, "ReplicaRequest": self.rpc_request,
                "UpdateRoutes": self.rpc_update_routes}

    @property
    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def rpc_start_replica(self, req: dict[str, Any]) -> dict[str, Any]:
        rid = req["replica_id"]
        if rid in self.replicas:
            return {}
        killed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.replicas[rid] = {"app": req["app"], "deployment": req["deployment"],
                              "import_path": req["import_path"], "state": "STARTING",
                              "ongoing": 0, "killed": killed}

        async def start() -> None:
            await self.raylet.ctx.process.sleep(float(req.get("start_seconds", 0.0)))
            replica = self.replicas.get(rid)
            if replica is not None and replica["state"] == "STARTING":
                replica["state"] = "RUNNING"

        self.raylet.ctx.process.spawn(start(), name=f"serve:replica-{rid}")
        return {}

    async def rpc_stop_replica(self, req: dict[str, Any]) -> dict[str, Any]:
        """Stop replicas: at once (``graceful`` false, or not yet RUNNING), else Serve's graceful
        shutdown: no new requests, then every ``wait_loop_s`` a look at the requests in flight;
        gone when none is left, or killed at ``timeout_s`` (its in-flight requests fail)."""
        for rid in req["replica_ids"]:
            replica = self.replicas.get(rid)
            if replica is None or replica["state"] == "STOPPING":
                continue
            if not req.get("graceful", False) or replica["state"] != "RUNNING":
                self._kill(rid)
                continue
            replica["state"] = "STOPPING"
            self.raylet.ctx.process.spawn(
                self._drain(rid, float(req.get("wait_loop_s", DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S)),
                            float(req.get("timeout_s", DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_S))),
                name=f"serve:replica-{rid}-drain")
        return {}

    async def _drain(self, rid: str, wait_loop_s: float, timeout_s: float) -> None:
        # an absolute deadline: a time left computed as ``timeout - (now - started)`` can come
        # out a few femtoseconds, a sleep below the clock's resolution, and the drain would spin
        # at one virtual instant for ever
        deadline = self._now + timeout_s
        while rid in self.replicas:
            left = deadline - self._now
            await self.raylet.ctx.process.sleep(min(wait_loop_s, left) if left > 1e-9
                                                else wait_loop_s)
            replica = self.replicas.get(rid)
            if replica is None:
                return
            if replica["ongoing"] == 0:
                self.raylet.log("serve_replica_drained", replica=rid)
                break
            if deadline - self._now <= 1e-9:
                self.raylet.log("serve_replica_killed", replica=rid, in_flight=replica["ongoing"],
                                after=timeout_s)
                break
        self._kill(rid)

    def _kill(self, rid: str) -> None:
        replica = self.replicas.pop(rid, None)
        if replica is not None and not replica["killed"].done():
            replica["killed"].set_result(None)

    async def rpc_list_replicas(self, req: dict[str, Any]) -> dict[str, str]:
        return {rid: r["state"] for rid, r in sorted(self.replicas.items())}

    async def rpc_request(self, req: dict[str, Any]) -> dict[str, Any]:
        replica = self.replicas.get(req["replica_id"])
        if replica is None or replica["state"] != "RUNNING":
            raise RpcError("UNAVAILABLE", f"replica {req['replica_id']} is not running here")
        replica["ongoing"] += 1
        try:
            work = asyncio.ensure_future(self._handle(replica, req["request"]))
            try:
                await asyncio.wait([work, replica["killed"]],
                                   return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                work.add_done_callback(answer_to_nobody)  # the caller left: nobody to answer
                raise
            if not work.done():
                work.cancel()
                raise RpcError("ACTOR_DIED", f"replica {req['replica_id']} died while handling "
                                             "the request")
            return work.result()
        finally:
            replica["ongoing"] -= 1

    async def _handle(self, replica: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        behaviour = self.raylet.config.serve_behaviour(replica["import_path"])
        if behaviour.request_seconds > 0:
            await self.raylet.ctx.process.sleep(behaviour.request_seconds)
        if behaviour.handler is None:
            return response(200, f"{replica['app']}: {request.get('path', '/')}")
        result = behaviour.handler(request)
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, dict) and "status" in result:
            return result
        return response(200, str(result))

    async def rpc_update_routes(self, req: dict[str, Any]) -> dict[str, Any]:
        self._routes_generation += 1
        self.routes = dict(req["routes"])
        self.endpoints = {k: [list(e) for e in v] for k, v in req["endpoints"].items()}
        draining = bool(req.get("draining"))
        if draining and not self.draining:
            self.draining_since = self._now
            self.raylet.ctx.process.spawn(self._drain_proxy(), name="serve:proxy-drain")
        self.draining = draining
        port = int(req.get("port", SERVE_PORT))
        if self.proxy_address is not None and not self.proxy_address.endswith(f":{port}"):
            # the first config's http_options arrived after an empty route table had started
            # the proxy: Serve (re)starts its proxies on the configured port
            self.raylet.ctx.network.unregister(self.proxy_address)
            self.proxy_address = None
        if self.proxy_address is None and not draining:
            self.proxy_address = serve_http(self.raylet.ctx, port, self._proxy)
            self.raylet.log("serve_proxy_started", address=self.proxy_address)
        self._available.set()
        if self.on_change is not None:
            self.on_change()
        return {}

    async def _drain_proxy(self) -> None:
        """A draining proxy (its node lost its replicas) answers ``/-/healthz`` 503 but serves
        on for at least ``PROXY_MIN_DRAINING_PERIOD_S`` and until its requests are done, then
        shuts down (connections are refused), as Serve's ``ProxyState`` DRAINING → DRAINED."""
        while self.draining and self.draining_since is not None:
            await self.raylet.ctx.process.sleep(max(
                self.draining_since + PROXY_MIN_DRAINING_PERIOD_S - self._now, 1.0))
            if self.proxy_address is None:
                return
            if self.draining and self._now - self.draining_since >= PROXY_MIN_DRAINING_PERIOD_S \
                    and self.ongoing == 0:
                self.raylet.ctx.network.unregister(self.proxy_address)
                self.raylet.log("serve_proxy_drained", address=self.proxy_address)
                self.proxy_address = None
                return

    def ready(self) -> tuple[bool, str]:
        if self.draining:
            return False, DRAINING_MESSAGE
        if self.routes is None or not self.routes:
            return False, NO_ROUTES_MESSAGE
        if not self.raylet.is_head and not any(self.endpoints.values()):
            return False, NO_REPLICAS_MESSAGE
        return True, HEALTHY_MESSAGE

    def _match(self, path: str) -> str | None:
        routes = self.routes or {}
        for prefix in sorted(routes, key=len, reverse=True):
            if prefix == "/" or path == prefix or path.startswith(prefix + "/"):
                return prefix
        return None

    def _choose(self, app: str, refused: set[str]) -> list[Any] | None:
        """Round robin over the app's running replicas below their ``max_ongoing_requests``
        (``refused``: replicas that turned this request away)."""
        endpoints = self.endpoints.get(app) or []
        for i in range(len(endpoints)):
            endpoint = endpoints[(self._rr + 1 + i) % len(endpoints)]
            limit = int(endpoint[2]) if len(endpoint) > 2 else DEFAULT_MAX_ONGOING_REQUESTS
            if endpoint[1] not in refused and self._sent.get(endpoint[1], 0) < limit:
                self._rr = (self._rr + 1 + i) % len(endpoints)
                return endpoint
        return None

    async def _proxy(self, request: HttpRequest) -> dict[str, Any]:
        if request.path in ("/-/healthz", "/-/routes"):
            healthy, message = self.ready()
            if request.path == "/-/healthz" or not healthy:
                return response(200 if healthy else 503, message)
            return json_response(200, self.routes)
        self.requests += 1
        self.ongoing += 1
        try:
            return await self._route(request)
        finally:
            self.ongoing -= 1

    async def _route(self, request: HttpRequest) -> dict[str, Any]:
        """Serve's router: the request waits (queued first come, first served, as with
        ``max_queued_requests=-1``) until a running replica of its app has room, goes to it,
        and is not retried once sent — a replica that dies with it makes it fail (500), one
        that refused it (not running there any more) is skipped."""
        payload = {"method": request.method, "path": request.path, "body": request.body,
                   "headers": request.headers}
        refused: set[str] = set()
        routes_seen = self._routes_generation
        queued = ""  # the app whose queue this request waits in
        try:
            while True:
                if self._routes_generation != routes_seen:
                    # new routes: a replica that refused may be listed anew (or not at all);
                    # until then it is skipped, so two waiting requests do not wake each
                    # other to retry the same stale replica for ever
                    refused.clear()
                    routes_seen = self._routes_generation
                match = self._match(request.path)
                if match is None:
                    return response(404, f"Path '{request.path}' not found. Please ping "
                                         "http://.../-/routes for route table.")
                app = (self.routes or {})[match]
                # a newcomer does not overtake requests already queued for the app
                endpoint = None if self._queued.get(app) and queued != app \
                    else self._choose(app, refused)
                if endpoint is None:
                    if queued != app:
                        self._dequeue(queued)
                        self._queued[app] = self._queued.get(app, 0) + 1
                        queued = app
                    self._available.clear()
                    await self._available.wait()
                    continue
                self._dequeue(queued)
                queued = ""
                address, rid = str(endpoint[0]), str(endpoint[1])
                self._sent[rid] = self._sent.get(rid, 0) + 1
                try:
                    result: dict[str, Any] = await self.raylet.ctx.call(
                        address, {"method": "ReplicaRequest", "replica_id": rid,
                                  "request": payload},
                        verb="ReplicaRequest", timeout=None)
                    return result
                except RpcError as err:
                    if err.code != "UNAVAILABLE":
                        return response(500, f"Internal Server Error: {err}")
                    refused.add(rid)  # not running there any more: another replica
                except ConnectionRefused:
                    refused.add(rid)
                except NetworkError as err:
                    return response(500, f"Internal Server Error: {type(err).__name__}")
                finally:
                    self._sent[rid] -= 1
                    if not self._sent[rid]:
                        del self._sent[rid]
                    self._available.set()
        finally:
            self._dequeue(queued)

    def _dequeue(self, app: str) -> None:
        if app and app in self._queued:
            self._queued[app] -= 1
            if not self._queued[app]:
                del self._queued[app]
