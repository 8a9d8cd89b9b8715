"""One run: a pure function of (workload, knobs, plan, seed) → `RunResult`; and the fork-server
that makes many runs cheap.

A run has two halves, and both paths below execute them identically, in one task:

1. `prepare` — the world every run of a workload shares: Nodes ready, Redis when asked, KubeRay
   installed with its replicas and a leader elected. It depends only on the workload's `Setup`
   and the seed.
2. `play` — attach the invariants, schedule the plan, apply the manifests with the knobs, make
   the timed knob changes, wait for the goal (and past the last fault plus the invariants'
   ``settle_time``), delete the objects, and collect the violations.

`run_one` builds a fresh world for each run. `ForkServer` builds it once per (workload, seed),
and at the quiescent instant between the halves calls ``os.fork`` for each run: the child plays
one run and sends its result through a pipe; the parent, blocked inside that same task step,
never advances, so the next child starts from the identical state. A forked run is therefore
the same run as a fresh one — same trace, same digest (tests/explore checks it).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import select
import shutil
import signal
import time
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
#: Wall seconds a forked run may take before it is stopped and reported as an error.
WALL_LIMIT = float(os.environ.get("EMU_EXPLORE_RUN_WALL_LIMIT", "30"))


def _knobs(value: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), v) for k, v in items))


def _as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _plan(value: FaultPlan | Iterable[Any]) -> FaultPlan:
    return value if isinstance(value, FaultPlan) else FaultPlan(value)


@attrs.frozen
class RunSpec:
    """What one run does: the knobs set (by name; the rest at their defaults) and the plan."""

    knobs: tuple[tuple[str, Any], ...] = attrs.field(converter=_knobs, factory=tuple)
    plan: FaultPlan = attrs.field(converter=_plan, factory=FaultPlan)

    @property
    def knob_map(self) -> dict[str, Any]:
        return dict(self.knobs)

    def to_dict(self) -> Obj:
        return {"knobs": dict(self.knobs), "plan": orjson.loads(self.plan.to_json())}

    @classmethod
    def from_dict(cls, item: Obj) -> RunSpec:
        return cls(knobs=item.get("knobs") or {},
                   plan=FaultPlan(fault_from_dict(f) for f in item.get("plan") or []))

    def key(self) -> str:
        """A stable text key (the store's and the dedup's)."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS, default=str).decode()


@attrs.frozen
class RunResult:
    """What one run found: violations (as dicts: invariant, message, at, objects), the trace
    digest, the faults it actually performed, an error when the run itself raised, and costs."""

    spec: RunSpec
    violations: tuple[Obj, ...] = attrs.field(converter=_as_tuple, factory=tuple)
    digest: str = ""
    performed: tuple[str, ...] = attrs.field(converter=_as_tuple, factory=tuple)
    error: str = ""
    virtual: float = 0.0
    wall: float = 0.0
    actions: tuple[Obj, ...] = attrs.field(converter=_as_tuple, factory=tuple, repr=False)

    @property
    def failed(self) -> bool:
        return bool(self.violations)

    def to_dict(self) -> Obj:
        return {"spec": self.spec.to_dict(), "violations": list(self.violations),
                "digest": self.digest, "performed": list(self.performed), "error": self.error,
                "virtual": self.virtual, "wall": self.wall, "actions": list(self.actions)}

    @classmethod
    def from_dict(cls, item: Obj) -> RunResult:
        return cls(spec=RunSpec.from_dict(item["spec"]), violations=item.get("violations") or (),
                   digest=item.get("digest", ""), performed=item.get("performed") or (),
                   error=item.get("error", ""), virtual=item.get("virtual", 0.0),
                   wall=item.get("wall", 0.0), actions=item.get("actions") or ())


# ---------------------------------------------------------------------------------------------
# The two halves of a run
# ---------------------------------------------------------------------------------------------


def world_options(workload: Workload) -> dict[str, Any]:
    """The `emu.run` options of a workload's world (a scenario brings its own)."""
    if workload.scenario is not None:
        from .. import scenarios

        return dict(scenarios.get(workload.scenario).options)
    from ..kube.config import KubeConfig

    return {"cluster": KubeConfig(nodes=workload.setup.nodes, node_cpu="4", node_memory="16Gi",
                                  image_pull_delay=0.5, container_start_delay=0.25)}


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
    if setup.install is not None:
        await _install_own(sim, setup)
        return
    resources = {"limits": {"cpu": "100m", "memory": "512Mi"},
                 "requests": {"cpu": "100m", "memory": "512Mi"}}
    kuberay = await sim.install_kuberay(replicas=setup.operator_replicas, resources=resources)
    await kuberay.wait_for_leader(timeout=120)


async def _install_own(sim: Simulation, setup: Any) -> None:
    """Start the user's controller (``module:function``) and wait until one replica leads."""
    import importlib
    import inspect

    module, _, name = str(setup.install).partition(":")
    fn = getattr(importlib.import_module(module), name)
    started = fn(sim)
    if inspect.isawaitable(started):
        await started
    if not setup.lease:
        return  # no leader election to wait for
    await sim.wait_for("Lease", setup.lease,
                       lambda le: bool((le.get("spec") or {}).get("holderIdentity")),
                       timeout=120)


def default_invariants() -> list[Any]:
    """`emu.invariants.kuberay_invariants()` — the checks every explore run makes."""
    try:
        from ..invariants import kuberay_invariants
    except ImportError:  # interim: until emu.invariants is merged
        return []
    return list(kuberay_invariants())


class _NoMonitors:
    async def finish(self, sim: Any) -> list[Any]:
        return []


def _attach(sim: Simulation, invariants: Sequence[Any]) -> Any:
    try:
        from ..invariants import Monitors
    except ImportError:  # interim: until emu.invariants is merged
        return _NoMonitors()
    return Monitors.attach(sim, invariants)


def _fault_end(fault: Any) -> float:
    end = float(fault.at)
    duration = getattr(fault, "duration", None)
    if isinstance(duration, (int, float)):
        end += float(duration)
    then = getattr(fault, "then", None)
    if then is not None:
        end = max(end, _fault_end(attrs.evolve(then, at=fault.at)))
    return end


class _Recorder:
    """The reference run's log of controller actions: every call an operator replica made
    (API writes with verb/kind/name, dashboard calls) and every state transition of the
    workload's objects and of Ray Pods, from the network and the trace."""

    WRITES = ("create", "update", "update_status", "patch", "delete", "delete_collection")

    def __init__(self, sim: Simulation, workload: Workload) -> None:
        from ..kernel.network import Match

        self.sim = sim
        self.operator = workload.setup.operator
        self.kinds = {m.get("kind") for m in workload.manifests}
        self.actions: list[Obj] = []
        self._states: dict[tuple[str, str], Any] = {}
        self._counts: dict[tuple[str, ...], int] = {}
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
                             "n": self._count(key)})

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
        if kind == "Pod":
            labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
            node_type = labels.get("ray.io/node-type")
            if obj is not None and node_type not in ("head", "worker"):
                return
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
                             "caller": str(ev.fields.get("caller"))})


async def play(sim: Simulation, workload: Workload, spec: RunSpec,
               invariants: Sequence[Any] | None = None, *, record: bool = False
               ) -> tuple[list[Obj], list[Obj]]:
    """The second half of a run: the violations it found (as dicts) and, with ``record``, the
    actions it saw (the reference run's log)."""
    invariants = default_invariants() if invariants is None else list(invariants)
    monitors = _attach(sim, invariants)
    recorder = _Recorder(sim, workload) if record else None
    sim.faults.schedule(spec.plan)
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
    await _settle(sim, settle)
    for v in await monitors.finish(sim):
        found.append({"invariant": v.invariant, "message": v.message, "at": round(v.at, 6),
                      "objects": list(v.objects)})
    found.sort(key=lambda v: (v["at"], v["invariant"], v["message"]))
    return found, (recorder.actions if recorder is not None else [])


def _last_fault_end(sim: Simulation) -> float:
    return max([_fault_end(f) for f in sim.faults.applied] or [0.0])


async def _settle(sim: Simulation, settle: float) -> None:
    """Wait until every fault performed so far has healed plus ``settle`` seconds."""
    while sim.now < _last_fault_end(sim) + settle:
        await sim.sleep(max(POLL, _last_fault_end(sim) + settle - sim.now))


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
            cur = sim.api.get(goal.kind, obj["metadata"]["name"],
                              obj["metadata"].get("namespace", "default")) \
                if _exists(sim, goal.kind, obj) else None
            if cur is None or str(get_path(cur, goal.path)) not in goal.states:
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
                                 f"{list(goal.states)} (gave up at t={sim.now:.3f}s, "
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


def _exists(sim: Simulation, kind: str, obj: Obj) -> bool:
    from ..apiserver.errors import ApiError

    try:
        sim.api.get(kind, obj["metadata"]["name"], obj["metadata"].get("namespace", "default"))
    except ApiError:
        return False
    return True


async def _change(sim: Simulation, knob: Any, value: Any) -> None:
    """``kubectl patch``: set the knob's field on its objects (get, change, update, retrying on
    a conflict); an object already gone is left alone."""
    from ..apiserver.errors import ApiError, Conflict
    from .workload import set_path

    sim.trace.emit("explore", "knob_change", knob=knob.name, value=repr(value))
    client = sim.client("kubectl")
    for obj in sim.api.list(knob.kind, "default").get("items") or []:
        name = obj["metadata"]["name"]
        if knob.object_name is not None and name != knob.object_name:
            continue
        for _ in range(5):
            try:
                cur = await client.get(knob.kind, name, "default")
                set_path(cur, knob.path, value)
                await client.update(cur)
                break
            except Conflict:
                continue
            except ApiError:
                break


# ---------------------------------------------------------------------------------------------
# Fresh runs and the fork-server
# ---------------------------------------------------------------------------------------------


def run_one(workload: Workload, spec: RunSpec, seed: int = 0,
            invariants: Sequence[Any] | None = None, *, record: bool = False) -> RunResult:
    """One run in a fresh world (no fork): the reference path every forked run must equal."""
    results = list(_serve(workload, seed, [spec], invariants, record=record, fork=False))
    return results[0]


class ForkServer:
    """Runs many specs of one (workload, seed): the world is prepared once, then each run is a
    forked child of the prepared process (``fork=False``: a fresh world per run instead)."""

    def __init__(self, workload: Workload, seed: int = 0,
                 invariants: Sequence[Any] | None = None, *, fork: bool | None = None) -> None:
        self.workload = workload
        self.seed = seed
        self.invariants = invariants
        # forked by default: the parent bounds each run's wall time (a livelock cannot hang the
        # search); not for speed (benchmarks/explore.py: 0.77-0.86x of fresh worlds here)
        self.fork = hasattr(os, "fork") if fork is None else fork

    def run(self, specs: Sequence[RunSpec], *, record: bool = False) -> Iterator[RunResult]:
        """Each spec's result, in order."""
        return _serve(self.workload, self.seed, specs, self.invariants, record=record,
                      fork=self.fork)


def _serve(workload: Workload, seed: int, specs: Sequence[RunSpec],
           invariants: Sequence[Any] | None, *, record: bool, fork: bool) -> Iterator[RunResult]:
    if not fork:
        for spec in specs:
            yield from _run_fresh(workload, seed, spec, invariants, record)
        return
    out: list[RunResult] = []
    _fork_batch(workload, seed, specs, invariants, record, out.append)
    yield from out


def _run_fresh(workload: Workload, seed: int, spec: RunSpec, invariants: Sequence[Any] | None,
               record: bool) -> Iterator[RunResult]:
    from ..simulation import run

    box: dict[str, Any] = {}
    wall = time.perf_counter()

    async def main(sim: Simulation) -> None:
        box["sim"] = sim
        await prepare(sim, workload)
        box["found"], box["actions"] = await play(sim, workload, spec, invariants, record=record)
        box["digest"], box["now"] = sim.trace.digest(), sim.now
        box["performed"] = [repr(f) for f in sim.faults.performed()]

    from ..faults import UnperformedFaults

    error = ""
    try:
        run(main, seed=seed, **world_options(workload))
    except UnperformedFaults:
        pass  # a generated plan's fault may not take effect; `performed` says which did
    except Exception as exc:  # the run itself raised: reported, never hidden
        error = f"{type(exc).__name__}: {exc}"
    box.get("sim")
    yield RunResult(spec, box.get("found") or (), box.get("digest") or "",
                    box.get("performed") or (), error,
                    round(box.get("now", 0.0), 6), time.perf_counter() - wall,
                    box.get("actions") or ())


def _fork_batch(workload: Workload, seed: int, specs: Sequence[RunSpec],
                invariants: Sequence[Any] | None, record: bool,
                emit: Callable[[RunResult], None]) -> None:
    from ..simulation import run

    # resolved (and their modules imported) once here, not in every child
    checks = default_invariants() if invariants is None else list(invariants)

    async def main(sim: Simulation) -> None:
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
        error = ""
        try:
            found, actions = await play(sim, workload, spec, checks, record=record)
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
        _report(sim, spec, found, actions, error, fd, had_workdir)

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
                why = (f"the run exceeded its wall-clock limit of {WALL_LIMIT:g}s (virtual time "
                       "stopped advancing: a livelock in the world)" if timed_out
                       else f"the forked run died (wait status {status})")
                emit(RunResult(spec, error=why, wall=time.perf_counter() - wall))
    finally:
        gc.unfreeze()
    return None


def _report(sim: Simulation, spec: RunSpec, found: list[Obj], actions: list[Obj], error: str,
            fd: int, had_workdir: bool) -> None:
    """The forked child's end: write the result to the parent and ``os._exit`` (no cleanup of
    the shared world; only a work directory the child itself created is removed)."""
    code = 0
    try:
        result = RunResult(spec, found, sim.trace.digest(),
                           [repr(f) for f in sim.faults.performed()], error, round(sim.now, 6),
                           0.0, actions)
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
