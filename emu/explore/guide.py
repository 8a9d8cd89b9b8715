"""Search guided by novelty: what a run exercised (`Signature`), and a scheduler (`Guided`) that
runs next the mutations of the runs that reached something no earlier run reached, as
coverage-guided fuzzers do (AFL's hit-count buckets and corpus; Sieve's plans as the seeds).

A run's signature is a set of features, each a string with a hit-count bucket (1, 2, 3, 4-7,
8-15, ...):

- ``e:<process>:<event>`` — every trace event but writes, by the emitting process (names with
  generated parts removed, so two replicas or two incarnations are one process): reconciles,
  leader elections, Ray's GCS and raylet events, Pod and container lifecycle, faults;
- ``w:<verb>:<kind>:<caller>`` — every API write, by who made it;
- ``s:<kind>[:<node type>]:<before>><after>`` — each state transition of the workload's objects
  (their ``state``/``jobDeploymentStatus``/``jobStatus``/``serviceStatus``) and of Ray Pods
  (phase, deleting), and each Kubernetes Event's reason: the ported reconcilers' branches show
  in what they write, without tracing their lines (``sys.monitoring`` is Python 3.12+, and a
  ``sys.settrace`` line tracer would cost more than the run);
- ``v:<invariant>`` — each invariant the run broke.

Computing it reads the world only (a trace subscriber and API reads), so it changes nothing in
the run: the digest is the same with or without it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..faults import FaultPlan
from ..invariants.view import WorldView
from .faults import AtCall

if TYPE_CHECKING:
    from ..simulation import Simulation
    from .runner import RunResult, RunSpec
    from .workload import Workload

Obj = dict[str, Any]

#: A generated part of a name: a ReplicaSet's or a Pod's suffix, a RayCluster's, a uuid's.
_GENERATED = re.compile(r"-[a-z0-9]{5,10}(?=$|[-/.])|_[0-9a-f]{6,}|-\d+(?=$|/)")
#: The namespaced kinds `Signature` reads from the invariants' `WorldView` rather than decoding
#: them from the API server again (the view keeps every object of these, decoded, as committed).
VIEW_KINDS = frozenset({"Pod", "Service", "Job", "PersistentVolumeClaim", "RayCluster", "RayJob",
                        "RayService"})
#: The status fields whose values are an object's state (as the reference run's log has them).
STATE_FIELDS = ("state", "jobDeploymentStatus", "jobStatus", "serviceStatus")


#: `_norm`'s answers: a run names the same few hundred processes and callers thousands of
#: times, and the regular expression was most of `Signature`'s cost. Cleared at `_NORMS_MAX`.
_NORMS: dict[str, str] = {}
_NORMS_MAX = 8192


def _norm(name: str) -> str:
    out = _NORMS.get(name)
    if out is None:
        if len(_NORMS) >= _NORMS_MAX:
            _NORMS.clear()
        out = _NORMS[name] = _GENERATED.sub("", name)
    return out


def bucket(count: int) -> int:
    """AFL's hit-count buckets: 1, 2, 3, then powers of two (4 for 4-7, 8 for 8-15, ...)."""
    if count <= 3:
        return count
    return 1 << (count.bit_length() - 1)


class Signature:
    """The features of one run, gathered while it plays (see the module docstring)."""

    def __init__(self, sim: Simulation, workload: Workload) -> None:
        self.sim = sim
        self.kinds = {str(m.get("kind")) for m in workload.manifests} | {"Pod", "Event"}
        self.counts: dict[str, int] = {}
        self._states: dict[tuple[str, str], str] = {}
        self._node_types: dict[str, str] = {}
        self._view = WorldView.of(sim)
        sim.trace.subscribe(self._on_event)

    def _bump(self, feature: str) -> None:
        self.counts[feature] = self.counts.get(feature, 0) + 1

    def _on_event(self, ev: Any) -> None:
        if ev.event != "write":
            self._bump(f"e:{_norm(str(ev.process))}:{ev.event}")
            return
        fields = ev.fields
        kind = str(fields.get("kind"))
        self._bump(f"w:{fields.get('verb')}:{kind}:{_norm(str(fields.get('caller')))}")
        if kind in self.kinds:
            self._transition(kind, str(fields.get("name")), str(fields.get("ns") or "default"))

    def _transition(self, kind: str, name: str, namespace: str) -> None:
        obj: Obj | None
        if kind in VIEW_KINDS:
            # the invariants' view holds the API server's object, decoded at its commit (the
            # write event comes right after it): read, never changed, so no copy is needed
            obj = self._view.get(kind, namespace, name)
        else:
            try:
                obj = self.sim.api.get(kind, name, namespace)
            except Exception:  # gone
                obj = None
        label = kind
        if kind == "Pod":
            labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
            node_type = labels.get("ray.io/node-type") or self._node_types.get(name)
            if node_type not in ("head", "worker"):
                return
            self._node_types[name] = str(node_type)
            label = f"Pod:{node_type}"
            state = "gone" if obj is None else "{}{}".format(
                (obj.get("status") or {}).get("phase"),
                "/deleting" if (obj.get("metadata") or {}).get("deletionTimestamp") else "")
        elif kind == "Event":
            if obj is not None:
                self._bump(f"s:Event:{obj.get('reason')}")
            return
        else:
            status = (obj or {}).get("status") or {}
            state = "gone" if obj is None else ",".join(
                f"{k}={status.get(k)}" for k in STATE_FIELDS if k in status)
        before = self._states.get((kind, name), "none")
        if before != state:
            self._states[(kind, name)] = state
            self._bump(f"s:{label}:{before}>{state}")

    def features(self, violations: Iterable[Obj] = ()) -> tuple[str, ...]:
        out = {f"{k}#{bucket(v)}" for k, v in self.counts.items()}
        out |= {f"v:{v['invariant']}" for v in violations}
        return tuple(sorted(out))


# ---------------------------------------------------------------------------------------------
# The scheduler
# ---------------------------------------------------------------------------------------------

#: Runs per round: the scheduler decides a round's plans from the results of the rounds before,
#: so a round's size (not ``-j`` nor the batch size) fixes what a budget of runs plays.
ROUND = 24
#: The share of a round given to mutations once some run reached something new (the rest
#: continues the uniform order, so every family is still tried).
MUTATE_SHARE = 0.75
#: Faults a mutated plan may hold at most (as the random combinations).
MAX_FAULTS = 3


@attrs.define
class _Entry:
    spec: RunSpec
    new: int
    picked: int = 0


class Guided:
    """Plans in rounds of `ROUND`: the first round, and a quarter of every later one, from the
    uniform order (``seeds``); the rest mutations of the runs in the corpus — the runs that
    reached a feature no earlier run had — picked with weight (features it was first to
    reach) / (times picked + 1), newest first among equals. Deterministic for a seed: each
    round's choices depend only on the results of the rounds before, in plan order."""

    def __init__(self, workload: Workload, actions: Sequence[Obj], seeds: Sequence[RunSpec],
                 seed: int) -> None:
        from . import plans

        self.workload = workload
        self.actions = list(actions)
        self.seeds = list(seeds)
        self.next_seed = 0
        self.seed = seed
        self.round = 0
        self.pool = plans.systematic(workload, actions) or [s.plan for s in seeds if s.plan]
        self.seen: set[str] = set()
        self.corpus: list[_Entry] = []
        self.keys: set[str] = set()

    def next(self, count: int) -> list[RunSpec]:
        """The next round's specs (at most ``count``; fewer only when nothing new is left)."""
        from . import plans

        rng = random.Random(f"guided:{self.workload.name}:{self.seed}:{self.round}")
        self.round += 1
        out: list[RunSpec] = []
        mutations = int(count * MUTATE_SHARE) if self.corpus else 0
        tries = 0
        while len(out) < mutations and tries < mutations * 20:
            tries += 1
            spec = plans.arm_times(self.workload, self.actions,
                                   [self._mutate(self._parent(rng), rng)])[0]
            if spec.plan.faults and self._fresh(spec):
                out.append(spec)
        while len(out) < count and self.next_seed < len(self.seeds):
            spec = self.seeds[self.next_seed]
            self.next_seed += 1
            if self._fresh(spec):
                out.append(spec)
        while len(out) < count and self.corpus and tries < count * 40:
            tries += 1  # the uniform order is used up: mutations only
            spec = plans.arm_times(self.workload, self.actions,
                                   [self._mutate(self._parent(rng), rng)])[0]
            if spec.plan.faults and self._fresh(spec):
                out.append(spec)
        return out

    def _fresh(self, spec: RunSpec) -> bool:
        key = spec.key()
        if key in self.keys:
            return False
        self.keys.add(key)
        return True

    def observe(self, results: Sequence[RunResult]) -> None:
        """Take a round's results (in plan order): a run with a feature never seen joins the
        corpus."""
        for r in results:
            new = set(r.signature) - self.seen
            if new and not r.error:
                self.seen |= new
                self.corpus.append(_Entry(r.spec, len(new)))

    def _parent(self, rng: random.Random) -> RunSpec:
        weights = [e.new / (e.picked + 1) * (1.0 + i / len(self.corpus))
                   for i, e in enumerate(self.corpus)]
        entry = rng.choices(self.corpus, weights=weights)[0]
        entry.picked += 1
        return entry.spec

    def _mutate(self, spec: RunSpec, rng: random.Random) -> RunSpec:
        """One or two of: add a fault of the pool, drop one, replace one, move one in time (an
        `AtCall` to a neighbouring call), halve or double a duration, move a knob."""
        from . import plans

        end = max([float(a["t"]) for a in self.actions] or [60.0])
        faults = list(spec.plan.faults)
        knobs = spec.knob_map
        for _ in range(rng.choice((1, 1, 2))):
            op = rng.randrange(6)
            if op == 0 and len(faults) < MAX_FAULTS:
                faults.extend(self.pool[rng.randrange(len(self.pool))].faults[
                    :MAX_FAULTS - len(faults)])
            elif op == 1 and len(faults) > 1:
                faults.pop(rng.randrange(len(faults)))
            elif op == 2 and faults:
                new = list(self.pool[rng.randrange(len(self.pool))].faults)
                faults[rng.randrange(len(faults))] = new[0]
            elif op == 3 and faults:
                i = rng.randrange(len(faults))
                f = faults[i]
                if isinstance(f, AtCall):
                    faults[i] = attrs.evolve(f, n=max(1, f.n + rng.choice((-1, 1, 2))))
                else:
                    at = f.at + rng.uniform(-10.0, 10.0)
                    faults[i] = attrs.evolve(f, at=round(min(max(0.0, at), end), 3))
            elif op == 4 and faults:
                i = rng.randrange(len(faults))
                f = faults[i]
                duration = getattr(f, "duration", None)
                if isinstance(duration, (int, float)) and duration > 0:
                    longer: Any = attrs.evolve
                    faults[i] = longer(f, duration=round(duration * rng.choice((0.5, 2.0)), 3))
            elif op == 5 and self.workload.knobs:
                knobs = plans.random_knobs(self.workload, rng) if rng.random() < 0.5 else {}
        faults.sort(key=lambda f: f.at)
        return type(spec)(knobs, FaultPlan(faults))
