"""Ray faults as plain functions, for tests now and for ``emu.faults`` values later.

Each takes what it acts on explicitly — a world (anything with ``.network`` and ``.processes``,
so a kernel `World` or an ``emu.Simulation``), a Pod name, a Redis address, the `RayConfig` — and
acts only through public verbs: killing a process, a network outage, a Redis command sent over
the network, a behaviour change in the config. Undo notes are in each docstring.

- `redis_down` / `redis_up`: the Redis endpoint refuses (or drops) connections; the GCS's 100 ms
  PING fails and the GCS exits.
- `kill_redis`: the Redis process dies (its data too, unless it has a volume snapshot).
- `flush_redis`: ``FLUSHALL`` on a live Redis (every namespace gone, the server stays up).
- `wipe_redis_namespace`: Ray's ``cleanup_redis_storage`` for one namespace.
- `kill_gcs`, `kill_raylet`: end the head's ``gcs_server`` or a node's raylet, with SIGKILL
  (exit 137: ``ray start --block`` notices within a second and the container exits) or SIGTERM
  (exit 143, ``pkill``'s default: not counted by ``--block``; the head raylet gives up after its
  reconnect timeout instead).
- `slow_serve_deployment`, `fail_serve_deployment`: the next deployment of an app takes longer,
  or fails in its build step (DEPLOY_FAILED).
- `fail_job`: jobs with this entrypoint exit non-zero (FAILED) after ``after`` seconds.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from emu.backends import RedisStoreClient
from emu.kernel.process import Process

from .config import JobBehaviour, RayConfig
from .net import bind_caller
from .redis_server import NetworkRedis

SIGNAL_EXIT_CODES = {"KILL": 137, "TERM": 143}


class WorldLike(Protocol):
    network: Any
    processes: Any


def _ray_child(world: WorldLike, pod: str, child: str) -> Process:
    for proc in world.processes.all():
        if proc.alive and proc.name.startswith(f"{pod}/") and proc.name.endswith(f"/{child}"):
            result: Process = proc
            return result
    raise LookupError(f"no live {child} in Pod {pod!r}")


def _end(proc: Process, signal: str) -> None:
    if signal not in SIGNAL_EXIT_CODES:
        raise ValueError(f"signal must be 'KILL' or 'TERM', not {signal!r}")
    if signal == "KILL":
        proc.crash("SIGKILL")
    else:
        proc.exit(SIGNAL_EXIT_CODES["TERM"], "SIGTERM")


def kill_gcs(world: WorldLike, pod: str, signal: str = "KILL") -> Process:
    """End the ``gcs_server`` of head Pod ``pod``. Undo: the container restarts (kubelet)."""
    proc = _ray_child(world, pod, "gcs_server")
    _end(proc, signal)
    return proc


def kill_raylet(world: WorldLike, pod: str, signal: str = "KILL") -> Process:
    """End the raylet of Pod ``pod`` (head or worker)."""
    proc = _ray_child(world, pod, "raylet")
    _end(proc, signal)
    return proc


def redis_down(world: WorldLike, address: str, mode: str = "refuse") -> None:
    """Redis at ``address`` (``host:port`` as registered) stops answering. Undo: `redis_up`."""
    world.network.outage(address, mode=mode)


def redis_up(world: WorldLike, address: str) -> None:
    world.network.restore(address)


def kill_redis(world: WorldLike, pod: str) -> Process:
    """The Redis container of ``pod`` dies (SIGKILL). Its data survives only in a volume."""
    for proc in world.processes.all():
        if proc.alive and proc.name.startswith(f"{pod}/"):
            proc.crash("SIGKILL")
            result: Process = proc
            return result
    raise LookupError(f"no live container in Pod {pod!r}")


async def flush_redis(world: WorldLike, address: str, password: str | None = None) -> None:
    """``FLUSHALL`` on the Redis at ``address``: every key of every namespace is gone."""
    client = NetworkRedis(bind_caller(world.network, caller="fault"), address, password=password)
    await client.execute_command("FLUSHALL")


async def wipe_redis_namespace(world: WorldLike, address: str, namespace: str,
                               password: str | None = None) -> int:
    """Delete ``RAY<namespace>@*`` (what KubeRay's cleanup Job runs); how many keys went."""
    client = NetworkRedis(bind_caller(world.network, caller="fault"), address, password=password)
    store = RedisStoreClient(client, namespace, address=address, external=False)
    return await store.delete_namespace()


def slow_serve_deployment(config: RayConfig, import_path: str, build_seconds: float,
                          replica_start_seconds: float | None = None) -> None:
    """Deployments of ``import_path`` from now on stay DEPLOYING for ``build_seconds``."""
    current = config.serve_behaviour(import_path)
    config.serve_apps[import_path] = attrs.evolve(
        current, build_seconds=build_seconds,
        replica_start_seconds=current.replica_start_seconds if replica_start_seconds is None
        else replica_start_seconds)


def fail_serve_deployment(config: RayConfig, import_path: str, message: str) -> None:
    """Deployments of ``import_path`` from now on end DEPLOY_FAILED with ``message``."""
    config.serve_apps[import_path] = attrs.evolve(config.serve_behaviour(import_path),
                                                  fail_message=message)


def fail_job(config: RayConfig, entrypoint: str, exit_code: int = 1, after: float = 5.0,
             logs: str = "") -> None:
    """Jobs running ``entrypoint`` exit with ``exit_code`` after ``after`` seconds (FAILED)."""
    config.jobs[entrypoint.strip()] = JobBehaviour(duration=after, exit_code=exit_code,
                                                   logs=logs)
