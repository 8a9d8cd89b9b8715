"""``emu differential``: each scenario run with the port and with a real KubeRay operator binary
(`emu.http.real_replicas.real_operator_options`), and where their expectations differ.

A row gives each run's outcome (``ok 5/5``, ``FAIL 1/4``, or the error that stopped the run)
and every expectation whose verdict differs, with what the real operator's run saw. A real run
is paced by the wall clock and not deterministic (docs/real-operator.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from . import scenarios


def _outcome(result: object) -> str:
    if isinstance(result, str):
        return result
    exps = getattr(result, "expectations", ())
    held = sum(1 for e in exps if e.ok)
    return f"{'ok' if getattr(result, 'ok', False) else 'FAIL'} {held}/{len(exps)}"


def differential_row(name: str, port: object, real: object) -> dict[str, str]:
    """One row: each run's outcome and every expectation whose verdict differs (``claim:
    holds|fails (detail)``, or ``claim: not reached`` when the real run stopped before it)."""
    differs: list[str] = []
    if not isinstance(port, str) and not isinstance(real, str):
        verdicts = {e.claim: e.ok for e in getattr(port, "expectations", ())}
        for exp in getattr(real, "expectations", ()):
            if verdicts.get(exp.claim) != exp.ok:
                mark = "holds" if exp.ok else "fails"
                differs.append(f"{exp.claim}: {mark} ({exp.detail})" if exp.detail
                               else f"{exp.claim}: {mark}")
        seen = {e.claim for e in getattr(real, "expectations", ())}
        differs += [f"{c}: not reached" for c in verdicts if c not in seen]
    elif isinstance(real, str) and not isinstance(port, str) and not real.startswith("n/a"):
        differs.append(real)
    return {"scenario": name, "port": _outcome(port), "real": _outcome(real),
            "differs": "; ".join(differs)}


def _run(name: str, seed: int, options: dict[str, Any]) -> object:
    from .http.real_operator import NeedsNewerKubeRay

    try:
        return scenarios.run_scenario(name, seed, **options)
    except NeedsNewerKubeRay as exc:  # a verdict on the binary's release, not an error
        return f"n/a: {exc}"
    except Exception as exc:  # the table says what stopped the run
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        return f"error: {type(exc).__name__}: {first[:200]}"


def differential(names: Sequence[str], binary: str | os.PathLike[str], *, seed: int = 0,
                 limit: float = 900.0) -> list[dict[str, str]]:
    """Run each scenario of ``names`` with the port, then with ``binary`` (stopped after
    ``limit`` seconds); one `differential_row` each, a progress line each on stderr."""
    from .http.real_replicas import real_operator_options

    rows = []
    for name in names:
        sc = scenarios.get(name)
        port = _run(name, seed, {})
        real = _run(name, seed, {**real_operator_options(binary, sc.options),
                                 "max_virtual_time": limit})
        row = differential_row(name, port, real)
        rows.append(row)
        print(f"emu differential: {name}: port {row['port']}, real {row['real']}",
              file=sys.stderr, flush=True)
    return rows


# ---------------------------------------------------------------------------------------------
# docs/findings.md's findings replayed with the real operator
# ---------------------------------------------------------------------------------------------


def load_finding(path: str | os.PathLike[str]) -> Any:
    """A docs/findings replay file as a module (``WORKLOAD``, ``KNOBS``, ``PLAN``,
    ``INVARIANT`` and its test's seed), or a `ValueError` naming what the file lacks."""
    import importlib.util
    from pathlib import Path

    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"finding_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [n for n in ("WORKLOAD", "KNOBS", "PLAN", "INVARIANT") if not hasattr(module, n)]
    if missing:
        raise ValueError(f"{path}: not a findings replay file (no {', '.join(missing)})")
    return module


def _finding_seed(module: Any) -> int:
    for value in vars(module).values():
        for mark in getattr(value, "pytestmark", ()):
            if mark.name == "emu" and "seed" in mark.kwargs:
                return int(mark.kwargs["seed"])
    return 0


def _snapshot(sim: Any) -> list[str]:
    """What the RayJobs, RayClusters and head Pods look like now, one phrase each."""
    out = []
    for job in sim.api.list("RayJob", "default")["items"]:
        st = job.get("status") or {}
        out.append(f"RayJob {st.get('jobDeploymentStatus') or '-'}"
                   f"{'/' + st['reason'] if st.get('reason') else ''} "
                   f"jobStatus {st.get('jobStatus') or '-'}")
    heads = [p for p in sim.api.list("Pod", "default")["items"]
             if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "head"
             and not p["metadata"].get("deletionTimestamp")
             and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    out.append(f"{len(heads)} live head Pod{'s' if len(heads) != 1 else ''}")
    return out


def replay_finding_once(path: str | os.PathLike[str], binary: str | os.PathLike[str], *,
                        limit: float = 900.0, shift: float = 0.0) -> dict[str, Any]:
    """Replay one docs/findings file's plan once with the real ``binary`` (paced, its plan's
    times counted from the run's start): ``outcome`` (``ran``, or ``error`` with the ``error``
    that stopped it), the ``invariants`` the run broke and each violation (``violations``,
    times from the run's start; `known_in_run` classifies them), the first message of the
    file's own invariant, the faults performed and the RayJob/head-Pod states the run went
    through (``states``, ``t=... phrase``). ``shift`` moves every fault of the plan that many
    seconds later (the binary takes a few seconds longer than the port to start and lead, so
    the workload is applied later: a narrow window can be aimed at again)."""
    import attrs

    import emu

    from .explore.export import replay
    from .explore.runner import world_options
    from .http.real_replicas import real_operator_options

    module = load_finding(path)
    seen: list[str] = []
    box: dict[str, Any] = {}

    async def main(sim: Any) -> list[dict[str, Any]]:
        start = sim.loop.start
        box["start"] = start

        async def watch() -> None:
            last: list[str] = []
            while True:
                now = _snapshot(sim)
                if now != last:
                    seen.append(f"t={sim.now - start:.1f} {', '.join(now)}")
                    last = now
                await sim.sleep(0.5)

        watcher = sim.loop.create_task(watch())
        try:
            plan = [attrs.evolve(f, at=f.at + shift) for f in module.PLAN]
            found = await replay(sim, module.WORKLOAD, module.KNOBS, plan)
        finally:
            watcher.cancel()
        box["faults"] = [f"{type(f).__name__} t={f.at - start:.1f}"
                         for f in sim.faults.performed()]
        return found

    options = {**real_operator_options(binary, world_options(module.WORKLOAD)),
               "max_virtual_time": limit}
    row: dict[str, Any] = {"file": os.path.basename(str(path)), "invariant": module.INVARIANT,
                           "shift": shift}
    try:
        found = emu.run(main, seed=_finding_seed(module), **options)
    except Exception as exc:  # the row says what stopped the run
        text = str(exc).strip()
        notes = " ".join(getattr(exc, "__notes__", ()))
        row.update(outcome="error", error=f"{type(exc).__name__}: {' '.join(text.split())[:300]}",
                   notes=notes[:600],
                   states=seen[-12:])
        return row
    own = [v for v in found if v["invariant"] == module.INVARIANT]
    start = box.get("start", 0.0)
    row.update(outcome="ran",
               invariants=sorted({str(v["invariant"]) for v in found}),
               message=(f"t={own[0]['at'] - start:.1f} {own[0]['message']}" if own else ""),
               faults=box.get("faults", []), states=seen,
               violations=[f"{v['invariant']} t={v['at'] - start:.1f} {v['message'][:400]}"
                           for v in found])
    return row


def known_in_run(module: Any, row: dict[str, Any]) -> list[str]:
    """The known findings (``F1``..., or ``new``) the violations of a replay's ``row`` are
    classified as (`emu.explore.known.classify`, from the plan, the knobs and the reported
    status), in order of first report, without repeats."""
    from .explore.known import classify

    out: list[str] = []
    found: list[dict[str, Any]] = []
    for text in row.get("violations") or ():
        invariant, _, rest = str(text).partition(" ")
        message = rest.split(" ", 1)[1] if rest.startswith("t=") and " " in rest else rest
        found.append({"invariant": invariant, "message": message, "at": 0.0, "objects": []})
    for v in found:
        verdict = classify(module.WORKLOAD, module.KNOBS, module.PLAN, str(v["invariant"]), v,
                           found)
        if verdict.known not in out:
            out.append(verdict.known)
    return out


def finding_verdict(rows: Sequence[dict[str, Any]], version: str, known_id: str) -> str:
    """One verdict on finding ``known_id`` from its runs (each row with ``known``: what its
    violations were classified as): ``reproduced on KubeRay VERSION (k of N runs)``, ``not
    reproduced on VERSION (N runs)`` with what the runs showed instead, or ``cannot be replayed
    on the binary: ERROR`` when every run stopped with an error."""
    if not rows:
        raise ValueError("no runs to judge")
    n = len(rows)
    errors = [r for r in rows if r["outcome"] == "error"]
    if len(errors) == n:
        return f"cannot be replayed on the binary: {errors[0]['error']}"
    judged = [r for r in rows if r["outcome"] != "error"]
    k = sum(1 for r in judged if known_id in r.get("known", ()))
    extra = f", {len(errors)} more stopped with an error" if errors else ""
    others = sorted({i for r in judged for i in r.get("known", ()) if i != known_id})
    instead = f"; showed {', '.join(others)}" if others else ""
    if k:
        return f"reproduced on KubeRay {version} ({k} of {len(judged)} runs{extra}){instead}"
    if not others:
        instead = "; no invariant broke"
    return f"not reproduced on {version} ({len(judged)} runs{extra}){instead}"
