"""`Simulation`: one emulated world — the kernel's `World` plus the API server and its users.

A test or scenario gets one from `emu.run` (or the pytest ``sim`` fixture). It owns time,
randomness, processes, the network, the trace and the fault verbs (from `World` and `Faults`),
runs the API server as a process behind the ``apiserver`` endpoint, and offers what a person at a
terminal would use: `Simulation.client`, `Simulation.apply` (``kubectl apply``) and
`Simulation.wait_for`. Everything else (Kubernetes built-ins, Ray, the operator) is reached through
the API server, as real processes reach it.

(A little over 500 lines: `run`, the one way a world is run, sits beside the class whose options
it passes on.)
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .apiserver.errors import ApiError
from .apiserver.rbac import RBAC, UserInfo
from .apiserver.request import ApiRequest
from .apiserver.server import APIServer
from .client.apply import apply as apply_manifest
from .client.client import APISERVER, Client
from .explain import explain_wait, predicate_source, replay_line, replay_obstacle
from .faults import FaultPlan, Faults, UnperformedFaults
from .kernel.loop import VirtualTimeLoop
from .kernel.network import CallInfo
from .kernel.process import Panic, Process
from .kernel.world import World

if TYPE_CHECKING:
    from .kernel.snapshot import Snapshot

T = TypeVar("T")
Obj = dict[str, Any]

#: Default number of revisions the store keeps for watches (older ones get 410 Gone).
DEFAULT_HISTORY_WINDOW = 10_000


#: Default limit of a run's virtual time: a run still going after a virtual day has a loop that
#: never ends (periodic timers keep time moving, so it is no `Deadlock`).
DEFAULT_MAX_VIRTUAL_TIME = 24 * 3600.0


class WaitTimeout(TimeoutError):
    """`Simulation.wait_for` gave up: the condition did not hold in time.

    The message names the object, the predicate's source, the object's last conditions and the
    last panics and warnings of the controllers that work on it (and on its owners); the same
    facts are attributes.
    """

    def __init__(self, message: str, *, kind: str = "", name: str = "",
                 namespace: str | None = None, last: Obj | None = None,
                 predicate: str | None = None, panics: list[Panic] | None = None,
                 warnings: list[str] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.last = last
        self.predicate = predicate
        self.panics = panics or []
        self.warnings = warnings or []


class ReconcilePanic(AssertionError):
    """A controller's reconcile panicked (a bug in its code) while ``sim.fail_on_panic`` was on:
    the run stops at the first panic, chained to the original exception and its traceback."""

    def __init__(self, panic: Panic) -> None:
        super().__init__(
            f"reconcile panic in {panic.source} on {panic.subject} at t={panic.t:.3f}s: "
            f"{panic.error}{' at ' + panic.at if panic.at else ''} (sim.fail_on_panic stops "
            "the run at the first panic; turn it off with sim.fail_on_panic = False or "
            "@pytest.mark.emu(fail_on_panic=False))")
        self.panic = panic


class VirtualTimeExceeded(RuntimeError):
    """A run reached its virtual time limit (``max_virtual_time``) without finishing."""


class Simulation(World):
    """One emulated world. Create it with `emu.run`, or inside a running virtual-time loop.

    ``cluster=True`` (or a ``emu.kube.config.KubeConfig``) starts the Kubernetes built-ins —
    kubelets, scheduler, Jobs, Deployments, EndpointSlices, garbage collector — so Pods run; the
    default is the bare API server. ``ray`` registers the Ray and Redis images' programs (on by
    default; a ``emu.ray.config.RayConfig`` sets their timings). ``rbac=True`` enforces RBAC
    from the start (`emu.RBAC`, reached as ``sim.rbac``); by default it is off until
    ``install_kuberay`` turns it on, and ``rbac=False`` keeps it off even then.

    ``fail_on_panic`` (off by default, on under the pytest plugin; also settable as
    ``sim.fail_on_panic`` during the run) stops an `emu.run` at the first reconcile panic of any
    controller with `ReconcilePanic`.
    """

    def __init__(self, *, seed: int = 0, history_window: int = DEFAULT_HISTORY_WINDOW,
                 workdir: str | Path | None = None, cluster: bool | Any = False,
                 ray: bool | Any = True, fail_on_panic: bool = False, rbac: bool | None = None,
                 loop: asyncio.AbstractEventLoop | None = None,
                 kuberay_installer: Callable[..., Awaitable[Any]] | None = None) -> None:
        super().__init__(seed=seed, loop=loop)
        #: What ``install_kuberay`` calls instead of installing the port, when set: for a real
        #: operator binary, ``emu.http.real_replicas.real_installer(PATH)``.
        self.kuberay_installer = kuberay_installer
        #: A real operator's replicas once installed (their ``await stop()`` runs at the end of
        #: `emu.run`): `emu.http.real_replicas.RealReplicas`.
        self.real_kuberay: Any = None
        #: Stop the run at the first reconcile panic (see `ReconcilePanic`).
        self.fail_on_panic = fail_on_panic
        self.faults = Faults(self)
        self.api = APIServer(clock=self.loop.time, rng=self.rng.fork("apiserver"),
                             history_window=history_window,
                             record=functools.partial(self.trace.record_row, "kube-apiserver"))
        #: RBAC (`emu.apiserver.rbac.RBAC`): enforced with ``rbac=True``, or from
        #: ``install_kuberay`` on unless ``rbac=False``; off by default.
        self.rbac = RBAC(self.api, trace=self._trace_api)
        self.rbac_option = rbac
        if rbac:
            self.rbac.enable()
        self._workdir = Path(workdir) if workdir is not None else None
        self._own_workdir = False
        _trace_requests(self)
        self.apiserver_process = self.start_process("kube-apiserver", _serve_forever)
        self.network.register(APISERVER, self.api.handle, stream_handler=self.api.open_watch,
                              process=self.apiserver_process, sync_handler=self.api.answer,
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

    @property
    def ray(self) -> Any:
        """The Ray images' settings (`emu.ray.config.RayConfig`), None without Ray: script a
        job with ``sim.ray.entrypoint("python train.py", program)`` (`emu.ray.entrypoints`)."""
        return self.ray_config

    def _trace_api(self, event: str, **fields: Any) -> None:
        self.trace.record("kube-apiserver", event, fields)  # ``fields`` is this call's own

    @property
    def panics(self) -> list[Panic]:
        """Every reconcile panic of the run so far, in order, each with its traceback."""
        return self.processes.panics

    # -- things a person uses --------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """A directory for this run's on-disk state (volumes, RocksDB); removed at the end
        unless it was given. Made under ``$EMU_TMPDIR`` when set, else under ``/dev/shm`` when
        that memory filesystem has 1 GiB free, else in the system's temporary directory."""
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="emu-", dir=scratch_root()))
            self._own_workdir = True
        return self._workdir

    def client(self, identity: str = "test", *, process: Process | None = None,
               user: str | None = None, groups: Sequence[str] = (),
               as_service_account: str | None = None,
               field_validation: str | None = "Strict") -> Client:
        """A client that talks to the API server over the network as ``identity`` (or as the
        given process, so faults on that process reach it).

        A test's client writes with ``fieldValidation=Strict``, as kubectl does: an unknown or
        duplicate field is refused with kube-apiserver's 400 rather than dropped. Relax it per
        client (``field_validation="Warn"`` or ``"Ignore"``: dropped silently, the server's
        default) or per call (``create(..., field_validation=...)``). A process's client
        (``process=``) is the world's, not the test's: it sends none, as client-go does.

        Under RBAC a test's client is cluster-admin (``system:masters``) unless it names who it
        is: ``user`` (with ``groups``; ``system:authenticated`` is added) or
        ``as_service_account="NAMESPACE/NAME"``."""
        if process is not None:
            return Client(self.network, process=process)
        if as_service_account is not None:
            ns, _, name = as_service_account.partition("/")
            if not ns or not name or "/" in name:
                raise ValueError(f"as_service_account must be 'NAMESPACE/NAME', got "
                                 f"{as_service_account!r}")
            self.rbac.assign(identity, UserInfo.service_account(ns, name))
        elif user is not None:
            self.rbac.assign(identity, UserInfo(user, tuple(dict.fromkeys(
                (*groups, "system:authenticated")))))
        elif groups:
            raise ValueError("groups= needs user=")
        return Client(self.network, identity=identity, field_validation=field_validation)

    async def apply(self, manifest: str | Obj | list[Obj], *,
                    namespace: str | None = None,
                    field_validation: str = "Strict") -> list[Obj] | Obj:
        """``kubectl apply``: create or update each object; one object in, one out.

        ``field_validation`` is kubectl's ``--validate``: ``Strict`` (kubectl's default) refuses
        an unknown field, or a key given twice in YAML, with kube-apiserver's 400 naming it;
        ``Warn`` and ``Ignore`` drop unknown fields and keep a repeated key's last value."""
        client = self.client("kubectl", field_validation=field_validation)
        results = await apply_manifest(client, manifest, namespace=namespace)
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
            raise self._wait_timeout(kind, name, namespace, predicate, last, timeout) from None

    def _wait_timeout(self, kind: str, name: str, namespace: str | None,
                      predicate: Callable[[Obj], bool] | None, last: Obj | None,
                      timeout: float) -> WaitTimeout:
        """The `WaitTimeout` of a `wait_for`, with everything a reader needs to see why."""
        lines, source, panics, warnings = explain_wait(self, kind, name, namespace, predicate,
                                                       last, timeout)
        return WaitTimeout("\n".join(lines), kind=kind, name=name, namespace=namespace,
                           last=last, predicate=source, panics=panics, warnings=warnings)

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
                source = predicate_source(condition)
                lines = [f"{what}: not met within {timeout:g}s (virtual)",
                         f"  waiting for: {source}"]
                lines += [f"  panic: {p.summary()}" for p in self.panics[-3:]]
                raise WaitTimeout("\n".join(lines), predicate=source, panics=self.panics[-3:])
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
        (see `emu.kuberay.operator.install_kuberay`).

        A world made with ``kuberay_installer`` calls it instead: with
        ``emu.http.real_replicas.real_installer(PATH)`` a real, compiled KubeRay operator runs,
        each replica an OS process of the world (on a paced loop, ``emu.run(..., paced=True)``).
        """
        if self.kuberay_installer is not None:
            return await self.kuberay_installer(self, replicas=replicas,
                                                leader_election=leader_election, **values)
        from emu.kuberay.operator import install_kuberay

        return await install_kuberay(self, replicas=replicas, leader_election=leader_election,
                                     **values)

    async def snapshot(self, *, settle: bool = True) -> Snapshot:
        """Park a copy of this world at the end of the current instant and return it as an
        `emu.Snapshot`: ``snap.run(main)`` (or ``emu.run(main, restore=snap)``) runs ``main``
        against a fresh fork of it, continuing the world exactly as this run continues it (same
        trace digest). Raises `emu.NotQuiescent` when the world depends on the outside (threads,
        real sockets, RocksDB or volume files on disk). ``settle=False`` forks inside the
        current step instead of letting the instant finish first. See emu.snapshots."""
        from .snapshots import take

        return await take(self, settle=settle)

    # -- end of run ------------------------------------------------------------------------------

    def close(self) -> None:
        """End every process (deterministic order) and remove a temporary work directory."""
        if self._closed:
            return
        self._closed = True
        self.processes.crash_all()
        if self._own_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


#: At least this much free space for a run's work directory to go to the memory filesystem.
_SHM_MIN_FREE = 1 << 30


@functools.cache
def scratch_root() -> str | None:
    """Where owned work directories are made: ``$EMU_TMPDIR`` when set, else ``/dev/shm`` when it
    is a writable memory filesystem with at least 1 GiB free, else tempfile's default. A short
    run's volume files never outlive it, and on a disk each directory removed at the end cost
    ~3 ms (7% of a scenario's CPU time), on tmpfs microseconds. Decided once per process."""
    chosen = os.environ.get("EMU_TMPDIR") or None
    if chosen is None and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        try:
            st = os.statvfs("/dev/shm")
            if st.f_bavail * st.f_frsize >= _SHM_MIN_FREE:
                chosen = "/dev/shm"
        except OSError:
            chosen = None
    return chosen


def _trace_requests(sim: Simulation) -> None:
    """Keep a `emu.kernel.trace.Span` for every call sent over the world's network (who sent
    it, what, how long it took, how it ended), for the Perfetto view. Spans stay out of the
    digest, and recording them adds no scheduling step, so a run's history is unchanged."""
    sim.network.spans = sim.trace.spans


async def _serve_forever(process: Process) -> None:
    await asyncio.Event().wait()


def run(main: Callable[[Simulation], Awaitable[T]], seed: int = 0, *,
        faults: FaultPlan | list[Any] | None = None, wall_clock: bool = False,
        max_virtual_time: float = DEFAULT_MAX_VIRTUAL_TIME, restore: Snapshot | None = None,
        paced: bool = False, **options: Any) -> T:
    """Run ``main(sim)`` in a fresh world on a virtual clock and return its result.

    The same seed and fault plan give the same history. A failure carries notes: the line that
    replays it (``emu.run(module.main, seed=7, faults=[Crash(at=12.0, ...)])``, when such a line
    works), the faults performed and the reconcile panics. When no task can ever run again the
    run ends at once with `emu.Deadlock`, naming the line each task is stuck on, ``main``'s own
    first. A run still going after ``max_virtual_time`` virtual seconds (a day by default) is
    stopped with `VirtualTimeExceeded` naming the tasks still waiting. Other keyword arguments
    go to `Simulation` (e.g. ``cluster=True``, ``fail_on_panic=True``).

    ``restore=snap`` (an `emu.Snapshot`) runs ``main`` in a fork of that parked world instead
    of a fresh one; ``faults`` are then scheduled on its clock, and seed and options are its own.

    ``paced=True`` runs the world at the wall clock's pace from the current real instant
    (`emu.kernel.paced.PacedLoop`, as ``emu serve`` does), for real processes in the loop (the
    real KubeRay operator, ``kuberay_installer=``); such a run is not deterministic, and
    ``max_virtual_time`` counts from its start.
    """
    from .kernel.snapshot import finish, in_restored_child, socket_fds
    from .snapshots import Restored, restore_run

    if restore is not None:
        return restore_run(restore, main, seed=seed or None, faults=faults, options=options)
    plan = faults if isinstance(faults, FaultPlan) or faults is None else FaultPlan(faults)
    sims: list[Simulation] = []

    async def body() -> T:
        sim = Simulation(seed=seed, **options)
        sim._under_run = True  # type: ignore[attr-defined]  # a restored main ends this run
        sim._sockets_at_start = socket_fds()  # type: ignore[attr-defined]  # not the world's
        sims.append(sim)
        task = asyncio.current_task()
        expired: list[str] = []
        stopped: list[Panic] = []

        def expire() -> None:
            assert isinstance(sim.loop, VirtualTimeLoop)
            expired.extend(sim.loop._describe_waiting())
            if task is not None:
                task.cancel()

        def on_panic(panic: Panic) -> None:
            if sim.fail_on_panic and not stopped and task is not None:
                stopped.append(panic)
                task.cancel()

        sim.processes.on_panic(on_panic)
        limit = None
        if isinstance(sim.loop, VirtualTimeLoop):
            sim.loop.focus_task = task
            if sim.virtual:
                limit = sim.loop.unref(sim.loop.call_at(max_virtual_time, expire))
            elif paced:  # from the real instant it started at
                limit = sim.loop.unref(sim.loop.call_at(sim.now + max_virtual_time, expire))
        try:
            if plan:
                sim.faults.schedule(plan)
            try:
                result = await main(sim)
            except Restored as done:  # in a restored child: the restored main's result
                result = done.value
            sim.faults.check()  # strict faults: a planned fault that never happened fails
            return result
        except asyncio.CancelledError:
            if stopped:
                raise ReconcilePanic(stopped[0]) from stopped[0].exception
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
            if sim.real_kuberay is not None:  # real OS processes, sockets: stopped by pid
                await sim.real_kuberay.stop()
            if in_restored_child():  # the process ends at once: only its own files go
                if sim._own_workdir and sim._workdir is not None:
                    shutil.rmtree(sim._workdir, ignore_errors=True)
            else:
                sim.close()

    def new_loop() -> VirtualTimeLoop:
        if paced:
            from .kernel.paced import PacedLoop, real_now_as_virtual

            return PacedLoop(speed=1.0, start=real_now_as_virtual())
        return VirtualTimeLoop(wall_clock=wall_clock)

    with asyncio.Runner(loop_factory=new_loop) as runner:
        try:
            result = runner.run(body())
        except BaseException as exc:
            line = replay_line(main, seed, plan, options)
            if not in_restored_child():
                exc.add_note("replay: " + line if line else
                             f"replay: seed={seed}" + (f", faults={plan!r}" if plan else "")
                             + f" (no one-line emu.run replay: {replay_obstacle(main, options)})")
            done = FaultPlan(sims[0].faults.performed()) if sims else None
            if done:
                exc.add_note(f"faults performed during the run: {done!r}")
            missed = sims[0].faults.unperformed() if sims else []
            if missed and not isinstance(exc, UnperformedFaults):
                exc.add_note("faults that never took effect: "
                             + "; ".join(f"{f!r} ({why})" for f, why in missed))
            panics = sims[0].panics if sims else []
            if panics and not isinstance(exc, ReconcilePanic):
                exc.add_note(f"reconcile panics during the run: {len(panics)}; the first: "
                             f"{panics[0].summary()}")
            finish(("raised", exc))  # a restored child reports and exits here
            raise
        finish(("ok", result))
        return result
