"""Why a run failed, in words: what `Simulation.wait_for`'s `WaitTimeout` says, and the line that
replays a run.

A failure should explain itself without a second run: the object and the predicate that never
held, the object's conditions, what the controllers that own it last complained of (their
reconcile panics and errors, the object's Warning Events); and, when a line can do it, the exact
``emu.run(...)`` call that replays the run.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .apiserver.errors import ApiError
from .faults import FaultPlan
from .kernel.process import Panic

Obj = dict[str, Any]


def explain_wait(sim: Any, kind: str, name: str, namespace: str | None,
             predicate: Callable[[Obj], bool] | None, last: Obj | None,
             timeout: float) -> tuple[list[str], str | None, list[Panic], list[str]]:
    """A `WaitTimeout`'s lines (the object, the predicate's source, its last conditions and
    status, the panics and errors of the controllers of it and its owners, its Warning Events),
    with the predicate's source, those panics and the warnings."""
    where = f"{namespace}/{name}" if namespace else name
    source = predicate_source(predicate) if predicate is not None else None
    lines = [f"{kind} {where}: condition not met within {timeout:g}s "
             f"(virtual, now t={sim.now:.3f}s)"]
    if source:
        lines.append(f"  waiting for: {source}")
    if last is None:
        lines.append("  last seen: absent")
    else:
        meta = last.get("metadata") or {}
        status = last.get("status")
        conditions = (status or {}).get("conditions") if isinstance(status, dict) else None
        lines.append(f"  last seen: resourceVersion {meta.get('resourceVersion')}"
                     + (f", generation {meta['generation']}" if meta.get("generation") else "")
                     + (", deleting" if meta.get("deletionTimestamp") else ""))
        if conditions:
            lines.append("  conditions: " + "; ".join(_condition(c) for c in conditions))
        shown = {k: v for k, v in status.items() if k != "conditions"} \
            if isinstance(status, dict) else status
        lines.append(f"  status: {_short(shown)}")
    subjects = [f"{kind} {where}"]
    ns = namespace or ""
    for ref in ((last or {}).get("metadata") or {}).get("ownerReferences") or []:
        subjects.append(f"{ref.get('kind')} {ns + '/' if ns else ''}{ref.get('name')}")
    panics = [p for p in sim.panics if p.subject in subjects][-3:]
    for p in panics:
        lines.append(f"  panic: {p.summary()}")
    others = [p for p in sim.panics if p.subject not in subjects]
    if others:
        lines.append(f"  other panics in the run: {len(others)}, the last: "
                     f"{others[-1].summary()}")
    warnings = [f"t={n.t:.3f}s {n.source} on {n.subject}: {n.error}"
                for s in subjects for n in sim.processes.recent_errors.get(s, [])][-3:]
    warnings += _warning_events(sim, kind, name, namespace)
    for w in warnings:
        lines.append(f"  warning: {w}")
    return lines, source, panics, warnings


def _warning_events(sim: Any, kind: str, name: str, namespace: str | None) -> list[str]:
    """The last Kubernetes Warning Events about the object (what ``kubectl describe`` shows)."""
    try:
        events = sim.api.list("Event", namespace).get("items") or []
    except ApiError:
        return []
    mine = [e for e in events if e.get("type") == "Warning"
            and (e.get("involvedObject") or {}).get("kind") == kind
            and (e.get("involvedObject") or {}).get("name") == name]
    return [f"Event {e.get('reason')}: {e.get('message')}" for e in mine[-3:]]


def _condition(c: Any) -> str:
    if not isinstance(c, dict):
        return repr(c)
    text = f"{c.get('type')}={c.get('status')}"
    if c.get("reason"):
        text += f" ({c['reason']}"
        text += f": {c['message']})" if c.get("message") else ")"
    return text


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def predicate_source(fn: Callable[..., Any]) -> str:
    """The source of a predicate: a lambda's own text, or a function's name and location."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return name
    code = textwrap.dedent("".join(lines))
    if getattr(fn, "__name__", "") != "<lambda>":
        return f"{name} ({Path(inspect.getsourcefile(fn) or '?').name}:{start})"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # a lambda inside a longer expression: take the lines as they are, from "lambda"
        text = " ".join(line.strip() for line in lines)
        return text[text.find("lambda"):] if "lambda" in text else text
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
    segment = ast.get_source_segment(code, found[0]) if found else None
    return " ".join((segment or code).split())


def replay_line(main: Callable[..., Any], seed: int, plan: FaultPlan | None,
                options: dict[str, Any] | None = None) -> str | None:
    """The ``emu.run(...)`` call that replays a run, or None when no such line would work
    (`replay_obstacle` says why)."""
    if replay_obstacle(main, options) is not None:
        return None
    shown = "".join(f", {key}={value!r}" for key, value in sorted((options or {}).items()))
    faults = f", faults={plan!r}" if plan else ""
    return f"emu.run({main.__module__}.{main.__qualname__}, seed={seed}{shown}{faults})"


def replay_obstacle(main: Callable[..., Any], options: dict[str, Any] | None = None
                    ) -> str | None:
    """Why no ``emu.run(...)`` line can replay a run of ``main`` (what to change, said so a
    user can act on it), or None when `replay_line` can write one. A ``main`` with an
    ``_emu_replay_hint`` attribute (the pytest plugin's) adds that hint: how else to replay."""
    why = _obstacle(main, options)
    hint = getattr(main, "_emu_replay_hint", None)
    return f"{why}; {hint}" if why is not None and hint else why


def _obstacle(main: Callable[..., Any], options: dict[str, Any] | None) -> str | None:
    module = getattr(main, "__module__", None)
    qualname = getattr(main, "__qualname__", None)
    name = qualname or repr(main)
    if not module or not qualname or "<" in qualname:
        return (f"{name} is a lambda or a function defined inside another; define it at a "
                "module's top level to get one")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return f"{module}.{qualname} cannot be imported by that name"
    target = getattr(main, "__wrapped__", main)
    if found is not main and found is not target:
        return f"{module}.{qualname} names another object than the one that ran"
    try:
        params = list(inspect.signature(found).parameters.values())
    except (TypeError, ValueError):
        return f"{name}'s signature cannot be read"
    if len(params) != 1 or params[0].kind not in (params[0].POSITIONAL_ONLY,
                                                  params[0].POSITIONAL_OR_KEYWORD):
        return f"{name} takes more than the simulation"
    for key, value in sorted((options or {}).items()):
        try:
            if ast.literal_eval(repr(value)) != value:
                return f"the option {key}={value!r} has no literal form"
        except (ValueError, SyntaxError, TypeError):
            return f"the option {key}={value!r} has no literal form"
    return None
