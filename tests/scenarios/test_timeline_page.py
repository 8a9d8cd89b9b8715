"""The HTML timeline draws what a reader looks for distinctly (crashes, faults, takeovers,
failures) and never thinner than its minimum width; a failing test's page opens with why."""

from __future__ import annotations

import re

from emu import scenarios
from emu.kernel.trace import TraceEvent
from emu.timeline import MIN_BAR_PX, render_html, write_html


def _page(name: str, tmp_path) -> str:
    result = scenarios.run_scenario(name, 1)
    path = tmp_path / "page.html"
    write_html(result, path)
    return path.read_text()


def test_operator_failover_shows_the_fault_the_crash_and_the_standbys_takeover(tmp_path):
    page = _page("operator-failover", tmp_path)
    assert len(re.findall(r'class="mark fault"', page)) == 1
    assert len(re.findall(r'class="fault-line"', page)) == 1
    crashes = re.findall(r'class="mark crash"[^>]*data-info="([^"]*)"', page)
    assert any("container killed: node failed" in c for c in crashes)
    takeovers = re.findall(r'class="mark takeover"[^>]*data-info="([^"]*)"', page)
    assert len(takeovers) == 1 and "leader_acquired" in takeovers[0]
    assert 'id="why"' not in page  # every expectation passed


def test_no_bar_is_drawn_thinner_than_the_minimum_even_a_takeover_just_before_the_end():
    events = [TraceEvent(0.0, "a", "process_started", {}),
              TraceEvent(0.0, "b", "process_started", {}),
              TraceEvent(0.0, "a", "leader_acquired", {}),
              TraceEvent(3599.9, "a", "process_crashed", {"reason": "fault: crash"}),
              TraceEvent(3599.95, "b", "leader_acquired", {}),
              TraceEvent(3600.0, "b", "process_stopped", {})]
    page = render_html("t", events, [], {}, "d")
    widths = [float(w) for w in re.findall(r'<rect class="bar [a-z]+" x="[^"]+" y="[^"]+" '
                                          r'width="([^"]+)"', page)]
    assert len(widths) == 4 and min(widths) >= MIN_BAR_PX
    leader_b = re.findall(r'<rect class="bar leader" x="([^"]+)" y="[^"]+" width="([^"]+)"', page)
    assert all(float(x) + float(w) <= 1100 - 20 + 1e-6 for x, w in leader_b)  # still on the page
    assert page.count('class="mark takeover"') == 1 and page.count('class="mark crash"') == 1


def test_a_failed_expectation_opens_the_page_and_is_marked_as_a_failure():
    events = [TraceEvent(1.0, "scenario", "expect", {"claim": "one leader", "ok": False,
                                                     "detail": "two leaders at t=3"})]
    page = render_html("t", events, [{"claim": "one leader", "ok": False,
                                      "detail": "two leaders at t=3"}], {"leaders": 2}, "d",
                       why="FAIL one leader: two leaders at t=3")
    assert page.index('id="why"') < page.index('<svg id="timeline"')
    assert page.count('class="mark failure"') == 1
    assert '<tr class="fail"><td>FAIL</td><td>one leader</td>' in page
