"""The Greeter as a workload for the explorer (docs/tutorial.md, "Find the bugs you did not
think of"): run ``python explore_greeter.py [naive]`` from this folder, or, as a plugin of the
command line (docs/explore.md, "Your own operator")::

    PYTHONPATH=. emu explore explore_greeter:naive --invariants explore_greeter:invariants
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

import attrs
from greeter import (
    KIND,
    Greeter,
    configmap_name,
    greeting,
    owned_by,
    register_greeting_kind,
    start_greeter,
)
from naive import NaiveGreeter

from emu.explore.search import explore
from emu.explore.workload import Goal, Knob, Setup, Workload
from emu.invariants import BaseMonitor, Invariant


def install_fixed(sim) -> None:
    register_greeting_kind(sim)
    start_greeter(sim, replicas=2, reconciler=Greeter)


def install_naive(sim) -> None:
    register_greeting_kind(sim)
    start_greeter(sim, replicas=2, reconciler=NaiveGreeter)


def workload(which: str = "fixed") -> Workload:
    return Workload(
        f"greeter-{which}",
        [greeting("hello", "hi")],
        [Knob("message", "Greeting", "spec.message", ("hi", "good morning")),
         Knob("update", "Greeting", "spec.message", (None, "bye"), at=20.0)],
        setup=Setup(install=f"explore_greeter:install_{which}", operator="greeter-",
                    lease="greeter-leader", nodes=1),
        goal=Goal("Greeting", "status.phase", ("Ready",), horizon=120.0),
    )


def naive() -> Workload:
    """``emu explore explore_greeter:naive``: the Greeter with its planted recovery bug."""
    return workload("naive")


def fixed() -> Workload:
    """``emu explore explore_greeter:fixed``: the Greeter as it should be."""
    return workload("fixed")


@attrs.frozen
class NoFalseNameClash(Invariant):
    """A Greeting never ends ``Failed`` ("the name is taken") while the ConfigMap of that name
    is its own: the Greeter's promise, as a value the explorer checks in every run."""

    name: ClassVar[str] = "greeter-no-false-name-clash"
    rationale: ClassVar[str] = (
        "Failed means another client holds the ConfigMap's name; a ConfigMap owned by the "
        "Greeting itself (its own create whose response was lost) must be adopted")

    def attach(self, sim: Any) -> BaseMonitor:
        return _NameClashMonitor(self.name, sim)


class _NameClashMonitor(BaseMonitor):
    """Looks at every status write of a Greeting, when it is committed."""

    def __init__(self, name: str, sim: Any) -> None:
        super().__init__(name)
        self.sim = sim
        sim.trace.subscribe(self._on_event)

    def _on_event(self, ev: Any) -> None:
        if ev.event != "write" or ev.fields.get("kind") != KIND \
                or ev.fields.get("verb") != "update_status":
            return
        ns, name = ev.fields.get("ns") or "default", ev.fields["name"]
        items = self.sim.api.list(KIND, ns).get("items") or []
        g = next((i for i in items if i["metadata"]["name"] == name), None)
        if g is None or (g.get("status") or {}).get("phase") != "Failed":
            return
        cm_name = configmap_name(name)
        cms = [c for c in self.sim.api.list("ConfigMap", ns).get("items") or []
               if c["metadata"]["name"] == cm_name]
        if cms and owned_by(cms[0], g):
            self.report(f"Greeting {ns}/{name} is Failed although ConfigMap {cm_name} is its "
                        "own", ev.t, (f"{KIND}/{ns}/{name}", f"ConfigMap/{ns}/{cm_name}"))


def invariants() -> list[Invariant]:
    """``--invariants explore_greeter:invariants``: the Greeter's own checks (the explorer's
    goal check, ``workload-goal``, runs as well)."""
    return [NoFalseNameClash()]


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "fixed"
    # one folder per variant: a result store holds the runs of one workload only
    result = explore(workload(which), budget=40, out=f"greeter-{which}-findings")
    for f in result.findings:
        print(f"[{f.invariant}] {f.message}\n  plan: {f.plan!r}\n  test: {f.test_file}")
    print(f"{result.runs} runs, {len(result.findings)} finding(s)")
