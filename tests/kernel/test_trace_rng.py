from __future__ import annotations

import asyncio
import json
import re

import pytest

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


def test_uids_are_the_seeded_128_bits_with_version_and_variant_set():
    # the values every golden and digest was made with: the formula before the faster one
    def reference(rng):
        n = rng.getrandbits(128)
        n = (n & ~(0xF000 << 64)) | (0x4000 << 64)
        n = (n & ~(0xC000 << 48)) | (0x8000 << 48)
        h = f"{n:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    a, b = SimRandom(11), SimRandom(11)
    assert [a.uid() for _ in range(2000)] == [reference(b) for _ in range(2000)]


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


def test_recorded_rows_and_emitted_events_digest_as_if_all_were_emitted_at_once():
    now = [0.0]
    late, eager = Trace(lambda: now[0]), Trace(lambda: now[0])
    mutable = {"n": 1}
    for i in range(5):
        now[0] = i / 3
        fields = {"verb": "create", "name": f"cm-{i}", "rv": i}
        late.record("kube-apiserver", "write", dict(fields))
        eager.emit("kube-apiserver", "write", **fields)
        late.emit("operator", "tick", value=mutable, i=i)
        eager.emit("operator", "tick", value=dict(mutable), i=i)
    mutable["n"] = 2  # an emitted event's fields are digested as they were when emitted
    assert late.digest() == eager.digest()
    assert len(late) == 10
    assert [(e.t, e.process, e.event) for e in late] == [
        (e.t, e.process, e.event) for e in eager.events]
    late.record("kube-apiserver", "write", {"verb": "delete"})  # after a digest, too
    eager.emit("kube-apiserver", "write", verb="delete")
    assert late.digest() == eager.digest()
    assert late.select(event="write")[-1].fields == {"verb": "delete"}


def test_rows_recorded_as_two_tuples_read_and_digest_as_emitted_events():
    now = [0.0]
    rows, eager = Trace(lambda: now[0]), Trace(lambda: now[0])
    keys = ("verb", "kind", "name", "rv")
    for i in range(4):
        now[0] = i / 7
        rows.record_row("kube-apiserver", "write", keys, ("create", "Pod", f"p-{i}", i))
        eager.emit("kube-apiserver", "write", verb="create", kind="Pod", name=f"p-{i}", rv=i)
        rows.record("kube-apiserver", "write", {"verb": "update", "rv": i})
        eager.emit("kube-apiserver", "write", verb="update", rv=i)
    assert rows.digest() == eager.digest()
    assert [(e.t, e.process, e.event, e.fields) for e in rows] == [
        (e.t, e.process, e.event, e.fields) for e in eager.events]
    heard = []
    rows.subscribe(heard.append)  # with a listener the row is an event at once
    rows.record_row("kube-apiserver", "write", keys, ("delete", "Pod", "p-0", 9))
    assert [e.fields for e in heard] == [{"verb": "delete", "kind": "Pod", "name": "p-0", "rv": 9}]


def test_emitted_lines_held_behind_a_recorded_row_are_bounded_and_digest_the_same():
    late, eager = Trace(lambda: 1.0), Trace(lambda: 1.0)
    late.record("kube-apiserver", "write", {"verb": "create"})
    eager.emit("kube-apiserver", "write", verb="create")
    for i in range(3000):
        late.emit("operator", "tick", i=i)
        eager.emit("operator", "tick", i=i)
        assert len(late._encoded) < 1024
    assert late.digest() == eager.digest()


def test_a_listener_hears_recorded_events_at_once():
    trace = Trace(lambda: 2.0)
    heard = []
    trace.subscribe(heard.append)
    trace.record("kube-apiserver", "write", {"verb": "update"})
    assert [(e.t, e.event, e.fields) for e in heard] == [(2.0, "write", {"verb": "update"})]


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


def validate_chrome_trace(text: str) -> list[dict]:
    """Load a Chrome trace JSON file as Perfetto's importer reads it, strictly: an object with a
    ``traceEvents`` list; every event a known phase with exactly the fields that phase needs,
    of the right types (no NaN); complete events ("X") properly nested on each thread; every
    process and thread used is named by a metadata event. Returns the events."""

    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    doc = json.loads(text, parse_constant=no_constants)
    assert isinstance(doc, dict) and set(doc) <= {"traceEvents", "displayTimeUnit"}, doc.keys()
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    required = {"X": {"name", "ph", "ts", "dur", "pid", "tid"},
                "i": {"name", "ph", "ts", "pid", "tid", "s"},
                "M": {"name", "ph", "pid", "args"}}
    optional = {"X": {"cat", "args"}, "i": {"cat", "args"}, "M": {"tid"}}
    slices: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    used_pids, used_threads = set(), set()
    named_pids, named_threads = set(), set()
    for ev in events:
        ph = ev.get("ph")
        assert ph in required, ev
        keys = set(ev)
        assert required[ph] <= keys <= required[ph] | optional[ph], (ph, keys)
        assert isinstance(ev["name"], str) and ev["name"], ev
        assert isinstance(ev["pid"], int) and ev["pid"] > 0, ev
        if "args" in ev:
            assert isinstance(ev["args"], dict), ev
        if ph == "M":
            assert ev["name"] in ("process_name", "process_sort_index", "thread_name"), ev
            if ev["name"] == "thread_name":
                assert isinstance(ev["tid"], int)
                assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
                named_threads.add((ev["pid"], ev["tid"]))
            elif ev["name"] == "process_name":
                assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
                named_pids.add(ev["pid"])
            continue
        assert isinstance(ev["tid"], int) and ev["tid"] > 0, ev
        for field in ("ts", "dur") if ph == "X" else ("ts",):
            assert isinstance(ev[field], (int, float)) and not isinstance(ev[field], bool), ev
            assert ev[field] >= 0, ev
        if ph == "i":
            assert ev["s"] in ("t", "p", "g"), ev
        used_pids.add(ev["pid"])
        used_threads.add((ev["pid"], ev["tid"]))
        if ph == "X":
            slices.setdefault((ev["pid"], ev["tid"]), []).append(
                (ev["ts"], ev["ts"] + ev["dur"], ev["name"]))
    assert used_pids <= named_pids, used_pids - named_pids
    assert used_threads <= named_threads, used_threads - named_threads
    for thread, spans in slices.items():
        stack: list[tuple[float, float, str]] = []
        for start, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                assert end <= stack[-1][1] + 1e-6, (
                    f"{name} [{start}, {end}] overlaps {stack[-1]} on {thread} without nesting")
            stack.append((start, end, name))
    return events


def test_chrome_export_is_a_strictly_valid_trace_with_one_named_process_track_each(tmp_path):
    trace = Trace(lambda: 2.0)
    trace.emit("a", "x")
    trace.emit("b", "y", k=1)
    trace.add_span("a", "get ConfigMap c", 1.0, 1.5, outcome="ok")
    trace.add_span("a", "get ConfigMap d", 1.25, 1.75, outcome="ok")
    events = validate_chrome_trace(
        trace.to_chrome(tmp_path / "t.json") and (tmp_path / "t.json").read_text())
    processes = {e["args"]["name"]: e["pid"] for e in events if e["name"] == "process_name"}
    assert processes == {"a": 1, "b": 2}
    instants = [e for e in events if e["ph"] == "i"]
    assert [(e["name"], e["ts"], e["args"]) for e in instants] == [
        ("x", 2_000_000.0, {}), ("y", 2_000_000.0, {"k": 1})]
    # two overlapping requests of one process go on two request threads, so slices nest
    requests = sorted((e["ts"], e["dur"], e["tid"]) for e in events if e["ph"] == "X")
    assert requests[0][:2] == (1_000_000.0, 500_000.0)
    assert requests[1][:2] == (1_250_000.0, 500_000.0)
    assert requests[0][2] != requests[1][2]


def test_the_trace_validator_refuses_what_perfetto_would_misdraw():
    named = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "p"}},
             {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "t"}}]
    overlapping = [{"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
                   {"name": "b", "ph": "X", "ts": 5, "dur": 10, "pid": 1, "tid": 1}]
    with pytest.raises(AssertionError, match="overlaps"):
        validate_chrome_trace(json.dumps({"traceEvents": named + overlapping}))
    with pytest.raises(AssertionError):  # an unnamed thread
        validate_chrome_trace(json.dumps({"traceEvents": named[:1] + overlapping[:1]}))
    with pytest.raises(ValueError, match="NaN is not JSON"):
        validate_chrome_trace('{"traceEvents": [{"name": "a", "ph": "i", "ts": NaN}]}')


def test_a_scenarios_perfetto_trace_has_lifetime_reconcile_and_request_spans(tmp_path):
    from emu import scenarios

    result = scenarios.run_scenario("operator-failover", 1)
    path = tmp_path / "trace.json"
    result.sim.trace.to_chrome(path)
    events = validate_chrome_trace(path.read_text())
    trace = result.sim.trace
    slices = [e for e in events if e["ph"] == "X"]
    lifetimes = [e for e in slices if "#" in e["name"]]
    reconciles = [e for e in slices if e["name"].startswith("reconcile ")]
    requests = [e for e in slices if e["cat"] == "requests"]
    assert len(lifetimes) == len(trace.select("process_started"))
    assert len(reconciles) == len(trace.select("reconcile_started"))
    assert len(requests) == len(trace.spans) > 100
    # the leader's crash ends its lifetime slice where the crash is
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert any(name.startswith("reconcile rayjob worker") for name in threads.values())
    crashed = [e for e in lifetimes if e["args"].get("ended") == "process_crashed"]
    assert crashed and all(e["dur"] > 0 for e in crashed)


def test_subscribers_see_every_later_event_in_order():
    trace = Trace(lambda: 0.0)
    seen = []
    trace.subscribe(lambda e: seen.append(e.event))
    for name in ("a", "b", "c"):
        trace.emit("p", name)
    assert seen == ["a", "b", "c"]
    asyncio.get_event_loop_policy()  # the trace needs no running loop
