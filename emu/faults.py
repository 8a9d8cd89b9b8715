"""Faults as data: frozen values that print as the code that replays them.

A fault plan is a list of timed faults, ``[Crash(at=12.0, process='operator-0')]``; it can be
printed, stored as JSON, loaded, replayed with ``emu.run(main, seed=..., faults=plan)``, generated
by ``emu explore`` and shrunk. Each value's ``apply(sim)`` performs it; `Faults` (``sim.faults``)
offers the same verbs for immediate use from a test, and records every fault it performs so a
failing run prints a plan that reproduces it.

The verbs and their undo (turmoil's crash/bounce/partition/repair/hold/release, for our world):

=================  ==========================================  ===========================
verb               what it does                                undo
=================  ==========================================  ===========================
crash              kill a process abruptly; memory is gone     restart (a new process)
restart            crash if running, start main again          —
pause              freeze at the next call or sleep (zombie)   resume
partition          drop packets between two endpoints          heal
outage             an endpoint refuses (or drops) every call   restore
latency            one-way delay on matching calls             latency(0)
fail_requests      matching calls fail with an HTTP code       expires (count/duration)
lose_responses     matching calls apply; responses are lost    expires (count/duration)
=================  ==========================================  ===========================

Observation faults perturb what one process's informers see, performed by the informer layer
(``emu.client.informer``), never by the controllers (Sieve's stale-state and unobserved-state
testing):

==============  ===========================================================  ===================
fault           what the process's informers observe                         undo
==============  ===========================================================  ===================
InformerLag     its watch of one kind ``seconds`` late                        after duration
StaleList       its first LIST served at an older revision, watched from it   (it catches up)
CoalesceEvents  only the latest state per object, at the window's end         after duration
ShuffleLists    cached lists and list deliveries in a seeded random order     after duration
==============  ===========================================================  ===================

Kubernetes faults (`DeletePod`, `KillContainer`, `FailNode`, `RecoverNode`, `SlowKubelet`,
`DelayEndpoints`, defined in ``emu.kube.faults``) and Ray faults (`KillGcs`, `KillRaylet`,
`RedisDown`, `FlushRedis`, `WipeRedisNamespace`, `SlowServeDeployment`, `FailServeDeployment`,
`FailJob`) are values here too, so one plan can mix them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from .apiserver import errors as api_errors
from .client.client import ObjectList
from .client.informer import Informer, ObservationRule, observation_faults
from .kernel.faultbase import Fault, FaultPlan
from .kernel.network import CallInfo, Match
from .kernel.process import Process
from .kube.faults import DelayEndpoints, DeletePod, FailNode, KillContainer, RecoverNode, SlowKubelet

__all__ = [
    "AfterRequest", "CoalesceEvents", "Crash", "DelayEndpoints", "DeletePod", "FailJob", "FailNode",
    "FailRequests", "FailServeDeployment", "Fault", "FaultPlan", "Faults", "FlushRedis", "Heal",
    "InformerLag", "KillContainer", "KillGcs", "KillRaylet", "Latency", "LoseResponses", "Outage",
    "Partition", "Pause", "RecoverNode", "RedisDown", "Restart", "Restore", "Resume",
    "ShuffleLists", "SlowKubelet", "SlowServeDeployment", "StaleList", "UnperformedFaults",
    "WipeRedisNamespace",
]

if TYPE_CHECKING:
    from .simulation import Simulation



def _error_for(code: int) -> type[api_errors.ApiError] | None:
    return {
        409: api_errors.Conflict, 429: api_errors.TooManyRequests,
        500: api_errors.InternalError, 503: api_errors.ServiceUnavailable,
        504: api_errors.ServerTimeout,
    }.get(code)


def api_error_factory(code: int) -> Any:
    """An error maker for `FailRequests`: the API error a real server would send for ``code``."""

    def make(info: CallInfo) -> Exception:
        if code == 409:
            return api_errors.Conflict(info.kind.lower() + "s", info.name or "?")
        cls = _error_for(code)
        if cls is not None:
            return cls()  # type: ignore[call-arg]
        return api_errors.ApiError(f"injected failure ({code})", code=code, reason="InternalError")

    return make


def _proc(sim: Simulation, process: str | Process) -> Process:
    return process if isinstance(process, Process) else sim.processes.get(process)


def _request_match(fault: Any) -> Match:
    """The request predicate of a fault with verb/kind/name/namespace/caller/dst fields."""
    return Match(fault.verb, fault.kind, fault.name, fault.namespace, fault.caller, fault.dst)


@attrs.frozen
class Crash(Fault):
    """Kill a process abruptly (no cleanup, memory lost)."""

    process: str = ""

    def apply(self, sim: Simulation) -> None:
        _proc(sim, self.process).crash("fault: crash")


@attrs.frozen
class Restart(Fault):
    """Crash a process if it runs, then start it again as a new incarnation."""

    process: str = ""

    def apply(self, sim: Simulation) -> None:
        sim.processes.restart(self.process)


@attrs.frozen
class Pause(Fault):
    """Freeze a process (a zombie); resumed after ``duration`` seconds when given."""

    process: str = ""
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        proc = _proc(sim, self.process)
        proc.pause()
        if self.duration is not None:
            sim.loop.call_later(self.duration, proc.resume)


@attrs.frozen
class Resume(Fault):
    """Resume a paused process: its in-flight work continues."""
    process: str = ""

    def apply(self, sim: Simulation) -> None:
        _proc(sim, self.process).resume()


@attrs.frozen
class Partition(Fault):
    """Drop packets between ``a`` and ``b`` (names, hosts or addresses); healed after
    ``duration`` when given."""

    a: str = ""
    b: str = ""
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        sim.network.partition(self.a, self.b)
        if self.duration is not None:
            sim.loop.call_later(self.duration, sim.network.heal, self.a, self.b)


@attrs.frozen
class Heal(Fault):
    """End the partition between ``a`` and ``b`` (every partition when neither is given)."""
    a: str | None = None
    b: str | None = None

    def apply(self, sim: Simulation) -> None:
        sim.network.heal(self.a, self.b)


@attrs.frozen
class Outage(Fault):
    """An endpoint down (``apiserver`` for the control plane); restored after ``duration``."""

    endpoint: str = "apiserver"
    duration: float | None = None
    mode: str = "refuse"

    def apply(self, sim: Simulation) -> None:
        sim.network.outage(self.endpoint, self.mode)
        if self.duration is not None:
            sim.loop.call_later(self.duration, sim.network.restore, self.endpoint)


@attrs.frozen
class Restore(Fault):
    """End an outage of ``endpoint``."""
    endpoint: str = "apiserver"

    def apply(self, sim: Simulation) -> None:
        sim.network.restore(self.endpoint)


@attrs.frozen
class Latency(Fault):
    """One-way delay of ``seconds`` on matching calls; removed after ``duration``."""

    seconds: float = 0.0
    caller: str | None = None
    dst: str | None = None
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        match = Match(caller=self.caller, dst=self.dst)
        sim.network.set_latency(self.seconds, match)
        if self.duration is not None:
            sim.loop.call_later(self.duration, sim.network.set_latency, 0.0, match)


@attrs.frozen
class FailRequests(Fault):
    """Matching calls fail with HTTP ``code`` before reaching the endpoint."""

    verb: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    caller: str | None = None
    dst: str | None = "apiserver"
    code: int = 500
    count: int | None = None
    duration: float | None = None

    def match(self) -> Match:
        return _request_match(self)

    def apply(self, sim: Simulation) -> None:
        sim.network.fail_requests(self.match(), api_error_factory(self.code), count=self.count,
                                  duration=self.duration)


@attrs.frozen
class LoseResponses(Fault):
    """Matching calls take effect but their responses are lost (the caller times out)."""

    verb: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    caller: str | None = None
    dst: str | None = "apiserver"
    count: int | None = 1
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        match = _request_match(self)
        sim.network.lose_responses(match, count=self.count, duration=self.duration)


@attrs.frozen
class AfterRequest(Fault):
    """Perform ``then`` right after a matching request took effect at its endpoint, before the
    caller hears back — "crash the leader just after its Job create was committed". Matches like
    `FailRequests` (verb, kind, name, namespace, caller, dst); fires ``count`` times (once by
    default). ``then``'s own ``at`` is ignored."""

    then: Fault = attrs.field(factory=lambda: Fault())
    verb: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    caller: str | None = None
    dst: str | None = "apiserver"
    count: int | None = 1

    def apply(self, sim: Simulation) -> None:
        match = _request_match(self)

        def fire(info: CallInfo) -> None:
            # On the next loop step: the write is committed, the caller has not resumed yet.
            sim.loop.call_soon(sim.faults.perform_planned, self.then)

        sim.network.after_call(match, fire, count=self.count)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["then"] = self.then.to_dict()
        return out


# -- Ray faults (acting through emu.ray's fault functions) ---------------------------------------


@attrs.frozen
class KillGcs(Fault):
    """End the ``gcs_server`` of head Pod ``pod`` (``signal`` KILL or TERM); the head
    container follows it, and the kubelet restarts it by ``restartPolicy``."""

    pod: str = ""
    signal: str = "KILL"

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import kill_gcs

        kill_gcs(sim, self.pod, self.signal)


@attrs.frozen
class KillRaylet(Fault):
    """End the raylet of Pod ``pod`` (head or worker)."""

    pod: str = ""
    signal: str = "KILL"

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import kill_raylet

        kill_raylet(sim, self.pod, self.signal)


@attrs.frozen
class RedisDown(Fault):
    """The Redis at ``address`` (``host:port`` as registered) stops answering; back after
    ``duration`` when given."""

    address: str = ""
    duration: float | None = None
    mode: str = "refuse"

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import redis_down, redis_up

        redis_down(sim, self.address, self.mode)
        if self.duration is not None:
            sim.loop.call_later(self.duration, redis_up, sim, self.address)


@attrs.frozen
class FlushRedis(Fault):
    """``FLUSHALL`` on the Redis at ``address``: every namespace's keys are gone."""

    address: str = ""
    password: str | None = None

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import flush_redis

        sim.spawn_background(flush_redis(sim, self.address, self.password))


@attrs.frozen
class WipeRedisNamespace(Fault):
    """Delete ``RAY<namespace>@*`` on the Redis at ``address`` (what KubeRay's cleanup Job does)."""

    address: str = ""
    namespace: str = ""
    password: str | None = None

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import wipe_redis_namespace

        sim.spawn_background(wipe_redis_namespace(sim, self.address, self.namespace,
                                                  self.password))


@attrs.frozen
class SlowServeDeployment(Fault):
    """Serve applications importing ``import_path`` stay DEPLOYING for ``build_seconds``."""

    import_path: str = ""
    build_seconds: float = 60.0

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import slow_serve_deployment

        slow_serve_deployment(sim.ray_config, self.import_path, self.build_seconds)


@attrs.frozen
class FailServeDeployment(Fault):
    """Serve applications importing ``import_path`` end DEPLOY_FAILED with ``message``."""

    import_path: str = ""
    message: str = "deployment failed"

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import fail_serve_deployment

        fail_serve_deployment(sim.ray_config, self.import_path, self.message)


@attrs.frozen
class FailJob(Fault):
    """Ray jobs running ``entrypoint`` exit with ``exit_code`` after ``after`` seconds."""

    entrypoint: str = ""
    exit_code: int = 1
    after: float = 5.0

    def apply(self, sim: Simulation) -> None:
        from .ray.faults import fail_job

        fail_job(sim.ray_config, self.entrypoint, self.exit_code, self.after)


# -- observation faults (acting through the informers of emu.client.informer) -------------------


def _kind_names(sim: Simulation, kind: str | None) -> frozenset[str]:
    """The names an informer may have been asked for ``kind`` by (empty: every kind)."""
    if kind is None:
        return frozenset()
    try:
        info = sim.api.kinds.resolve(kind)
    except api_errors.ApiError:
        return frozenset({kind})  # not served (yet): checked again at the end of the run
    return frozenset({info.kind, info.kind.lower(), info.plural, *info.short_names})


def _observation(sim: Simulation, fault: Any, effect: str, duration: float | None,
                 **fields: Any) -> ObservationRule:
    obs = observation_faults(sim.network)
    until = None if duration is None else sim.now + duration
    rule = obs.add(ObservationRule(effect, fault.process, _kind_names(sim, fault.kind),
                                   until=until, **fields))
    if duration is not None:
        sim.loop.call_later(duration, obs.remove, rule)
    return rule


def _observed(sim: Simulation, fault: Any, rule: ObservationRule, what: str) -> Any:
    """The end-of-run check of an observation fault: None when it changed what some informer
    observed, else why not."""

    def check() -> str | None:
        if rule.hits:
            return None
        who = f"process {fault.process!r}" if fault.process else "any process"
        kind = f"{fault.kind} " if fault.kind else ""
        return f"no {kind}informer of {who} {what} while it was active"

    return check


@attrs.frozen
class InformerLag(Fault):
    """``process``'s watch of ``kind`` is ``seconds`` late: each event reaches its cache (and
    its handlers) that much later, while its other informers stay current — "its Pod watch 30 s
    behind". For ``duration`` seconds (events received meanwhile still arrive late); every
    process or kind when None."""

    process: str | None = None
    kind: str | None = None
    seconds: float = 30.0
    duration: float | None = None

    def apply(self, sim: Simulation) -> Any:
        rule = _observation(sim, self, "lag", self.duration, seconds=self.seconds)
        return _observed(sim, self, rule, "received a watch event")


@attrs.frozen
class StaleList(Fault):
    """The next first LIST of ``process``'s informers of ``kind`` (every kind when None) is
    served at an older revision — ``revisions_back`` global revisions before the current one, or
    ``at_revision`` — within the API server's history window (clamped to it); the informer then
    watches from there, so it replays what happened since: a new leader's or restarted
    operator's cache that starts behind. ``hold`` keeps the cache at the old revision that many
    seconds before the watch starts. Applies to informers that list for the first time while the
    fault is active (``duration`` seconds, or for the rest of the run)."""

    process: str | None = None
    kind: str | None = None
    revisions_back: int | None = None
    at_revision: int | None = None
    hold: float = 0.0
    duration: float | None = None

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if (self.revisions_back is None) == (self.at_revision is None):
            raise ValueError("StaleList takes exactly one of revisions_back= and at_revision=")
        for name in ("revisions_back", "at_revision"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                raise ValueError(f"StaleList {name} must be a non-negative int, not {value!r}")

    def apply(self, sim: Simulation) -> Any:
        rule = _observation(sim, self, "stale", self.duration, hold=self.hold)
        rule.list_at = lambda inf, fresh: _list_at(sim, self, rule, inf, fresh)
        return _observed(sim, self, rule, "listed at an older revision")


def _list_at(sim: Simulation, fault: StaleList, rule: ObservationRule, inf: Informer,
             fresh: ObjectList) -> ObjectList:
    """What ``inf``'s list would have returned at the older revision: the store's current
    objects with every later change of the kind undone from the history (each change keeps the
    version it replaced)."""
    api = sim.api
    store = api.store
    current = int(fresh.resource_version or store.rev)
    back = fault.revisions_back or 0
    target = fault.at_revision if fault.at_revision is not None else current - back
    # (revision 0 would mean "any" to the watch that follows: the oldest is 1)
    target = min(max(target, store.compacted, 1), current)
    if target >= current:
        return fresh
    info, table = api._resolve(inf.kind, inf.api_version)
    labels, fields = api._selectors(info, inf.label_selector, inf.field_selector)
    objs = dict(table.objs)
    for change in reversed(store.history):
        if change.rev <= target:
            break
        if change.table is not table:
            continue
        key = (change.entry.ns, change.entry.name)
        if change.prev is None:
            objs.pop(key, None)
        else:
            objs[key] = change.prev
    ns = inf.namespace if info.namespaced else None
    items = []
    for key in sorted(objs):
        entry = objs[key]
        if ns and entry.ns != ns:
            continue
        if labels is not None and not labels.empty and not labels.matches(entry.labels):
            continue
        if fields is not None and not fields.empty and not fields.matches(entry.field_values()):
            continue
        items.append(orjson.loads(entry.data))
    rule.hits += 1
    proc = inf.client.process
    sim.trace.emit(proc.name if proc is not None else inf.client.identity, "stale_list",
                   kind=inf.kind, revision=target, current=current)
    return ObjectList(items, str(target))


@attrs.frozen
class CoalesceEvents(Fault):
    """For ``duration`` seconds, ``process``'s informers of ``kind`` hold their watch events and
    keep only the latest state of each object; at the end they deliver it as a relist would
    (deletions, then each object's latest state, in key order): intermediate states are never
    observed."""

    process: str | None = None
    kind: str | None = None
    duration: float = 30.0

    def apply(self, sim: Simulation) -> Any:
        rule = _observation(sim, self, "coalesce", self.duration)
        return _observed(sim, self, rule, "received a watch event")


@attrs.frozen
class ShuffleLists(Fault):
    """``process``'s cached lists of ``kind`` (every process and kind when None) come back in a
    seeded random order, and so do the adds a list delivers to event handlers: Go's informer
    cache returns map order, so code that takes "the first" item of a list must not rely on a
    sorted one. The order is drawn from the simulation's seeded RNG: the same seed, the same
    order. For ``duration`` seconds, or the rest of the run."""

    process: str | None = None
    kind: str | None = None
    duration: float | None = None

    def apply(self, sim: Simulation) -> Any:
        rng = sim.rng.fork(f"shuffle-lists:{self.process or '*'}:{self.kind or '*'}:{self.at}")
        rule = _observation(sim, self, "shuffle", self.duration, rng=rng)
        return _observed(sim, self, rule, "listed two or more objects")


class UnperformedFaults(AssertionError):
    """Planned faults never took effect: the run did not test what its plan says.

    Raised at the end of `emu.run` (so it fails a test under the pytest plugin) when a fault
    not marked ``optional=True`` named a process that was not running, matched no request,
    came after the run ended, or was invalid for the world it met. ``items`` holds each fault
    with why."""

    def __init__(self, items: list[tuple[Fault, str]]) -> None:
        self.items = items
        lines = "\n".join(f"  {f!r}: {why}" for f, why in items)
        n = len(items)
        super().__init__(
            f"{n} planned fault{'s' if n != 1 else ''} never took effect:\n{lines}\n"
            "Fix the fault (names as the world has them: sim.processes.all(), the served "
            "kinds), or mark it optional=True if it may legitimately not happen.")


@attrs.define(eq=False)
class _Record:
    fault: Fault
    state: str  # "waiting" | "performed" | "failed" | "pending"
    reason: str = ""
    check: Any = None

    def outcome(self, now: float) -> str | None:
        """None when the fault took effect, else why not."""
        if self.state == "waiting":
            return (f"its time (t={self.fault.at:g}s) never came: the run ended at "
                    f"t={now:g}s")
        if self.state == "failed":
            return self.reason
        if self.state == "pending":
            why = self.check()
            return None if why is None else str(why)
        return None


class Faults:
    """``sim.faults``: the fault verbs, now or at a time; every fault is recorded with whether
    it took effect (`performed`, `unperformed`)."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim
        self.applied: list[Fault] = []
        self._records: list[_Record] = []

    def plan(self) -> FaultPlan:
        """What was done so far (whether or not it took effect), as a plan that replays it."""
        return FaultPlan(self.applied)

    def do(self, fault: Fault) -> None:
        """Perform ``fault`` now (its ``at`` is set to the current time in the record). An
        invalid fault (an unknown process, endpoint, kind or verb) raises and is not recorded."""
        fault = attrs.evolve(fault, at=round(self._sim.now, 9))
        record = _Record(fault, "performed")
        self._sim.trace.emit("faults", "fault", fault=repr(fault))
        self._settle(record, fault.apply(self._sim))
        self.applied.append(fault)
        self._records.append(record)

    def schedule(self, plan: Iterable[Fault] | FaultPlan) -> None:
        """Perform each fault at its ``at`` time (relative to the start of the run). A fault
        that cannot be performed then is recorded as not performed, with why."""
        for fault in plan:
            delay = max(0.0, fault.at - self._sim.now)
            record = _Record(fault, "waiting")
            self._records.append(record)
            self._sim.loop.call_later(delay, self._perform, record)

    def perform_planned(self, fault: Fault) -> None:
        """Perform ``fault`` now as part of a plan (`AfterRequest`'s ``then``): a failure is
        recorded, not raised."""
        record = _Record(fault, "waiting")
        self._records.append(record)
        self._perform(record)

    def _perform(self, record: _Record) -> None:
        fault = record.fault = attrs.evolve(record.fault, at=round(self._sim.now, 9))
        self.applied.append(fault)
        self._sim.trace.emit("faults", "fault", fault=repr(fault))
        try:
            self._settle(record, fault.apply(self._sim))
        except Exception as err:  # an invalid fault for this world: reported at the end
            record.state, record.reason = "failed", f"{type(err).__name__}: {err}"
            self._sim.trace.emit("faults", "fault_invalid", fault=repr(fault),
                                 error=record.reason)

    @staticmethod
    def _settle(record: _Record, result: Any) -> None:
        if result is None:
            record.state = "performed"
        elif isinstance(result, str):
            record.state, record.reason = "failed", result
        else:
            record.state, record.check = "pending", result

    def performed(self) -> list[Fault]:
        """The faults that took effect, in the order they were performed."""
        now = self._sim.now
        return [r.fault for r in self._records if r.outcome(now) is None]

    def unperformed(self) -> list[tuple[Fault, str]]:
        """Each fault that did not take effect (so far), with why: a process that was not
        running, a request matcher that matched nothing, a time the run never reached."""
        now = self._sim.now
        out = []
        for record in self._records:
            why = record.outcome(now)
            if why is not None:
                out.append((record.fault, why))
        return out

    def check(self) -> None:
        """Raise `UnperformedFaults` for every fault not marked optional that did not take
        effect (`emu.run` calls this when the run's main returns)."""
        missed = [(f, why) for f, why in self.unperformed() if not f.optional]
        if missed:
            raise UnperformedFaults(missed)

    # -- verbs -------------------------------------------------------------------------------

    @staticmethod
    def _name(process: str | Process) -> str:
        return process.name if isinstance(process, Process) else process

    def crash(self, process: str | Process) -> None:
        """Kill abruptly: no cleanup, memory lost. Undo: `restart`."""
        self.do(Crash(process=self._name(process)))

    def restart(self, process: str | Process) -> None:
        """Crash if running, then start again as a new incarnation with a new identity."""
        self.do(Restart(process=self._name(process)))

    def pause(self, process: str | Process, duration: float | None = None) -> None:
        """Freeze at the next call or sleep (a zombie). Undo: `resume`."""
        self.do(Pause(process=self._name(process), duration=duration))

    def resume(self, process: str | Process) -> None:
        """Continue a paused process; its in-flight work goes on (and may land)."""
        self.do(Resume(process=self._name(process)))

    def partition(self, a: str, b: str, duration: float | None = None) -> None:
        """Drop packets between a and b. Undo: `heal`."""
        self.do(Partition(a=a, b=b, duration=duration))

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        """End the partition between a and b, or every partition when neither is given."""
        self.do(Heal(a=a, b=b))

    def outage(self, endpoint: str = "apiserver", duration: float | None = None,
               mode: str = "refuse") -> None:
        """Take an endpoint down. Undo: `restore` (or after ``duration``)."""
        self.do(Outage(endpoint=endpoint, duration=duration, mode=mode))

    def restore(self, endpoint: str = "apiserver") -> None:
        """End an outage of ``endpoint``."""
        self.do(Restore(endpoint=endpoint))

    def latency(self, seconds: float, *, caller: str | None = None, dst: str | None = None,
                duration: float | None = None) -> None:
        """One-way delay of ``seconds`` on calls from ``caller`` and/or to ``dst``; removed after
        ``duration`` when given (or with ``latency(0, ...)``)."""
        self.do(Latency(seconds=seconds, caller=caller, dst=dst, duration=duration))

    def fail_requests(self, *, verb: str | None = None, kind: str | None = None,
                      name: str | None = None, namespace: str | None = None,
                      caller: str | None = None, dst: str | None = "apiserver", code: int = 500,
                      count: int | None = None, duration: float | None = None) -> None:
        """Matching calls fail with HTTP ``code``, for ``count`` calls or ``duration`` seconds."""
        self.do(FailRequests(verb=verb, kind=kind, name=name, namespace=namespace, caller=caller,
                             dst=dst, code=code, count=count, duration=duration))

    def lose_responses(self, *, verb: str | None = None, kind: str | None = None,
                       name: str | None = None, namespace: str | None = None,
                       caller: str | None = None, dst: str | None = "apiserver",
                       count: int | None = 1, duration: float | None = None) -> None:
        """Matching calls take effect, but the caller never hears back and times out."""
        self.do(LoseResponses(verb=verb, kind=kind, name=name, namespace=namespace,
                              caller=caller, dst=dst, count=count, duration=duration))

    def after(self, then: Fault, *, verb: str | None = None, kind: str | None = None,
              name: str | None = None, namespace: str | None = None,
              caller: str | None = None, dst: str | None = "apiserver",
              count: int | None = 1) -> None:
        """Perform ``then`` right after a matching request takes effect (see `AfterRequest`)."""
        self.do(AfterRequest(then=then, verb=verb, kind=kind, name=name, namespace=namespace,
                             caller=caller, dst=dst, count=count))

    async def wait(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass (for symmetry with the verbs in a plan)."""
        await asyncio.sleep(seconds)
