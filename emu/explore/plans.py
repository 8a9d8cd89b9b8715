"""Plan generators: candidate fault plans from a reference run (Sieve's method, in-process).

The reference run (`runner.run_one(..., record=True)`) lists every controller action: each call
an operator replica made (API writes with verb/kind/name, dashboard calls) and each state
transition of the workload's objects and Ray Pods. From it:

- `crash_after_writes`: crash the writer right after each of its writes took effect (the
  kubelet restarts it as a new incarnation; a standby may win the Lease first);
- `pause_before_writes`: right after write *k*, freeze the writer for long enough that a
  successor takes over, then let it resume, so write *k+1* lands late (no fencing);
- `lose_responses`: write *k* takes effect but the writer never hears back;
- `pod_loss_at_transitions`: at each state transition, lose the head or a worker Pod (delete,
  kill, its GCS, its Node, or a kubelet eviction); at a RayJob's, delete or hang its submitter;
- `outages`: API-server outages, dashboard/GCS blips, Redis down, operator↔head partitions,
  starting at the transition times;
- `random_combinations`: seeded random 1-3 faults drawn from all of the above, at random times
  and on random knob settings;
- `serve_failures` (opt-in, `OPT_IN`): from each transition on, the workload's Serve
  applications fail to deploy, or take a minute to. Such a fault never heals and a failed
  application is the user's to fix, so a default search would report every run of it as
  unsteady; a user who asks how KubeRay copes with a broken application (the RayService
  ``ray.io/initializing-timeout``) names the family.

Every plan is a `FaultPlan` of fault values, so it prints as code and replays exactly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from ..faults import (
    CoalesceEvents,
    Crash,
    FailServeDeployment,
    FaultPlan,
    InformerLag,
    LoseResponses,
    Outage,
    Pause,
    RedisDown,
    ShuffleLists,
    SlowServeDeployment,
    StaleList,
)
from .faults import (
    AtCall,
    CrashLeader,
    LoseRayPod,
    LoseSubmitter,
    PartitionLeaderFromHead,
    PauseLeader,
)
from .runner import RunSpec
from .workload import Workload

Obj = dict[str, Any]

#: How long a paused leader stays frozen: past the 15 s Lease and a successor's first actions.
PAUSE_SECONDS = 30.0
#: API-server outages, each crossing one more real threshold: 10 s (inside the operator's 10 s
#: RenewDeadline), 30 s (past the 15 s Lease: the leader loses it), 60 s (past the node
#: lifecycle controller's 50 s Node monitor grace period: every Node is tainted unreachable and
#: must recover once its kubelet posts status again; past Ray's 60 s GCS reconnect budget too).
OUTAGE_SECONDS = (10.0, 30.0, 60.0)
#: Redis outages: 30 s (the GCS crashes on its failed PING and restarts) and 70 s (past the
#: GCS's ~60 s Redis connect retries, 600 x 100 ms: the restarted GCS gives up too).
REDIS_DOWN_SECONDS = (30.0, 70.0)


def _writes(actions: Sequence[Obj], names: Sequence[str] = ()) -> list[Obj]:
    """The operator's writes: API writes and dashboard calls other than GET, each keyed so it
    still matches when generated names differ (a name is kept only when the workload's
    manifests fix it; a dashboard call keeps only its verb), with ``n`` recounted per key."""
    out: list[Obj] = []
    counts: dict[tuple[Any, ...], int] = {}
    for a in actions:
        if a["type"] != "call":
            continue
        if a["dst"] == "apiserver":
            name = a["name"] if a["name"] in names else None
            item = {**a, "name": name, "kind": a["kind"] or None}
        elif a["verb"] != "GET":
            item = {**a, "name": None, "kind": None, "dst": None}
        else:
            continue
        key = (item["verb"], item["kind"], item["name"], item["dst"])
        counts[key] = counts.get(key, 0) + 1
        item["n"] = counts[key]
        out.append(item)
    return out


def _owner(workload: Workload) -> str:
    """The name the workload's Ray clusters start with (its first Ray object)."""
    for obj in workload.manifests:
        if obj.get("kind") in ("RayCluster", "RayJob", "RayService"):
            return str(obj["metadata"]["name"])
    return ""


def _names(workload: Workload) -> list[str]:
    return [str(m["metadata"]["name"]) for m in workload.manifests]


def _call(a: Obj, then: Any, caller: str) -> AtCall:
    return AtCall(n=int(a["n"]), then=then, verb=a["verb"], kind=a["kind"], name=a["name"],
                  caller=caller, dst=a["dst"])


def crash_after_writes(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    for a in _writes(actions, _names(workload)):
        yield FaultPlan([_call(a, Crash(), workload.setup.operator)])


def pause_before_writes(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    for a in _writes(actions, _names(workload)):
        yield FaultPlan([_call(a, Pause(duration=PAUSE_SECONDS), workload.setup.operator)])


def lose_responses(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    for a in _writes(actions, _names(workload)):
        loss = LoseResponses(verb=a["verb"], kind=a["kind"], name=a["name"], dst=a["dst"],
                             caller=None, count=1)
        if int(a["n"]) == 1:
            yield FaultPlan([loss])
        else:  # arm the loss right after the previous call of the same key
            yield FaultPlan([_call(dict(a, n=int(a["n"]) - 1), loss, workload.setup.operator)])


def _transitions(actions: Sequence[Obj], kinds: tuple[str, ...] | None = None) -> list[Obj]:
    return [a for a in actions if a["type"] == "transition"
            and (kinds is None or a["kind"] in kinds)]


def pod_loss_at_transitions(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    owner = _owner(workload)
    if not owner:
        return
    kinds = tuple(sorted({str(m.get("kind")) for m in workload.manifests}))
    for a in _transitions(actions, kinds):
        for node_type, how in (("head", "delete"), ("worker", "delete"), ("head", "gcs"),
                               ("head", "node"), ("head", "kill"), ("head", "evict")):
            yield FaultPlan([LoseRayPod(at=float(a["t"]), owner=owner, node_type=node_type,
                                        how=how, duration=60.0 if how == "node" else None)])
        if a["kind"] == "RayJob":
            # the submitter's Pod (K8sJobMode): lost after it submitted, its retry must not
            # submit the job again (KubeRay PR #2579); hung, the RayJob must still end once
            # Ray says the job did (PR #3642's transition grace period); its Job deleted, the
            # RayJob must recreate it or end (docs/findings.md F8)
            for how in ("pod", "hang", "job"):
                yield FaultPlan([LoseSubmitter(at=float(a["t"]), owner=str(a["name"]),
                                               how=how)])


def outages(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    owner = _owner(workload)
    times = sorted({float(a["t"]) for a in _transitions(actions)})
    for t in times:
        for d in OUTAGE_SECONDS:
            yield FaultPlan([Outage(at=t, endpoint="apiserver", duration=d)])
        if owner:
            yield FaultPlan([PartitionLeaderFromHead(at=t, owner=owner, duration=45.0)])
        yield FaultPlan([PauseLeader(at=t, duration=PAUSE_SECONDS, lease=workload.setup.lease)])
        yield FaultPlan([CrashLeader(at=t, lease=workload.setup.lease)])
        if workload.setup.redis:
            for d in REDIS_DOWN_SECONDS:
                yield FaultPlan([RedisDown(at=t, address="redis:6379", duration=d)])


#: The kinds KubeRay watches whose observation the perturbations target (with your own
#: controller: the kinds of the workload's manifests and what it creates).
OBSERVED_KINDS = ("Pod", "RayCluster", "Job", "Service")


def _observed_kinds(workload: Workload, actions: Sequence[Obj]) -> tuple[str, ...]:
    if workload.setup.install is None:
        return OBSERVED_KINDS
    kinds = {str(m.get("kind")) for m in workload.manifests}
    kinds |= {str(a["kind"]) for a in actions if a["type"] == "call" and a.get("kind")}
    return tuple(sorted(kinds))


def operators(actions: Sequence[Obj]) -> list[str]:
    """The operator replicas' process names, as the reference run started them."""
    return [str(a["name"]) for a in actions if a["type"] == "operator"]


def perturbations(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    """Sieve's stale-state and unobserved-state testing: one operator's watch of one kind
    30 s late; a crash of the leader at a transition with the successor's first LIST served
    from an older revision; a transition's intermediate states coalesced away; List results in
    a seeded random order."""
    procs = operators(actions)
    kinds = _observed_kinds(workload, actions)
    times = sorted({float(a["t"]) for a in _transitions(actions)})
    for proc in procs:
        for kind in kinds:
            yield FaultPlan([InformerLag(at=0.0, process=proc, kind=kind, seconds=30.0,
                                         duration=120.0)])
        yield FaultPlan([ShuffleLists(at=0.0, process=proc)])
    for t in times:
        for proc in procs:
            for kind in kinds[:2]:
                yield FaultPlan([StaleList(at=t, process=proc, kind=kind, revisions_back=20,
                                           duration=60.0),
                                 CrashLeader(at=t, lease=workload.setup.lease)])
                yield FaultPlan([CoalesceEvents(at=t, process=proc, kind=kind,
                                                duration=20.0)])


def serve_failures(workload: Workload, actions: Sequence[Obj]) -> Iterator[FaultPlan]:
    """From each transition on, deployments of each of the workload's Serve import paths
    (``Setup.serve_import_paths``) end DEPLOY_FAILED, or stay DEPLOYING for a minute."""
    times = sorted({float(a["t"]) for a in _transitions(actions)})
    for t in times:
        for path in workload.setup.serve_import_paths:
            yield FaultPlan([FailServeDeployment(at=t, import_path=path)])
            yield FaultPlan([SlowServeDeployment(at=t, import_path=path, build_seconds=60.0)])


#: The plan families, by name, in the order `systematic` interleaves them.
FAMILIES = {"crash-after-writes": crash_after_writes, "pause-before-writes": pause_before_writes,
            "lose-responses": lose_responses, "pod-loss": pod_loss_at_transitions,
            "outages": outages, "perturbations": perturbations, "serve-failures": serve_failures}
#: Families generated only when a workload names them (`Workload.families`): their faults never
#: heal, so they break eventual liveness by design.
OPT_IN = frozenset({"serve-failures"})


def check_families(names: Sequence[str]) -> None:
    """A `ValueError` naming an unknown plan family and the known ones."""
    for name in names:
        if name not in FAMILIES:
            raise ValueError(f"no plan family {name!r}; families: " + ", ".join(FAMILIES))


def systematic(workload: Workload, actions: Sequence[Obj]) -> list[FaultPlan]:
    """Every single-fault plan of the generators above (of ``workload.families`` when it names
    some, else of every family but the `OPT_IN` ones), interleaved family by family (so a small
    budget still tries each kind of fault), duplicates removed, in a stable order."""
    check_families(workload.families)
    families = [list(gen(workload, actions)) for name, gen in FAMILIES.items()
                if (name in workload.families if workload.families else name not in OPT_IN)]
    out: list[FaultPlan] = []
    seen: set[str] = set()
    i = 0
    while any(i < len(f) for f in families):
        for fam in families:
            if i < len(fam):
                key = fam[i].to_json()
                if key not in seen:
                    seen.add(key)
                    out.append(fam[i])
        i += 1
    return out


def random_knobs(workload: Workload, rng: random.Random, p: float = 0.35) -> dict[str, Any]:
    """Each knob moved off its default with probability ``p`` (to a random other value)."""
    out: dict[str, Any] = {}
    for k in workload.knobs:
        if len(k.values) > 1 and rng.random() < p:
            out[k.name] = k.values[rng.randrange(1, len(k.values))]
    return out


def random_combination(workload: Workload, actions: Sequence[Obj], pool: Sequence[FaultPlan],
                       rng: random.Random) -> FaultPlan:
    """1-3 faults drawn from ``pool`` (single-fault plans), some moved to random times within
    the reference run."""
    end = max([float(a["t"]) for a in actions] or [60.0])
    faults: list[Any] = []
    want = rng.choice((1, 1, 2, 2, 3))
    while len(faults) < want:
        picked = list(pool[rng.randrange(len(pool))].faults)
        if len(faults) + len(picked) > 3:
            continue
        if len(picked) == 1 and not isinstance(picked[0], AtCall) and rng.random() < 0.5:
            picked = [attrs.evolve(picked[0], at=round(rng.uniform(0.0, end), 3))]
        faults.extend(picked)
    return FaultPlan(sorted(faults, key=lambda f: f.at))


def _live_ray_pods(actions: Sequence[Obj], before: float) -> set[str]:
    """The node types of the Ray Pods the reference run had alive (not deleting) just before
    ``before``: a fault timed at ``before`` acts ahead of the run's own events of that
    instant."""
    states: dict[str, tuple[str, str]] = {}
    for a in actions:
        if a["type"] == "transition" and a["kind"] == "Pod" and a["t"] < before \
                and a.get("node_type") in ("head", "worker"):
            states[str(a["name"])] = (str(a["node_type"]), str(a["state"]))
    return {node_type for node_type, state in states.values()
            if state != "None" and not state.endswith("True)")}


def idle_alone(plan: FaultPlan, actions: Sequence[Obj]) -> str | None:
    """Why ``plan``, run alone at the default knobs, would perform no fault, or None. Until
    its fault fires such a run is the reference run itself, so what the reference shows
    decides: no live Ray Pod of the type a `LoseRayPod` or `PartitionLeaderFromHead` needs
    just before it fires; an informer perturbation of a replica that never made a call (a
    standby has no informers to perturb). Such plans stay in the pool of random
    combinations, where another fault can make them act."""
    if len(plan.faults) != 1:
        return None
    [fault] = plan.faults
    if isinstance(fault, (LoseRayPod, PartitionLeaderFromHead)):
        need = fault.node_type if isinstance(fault, LoseRayPod) else "head"
        if need not in _live_ray_pods(actions, fault.at):
            return f"no live {need} Pod before t={fault.at:g}s in the reference run"
    if isinstance(fault, (InformerLag, CoalesceEvents)):
        callers = {str(a["src"]) for a in actions if a["type"] == "call" and a.get("src")}
        if callers and fault.process not in callers:
            return f"{fault.process} never led in the reference run (no informers)"
    return None


#: The instants a plan arms at are multiples of this (virtual seconds), so that the plans of
#: a batch share a few shared-run instants (`runner._Branches`).
ARM_GRID = 0.5
#: Before a dashboard call, a plan arms this much earlier still: the call's hop to a Pod IP
#: (which an `AtCall` counts too) is not in the reference run's log and may come first.
HOP_MARGIN = 1.0
#: API verbs the reference run logs every call of (an `AtCall` on another verb may match calls
#: the log does not show).
LOGGED_WRITES = ("create", "update", "update_status", "patch", "delete", "delete_collection")


def _first_call(fault: AtCall, actions: Sequence[Obj], operator: str) -> float | None:
    """When the reference run made the first call ``fault`` counts (None: the reference run's
    log may not show all of them, or shows none)."""
    if fault.verb is None or fault.caller is None or operator not in fault.caller:
        return None  # a call by any process, or by one the log does not follow
    if fault.dst == "apiserver":
        if fault.verb not in LOGGED_WRITES or fault.kind in (None, "Lease", "Event"):
            return None
        margin, nth = 0.0, fault.n  # every such call is logged: the n-th one's time
    elif fault.dst is None and fault.verb == fault.verb.upper():
        margin, nth = HOP_MARGIN, 1  # hops are not logged: before the first logged one
    else:
        return None  # an API verb to any endpoint (reads are not logged), another endpoint
    seen = 0
    for a in actions:
        if a["type"] == "call" and a["verb"] == fault.verb and fault.caller in str(a["src"]) \
                and (fault.kind is None or a["kind"] == fault.kind) \
                and (fault.name is None or a["name"] == fault.name) \
                and (fault.dst is None or a["dst"] == fault.dst):
            seen += 1
            if seen == nth:
                return float(a["t"]) - margin
    return None


def first_effect(fault: Any, actions: Sequence[Obj], operator: str) -> float | None:
    """The earliest virtual time at which ``fault``, scheduled at the start of a run without
    other faults, can change anything: its ``at`` (a fault does nothing before its timer
    fires), or for an `AtCall` at 0 the reference run's call it acts after (for a dashboard
    call, whose hops to a Pod IP the log lacks, a little before the first it counts). None:
    from the start."""
    if isinstance(fault, AtCall) and fault.at <= 0:
        return _first_call(fault, actions, operator)
    return float(fault.at) if fault.at > 0 else None


def arm_time(spec: RunSpec, workload: Workload, actions: Sequence[Obj]) -> float | None:
    """When ``spec`` may arm its plan (`RunSpec.arm_at`): the last multiple of `ARM_GRID`
    strictly before every fault's `first_effect`, when that is after the reference run's
    start of `runner.play` and the spec keeps the default knobs (the reference run shows when
    things happen at those only); else None (the plan is scheduled at the start)."""
    if workload.scenario is not None or workload.changed(spec.knob_map) or not spec.plan.faults:
        return None
    starts = [float(a["t"]) for a in actions if a["type"] == "operator"]
    if not starts:
        return None
    effects = [first_effect(f, actions, workload.setup.operator) for f in spec.plan]
    if any(e is None for e in effects):
        return None
    first = min(e for e in effects if e is not None)
    at = math.floor(first / ARM_GRID) * ARM_GRID
    while at >= first:
        at -= ARM_GRID
    return round(at, 6) if at > min(starts) else None


def arm_times(workload: Workload, actions: Sequence[Obj], specs: Sequence[RunSpec]
              ) -> list[RunSpec]:
    """``specs``, each with its `arm_time`."""
    return [attrs.evolve(s, arm_at=arm_time(s, workload, actions)) for s in specs]


def candidates(workload: Workload, actions: Sequence[Obj], seed: int, count: int,
               knobs: dict[str, Any] | None = None) -> list[RunSpec]:
    """``count`` run specs: the systematic single-fault plans (on ``knobs``) alternating with
    seeded random combinations on random knobs; only combinations once the systematic ones are
    used up. At the default knobs, a systematic plan the reference run shows would do nothing
    alone (`idle_alone`) is not run alone; it stays in the combinations' pool."""
    knobs = dict(knobs or {})
    pool = systematic(workload, actions)
    rng = random.Random(f"explore:{workload.name}:{seed}:{sorted(knobs.items())!r}")
    specs: list[RunSpec] = []
    single = iter([p for p in pool if knobs or idle_alone(p, actions) is None])
    while len(specs) < count and pool:
        # alternate: the next systematic single fault, then a random combination (single
        # faults rarely break recovery alone; combinations on other knobs do)
        plan = next(single, None)
        if plan is not None:
            specs.append(RunSpec(knobs, plan))
        if len(specs) < count:
            specs.append(RunSpec(random_knobs(workload, rng),
                                 random_combination(workload, actions, pool, rng)))
    return arm_times(workload, actions, specs)
