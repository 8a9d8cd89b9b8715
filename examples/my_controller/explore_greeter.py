"""The Greeter as a workload for the explorer (docs/tutorial.md, "Find the bugs you did not
think of"): run ``python explore_greeter.py [naive]`` from this folder."""

from __future__ import annotations

import sys

from greeter import Greeter, greeting, register_greeting_kind, start_greeter
from naive import NaiveGreeter

from emu.explore.search import explore
from emu.explore.workload import Goal, Knob, Setup, Workload


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


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "fixed"
    # one folder per variant: a result store holds the runs of one workload only
    result = explore(workload(which), budget=40, out=f"greeter-{which}-findings")
    for f in result.findings:
        print(f"[{f.invariant}] {f.message}\n  plan: {f.plan!r}\n  test: {f.test_file}")
    print(f"{result.runs} runs, {len(result.findings)} finding(s)")
