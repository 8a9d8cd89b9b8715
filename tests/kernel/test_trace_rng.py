from __future__ import annotations

import asyncio
import json
import re

from emu.kernel.rng import NAME_ALPHABET, SimRandom
from emu.kernel.trace import Trace, render_timeline


def test_uids_are_uuid4_shaped_and_decided_by_the_seed():
    a, b, c = SimRandom(7), SimRandom(7), SimRandom(8)
    uids = [a.uid() for _ in range(3)]
    assert uids == [b.uid() for _ in range(3)]
    assert uids != [c.uid() for _ in range(3)]
    for uid in uids:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                            uid)


def test_name_suffixes_use_kubernetes_alphabet_and_forks_are_independent_of_draw_order():
    rng = SimRandom(1)
    suffix = rng.name_suffix()
    assert len(suffix) == 5 and set(suffix) <= set(NAME_ALPHABET)
    fresh = SimRandom(1)
    fresh.random()
    assert SimRandom(1).fork("apiserver").uid() == fresh.fork("apiserver").uid()


def test_jitter_stays_within_duration_and_duration_times_one_plus_factor():
    rng = SimRandom(3)
    values = [rng.jitter(2.0, 1.2) for _ in range(1000)]
    assert min(values) >= 2.0 and max(values) <= 4.4


def test_equal_event_sequences_have_equal_digests_and_any_difference_changes_it():
    def digest(fields):
        t = Trace(lambda: 1.5)
        t.emit("operator-0", "lease_acquired", **fields)
        return t.digest()

    assert digest({"holder": "a", "n": 1}) == digest({"n": 1, "holder": "a"})
    assert digest({"holder": "a"}) != digest({"holder": "b"})


def test_the_structlog_logger_stamps_virtual_time_and_process():
    now = [0.0]
    trace = Trace(lambda: now[0])
    log = trace.logger("kubelet-1")
    now[0] = 12.25
    log.info("pod_started", pod="default/p")
    [event] = trace.events
    assert (event.t, event.process, event.event, event.fields) == (
        12.25, "kubelet-1", "pod_started", {"pod": "default/p"})
    line = json.loads(trace.to_jsonl().splitlines()[0])
    assert line == {"t": 12.25, "process": "kubelet-1", "event": "pod_started", "pod": "default/p"}
    assert render_timeline(trace.events) == "    12.250s  kubelet-1    pod_started pod=default/p"


def test_chrome_export_has_one_named_track_per_process(tmp_path):
    trace = Trace(lambda: 2.0)
    trace.emit("a", "x")
    trace.emit("b", "y", k=1)
    events = trace.to_chrome(tmp_path / "t.json")
    names = {e["args"]["name"]: e["tid"] for e in events if e["ph"] == "M"}
    assert names == {"a": 1, "b": 2}
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"][0]["ts"] == 2_000_000.0


def test_subscribers_see_every_later_event_in_order():
    trace = Trace(lambda: 0.0)
    seen = []
    trace.subscribe(lambda e: seen.append(e.event))
    for name in ("a", "b", "c"):
        trace.emit("p", name)
    assert seen == ["a", "b", "c"]
    asyncio.get_event_loop_policy()  # the trace needs no running loop
