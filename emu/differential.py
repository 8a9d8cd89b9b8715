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
    elif isinstance(real, str) and not isinstance(port, str):
        differs.append(real)
    return {"scenario": name, "port": _outcome(port), "real": _outcome(real),
            "differs": "; ".join(differs)}


def _run(name: str, seed: int, options: dict[str, Any]) -> object:
    try:
        return scenarios.run_scenario(name, seed, **options)
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
