"""A self-contained HTML timeline of a run: one lane per process, bars for lifetimes and
leadership tenures, marks for events, and the expectations and facts underneath.

What a reader looks for first is drawn so it cannot be missed: a crash is a red cross, a fault a
dashed orange line across every lane with a diamond on the faults lane, a takeover (a leader
after the first) a green triangle, a failure (an expectation that failed, a reconcile panic, a
process that failed) a red ring; every bar and mark has a minimum width, so a standby's
takeover seconds before the end is as visible as a long tenure. The page of a failing test
opens with why it failed.

No external resources: the page is one file with inline SVG and a few lines of script (hover shows
an event's fields), so it opens anywhere, including CI artifacts and a headless browser.
"""

from __future__ import annotations

import html
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .kernel.trace import TraceEvent

if TYPE_CHECKING:
    from .scenarios import ScenarioResult

#: Events that open and close a bar on their process's lane, with the bar's class.
_BARS = {
    "process_started": ("alive", "open"),
    "process_crashed": ("alive", "close"),
    "process_exited": ("alive", "close"),
    "process_stopped": ("alive", "close"),
    "leader_acquired": ("leader", "open"),
    "leader_lost": ("leader", "close"),
    "process_paused": ("paused", "open"),
    "process_resumed": ("paused", "close"),
}
_SKIP = ("api_", "write")
_LANE_H = 26
_LEFT = 190
_WIDTH = 1100
#: The narrowest a bar is drawn (px): anything shorter would vanish at a run's scale.
MIN_BAR_PX = 6.0
#: Crash reasons that are the run's own end or a container's, not a fault.
_ORDINARY_ENDS = ("simulation ended", "container ended")


def mark_class(e: TraceEvent, leaders_seen: int) -> str:
    """How an event is drawn: ``crash``, ``fault``, ``takeover``, ``failure`` or ``ev``."""
    if e.event == "process_crashed" and str(e.fields.get("reason", "")) not in _ORDINARY_ENDS:
        return "crash"
    if e.event == "fault" or (e.process == "faults" and e.event != "process_started"):
        return "fault"
    if e.event == "leader_acquired" and leaders_seen > 0:
        return "takeover"
    if ((e.event == "expect" and not e.fields.get("ok", True))
            or e.event in ("reconcile_panic", "process_failed", "test_failed")):
        return "failure"
    return "ev"


def _lanes(events: list[TraceEvent]) -> list[str]:
    order: dict[str, None] = {}
    for e in events:
        order.setdefault(e.process, None)
    return list(order)


def _bars(events: list[TraceEvent], end: float) -> list[tuple[str, str, float, float]]:
    open_: dict[tuple[str, str], float] = {}
    bars: list[tuple[str, str, float, float]] = []
    for e in events:
        spec = _BARS.get(e.event)
        if spec is None:
            continue
        cls, action = spec
        key = (e.process, cls)
        if action == "open":
            open_.setdefault(key, e.t)
        elif key in open_:
            bars.append((e.process, cls, open_.pop(key), e.t))
        if cls == "alive" and action == "close":
            for other in ("leader", "paused"):
                if (e.process, other) in open_:
                    bars.append((e.process, other, open_.pop((e.process, other)), e.t))
    for (proc, cls), start in open_.items():
        bars.append((proc, cls, start, end))
    return bars


def _mark(cls: str, x: float, y: float) -> str:
    """The SVG shape of a mark class, centred on (x, y)."""
    if cls == "crash":
        return (f'<path class="mark crash" d="M{x - 5:.1f},{y - 5:.1f} L{x + 5:.1f},{y + 5:.1f} '
                f'M{x - 5:.1f},{y + 5:.1f} L{x + 5:.1f},{y - 5:.1f}"')
    if cls == "fault":
        return (f'<path class="mark fault" d="M{x:.1f},{y - 6:.1f} L{x + 6:.1f},{y:.1f} '
                f'L{x:.1f},{y + 6:.1f} L{x - 6:.1f},{y:.1f} Z"')
    if cls == "takeover":
        return (f'<path class="mark takeover" d="M{x:.1f},{y - 7:.1f} L{x + 6:.1f},{y + 5:.1f} '
                f'L{x - 6:.1f},{y + 5:.1f} Z"')
    if cls == "failure":
        return f'<circle class="mark failure" cx="{x:.1f}" cy="{y:.1f}" r="6"'
    return f'<circle class="mark ev" cx="{x:.1f}" cy="{y:.1f}" r="3.5"'


def render_html(title: str, events: list[TraceEvent], expectations: list[dict[str, Any]],
                facts: dict[str, Any], digest: str, *, why: str | None = None) -> str:
    """The page as text. ``why`` (a failing test's reason) opens the page when given."""
    shown = [e for e in events if not e.event.startswith(_SKIP)]
    end = max([e.t for e in shown] + [1.0])
    lanes = _lanes(shown)
    scale = (_WIDTH - _LEFT - 20) / end
    height = _LANE_H * len(lanes) + 40

    def x(t: float) -> float:
        return _LEFT + t * scale

    parts = [f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" '
             f'height="{height}" font-family="monospace" font-size="11">']
    for i, lane in enumerate(lanes):
        y = 20 + i * _LANE_H
        shown_name = lane if len(lane) <= 28 else "…" + lane[-27:]
        parts.append(f'<g class="lane" data-lane="{html.escape(lane)}">'
                     f'<text x="4" y="{y + 15}"><title>{html.escape(lane)}</title>'
                     f'{html.escape(shown_name)}</text>'
                     f'<line x1="{_LEFT}" y1="{y + 22}" x2="{_WIDTH - 20}" y2="{y + 22}" '
                     f'stroke="#eee"/></g>')
    index = {lane: i for i, lane in enumerate(lanes)}
    for proc, cls, start, stop in _bars(shown, end):
        y = 20 + index[proc] * _LANE_H
        top, h = {"alive": (y + 4, 16), "leader": (y + 8, 8), "paused": (y + 2, 20)}[cls]
        width = max(x(stop) - x(start), MIN_BAR_PX)
        left = min(x(start), _WIDTH - 20 - width)
        parts.append(f'<rect class="bar {cls}" x="{left:.1f}" y="{top}" width="{width:.1f}" '
                     f'height="{h}"><title>{cls} {start:.3f}s to {stop:.3f}s</title></rect>')
    leaders = 0
    for e in shown:
        cls = mark_class(e, leaders)
        if e.event == "leader_acquired":
            leaders += 1
        if e.event in _BARS and cls == "ev":
            continue
        y = 20 + index[e.process] * _LANE_H + 12
        if cls == "fault":
            parts.append(f'<line class="fault-line" x1="{x(e.t):.1f}" y1="14" x2="{x(e.t):.1f}" '
                         f'y2="{height - 16}"/>')
        info = html.escape(orjson.dumps({"t": e.t, "process": e.process, "event": e.event,
                                         **e.fields}, default=str).decode(), quote=True)
        parts.append(f'{_mark(cls, x(e.t), y)} data-info="{info}"><title>{html.escape(e.event)} '
                     f't={e.t:.3f}</title></{"path" if cls in ("crash", "fault", "takeover") else "circle"}>')
    for k in range(11):
        t = end * k / 10
        parts.append(f'<text x="{x(t):.1f}" y="{height - 4}" fill="#666">{t:.1f}s</text>')
    parts.append("</svg>")
    rows = "".join(
        f'<tr class="{"pass" if ex["ok"] else "fail"}"><td>{"PASS" if ex["ok"] else "FAIL"}</td>'
        f'<td>{html.escape(ex["claim"])}</td><td>{html.escape(str(ex.get("detail", "")))}</td></tr>'
        for ex in expectations)
    fact_rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
                        for k, v in facts.items())
    why_block = (f'<section id="why"><h2>Why it failed</h2><pre>{html.escape(why)}</pre>'
                 "</section>" if why else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
.bar.alive {{ fill: #cfe3ff; }} .bar.leader {{ fill: #2b7be4; }}
.bar.paused {{ fill: none; stroke: #d98b00; stroke-width: 2; stroke-dasharray: 4 2; }}
.mark {{ cursor: pointer; }} .mark.ev {{ fill: #555; }}
.mark.crash {{ stroke: #d11; stroke-width: 3; fill: none; }}
.mark.fault {{ fill: #f08c00; stroke: #8a4f00; }}
.mark.takeover {{ fill: #1a9e3f; stroke: #0c5b22; }}
.mark.failure {{ fill: #fff; stroke: #d11; stroke-width: 3; }}
.fault-line {{ stroke: #f08c00; stroke-width: 1.5; stroke-dasharray: 5 3; }}
.legend span {{ margin-right: 1.2em; white-space: nowrap; }}
#why {{ border-left: 6px solid #d11; background: #fff3f3; padding: 0.2em 1em; }}
#why pre {{ white-space: pre-wrap; font-size: 13px; }}
tr.pass td:first-child {{ color: #197a2e; font-weight: bold; }}
tr.fail td:first-child {{ color: #c01818; font-weight: bold; }}
td {{ padding: 2px 10px; vertical-align: top; }}
#info {{ font-family: monospace; white-space: pre-wrap; background: #f6f6f6; padding: 6px;
        min-height: 2em; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{why_block}
<p>Lanes are processes; light bars are lifetimes, dark bars leadership tenures, dashed boxes
pauses. Hover or click a mark to see its event.</p>
<p class="legend"><span style="color:#d11">✕ crash</span>
<span style="color:#f08c00">◆ fault (dashed line across every lane)</span>
<span style="color:#1a9e3f">▲ takeover</span>
<span style="color:#d11">◯ failure (expectation, panic, failed process)</span>
<span style="color:#555">● event</span></p>
{"".join(parts)}
<div id="info">(event details)</div>
<h2>Expectations</h2><table id="expectations">{rows}</table>
<h2>Facts</h2><table id="facts">{fact_rows}</table>
<p>digest: <code>{digest}</code></p>
<script>
for (const c of document.querySelectorAll('.mark')) {{
  const show = () => {{ document.getElementById('info').textContent = c.dataset.info; }};
  c.addEventListener('mouseenter', show); c.addEventListener('click', show);
}}
document.body.dataset.lanes = document.querySelectorAll('g.lane').length;
document.body.dataset.ready = 'yes';
</script>
</body></html>
"""


def _expectations_and_facts(events: list[TraceEvent]) -> tuple[list[dict[str, Any]],
                                                                dict[str, Any]]:
    """The ``expect`` and ``fact`` events of a run, as the page's two tables."""
    exps = [{"claim": str(e.fields.get("claim", "")), "ok": bool(e.fields.get("ok", True)),
             "detail": e.fields.get("detail", "")} for e in events if e.event == "expect"]
    facts = {str(e.fields.get("name")): e.fields.get("value") for e in events
             if e.event == "fact"}
    return exps, facts


def failure_reason(exc: BaseException, limit: int = 60) -> str:
    """Why a run failed, as a reader wants it: the exception, its notes, and what caused it."""
    lines = "".join(traceback.format_exception_only(exc)).rstrip().splitlines()
    cause = exc.__cause__ if exc.__cause__ is not None else (
        None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        frames = traceback.extract_tb(cause.__traceback__)
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        lines.append(f"caused by: {type(cause).__name__}: {cause}{where}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"… ({len(lines) - limit} more lines)"]
    return "\n".join(lines)


def render_failure_html(title: str, sim: Any, exc: BaseException) -> str:
    """The page of a failing test's run: why it failed first, then its timeline, its
    expectations (the scenario's, and the test's own, failed) and facts (the run's and the
    seed, time, faults and panics)."""
    events = sim.trace.events
    why = failure_reason(exc)
    exps, facts = _expectations_and_facts(events)
    exps.append({"claim": "the test finishes without an exception", "ok": False,
                 "detail": why.splitlines()[0] if why else type(exc).__name__})
    facts = {"seed": sim.seed, "virtual time": f"{sim.now:.3f}s", "events": len(events),
             "faults performed": repr(sim.faults.plan()) if sim.faults.plan() else "none",
             "reconcile panics": len(sim.panics), **facts}
    for p in sim.panics[:3]:
        facts[f"panic at t={p.t:.3f}s"] = p.summary()
    marks = [*events, TraceEvent(sim.now, "test", "test_failed", {"error": why.splitlines()[0]
                                                                   if why else ""})]
    return render_html(title, marks, exps, facts, sim.trace.digest(), why=why)


def write_html(result: ScenarioResult, path: Path) -> None:
    """Write a scenario result's timeline page; a scenario whose expectations failed opens with
    the failed claims."""
    exps = [{"claim": e.claim, "ok": e.ok, "detail": e.detail} for e in result.expectations]
    title = f"{result.scenario} (seed {result.seed})"
    failed = [f"FAIL {e.claim}: {e.detail}" for e in result.expectations if not e.ok]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(title, result.sim.trace.events, exps, result.facts, result.digest,
                                why="\n".join(failed) or None))
