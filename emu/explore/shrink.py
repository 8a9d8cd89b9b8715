"""Shrinking a failing run: fewest faults, fewest knobs changed, earliest fault times, smallest
replicas — by greedy delta debugging, each step kept only if the run still fails the same way
(the same invariant is violated).

The passes, repeated until none makes progress or the run budget is spent:

1. drop each fault (ddmin on a list of at most a few faults is one-at-a-time removal), the
   last one too: a run that still fails without any fault is a finding of its knobs alone;
2. reset each knob to its default;
3. move each clock-timed fault earlier (to 0, then to half its time) and shorten durations;
4. for an `AtCall`, try an earlier occurrence (``n`` smaller).

Each candidate run is a pure function of its spec, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from ..faults import FaultPlan
from .faults import AtCall
from .runner import RunResult, RunSpec
from .workload import Workload


def shape(spec: RunSpec) -> tuple[Any, ...]:
    """The plan's shape, for deduplicating findings: each fault's type (and, for an `AtCall`,
    its action and what it does), without times or counts."""
    out: list[tuple[Any, ...]] = []
    for f in spec.plan:
        if isinstance(f, AtCall):
            out.append(("AtCall", f.verb, f.kind, type(f.then).__name__))
        else:
            out.append((type(f).__name__, getattr(f, "how", None), getattr(f, "node_type", None),
                        getattr(f, "endpoint", None)))
    return tuple(sorted(out, key=repr))


def _candidates(workload: Workload, spec: RunSpec) -> Iterator[RunSpec]:
    faults = list(spec.plan)
    # 1. fewer faults (the last one too: knobs that break the invariant alone need no fault,
    # and a finding must not blame one that plays no part)
    for i in range(len(faults)):
        yield attrs.evolve(spec, plan=FaultPlan(faults[:i] + faults[i + 1:]))
    # 2. fewer knobs changed
    knobs = spec.knob_map
    for name in sorted(knobs):
        if workload.knob(name).default != knobs[name]:
            rest = {k: v for k, v in knobs.items() if k != name}
            yield attrs.evolve(spec, knobs=rest)
    # 2b. smaller values of integer knobs (replicas, limits)
    for name in sorted(knobs):
        value = knobs[name]
        if isinstance(value, int) and not isinstance(value, bool):
            smaller = [v for v in workload.knob(name).values
                       if isinstance(v, int) and not isinstance(v, bool) and v < value]
            for v in sorted(smaller):
                yield attrs.evolve(spec, knobs={**knobs, name: v})
    # 3. earlier, shorter
    for i, f in enumerate(faults):
        for alt in _simpler(f):
            yield attrs.evolve(spec, plan=FaultPlan(sorted(
                [*faults[:i], alt, *faults[i + 1:]], key=lambda x: x.at)))


def _rearmed(cand: RunSpec, spec: RunSpec) -> RunSpec:
    """``cand`` arming its plan when ``spec`` does (`RunSpec.arm_at`) while that still comes
    before the plan can act — the same knobs, every fault timed after it or an `AtCall` from
    the start (counting the same calls) — else at the start: a fault moved earlier must not
    wait for the arming."""
    at = cand.arm_at
    if at is None:
        return cand
    if cand.knobs == spec.knobs and all(
            f.at > at or (isinstance(f, AtCall) and f.at <= 0) for f in cand.plan):
        return cand
    return attrs.evolve(cand, arm_at=None)


def _simpler(f: Any) -> Iterator[Any]:
    if f.at > 0:
        yield attrs.evolve(f, at=0.0)
        if f.at > 1:
            yield attrs.evolve(f, at=round(f.at / 2, 3))
    duration = getattr(f, "duration", None)
    if isinstance(duration, (int, float)) and duration > 1:
        yield attrs.evolve(f, duration=round(duration / 2, 3))
    if isinstance(f, AtCall) and f.n > 1:
        yield attrs.evolve(f, n=1)
        yield attrs.evolve(f, n=f.n - 1)


def shrink(workload: Workload, result: RunResult, invariant: str,
           run: Callable[[list[RunSpec]], list[RunResult]], *, budget: int = 60
           ) -> tuple[RunResult, int]:
    """The smallest run found that still violates ``invariant``, and how many runs it took.
    ``run`` executes a batch of specs (a fork-server batch, so a pass costs one prepare)."""
    best = result
    spent = 0
    progress = True
    while progress and spent < budget:
        progress = False
        batch = []
        seen = set()
        for cand in _candidates(workload, best.spec):
            cand = _rearmed(cand, best.spec)
            key = cand.key()
            if key not in seen:
                seen.add(key)
                batch.append(cand)
        batch = batch[:max(0, budget - spent)]
        if not batch:
            break
        results = run(batch)
        spent += len(results)
        for r in results:  # the first (simplest kind of) reduction that still fails wins
            if any(v["invariant"] == invariant for v in r.violations):
                best = r
                progress = True
                break
    return best, spent
