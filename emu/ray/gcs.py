"""The GCS server: Ray's control-plane store and its managers (nodes, jobs, actors, internal KV).

Port of the behaviour of ``src/ray/gcs/gcs_server.cc`` and its managers, on a `emu.backends` store:
- tables ``JOB``, ``NODE``, ``ACTOR``, ``ACTOR_TASK_SPEC``, ``PLACEMENT_GROUP``, ``WORKERS``, ``KV``
  (records are JSON; an actor's creation spec is pickled bytes);
- on start it loads what ``GcsInitData::AsyncLoad`` loads (JOB, NODE, ACTOR, ACTOR_TASK_SPEC,
  PLACEMENT_GROUP), then keeps or creates the cluster id (KV ``cluster``/``ray_cluster_id``); alive
  nodes are health-checked again and told ``NotifyGCSRestart``; actors are reloaded only if they
  should still live (FACTS §1.5);
- node health checks with Ray's defaults (initial delay 5 s, period 3 s, timeout 10 s, failure
  threshold 5); a heartbeat within the last period counts as healthy (the syncer rule);
- a dead node fails its actors (restart within ``max_restarts`` or die) and finishes the jobs
  whose driver ran there (``OnNodeDead``); dead nodes beyond 1000 are dropped from storage;
- a dead actor's death cause is Ray's (``GenOwnerDiedCause``, ``GenKilledByApplicationCause``,
  ``GenNodeDiedCause``, ``GenWorkerDiedCause``): its message and its ``ActorDiedErrorContext``
  reason, which the dashboard's state API shows (`emu.ray.state_api`);
- with Redis it PINGs every 100 ms, and any unreachable storage makes it exit (Ray's CHECK
  failure "Redis connection failed unexpectedly": exit code 134, SIGABRT).

It is over 500 lines because the node, job and actor managers share one in-memory view that the
health checker, the loader and the RPCs all update; split apart they would reach into each other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson

from emu.backends import GcsStorage, StorageUnavailable
from emu.kernel.jsonbytes import dumps_exact
from emu.kernel.network import NetworkError
from emu.kernel.process import ProcessGone
from emu.kernel.programs import ContainerContext

from .config import RayConfig
from .gcs_client import JOB_NAMESPACE, hex_id, unix_ms
from .net import RpcError, serve_rpc

T = TypeVar("T")

TABLES = ("JOB", "NODE", "ACTOR", "ACTOR_TASK_SPEC", "PLACEMENT_GROUP", "WORKERS", "KV")

HEALTH_CHECK_INITIAL_DELAY_S = 5.0
HEALTH_CHECK_PERIOD_S = 3.0
HEALTH_CHECK_TIMEOUT_S = 10.0
HEALTH_CHECK_FAILURE_THRESHOLD = 5
REDIS_HEARTBEAT_S = 0.1
MAX_DEAD_NODES = 1000
#: Exit code of a GCS that failed a CHECK (abort, SIGABRT).
EXIT_CHECK_FAILED = 134

#: A node's death reason when the GCS declares it dead itself (``GcsNodeManager::InferDeathInfo``
#: for a node not being drained past its deadline): after failed health checks, and also for an
#: old head when a new head registers (``HandleRegisterNode`` calls ``OnNodeFailure`` for it).
HEALTH_CHECK_DEATH_REASON = "health check failed due to missing too many heartbeats"

#: ``WorkerExitType`` names a death cause quotes.
SYSTEM_ERROR = "SYSTEM_ERROR"
INTENDED_USER_EXIT = "INTENDED_USER_EXIT"
#: The raylet's detail for a worker whose connection dropped (Ray 2.60, measured): what an
#: actor's death cause quotes when its worker process crashed.
WORKER_CRASH_DETAIL = (
    "Worker unexpectedly exits with a connection error code 2. End of file. Some common causes "
    "include: (1) the process was killed by the OOM killer due to high memory usage, (2) ray "
    "stop --force was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another "
    "unexpected error. If the process was killed by the kernel OOM killer (verifiable by "
    "checking for OOM in dmesg of the OOMing node), consider enabling resource isolation via "
    "--enable-resource-isolation to prevent node deaths by resource contention and significant "
    "loss of progress by uninformed kernel OOM killing.")
#: The detail of an actor that ended itself with ``ray.actor.exit_actor()``.
EXIT_ACTOR_DETAIL = ("Worker exits by an user request. Worker exits with an exit code 0. "
                     "exit_actor() is called.")
#: ``NodeDeathInfo.Reason``: a node that failed its health checks, or one that was drained
#: (SIGTERM, ``ray stop``, the autoscaler) and unregistered itself.
UNEXPECTED_TERMINATION = "UNEXPECTED_TERMINATION"
EXPECTED_TERMINATION = "EXPECTED_TERMINATION"

#: An actor's death cause: ``message`` (the ``error_message`` users see, what `ActorDiedError`
#: says) and ``context`` (``kind``: the ``ActorDeathCause`` field set, ``reason``: the
#: ``ActorDiedErrorContext.Reason``, ``node_death_info`` for a node death).
Cause = dict[str, Any]


def owner_worker_id(job_id: str) -> str:
    """A driver's worker id (``ComputeDriverIdFromJob``): its job id padded with ``ff`` bytes
    to 28 bytes; the owner id of the actors the driver creates."""
    return job_id + "ff" * 24


def worker_died_cause(exit_type: str, detail: str) -> Cause:
    """``GenWorkerDiedCause`` (gcs_actor_manager.cc)."""
    return {"message": "The actor is dead because its worker process has died. Worker exit "
                       f"type: {exit_type} Worker exit detail: {detail}",
            "context": {"kind": "actor_died_error_context", "reason": "WORKER_DIED"}}


def owner_died_cause(owner_id: str, owner_ip: str, exit_type: str, detail: str) -> Cause:
    """``GenOwnerDiedCause``."""
    return {"message": f"The actor is dead because its owner has died. Owner Id: {owner_id} "
                       f"Owner Ip address: {owner_ip} Owner worker exit type: {exit_type} "
                       f"Worker exit detail: {detail}",
            "context": {"kind": "actor_died_error_context", "reason": "OWNER_DIED"}}


def killed_cause() -> Cause:
    """``GenKilledByApplicationCause``: ``ray.kill``."""
    return {"message": "The actor is dead because it was killed by `ray.kill`.",
            "context": {"kind": "actor_died_error_context", "reason": "RAY_KILL"}}


def node_died_cause(node_id: str, death_info: dict[str, Any]) -> Cause:
    """``GcsActorManager::GenNodeDiedCause``: the node's id and its death reason."""
    how = {EXPECTED_TERMINATION: "terminated expectedly",
           UNEXPECTED_TERMINATION: "terminated unexpectedly",
           "AUTOSCALER_DRAIN_PREEMPTED": "preempted"}.get(death_info.get("reason", ""),
                                                          "terminated")
    return {"message": f"The actor died because its node has died. Node Id: {node_id}\n"
                       f"\tthe actor's node was {how}: {death_info.get('reason_message', '')}",
            "context": {"kind": "actor_died_error_context", "reason": "NODE_DIED",
                        "node_death_info": dict(death_info)}}


def plain_cause(kind: str, message: str) -> Cause:
    """A cause outside ``ActorDiedErrorContext``: ``creation_task_failure_context`` (the
    constructor raised) or ``actor_unschedulable_context``."""
    return {"message": message, "context": {"kind": kind}}


#: The death cause of an actor the GCS does not reload at start (its owner is dead).
NOT_LOADED_CAUSE = ("The actor is dead because GCS could not load it during initialization "
                    "(for example, its owner is dead) and is removing its task spec.")

CLUSTER_ID_NAMESPACE = "cluster"
CLUSTER_ID_KEY = "ray_cluster_id"


def kv_storage_key(namespace: str, key: str) -> str:
    """Where internal KV ``namespace``/``key`` lives in the ``KV`` table (``store_client_kv.cc``)."""
    return f"@namespace_{namespace}:{key}" if namespace else key


def _dump(record: dict[str, Any]) -> bytes:
    # stored records live as long as the GCS
    return dumps_exact(record, orjson.OPT_SORT_KEYS)


class GcsServer:
    """One GCS process's managers over its store. Create, then `start` inside the process."""

    def __init__(self, ctx: ContainerContext, storage: GcsStorage, storage_kind: str,
                 config: RayConfig, *, port: int) -> None:
        self.ctx = ctx
        self.storage = storage
        self.storage_kind = storage_kind
        self.config = config
        self.port = port
        self.cluster_id = ""
        self.nodes: dict[str, dict[str, Any]] = {}
        self.dead_nodes: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.actors: dict[str, dict[str, Any]] = {}
        self.specs: dict[str, bytes] = {}
        self.placement_groups: dict[str, dict[str, Any]] = {}
        self.named: dict[tuple[str, str], str] = {}
        self.last_seen: dict[str, float] = {}
        self._actor_events: dict[str, asyncio.Event] = {}
        self._rr = 0
        self.loaded: dict[str, int] = {}

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def log(self, event: str, **fields: Any) -> None:
        self.ctx.process.log(event, **fields)

    def die(self, reason: str) -> None:
        """Exit as Ray's GCS does on a failed CHECK; raises `ProcessGone` to unwind the caller."""
        self.log("gcs_fatal", reason=reason)
        self.ctx.process.exit(EXIT_CHECK_FAILED, reason)
        raise ProcessGone(reason)

    async def _st(self, op: Awaitable[T]) -> T:
        try:
            return await op
        except StorageUnavailable as err:
            self.die(f"Redis connection failed unexpectedly: {err}"
                     if self.storage_kind == "redis" else f"GCS storage failed: {err}")
            raise  # unreachable: die raises

    async def _put(self, table: str, key: str, record: dict[str, Any]) -> None:
        await self._st(self.storage.put(table, key, _dump(record)))

    # -- start ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load, pick the cluster id, listen, resume health checks and actor scheduling."""
        started = self.now
        await self._load()
        stored = await self._st(self.storage.get(
            "KV", kv_storage_key(CLUSTER_ID_NAMESPACE, CLUSTER_ID_KEY)))
        if stored:
            self.cluster_id = stored.decode()
        else:
            self.cluster_id = hex_id(self.ctx.rng, 28)
            await self._st(self.storage.put(
                "KV", kv_storage_key(CLUSTER_ID_NAMESPACE, CLUSTER_ID_KEY),
                self.cluster_id.encode()))
        await self._st(self.storage.put("KV", kv_storage_key("", "gcs_pid"),
                                        str(self.ctx.process.pid).encode()))
        serve_rpc(self.ctx, self.port, self._methods())
        self.log("gcs_started", storage=self.storage_kind, namespace=self.storage.namespace,
                 cluster_id=self.cluster_id, reused_cluster_id=bool(stored),
                 loaded=dict(self.loaded), load_seconds=self.now - started)
        for node_id in list(self.nodes):
            self._watch(node_id, notify_restart=True)
        for actor_id, actor in list(self.actors.items()):
            if actor["state"] in ("PENDING_CREATION", "RESTARTING"):
                self.ctx.process.spawn(self._schedule(actor_id), name="gcs:schedule")
        if self.storage_kind == "redis":
            self.ctx.process.spawn(self._redis_heartbeat(), name="gcs:redis-ping")

    async def _load(self) -> None:
        """``GcsInitData::AsyncLoad`` and the managers' ``Initialize`` (FACTS §1.5)."""
        jobs = await self._st(self.storage.get_all("JOB"))
        nodes = await self._st(self.storage.get_all("NODE"))
        actors = await self._st(self.storage.get_all("ACTOR"))
        specs = await self._st(self.storage.get_all("ACTOR_TASK_SPEC"))
        pgs = await self._st(self.storage.get_all("PLACEMENT_GROUP"))
        self.loaded = {"JOB": len(jobs), "NODE": len(nodes), "ACTOR": len(actors),
                       "ACTOR_TASK_SPEC": len(specs), "PLACEMENT_GROUP": len(pgs)}
        for job_id, raw in jobs.items():
            self.jobs[job_id] = orjson.loads(raw)
        dead: list[dict[str, Any]] = []
        for node_id, raw in nodes.items():
            node = orjson.loads(raw)
            if node["state"] == "ALIVE":
                self.nodes[node_id] = node
            else:
                dead.append(node)
        dead.sort(key=lambda n: (n.get("end_time_ms") or 0, n["node_id"]))
        for node in dead:
            self.dead_nodes[node["node_id"]] = node
        await self._evict_dead_nodes()
        drop_specs: list[str] = []
        for actor_id, raw in actors.items():
            actor = orjson.loads(raw)
            owner_alive = actor["detached"] or not self.jobs.get(actor["job_id"], {}).get(
                "is_dead", True)
            if actor["state"] != "DEAD" and owner_alive and actor_id in specs:
                self.actors[actor_id] = actor
                self.specs[actor_id] = specs[actor_id]
                if actor.get("name"):
                    self.named[(actor["ray_namespace"], actor["name"])] = actor_id
            else:
                if actor["state"] != "DEAD":
                    actor.update(state="DEAD", death_cause=NOT_LOADED_CAUSE)
                self.actors[actor_id] = actor
                if actor_id in specs:
                    drop_specs.append(actor_id)
        if drop_specs:
            await self._st(self.storage.batch_delete("ACTOR_TASK_SPEC", drop_specs))
        for pg_id, raw in pgs.items():
            pg = orjson.loads(raw)
            if pg.get("state") != "REMOVED":
                self.placement_groups[pg_id] = pg

    async def _evict_dead_nodes(self) -> None:
        extra = len(self.dead_nodes) - MAX_DEAD_NODES
        if extra > 0:
            oldest = list(self.dead_nodes)[:extra]
            for node_id in oldest:
                del self.dead_nodes[node_id]
            await self._st(self.storage.batch_delete("NODE", oldest))

    async def _redis_heartbeat(self) -> None:
        # a failed PING kills the GCS (`_st` → `die`), as the real one exits; this task is then
        # done, and ending it quietly keeps asyncio from printing "Task exception was never
        # retrieved" for a death the trace already records
        with contextlib.suppress(ProcessGone):
            while True:
                await self.ctx.process.sleep(REDIS_HEARTBEAT_S)
                await self._st(self.storage.health_check())

    # -- RPC table ----------------------------------------------------------------------------------

    def _methods(self) -> dict[str, Any]:
        return {
            "CheckAlive": self.rpc_check_alive,
            "RegisterNode": self.rpc_register_node,
            "Heartbeat": self.rpc_heartbeat,
            "UnregisterNode": self.rpc_unregister_node,
            "GetAllNodeInfo": self.rpc_get_all_node_info,
            "InternalKVGet": self.rpc_kv_get,
            "InternalKVPut": self.rpc_kv_put,
            "InternalKVDel": self.rpc_kv_del,
            "InternalKVKeys": self.rpc_kv_keys,
            "InternalKVMultiGet": self.rpc_kv_multi_get,
            "GetNextJobID": self.rpc_next_job_id,
            "AddJob": self.rpc_add_job,
            "MarkJobFinished": self.rpc_mark_job_finished,
            "GetAllJobInfo": self.rpc_get_all_job_info,
            "CreateActor": self.rpc_create_actor,
            "GetActorInfo": self.rpc_get_actor_info,
            "GetNamedActorInfo": self.rpc_get_named_actor_info,
            "ListActors": self.rpc_list_actors,
            "WaitActorStateChange": self.rpc_wait_actor,
            "KillActor": self.rpc_kill_actor,
            "ReportActorFailure": self.rpc_report_actor_failure,
            "ReportWorker": self.rpc_report_worker,
        }

    # -- nodes --------------------------------------------------------------------------------------

    async def rpc_check_alive(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"cluster_id": self.cluster_id, "ok": True}

    def _check_cluster(self, req: dict[str, Any]) -> None:
        theirs = req.get("cluster_id")
        if theirs and theirs != self.cluster_id:
            raise RpcError("UNAUTHENTICATED",
                           f"cluster ID mismatch: the client has {theirs}, this GCS is "
                           f"{self.cluster_id}")

    async def rpc_register_node(self, req: dict[str, Any]) -> dict[str, Any]:
        self._check_cluster(req)
        node = dict(req["node"])
        node.update(state="ALIVE", start_time_ms=unix_ms(self.now), end_time_ms=None)
        await self._put("NODE", node["node_id"], node)
        self.nodes[node["node_id"]] = node
        self.last_seen[node["node_id"]] = self.now
        if node.get("is_head"):
            await self._st(self.storage.put("KV", kv_storage_key(JOB_NAMESPACE, "head_node_id"),
                                            node["node_id"].encode()))
            if self.config.new_head_replaces_old:
                # A new head registering means the old head is gone: Ray marks it dead at once
                # rather than waiting for its health checks.
                for old_id, old in list(self.nodes.items()):
                    if old_id != node["node_id"] and old.get("is_head"):
                        await self.on_node_failure(old_id, HEALTH_CHECK_DEATH_REASON)
        self.log("node_registered", node_id=node["node_id"], name=node.get("node_name"),
                 head=bool(node.get("is_head")))
        self._watch(node["node_id"], notify_restart=False)
        for actor_id, actor in list(self.actors.items()):
            if actor["state"] in ("PENDING_CREATION", "RESTARTING") and not actor.get("node_id"):
                self.ctx.process.spawn(self._schedule(actor_id), name="gcs:schedule")
        return {"cluster_id": self.cluster_id}

    async def rpc_heartbeat(self, req: dict[str, Any]) -> dict[str, Any]:
        self._check_cluster(req)
        node_id = req["node_id"]
        if node_id not in self.nodes:
            raise RpcError("NOT_FOUND", f"node {node_id} is not alive in this GCS")
        self.last_seen[node_id] = self.now
        return {}

    async def rpc_unregister_node(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["node_id"] in self.nodes:
            await self.on_node_failure(req["node_id"], req.get("reason") or "node drained",
                                       EXPECTED_TERMINATION)
        return {}

    async def rpc_get_all_node_info(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(n) for n in (*self.nodes.values(), *self.dead_nodes.values())]

    def _watch(self, node_id: str, *, notify_restart: bool) -> None:
        self.ctx.process.spawn(self._health_check(node_id), name=f"gcs:health:{node_id[:8]}")
        if notify_restart:
            self.ctx.process.spawn(self._notify_restart(node_id), name="gcs:notify-restart")

    async def _notify_restart(self, node_id: str) -> None:
        node = self.nodes.get(node_id)
        if node is None:
            return
        with contextlib.suppress(NetworkError, RpcError):
            await self.ctx.call(node["raylet_address"], {"method": "NotifyGCSRestart"},
                                verb="NotifyGCSRestart", timeout=HEALTH_CHECK_TIMEOUT_S)

    async def _health_check(self, node_id: str) -> None:
        """Port of ``GcsHealthCheckManager::HealthCheckContext`` (gcs_health_check_manager.cc)."""
        await self.ctx.process.sleep(HEALTH_CHECK_INITIAL_DELAY_S)
        remaining = HEALTH_CHECK_FAILURE_THRESHOLD
        while node_id in self.nodes:
            if self.now - self.last_seen.get(node_id, -1e18) <= HEALTH_CHECK_PERIOD_S:
                remaining = HEALTH_CHECK_FAILURE_THRESHOLD
            else:
                try:
                    await self.ctx.call(self.nodes[node_id]["raylet_address"],
                                        {"method": "HealthCheck", "node_id": node_id},
                                        verb="HealthCheck",
                                        timeout=HEALTH_CHECK_TIMEOUT_S)
                    remaining = HEALTH_CHECK_FAILURE_THRESHOLD
                except (NetworkError, RpcError):
                    remaining -= 1
                if node_id not in self.nodes:
                    return
                if remaining <= 0:
                    await self.on_node_failure(node_id, HEALTH_CHECK_DEATH_REASON)
                    return
            await self.ctx.process.sleep(HEALTH_CHECK_PERIOD_S)

    async def on_node_failure(self, node_id: str, reason: str,
                              kind: str = UNEXPECTED_TERMINATION) -> None:
        """``GcsNodeManager::OnNodeFailure`` and its listeners: the node is DEAD (``kind``: its
        ``NodeDeathInfo.Reason``), the actors its drivers own die ("Owner's node has crashed."),
        its own actors fail (a drained node's restart costs no ``max_restarts``), drivers that
        ran there are finished."""
        node = self.nodes.pop(node_id, None)
        if node is None:
            return
        death_info = {"reason": kind, "reason_message": reason}
        node.update(state="DEAD", end_time_ms=unix_ms(self.now), death_reason=reason,
                    death_info=death_info)
        await self._put("NODE", node_id, node)
        self.dead_nodes[node_id] = node
        self.log("node_dead", node_id=node_id, name=node.get("node_name"), reason=reason)
        await self._evict_dead_nodes()
        for job_id, job in list(self.jobs.items()):
            if job.get("driver_node_id") == node_id and not job.get("is_dead"):
                await self._finish_job(job_id, SYSTEM_ERROR, "Owner's node has crashed.",
                                       str(node.get("node_ip") or ""))
        for actor_id, actor in list(self.actors.items()):
            if actor.get("node_id") != node_id:
                continue
            if actor["state"] == "ALIVE":
                await self._on_actor_failure(actor_id, node_died_cause(node_id, death_info),
                                             preempted=kind == EXPECTED_TERMINATION)
            elif actor["state"] in ("PENDING_CREATION", "RESTARTING"):
                # creation was in flight on the dead node: schedule it elsewhere, no restart spent
                actor.update(node_id=None, address=None)
                self.ctx.process.spawn(self._schedule(actor_id), name="gcs:schedule")

    # -- internal KV ------------------------------------------------------------------------------

    async def rpc_kv_get(self, req: dict[str, Any]) -> bytes | None:
        return await self._st(self.storage.get("KV", kv_storage_key(req["namespace"],
                                                                     req["key"])))

    async def rpc_kv_put(self, req: dict[str, Any]) -> bool:
        return await self._st(self.storage.put(
            "KV", kv_storage_key(req["namespace"], req["key"]), req["value"],
            overwrite=bool(req.get("overwrite", True))))

    async def rpc_kv_del(self, req: dict[str, Any]) -> bool:
        return await self._st(self.storage.delete("KV", kv_storage_key(req["namespace"],
                                                                        req["key"])))

    async def rpc_kv_keys(self, req: dict[str, Any]) -> list[str]:
        base = kv_storage_key(req["namespace"], "")
        keys = await self._st(self.storage.keys("KV", base + str(req.get("prefix") or "")))
        return [k[len(base):] for k in keys]

    async def rpc_kv_multi_get(self, req: dict[str, Any]) -> dict[str, bytes]:
        base = kv_storage_key(req["namespace"], "")
        found = await self._st(self.storage.multi_get("KV", [base + k for k in req["keys"]]))
        return {k[len(base):]: v for k, v in found.items()}

    # -- jobs ---------------------------------------------------------------------------------------

    async def rpc_next_job_id(self, req: dict[str, Any]) -> int:
        return await self._st(self.storage.get_next_job_id())

    async def rpc_add_job(self, req: dict[str, Any]) -> dict[str, Any]:
        job = dict(req["job"])
        job.setdefault("is_dead", False)
        job.setdefault("start_time_ms", unix_ms(self.now))
        await self._put("JOB", job["job_id"], job)
        self.jobs[job["job_id"]] = job
        return {}

    async def rpc_mark_job_finished(self, req: dict[str, Any]) -> dict[str, Any]:
        await self._finish_job(req["job_id"])
        return {}

    async def _finish_job(self, job_id: str, exit_type: str = INTENDED_USER_EXIT,
                          detail: str = "Owner's worker process has crashed.",
                          owner_ip: str | None = None) -> None:
        """``GcsJobManager::MarkJobAsFinished``: the job is dead; its non-detached actors die
        as ``GcsActorManager::OnWorkerDead`` kills the children of the driver's worker (a
        driver that exits is ``INTENDED_USER_EXIT``, measured on Ray 2.60)."""
        job = self.jobs.get(job_id)
        if job is None or job.get("is_dead"):
            return
        job.update(is_dead=True, end_time_ms=unix_ms(self.now))
        await self._put("JOB", job_id, job)
        self.log("job_finished", job_id=job_id)
        if owner_ip is None:
            owner_ip = str(job.get("driver_ip_address") or "")
        for actor_id, actor in list(self.actors.items()):
            if actor["job_id"] == job_id and not actor["detached"] and actor["state"] != "DEAD":
                await self._destroy_actor(actor_id, owner_died_cause(
                    actor.get("owner_id") or owner_worker_id(job_id), owner_ip, exit_type,
                    detail))

    async def rpc_get_all_job_info(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(j) for j in self.jobs.values()]

    # -- actors -------------------------------------------------------------------------------------

    def _changed(self, actor_id: str) -> None:
        actor = self.actors[actor_id]
        actor["version"] = int(actor.get("version", 0)) + 1
        event = self._actor_events.pop(actor_id, None)
        if event is not None:
            event.set()

    async def _save_actor(self, actor_id: str) -> None:
        self._changed(actor_id)
        await self._put("ACTOR", actor_id, self.actors[actor_id])

    async def rpc_create_actor(self, req: dict[str, Any]) -> dict[str, Any]:
        actor = dict(req["actor"])
        key = (actor.get("ray_namespace") or "", actor.get("name") or "")
        if key[1]:
            existing = self.named.get(key)
            if existing is not None and self.actors[existing]["state"] != "DEAD":
                raise RpcError("ALREADY_EXISTS",
                               f"Actor with name '{key[1]}' already exists in the namespace "
                               f"{key[0]}")
        job = self.jobs.get(actor["job_id"])
        if job is not None and job.get("is_dead") and not actor["detached"]:
            raise RpcError("FAILED_PRECONDITION", f"the owner job {actor['job_id']} is dead")
        actor.update(state="PENDING_CREATION", num_restarts=0, node_id=None, address=None,
                     version=0, death_cause=None, death_context=None, pid=0, num_preempted=0)
        actor.setdefault("owner_id", owner_worker_id(actor["job_id"]))
        if job is not None:
            actor.setdefault("owner_ip", job.get("driver_ip_address") or "")
        self.actors[actor["actor_id"]] = actor
        self.specs[actor["actor_id"]] = req["spec"]
        if key[1]:
            self.named[key] = actor["actor_id"]
        await self._st(self.storage.put("ACTOR_TASK_SPEC", actor["actor_id"], req["spec"]))
        await self._save_actor(actor["actor_id"])
        await self._schedule(actor["actor_id"])
        while self.actors[actor["actor_id"]]["state"] not in ("ALIVE", "DEAD"):
            await self._wait_change(actor["actor_id"], 3600.0)
        return dict(self.actors[actor["actor_id"]])

    def _pick_node(self, actor: dict[str, Any]) -> dict[str, Any] | None:
        """Ray's default hybrid policy, simplified: feasible alive nodes, round-robin; a node
        affinity (``node_id``, soft or hard) or ``head`` pins it."""
        need = float(actor.get("num_cpus", 1.0))
        resources = actor.get("resources") or {}
        feasible = [
            n for n in self.nodes.values()
            if float(n["resources"].get("CPU", 0.0)) >= need
            and all(float(n["resources"].get(r, 0.0)) >= float(q) for r, q in resources.items())
        ]
        wanted = actor.get("node_id_affinity")
        if actor.get("head"):
            heads = [n for n in self.nodes.values() if n.get("is_head")]
            wanted = heads[0]["node_id"] if heads else "<no alive head>"
        if wanted:
            pinned = [n for n in self.nodes.values() if n["node_id"] == wanted]
            if pinned:
                return pinned[0]
            if not actor.get("soft"):
                return None
        if not feasible:
            return None
        self._rr += 1
        return feasible[self._rr % len(feasible)]

    def _unschedulable(self, actor: dict[str, Any]) -> str | None:
        wanted = actor.get("node_id_affinity")
        if wanted and not actor.get("soft") and wanted in self.dead_nodes:
            return (f"The actor is not schedulable: the node specified via "
                    f"NodeAffinitySchedulingStrategy doesn't exist any more or is infeasible, "
                    f"and soft=False was specified. Node Id: {wanted}")
        return None

    async def _schedule(self, actor_id: str) -> None:
        """``GcsActorScheduler::Schedule``: lease a worker on a node and create the actor."""
        actor = self.actors.get(actor_id)
        if actor is None or actor["state"] not in ("PENDING_CREATION", "RESTARTING") \
                or actor.get("node_id"):
            return
        reason = self._unschedulable(actor)
        if reason is not None:
            await self._destroy_actor(actor_id, plain_cause("actor_unschedulable_context",
                                                            reason))
            return
        node = self._pick_node(actor)
        if node is None:
            return  # stays pending until a node registers
        actor.update(node_id=node["node_id"], address=node["raylet_address"])
        try:
            created = await self.ctx.call(node["raylet_address"], {
                "method": "CreateActor", "actor": dict(actor), "spec": self.specs[actor_id],
            }, verb="CreateActor", timeout=HEALTH_CHECK_TIMEOUT_S)
        except NetworkError:
            if actor.get("node_id") == node["node_id"]:
                actor.update(node_id=None, address=None)
                self.ctx.process.spawn(self._retry_schedule(actor_id), name="gcs:reschedule")
            return
        except RpcError as err:
            if actor.get("node_id") == node["node_id"]:
                actor.update(node_id=None, address=None)
                await self._destroy_actor(actor_id, plain_cause(
                    "creation_task_failure_context", "The actor died because of an error raised "
                                                     f"in its creation task: {err.message}"))
            return
        if self.actors.get(actor_id) is not actor or actor["state"] == "DEAD" \
                or actor.get("node_id") != node["node_id"]:
            return  # it failed or moved while the raylet was creating it
        created = created if isinstance(created, dict) else {}
        actor.update(state="ALIVE", last_node_id=node["node_id"],
                     node_ip=str(node.get("node_ip") or ""), pid=int(created.get("pid") or 0),
                     repr_name=str(created.get("repr_name") or ""))
        await self._save_actor(actor_id)
        self.log("actor_alive", actor_id=actor_id, name=actor.get("name"),
                 node_id=node["node_id"], restarts=actor["num_restarts"])

    async def _retry_schedule(self, actor_id: str) -> None:
        await self.ctx.process.sleep(1.0)
        await self._schedule(actor_id)

    async def _on_actor_failure(self, actor_id: str, cause: Cause,
                                no_restart: bool = False, preempted: bool = False) -> None:
        """``GcsActorManager::RestartActor``: restart within ``max_restarts`` if its owner
        lives (detached actors have none), else the actor is DEAD with ``cause`` (so an actor
        out of restarts is dead of its last failure). Restarts because its node was drained
        (``preempted``) do not count against ``max_restarts`` when it has any."""
        actor = self.actors[actor_id]
        owner_alive = actor["detached"] or not self.jobs.get(actor["job_id"], {}).get(
            "is_dead", False)
        budget = int(actor.get("max_restarts", 0))
        preempted_before = int(actor.get("num_preempted") or 0)
        effective = int(actor["num_restarts"]) - preempted_before
        can_restart = budget == -1 or effective < budget or (preempted and budget > 0)
        if no_restart or not owner_alive or not can_restart:
            await self._destroy_actor(actor_id, cause)
            return
        actor.update(state="RESTARTING", node_id=None, address=None,
                     num_restarts=int(actor["num_restarts"]) + 1, death_cause=cause["message"],
                     num_preempted=preempted_before + (1 if preempted else 0))
        await self._save_actor(actor_id)
        self.log("actor_restarting", actor_id=actor_id, name=actor.get("name"),
                 restarts=actor["num_restarts"])
        self.ctx.process.spawn(self._schedule(actor_id), name="gcs:schedule")

    async def _destroy_actor(self, actor_id: str, cause: Cause) -> None:
        """``GcsActorManager::DestroyActor``: DEAD with ``cause``, its name freed, its
        creation spec deleted, its worker killed."""
        actor = self.actors[actor_id]
        address = actor.get("address")
        context = dict(cause["context"])
        context["never_started"] = actor["state"] in ("DEPENDENCIES_UNREADY", "PENDING_CREATION")
        actor.update(state="DEAD", death_cause=cause["message"], death_context=context,
                     node_id=None, address=None)
        key = (actor.get("ray_namespace") or "", actor.get("name") or "")
        if key[1] and self.named.get(key) == actor_id:
            del self.named[key]
        self.specs.pop(actor_id, None)
        await self._st(self.storage.delete("ACTOR_TASK_SPEC", actor_id))
        await self._save_actor(actor_id)
        self.log("actor_dead", actor_id=actor_id, name=actor.get("name"),
                 cause=cause["message"])
        if address:
            self.ctx.process.spawn(self._kill_on_raylet(address, actor_id), name="gcs:kill")

    async def _kill_on_raylet(self, address: str, actor_id: str) -> None:
        with contextlib.suppress(NetworkError, RpcError):
            await self.ctx.call(address, {"method": "KillActor", "actor_id": actor_id},
                                verb="KillActor", timeout=HEALTH_CHECK_TIMEOUT_S)

    async def _wait_change(self, actor_id: str, timeout: float) -> None:
        event = self._actor_events.setdefault(actor_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    async def rpc_get_actor_info(self, req: dict[str, Any]) -> dict[str, Any] | None:
        actor = self.actors.get(req["actor_id"])
        return dict(actor) if actor is not None else None

    async def rpc_get_named_actor_info(self, req: dict[str, Any]) -> dict[str, Any] | None:
        actor_id = self.named.get((req.get("namespace") or "", req["name"]))
        return dict(self.actors[actor_id]) if actor_id is not None else None

    async def rpc_list_actors(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(a) for a in self.actors.values()]

    async def rpc_wait_actor(self, req: dict[str, Any]) -> dict[str, Any] | None:
        actor_id = req["actor_id"]
        actor = self.actors.get(actor_id)
        if actor is not None and int(actor.get("version", 0)) <= int(req["version"]):
            await self._wait_change(actor_id, float(req.get("wait", 30.0)))
        actor = self.actors.get(actor_id)
        return dict(actor) if actor is not None else None

    async def rpc_kill_actor(self, req: dict[str, Any]) -> dict[str, Any]:
        actor = self.actors.get(req["actor_id"])
        if actor is None:
            raise RpcError("NOT_FOUND", f"actor {req['actor_id']} not found")
        if actor["state"] != "DEAD":
            address = actor.get("address")
            if address:
                await self._kill_on_raylet(address, req["actor_id"])
            cause = worker_died_cause(INTENDED_USER_EXIT, EXIT_ACTOR_DETAIL) \
                if req.get("exit_actor") else killed_cause()
            await self._on_actor_failure(req["actor_id"], cause,
                                         no_restart=bool(req.get("no_restart", True)))
        return {}

    async def rpc_report_actor_failure(self, req: dict[str, Any]) -> dict[str, Any]:
        actor = self.actors.get(req["actor_id"])
        if actor is not None and actor["state"] == "ALIVE" \
                and actor.get("node_id") == req.get("node_id"):
            await self._on_actor_failure(req["actor_id"], worker_died_cause(
                str(req.get("exit_type") or SYSTEM_ERROR),
                str(req.get("reason") or WORKER_CRASH_DETAIL)))
        return {}

    async def rpc_report_worker(self, req: dict[str, Any]) -> dict[str, Any]:
        await self._put("WORKERS", req["worker"]["worker_id"], req["worker"])
        return {}
