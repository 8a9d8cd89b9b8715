"""Workloads: tasks and actors, and the driver API tests use to run them on a cluster.

`RayClient` is a driver (``ray.init(address=...)``) that reaches the cluster only through the
network, by its GCS address:

    client = RayClient(world.network, "raycluster-head-svc:6379", caller="driver")
    await client.connect()                                   # registers a job
    ref = client.remote(work, 21, max_retries=3)             # a task; await ref for its value
    counter = await client.create_actor(Counter, name="c", max_restarts=1)
    await counter.call("incr")                               # ActorDiedError once it is gone
    await client.shutdown()                                  # the job ends; its actors die

What Ray does and this follows (FACTS §3):
- a task runs on a raylet; if its worker or node dies it is retried up to ``max_retries`` (default
  3, -1 forever) on another node; an exception it raises is not retried unless
  ``retry_exceptions``; a node that refuses before the task started costs no retry;
- an actor lives in its own worker process on a node; ``max_restarts`` (default 0) restarts re-run
  the constructor, so memory is lost; ``max_task_retries`` (default 0) retries calls that failed
  because the actor died or was restarting; a non-detached actor dies with its job, a detached one
  does not;
- checkpoint hook: create the actor with ``checkpoint="<store>"`` and give its class
  ``save_checkpoint(self) -> state`` and ``load_checkpoint(self, state)``; the raylet saves after
  every successful call and restores after every (re)construction, through the named
  `CheckpointStore` (outside the cluster), so "process state lost, progress restored" shows.

Actor classes travel by name (``module:QualName``, or a key of ``RayConfig.actor_classes``), their
constructor arguments pickled, so the GCS can store the creation spec and recreate the actor after
its own restart. Task functions are passed as Python objects (tasks are never stored in the GCS).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pickle
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from emu.kernel.network import ConnectionRefused, NetworkError
from emu.kernel.process import Process

from .config import RayConfig
from .gcs_client import GcsClient, hex_id, job_id_hex, unix_ms
from .net import Caller, RpcError, bind_caller


class RayError(Exception):
    """Base of the errors a driver sees."""


class RayTaskError(RayError):
    """The task or actor method raised; ``cause`` is what it raised."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


class WorkerCrashedError(RayError):
    """The worker (or its node) died while running the task, and no retries were left."""


class RayActorError(RayError):
    """The actor is dead, or died while running the call."""


class ActorDiedError(RayActorError):
    """The actor's death is confirmed (its restarts are spent or it was killed)."""


class ActorUnavailableError(RayError):
    """The actor can't be reached right now (restarting, or its node unreachable); the call
    may or may not have run."""


class GetTimeoutError(RayError):
    """Waiting for an actor or a value took longer than the caller allowed."""


# -- classes by name -------------------------------------------------------------------------------


def class_descriptor(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve_class(descriptor: str, config: RayConfig) -> type:
    """The class named by ``descriptor`` (``RayConfig.actor_classes`` first, then import)."""
    if descriptor in config.actor_classes:
        return config.actor_classes[descriptor]
    module_name, _, qualname = descriptor.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise TypeError(f"{descriptor} is not a class")
    return obj


async def maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


@attrs.define
class ActorRuntime:
    """What a hosted actor may use of its worker (its class defines ``_attach_runtime(rt)``).

    ``call``: network calls from the actor's worker process; ``gcs``: a GCS client from it;
    ``spawn``: background work that dies with the actor; ``config``: the image's `RayConfig`.
    """

    actor_id: str
    node_id: str
    is_head_node: bool
    num_restarts: int
    process: Process
    call: Caller
    gcs: GcsClient
    config: RayConfig
    node_ip: str
    raylet: Any

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def spawn(self, coro: Awaitable[Any], name: str = "actor") -> asyncio.Task[Any]:
        async def run() -> Any:
            return await coro

        return self.process.spawn(run(), name=name)

    async def sleep(self, seconds: float) -> None:
        await self.process.sleep(seconds)

    def log(self, event: str, **fields: Any) -> None:
        self.process.log(event, **fields)


# -- driver side -----------------------------------------------------------------------------------


class ObjectRef:
    """A task's future value; ``await ref`` (or `RayClient.get`) returns it or raises."""

    def __init__(self, task: asyncio.Task[Any], task_id: str) -> None:
        self._task = task
        self.task_id = task_id
        #: Attempts made so far (1 + retries), for tests.
        self.attempts = 0

    def __await__(self) -> Any:
        return self._task.__await__()

    def done(self) -> bool:
        return self._task.done()


class ActorHandle:
    """A handle to an actor; `call` runs a method on it wherever it lives now."""

    def __init__(self, client: RayClient, record: dict[str, Any]) -> None:
        self._client = client
        self.actor_id: str = record["actor_id"]
        self.name: str | None = record.get("name")
        self.max_task_retries = int(record.get("max_task_retries", 0))
        self._record = record

    def __repr__(self) -> str:
        return f"ActorHandle({self.name or self.actor_id[:12]})"

    async def state(self) -> dict[str, Any]:
        """The actor's current GCS record (state, node, restarts, death cause)."""
        record = await self._client.gcs.actor(self.actor_id)
        if record is None:
            raise ActorDiedError(f"actor {self.actor_id} is unknown to the GCS")
        self._record = record
        return record

    async def call(self, method: str, *args: Any, timeout: float = 600.0, **kwargs: Any) -> Any:
        """Run ``method(*args, **kwargs)`` on the actor and return its result.

        Retries (up to ``max_task_retries``) when the actor died or is restarting mid-call;
        raises `ActorDiedError` once it is confirmed dead, `ActorUnavailableError` when it can't
        be reached and no retries are left, `RayTaskError` if the method raised.
        """
        retries_left = self.max_task_retries
        deadline = self._client.now + timeout
        while True:
            record = self._record
            if record.get("state") != "ALIVE" or not record.get("address"):
                record = await self._wait_alive(deadline)
            try:
                result = await self._call_watching(record, method, args, kwargs, deadline)
            except (NetworkError, RpcError) as err:
                self._record = {**record, "state": "UNKNOWN"}
                try:
                    current = await self._client.gcs.actor(self.actor_id)
                except NetworkError:  # the GCS is down too: nobody can say more now
                    if retries_left == 0:
                        raise ActorUnavailableError(
                            f"actor {self.name or self.actor_id} is unavailable and the GCS "
                            f"is unreachable: {err}") from err
                    if retries_left > 0:
                        retries_left -= 1
                    self._record = record
                    await asyncio.sleep(1.0)
                    continue
                if current is not None:
                    self._record = current
                if current is None or current["state"] == "DEAD":
                    cause = current.get("death_cause") if current else None
                    raise ActorDiedError(cause or f"actor {self.actor_id} died: {err}") from err
                if retries_left == 0:
                    raise ActorUnavailableError(
                        f"actor {self.name or self.actor_id} is unavailable: {err}") from err
                if retries_left > 0:
                    retries_left -= 1
                if current["state"] == "ALIVE" and current.get("address") == record["address"]:
                    # the GCS hasn't noticed yet: wait for its verdict
                    self._record = await self._client.gcs.wait_actor(
                        self.actor_id, int(current.get("version", 0)),
                        timeout=max(min(30.0, deadline - self._client.now), 0.001)) or current
                continue
            if "error" in result:
                raise RayTaskError(result["error"])
            return result["ok"]

    async def _call_watching(self, record: dict[str, Any], method: str, args: Any, kwargs: Any,
                             deadline: float) -> Any:
        """The call, abandoned as soon as the GCS reports the actor no longer ALIVE at that
        address (the caller's core worker subscribes to its actor's state): a call to an actor
        whose node vanished fails when the GCS declares the node dead, not after the call's own
        timeout on an address that no longer answers."""
        call = asyncio.ensure_future(self._client.call(
            record["address"],
            {"method": "ActorCall", "actor_id": self.actor_id, "name": method,
             "args": args, "kwargs": kwargs}, verb="ActorCall", name=method,
            timeout=max(deadline - self._client.now, 0.001)))
        watch = asyncio.ensure_future(self._watch_state(record, deadline))
        try:
            await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (call, watch):
                if not task.done():
                    task.cancel()
        if call.done() and not call.cancelled():
            return call.result()
        changed = watch.result()
        raise NetworkError(f"actor {self.name or self.actor_id} is {changed.get('state')}: the "
                           "call in flight was abandoned", dst=record["address"])

    async def _watch_state(self, record: dict[str, Any], deadline: float) -> dict[str, Any]:
        version = int(record.get("version", 0))
        while True:
            left = deadline - self._client.now
            if left <= 0:
                await asyncio.Event().wait()  # the call's own timeout decides
            try:
                current = await self._client.gcs.wait_actor(self.actor_id, version,
                                                            timeout=min(30.0, left))
            except (NetworkError, RpcError):
                await asyncio.sleep(1.0)
                continue
            if current is None:
                return {"state": "DEAD"}
            if current.get("state") != "ALIVE" or current.get("address") != record["address"]:
                return current
            version = int(current.get("version", version))

    async def _wait_alive(self, deadline: float) -> dict[str, Any]:
        record = self._record
        while True:
            if record.get("state") == "ALIVE" and record.get("address"):
                self._record = record
                return record
            if record.get("state") == "DEAD":
                self._record = record
                raise ActorDiedError(record.get("death_cause") or f"actor {self.actor_id} died")
            remaining = deadline - self._client.now
            if remaining <= 0:
                raise GetTimeoutError(f"actor {self.name or self.actor_id} did not become "
                                      f"ALIVE in time (state {record.get('state')})")
            fresh = await self._client.gcs.wait_actor(
                self.actor_id, int(record.get("version", -1)), timeout=min(remaining, 30.0))
            record = fresh if fresh is not None else {"state": "DEAD"}


class RayClient:
    """A driver connected to a cluster by its GCS address, through the network."""

    def __init__(self, network: Any, gcs_address: str, *, process: Process | None = None,
                 caller: str = "driver", rng: Any = None, namespace: str = "") -> None:
        self.call: Caller = bind_caller(network, process=process, caller=caller)
        self.gcs = GcsClient(self.call, gcs_address)
        self.namespace = namespace
        self.job_id = ""
        self._rng = rng
        self._seq = 0
        self._rr = 0

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def _new_id(self, nbytes: int) -> str:
        if self._rng is not None:
            return hex_id(self._rng, nbytes)
        self._seq += 1
        return f"{self.job_id}{self._seq:0{nbytes * 2 - len(self.job_id)}x}"

    async def connect(self, *, driver_node_id: str | None = None, entrypoint: str = "",
                      submission_id: str | None = None) -> str:
        """Register this driver's job in the GCS (``JOB`` table); the job id."""
        self.job_id = job_id_hex(int(await self.gcs.rpc("GetNextJobID")))
        await self.gcs.add_job({
            "job_id": self.job_id, "driver_node_id": driver_node_id, "entrypoint": entrypoint,
            "submission_id": submission_id, "is_dead": False, "start_time_ms": unix_ms(self.now),
        })
        return self.job_id

    async def shutdown(self) -> None:
        """The driver exits: its job is finished and its non-detached actors die."""
        if self.job_id:
            await self.gcs.mark_job_finished(self.job_id)

    async def nodes(self) -> list[dict[str, Any]]:
        return await self.gcs.nodes()

    # -- tasks ------------------------------------------------------------------------------------

    def remote(self, fn: Callable[..., Any], *args: Any, max_retries: int = 3,
               retry_exceptions: bool = False, num_cpus: float = 1.0,
               node_id: str | None = None, soft: bool = False, **kwargs: Any) -> ObjectRef:
        """Submit ``fn(*args, **kwargs)`` as a task; await the returned ref for its value."""
        task_id = self._new_id(24)
        holder: list[ObjectRef] = []
        task = asyncio.ensure_future(self._run_task(
            holder, task_id, fn, args, kwargs, max_retries, retry_exceptions, num_cpus,
            node_id, soft))
        ref = ObjectRef(task, task_id)
        holder.append(ref)
        return ref

    async def get(self, ref: ObjectRef, timeout: float | None = None) -> Any:
        if timeout is None:
            return await ref
        try:
            return await asyncio.wait_for(asyncio.shield(ref._task), timeout)
        except TimeoutError:
            raise GetTimeoutError(f"task {ref.task_id} not done within {timeout:g}s") from None

    def _eligible(self, nodes: list[dict[str, Any]], num_cpus: float, node_id: str | None,
                  soft: bool, exclude: set[str]) -> list[dict[str, Any]]:
        alive = [n for n in nodes if n["state"] == "ALIVE" and n["node_id"] not in exclude]
        if node_id is not None:
            pinned = [n for n in alive if n["node_id"] == node_id]
            if pinned or not soft:
                return pinned
        return [n for n in alive if float(n["resources"].get("CPU", 0.0)) >= num_cpus]

    async def _run_task(self, holder: list[ObjectRef], task_id: str, fn: Callable[..., Any],
                        args: tuple[Any, ...], kwargs: dict[str, Any], max_retries: int,
                        retry_exceptions: bool, num_cpus: float, node_id: str | None,
                        soft: bool) -> Any:
        retries_left = max_retries
        refused: set[str] = set()
        while True:
            try:
                nodes = await self.gcs.nodes()
            except NetworkError:
                nodes = []
            eligible = self._eligible(nodes, num_cpus, node_id, soft, refused)
            if not eligible:
                refused.clear()
                await asyncio.sleep(1.0)  # infeasible or GCS unreachable: stay pending
                continue
            self._rr += 1
            node = eligible[self._rr % len(eligible)]
            holder[0].attempts += 1
            try:
                result = await self.call(node["raylet_address"], {
                    "method": "ExecuteTask", "task_id": task_id, "fn": fn, "args": args,
                    "kwargs": kwargs}, verb="ExecuteTask", name=getattr(fn, "__name__", "task"),
                    timeout=24 * 3600.0)
            except ConnectionRefused:
                holder[0].attempts -= 1
                refused.add(node["node_id"])  # never started there: no retry spent
                continue
            except (NetworkError, RpcError) as err:
                if retries_left == 0:
                    raise WorkerCrashedError(
                        f"The worker died unexpectedly while executing task {task_id} on node "
                        f"{node['node_id']}: {err}") from err
                if retries_left > 0:
                    retries_left -= 1
                refused.add(node["node_id"])
                continue
            if "error" in result:
                if retry_exceptions and retries_left != 0:
                    if retries_left > 0:
                        retries_left -= 1
                    continue
                raise RayTaskError(result["error"])
            return result["ok"]

    # -- actors -----------------------------------------------------------------------------------

    async def create_actor(self, cls: type | str, *args: Any, name: str | None = None,
                           namespace: str | None = None, detached: bool = False,
                           max_restarts: int = 0, max_task_retries: int = 0,
                           num_cpus: float | None = None,
                           resources: dict[str, float] | None = None,
                           node_id: str | None = None, soft: bool = False, head: bool = False,
                           checkpoint: str | None = None, checkpoint_key: str | None = None,
                           timeout: float = 600.0, **kwargs: Any) -> ActorHandle:
        """Create an actor (``Cls.options(...).remote(*args)``) and wait until it is ALIVE.

        Raises `ActorDiedError` if its constructor failed, `RpcError` ``ALREADY_EXISTS`` for a
        taken name. Without ``num_cpus`` it needs a CPU to be placed and holds none once
        created (Ray's default), so its ``required_resources`` are empty.
        """
        descriptor = cls if isinstance(cls, str) else class_descriptor(cls)
        actor_id = self._new_id(16)
        held = {"CPU": float(num_cpus)} if num_cpus else {}
        held.update({k: float(v) for k, v in (resources or {}).items() if v})
        record = {
            "actor_id": actor_id, "name": name, "ray_namespace": namespace or self.namespace,
            "class_name": descriptor.rpartition(":")[2].rpartition(".")[2],
            "job_id": self.job_id, "detached": detached,
            "max_restarts": max_restarts, "max_task_retries": max_task_retries,
            "num_cpus": 1.0 if num_cpus is None else num_cpus,
            "resources": dict(resources or {}), "required_resources": held,
            "node_id_affinity": node_id, "soft": soft, "head": head,
        }
        spec = pickle.dumps({"cls": descriptor, "args": args, "kwargs": kwargs,
                             "checkpoint": checkpoint, "checkpoint_key": checkpoint_key})
        created = await self.gcs.create_actor(record, spec, timeout=timeout)
        if created["state"] == "DEAD":
            raise ActorDiedError(created.get("death_cause") or "actor creation failed")
        return ActorHandle(self, created)

    async def get_actor(self, name: str, namespace: str | None = None) -> ActorHandle:
        """``ray.get_actor``: a handle to a live named actor (``ValueError`` if none)."""
        record = await self.gcs.named_actor(name, namespace or self.namespace)
        if record is None:
            raise ValueError(f"Failed to look up actor with name '{name}'. This could because "
                             "1. You are trying to look up a named actor you didn't create. "
                             "2. The named actor died. 3. You did not use a namespace matching "
                             "the namespace of the actor.")
        return ActorHandle(self, record)

    async def kill(self, handle: ActorHandle, no_restart: bool = True) -> None:
        """``ray.kill``: end the actor now (restartable if ``no_restart`` is False)."""
        await self.gcs.kill_actor(handle.actor_id, no_restart=no_restart)
