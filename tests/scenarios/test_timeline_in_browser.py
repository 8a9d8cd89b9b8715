"""The HTML timeline loads in a real headless browser, its script runs, and it shows its lanes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from emu import scenarios
from emu.timeline import write_html

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is missing in CI: scripts/test.sh must install it")
        pytest.skip("chromium not installed: run scripts/ensure-chromium.sh")
    return exe


def test_the_timeline_page_loads_runs_its_script_and_shows_a_lane_per_process(tmp_path):
    exe = _chromium()
    result = scenarios.run_scenario("apiserver-churn", 1)
    page = tmp_path / "timeline.html"
    write_html(result, page)
    out = subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = out.stdout
    assert 'data-ready="yes"' in dom, "the page's script did not finish"
    lanes = int(re.search(r'data-lanes="(\d+)"', dom).group(1))
    processes = {e.process for e in result.sim.trace.events
                 if not e.event.startswith(("api_", "write"))}
    assert lanes == len(processes)
    assert "Uncaught" not in out.stderr
    assert dom.count('class="pass"') == len(result.expectations)


def test_the_timeline_page_renders_to_a_screenshot(tmp_path):
    exe = _chromium()
    result = scenarios.run_scenario("apiserver-churn", 1)
    page = tmp_path / "timeline.html"
    write_html(result, page)
    shot = tmp_path / "shot.png"
    out = subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000


def test_a_failing_tests_page_loads_and_opens_with_why_it_failed(tmp_path):
    import emu
    from emu.timeline import render_failure_html

    exe = _chromium()
    held = []

    async def main(sim):
        held.append(sim)
        await sim.sleep(2)
        sim.faults.crash("kube-apiserver")
        raise AssertionError("the ConfigMap never appeared")

    try:
        emu.run(main, seed=3)
    except AssertionError as exc:
        failure = exc
    page = tmp_path / "failed.html"
    page.write_text(render_failure_html("test_x (seed 3, failed)", held[0], failure))
    out = subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = out.stdout
    assert 'data-ready="yes"' in dom, "the page's script did not finish"
    body = dom[dom.index("<h1>"):]
    assert body.index('<section id="why">') < body.index('<svg id="timeline"')
    assert "AssertionError: the ConfigMap never appeared" in body[:body.index("</section>")]
    assert dom.count('class="mark crash"') == 1 and dom.count('class="mark failure"') == 1
    assert "Uncaught" not in out.stderr
