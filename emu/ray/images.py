"""The Ray and Redis images: what their containers run, by command line.

`register_ray_programs` puts the programs into a `ProgramRegistry` (``rayproject/ray``,
``rayproject/ray-ml``, ``rayproject/ray-llm``, any ``*/ray`` image, ``redis`` and KubeRay's
light-weight ``kuberay/submitter``) and returns the
shared `RayConfig`. A Ray container's role comes from `emu.ray.cli.classify`:

- **head** (``ray start --head``): like ``ray start --block``, it starts child processes on the
  Pod's host — ``<container>/gcs_server`` (GCS on ``--port``, 6379), then ``<container>/dashboard``
  (8265) and ``<container>/raylet`` (a random port, agent 52365) — and exits 1 a second after any of them
  ends with a code other than 0/15/143 (killing the rest), as Ray's ``--block`` loop does. A GCS
  stopped with SIGTERM (``pkill gcs_server``) is therefore not noticed until the head raylet gives
  up on it after its reconnect timeout.
  GCS storage, as ``GcsServer::GetStorageType`` chooses: ``RAY_gcs_storage`` (default
  ``memory``); with ``memory`` and a non-empty ``RAY_REDIS_ADDRESS`` → Redis (password from
  ``--redis-password``, ``REDIS_PASSWORD`` or the URL; username likewise), namespace
  ``RAY_external_storage_namespace`` (default ``default``); ``rocksdb`` needs
  ``RAY_gcs_storage_path`` and uses that directory when a mounted volume covers it (else a
  directory that dies with the container); any other value is fatal. A Redis address listed in
  ``RayConfig.redis_urls`` goes to that real server instead of the emulated network.
- **worker** (``ray start --address=...``): a ``<container>/raylet`` registering with the GCS at
  ``--address`` (or ``RAY_ADDRESS``), reconnect window ``RAY_gcs_rpc_server_reconnect_timeout_s``.
- **wait-gcs**, **script** (the RayJob submitter), **cleanup-redis**: see `emu.ray.cli`.

SIGTERM (the Pod deleted): KubeRay runs ``ray start`` under ``/bin/bash -c -- "ulimit ...; ray
start ... --block"``. From the Ray 2.33 images on, bash execs its last command, so ``ray start`` is
PID 1 and its handler stops the node (`RayNode._sigterm`: the raylet unregisters its node, the
rest dies with the container). In the older images (bash 5.0) bash stays PID 1: a non-interactive
bash forwards no signal and the kernel drops a PID 1's default actions, so SIGTERM does nothing
and every Ray process runs on, GCS included, until the kubelet's SIGKILL at the end of
``terminationGracePeriodSeconds`` (`sigterm_reaches_ray`; ray-project/ray#64181, and
kuberay#503: Ray Pods took the full 30 s to terminate).

Readiness (``ctx.set_ready``) is the instantaneous answer of KubeRay's probes: head — GCS up and
raylet registered; worker — raylet registered, and if its readiness probe checks the Serve proxy
(``-/healthz``), that proxy healthy too. It is recomputed on every change, never polled.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import attrs

from emu.backends import (
    GcsStorage,
    MemoryStoreClient,
    RedisStoreClient,
    RocksDBStoreClient,
    StorageLocked,
    StorageUnavailable,
)
from emu.kernel import clock
from emu.kernel.process import Process
from emu.kernel.programs import ContainerContext, ProgramRegistry, idle_program

from . import tls
from .cli import classify, expand, parse_ray_start, script_of, wait_gcs_ready
from .config import RayConfig
from .dashboard import Dashboard, ray_version_of
from .gcs import GcsServer
from .gcs_client import DEFAULT_RECONNECT_TIMEOUT_S
from .raylet import Raylet
from .redis_server import NetworkRedis, parse_redis_address, redis_program, resolve_in_volumes
from .tls import WAIT_FOR_TLS_IP_SAN_MARK, wait_for_tls_ip_san

RAY_IMAGES = ("rayproject/ray", "rayproject/ray-ml", "rayproject/ray-llm", "ray")
REDIS_IMAGES = ("redis", "bitnami/redis")
#: KubeRay's light-weight submitter (`emu.ray.submitter`).
SUBMITTER_IMAGE = "kuberay/submitter"
#: Exit codes ``ray start --block`` does not count as a failure (0, SIGTERM, 128+SIGTERM).
EXPECTED_EXIT_CODES = (0, 15, -15, 143)
#: The first Ray image whose bash execs the last command of ``bash -c "ulimit ...; ray start"``
#: (ray-project/ray#64181: 2.32 keeps bash as PID 1, 2.33 does not).
FIRST_IMAGE_EXECING_RAY_START = (2, 33, 0)


def sigterm_reaches_ray(ctx: ContainerContext, config: RayConfig) -> bool:
    """Whether the container's SIGTERM reaches ``ray start``: yes when no shell runs it, or the
    shell runs it alone (bash execs a lone command), or the image's Ray (its tag, else
    `RayConfig.ray_version`) is 2.33 or later; no when an older image's bash, PID 1, runs a
    command list (KubeRay's ``ulimit ...; ray start ...``) and so ignores the signal."""
    parts = [str(p) for p in (*(ctx.container.get("command") or []),
                              *(ctx.container.get("args") or []))]
    if not parts or parts[0].rsplit("/", 1)[-1] not in ("bash", "sh"):
        return True
    script = script_of(ctx)
    if not any(sep in script for sep in (";", "&&", "||", "\n")):
        return True
    version = ray_version_of(str(ctx.container.get("image") or ""), config.ray_version)
    try:
        numbers = tuple(int(x) for x in version.split(".")[:3])
    except ValueError:
        return True
    return numbers >= FIRST_IMAGE_EXECING_RAY_START


class GcsFatal(Exception):
    """The GCS can't start with this configuration (Ray's fatal log and exit)."""


def register_ray_programs(registry: ProgramRegistry, config: RayConfig | None = None
                          ) -> RayConfig:
    """Register the Ray and Redis images' programs; the `RayConfig` they share."""
    config = config if config is not None else RayConfig()

    async def ray(ctx: ContainerContext) -> int:
        return await ray_program(ctx, config)

    async def redis(ctx: ContainerContext) -> int:
        return await redis_program(ctx, config.records)

    for pattern in RAY_IMAGES:
        registry.register(pattern, ray)
    for pattern in REDIS_IMAGES:
        registry.register(pattern, redis)
    from .submitter import submitter_program

    registry.register(SUBMITTER_IMAGE, submitter_program)
    return config


async def ray_program(ctx: ContainerContext, config: RayConfig) -> int:
    """A Ray image container: dispatch on its command line."""
    text = expand(ctx.command_line, ctx.env)
    if WAIT_FOR_TLS_IP_SAN_MARK in text:  # KubeRay's mTLS init container (before any Ray)
        return await wait_for_tls_ip_san(ctx, text)
    try:
        tls.register(ctx, tls.container_tls(ctx))
    except tls.TlsSetupError as err:
        ctx.process.log("ray_tls_setup_failed", error=str(err))
        return 1
    if "kuberay-autoscaler" in text:  # the autoscaler sidecar (enableInTreeAutoscaling)
        from .autoscaler import autoscaler_program

        return await autoscaler_program(ctx, text)
    role = classify(text)
    ctx.process.log("ray_container_started", role=role)
    if role == "head":
        return await RayNode(ctx, config, text, head=True).run()
    if role == "worker":
        return await RayNode(ctx, config, text, head=False).run()
    if role == "wait-gcs":
        return await wait_gcs_ready(ctx, script_of(ctx))
    if role == "cleanup-redis":
        return await cleanup_redis(ctx)
    if role == "script":
        from .cli import Shell

        ctx.set_ready(True)
        shell = Shell(ctx)
        code = await shell.run(script_of(ctx))
        ctx.process.log("script_exited", code=code, output=shell.output[-5:])
        return code
    return await idle_program(ctx)


def open_storage(ctx: ContainerContext, config: RayConfig,
                 redis_password: str | None = None,
                 redis_username: str | None = None) -> tuple[GcsStorage, str]:
    """The GCS's store, chosen as ``GcsServer::GetStorageType`` does (module docstring)."""
    env = ctx.env
    kind = env.get("RAY_gcs_storage", "memory") or "memory"
    address = env.get("RAY_REDIS_ADDRESS", "").strip()
    namespace = env.get("RAY_external_storage_namespace") or "default"
    if kind == "memory" and not address:
        return MemoryStoreClient(namespace), "memory"
    if kind in ("memory", "redis"):
        if not address:
            raise GcsFatal("gcs_storage is redis but no Redis address is configured "
                           "(RAY_REDIS_ADDRESS)")
        host_port, _tls, url_user, url_password = parse_redis_address(address)
        url = config.redis_urls.get(address) or config.redis_urls.get(host_port)
        if url is not None:
            return RedisStoreClient.from_url(url, namespace), "redis"
        password = redis_password or env.get("REDIS_PASSWORD") or url_password
        username = redis_username or env.get("REDIS_USERNAME") or url_user
        client = NetworkRedis(ctx.call, ctx.resolve(host_port), password=password,
                              username=username, timeout=5.0)
        return RedisStoreClient(client, namespace, address=host_port, external=False,
                                owns_client=True), "redis"
    if kind == "rocksdb":
        path = env.get("RAY_gcs_storage_path", "")
        if not path:
            raise GcsFatal("gcs_storage=rocksdb requires gcs_storage_path "
                           "(RAY_gcs_storage_path) to be set")
        directory = resolve_in_volumes(ctx, path)
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="emu-gcs-ephemeral-"))
            ctx.process.on_exit(lambda _p: shutil.rmtree(directory, ignore_errors=True))
        directory.mkdir(parents=True, exist_ok=True)
        holder = f"the GCS of Pod {ctx.namespace}/{ctx.pod_name or ctx.process.name}"
        return RocksDBStoreClient(directory, namespace, holder=holder), "rocksdb"
    raise GcsFatal(f"Unsupported gcs_storage type: {kind}")


def _close_now(storage: GcsStorage) -> None:
    """Close a store from a synchronous exit callback (a dead process releases its files and
    locks at once, as the OS does)."""
    coro = storage.close()
    try:
        coro.send(None)
    except StopIteration:
        return
    except Exception:
        return
    coro.close()  # a store whose close really waits: leave it to the garbage collector


def _start_redis_retries(env: dict[str, str]) -> tuple[int, float]:
    retries = int(env.get("RAY_redis_db_connect_retries") or 600)
    wait_ms = float(env.get("RAY_redis_db_connect_wait_milliseconds") or 100)
    return retries, wait_ms / 1000.0


@attrs.define
class _Readiness:
    """The container's probe answer, recomputed on every change."""

    ctx: ContainerContext
    checks: dict[str, bool] = attrs.field(factory=dict)

    def set(self, name: str, ok: bool) -> None:
        self.checks[name] = ok
        self.ctx.set_ready(bool(self.checks) and all(self.checks.values()))


class RayNode:
    """``ray start --block`` for a head or a worker: child processes and their fate-sharing."""

    def __init__(self, ctx: ContainerContext, config: RayConfig, text: str, *,
                 head: bool) -> None:
        self.ctx = ctx
        self.config = config
        self.opts = parse_ray_start(text)
        self.head = head
        self.children: list[Process] = []
        self.readiness = _Readiness(ctx)
        self.gcs: GcsServer | None = None
        self.raylet: Raylet | None = None
        self.dashboard: Dashboard | None = None
        self._child_exited = asyncio.Event()
        ctx.on_sigterm(self._sigterm if sigterm_reaches_ray(ctx, config)
                       else self._sigterm_ignored)

    async def _sigterm(self) -> None:
        """``ray start --block`` passes SIGTERM on: the raylet unregisters its node (the other
        children are killed with the container)."""
        if self.raylet is not None and self.raylet.ctx.process.alive:
            await self.raylet.shutdown_gracefully()

    async def _sigterm_ignored(self) -> None:
        """bash, PID 1 of an image before Ray 2.33, ignores SIGTERM: everything runs on until
        the kubelet's SIGKILL at the end of the grace period."""
        self.ctx.process.log("sigterm_ignored", by="bash (PID 1)")
        await self.ctx.process.wait_exited()

    def _child(self, name: str, main: Callable[[ContainerContext], Coroutine[Any, Any, Any]]
               ) -> Process:
        parent = self.ctx

        async def run(process: Process) -> Any:
            return await main(attrs.evolve(parent, process=process))

        child = parent.process.table.start(f"{parent.process.name}/{name}", run,
                                           host=parent.process.host)
        self.children.append(child)
        parent.process.on_exit(lambda _p: child.crash("container ended"))
        child.on_exit(lambda _p: self._child_exited.set())
        return child

    def _resources(self) -> dict[str, float]:
        cpus = self.opts.num_cpus
        if cpus is None:
            limits = (self.ctx.container.get("resources") or {}).get("limits") or {}
            cpus = _parse_cpu(limits.get("cpu")) if limits.get("cpu") else 1.0
        resources = {"CPU": float(cpus), **self.opts.resources}
        if self.opts.num_gpus:
            resources["GPU"] = float(self.opts.num_gpus)
        if self.head:
            resources[f"node:{self.ctx.ip}"] = 1.0
        return resources

    async def run(self) -> int:
        if self.head:
            gcs_up = asyncio.Event()
            gcs = self._child("gcs_server", lambda c: self._gcs_main(c, gcs_up))
            waiter = asyncio.ensure_future(gcs_up.wait())
            await asyncio.wait([waiter, asyncio.ensure_future(gcs.wait_exited())],
                               return_when=asyncio.FIRST_COMPLETED)
            if not gcs_up.is_set():
                waiter.cancel()
                return await self._block()
            self.readiness.set("gcs", True)
            gcs.on_exit(lambda _p: self.readiness.set("gcs", False))
            gcs_address = f"{self.ctx.ip}:{self.opts.port}"
            self._child("dashboard", lambda c: self._dashboard_main(c, gcs_address))
            reconnect = float(self.ctx.env.get("RAY_gcs_rpc_server_reconnect_timeout_s")
                              or DEFAULT_RECONNECT_TIMEOUT_S)
        else:
            gcs_address = self.opts.address or self.ctx.env.get("RAY_ADDRESS", "")
            reconnect = float(self.ctx.env.get("RAY_gcs_rpc_server_reconnect_timeout_s")
                              or DEFAULT_RECONNECT_TIMEOUT_S)
        self.readiness.set("raylet", False)
        self._child("raylet", lambda c: self._raylet_main(c, gcs_address, reconnect))
        return await self._block()

    async def _block(self) -> int:
        """Ray's ``--block`` loop: any child ending unexpectedly ends the container."""
        while True:
            await self._child_exited.wait()
            self._child_exited.clear()
            dead = [c for c in self.children if not c.alive]
            unexpected = [c for c in dead if c.exit_code not in EXPECTED_EXIT_CODES]
            if unexpected:
                await self.ctx.process.sleep(1.0)  # it checks once a second
                self.ctx.process.log(
                    "ray_subprocesses_exited_unexpectedly",
                    processes={c.name.rsplit("/", 1)[-1]: c.exit_code for c in unexpected})
                for child in self.children:
                    child.crash("ray start: remaining processes killed")
                return 1
            if dead and len(dead) == len(self.children):
                return 0

    async def _gcs_main(self, ctx: ContainerContext, up: asyncio.Event) -> int:
        try:
            storage, kind = open_storage(ctx, self.config, self.opts.redis_password,
                                         self.opts.redis_username)
        except (GcsFatal, StorageLocked, ValueError) as err:
            ctx.process.log("gcs_fatal", reason=str(err))
            return 1
        ctx.process.on_exit(lambda _p: _close_now(storage))
        if kind == "redis":
            retries, wait = _start_redis_retries(ctx.env)
            for attempt in range(retries):
                try:
                    await storage.health_check()
                    break
                except StorageUnavailable as err:
                    if attempt == retries - 1:
                        ctx.process.log("gcs_fatal", reason=f"Failed to connect to Redis: {err}")
                        return 1
                    await ctx.process.sleep(wait)
        server = GcsServer(ctx, storage, kind, self.config, port=self.opts.port)
        self.gcs = server
        await server.start()
        up.set()
        await asyncio.Event().wait()
        return 0

    async def _dashboard_main(self, ctx: ContainerContext, gcs_address: str) -> int:
        session = f"session_{clock.to_datetime(ctx.process.started_at):%Y-%m-%d_%H-%M-%S}" \
                  f"_{ctx.process.pid}"
        self.dashboard = Dashboard(ctx, self.config, gcs_address=gcs_address,
                                   session_name=session, port=self.opts.dashboard_port)
        return await self.dashboard.run()

    async def _raylet_main(self, ctx: ContainerContext, gcs_address: str,
                           reconnect: float) -> int:
        raylet = Raylet(ctx, self.config, gcs_address=gcs_address, is_head=self.head,
                        resources=self._resources(), labels=self.opts.labels,
                        port=self.opts.node_manager_port,
                        reconnect_timeout=reconnect)
        self.raylet = raylet
        ctx.process.on_exit(lambda _p: self.readiness.set("raylet", False))
        if not self.head and _probes_serve(self.ctx.container):
            self.readiness.set("serve", False)
            raylet.serve.on_change = lambda: self.readiness.set("serve", raylet.serve.ready()[0])

        async def mark_ready() -> None:
            await raylet.registered.wait()
            self.readiness.set("raylet", True)

        ctx.process.spawn(mark_ready(), name="raylet:ready")
        return await raylet.run()


def _probes_serve(container: dict[str, Any]) -> bool:
    probe = container.get("readinessProbe") or {}
    text = " ".join(str(p) for p in ((probe.get("exec") or {}).get("command") or []))
    http = (probe.get("httpGet") or {}).get("path") or ""
    return "-/healthz" in text or "-/healthz" in http


def _parse_cpu(value: Any) -> float:
    text = str(value)
    if text.endswith("m"):
        return float(text[:-1]) / 1000.0
    return float(text)


async def cleanup_redis(ctx: ContainerContext) -> int:
    """KubeRay's Redis cleanup Job: Ray's ``cleanup_redis_storage`` on
    ``RAY_external_storage_namespace`` at the first address of ``RAY_REDIS_ADDRESS``; exit 1 on
    failure (connection retries per ``RAY_redis_db_connect_retries`` times ``..._wait_milliseconds``).
    """
    env = ctx.env
    address = env.get("RAY_REDIS_ADDRESS", "")
    namespace = env.get("RAY_external_storage_namespace") or "default"
    host_port, _tls, url_user, url_password = parse_redis_address(address)
    client = NetworkRedis(ctx.call, ctx.resolve(host_port),
                          password=env.get("REDIS_PASSWORD") or url_password,
                          username=env.get("REDIS_USERNAME") or url_user, timeout=5.0)
    store = RedisStoreClient(client, namespace, address=host_port, external=False,
                             owns_client=True)
    retries, wait = _start_redis_retries(env)
    for attempt in range(retries):
        try:
            removed = await store.delete_namespace()
        except StorageUnavailable as err:
            if attempt == retries - 1:
                ctx.process.log("redis_cleanup_failed", error=str(err))
                return 1
            await ctx.process.sleep(wait)
            continue
        except Exception as err:  # auth errors and the like: the Python one-liner exits 1
            ctx.process.log("redis_cleanup_failed", error=f"{type(err).__name__}: {err}")
            return 1
        ctx.process.log("redis_cleanup_done", namespace=namespace, keys_deleted=removed)
        with contextlib.suppress(Exception):
            await store.close()
        return 0
    return 1
