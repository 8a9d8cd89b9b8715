"""Exporting a finding: a standalone pytest file that fails the same way, and its HTML timeline.

The file holds everything the run needs as code — the workload (manifests, knobs, setup, goal),
the knobs set, the fault plan, the seed — and runs the same two halves the explorer ran
(`replay`: `runner.prepare` then `runner.play`) inside the ``sim`` fixture, so the run is the same
run, digest included. It asserts that the violated invariant is not violated: it fails while the
port keeps the behaviour and passes once the behaviour is gone.
"""

from __future__ import annotations

import pprint
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kernel.trace import TraceEvent, render_timeline
from .runner import RunSpec, play, prepare, world_options
from .workload import Workload

if TYPE_CHECKING:
    from ..simulation import Simulation
    from .known import Verdict


async def replay(sim: Simulation, workload: Workload, knobs: dict[str, Any], plan: Any,
                 invariants: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """Run ``workload`` with ``knobs`` under ``plan`` in ``sim`` (a fresh world from the ``sim``
    fixture or `emu.run`, with `runner.world_options`) and return the violations, as the
    explorer found them. ``invariants`` are the ones the search checked (None:
    `emu.invariants.kuberay_invariants()`)."""
    found, _ = await replay_run(sim, workload, knobs, plan, invariants)
    return found


async def replay_run(sim: Simulation, workload: Workload, knobs: dict[str, Any], plan: Any,
                     invariants: Sequence[Any] | None = None
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`replay`, and the emulator's own consistency checks the run broke
    (`emu.explore.checks`), which `emu.explore.known.classify` needs."""
    await prepare(sim, workload)
    found, _, emulator = await play(sim, workload, RunSpec(knobs, plan), invariants)
    return found, emulator


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "finding"


def _module(obj: Any) -> str:
    """Where the exported file imports ``obj``'s type from: a type defined in the script that
    ran the search (``__main__``) is imported from that script's module name, so the test
    fails loudly at import where it cannot see the script, never runs without it."""
    import sys

    module = type(obj).__module__
    if module == "__main__":
        path = getattr(sys.modules.get("__main__"), "__file__", None)
        if path:
            return Path(path).stem
    return module


def _imports(spec: RunSpec, workload: Workload,
             invariants: Sequence[Any] | None = None) -> list[str]:
    types: dict[str, set[str]] = {}

    def add(obj: Any) -> None:
        types.setdefault(_module(obj), set()).add(type(obj).__name__)
        then = getattr(obj, "then", None)
        if then is not None:
            add(then)

    for f in spec.plan:
        add(f)
    for inv in invariants or ():
        add(inv)
    lines = [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(types.items())]
    return lines


def workload_code(workload: Workload) -> str:
    """The workload as Python code (``Workload(...)``)."""
    manifests = pprint.pformat(list(workload.manifests), indent=1, width=96, sort_dicts=False)
    knobs = ",\n    ".join(repr(k) for k in workload.knobs)
    return (f"Workload(\n    name={workload.name!r},\n    manifests={manifests},\n"
            f"    knobs=[\n    {knobs}],\n    setup={workload.setup!r},\n"
            f"    goal={workload.goal!r},\n    scenario={workload.scenario!r})")


def explain(broken: Sequence[dict[str, Any]], sim: Simulation, digest: str) -> str:
    """An exported test's failure message: each violation, then whether this replay is the
    explorer's run exactly (its trace digest, ``digest``) or the world has changed since."""
    lines = [f"t={v['at']:.3f}s {v['message']}" for v in broken]
    now = sim.trace.digest()
    if not digest:
        pass
    elif now == digest:
        lines.append(f"the explorer's run exactly (trace digest {now[:16]})")
    else:
        lines.append(f"trace digest {now[:16]}, not the explorer's {digest[:16]}: the same "
                     "invariant breaks, but the emulator or the port changed since the finding")
    return "\n".join(lines)


def verdict_text(verdict: Verdict | None) -> str:
    """What an exported test and its timeline say of the finding's known id, class and
    mitigation (`emu.explore.known.Verdict`); empty without one."""
    if verdict is None:
        return ""
    if verdict.known == "new":
        lines = [f"A new finding, class {verdict.klass}: {verdict.basis}."]
        if verdict.go:
            lines.append("Start reading at: " + "; ".join(verdict.go) + ".")
    else:
        lines = [f"Known finding {verdict.known}, class {verdict.klass}: {verdict.title}"
                 + (f" ({verdict.variant})" if verdict.variant else "") + ".",
                 "Go: " + "; ".join(verdict.go) + "."]
        if verdict.klass != "kuberay":
            lines.append(f"Class {verdict.klass}: {verdict.basis}.")
    if verdict.mitigation:
        lines.append(f"What to do: {verdict.mitigation}")
    return "\n".join(_wrap(line) for line in lines)


def pytest_source(workload: Workload, spec: RunSpec, seed: int, invariant: str, message: str,
                  replay_command: str = "", *, digest: str = "",
                  invariants: Sequence[Any] | None = None,
                  verdict: Verdict | None = None) -> str:
    """The text of the pytest file for a finding (``verdict``: its known id, class and
    mitigation, said in the docstring)."""
    name = _slug(f"{workload.name} {invariant}")
    said = verdict_text(verdict).replace("\\", "/").replace('"""', "'''")
    header = ("# Written by emu explore (emu.explore.export): the long lines are data.\n"
              "# ruff: noqa: E501, I001, RUF100\n"
              f'"""Found by the explorer: {invariant} on workload {workload.name!r}, seed {seed}.\n\n'
              f"{_wrap(message)}\n\n"
              + (f"{said}\n\n" if said else "")
              + "Fails while the port keeps the behaviour (KubeRay's, see docs/findings.md).\n")
    if replay_command:
        header += f"Found with: {replay_command}\n"
    header += '"""\n'
    lines = [header, "import pytest", ""]
    lines += ["from emu.explore.export import explain, replay",
              "from emu.explore.runner import world_options",
              "from emu.explore.workload import Goal, Knob, Setup, Workload"]
    lines += _imports(spec, workload, invariants)
    lines += ["", f"WORKLOAD = {workload_code(workload)}", "",
              f"KNOBS = {pprint.pformat(spec.knob_map, width=96)}", "",
              f"PLAN = {spec.plan!r}", "",
              f"INVARIANT = {invariant!r}", "",
              *([] if invariants is None else [
                  "# the invariants the search checked (not kuberay_invariants())",
                  f"INVARIANTS = {list(invariants)!r}", ""]),
              "# the trace digest of the explorer's run: a replay with another one is not the",
              "# same run (the emulator or the port changed since)",
              f"DIGEST = {digest!r}", "", "",
              f"@pytest.mark.emu(seed={seed}, **world_options(WORKLOAD))",
              f"async def test_{name}(sim):",
              "    found = await replay(sim, WORKLOAD, KNOBS, PLAN"
              + (")" if invariants is None else ", INVARIANTS)"),
              "    broken = [v for v in found if v['invariant'] == INVARIANT]",
              "    assert not broken, explain(broken, sim, DIGEST)", ""]
    return "\n".join(lines)


def _wrap(text: str, width: int = 96) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


#: Events worth showing in a finding's timeline excerpt.
EXCERPT_EVENTS = ("fault", "write", "leader_acquired", "leader_lost", "process_crashed",
                  "process_started", "response_lost", "call_timeout", "outage", "restore",
                  "partition", "heal", "node_failed", "knob_change", "workload_delete",
                  "job_submission_received", "gcs_started", "pod_deleted")


def excerpt(events: list[TraceEvent], *, around: float | None = None,
            limit: int = 40) -> str:
    """A readable slice of the run's timeline: faults, the operator's writes (not Leases or
    Events), leadership and process changes — ``limit`` lines, centred on ``around``."""
    def keep(e: TraceEvent) -> bool:
        if e.event not in EXCERPT_EVENTS:
            return False
        if e.event == "write":
            caller = str(e.fields.get("caller", ""))
            return "kuberay-operator" in caller and e.fields.get("kind") not in ("Lease", "Event")
        if e.event == "process_started":
            return "kuberay-operator" in e.process
        return True

    shown = [e for e in events if keep(e)]
    if around is not None and len(shown) > limit:
        idx = min(range(len(shown)), key=lambda i: abs(shown[i].t - around))
        lo = max(0, idx - limit * 2 // 3)
        shown = shown[lo:lo + limit]
    else:
        shown = shown[:limit]
    return render_timeline(shown, width=28)


def export_finding(directory: Path, workload: Workload, spec: RunSpec, seed: int,
                   invariant: str, message: str, at: float, *, replay_command: str = "",
                   invariants: Sequence[Any] | None = None,
                   verdict: Verdict | None = None) -> dict[str, str]:
    """Write ``test_<slug>.py`` and its ``.html`` timeline into ``directory``; returns their
    paths, the timeline excerpt and the run's digest. ``invariants``: the ones the search
    checked (None: `emu.invariants.kuberay_invariants()`), replayed and written into the
    test, so it checks what the search checked and replays the very same run."""
    import attrs

    from ..faults import FaultPlan, UnperformedFaults
    from ..simulation import run
    from ..timeline import render_html

    directory.mkdir(parents=True, exist_ok=True)
    base = f"test_{_slug(f'{workload.name} {invariant}')}_{abs(hash_spec(spec)) % 10**6:06d}"
    box: dict[str, Any] = {}

    async def main(sim: Simulation) -> None:
        box["sim"] = sim
        box["found"] = await replay(sim, workload, spec.knob_map, spec.plan, invariants)
        # taken where the explorer's runner and the exported test take it: the run's end,
        # before the world is torn down
        box["digest"] = sim.trace.digest()

    try:
        run(main, seed=seed, **world_options(workload))
    except UnperformedFaults as exc:
        # a fault of the plan that did not take effect in this run is marked optional, so the
        # exported test fails only for the invariant; the run is played again with that plan,
        # so the digest written is the exported test's
        missed = [attrs.evolve(f, at=0.0, optional=False) for f, _ in exc.items]
        spec = attrs.evolve(spec, plan=FaultPlan(
            attrs.evolve(f, optional=True) if attrs.evolve(f, at=0.0) in missed else f
            for f in spec.plan))
        try:
            run(main, seed=seed, **world_options(workload))
        except Exception as again:  # still write what was seen
            box["error"] = str(again)
    except Exception as exc:  # still write what was seen
        box["error"] = str(exc)
    sim = box["sim"]
    digest = str(box.get("digest") or sim.trace.digest())
    test_path = directory / f"{base}.py"
    test_path.write_text(pytest_source(workload, spec, seed, invariant, message, replay_command,
                                       digest=digest, invariants=invariants, verdict=verdict))
    html_path = directory / f"{base}.html"
    html_path.write_text(render_html(
        f"{workload.name}: {invariant} (seed {seed})", sim.trace.events,
        [{"claim": f"{invariant}: {message}", "ok": False,
          "detail": verdict_text(verdict).replace("\n", " ")}], {}, digest))
    return {"test_file": str(test_path), "html": str(html_path),
            "excerpt": excerpt(sim.trace.events, around=at), "digest": digest}


def hash_spec(spec: RunSpec) -> int:
    import hashlib

    return int(hashlib.sha256(spec.key().encode()).hexdigest()[:12], 16)
