"""What the RayService scenarios share: the world, the manifest, the traffic, and a narrator.

The world is small on purpose (two Nodes, one head Pod per Ray cluster, Serve apps that build in
seconds) so a run takes a fraction of a second of wall time. `Traffic` counts requests
through the serve Service the way a client sees them (kube-proxy picks one endpoint ready in the
EndpointSlice *now*), and logs only when the outcome changes. `Narrator` turns the API server's
writes into the story the article tells — pending name recorded, cluster created, apps RUNNING,
each Service re-pointed, promotion, deletion — as trace events on a ``rayservice/<name>`` lane, and
remembers when each happened so the scenarios can assert on it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import attrs

from ..apiserver.errors import ApiError, Conflict
from ..client.client import APISERVER
from ..kernel.network import Match
from ..kernel.process import Process
from ..kernel.trace import TraceEvent
from ..kube.config import KubeConfig
from ..ray.config import ServeAppBehaviour
from ..runtime import HttpClient
from ..simulation import Simulation, WaitTimeout

NS = "default"
RAY_IMAGE = "rayproject/ray:2.46.0"
#: The Serve app every scenario deploys; it builds in 1 s and its replica starts in 1 s.
APP_IMPORT_PATH = "fruit.deployment_graph"
#: KubeRay's default ``RayClusterDeletionDelayDuration``.
DEFAULT_DELETION_DELAY = 60.0
#: One-way latency of Service updates (a round trip of 4 ms), so the two writes of a switch are
#: one round trip apart instead of at the same virtual instant. Only these calls are slowed:
#: delaying every call (and every watch event) would cost a third more wall time and change
#: nothing the scenarios look at.
API_LATENCY = 0.002
#: Lease duration of the operator's election (the successor waits at least this long).
LEASE_DURATION = 15.0


def kube_config(propagation: float = 2.0) -> KubeConfig:
    """Two Nodes and an EndpointSlice propagation delay of ``propagation`` seconds."""
    return KubeConfig(nodes=2, endpoint_propagation_delay=propagation)


def head_svc(rs: str) -> str:
    return f"{rs}-head-svc"


def serve_svc(rs: str) -> str:
    return f"{rs}-serve-svc"


def serve_config(import_path: str = APP_IMPORT_PATH) -> str:
    """One Serve application, ``app1`` on ``/fruit``."""
    return f"""
applications:
- name: app1
  import_path: {import_path}
  route_prefix: /fruit
  deployments:
    - name: MangoStand
      num_replicas: 1
      ray_actor_options:
        num_cpus: 0.1
"""


def rayservice(name: str = "rs", *, ray_version: str = "2.46.0", **spec: Any) -> dict[str, Any]:
    """A blue/green RayService whose clusters are a head Pod only: it runs the Serve proxy and
    the ``app1`` replica, and joins the serve Service through its ``ray.io/serve`` label (a worker
    group would add nothing to these stories but wall time)."""
    body: dict[str, Any] = {
        "upgradeStrategy": {"type": "NewCluster"},
        "serveConfigV2": serve_config(),
        "rayClusterConfig": {
            "rayVersion": ray_version,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": RAY_IMAGE}]}}},
            "workerGroupSpecs": [],
        },
        **spec,
    }
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": name, "namespace": NS}, "spec": body}


async def start(sim: Simulation, *, replicas: int) -> Any:
    """Fast Serve builds, the Nodes ready, KubeRay installed with ``replicas`` and leading."""
    sim.ray_config.serve_apps[APP_IMPORT_PATH] = ServeAppBehaviour(build_seconds=1.0,
                                                                   replica_start_seconds=1.0)
    # only the operator updates Services, so this slows exactly its Service writes
    sim.network.set_latency(API_LATENCY, Match(dst=APISERVER, verb="update", kind="Service"))
    await sim.cluster.wait_ready()
    kuberay = await sim.install_kuberay(replicas=replicas)
    await kuberay.wait_for_leader(timeout=120)
    return kuberay


async def update_rayservice(sim: Simulation, name: str,
                            mutate: Callable[[dict[str, Any]], None]) -> None:
    """Get, change, Update, again on a Conflict (``retry.RetryOnConflict``)."""
    client = sim.client("kubectl")
    for _ in range(10):
        obj = await client.get("RayService", name, NS)
        mutate(obj)
        try:
            await client.update(obj)
            return
        except Conflict:
            continue
    raise RuntimeError(f"RayService {name} kept conflicting")


def upgrade_to(version: str, **spec: Any) -> Callable[[dict[str, Any]], None]:
    """A spec change that needs a new cluster (``rayVersion``), plus top-level ``spec`` fields."""
    def mutate(obj: dict[str, Any]) -> None:
        obj["spec"]["rayClusterConfig"]["rayVersion"] = version
        obj["spec"].update(copy.deepcopy(spec))
    return mutate


def selector_cluster(sim: Simulation, svc: str) -> str | None:
    """The cluster a RayService Service selects now (an observer's read)."""
    try:
        obj = sim.api.get("Service", svc, NS)
    except ApiError:
        return None
    return (obj["spec"].get("selector") or {}).get("ray.io/cluster")


def status_names(sim: Simulation, rs: str) -> tuple[str, str]:
    """(active, pending) cluster names in the RayService status now."""
    try:
        obj = sim.api.get("RayService", rs, NS)
    except ApiError:
        return "", ""
    status = obj.get("status") or {}
    return ((status.get("activeServiceStatus") or {}).get("rayClusterName", ""),
            (status.get("pendingServiceStatus") or {}).get("rayClusterName", ""))


async def deleted_pod_of(sim: Simulation, cluster: str, node_type: str) -> str:
    """Delete the ``node_type`` Pod of ``cluster`` at once (``kubectl delete --grace-period=0``);
    its name."""
    client = sim.client("kubectl")
    pods = await client.list("Pod", NS, label_selector=f"ray.io/cluster={cluster},"
                                                       f"ray.io/node-type={node_type}")
    name = str(sorted(p["metadata"]["name"] for p in pods)[0])
    await client.delete("Pod", name, NS, grace_period_seconds=0)
    sim.trace.emit("kubectl", "pod_deleted", pod=name, cluster=cluster, grace_period_seconds=0)
    return name


async def next_event(sim: Simulation, match: Callable[[TraceEvent], bool], *, timeout: float,
                     what: str) -> TraceEvent:
    """The next trace event for which ``match`` holds (waits on the trace, no polling); raises
    `WaitTimeout` naming ``what`` after ``timeout`` virtual seconds."""
    found: asyncio.Future[TraceEvent] = sim.loop.create_future()

    def listen(ev: TraceEvent) -> None:
        if not found.done() and match(ev):
            found.set_result(ev)

    sim.trace.subscribe(listen)
    try:
        return await asyncio.wait_for(found, timeout)
    except TimeoutError:
        raise WaitTimeout(f"{what}: not seen within {timeout:g}s (virtual, now "
                          f"t={sim.now:.3f}s)") from None


# -- traffic -------------------------------------------------------------------------------------


class Traffic:
    """A client sending ``GET path`` to ``address`` every ``interval`` seconds.

    Each request goes through kube-proxy to one endpoint of the Service's EndpointSlice as it is
    at that moment. The trace (lane ``name``) gets one event per change of outcome
    (``requests_failing`` when a failure follows successes, ``requests_ok`` with how many failed in
    a row when they succeed again) and a ``requests_summary`` at the end, not one per request.
    """

    def __init__(self, sim: Simulation, address: str, path: str, *, name: str = "traffic",
                 interval: float = 0.5) -> None:
        self.sim = sim
        self.address = address
        self.path = path
        self.interval = interval
        self.results: list[tuple[float, bool]] = []
        self._stopping = False
        self._streak_start: float | None = None
        self._streak = 0
        self.process = sim.start_process(name, self._run)

    async def _run(self, process: Process) -> None:
        http = HttpClient(self.sim.network, process)
        # a seeded phase, so seeds differ in where requests fall against the switch
        await asyncio.sleep(self.sim.rng.fork(self.process.name).random() * self.interval)
        while not self._stopping:
            t = self.sim.now
            error = ""
            try:
                resp = await http.request(self.address, "GET", self.path)
                ok = resp.status == 200
                if not ok:
                    error = f"HTTP {resp.status}"
            except Exception as exc:  # what the client sees: refused, reset, timed out
                ok, error = False, type(exc).__name__
            self._record(process, t, ok, error)
            await asyncio.sleep(self.interval)

    def _record(self, process: Process, t: float, ok: bool, error: str) -> None:
        self.results.append((t, ok))
        if not ok:
            if self._streak == 0:
                self._streak_start = t
                process.log("requests_failing", error=error, ok_so_far=self.sent() - 1 -
                            self.failures())
            self._streak += 1
        elif self._streak:
            process.log("requests_ok", failed=self._streak,
                        for_seconds=round(t - (self._streak_start or t), 3))
            self._streak, self._streak_start = 0, None

    def stop(self) -> None:
        """Send no more requests (the one in flight completes); log the totals."""
        self._stopping = True
        if self._streak:
            self.process.log("requests_still_failing",
                             since=round(self._streak_start or 0.0, 3), failed=self._streak)
        self.process.log("requests_summary", sent=self.sent(), failed=self.failures())

    def failures(self, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(1 for t, ok in self.results if since <= t < until and not ok)

    def sent(self, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(1 for t, _ in self.results if since <= t < until)

    def failure_times(self, since: float = 0.0, until: float = float("inf")) -> list[float]:
        return [t for t, ok in self.results if since <= t < until and not ok]


def serve_traffic(sim: Simulation, rs: str) -> Traffic:
    """``GET /fruit`` through the serve Service: what the application's users see."""
    return Traffic(sim, f"{serve_svc(rs)}.{NS}.svc.cluster.local:8000", "/fruit",
                   name="traffic/serve")


def head_traffic(sim: Simulation, rs: str) -> Traffic:
    """``GET /api/version`` on the dashboard through the head Service: what dashboard users and
    job submitters that address the RayService's head Service see."""
    return Traffic(sim, f"{head_svc(rs)}.{NS}.svc.cluster.local:8265", "/api/version",
                   name="traffic/head")


# -- the story, from the API server's writes ----------------------------------------------------


@attrs.frozen
class Happening:
    """One step of the blue/green story: when, what, and its details."""

    t: float
    what: str
    fields: dict[str, Any]


class Narrator:
    """Watches the API server's writes (a trace subscriber, so nothing is missed or delayed) and
    logs each step of the switch on the ``rayservice/<name>`` lane.

    Steps: ``pending_recorded`` (the status names a new pending cluster), ``cluster_created``,
    ``apps_status`` / ``apps_running`` (a cluster's Serve apps as the status shows them changed;
    all RUNNING), ``service_created`` /
    ``service_repointed`` (a Service's ``ray.io/cluster`` selector changed, with the writer),
    ``promoted`` (the status's active cluster changed), ``cluster_deleted``.
    """

    def __init__(self, sim: Simulation, rs: str = "rs") -> None:
        self.sim = sim
        self.rs = rs
        self.lane = f"rayservice/{rs}"
        self.happenings: list[Happening] = []
        self._selectors: dict[str, str] = {}
        self._active = ""
        self._pending = ""
        self._apps: dict[str, str] = {}
        self._apps_ran: set[str] = set()
        self._services = (head_svc(rs), serve_svc(rs))
        sim.trace.subscribe(self._on_event)

    def _log(self, what: str, **fields: Any) -> None:
        self.happenings.append(Happening(self.sim.now, what, fields))
        self.sim.trace.emit(self.lane, what, **fields)

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event != "write" or ev.process != "kube-apiserver":
            return
        f = ev.fields
        kind, name, verb = f.get("kind"), f.get("name"), f.get("verb")
        by = str(f.get("caller", ""))
        if kind == "RayService" and name == self.rs and verb == "update_status":
            self._on_status()
        elif kind == "Service" and name in self._services and verb in ("create", "update"):
            target = selector_cluster(self.sim, str(name)) or ""
            before = self._selectors.get(str(name))
            if target != before:
                self._selectors[str(name)] = target
                if before is None:
                    self._log("service_created", service=name, to=target, by=by)
                else:
                    self._log("service_repointed", service=name, was=before, to=target, by=by)
        elif kind == "RayCluster" and verb == "create":
            self._log("cluster_created", cluster=name, by=by)
        elif kind == "RayCluster" and verb == "delete":
            self._log("cluster_deleted", cluster=name, by=by)

    def _on_status(self) -> None:
        try:
            obj = self.sim.api.get("RayService", self.rs, NS)
        except ApiError:
            return
        status = obj.get("status") or {}
        for role in ("activeServiceStatus", "pendingServiceStatus"):
            part = status.get(role) or {}
            cluster = part.get("rayClusterName", "")
            apps = part.get("applicationStatuses") or {}
            if not cluster or (role == "activeServiceStatus" and cluster in self._apps_ran):
                continue
            shown = ",".join(f"{k}={(v or {}).get('status', '')}" for k, v in sorted(apps.items()))
            if self._apps.get(cluster) != shown:
                self._apps[cluster] = shown
                running = bool(apps) and all((a or {}).get("status") == "RUNNING"
                                             for a in apps.values())
                if role == "activeServiceStatus" and not running:
                    continue  # the active cluster's apps are not re-read while pending builds
                if running:
                    self._apps_ran.add(cluster)
                self._log("apps_running" if running else "apps_status", cluster=cluster,
                          apps=shown or "none")
        active, pending = status_names(self.sim, self.rs)
        if pending and pending != self._pending:
            self._log("pending_recorded", cluster=pending)
        if active != self._active:
            if self._active:
                self._log("promoted", active=active, previous=self._active)
            else:
                self._log("first_active", active=active)
        self._active, self._pending = active, pending

    # -- queries ---------------------------------------------------------------------------------

    def all(self, what: str, **match: Any) -> list[Happening]:
        return [h for h in self.happenings if h.what == what and
                all(h.fields.get(k) == v for k, v in match.items())]

    def first(self, what: str, **match: Any) -> Happening | None:
        found = self.all(what, **match)
        return found[0] if found else None

    async def wait(self, what: str, *, timeout: float = 300.0, **match: Any) -> Happening:
        """The first ``what`` matching ``match``: one already seen, or the next one."""
        found = self.first(what, **match)
        if found is not None:
            return found
        await next_event(self.sim, lambda ev: ev.process == self.lane and ev.event == what
                         and all(ev.fields.get(k) == v for k, v in match.items()),
                         timeout=timeout, what=f"{what} {match}")
        found = self.first(what, **match)
        assert found is not None
        return found

    def time(self, what: str, **match: Any) -> float:
        """When ``what`` (matching ``match``) first happened; NaN if it did not."""
        h = self.first(what, **match)
        return h.t if h is not None else float("nan")
