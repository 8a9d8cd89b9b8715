"""The raylet: a node of the Ray cluster, its GCS connection, and the workers it hosts.

Follows ``src/ray/raylet/node_manager.cc`` and the GCS client's reconnect rule (FACTS §2.1):
- it registers its node with the GCS at ``--address`` and reports every second (the syncer's
  messages, which the GCS's health checker counts as "seen");
- when the GCS can't be reached it keeps trying; after ``RAY_gcs_rpc_server_reconnect_timeout_s``
  (60 s by default, KubeRay gives workers 600 s with FT) of unavailability it exits with code 1:
  "Failed to connect to GCS within N seconds ... The program will terminate.";
- a GCS that answers with another cluster id (a new in-memory GCS) or that considers this node
  dead (it failed its health checks meanwhile) makes it exit with code 1 too;
- ``NotifyGCSRestart`` from a restarted GCS that knows it makes it report again at once.

Workers: a task runs as a task of the raylet process; an actor runs in its own worker process
(``<raylet>.worker-<id>``) that dies with the raylet. Actors whose class defines
``_attach_runtime(rt)`` get an `ActorRuntime`; the checkpoint hook is described in
`emu.ray.workloads`. Serve replicas and the node's Serve proxy are hosted here too
(`emu.ray.serve.NodeServe`), so they live exactly as long as the node.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import attrs

from emu.kernel.network import NetworkError
from emu.kernel.process import Process
from emu.kernel.programs import ContainerContext

from .config import RayConfig
from .gcs import SYSTEM_ERROR, WORKER_CRASH_DETAIL
from .gcs_client import DEFAULT_RECONNECT_TIMEOUT_S, GcsClient, hex_id, unix_ms
from .net import HttpRequest, RpcError, response, run_in, serve_http, serve_rpc
from .serve import NodeServe
from .workloads import ActorRuntime, maybe_await, resolve_class

#: Where Ray picks a raylet's RPC port when ``--node-manager-port`` is not given (KubeRay doesn't
#: give it): a new raylet in a restarted container listens somewhere else than its predecessor.
RAYLET_PORT_RANGE = (10002, 59999)
#: The dashboard agent's HTTP port (KubeRay's ``--dashboard-agent-listen-port=52365``).
AGENT_PORT = 52365

#: Timing slack for deadlines computed in floating point (virtual seconds).
_EPSILON = 1e-9


@attrs.define
class ActorWorker:
    actor_id: str
    record: dict[str, Any]
    process: Process
    instance: Any = None
    store: Any = None
    checkpoint_key: str = ""
    killed: bool = False


#: The death reason of a node whose ``ray start`` got SIGTERM (Ray 2.60's drain on SIGTERM, as
#: the GCS node table shows it).
SIGTERM_DEATH_REASON = "Node received SIGTERM; draining before shutdown."


class Raylet:
    """One node. Run `run` as the main of the raylet process (its ``ctx.process``)."""

    def __init__(self, ctx: ContainerContext, config: RayConfig, *, gcs_address: str,
                 is_head: bool, resources: dict[str, float], labels: dict[str, str] | None = None,
                 port: int | None = None, reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT_S,
                 node_name: str = "") -> None:
        self.ctx = ctx
        self.config = config
        self.is_head = is_head
        self.resources = dict(resources)
        self.labels = dict(labels or {})
        self.reconnect_timeout = reconnect_timeout
        self.node_id = hex_id(ctx.rng, 28)
        self.port = port if port is not None else ctx.rng.randint(*RAYLET_PORT_RANGE)
        self.node_name = node_name or ctx.pod_name or ctx.process.name
        self.address = f"{ctx.ip}:{self.port}"
        self.gcs = GcsClient(ctx.call, gcs_address)
        self.cluster_id: str | None = None
        self.registered = asyncio.Event()
        self.exit_message = ""
        self.workers: dict[str, ActorWorker] = {}
        self.serve = NodeServe(self)
        self._gcs_restarted = asyncio.Event()
        #: Worker failures the GCS has not taken yet, oldest first (`_report_failures`).
        self._failures: list[dict[str, Any]] = []
        self._reporting = False
        self.tasks_run = 0
        #: Job driver logs on this node (the files a driver writes), by submission id.
        self.job_logs: dict[str, list[str]] = {}
        #: Runtime environments built on this node (`emu.ray.jobs`), reused by later jobs.
        self.runtime_env_cache: dict[str, None] = {}

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def log(self, event: str, **fields: Any) -> None:
        self.ctx.process.log(event, node_id=self.node_id, **fields)

    # -- lifecycle --------------------------------------------------------------------------------

    async def run(self) -> int:
        serve_rpc(self.ctx, self.port, {
            "HealthCheck": self.rpc_health_check,
            "NotifyGCSRestart": self.rpc_notify_gcs_restart,
            "ExecuteTask": self.rpc_execute_task,
            "CreateActor": self.rpc_create_actor,
            "ActorCall": self.rpc_actor_call,
            "KillActor": self.rpc_kill_actor,
            "GetJobLogs": self.rpc_get_job_logs,
            **self.serve.methods(),
        })
        serve_http(self.ctx, AGENT_PORT, self._agent_http)
        self.ctx.process.on_exit(lambda _p: self._kill_workers())
        code = await self._register()
        if code is not None:
            return code
        self.registered.set()
        return await self._report_loop()

    async def shutdown_gracefully(self) -> None:
        """SIGTERM (its Pod deleted, ``ray stop``): unregister the node from the GCS at once
        (EXPECTED_TERMINATION, `SIGTERM_DEATH_REASON`), so the GCS marks it DEAD now rather
        than after its health checks, then exit 0. An unreachable GCS leaves the node to the
        health checks."""
        if self.registered.is_set():
            try:
                await self.gcs.rpc("UnregisterNode", node_id=self.node_id,
                                   reason=SIGTERM_DEATH_REASON)
                self.log("raylet_unregistered")
            except (NetworkError, RpcError) as err:
                self.log("raylet_unregister_failed", error=str(err))
        self.ctx.process.exit(0, "SIGTERM")

    def _fatal(self, message: str) -> int:
        self.exit_message = message
        self.log("raylet_fatal", message=message)
        return 1

    def _lost_message(self) -> str:
        return (f"Failed to connect to GCS within {self.reconnect_timeout:g} seconds. GCS may "
                "have been killed. It's either GCS is terminated by `ray stop` or is killed "
                "unexpectedly. The program will terminate.")

    async def _register(self) -> int | None:
        node = {
            "node_id": self.node_id, "node_name": self.node_name, "node_ip": self.ctx.ip,
            "raylet_address": self.address, "is_head": self.is_head,
            "resources": self.resources, "labels": self.labels,
        }
        since: float | None = None
        while True:
            started = self.now
            try:
                reply = await self.gcs.rpc("RegisterNode", node=node, cluster_id=self.cluster_id)
            except NetworkError:
                since = started if since is None else since
                # Within float rounding of the deadline counts as past it: a wait of 1e-14 s
                # can't move virtual time, so it would spin forever.
                if self.now - since >= self.reconnect_timeout - _EPSILON:
                    return self._fatal(self._lost_message())
                await self._pause(since)
                continue
            except RpcError as err:
                return self._fatal(f"Failed to register with the GCS: {err.message}")
            self.cluster_id = reply["cluster_id"]
            self.log("raylet_registered", cluster_id=self.cluster_id, head=self.is_head)
            return None

    async def _pause(self, since: float) -> None:
        """Wait before the next try: a heartbeat period, or until the GCS says it is back, but
        never past the reconnect deadline."""
        left = since + self.reconnect_timeout - self.now
        wait = max(min(self.config.heartbeat_period, left), _EPSILON)
        self._gcs_restarted.clear()
        try:
            await asyncio.wait_for(self._gcs_restarted.wait(), wait)
        except TimeoutError:
            pass
        await self.ctx.process.checkpoint()

    async def _report_loop(self) -> int:
        since: float | None = None
        while True:
            started = self.now
            try:
                await self.gcs.rpc("Heartbeat", node_id=self.node_id, cluster_id=self.cluster_id)
            except NetworkError:
                if since is None:
                    since = started
                    self.log("gcs_unreachable")
                # Within float rounding of the deadline counts as past it: a wait of 1e-14 s
                # can't move virtual time, so it would spin forever.
                if self.now - since >= self.reconnect_timeout - _EPSILON:
                    return self._fatal(self._lost_message())
                await self._pause(since)
                continue
            except RpcError as err:
                if err.code == "UNAUTHENTICATED":
                    return self._fatal(f"The GCS has a different cluster ID: {err.message}. "
                                       "The program will terminate.")
                return self._fatal(
                    "GCS consider this node to be dead. This may happen when GCS is not backed "
                    "by a DB and restarted or there is data loss in the DB.")
            if since is not None:
                self.log("gcs_reconnected", after=self.now - since)
                since = None
            if self._failures:
                await self._report_failures()
            await self.ctx.process.sleep(self.config.heartbeat_period)

    def _kill_workers(self) -> None:
        for worker in list(self.workers.values()):
            worker.killed = True
            worker.process.crash("raylet died")

    # -- RPCs -------------------------------------------------------------------------------------

    async def rpc_health_check(self, req: dict[str, Any]) -> dict[str, Any]:
        if req.get("node_id") not in (None, self.node_id):
            raise RpcError("NOT_FOUND", f"this raylet is node {self.node_id}, not "
                                        f"{req.get('node_id')}")
        return {"status": "SERVING"}

    async def rpc_notify_gcs_restart(self, req: dict[str, Any]) -> dict[str, Any]:
        self.log("gcs_restart_notified")
        self._gcs_restarted.set()
        return {}

    async def rpc_execute_task(self, req: dict[str, Any]) -> dict[str, Any]:
        self.tasks_run += 1
        self.ctx.process.log("task_started", task_id=req.get("task_id"))
        try:
            value = await maybe_await(req["fn"](*req.get("args", ()), **req.get("kwargs", {})))
        except Exception as exc:
            return {"error": exc}
        return {"ok": value}

    async def rpc_create_actor(self, req: dict[str, Any]) -> dict[str, Any]:
        record = req["actor"]
        actor_id = record["actor_id"]
        existing = self.workers.get(actor_id)
        if existing is not None and existing.process.alive:
            return {}
        spec = pickle.loads(req["spec"])
        try:
            cls = resolve_class(spec["cls"], self.config)
        except (ImportError, AttributeError, TypeError) as err:
            raise RpcError("CREATION_FAILED", f"cannot load actor class {spec['cls']}: "
                                              f"{err}") from None
        name = f"{self.ctx.process.name}.worker-{actor_id}"
        process = self.ctx.process.table.start(name, _worker_main, host=self.ctx.process.host)
        worker = ActorWorker(actor_id, record, process)
        self.workers[actor_id] = worker
        process.on_exit(lambda p: self._worker_exited(worker))
        worker_ctx = attrs.evolve(self.ctx, process=process)
        runtime = ActorRuntime(
            actor_id=actor_id, node_id=self.node_id, is_head_node=self.is_head,
            num_restarts=int(record.get("num_restarts", 0)), process=process,
            call=worker_ctx.call, gcs=GcsClient(worker_ctx.call, self.gcs.address),
            config=self.config, node_ip=self.ctx.ip, raylet=self)

        async def construct() -> None:
            instance = cls(*spec.get("args", ()), **spec.get("kwargs", {}))
            attach = getattr(instance, "_attach_runtime", None)
            if attach is not None:
                await maybe_await(attach(runtime))
            if spec.get("checkpoint"):
                worker.store = self.config.checkpoint_store(spec["checkpoint"])
                worker.checkpoint_key = spec.get("checkpoint_key") or record.get("name") \
                    or actor_id
                state = worker.store.load(worker.checkpoint_key)
                if state is not None and hasattr(instance, "load_checkpoint"):
                    await maybe_await(instance.load_checkpoint(state))
                    process.log("actor_restored_from_checkpoint", actor_id=actor_id)
            worker.instance = instance

        try:
            await run_in(process, construct(), self.address)
        except NetworkError:
            raise
        except Exception as exc:
            worker.killed = True
            process.exit(1, "actor constructor raised")
            raise RpcError("CREATION_FAILED", f"{type(exc).__name__}: {exc}") from None
        self.ctx.process.spawn(self._report_worker(worker), name="raylet:report-worker")
        self.log("actor_started", actor_id=actor_id, name=record.get("name"),
                 restarts=record.get("num_restarts", 0))
        # the lease reply's worker pid, and the actor's repr when its class defines __repr__
        # (``actor_repr_name``); the GCS keeps both in the actor's record
        custom_repr = type(worker.instance).__repr__ is not object.__repr__
        return {"pid": process.pid, "repr_name": repr(worker.instance) if custom_repr else ""}

    async def _report_worker(self, worker: ActorWorker) -> None:
        try:
            await self.gcs.rpc("ReportWorker", worker={
                "worker_id": f"{worker.process.pid:012x}{worker.actor_id[:16]}",
                "node_id": self.node_id, "actor_id": worker.actor_id, "pid": worker.process.pid,
                "start_time_ms": unix_ms(self.now)})
        except (NetworkError, RpcError):
            pass

    def _worker_exited(self, worker: ActorWorker) -> None:
        if self.workers.get(worker.actor_id) is worker:
            del self.workers[worker.actor_id]
        if worker.killed or not self.ctx.process.alive:
            return

        # the detail Ray's raylet gives a worker whose connection dropped
        self._failures.append({"actor_id": worker.actor_id, "node_id": self.node_id,
                               "exit_type": SYSTEM_ERROR, "reason": WORKER_CRASH_DETAIL})

        self.ctx.process.spawn(self._report_failures(), name="raylet:report-actor-failure")

    async def _report_failures(self) -> None:
        """``NodeManager::DisconnectClient`` → ``ReportWorkerFailure``: the raylet's GCS client
        keeps a report the GCS did not take and sends it again once a GCS answers (a restarted
        one too, before anything else the raylet sends it), so an actor whose worker exited
        while the GCS was down is not left ALIVE in the GCS that comes back."""
        if self._reporting:
            return
        self._reporting = True
        try:
            while self._failures:
                try:
                    await self.gcs.rpc("ReportActorFailure", **self._failures[0])
                except NetworkError:
                    return  # kept: `_report_loop` sends it after its next answered heartbeat
                except RpcError:
                    pass
                self._failures.pop(0)
        finally:
            self._reporting = False

    async def rpc_actor_call(self, req: dict[str, Any]) -> dict[str, Any]:
        worker = self.workers.get(req["actor_id"])
        if worker is None or not worker.process.alive or worker.instance is None:
            raise RpcError("NOT_FOUND", f"actor {req['actor_id']} is not on node {self.node_id}")
        instance = worker.instance
        method = getattr(instance, req["name"])

        async def invoke() -> dict[str, Any]:
            try:
                value = await maybe_await(method(*req.get("args", ()), **req.get("kwargs", {})))
            except Exception as exc:
                return {"error": exc}
            if worker.store is not None and hasattr(instance, "save_checkpoint"):
                worker.store.save(worker.checkpoint_key,
                                  await maybe_await(instance.save_checkpoint()))
            return {"ok": value}

        result: dict[str, Any] = await run_in(worker.process, invoke(), self.address)
        return result

    async def rpc_kill_actor(self, req: dict[str, Any]) -> dict[str, Any]:
        worker = self.workers.get(req["actor_id"])
        if worker is not None:
            worker.killed = True
            worker.process.crash("killed by the GCS")
        return {}

    async def rpc_get_job_logs(self, req: dict[str, Any]) -> str:
        lines = self.job_logs.get(req["submission_id"], [])
        return "".join(line + "\n" for line in lines)  # a file: each line ends with a newline

    # -- dashboard agent ----------------------------------------------------------------------------

    async def _agent_http(self, request: HttpRequest) -> dict[str, Any]:
        if request.path in ("/api/local_raylet_healthz", "/api/healthz"):
            if self.registered.is_set():
                return response(200, "success")
            return response(503, "raylet is not registered with the GCS yet")
        return response(404, f"Not Found: {request.path}")


async def _worker_main(process: Process) -> None:
    """An actor's worker process: it holds the instance until killed."""
    await asyncio.Event().wait()
