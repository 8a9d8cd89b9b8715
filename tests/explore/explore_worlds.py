"""Small workloads for the explorer's tests (imported by name: pytest puts this directory on
``sys.path``).

`unreachable` is a workload whose goal can never be reached: every run is a finding of the
runner's own ``workload-goal`` check, so the tests of determinism, the store and the command
line have findings to compare without depending on a KubeRay bug (the reference run fails too,
so it is one finding with an empty plan that explains every other run). `reachable` with the
`Untouched` invariant fails exactly the runs whose plan fired a fault, so the tests of
shrinking and deduplication get many failing plan shapes. `one_replica_raycluster` is
the built-in RayCluster with one operator replica, so the first operator in the reference run is
the leader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from emu.explore import plans
from emu.explore.runner import ForkServer, RunSpec
from emu.explore.workload import Goal, Knob, Setup, Workload, builtin
from emu.invariants import BaseMonitor, Invariant

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "settings", "namespace": "default"}, "data": {"k": "1"}}


def no_controller(sim: object) -> None:
    """No controller at all (``Setup.install``): the cheapest world, for tests of the search."""


BARE = Setup(nodes=1, install="explore_worlds:no_controller", lease="")


def unreachable() -> Workload:
    """A ConfigMap whose ``data.k`` is expected to become "2": it never does."""
    return Workload("unreachable", [CONFIGMAP],
                    [Knob("value", "ConfigMap", "data.k", ("1", "3"))], setup=BARE,
                    goal=Goal("ConfigMap", "data.k", ("2",), horizon=5.0, delete=False))


def reachable() -> Workload:
    """`unreachable` with a goal every run reaches at once (``data.k`` is "1" or "3")."""
    return attrs.evolve(unreachable(), name="reachable",
                        goal=Goal("ConfigMap", "data.k", ("1", "3"), horizon=5.0, delete=False))


class _UntouchedMonitor(BaseMonitor):
    def __init__(self, sim: Any) -> None:
        super().__init__(Untouched.name)
        sim.trace.subscribe(self._on_event)

    def _on_event(self, ev: Any) -> None:
        if ev.event == "fault" and not self._found:
            self.report(f"a fault fired: {ev.fields.get('fault')}", ev.t)


@attrs.frozen
class Untouched(Invariant):
    """Broken by the first fault of a run's plan that fires (whether or not it finds
    anything to act on): a run fails exactly when its plan has a fault whose time or call
    came (the reference run has none)."""

    name: ClassVar[str] = "untouched"

    def attach(self, sim: Any) -> _UntouchedMonitor:
        return _UntouchedMonitor(sim)


def one_replica_raycluster() -> Workload:
    return attrs.evolve(builtin("raycluster"), setup=Setup(operator_replicas=1, redis=True))


UNREACHABLE_YAML = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {k: "1"}
---
kind: KnobSpace
knobs:
  - {name: value, kind: ConfigMap, path: data.k, values: ["1", "3"]}
goal: {kind: ConfigMap, path: data.k, states: ["2"], horizon: 5, delete: false}
setup: {nodes: 1, install: "explore_worlds:no_controller", lease: ""}
"""

FINE_YAML = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {k: "1"}
---
kind: KnobSpace
goal: {kind: ConfigMap, path: data.k, states: ["1"], horizon: 5, delete: false}
setup: {nodes: 1, install: "explore_worlds:no_controller", lease: ""}
"""


def budget_to_reach(workload: Workload, seed: int,
                    matches: Callable[[RunSpec, list[dict[str, Any]]], bool],
                    limit: int = 2000) -> int:
    """The smallest ``explore`` budget whose candidates (seed ``seed``) include a run spec
    ``matches(spec, reference_actions)`` accepts: tests name the plan they need by what it is,
    not by its index, so they survive a change to the plan generators' order or sizes."""
    [reference] = list(ForkServer(workload, seed, fork=False).run([RunSpec()], record=True))
    for i, spec in enumerate(plans.candidates(workload, reference.actions, seed, limit)):
        if matches(spec, reference.actions):
            return i + 1
    raise AssertionError(f"no candidate of {workload.name!r} (seed {seed}, {limit} runs) "
                         "matches")
