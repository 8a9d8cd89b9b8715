"""A self-contained HTML timeline of a run: one lane per process, bars for lifetimes and
leadership tenures, markers for events, and the expectations underneath.

No external resources: the page is one file with inline SVG and a few lines of script (hover shows
an event's fields), so it opens anywhere, including CI artifacts and a headless browser.
"""

from __future__ import annotations

import html
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
    "process_failed": ("alive", "close"),
    "leader_acquired": ("leader", "open"),
    "leader_lost": ("leader", "close"),
    "process_paused": ("paused", "open"),
    "process_resumed": ("paused", "close"),
}
_SKIP = ("api_", "write")
_LANE_H = 26
_LEFT = 190


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


def render_html(title: str, events: list[TraceEvent], expectations: list[dict[str, Any]],
                facts: dict[str, Any], digest: str) -> str:
    """The page as text."""
    shown = [e for e in events if not e.event.startswith(_SKIP)]
    end = max([e.t for e in shown] + [1.0])
    lanes = _lanes(shown)
    width = 1100
    scale = (width - _LEFT - 20) / end
    height = _LANE_H * len(lanes) + 40

    def x(t: float) -> float:
        return _LEFT + t * scale

    parts = [f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" font-family="monospace" font-size="11">']
    for i, lane in enumerate(lanes):
        y = 20 + i * _LANE_H
        shown_name = lane if len(lane) <= 28 else "…" + lane[-27:]
        parts.append(f'<g class="lane" data-lane="{html.escape(lane)}">'
                     f'<text x="4" y="{y + 15}"><title>{html.escape(lane)}</title>'
                     f'{html.escape(shown_name)}</text>'
                     f'<line x1="{_LEFT}" y1="{y + 22}" x2="{width - 20}" y2="{y + 22}" '
                     f'stroke="#eee"/></g>')
    index = {lane: i for i, lane in enumerate(lanes)}
    for proc, cls, start, stop in _bars(shown, end):
        y = 20 + index[proc] * _LANE_H
        top, h = {"alive": (y + 4, 16), "leader": (y + 8, 8), "paused": (y + 2, 20)}[cls]
        parts.append(f'<rect class="bar {cls}" x="{x(start):.1f}" y="{top}" '
                     f'width="{max(x(stop) - x(start), 1):.1f}" height="{h}"/>')
    for e in shown:
        if e.event in _BARS:
            continue
        y = 20 + index[e.process] * _LANE_H
        info = html.escape(orjson.dumps({"t": e.t, "event": e.event, **e.fields},
                                        default=str).decode(), quote=True)
        bad = e.event in ("expect",) and not e.fields.get("ok", True)
        parts.append(f'<circle class="ev{" bad" if bad else ""}" cx="{x(e.t):.1f}" cy="{y + 12}" '
                     f'r="3.5" data-info="{info}"><title>{html.escape(e.event)} '
                     f't={e.t:.3f}</title></circle>')
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
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
.bar.alive {{ fill: #cfe3ff; }} .bar.leader {{ fill: #2b7be4; }}
.bar.paused {{ fill: none; stroke: #d98b00; stroke-width: 2; stroke-dasharray: 4 2; }}
circle.ev {{ fill: #555; cursor: pointer; }} circle.ev.bad {{ fill: #d22; }}
tr.pass td:first-child {{ color: #197a2e; font-weight: bold; }}
tr.fail td:first-child {{ color: #c01818; font-weight: bold; }}
td {{ padding: 2px 10px; vertical-align: top; }}
#info {{ font-family: monospace; white-space: pre-wrap; background: #f6f6f6; padding: 6px;
        min-height: 2em; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Lanes are processes; light bars are lifetimes, dark bars leadership tenures, dashed boxes
pauses. Hover or click a dot to see its event.</p>
{"".join(parts)}
<div id="info">(event details)</div>
<h2>Expectations</h2><table id="expectations">{rows}</table>
<h2>Facts</h2><table>{fact_rows}</table>
<p>digest: <code>{digest}</code></p>
<script>
for (const c of document.querySelectorAll('circle.ev')) {{
  const show = () => {{ document.getElementById('info').textContent = c.dataset.info; }};
  c.addEventListener('mouseenter', show); c.addEventListener('click', show);
}}
document.body.dataset.lanes = document.querySelectorAll('g.lane').length;
document.body.dataset.ready = 'yes';
</script>
</body></html>
"""


def render_failure_html(title: str, sim: Any, exc: BaseException) -> str:
    """The page of a failing test's run (placeholder; see render_html)."""
    return render_html(title, sim.trace.events, [], {}, sim.trace.digest())


def write_html(result: ScenarioResult, path: Path) -> None:
    """Write a scenario result's timeline page."""
    exps = [{"claim": e.claim, "ok": e.ok, "detail": e.detail} for e in result.expectations]
    title = f"{result.scenario} (seed {result.seed})"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(title, result.sim.trace.events, exps, result.facts, result.digest))
