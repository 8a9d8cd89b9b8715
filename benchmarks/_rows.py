"""Machine-readable benchmark results: every script's ``--json`` prints a list of these rows.

A row is one measured figure: ``benchmark``, ``measure``, ``value``, ``unit``, and when there is
one, the same-run ``baseline`` (in the same unit), ``ratio`` (value / baseline) and the issue's
``target`` as text, and ``headline`` when the row is one of the benchmark's key figures (the
ones ``emu bench --markdown`` shows, the README's table). With ``--json`` the human-readable
tables go to stderr and stdout carries only the JSON list, which ``emu bench`` reads. Nothing
here asserts.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any


def row(benchmark: str, measure: str, value: float, unit: str, *,
        baseline: float | None = None, target: str = "", headline: bool = False
        ) -> dict[str, Any]:
    ratio = value / baseline if baseline else None
    return {"benchmark": benchmark, "measure": measure, "value": value, "unit": unit,
            "baseline": baseline, "ratio": ratio, "target": target, "headline": headline}


@contextlib.contextmanager
def output(as_json: bool, rows: list[dict[str, Any]]) -> Iterator[None]:
    """Run the body with its prints on stdout, or on stderr when ``as_json`` (then print
    ``rows`` as JSON on stdout once the body is done)."""
    if not as_json:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield
    print(json.dumps(rows))
