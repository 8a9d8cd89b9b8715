"""A Ray-only world for the fake Ray's tests: a kernel `World` plus a tiny stand-in for the kubelet.

(The ``ray_world`` fixture in this directory's conftest gives each ``async def`` test one.)
`RayTestWorld.pod` starts a container program the way the kubelet will (one process per
container, a `ContainerContext` with the Pod's env, volumes, ip and hostname); `Pod.restart` is a
container restart in place (same Pod, same ip), `Pod.replace` a new Pod (new ip). The head Pod's
hostname is the head Service's DNS name, so the endpoints it listens on answer at
``<head-svc>:<port>`` as a Service would route them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emu.kernel.process import Process
from emu.kernel.programs import ContainerContext
from emu.kernel.world import World
from emu.ray.config import RayConfig
from emu.ray.images import register_ray_programs
from emu.ray.net import HttpResponse, bind_caller, http_call
from emu.ray.redis_server import NetworkRedis
from emu.ray.workloads import RayClient

HEAD_SVC = "raycluster-head-svc.default.svc.cluster.local"
RAY_IMAGE = "rayproject/ray:2.46.0"


class Pod:
    """One Pod with one container, started by `RayTestWorld.pod`."""

    def __init__(self, rw: RayTestWorld, name: str, container: dict[str, Any],
                 env: dict[str, str], volumes: dict[str, Path], hostname: str,
                 labels: dict[str, str]) -> None:
        self.rw = rw
        self.name = name
        self.container = container
        self.env = env
        self.volumes = volumes
        self.hostname = hostname
        self.labels = labels
        self.ip = rw.next_ip()
        self.restarts = -1
        self.ctx: ContainerContext | None = None
        self.process: Process | None = None
        self.start()

    @property
    def process_name(self) -> str:
        return f"{self.name}/{self.container['name']}"

    def start(self) -> None:
        self.restarts += 1
        self.ctx = None
        program = self.rw.world.programs.lookup(self.container["image"])
        pod_obj = {"metadata": {"name": self.name, "namespace": "default",
                                "labels": dict(self.labels)}}
        holder: list[ContainerContext] = []

        async def main(process: Process) -> Any:
            ctx = ContainerContext(process=process, network=self.rw.world.network,
                                   rng=self.rw.world.rng.fork(f"{self.name}#{self.restarts}"),
                                   pod=pod_obj, container=self.container, env=dict(self.env),
                                   ip=self.ip, hostname=self.hostname,
                                   volumes=dict(self.volumes))
            holder.append(ctx)
            self.ctx = ctx
            return await program(ctx)

        self.process = self.rw.world.start_process(self.process_name, main, host=self.name)

    def crash(self) -> None:
        assert self.process is not None
        self.process.crash("killed by the test")

    def restart(self) -> None:
        """The container restarts in place (restartPolicy Always): same Pod, same ip."""
        if self.process is not None and self.process.alive:
            self.process.crash("container restart")
        self.start()

    def replace(self, name: str | None = None) -> Pod:
        """The Pod is deleted and a new one created (a new name and ip, same spec)."""
        if self.process is not None and self.process.alive:
            self.process.crash("pod deleted")
        return self.rw.pod(name or self.name + "-x", self.container["image"],
                           self.container.get("command"), self.container.get("args"),
                           env=self.env, volumes=self.volumes, hostname=self.hostname,
                           labels=self.labels,
                           readiness_probe=self.container.get("readinessProbe"))

    @property
    def ready(self) -> bool:
        return self.ctx is not None and self.ctx.ready and bool(self.process
                                                                and self.process.alive)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive

    def child(self, name: str) -> Process:
        return self.rw.world.processes.get(f"{self.process_name}/{name}")

    async def wait_ready(self, timeout: float = 120.0) -> None:
        await self.rw.until(lambda: self.ready, timeout, f"{self.name} ready")

    async def wait_exit(self, timeout: float = 3600.0) -> int | None:
        assert self.process is not None
        return await asyncio.wait_for(self.process.wait_exited(), timeout)


class RayTestWorld:
    """A World with the Ray programs registered and helpers to start Pods and drivers."""

    def __init__(self, world: World, tmp: Path) -> None:
        self.world = world
        self.tmp = tmp
        self.config = register_ray_programs(world.programs, RayConfig())
        self._ip = 0

    @property
    def now(self) -> float:
        return self.world.now

    def next_ip(self) -> str:
        self._ip += 1
        return f"10.0.{self._ip // 250}.{self._ip % 250 + 1}"

    def pod(self, name: str, image: str = RAY_IMAGE, command: list[str] | None = None,
            args: list[str] | None = None, *, env: dict[str, str] | None = None,
            volumes: dict[str, Path] | None = None, hostname: str = "",
            labels: dict[str, str] | None = None,
            readiness_probe: dict[str, Any] | None = None) -> Pod:
        container: dict[str, Any] = {"name": "ray" if "ray" in image else "main", "image": image,
                                     "command": command or [], "args": args or []}
        if readiness_probe is not None:
            container["readinessProbe"] = readiness_probe
        return Pod(self, name, container, dict(env or {}), dict(volumes or {}),
                   hostname or name, dict(labels or {}))

    def head(self, name: str = "raycluster-head-0", *, env: dict[str, str] | None = None,
             volumes: dict[str, Path] | None = None, extra: str = "--num-cpus=0") -> Pod:
        """A head Pod as KubeRay writes it (``bash -c 'ulimit ...; ray start --head ...'``)."""
        cmd = (f"ulimit -n 65536; ray start --head --dashboard-host=0.0.0.0 {extra} --block "
               "--metrics-export-port=8080 --dashboard-agent-listen-port=52365")
        return self.pod(name, command=["/bin/bash", "-c", "--"], args=[cmd],
                        env={"RAY_PORT": "6379", "RAY_ADDRESS": "127.0.0.1:6379", **(env or {})},
                        volumes=volumes, hostname=HEAD_SVC,
                        labels={"ray.io/node-type": "head"})

    def worker(self, name: str, *, env: dict[str, str] | None = None, cpus: int = 1,
               serve_probe: bool = False) -> Pod:
        cmd = (f"ulimit -n 65536; ray start --address={HEAD_SVC}:6379 --num-cpus={cpus} "
               "--block --metrics-export-port=8080 --dashboard-agent-listen-port=52365")
        probe = None
        if serve_probe:
            probe = {"exec": {"command": ["bash", "-c", "wget -T 2 -q -O- "
                                          "http://localhost:8000/-/healthz | grep success"]}}
        return self.pod(name, command=["/bin/bash", "-c", "--"], args=[cmd],
                        env={"RAY_ADDRESS": f"{HEAD_SVC}:6379", **(env or {})},
                        labels={"ray.io/node-type": "worker"}, readiness_probe=probe)

    def redis(self, name: str = "redis-0", *, password: str | None = None,
              volumes: dict[str, Path] | None = None, hostname: str = "redis") -> Pod:
        args = ["--requirepass", password] if password else []
        return self.pod(name, "redis:7.4.0", ["redis-server"], args, volumes=volumes,
                        hostname=hostname)

    def driver(self, caller: str = "driver") -> RayClient:
        return RayClient(self.world.network, f"{HEAD_SVC}:6379", caller=caller)

    def redis_client(self, address: str = "redis:6379", password: str | None = None
                     ) -> NetworkRedis:
        return NetworkRedis(bind_caller(self.world.network, caller="test"), address,
                            password=password)

    async def http(self, address: str, method: str, path: str, body: Any = None
                   ) -> HttpResponse:
        return await http_call(bind_caller(self.world.network, caller="test"), address,
                               method, path, body)

    async def until(self, cond: Callable[[], bool], timeout: float = 120.0,
                    what: str = "condition", every: float = 0.5) -> None:
        deadline = self.now + timeout
        while not cond():
            if self.now >= deadline:
                raise AssertionError(f"{what}: not met within {timeout:g}s (t={self.now:.1f})")
            await asyncio.sleep(every)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
