"""An operator replica as a process: config in, Manager built, controllers registered, run.

This is the shape of KubeRay's ``main.go``: build a manager from flags (leader election on,
``ray-operator-leader`` in the lock namespace, watched namespaces, reconcile concurrency), let
``setup`` register controllers on it, then ``mgr.Start`` and exit 1 on any error — including
"leader election lost". Because the replica is a `Process`, it can be crashed, paused,
partitioned from the API server and restarted; a restart is a new process with a new Lease
identity (the identity's uuid is drawn from a fork of the seed named after the process and its
incarnation, so a seed decides every identity).

Until Deployments run the operator (they will use `operator_main` as the image's program),
tests start replicas with `start_operator`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ..client.client import Client
from ..kernel.process import MainFn, Process
from ..kernel.rng import SimRandom
from .cache import CacheOptions
from .manager import Manager, ManagerOptions

if TYPE_CHECKING:
    from ..kernel.world import World

SetupFn = Callable[[Manager, "OperatorConfig"], "Awaitable[None] | None"]

#: KubeRay's ``LeaderElectionID``.
LEADER_ELECTION_ID = "ray-operator-leader"


def parse_watch_namespaces(value: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """KubeRay's ``--watch-namespace``: comma separated; one empty element means all."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    if len(parts) == 1 and not parts[0]:
        return ()
    return tuple(p for p in parts if p)


@attrs.frozen
class OperatorConfig:
    """How one operator replica is configured (KubeRay's flags and config file, reduced)."""

    #: Registers controllers on the manager; may be async. Defaults to registering none.
    setup: SetupFn | None = None
    #: ``--enable-leader-election``. Defaults to True (the Helm chart's default).
    leader_election: bool = True
    #: The Lease's name. Defaults to ``ray-operator-leader``.
    leader_election_id: str = LEADER_ELECTION_ID
    #: The Lease's namespace (the release namespace). Defaults to ``default``.
    leader_election_namespace: str = "default"
    #: ``--watch-namespace`` (comma separated or a tuple). Defaults to all namespaces.
    watch_namespaces: tuple[str, ...] = attrs.field(default=(), converter=parse_watch_namespaces)
    #: ``--reconcile-concurrency``: MaxConcurrentReconciles for every controller. Defaults to 1.
    reconcile_concurrency: int = 1
    #: Kind → label selector for the cache (KubeRay scopes Jobs and Pods). Defaults to none.
    cache_selectors: dict[str, str] = attrs.field(factory=dict)
    #: Election timings; default to controller-runtime's 15 s / 10 s / 2 s.
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: ``os.Hostname()``: the first half of the Lease holder identity (a Pod's name in
    #: Kubernetes). Defaults to the process's host.
    hostname: str | None = None

    def manager_options(self) -> ManagerOptions:
        return ManagerOptions(
            leader_election=self.leader_election,
            leader_election_id=self.leader_election_id,
            leader_election_namespace=self.leader_election_namespace,
            lease_duration=self.lease_duration, renew_deadline=self.renew_deadline,
            retry_period=self.retry_period, hostname=self.hostname,
            cache=CacheOptions(default_namespaces=self.watch_namespaces,
                               by_object=dict(self.cache_selectors)),
        )


def operator_main(world: World, config: OperatorConfig,
                  on_manager: Callable[[Manager], None] | None = None) -> MainFn:
    """The program of an operator replica: ``main(process)`` for `World.start_process`.

    ``on_manager`` is told each new Manager (tests use it to look inside a replica)."""

    async def main(process: Process) -> int:
        client = Client(world.network, process=process)
        rng: SimRandom = world.rng.fork(f"operator:{process.name}:{process.incarnation}")
        try:
            mgr = Manager(process, client, config.manager_options(), rng=rng)
            mgr.add_healthz_check("healthz")
            mgr.add_readyz_check("readyz")
            if on_manager is not None:
                on_manager(mgr)
            if config.setup is not None:
                result = config.setup(mgr, config)
                if inspect.isawaitable(result):
                    await result
            await mgr.start()
        except Exception as err:  # KubeRay's exitOnError: log, os.Exit(1)
            process.log("operator_exit", error=f"{type(err).__name__}: {err}", code=1)
            process.exit(1, reason=str(err))
            return 1
        return 0

    return main


def start_operator(world: World, name: str, config: OperatorConfig | None = None, *,
                   host: str | None = None,
                   on_manager: Callable[[Manager], None] | None = None) -> Process:
    """Start an operator replica named ``name`` (its host defaults to the name)."""
    return world.start_process(name, operator_main(world, config or OperatorConfig(), on_manager),
                               host=host)


def setup_reconciler(kind: str, reconciler_factory: Callable[[Manager], Any], *,
                     owns: tuple[str, ...] = (),
                     api_version: str | None = None) -> SetupFn:
    """A ``setup`` that registers one controller for ``kind`` (owning ``owns``) with the
    config's reconcile concurrency — the common case in tests."""
    from .controller import ControllerOptions

    def setup(mgr: Manager, config: OperatorConfig) -> None:
        b = mgr.new_controller().for_(kind, api_version=api_version)
        for k in owns:
            b = b.owns(k)
        b.with_options(ControllerOptions(
            max_concurrent_reconciles=config.reconcile_concurrency)).complete(
            reconciler_factory(mgr))

    return setup
