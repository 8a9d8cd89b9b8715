"""Named, runnable scenarios: a world, a story, and the expectations that check it.

A scenario is an ``async def`` taking a `Simulation` and a `Report`; it drives the world (applies
manifests, injects faults, waits) and records what it expects with `Report.expect`. Scenarios are
registered by name with `scenario` and run by ``emu run NAME --seed N``, by the test suite under
many seeds, and by ``emu explore``.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from ..faults import FaultPlan
from ..simulation import Simulation, run

ScenarioFn = Callable[[Simulation, "Report"], Awaitable[None]]


@attrs.frozen
class Expectation:
    """One claim a scenario checks, whether it held, and what was seen."""

    claim: str
    ok: bool
    detail: str = ""
    t: float = 0.0


class Report:
    """What a scenario run found: its expectations, in the order they were checked."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim
        self.expectations: list[Expectation] = []
        self.facts: dict[str, Any] = {}

    def expect(self, claim: str, ok: bool, detail: str = "") -> bool:
        """Record whether ``claim`` held (with what was seen); also a trace event."""
        exp = Expectation(claim, bool(ok), detail, round(self._sim.now, 6))
        self.expectations.append(exp)
        self._sim.trace.emit("scenario", "expect", claim=claim, ok=exp.ok, detail=detail)
        return exp.ok

    def fact(self, name: str, value: Any) -> None:
        """Record a measured value (shown with the result, part of ``--json``)."""
        self.facts[name] = value
        self._sim.trace.emit("scenario", "fact", name=name, value=value)

    @property
    def ok(self) -> bool:
        return bool(self.expectations) and all(e.ok for e in self.expectations)


@attrs.frozen
class Scenario:
    name: str
    fn: ScenarioFn
    summary: str
    options: dict[str, Any] = attrs.field(factory=dict)

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()


@attrs.frozen
class ScenarioResult:
    """A finished run: report, digest, virtual duration and wall time."""

    scenario: str
    seed: int
    ok: bool
    expectations: tuple[Expectation, ...]
    facts: dict[str, Any]
    digest: str
    virtual_seconds: float
    wall_seconds: float
    sim: Simulation = attrs.field(repr=False, eq=False)

    def replay(self, faults: FaultPlan | None = None) -> str:
        plan = f", faults={faults!r}" if faults else ""
        return f"emu run {self.scenario} --seed {self.seed}" + ("" if not plan else f"  # {plan}")


_REGISTRY: dict[str, Scenario] = {}
_MODULES = ("admission", "apiserver_churn", "cleanup", "head_loss", "operator", "outage",
            "rayservice", "rayservice_incremental", "workers")
_loaded = False


def scenario(name: str, summary: str, **options: Any) -> Callable[[ScenarioFn], ScenarioFn]:
    """Register a scenario under ``name`` (``options`` go to the `Simulation`)."""

    def register(fn: ScenarioFn) -> ScenarioFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"scenario {name!r} is registered twice")
        _REGISTRY[name] = Scenario(name, fn, summary, options)
        return fn

    return register


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in _MODULES:
            importlib.import_module(f"{__name__}.{module}")
        _loaded = True


def all_scenarios() -> list[Scenario]:
    """Every registered scenario, by name."""
    _load()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get(name: str) -> Scenario:
    """The scenario called ``name``; a `KeyError` listing the known names otherwise."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"no scenario named {name!r}; known scenarios: {known}") from None


def run_scenario(name: str, seed: int = 0, *, faults: FaultPlan | None = None,
                 **options: Any) -> ScenarioResult:
    """Run a registered scenario once; its result (never raises for failed expectations).
    ``options`` go to `emu.run` over the scenario's own (for a real operator binary:
    ``emu.http.real_replicas.real_operator_options``)."""
    sc = get(name)
    options = {**sc.options, **options}
    start = time.perf_counter()
    box: dict[str, Any] = {}

    async def main(sim: Simulation) -> None:
        report = Report(sim)
        box["report"], box["sim"] = report, sim
        began = sim.now  # 0, or the real instant of a paced run
        await sc.fn(sim, report)
        box["virtual"] = sim.now - began

    run(main, seed=seed, faults=faults, **options)
    report: Report = box["report"]
    sim: Simulation = box["sim"]
    return ScenarioResult(
        scenario=name, seed=seed, ok=report.ok, expectations=tuple(report.expectations),
        facts=dict(report.facts), digest=sim.trace.digest(), virtual_seconds=box["virtual"],
        wall_seconds=time.perf_counter() - start, sim=sim,
    )
