"""`Simulation`: one emulated world — the kernel's `World` plus the API server and its users.

A test or scenario gets one from `emu.run` (or the pytest ``sim`` fixture). It owns time,
randomness, processes, the network, the trace and the fault verbs (from `World` and `Faults`),
runs the API server as a process behind the ``apiserver`` endpoint, and offers what a person at a
terminal would use: `Simulation.client`, `Simulation.apply` (``kubectl apply``) and
`Simulation.wait_for`. Everything else (Kubernetes built-ins, Ray, the operator) is reached through
the API server, as real processes reach it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from .apiserver.errors import ApiError
from .apiserver.request import ApiRequest
from .apiserver.server import APIServer
from .client.apply import apply as apply_manifest
from .client.client import APISERVER, Client
from .faults import FaultPlan, Faults, UnperformedFaults
from .kernel.loop import VirtualTimeLoop
from .kernel.network import CallInfo
from .kernel.process import Process
from .kernel.world import World

T = TypeVar("T")
Obj = dict[str, Any]

#: Default number of revisions the store keeps for watches (older ones get 410 Gone).
DEFAULT_HISTORY_WINDOW = 10_000


#: Default limit of a run's virtual time: a run still going after a virtual day has a loop that
#: never ends (periodic timers keep time moving, so it is no `Deadlock`).
DEFAULT_MAX_VIRTUAL_TIME = 24 * 3600.0


class WaitTimeout(TimeoutError):
    """`Simulation.wait_for` gave up: the condition did not hold in time."""


class VirtualTimeExceeded(RuntimeError):
    """A run reached its virtual time limit (``max_virtual_time``) without finishing."""


class Simulation(World):
    """One emulated world. Create it with `emu.run`, or inside a running virtual-time loop.

    ``cluster=True`` (or a ``emu.kube.config.KubeConfig``) starts the Kubernetes built-ins —
    kubelets, scheduler, Jobs, Deployments, EndpointSlices, garbage collector — so Pods run; the
    default is the bare API server. ``ray`` registers the Ray and Redis images' programs (on by
    default; a ``emu.ray.config.RayConfig`` sets their timings).
    """

    def __init__(self, *, seed: int = 0, history_window: int = DEFAULT_HISTORY_WINDOW,
                 workdir: str | Path | None = None, cluster: bool | Any = False,
                 ray: bool | Any = True,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(seed=seed, loop=loop)
        self.faults = Faults(self)
        self.api = APIServer(clock=self.loop.time, rng=self.rng.fork("apiserver"),
                             history_window=history_window, trace=self._trace_api)
        self._workdir = Path(workdir) if workdir is not None else None
        self._own_workdir = False
        self.apiserver_process = self.start_process("kube-apiserver", _serve_forever)
        self.network.register(APISERVER, self.api.handle, stream_handler=self.api.open_watch,
                              process=self.apiserver_process,
                              aliases=("kubernetes.default.svc",
                                       "kubernetes.default.svc.cluster.local"))
        self._closed = False
        #: The Ray and Redis images' shared settings (``emu.ray.config.RayConfig``), or None.
        self.ray_config: Any = None
        if ray:
            from .ray.images import register_ray_programs

            self.ray_config = register_ray_programs(self.programs,
                                                    None if ray is True else ray)
        #: The Kubernetes built-ins (``emu.kube.cluster.KubeCluster``) when ``cluster`` is set.
        self.cluster: Any = None
        if cluster:
            from .kube.cluster import install

            self.cluster = install(self, None if cluster is True else cluster)

    def _trace_api(self, event: str, **fields: Any) -> None:
        self.trace.emit("kube-apiserver", event, **fields)

    # -- things a person uses --------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """A directory for this run's on-disk state (PersistentVolumes); removed at the end
        unless it was given."""
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="emu-"))
            self._own_workdir = True
        return self._workdir

    def client(self, identity: str = "test", *, process: Process | None = None) -> Client:
        """A client that talks to the API server over the network as ``identity`` (or as the
        given process, so faults on that process reach it)."""
        if process is not None:
            return Client(self.network, process=process)
        return Client(self.network, identity=identity)

    async def apply(self, manifest: str | Obj | list[Obj], *,
                    namespace: str | None = None) -> list[Obj] | Obj:
        """``kubectl apply``: create or update each object; one object in, one out."""
        results = await apply_manifest(self.client("kubectl"), manifest, namespace=namespace)
        if isinstance(manifest, dict):
            return results[0]
        return results

    async def get(self, kind: str, name: str, namespace: str | None = "default") -> Obj | None:
        """The object as the API server has it now, or None (an observer's read: no faults)."""
        try:
            return self.api.get(kind, name, namespace)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    async def wait_for(self, kind: str, name: str,
                       predicate: Callable[[Obj], bool] | None = None, *,
                       namespace: str | None = "default", timeout: float = 300.0) -> Obj:
        """Wait (in virtual time) until the object exists and ``predicate(obj)`` holds.

        An observer's watch: it bypasses the network, so faults never hide the truth from the
        test. Raises `WaitTimeout` naming the object and its last state.
        """
        last: Obj | None = None

        def ok(obj: Obj | None) -> bool:
            return obj is not None and (predicate is None or bool(predicate(obj)))

        async def watch() -> Obj:
            nonlocal last
            listing = self.api.list(kind, namespace,
                                    field_selector=f"metadata.name={name}")
            items = listing.get("items") or []
            last = items[0] if items else None
            if last is not None and ok(last):
                return last
            rv = listing["metadata"]["resourceVersion"]
            req = ApiRequest("watch", kind, None, namespace, None, None,
                             {"resource_version": rv,
                              "field_selector": f"metadata.name={name}"})
            stream = await self.api.open_watch(req, CallInfo("test", "test", APISERVER))
            try:
                async for event in stream:
                    if event["type"] == "DELETED":
                        last = None
                        continue
                    if event["type"] in ("ADDED", "MODIFIED"):
                        last = event["object"]
                        if ok(last):
                            return last
            finally:
                stream.close()
            raise WaitTimeout(f"watch on {kind} {namespace}/{name} ended")

        try:
            return await asyncio.wait_for(watch(), timeout)
        except TimeoutError:
            state = "absent" if last is None else f"status={last.get('status')!r}"
            raise WaitTimeout(
                f"{kind} {namespace}/{name}: condition not met within {timeout:g}s "
                f"(virtual, now t={self.now:.3f}s); last seen: {state}"
            ) from None

    async def wait_until(self, condition: Callable[[], bool | Awaitable[bool]], *,
                         timeout: float = 300.0, every: float = 1.0,
                         what: str = "condition") -> None:
        """Check ``condition`` every ``every`` virtual seconds until it holds (for conditions no
        single object expresses). Raises `WaitTimeout` after ``timeout``."""
        deadline = self.now + timeout
        while True:
            result = condition()
            if isinstance(result, Awaitable):
                result = await result
            if result:
                return
            if self.now >= deadline:
                raise WaitTimeout(f"{what}: not met within {timeout:g}s (virtual)")
            await asyncio.sleep(min(every, max(deadline - self.now, 0.0)) or every)

    def register_kind(self, kind: str, *, group: str, version: str = "v1",
                      plural: str | None = None, namespaced: bool = True,
                      status: bool = True) -> None:
        """Serve a custom resource kind (what applying its CustomResourceDefinition does; you can
        also ``sim.apply`` the CRD itself). ``plural`` defaults to the lower-cased kind + "s"."""
        from .apiserver.kinds import KindInfo

        if not kind or not group:
            raise ValueError("register_kind needs a kind and a group, e.g. "
                             "register_kind('Greeting', group='example.com')")
        self.api.kinds.register(KindInfo(group, version, kind, plural or kind.lower() + "s",
                                         namespaced=namespaced, has_status=status,
                                         has_generation=True, allow_unconditional_update=False))

    async def install_kuberay(self, replicas: int = 1, *, leader_election: bool = True,
                              **values: Any) -> Any:
        """``helm install kuberay-operator``: the operator as a Deployment (one replica and
        leader election on, the chart's defaults), or as plain processes when the world runs no
        Deployments. Returns a ``KubeRayInstall`` (``.leader()``, ``.replicas()``,
        ``.wait_for_leader()``); keyword arguments are the chart's values
        (see `controllers.operator.install_kuberay`)."""
        from controllers.operator import install_kuberay

        return await install_kuberay(self, replicas=replicas, leader_election=leader_election,
                                     **values)

    # -- end of run ------------------------------------------------------------------------------

    def close(self) -> None:
        """End every process (deterministic order) and remove a temporary work directory."""
        if self._closed:
            return
        self._closed = True
        self.processes.crash_all()
        if self._own_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


async def _serve_forever(process: Process) -> None:
    await asyncio.Event().wait()


def replay_line(main: Callable[..., Any], seed: int, plan: FaultPlan | None) -> str:
    """The code that replays a run."""
    target = f"{getattr(main, '__module__', '?')}.{getattr(main, '__qualname__', repr(main))}"
    faults = f", faults={plan!r}" if plan else ""
    return f"emu.run({target}, seed={seed}{faults})"


def run(main: Callable[[Simulation], Awaitable[T]], seed: int = 0, *,
        faults: FaultPlan | list[Any] | None = None, wall_clock: bool = False,
        max_virtual_time: float = DEFAULT_MAX_VIRTUAL_TIME, **options: Any) -> T:
    """Run ``main(sim)`` in a fresh world on a virtual clock and return its result.

    The same seed and fault plan give the same history. A failure carries a note with the line
    that replays it (``emu.run(module.main, seed=7, faults=[Crash(at=12.0, ...)])``). A run
    still going after ``max_virtual_time`` virtual seconds (a day by default) is stopped with
    `VirtualTimeExceeded` naming the tasks still waiting.
    """
    plan = faults if isinstance(faults, FaultPlan) or faults is None else FaultPlan(faults)
    sims: list[Simulation] = []

    async def body() -> T:
        sim = Simulation(seed=seed, **options)
        sims.append(sim)
        task = asyncio.current_task()
        expired: list[str] = []

        def expire() -> None:
            assert isinstance(sim.loop, VirtualTimeLoop)
            expired.extend(sim.loop._describe_waiting())
            if task is not None:
                task.cancel()

        limit = sim.loop.call_at(max_virtual_time, expire) if sim.virtual else None
        try:
            if plan:
                sim.faults.schedule(plan)
            result = await main(sim)
            sim.faults.check()  # strict faults: a planned fault that never happened fails
            return result
        except asyncio.CancelledError:
            if expired:
                shown = "\n  ".join(expired)
                raise VirtualTimeExceeded(
                    f"the run reached its virtual time limit of {max_virtual_time:g}s without "
                    f"finishing (raise it with max_virtual_time=...); tasks still waiting:"
                    f"\n  {shown}") from None
            raise
        finally:
            if limit is not None:
                limit.cancel()
            sim.close()

    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(wall_clock=wall_clock)) as runner:
        try:
            return runner.run(body())
        except BaseException as exc:
            exc.add_note("replay: " + replay_line(main, seed, plan))
            done = FaultPlan(sims[0].faults.performed()) if sims else None
            if done:
                exc.add_note(f"faults performed during the run: {done!r}")
            missed = sims[0].faults.unperformed() if sims else []
            if missed and not isinstance(exc, UnperformedFaults):
                exc.add_note("faults that never took effect: "
                             + "; ".join(f"{f!r} ({why})" for f, why in missed))
            raise
