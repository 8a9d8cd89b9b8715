"""The manager: runnables in groups started in a visible order, leader election, health probes.

Port of controller-runtime ``pkg/manager/internal.go`` (``controllerManager.Start``,
``initLeaderElector``) and ``runnable_group.go``. `Manager.start` does, in this order:

1. builds the leader elector (when ``leader_election`` is on);
2. serves ``/healthz`` and ``/readyz`` at ``<host>:<health_probe_port>`` on every replica — they
   answer a ping and never look at leadership;
3. starts the ``caches`` group (the informer cache) and waits for it to sync, then ``others``
   (runnables that need no election);
4. runs the elector; when it wins, starts the ``leader_election`` group (the controllers, whose
   sources create their informers only now: **a new leader starts cold**). Without election the
   group starts at once;
5. waits for an error. Losing the Lease raises `LeaderElectionLost` ("leader election lost"),
   which the operator turns into exit code 1, as KubeRay's ``exitOnError`` does.

Each group start leaves ``runnables_started group=...`` in the trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import attrs

from ..client.client import Client
from ..kernel.network import CallInfo
from ..kernel.process import Process
from ..kernel.rng import SimRandom
from .builder import Builder
from .cache import Cache, CachedClient, CacheOptions
from .http import HttpClient
from .leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    LeaseLock,
    election_client_timeout,
    new_identity,
)


class LeaderElectionLost(RuntimeError):
    """The manager lost its Lease (``errors.New("leader election lost")``)."""

    def __init__(self) -> None:
        super().__init__("leader election lost")


@runtime_checkable
class Runnable(Protocol):
    """Port of ``manager.Runnable``: ``start`` runs until cancelled; raising ends the manager.
    An optional ``need_leader_election`` attribute (default True) picks its group."""

    async def start(self) -> None: ...


class RunnableFunc:
    """Port of ``manager.RunnableFunc``: an async function as a runnable."""

    def __init__(self, fn: Callable[[], Awaitable[Any]], *, need_leader_election: bool = True,
                 name: str = "") -> None:
        self.fn = fn
        self.need_leader_election = need_leader_election
        self.name = name or getattr(fn, "__qualname__", "runnable")

    def __repr__(self) -> str:
        return f"<RunnableFunc {self.name}>"

    async def start(self) -> None:
        await self.fn()


@attrs.frozen
class ManagerOptions:
    """Port of ``manager.Options`` (the fields KubeRay sets, and the election timings)."""

    #: Elect a leader before running leader-election runnables. Defaults to False.
    leader_election: bool = False
    #: The Lease's name (KubeRay: ``ray-operator-leader``). Required with election.
    leader_election_id: str = ""
    #: The Lease's namespace. Required with election (there is no in-cluster namespace file).
    leader_election_namespace: str = ""
    #: Defaults to 15 s.
    lease_duration: float = 15.0
    #: Defaults to 10 s.
    renew_deadline: float = 10.0
    #: Defaults to 2 s.
    retry_period: float = 2.0
    #: Release the Lease when the manager stops on purpose. Defaults to False (KubeRay's).
    leader_election_release_on_cancel: bool = False
    #: Watch namespaces and per-kind label selectors of the informer cache.
    cache: CacheOptions = attrs.field(factory=CacheOptions)
    #: Port of the health-probe server on the process's host. Defaults to 8081 (KubeRay's
    #: ``--health-probe-bind-address``); None serves no probes.
    health_probe_port: int | None = 8081
    #: ``os.Hostname()``: names the holder identity (``hostname_uuid``) and the probe address.
    #: Defaults to the process's host (in a Pod, pass the Pod's hostname).
    hostname: str | None = None


class _Group:
    """Port of ``runnableGroup``: runnables started together, each with an optional ready check."""

    def __init__(self, manager: Manager, name: str) -> None:
        self.manager = manager
        self.name = name
        self.runnables: list[tuple[Any, Callable[[], Awaitable[Any]] | None]] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.started = False

    def add(self, runnable: Any, ready: Callable[[], Awaitable[Any]] | None = None) -> None:
        self.runnables.append((runnable, ready))
        if self.started:
            self._start_one(runnable)

    def _start_one(self, runnable: Any) -> None:
        self.tasks.append(self.manager.process.spawn(
            self.manager._run_runnable(runnable), name=f"{self.name}:{runnable!r}"))

    async def start(self) -> None:
        """Start every runnable, then wait for each ready check (in add order)."""
        if self.started:
            return
        self.started = True
        self.manager.log("runnables_started", group=self.name,
                         runnables=[repr(r) for r, _ in self.runnables])
        for runnable, _ready in self.runnables:
            self._start_one(runnable)
        for _runnable, ready in self.runnables:
            if ready is not None:
                await ready()

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


class Manager:
    """Port of ``controllerManager``: one per operator process."""

    def __init__(self, process: Process, client: Client, options: ManagerOptions | None = None,
                 *, rng: SimRandom) -> None:
        self.process = process
        self.client = client
        self.options = options or ManagerOptions()
        self.rng = rng
        self.cache = Cache(client, self.options.cache, process=process, rng=rng.fork("cache"),
                           on_informer=lambda kind: self.log("informer_created", kind=kind))
        self.cached_client = CachedClient(self.cache, client)
        self.caches = _Group(self, "caches")
        self.others = _Group(self, "others")
        self.leader_election = _Group(self, "leader_election")
        self.caches.add(self.cache, self.cache.wait_for_cache_sync)
        self.elected = asyncio.Event()
        self.elector: LeaderElector | None = None
        self.identity = ""
        self._errors: asyncio.Queue[BaseException] = asyncio.Queue()
        self._healthz: dict[str, Callable[[], bool]] = {}
        self._readyz: dict[str, Callable[[], bool]] = {}
        self._started = False

    def __repr__(self) -> str:
        return f"<Manager {self.process.name} identity={self.identity or '-'}>"

    def log(self, event: str, **fields: Any) -> None:
        self.process.log(event, **fields)

    # -- what controllers use --------------------------------------------------------------------

    def get_cache(self) -> Cache:
        return self.cache

    def get_client(self) -> CachedClient:
        """Reads from the cache, writes to the API server."""
        return self.cached_client

    @property
    def hostname(self) -> str:
        """What ``os.Hostname()`` answers in this process."""
        return self.options.hostname or self.process.host

    def get_http_client(self) -> HttpClient:
        """HTTP from this process over the emulated network (for Ray dashboard calls)."""
        return HttpClient(self.client.network, self.process)

    def get_api_reader(self) -> Client:
        """Port of ``GetAPIReader``: uncached reads straight from the API server."""
        return self.client

    def new_controller(self) -> Builder:
        """``ctrl.NewControllerManagedBy(mgr)``."""
        return Builder(self)

    def add(self, runnable: Any) -> None:
        """Port of ``runnables.Add``: a runnable needing election (the default) joins
        ``leader_election``; one that says it needs none joins ``others``."""
        if getattr(runnable, "need_leader_election", True):
            self.leader_election.add(runnable)
        else:
            self.others.add(runnable)

    def add_healthz_check(self, name: str, check: Callable[[], bool] | None = None) -> None:
        """``AddHealthzCheck``; without a check it is ``healthz.Ping`` (always healthy)."""
        self._healthz[name] = check or (lambda: True)

    def add_readyz_check(self, name: str, check: Callable[[], bool] | None = None) -> None:
        """``AddReadyzCheck``; without a check it is ``healthz.Ping`` (always ready)."""
        self._readyz[name] = check or (lambda: True)

    @property
    def is_leader(self) -> bool:
        """True once the leader-election runnables have been started (and not lost)."""
        if self.elector is None:
            return self.elected.is_set()
        return self.elector.leading

    # -- health probes ---------------------------------------------------------------------------

    @property
    def health_address(self) -> str:
        return f"{self.hostname}:{self.options.health_probe_port}"

    def probe(self, path: str) -> tuple[int, str]:
        """Answer ``/healthz`` or ``/readyz`` (status code, body), as the probe server would."""
        checks = {"/healthz": self._healthz, "/readyz": self._readyz}.get(path.rstrip("/"))
        if checks is None:
            return 404, "404 page not found"
        failed = [name for name, check in checks.items() if not check()]
        if failed:
            return 500, f"{path} check failed: {', '.join(failed)}"
        return 200, "ok"

    async def _serve_probe(self, payload: Any, info: CallInfo) -> dict[str, Any]:
        await self.process.checkpoint()  # a paused process answers nothing
        path = payload.get("path", "") if isinstance(payload, dict) else str(payload)
        code, body = self.probe(path)
        return {"code": code, "body": body}

    # -- start -----------------------------------------------------------------------------------

    def _init_leader_elector(self) -> LeaderElector:
        """Port of ``initLeaderElector`` with ``leaderelection.NewResourceLock``."""
        o = self.options
        if not o.leader_election_id:
            raise ValueError("LeaderElectionID must be configured")
        if not o.leader_election_namespace:
            raise ValueError("unable to find leader election namespace: not running in-cluster, "
                             "please specify LeaderElectionNamespace")
        ident_rng = self.rng.fork(f"leader-identity:{self.process.name}:"
                                  f"{self.process.incarnation}")
        self.identity = new_identity(self.hostname, ident_rng)
        le_client = Client(self.client.network, process=self.process,
                           server=self.client.server,
                           timeout=election_client_timeout(o.renew_deadline))
        lock = LeaseLock(le_client, o.leader_election_namespace, o.leader_election_id,
                         self.identity)
        callbacks = LeaderCallbacks(on_started_leading=self._on_started_leading,
                                    on_stopped_leading=self._on_stopped_leading)
        config = LeaderElectionConfig(lock=lock, callbacks=callbacks,
                                      lease_duration=o.lease_duration,
                                      renew_deadline=o.renew_deadline,
                                      retry_period=o.retry_period,
                                      release_on_cancel=o.leader_election_release_on_cancel,
                                      name=o.leader_election_id)
        return LeaderElector(config, rng=self.rng.fork(f"leader-jitter:{self.identity}"),
                             process=self.process)

    async def _on_started_leading(self) -> None:
        try:
            await self.leader_election.start()
        except Exception as err:
            self._errors.put_nowait(err)
            return
        self.elected.set()

    def _on_stopped_leading(self) -> None:
        self._errors.put_nowait(LeaderElectionLost())

    async def _run_runnable(self, runnable: Any) -> None:
        try:
            await runnable.start()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            self.log("runnable_failed", runnable=repr(runnable),
                     error=f"{type(err).__name__}: {err}")
            self._errors.put_nowait(err)

    async def start(self) -> None:
        """Port of ``controllerManager.Start``: runs until an error, which it raises."""
        if self._started:
            raise RuntimeError("manager already started")
        self._started = True
        elector = self._init_leader_elector() if self.options.leader_election else None
        self.elector = elector
        if self.options.health_probe_port is not None:
            self.client.network.register(self.health_address, self._serve_probe,
                                         process=self.process)
        await self.caches.start()
        await self.others.start()
        if elector is not None:
            self.process.spawn(elector.run(), name="leader-elector")
        else:
            self.process.spawn(self._on_started_leading(), name="start-leader-runnables")
        err = await self._errors.get()
        self.log("manager_stopping", error=str(err))
        # Lost leadership: graceful shutdown is skipped (timeout zero); stop everything.
        for group in (self.others, self.leader_election, self.caches):
            group.stop()
        raise err
