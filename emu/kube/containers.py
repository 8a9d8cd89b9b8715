"""The container runtime of one Node (containerd's role): sandboxes, containers, their processes.

The runtime outlives the kubelet process, as containerd outlives a kubelet restart: a crashed
kubelet that starts again finds its containers still running and adopts them. It dies with the
Node (`NodeRuntime.fail`): every container process is killed and nothing is remembered, as after
a machine loss or reboot.

Each container is a `Process` named ``<namespace>/<pod>/<container>`` on the Node's host,
running the program its image names (`emu.kernel.programs`) with a `ContainerContext`. A restart
is a new incarnation of that process. The kubelet (``emu.kube.kubelet``) decides what to start
and when; the runtime only does it and reports exits and readiness through the sandbox's
listener.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ..kernel import clock
from ..kernel.jsonbytes import dumps_exact
from ..kernel.process import EXIT_KILLED, Process
from ..kernel.programs import ContainerContext

if TYPE_CHECKING:
    from ..kernel.world import World

Obj = dict[str, Any]


@attrs.define(eq=False)
class ContainerRecord:
    """One attempt of one container, as the runtime reports it (CRI ``ContainerStatus``)."""

    name: str
    init: bool
    attempt: int
    container_id: str
    image: str
    created_at: float
    #: ``creating`` (pulling, creating), ``running`` or ``exited``.
    state: str = "creating"
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    process: Process | None = None
    ctx: ContainerContext | None = None
    #: The readiness probe's last result (None: no probe result yet).
    probe_ready: bool | None = None
    #: Whether its startup probe succeeded (None: it has none; False: not yet).
    started_ok: bool | None = None
    timer: asyncio.TimerHandle | None = None
    #: Seconds this attempt spent pulling its image (None: the image was there); set by the
    #: kubelet for its ``Pulled`` Event.
    pulled: float | None = None

    @property
    def program_ready(self) -> bool:
        return self.ctx is not None and self.ctx.ready and self.state == "running"

    def terminated(self) -> Obj:
        """The ``state.terminated`` of this attempt (only once it exited)."""
        assert self.finished_at is not None and self.exit_code is not None
        out: Obj = {"exitCode": self.exit_code, "reason": self.reason,
                    "startedAt": clock.rfc3339(self.started_at or self.created_at),
                    "finishedAt": clock.rfc3339(self.finished_at),
                    "containerID": self.container_id}
        if self.message:
            out["message"] = self.message
        return out


@attrs.define(eq=False)
class PodSandbox:
    """A Pod's sandbox on the Node: its IP, its containers by name (the latest attempt), and the
    previous attempt of each (``lastState``)."""

    uid: str
    namespace: str
    name: str
    ip: str
    created_at: float
    containers: dict[str, ContainerRecord] = attrs.field(factory=dict)
    previous: dict[str, ContainerRecord] = attrs.field(factory=dict)
    #: Per container: (current back-off, time of the last back-off update), the kubelet's
    #: ``flowcontrol.Backoff`` entry.
    backoff: dict[str, tuple[float, float]] = attrs.field(factory=dict)
    #: Called (synchronously) whenever a container starts, exits or changes readiness.
    listener: Callable[[], None] | None = None
    #: What the kubelet offers the Pod's programs (``ContainerContext.services``), e.g.
    #: ``sync_volumes``.
    services: dict[str, Any] = attrs.field(factory=dict)

    def notify(self) -> None:
        if self.listener is not None:
            self.listener()


class NodeRuntime:
    """Sandboxes and containers of one Node; see the module docstring."""

    def __init__(self, world: World, node: str, index: int) -> None:
        self.world = world
        self.node = node
        self.index = index
        self.alive = True
        self.sandboxes: dict[str, PodSandbox] = {}
        self._images: dict[str, None] = {}
        self._ip_next = 2
        self._ips_in_use: dict[str, None] = {}
        #: Extra seconds added to every container start and kubelet sync (`SlowKubelet`).
        self.extra_delay = 0.0
        #: Called (synchronously) when a container starts running (the kubelet's Events).
        self.on_started: Callable[[PodSandbox, ContainerRecord], None] | None = None

    def __repr__(self) -> str:
        return f"<NodeRuntime {self.node} sandboxes={len(self.sandboxes)}>"

    # -- addresses -------------------------------------------------------------------------------

    def _allocate_ip(self) -> str:
        base = (10 << 24) | (244 << 16) | (self.index << 8)
        for _ in range(253):
            n = self._ip_next
            self._ip_next = 2 if n >= 254 else n + 1
            ip = ".".join(str((base + n) >> s & 255) for s in (24, 16, 8, 0))
            if ip not in self._ips_in_use:
                self._ips_in_use[ip] = None
                return ip
        raise RuntimeError(f"node {self.node}: no free Pod IP in its /24")

    # -- sandboxes -------------------------------------------------------------------------------

    def sandbox(self, pod: Obj) -> PodSandbox:
        """The Pod's sandbox, created (with an IP) the first time."""
        meta = pod["metadata"]
        uid = meta["uid"]
        box = self.sandboxes.get(uid)
        if box is None:
            box = PodSandbox(uid, meta.get("namespace", "default"), meta["name"],
                             self._allocate_ip(), self.world.loop.time())
            self.sandboxes[uid] = box
            self.world.network.host_back(box.ip)
        return box

    def remove_sandbox(self, uid: str) -> None:
        """Kill what still runs in the sandbox and forget it (its IP is free again)."""
        box = self.sandboxes.pop(uid, None)
        if box is None:
            return
        box.listener = None
        for rec in list(box.containers.values()):
            self.kill(rec, "sandbox removed")
        self._ips_in_use.pop(box.ip, None)
        self.world.network.host_gone(box.ip)  # calls to the old IP now go unanswered

    # -- containers ------------------------------------------------------------------------------

    def start_delay(self, image: str, pull_policy: str, pull_delay: float,
                    start_delay: float) -> float:
        """How long until a container of ``image`` runs: pull (first time on this Node, or
        every time for ``Always``), then create and start."""
        delay = start_delay + self.extra_delay
        if self.needs_pull(image, pull_policy):
            delay += pull_delay
        return delay

    def add_image(self, image: str) -> None:
        """``image`` is on the Node already (preloaded, as a kind node image's)."""
        self._images[image] = None

    def needs_pull(self, image: str, pull_policy: str) -> bool:
        """Whether a container of ``image`` pulls it first (not on the Node yet, or
        ``Always``)."""
        return pull_policy == "Always" or image not in self._images

    def create_container(self, box: PodSandbox, spec: Obj, *, init: bool, attempt: int,
                         delay: float, pod: Obj, env: dict[str, str],
                         volumes: dict[str, Path], at_once: bool = False) -> ContainerRecord:
        """Create the next attempt of a container; it runs after ``delay`` seconds (``at_once``:
        it runs now, its process started before this returns)."""
        name = spec["name"]
        image = str(spec.get("image", ""))
        old = box.containers.get(name)
        if old is not None:
            if old.state == "exited":
                box.previous[name] = old
            else:
                self.kill(old, "replaced")
        digest = hashlib.sha256(f"{box.uid}/{name}/{attempt}".encode()).hexdigest()
        rec = ContainerRecord(name=name, init=init, attempt=attempt,
                              container_id=f"containerd://{digest}", image=image,
                              created_at=self.world.loop.time())
        box.containers[name] = rec
        # the program's own copy, as of its start: as JSON (exact-size), which its context
        # decodes when read (a decoded Pod kept per container was a tenth of a world's heap)
        pod_json = dumps_exact(pod)
        hostname = str((pod.get("spec") or {}).get("hostname") or box.name)
        if at_once:
            self._run(box, rec, spec, pod_json, hostname, env, volumes)
        else:
            rec.timer = self.world.loop.call_later(
                delay, self._run, box, rec, spec, pod_json, hostname, env, volumes)
        return rec

    def _run(self, box: PodSandbox, rec: ContainerRecord, spec: Obj, pod: bytes,
             hostname: str, env: dict[str, str], volumes: dict[str, Path]) -> None:
        rec.timer = None
        if not self.alive or box.containers.get(rec.name) is not rec:
            return
        self._images[rec.image] = None
        program = self.world.programs.lookup(rec.image)
        rng = self.world.rng.fork(f"container:{box.uid}:{rec.name}:{rec.attempt}")
        container = dumps_exact(spec)  # (what `main` keeps for its life)

        async def main(proc: Process) -> int | None:
            ctx = ContainerContext(process=proc, network=self.world.network, rng=rng, pod=pod,
                                   container=container, env=env, ip=box.ip, hostname=hostname,
                                   volumes=volumes, services=box.services, init=rec.init)
            rec.ctx = ctx
            ctx.on_ready_change(lambda _ready: box.notify())
            return await program(ctx)

        rec.state = "running"
        rec.started_at = self.world.loop.time()
        proc = self.world.processes.start(f"{box.namespace}/{box.name}/{rec.name}", main,
                                          host=self.node)
        rec.process = proc
        proc.on_exit(lambda p: self._exited(box, rec, p))
        if self.on_started is not None:
            self.on_started(box, rec)
        box.notify()

    def _exited(self, box: PodSandbox, rec: ContainerRecord, proc: Process) -> None:
        if rec.state == "exited":
            return
        rec.state = "exited"
        rec.finished_at = self.world.loop.time()
        rec.exit_code = EXIT_KILLED if proc.exit_code is None else proc.exit_code
        if rec.exit_code == 0:
            rec.reason = "Completed"
        else:
            rec.reason = "Error"
        box.notify()

    def sigterm(self, rec: ContainerRecord) -> asyncio.Task[Any] | None:
        """Send SIGTERM: run the program's handlers (`ContainerContext.on_sigterm`) in its
        process, one after the other; the task, or None when the container runs none."""
        ctx, proc = rec.ctx, rec.process
        if rec.state != "running" or ctx is None or proc is None or not proc.alive:
            return None
        handlers = ctx.sigterm_handlers
        if not handlers:
            return None

        async def run() -> None:
            for handler in handlers:
                await handler()

        proc.log("sigterm")
        return proc.spawn(run(), name=f"{proc.name}:sigterm")

    def kill(self, rec: ContainerRecord, why: str) -> None:
        """Stop a container at once (SIGKILL): exit code 137."""
        if rec.timer is not None:
            rec.timer.cancel()
            rec.timer = None
        if rec.state == "creating":
            rec.state = "exited"
            rec.finished_at = self.world.loop.time()
            rec.exit_code = EXIT_KILLED
            rec.reason = "ContainerCannotRun"
            rec.message = why
            return
        if rec.process is not None and rec.process.alive:
            rec.process.crash(f"container killed: {why}")

    # -- the Node ----------------------------------------------------------------------------------

    def fail(self) -> None:
        """The machine is gone: every container process dies, nothing is remembered."""
        self.alive = False
        for uid in list(self.sandboxes):
            box = self.sandboxes[uid]
            box.listener = None
            for rec in list(box.containers.values()):
                self.kill(rec, "node failed")
            self.world.network.host_gone(box.ip)
        self.sandboxes.clear()
        self._ips_in_use.clear()
