"""One run: a pure function of (workload, knobs, plan, seed) → `RunResult`; and the fork-server
that makes many runs cheap.

A run has two halves, and both paths below execute them identically, in one task:

1. `prepare` — the world every run of a workload shares: Nodes ready, Redis when asked, KubeRay
   installed with its replicas and a leader elected. It depends only on the workload's `Setup`
   and the seed.
2. `play` — attach the invariants, schedule the plan, apply the manifests with the knobs, make
   the timed knob changes, wait for the goal (and past the last fault plus the invariants'
   ``settle_time``), delete the objects, and collect the violations.

`run_one` builds a fresh world for each run. `ForkServer` plays many: by default in a forked
*worker* per batch that builds a fresh world for each run; with ``fork=True`` it builds the world
once per (workload, seed) and, at the quiescent instant between the halves, calls ``os.fork``
for each run: the child plays one run and sends its result through a pipe; the parent, blocked
inside that same task step, never advances, so the next child starts from the identical state.
Every way plays the same run — same trace, same digest (tests/explore checks it). Two guards
keep runs short: `Watchdog` stops a run whose virtual clock stands still (a livelock), and
`Quiet` ends a run's final settle once nothing can change what it finds.

A worker also plays the runs whose plan arms late (`RunSpec.arm_at`) as forks of one shared run
without faults (`_Branches`): `_Arming` schedules a plan at the end of its instant in every way
of playing, so the fork and the fresh run are the same run.

About 1,250 lines, one module: the run's two halves, its two guards, the arming and the ways of
playing many runs (fresh, worker, shared run, fork-server) share `RunSpec`/`RunResult`, the
result framing and the fault-time helpers, and each way must play exactly the run the others
play; split, that sameness would span files.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import select
import shutil
import signal
import struct
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from ..faults import FaultPlan
from ..kernel.faultbase import fault_from_dict
from . import faults as _faults  # noqa: F401 - registers the explorer's fault types for loading
from .workload import Workload, get_path

if TYPE_CHECKING:
    from ..simulation import Simulation

Obj = dict[str, Any]

#: How often a run looks at the goal (virtual seconds).
POLL = 2.0
#: Wall seconds a forked run may take before it is stopped and reported as an error (a
#: backstop: a livelock at one virtual instant is caught by `Watchdog` long before).
WALL_LIMIT = float(os.environ.get("EMU_EXPLORE_RUN_WALL_LIMIT", "30"))
#: Loop iterations at one virtual instant after which a run is a livelock: a controller that
#: writes, sees its own write and writes again at zero latency never lets the clock move. A
#: healthy run of the built-in workloads peaks below 100 (measured over 24 candidates of each),
#: but a KubeRay hot loop on a stale cache (docs/findings.md E2) runs 100 reconciles of one key
#: at one instant before the runtime charges each further pass 10 ms, well over 1,000 iterations
#: (one replay needed 1,000-2,000), so the bound leaves room for that; a world of your own that
#: does more at one instant raises it (EMU_EXPLORE_LIVELOCK_ITERATIONS).
LIVELOCK_ITERATIONS = int(os.environ.get("EMU_EXPLORE_LIVELOCK_ITERATIONS", "5000"))


def _knobs(value: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), v) for k, v in items))


def _as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _plan(value: FaultPlan | Iterable[Any]) -> FaultPlan:
    return value if isinstance(value, FaultPlan) else FaultPlan(value)


def _arm_at(value: float | None) -> float | None:
    return None if value is None else float(value)


@attrs.frozen
class RunSpec:
    """What one run does: the knobs set (by name; the rest at their defaults) and the plan.

    ``arm_at`` (virtual seconds, or None) is when the plan is scheduled: None, at the start of
    `play` (as a plan given to `emu.run` is); a time, at the *end* of that virtual instant, once
    everything runnable then has run. Until then the run is the run without faults (with the
    same knobs), so it can start from a snapshot of that run taken at ``arm_at`` — a forked copy
    of a world that played it — instead of from scratch, with the same digest
    (`plans.arm_times` sets it before the plan's first fault can act)."""

    knobs: tuple[tuple[str, Any], ...] = attrs.field(converter=_knobs, factory=tuple)
    plan: FaultPlan = attrs.field(converter=_plan, factory=FaultPlan)
    arm_at: float | None = attrs.field(default=None, converter=_arm_at)

    @property
    def knob_map(self) -> dict[str, Any]:
        return dict(self.knobs)

    def to_dict(self) -> Obj:
        out = {"knobs": dict(self.knobs), "plan": orjson.loads(self.plan.to_json())}
        if self.arm_at is not None:
            out["arm_at"] = self.arm_at
        return out

    @classmethod
    def from_dict(cls, item: Obj) -> RunSpec:
        return cls(knobs=item.get("knobs") or {},
                   plan=FaultPlan(fault_from_dict(f) for f in item.get("plan") or []),
                   arm_at=item.get("arm_at"))

    def key(self) -> str:
        """A stable text key (the store's and the dedup's)."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS, default=str).decode()


@attrs.frozen
class RunResult:
    """What one run found: violations (as dicts: invariant, message, at, objects), the trace
    digest, the faults it actually performed and those that never took effect (each with
    why), an error when the run itself raised, and costs."""

    spec: RunSpec
    violations: tuple[Obj, ...] = attrs.field(converter=_as_tuple, factory=tuple)
    digest: str = ""
    performed: tuple[str, ...] = attrs.field(converter=_as_tuple, factory=tuple)
    error: str = ""
    virtual: float = 0.0
    wall: float = 0.0
    actions: tuple[Obj, ...] = attrs.field(converter=_as_tuple, factory=tuple, repr=False)
    #: ``{"fault": repr, "why": text}`` for each fault of the run that never took effect.
    unperformed: tuple[Obj, ...] = attrs.field(converter=_as_tuple, factory=tuple)
    #: ``{"check", "at", "detail"}`` for each of the emulator's own consistency checks the run
    #: broke (`emu.explore.checks`): its findings may be the emulator's artefacts.
    emulator: tuple[Obj, ...] = attrs.field(converter=_as_tuple, factory=tuple)
    #: What the run exercised (`guide.Signature`): the guided search's measure of novelty.
    signature: tuple[str, ...] = attrs.field(converter=_as_tuple, factory=tuple, repr=False)

    @property
    def failed(self) -> bool:
        return bool(self.violations)

    @property
    def idle(self) -> bool:
        """A plan none of whose faults took effect: the run tested nothing the reference run
        did not (its fault found nothing to act on)."""
        return bool(self.spec.plan.faults) and not self.performed and not self.error

    def to_dict(self) -> Obj:
        return {"spec": self.spec.to_dict(), "violations": list(self.violations),
                "digest": self.digest, "performed": list(self.performed), "error": self.error,
                "virtual": self.virtual, "wall": self.wall, "actions": list(self.actions),
                "unperformed": list(self.unperformed), "emulator": list(self.emulator),
                "signature": list(self.signature)}

    @classmethod
    def from_dict(cls, item: Obj) -> RunResult:
        return cls(spec=RunSpec.from_dict(item["spec"]), violations=item.get("violations") or (),
                   digest=item.get("digest", ""), performed=item.get("performed") or (),
                   error=item.get("error", ""), virtual=item.get("virtual", 0.0),
                   wall=item.get("wall", 0.0), actions=item.get("actions") or (),
                   unperformed=item.get("unperformed") or (),
                   emulator=item.get("emulator") or (),
                   signature=item.get("signature") or ())


# ---------------------------------------------------------------------------------------------
# The two halves of a run
# ---------------------------------------------------------------------------------------------


def world_options(workload: Workload) -> dict[str, Any]:
    """The `emu.run` options of a workload's world (a scenario brings its own). A minimal
    cluster, not the standard one: every run builds its world again, and the standard cluster's
    system Pods, Events and extra controllers nearly double that cost, and the KubeRay paths
    under test do not read them. One difference shows: without DefaultTolerationSeconds a
    failed Node's Pods are evicted as soon as it is tainted, not 300 s later (docs/explore.md)."""
    if workload.scenario is not None:
        from .. import scenarios

        return dict(scenarios.get(workload.scenario).options)
    from ..kube.config import KubeConfig

    return {"cluster": KubeConfig(nodes=workload.setup.nodes, node_cpu="4", node_memory="16Gi",
                                  image_pull_delay=0.5, container_start_delay=0.25,
                                  standard_cluster=False)}


REDIS_MANIFESTS: tuple[Obj, ...] = (
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "redis", "namespace": "default", "labels": {"app": "redis"}},
     "spec": {"containers": [{"name": "redis", "image": "redis:7.4",
                              "ports": [{"containerPort": 6379}]}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "redis", "namespace": "default"},
     "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379, "targetPort": 6379}]}},
)


async def prepare(sim: Simulation, workload: Workload) -> None:
    """The shared first half: Nodes ready, Redis, KubeRay with its replicas leading."""
    if workload.scenario is not None:
        return
    from ..ray.config import ServeAppBehaviour

    setup = workload.setup
    for path in setup.serve_import_paths:
        sim.ray_config.serve_apps[path] = ServeAppBehaviour(build_seconds=1.0,
                                                            replica_start_seconds=1.0)
    await sim.cluster.wait_ready()
    if setup.redis:
        for obj in REDIS_MANIFESTS:
            await sim.apply(dict(obj))
    start_traffic(sim, setup)
    if setup.install is not None:
        await _install_own(sim, setup)
        return
    resources = {"limits": {"cpu": "100m", "memory": "512Mi"},
                 "requests": {"cpu": "100m", "memory": "512Mi"}}
    kuberay = await sim.install_kuberay(replicas=setup.operator_replicas, resources=resources)
    await kuberay.wait_for_leader(timeout=120)


def start_traffic(sim: Simulation, setup: Any) -> list[Any]:
    """A client per ``setup.traffic`` URL (`emu.scenarios`' `Traffic`, lane ``traffic/serve``
    then ``traffic/serve-<i>``), sending from now until the run ends."""
    from ..scenarios._rayservice_common import Traffic

    clients = []
    for i, url in enumerate(setup.traffic):
        host, _, path = str(url).partition("/")
        name = "traffic/serve" if i == 0 else f"traffic/serve-{i}"
        clients.append(Traffic(sim, host, "/" + path, name=name,
                               interval=setup.traffic_interval))
    return clients


async def _install_own(sim: Simulation, setup: Any) -> None:
    """Start the user's controller (``module:function``) and wait until one replica leads."""
    import importlib
    import inspect

    module, _, name = str(setup.install).partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            f"Setup.install {setup.install!r}: {err} (it is imported from sys.path: add the "
            "folder that holds it to PYTHONPATH)") from None
    except AttributeError:
        raise AttributeError(f"Setup.install {setup.install!r}: module {module!r} has no "
                             f"{name!r} (give module:function)") from None
    started = fn(sim)
    if inspect.isawaitable(started):
        await started
    if not setup.lease:
        return  # no leader election to wait for
    await sim.wait_for("Lease", setup.lease,
                       lambda le: bool((le.get("spec") or {}).get("holderIdentity")),
                       timeout=120)


def default_invariants(workload: Workload | None = None) -> list[Any]:
    """`emu.invariants.kuberay_invariants()` — the checks every explore run makes — and, for a
    workload that sends request traffic (``Setup.traffic``), `traffic.NoRefusalAfterSwitch`."""
    try:
        from ..invariants import kuberay_invariants
    except ImportError:  # interim: until emu.invariants is merged
        return []
    out = list(kuberay_invariants())
    if workload is not None and workload.setup.traffic:
        from .traffic import NoRefusalAfterSwitch

        out.append(NoRefusalAfterSwitch())
    return out


class _NoMonitors:
    async def finish(self, sim: Any) -> list[Any]:
        return []


def _attach(sim: Simulation, invariants: Sequence[Any]) -> Any:
    try:
        from ..invariants import Monitors
    except ImportError:  # interim: until emu.invariants is merged
        return _NoMonitors()
    return Monitors.attach(sim, invariants)


class Watchdog:
    """Stops a run whose virtual clock stands still: counts the loop's iterations at one
    virtual instant and, past `LIVELOCK_ITERATIONS`, cancels the run's main task and keeps the
    reason (`error`). Counting iterations, not wall seconds, makes the verdict deterministic —
    the same run is a livelock at the same instant forked or fresh, on any machine — and
    catches it within seconds instead of at the worker's 30 s wall-clock limit."""

    def __init__(self, sim: Simulation, limit: int | None = None) -> None:
        loop: Any = sim.loop
        self.loop = loop
        self.limit = LIVELOCK_ITERATIONS if limit is None else limit
        self.error = ""
        self._at = -1.0
        self._count = 0
        self._inner = loop._run_once
        loop._run_once = self._run_once

    def _run_once(self) -> None:
        now = self.loop._now
        if now != self._at:
            self._at, self._count = now, 0
        else:
            self._count += 1
            if self._count > self.limit and not self.error:
                self.error = (f"Livelock: virtual time stood still at t={now:.6f}s for "
                              f"{self.limit} loop iterations (something in the world acts again "
                              "at once on what it just did, forever; a world that legitimately "
                              "does more at one instant raises EMU_EXPLORE_LIVELOCK_ITERATIONS)")
                self.loop._run_once = self._inner
                task = self.loop.focus_task
                if task is not None:
                    task.cancel()
        self._inner()


#: End a run's final settle once the world is quiet (see `Quiet`); ``EMU_EXPLORE_FULL_SETTLE=1``
#: simulates the full bound instead (to check that both give the same findings).
EARLY_STOP = os.environ.get("EMU_EXPLORE_FULL_SETTLE", "") != "1"
#: Virtual seconds without any trace event but Lease writes before a world counts as quiet:
#: longer than the 40 s node-monitor grace period, the 30 s Pod termination grace and the 15 s
#: Lease duration, the longest waits of the built-in chains of consequences.
QUIET = 45.0
#: How often the final settle looks whether the world is quiet (virtual seconds).
QUIET_POLL = 10.0
#: The operator kinds whose objects must all be gone before a settle may end early.
ROOT_KINDS = ("RayCluster", "RayJob", "RayService")


class Quiet:
    """Decides when the rest of a run's final settle cannot change what the run finds.

    A run ends with ``settle_time`` (300 s) of virtual time after the last fault healed, so
    that late effects are seen. Most runs are long done by then: their objects were deleted,
    the operator's replicas only renew their Lease every 2 s, the kubelets theirs every 10 s.
    Simulating that costs a quarter to a third of a run's wall time and shows nothing. The
    settle ends early — straight to the invariants' ``finish`` — when all of these hold:

    - every fault of the plan has fired (none waits for its time or its call) and healed;
    - no object of the workload's kinds (and no RayCluster, RayJob or RayService) exists, so
      no reconcile has anything to write and no requeue (TTL, deadline, status timeout) is
      pending for a live object;
    - for `QUIET` virtual seconds the trace has had no event but Lease writes: no write,
      process start or exit, Ray or Serve event, request or fault;
    - every monitor says it is settled (``settled(now)``: no bounded episode open, nothing
      unsteady, no cleanup deadline ahead); a monitor without that method keeps the full
      settle.

    Only the trace's tail of Lease renewals is cut (so the digest changes); the violations
    are the same, which tests/explore and benchmarks/explore.py check against full settles."""

    def __init__(self, sim: Simulation, workload: Workload) -> None:
        self.sim = sim
        self.kinds = tuple(sorted({str(m.get("kind")) for m in workload.manifests}
                                  | set(ROOT_KINDS)))
        self.last = sim.now
        self.arming: _Arming | None = None
        sim.trace.subscribe(self._on_event)

    def _on_event(self, ev: Any) -> None:
        if ev.event == "write" and ev.fields.get("kind") == "Lease":
            return
        self.last = ev.t

    def _faults_done(self) -> bool:
        if self.arming is not None and self.arming.pending:
            return False  # the plan is not even scheduled yet
        records = getattr(self.sim.faults, "_records", None)
        if records is None:
            return False
        return all(r.state in ("performed", "failed")
                   or (r.state == "pending" and r.check() is None) for r in records)

    def reached(self, monitors: Any) -> bool:
        from ..apiserver.errors import ApiError

        sim = self.sim
        if sim.now - self.last < QUIET or sim.now < _last_fault_end(sim):
            return False
        if not self._faults_done():
            return False
        for kind in self.kinds:
            try:
                if sim.api.list(kind).get("items"):
                    return False
            except ApiError:  # a kind this world does not have
                continue
        for monitor in getattr(monitors, "monitors", ()):
            settled = getattr(monitor, "settled", None)
            if settled is None or not settled(sim.now):
                return False
        return True


def _fault_end(fault: Any) -> float:
    from ..invariants.liveness import heals_at

    end = heals_at(fault)
    then = getattr(fault, "then", None)
    if then is not None:
        end = max(end, _fault_end(attrs.evolve(then, at=fault.at)))
    return end


class _Recorder:
    """The reference run's log of controller actions: every call an operator replica made
    (API writes with verb/kind/name, dashboard calls) and every state transition of the
    workload's objects and of Ray Pods (with their ``node_type``), from the network and the
    trace."""

    WRITES = ("create", "update", "update_status", "patch", "delete", "delete_collection")

    def __init__(self, sim: Simulation, workload: Workload) -> None:
        from ..kernel.network import Match

        self.sim = sim
        self.operator = workload.setup.operator
        self.kinds = {m.get("kind") for m in workload.manifests}
        self.actions: list[Obj] = []
        self._states: dict[tuple[str, str], Any] = {}
        self._counts: dict[tuple[str, ...], int] = {}
        self._node_types: dict[str, str] = {}  # a Ray Pod's, kept for its deletion
        self._operators: set[str] = set()
        for proc in sorted(sim.processes.all(), key=lambda p: p.name):
            if proc.alive and self.operator in proc.name:
                self._operator(proc.name)
        sim.network.after_call(Match(), self._on_call, count=None)
        sim.trace.subscribe(self._on_event)

    def _count(self, key: tuple[str, ...]) -> int:
        self._counts[key] = self._counts.get(key, 0) + 1
        return self._counts[key]

    def _operator(self, name: str) -> None:
        """A replica seen for the first time (at the start, or at its first call when a
        scenario installs the operator itself)."""
        if name not in self._operators:
            self._operators.add(name)
            self.actions.append({"t": round(self.sim.now, 6), "type": "operator", "name": name})

    def _on_call(self, info: Any) -> None:
        if self.operator not in info.src:
            return
        self._operator(info.src)
        if info.dst == "apiserver" and info.verb not in self.WRITES:
            return
        if info.dst != "apiserver" and info.dst[:1].isdigit():
            return  # the Service's hop to a Pod IP: the call is recorded by its Service name
        if info.kind in ("Lease", "Event"):
            return
        key = (info.verb, info.kind, info.name, info.dst)
        self.actions.append({"t": round(self.sim.now, 6), "type": "call", "verb": info.verb,
                             "kind": info.kind, "name": info.name, "dst": info.dst,
                             "n": self._count(key), "src": info.src})

    def _on_event(self, ev: Any) -> None:
        if ev.event != "write":
            return
        kind, name = str(ev.fields.get("kind")), str(ev.fields.get("name"))
        if kind not in self.kinds and kind != "Pod":
            return
        try:
            obj = self.sim.api.get(kind, name, str(ev.fields.get("ns") or "default"))
        except Exception:  # gone
            obj = None
        extra: Obj = {}
        if kind == "Pod":
            labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
            node_type = labels.get("ray.io/node-type")
            if obj is not None and node_type not in ("head", "worker"):
                return
            if obj is not None:
                self._node_types[name] = str(node_type)
            extra["node_type"] = self._node_types.get(name)
            state: Any = None if obj is None else (
                (obj.get("status") or {}).get("phase"),
                bool((obj.get("metadata") or {}).get("deletionTimestamp")))
        else:
            status = (obj or {}).get("status") or {}
            state = None if obj is None else tuple(
                str(v) for k, v in sorted(status.items())
                if k in ("state", "jobDeploymentStatus", "jobStatus", "serviceStatus"))
        if self._states.get((kind, name), "?") == state:
            return
        self._states[(kind, name)] = state
        self.actions.append({"t": round(self.sim.now, 6), "type": "transition", "kind": kind,
                             "name": name, "state": repr(state),
                             "verb": str(ev.fields.get("verb")),
                             "caller": str(ev.fields.get("caller")), **extra})


class CallCounter:
    """Every call made on the world's network since `play` began (``sim.explore_calls``), so a
    plan armed late (`RunSpec.arm_at`) has its `AtCall` count the calls made before, as the
    same plan armed at the start counts them. Its network hook changes nothing in the run (the
    reference run's recorder has one too: same digest as without)."""

    def __init__(self, sim: Simulation) -> None:
        from ..kernel.network import Match

        self.calls: list[Any] = []
        sim.network.after_call(Match(), self.calls.append, count=None)

    def count(self, match: Any, caller: str | None) -> int:
        return sum(1 for info in self.calls if match.matches(info)
                   and (caller is None or caller in info.src))


class _Arming:
    """Schedules a run's plan: at once when ``spec.arm_at`` is None or past, else at the end of
    the instant ``arm_at`` (a task that waits for exactly that time, then lets everything
    runnable at that instant run first). The task does nothing the world can see until then —
    no trace event, no rule on the network, no draw from the seeded RNG; its timer and its turns
    in the ready queue do not reorder anyone else's — so up to ``arm_at`` the run is the run
    without faults, and a snapshot of that run taken at the end of ``arm_at`` continues exactly
    as this run does.

    With ``branches`` (a `_Branches`: the worker's shared run), the task instead visits each of
    the branches' instants in turn and hands it the world there: in the process that played the
    shared run nothing is armed (it is stopped after the last instant); in a forked copy, the
    copy's own plan is armed at that instant, exactly as a fresh run of it arms it."""

    def __init__(self, sim: Simulation, spec: RunSpec, branches: _Branches | None) -> None:
        self.sim = sim
        self.pending = False
        self.task: Any = None
        if branches is not None or (spec.arm_at is not None and spec.arm_at > sim.now):
            sim.explore_calls = CallCounter(sim)  # type: ignore[attr-defined]
        if branches is not None:
            self.pending = True
            self.task = sim.loop.create_task(self._branch(branches))
        elif spec.arm_at is None or spec.arm_at <= sim.now:
            sim.faults.schedule(spec.plan)
        else:
            self.pending = True
            self.task = sim.loop.create_task(self._later(spec.arm_at, spec.plan))

    async def _until(self, at: float) -> None:
        """Wait until exactly ``at`` (a timer at that deadline: no float drift from a relative
        sleep), then until nothing else can run at that instant."""
        from ..snapshots import _settle

        loop = self.sim.loop
        if loop.time() < at:
            woken: asyncio.Future[None] = loop.create_future()
            loop.call_at(at, _wake, woken)
            await woken
        await _settle(loop)

    async def _later(self, at: float, plan: FaultPlan) -> None:
        await self._until(at)
        self.pending = False
        self.sim.faults.schedule(plan)

    async def _branch(self, branches: _Branches) -> None:
        for at in branches.instants:
            await self._until(at)
            spec = branches.fork(self.sim, at)
            if spec is not None:  # a forked copy: it plays this spec from here
                self.pending = False
                self.sim.faults.schedule(spec.plan)
                return
        branches.finished(self.sim)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def play(sim: Simulation, workload: Workload, spec: RunSpec,
               invariants: Sequence[Any] | None = None, *, record: bool = False,
               branches: _Branches | None = None) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """The second half of a run: the violations it found (as dicts), with ``record`` the
    actions it saw (the reference run's log), and the emulator's own consistency checks it
    broke (`emu.explore.checks`). ``branches``: the worker's shared run (spec without a plan),
    from which forked copies start the runs that arm their plan later."""
    from .checks import EmulatorChecks

    invariants = default_invariants(workload) if invariants is None else list(invariants)
    checks = EmulatorChecks.attach(sim)
    monitors = _attach(sim, invariants)
    quiet = Quiet(sim, workload) if EARLY_STOP else None
    recorder = _Recorder(sim, workload) if record else None
    from .guide import Signature

    sim.explore_signature = Signature(sim, workload)  # type: ignore[attr-defined]
    arming = _Arming(sim, spec, branches)
    if quiet is not None:
        quiet.arming = arming
    found: list[Obj] = []
    if workload.scenario is not None:
        from .. import scenarios

        report = scenarios.Report(sim)
        await scenarios.get(workload.scenario).fn(sim, report)
        for exp in report.expectations:
            if not exp.ok:
                found.append({"invariant": "scenario-expectation", "at": exp.t, "objects": [],
                              "message": f"{exp.claim} ({exp.detail})"})
    else:
        await _drive(sim, workload, spec, invariants, found)
    settle = max([float(getattr(i, "settle_time", 0.0) or 0.0) for i in invariants] or [0.0])
    await _settle(sim, settle, quiet, monitors)
    for v in await monitors.finish(sim):
        found.append({"invariant": v.invariant, "message": v.message, "at": round(v.at, 6),
                      "objects": list(v.objects)})
    found.sort(key=lambda v: (v["at"], v["invariant"], v["message"]))
    # a forked copy of a shared run judges the plan it armed, not the shared run's empty one
    armed = branches.child[0] if branches is not None and branches.child is not None else spec
    return (found, recorder.actions if recorder is not None else [], checks.finish(armed.plan))


def _last_fault_end(sim: Simulation) -> float:
    # none yet: the run's start (0, or a paced run's real instant), not the clock's zero.
    # `sim.faults.applied` only grows and its faults are frozen values: the answer is kept
    # for its length (the goal's loop asks twice every poll; an AtCall's end is an evolve).
    applied = sim.faults.applied
    memo: tuple[list[Any], int, float] | None = getattr(sim, "_explore_fault_end", None)
    if memo is not None and memo[0] is applied and memo[1] == len(applied):
        return memo[2]
    end = max([_fault_end(f) for f in applied] or [float(getattr(sim.loop, "start", 0.0))])
    sim._explore_fault_end = (applied, len(applied), end)  # type: ignore[attr-defined]
    return end


async def _settle(sim: Simulation, settle: float, quiet: Quiet | None = None,
                  monitors: Any = None) -> None:
    """Wait until every fault performed so far has healed plus ``settle`` seconds; with
    ``quiet``, stop as soon as the world is quiet (`Quiet`)."""
    while sim.now < _last_fault_end(sim) + settle:
        left = _last_fault_end(sim) + settle - sim.now
        if quiet is None:
            await sim.sleep(max(POLL, left))
            continue
        if quiet.reached(monitors):
            sim.trace.emit("explore", "settled_early", skipped=round(left, 6))
            return
        await sim.sleep(min(QUIET_POLL, max(POLL, left)))


async def _drive(sim: Simulation, workload: Workload, spec: RunSpec, invariants: Sequence[Any],
                 found: list[Obj]) -> None:
    from ..apiserver.errors import ApiError

    knobs = spec.knob_map
    workload.check_knobs(knobs)
    start = sim.now
    manifests = workload.manifests_for(knobs)
    for obj in manifests:
        await _apply(sim, obj)
    for at, knob, value in workload.changes_for(knobs):
        sim.call_later(max(0.0, start + at - sim.now), functools.partial(_change, sim, knob, value))
    goal = workload.goal
    if goal is None:
        await sim.sleep(60.0)
        return
    targets = [o for o in manifests if o.get("kind") == goal.kind]
    last_change = max([at for at, _, _ in workload.changes_for(knobs)] or [0.0])
    settle = max([float(getattr(i, "settle_time", 0.0) or 0.0) for i in invariants] or [0.0])

    def reached() -> bool:
        for obj in targets:
            cur = _current(sim, goal.kind, obj)
            if cur is None or str(get_path(cur, goal.path)) not in goal.states:
                return False
            if any(get_path(cur, path) not in (None, "", {}, []) for path in goal.clear):
                return False
        return True

    # The goal counts once it has stood longer than every invariant's bound (``hold_time``: a
    # terminal RayJob status contradicting its jobStatus, 5 s) *after* the last fault healed and
    # the last knob change: deleting the workload sooner would hide the contradiction, and a
    # goal reached before a fault says nothing about the recovery from it.
    hold = max([float(getattr(i, "hold_time", 0.0) or 0.0) for i in invariants] or [0.0]) + POLL
    held_since: float | None = None
    while True:
        if not reached():
            held_since = None
        elif held_since is None:
            held_since = sim.now
        if held_since is not None and \
                sim.now >= max(held_since, _last_fault_end(sim), start + last_change) + hold:
            break
        if sim.now >= start + goal.horizon + min(settle, goal.horizon) \
                or sim.now >= _last_fault_end(sim) + goal.horizon:
            break
        await sim.sleep(POLL)
    if not reached():
        states = {o["metadata"]["name"]: get_path(
            sim.api.get(goal.kind, o["metadata"]["name"], "default")
            if _exists(sim, goal.kind, o) else None, goal.path) for o in targets}
        found.append({"invariant": "workload-goal", "at": round(sim.now, 6),
                      "objects": [f"{goal.kind}/default/{n}" for n in sorted(states)],
                      "message": f"{goal.kind} {states} never reached {goal.path} in "
                                 f"{list(goal.states)}"
                                 + (f" with {', '.join(goal.clear)} empty" if goal.clear else "")
                                 + f" (gave up at t={sim.now:.3f}s, "
                                 f"{goal.horizon:g}s after the apply or the last fault)"})
        return
    if goal.delete:
        await _settle(sim, 0.0)
        from ..kernel.network import NetworkError

        client = sim.client("kubectl")
        sim.trace.emit("explore", "workload_delete")
        for obj in reversed(manifests):
            meta = obj["metadata"]
            for _ in range(20):
                try:
                    await client.delete(obj["kind"], meta["name"],
                                        meta.get("namespace", "default"))
                except NetworkError:
                    await sim.sleep(5.0)
                    continue
                except ApiError:
                    pass
                break
        await sim.sleep(goal.after_delete)


async def _apply(sim: Simulation, obj: Obj) -> None:
    """``kubectl apply``, repeated every 5 s while the API server cannot be reached (a person
    would retry; a plan may start with an outage)."""
    from ..kernel.network import NetworkError

    while True:
        try:
            await sim.apply(obj)
            return
        except NetworkError:
            await sim.sleep(5.0)


def _current(sim: Simulation, kind: str, obj: Obj) -> Obj | None:
    """The API server's ``obj`` now (one read), or None when it is gone."""
    from ..apiserver.errors import ApiError

    try:
        return sim.api.get(kind, obj["metadata"]["name"],
                           obj["metadata"].get("namespace", "default"))
    except ApiError:
        return None


def _exists(sim: Simulation, kind: str, obj: Obj) -> bool:
    from ..apiserver.errors import ApiError

    try:
        sim.api.get(kind, obj["metadata"]["name"], obj["metadata"].get("namespace", "default"))
    except ApiError:
        return False
    return True


async def _change(sim: Simulation, knob: Any, value: Any) -> None:
    """``kubectl patch``: set the knob's field on its objects (get, change, update, retrying on
    a conflict at once and every 5 s while the API server cannot be reached, as a person would;
    a plan may hold an outage across the change's time); an object already gone is left alone.
    A change that could not be made is a trace event, never a silent no-op."""
    from ..apiserver.errors import ApiError, Conflict, NotFound
    from ..kernel.network import NetworkError
    from .workload import set_path

    sim.trace.emit("explore", "knob_change", knob=knob.name, value=repr(value))
    client = sim.client("kubectl")
    for obj in sim.api.list(knob.kind, "default").get("items") or []:
        name = obj["metadata"]["name"]
        if knob.object_name is not None and name != knob.object_name:
            continue
        for _ in range(CHANGE_ATTEMPTS):
            try:
                cur = await client.get(knob.kind, name, "default")
                set_path(cur, knob.path, value)
                await client.update(cur)
                break
            except Conflict:
                continue
            except NotFound:
                break
            except NetworkError:
                await sim.sleep(5.0)
            except ApiError as exc:
                sim.trace.emit("explore", "knob_change_refused", knob=knob.name,
                               object=f"{knob.kind}/default/{name}", reason=str(exc))
                break
        else:
            sim.trace.emit("explore", "knob_change_refused", knob=knob.name,
                           object=f"{knob.kind}/default/{name}",
                           reason=f"not applied after {CHANGE_ATTEMPTS} attempts")


#: How many times a knob change is tried on one object (conflicts at once, an unreachable API
#: server every 5 s: the longest outage a plan holds is well under 60 attempts).
CHANGE_ATTEMPTS = 60


# ---------------------------------------------------------------------------------------------
# Fresh runs and the fork-server
# ---------------------------------------------------------------------------------------------


def run_one(workload: Workload, spec: RunSpec, seed: int = 0,
            invariants: Sequence[Any] | None = None, *, record: bool = False) -> RunResult:
    """One run in a fresh world (no fork): the reference path every forked run must equal."""
    results = list(_serve(workload, seed, [spec], invariants, record=record, mode="fresh"))
    return results[0]


class ForkServer:
    """Runs many specs of one (workload, seed), in one of three ways that give the same
    results (same digests):

    - ``fork=None`` (the default where ``os.fork`` exists): a *worker* — one forked child per
      batch plays the runs in fresh worlds one after another and sends each result as it ends;
      the parent bounds each run's wall time and starts a new worker for the rest when one is
      stopped or dies. The search's memory and crashes stay out of the caller's process.
    - ``fork=True``: the world is prepared once, then each run is a forked child of the prepared
      process (the classic fork-server). It shares the world build and `prepare` (about 15% of a
      run), but each child's copy-on-write faults cost more than that on the machines measured
      (benchmarks/explore.py: 0.74-0.88x of fresh worlds), so it is not the default.
    - ``fork=False``: fresh worlds in this process (no wall-clock bound)."""

    def __init__(self, workload: Workload, seed: int = 0,
                 invariants: Sequence[Any] | None = None, *, fork: bool | None = None) -> None:
        self.workload = workload
        self.seed = seed
        self.invariants = invariants
        self.fork = fork
        self.mode = ("fresh" if fork is False or not hasattr(os, "fork")
                     else "fork" if fork else "worker")

    def run(self, specs: Sequence[RunSpec], *, record: bool = False) -> Iterator[RunResult]:
        """Each spec's result, in order."""
        return _serve(self.workload, self.seed, specs, self.invariants, record=record,
                      mode=self.mode)


def _serve(workload: Workload, seed: int, specs: Sequence[RunSpec],
           invariants: Sequence[Any] | None, *, record: bool, mode: str
           ) -> Iterator[RunResult]:
    if mode == "fresh":
        for spec in specs:
            yield from _run_fresh(workload, seed, spec, invariants, record)
        return
    out: list[RunResult] = []
    if mode == "worker":
        _worker_batch(workload, seed, specs, invariants, record, out.append)
    else:
        _fork_batch(workload, seed, specs, invariants, record, out.append)
    yield from out


_FRAME = struct.Struct("!Q")


def _worker_batch(workload: Workload, seed: int, specs: Sequence[RunSpec],
                  invariants: Sequence[Any] | None, record: bool,
                  emit: Callable[[RunResult], None]) -> None:
    """Runs in a forked worker: each result is a length-prefixed JSON frame on a pipe, tagged
    with its spec's index (the worker plays shared-prefix runs first, `_worker_main`), and each
    run's start is a frame too; a run past `WALL_LIMIT` (or a worker that died) is reported and
    the rest go to a new worker. Results are emitted in spec order."""
    checks = default_invariants(workload) if invariants is None else list(invariants)
    results: dict[int, RunResult] = {}
    left = list(range(len(specs)))
    while left:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(r)
            gc.freeze()  # the inherited heap is never garbage: keep the collector off it
            code = 0
            try:
                _worker_main(workload, seed, [(i, specs[i]) for i in left], checks, record, w)
                os.close(w)
            except BaseException:
                # the parent only sees the wait status: say what killed the worker
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        buf = b""
        current: int | None = None
        stopped = False
        wall = time.perf_counter()
        try:
            while left:
                frame, buf, why = _read_frame(r, buf, time.perf_counter() + WALL_LIMIT + 10.0)
                if frame is None:
                    if why == "timeout":
                        os.kill(pid, signal.SIGKILL)
                    _, status = os.waitpid(pid, 0)
                    stopped = True
                    blamed = current if current is not None else left[0]
                    results[blamed] = RunResult(specs[blamed], wall=time.perf_counter() - wall,
                                                error=(_wall_limit_error() if why == "timeout"
                                                       else "the run's worker died (wait "
                                                       f"status {status})"))
                    left.remove(blamed)
                    break
                item = orjson.loads(frame)
                if "start" in item:
                    current, wall = int(item["start"]), time.perf_counter()
                    continue
                index = int(item["index"])
                results[index] = RunResult.from_dict(item["result"])
                left.remove(index)
                current = None
        finally:
            os.close(r)
            if not stopped:
                os.waitpid(pid, 0)
    for i in range(len(specs)):
        emit(results[i])


#: Specs that arm their plan at the same knobs a worker batch must hold for it to play their
#: shared prefix once (below that, a fork costs more than the prefix it saves).
MIN_SHARED = 2


def _worker_main(workload: Workload, seed: int, items: list[tuple[int, RunSpec]],
                 checks: list[Any], record: bool, fd: int) -> None:
    """A worker's body: first the specs whose plans arm late (``arm_at``), by knobs: one shared
    run of the knobs without faults, forked at each instant some of them arm at (`_Branches`);
    then every spec not played that way, in a fresh world. Each run's start and result go to
    ``fd`` as frames."""

    def send(item: Obj) -> None:
        data = orjson.dumps(item, default=str)
        _write_all(fd, _FRAME.pack(len(data)) + data)

    def start(index: int) -> None:
        send({"start": index})

    def done(index: int, result: RunResult) -> None:
        send({"index": index, "result": result.to_dict()})

    played: set[int] = set()
    if SHARE_PREFIXES and not record and workload.scenario is None:
        groups: dict[tuple[tuple[str, Any], ...], list[tuple[int, RunSpec]]] = {}
        for index, spec in items:
            if spec.arm_at is not None:
                groups.setdefault(spec.knobs, []).append((index, spec))
        for group in groups.values():
            if len(group) >= MIN_SHARED:
                played |= _branch_batch(workload, seed, group, checks, start, done)
    for index, spec in items:
        if index not in played:
            start(index)
            [result] = list(_run_fresh(workload, seed, spec, checks, record))
            done(index, result)


#: Play the runs that arm their plan late from forks of one shared run (``EMU_EXPLORE_SHARE=0``:
#: each in a fresh world; the results are the same, digests included).
SHARE_PREFIXES = os.environ.get("EMU_EXPLORE_SHARE", "1") != "0"


class _Branches:
    """The shared run of a worker batch: the runs of ``items`` (all of the same knobs) as forks
    of one run of those knobs without faults, each forked at the end of the instant its spec
    arms its plan (``arm_at``). The forking process waits for each fork before the shared world
    moves on, so every fork starts from the state a fresh run of its spec has at that instant
    (`_Arming`): the same run, the same digest. ``start(index)`` and ``done(index, result)``
    are told about each."""

    def __init__(self, items: list[tuple[int, RunSpec]], start: Callable[[int], None],
                 done: Callable[[int, RunResult], None]) -> None:
        self.by_at: dict[float, list[tuple[int, RunSpec]]] = {}
        for index, spec in items:
            assert spec.arm_at is not None
            self.by_at.setdefault(spec.arm_at, []).append((index, spec))
        self.instants = sorted(self.by_at)
        self.start = start
        self.done = done
        self.played: set[int] = set()
        #: In a fork: its spec, the pipe to answer on and its start (wall seconds).
        self.child: tuple[RunSpec, int] | None = None
        self.stopped = False

    def fork(self, sim: Simulation, at: float) -> RunSpec | None:
        """In the shared run's process: play each spec armed at ``at`` in a fork, one after
        another, and return None. In a fork: return its spec."""
        from ..snapshots import _own_workdir, _tree, layer_blockers

        if layer_blockers(sim):
            return None  # files on disk a fork would share: these run in fresh worlds
        tree = _tree(sim)
        gc.freeze()  # the shared heap: keep the collector off its pages in every fork
        try:
            for index, spec in self.by_at[at]:
                self.start(index)
                wall = time.perf_counter()
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    # asyncio forgets the running loop in a forked child (it records the pid)
                    asyncio.events._set_running_loop(sim.loop)
                    _own_workdir(sim, tree)
                    self.child = (spec, w)
                    return spec
                os.close(w)
                data, why = _await_child(pid, r, wall)
                if data is not None:
                    item = orjson.loads(data)
                    item["wall"] = time.perf_counter() - wall
                    result = RunResult.from_dict(item)
                else:
                    result = RunResult(spec, error=why, wall=time.perf_counter() - wall)
                self.played.add(index)
                self.done(index, result)
        finally:
            if self.child is None:
                gc.unfreeze()
        return None

    def finished(self, sim: Simulation) -> None:
        """The shared run's last instant is behind it: stop it."""
        self.stopped = True
        task = getattr(sim.loop, "focus_task", None)
        if task is not None:
            task.cancel()


def _await_child(pid: int, fd: int, wall: float) -> tuple[bytes | None, str]:
    """A forked run's result bytes (read from ``fd`` until its end), or None with why: it ran
    past `WALL_LIMIT` (killed) or died."""
    chunks = []
    timed_out = False
    while True:
        left = wall + WALL_LIMIT - time.perf_counter()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            timed_out = True
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    if data and not timed_out:
        return data, ""
    return None, (_wall_limit_error() if timed_out
                  else f"the forked run died (wait status {status})")


def _branch_batch(workload: Workload, seed: int, items: list[tuple[int, RunSpec]],
                  checks: list[Any], start: Callable[[int], None],
                  done: Callable[[int, RunResult], None]) -> set[int]:
    """Play ``items`` (specs of the same knobs that arm late) as forks of one shared run
    (`_Branches`); the indices played. A shared run that ends or fails before an instant (or
    meets files on disk there) leaves that instant's specs to fresh worlds."""
    from ..simulation import run

    branches = _Branches(items, start, done)
    base = RunSpec(knobs=items[0][1].knobs)

    async def main(sim: Simulation) -> None:
        watchdog = Watchdog(sim)
        await prepare(sim, workload)
        error = ""
        found: list[Obj] = []
        actions: list[Obj] = []
        emulator: list[Obj] = []
        try:
            found, actions, emulator = await play(sim, workload, base, checks,
                                                  branches=branches)
        except BaseException as exc:
            if branches.child is None:
                raise  # the shared run itself: stopped after its last instant, or failed
            error = watchdog.error or f"{type(exc).__name__}: {exc}"
        if branches.child is not None:  # a fork: its result, and the process ends
            spec, fd = branches.child
            _report(sim, spec, [] if error else found, actions, error, fd, False, emulator)

    from ..faults import UnperformedFaults

    try:
        run(main, seed=seed, **world_options(workload))
    except (Exception, asyncio.CancelledError, UnperformedFaults):
        pass  # stopped after its last instant; or it failed: the rest run in fresh worlds
    return branches.played


def _signature(sim: Simulation, found: Sequence[Obj]) -> tuple[str, ...]:
    signature = getattr(sim, "explore_signature", None)
    return signature.features(found) if signature is not None else ()


def _unperformed(sim: Simulation) -> list[Obj]:
    """Each fault that never took effect in the run, with why (`Faults.unperformed`)."""
    return [{"fault": repr(f), "why": str(why)} for f, why in sim.faults.unperformed()]


def _wall_limit_error() -> str:
    """Why a run was stopped at `WALL_LIMIT`: not a livelock at one virtual instant (the
    `Watchdog` reports those itself), so code that never yields to the loop, or a machine far
    slower than the limit assumes."""
    return (f"the run exceeded its wall-clock limit of {WALL_LIMIT:g}s and was stopped: code in "
            "the world that never yields (a busy loop, a blocking call), or a machine far slower "
            "than expected (raise EMU_EXPLORE_RUN_WALL_LIMIT); a livelock at one virtual "
            "instant would have been reported as one")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_frame(fd: int, buf: bytes, deadline: float) -> tuple[bytes | None, bytes, str]:
    """The next frame from ``fd`` (and what is left of the buffer), or None with why:
    "timeout" at ``deadline``, "eof" when the writer is gone."""
    while True:
        if len(buf) >= _FRAME.size:
            (size,) = _FRAME.unpack_from(buf)
            if len(buf) >= _FRAME.size + size:
                end = _FRAME.size + size
                return buf[_FRAME.size:end], buf[end:], ""
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.perf_counter()))
        if not ready:
            return None, buf, "timeout"
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None, buf, "eof"
        buf += chunk


def _run_fresh(workload: Workload, seed: int, spec: RunSpec, invariants: Sequence[Any] | None,
               record: bool) -> Iterator[RunResult]:
    from ..simulation import run

    box: dict[str, Any] = {}
    wall = time.perf_counter()

    async def main(sim: Simulation) -> None:
        box["sim"] = sim
        box["watchdog"] = Watchdog(sim)
        await prepare(sim, workload)
        box["found"], box["actions"], box["emulator"] = await play(sim, workload, spec,
                                                                   invariants, record=record)
        box["digest"], box["now"] = sim.trace.digest(), sim.now
        box["performed"] = [repr(f) for f in sim.faults.performed()]
        box["unperformed"] = _unperformed(sim)
        box["signature"] = _signature(sim, box["found"])

    from ..faults import UnperformedFaults

    error = ""
    try:
        run(main, seed=seed, **world_options(workload))
    except UnperformedFaults:
        pass  # a generated plan's fault may not take effect; `performed` says which did
    except (Exception, asyncio.CancelledError) as exc:  # the run raised: reported, never hidden
        error = f"{type(exc).__name__}: {exc}"
    watchdog = box.get("watchdog")
    if watchdog is not None and watchdog.error:
        error = watchdog.error
        box.pop("found", None)
    yield RunResult(spec, box.get("found") or (), box.get("digest") or "",
                    box.get("performed") or (), error,
                    round(box.get("now", 0.0), 6), time.perf_counter() - wall,
                    box.get("actions") or (), box.get("unperformed") or (),
                    box.get("emulator") or (),
                    () if error else box.get("signature") or ())


def _fork_batch(workload: Workload, seed: int, specs: Sequence[RunSpec],
                invariants: Sequence[Any] | None, record: bool,
                emit: Callable[[RunResult], None]) -> None:
    from ..simulation import run

    # resolved (and their modules imported) once here, not in every child
    checks = default_invariants(workload) if invariants is None else list(invariants)

    async def main(sim: Simulation) -> None:
        watchdog = Watchdog(sim)
        await prepare(sim, workload)
        had_workdir = getattr(sim, "_workdir", None) is not None
        _LOOP[:] = [sim.loop]
        child = _fork_loop(specs, emit)
        if child is None:
            return  # the parent: every spec has run
        spec, fd = child
        # The child: this is the same task step a fresh run is in after `prepare`.
        found: list[Obj] = []
        actions: list[Obj] = []
        emulator: list[Obj] = []
        error = ""
        try:
            found, actions, emulator = await play(sim, workload, spec, checks, record=record)
        except BaseException as exc:
            error = watchdog.error or f"{type(exc).__name__}: {exc}"
        _report(sim, spec, found, actions, error, fd, had_workdir, emulator)

    from ..faults import UnperformedFaults

    try:
        run(main, seed=seed, **world_options(workload))
    except UnperformedFaults:
        pass
    except Exception as exc:
        # the shared half itself failed: every run reports it
        for spec in specs:
            emit(RunResult(spec, error=f"preparing the world raised {type(exc).__name__}: {exc}"))


_LOOP: list[Any] = []


def _fork_loop(specs: Sequence[RunSpec], emit: Callable[[RunResult], None]
               ) -> tuple[RunSpec, int] | None:
    """In the parent: fork one child per spec, wait for it, emit its result; return None when
    all ran. In a child: return its spec and the pipe to write its result to. Synchronous, so
    the parent's world never moves between children."""
    gc.collect()
    gc.freeze()  # the prepared heap is shared with every child: keep the GC off its pages
    try:
        for spec in specs:
            wall = time.perf_counter()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                # asyncio forgets the running loop in a forked child (it records the pid): the
                # child keeps running the very same loop, so it says so again
                asyncio.events._set_running_loop(_LOOP[0])
                return spec, w
            os.close(w)
            chunks = []
            timed_out = False
            while True:
                left = wall + WALL_LIMIT - time.perf_counter()
                ready, _, _ = select.select([r], [], [], max(0.0, left))
                if not ready:  # a livelock (virtual time stands still): stop it, report it
                    os.kill(pid, signal.SIGKILL)
                    timed_out = True
                    break
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            os.close(r)
            _, status = os.waitpid(pid, 0)
            data = b"".join(chunks)
            if data and not timed_out:
                item = orjson.loads(data)
                item["wall"] = time.perf_counter() - wall
                emit(RunResult.from_dict(item))
            else:
                why = (_wall_limit_error() if timed_out
                       else f"the forked run died (wait status {status})")
                emit(RunResult(spec, error=why, wall=time.perf_counter() - wall))
    finally:
        gc.unfreeze()
    return None


def _report(sim: Simulation, spec: RunSpec, found: list[Obj], actions: list[Obj], error: str,
            fd: int, had_workdir: bool, emulator: Sequence[Obj] = ()) -> None:
    """The forked child's end: write the result to the parent and ``os._exit`` (no cleanup of
    the shared world; only a work directory the child itself created is removed)."""
    code = 0
    try:
        # a run that raised reports what a fresh one does: no digest, faults or end time
        result = RunResult(spec, found, "" if error else sim.trace.digest(),
                           [] if error else [repr(f) for f in sim.faults.performed()], error,
                           0.0 if error else round(sim.now, 6), 0.0, actions,
                           [] if error else _unperformed(sim), [] if error else emulator,
                           () if error else _signature(sim, found))
        data = orjson.dumps(result.to_dict(), default=str)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.close(fd)
        workdir = getattr(sim, "_workdir", None)
        if workdir is not None and not had_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    except BaseException:
        code = 1
    finally:
        os._exit(code)
