"""Programs: what runs inside a container.

A container image names an async entry point. The kubelet (``emu.kube``) starts one process per
container and calls the program with a `ContainerContext`; the program listens and calls on the
network, reports readiness, and returns its exit code. ``emu.ray`` registers the Ray image's
program (head: GCS, dashboard, Serve; worker: raylet; ``ray job submit``), the Redis image's, and
the KubeRay operator image's; tests register their own.

This lives in the kernel because both ``emu.kube`` (which runs programs) and ``emu.ray`` (which
provides them) depend on it, and they must not depend on each other.

Image matching: an image reference ``registry/repo/name:tag@digest`` is matched against registered
patterns by repository name without registry and tag — ``rayproject/ray:2.46.0`` matches the pattern
``rayproject/ray`` and also the bare ``ray`` pattern; the longest matching pattern wins. An image no
pattern matches runs `idle_program` (a container that stays up doing nothing and is ready), which
is what an unknown sidecar looks like to a controller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from .jsonbytes import dumps_exact

if TYPE_CHECKING:
    from .network import Handler, Network, StreamHandler
    from .process import Process
    from .rng import SimRandom


def _as_json(obj: dict[str, Any] | bytes) -> bytes:
    """An object as the exact-size JSON a `ContainerContext` keeps (bytes are taken as is)."""
    if isinstance(obj, bytes):
        return obj
    return dumps_exact(obj)


@attrs.define
class ContainerContext:
    """What a program sees of its container: its spec, its Pod, the network and a ready flag.

    - ``pod``: the Pod object when the container started, decoded on each read (the program's
      own copy; it does not update). It is kept as JSON (``pod=`` takes the object or its JSON):
      a decoded Pod is several times its JSON, and every container of a world keeps one;
    - ``container``: this container's spec (kept and decoded like ``pod``); ``env`` its
      environment, resolved (``value`` and ``valueFrom`` of fieldRef/secretKeyRef/
      configMapKeyRef that the kubelet could resolve);
    - ``volumes``: mount path → host directory, for volumes backed by a directory (PVCs,
      emptyDir); data written there outlives the container only if the volume does;
    - ``ip`` and ``hostname``: the Pod's address on the network; `listen` registers
      ``"{ip}:{port}"`` (and ``"{hostname}:{port}"``), which Services route to;
    - ``init``: whether this is an init container;
    - `set_ready` is how the program answers the kubelet's readiness probe.
    """

    process: Process
    network: Network
    rng: SimRandom
    _pod: bytes = attrs.field(alias="pod", converter=_as_json)
    _container: bytes = attrs.field(alias="container", converter=_as_json)
    env: dict[str, str]
    ip: str
    hostname: str
    volumes: dict[str, Path] = attrs.field(factory=dict)
    services: dict[str, Any] = attrs.field(factory=dict)
    #: An init container (it must exit for the Pod to go on).
    init: bool = False
    _ready: bool = False
    _ready_listeners: list[Callable[[bool], None]] = attrs.field(factory=list)
    _sigterm_handlers: list[Callable[[], Awaitable[Any]]] = attrs.field(factory=list)

    @property
    def ready(self) -> bool:
        return self._ready

    def host_paths(self, path: str) -> list[Path]:
        """The host paths of container path ``path``, one per mounted volume that covers it,
        the deepest mount first. A volume the kubelet writes on first use (a projected one,
        `emu.kube.projected.Mounts`) is written now: only the volumes looked at are."""
        found: list[tuple[int, str, Path]] = []
        for mount, host in dict.items(self.volumes):  # the plain view: a look writes nothing
            prefix = mount.rstrip("/")  # "" for a mount at /
            if path == (prefix or "/") or path.startswith(prefix + "/"):
                rest = path[len(prefix):].lstrip("/")
                found.append((len(prefix), mount, Path(host) / rest if rest else Path(host)))
        found.sort(key=lambda f: -f[0])
        look = getattr(self.volumes, "look_at", None)
        if look is not None:
            for _, mount, _ in found:
                look(mount)
        return [host for _, _, host in found]

    def set_ready(self, ready: bool = True) -> None:
        """Report readiness (what the container's readiness probe would see)."""
        if ready != self._ready:
            self._ready = ready
            for listener in list(self._ready_listeners):
                listener(ready)

    def on_ready_change(self, listener: Callable[[bool], None]) -> None:
        self._ready_listeners.append(listener)

    def on_sigterm(self, handler: Callable[[], Awaitable[Any]]) -> None:
        """Handle SIGTERM: when the kubelet stops the container gracefully (its Pod deleted),
        ``handler()`` runs in the container's process and the container is killed only once
        every handler returned (or the grace period ran out). A program without one is killed
        after `KubeConfig.container_stop_delay`. SIGKILL (a Node lost, a container killed by a
        fault) runs no handler."""
        self._sigterm_handlers.append(handler)

    @property
    def sigterm_handlers(self) -> list[Callable[[], Awaitable[Any]]]:
        return list(self._sigterm_handlers)

    @property
    def pod(self) -> dict[str, Any]:
        return orjson.loads(self._pod)

    @property
    def container(self) -> dict[str, Any]:
        return orjson.loads(self._container)

    @property
    def namespace(self) -> str:
        return str(self.pod.get("metadata", {}).get("namespace", "default"))

    @property
    def pod_name(self) -> str:
        return str(self.pod.get("metadata", {}).get("name", ""))

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.pod.get("metadata", {}).get("labels") or {})

    @property
    def command_line(self) -> str:
        """``command`` and ``args`` joined with spaces (how a shell would see them)."""
        container = self.container
        parts = [*(container.get("command") or []), *(container.get("args") or [])]
        return " ".join(str(p) for p in parts)

    def listen(self, port: int, handler: Handler | None = None, *,
               stream_handler: StreamHandler | None = None) -> str:
        """Serve on ``port`` at the Pod's address until the container ends; the address."""
        address = f"{self.ip}:{port}"
        alias = f"{self.hostname}:{port}"
        taken = self.network.endpoint(alias)
        # A hostname is unique only within a namespace: never take over another Pod's alias.
        aliases = (alias,) if self.hostname and (taken is None or not taken.up) else ()
        self.network.register(address, handler, stream_handler=stream_handler,
                              process=self.process, aliases=aliases)
        return address

    async def call(self, address: str, payload: Any, *, verb: str = "", timeout: float | None = None,
                   name: str = "") -> Any:
        """Call an address (a Pod ``ip:port``, or a Service ``name[.ns[.svc.cluster.local]]:port``)
        from this container's process."""
        return await self.network.call(self.process, self.resolve(address), payload, verb=verb,
                                       timeout=timeout, name=name)

    def resolve(self, address: str) -> str:
        """Where an address leads from this container: ``localhost:port`` is the Pod itself (its
        containers share one network namespace); a short Service name ``svc:port`` becomes
        ``svc.<ns>.svc.cluster.local:port`` when that is registered (the Pod's namespace is
        searched first, as resolv.conf does); a headless Service's name with a port no
        Service port declares goes to its first Pod's IP on that port, as its DNS A records
        would."""
        host, _, port = address.rpartition(":")
        if host in ("localhost", "127.0.0.1", "::1", "[::1]"):
            return f"{self.ip}:{port}"  # containers of a Pod share its network namespace
        if self.network.endpoint(address) is not None:
            return address
        if not host:
            return address
        candidates = (host, f"{host}.{self.namespace}.svc.cluster.local",
                      f"{host}.svc.cluster.local", f"{host}.cluster.local")
        for candidate in candidates[1:]:
            full = f"{candidate}:{port}"
            if self.network.endpoint(full) is not None:
                return full
        for candidate in candidates:  # a headless Service's name: its Pods' IPs, any port
            ips = self.network.hostnames.get(candidate)
            found = ips() if ips is not None else []
            if found:
                return f"{found[0]}:{port}"
        return address


Program = Callable[[ContainerContext], Awaitable[int | None]]


async def idle_program(ctx: ContainerContext) -> int:
    """A container whose command nothing emulates: it starts, reports ready and runs until
    killed; as an init container it exits 0 at once (a setup step that succeeded), since an
    init container that never exits would hold its Pod in ``Init`` forever."""
    if ctx.init:
        return 0
    ctx.set_ready(True)
    await asyncio.Event().wait()
    return 0


def image_repository(image: str) -> str:
    """``docker.io/rayproject/ray:2.46.0@sha256:..`` → ``rayproject/ray``."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)
    if ":" in last[-1]:
        ref = ref[: ref.rfind(":")]
    parts = ref.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    return "/".join(parts)


class ProgramRegistry:
    """Image pattern → program; the longest matching pattern wins."""

    def __init__(self) -> None:
        self._programs: dict[str, Program] = {}

    def register(self, pattern: str, program: Program) -> None:
        """Run ``program`` for images whose repository is ``pattern`` or ends in ``/pattern``."""
        if not pattern or ":" in pattern:
            raise ValueError(f"an image pattern is a repository name without tag, not {pattern!r}")
        self._programs[pattern] = program

    def lookup(self, image: str) -> Program:
        repo = image_repository(image)
        best: tuple[int, Program] | None = None
        for pattern in sorted(self._programs):
            matches = repo == pattern or repo.endswith("/" + pattern)
            if matches and (best is None or len(pattern) > best[0]):
                best = (len(pattern), self._programs[pattern])
        return best[1] if best is not None else idle_program

    def patterns(self) -> list[str]:
        return sorted(self._programs)
