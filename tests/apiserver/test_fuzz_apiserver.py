"""A CI-sized run of the API server contract fuzzer (`benchmarks/fuzz_apiserver.py`): random
manifests, writers and watches of every kind, checked against the store's commit log."""

from __future__ import annotations

import pytest

from benchmarks import fuzz_apiserver as fuzz
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom


def test_every_template_is_a_valid_manifest_of_a_served_kind():
    api = APIServer(clock=lambda: 0.0, rng=SimRandom(1))
    for kind in fuzz.KINDS:
        out = api.create(fuzz.manifest(kind, "a", "default", {"app": "x"}, ["fuzz.io/f"]))
        assert out["kind"] == kind[1]


@pytest.mark.parametrize(("sel", "labels", "match"), [
    (None, {}, True), (("app", "=", "x"), {"app": "x"}, True), (("app", "!=", "x"), {}, True),
    (("app", "exists"), {"tier": "t"}, False), (("app", "!exists"), {"tier": "t"}, True),
    (("app", "in", "x", "y"), {"app": "y"}, True), (("app", "in", "x", "y"), {}, False),
])
def test_the_fuzzers_own_selector_model(sel, labels, match):
    assert fuzz.selector_matches(sel, labels) is match
    api = APIServer(clock=lambda: 0.0, rng=SimRandom(1))
    api.create(fuzz.manifest(("v1", "ConfigMap"), "a", "default", labels, []))
    listed = api.list("ConfigMap", "default", label_selector=fuzz.selector_text(sel))["items"]
    assert bool(listed) is match  # the model agrees with the server's selectors


def test_a_ci_sized_run_finds_no_contract_violation():
    result = fuzz.run(3000)
    assert result["ops"] >= 3000
    assert result["finding"] is None, result["finding"]


def test_the_command_line_reports_figures(capsys):
    assert fuzz.main(["--ops", "200", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"finding": null' in out and '"ops_per_s"' in out
    with pytest.raises(SystemExit):
        fuzz.main(["--ops", "0"])


def test_the_soak_driver_covers_every_rule_and_finds_nothing():
    rules = {name for name, value in vars(fuzz.ApiContract).items()
             if callable(value) and not name.startswith("_")} - {
        "call", "choose_kinds", "teardown", "revisions_go_up_by_one",
        "watches_equal_the_commit_log", "check_invariants", "ops", "events"}
    assert rules == set(fuzz.SOAK_ARGS)
    result = fuzz.soak(3000, seed=3)
    assert result["ops"] >= 3000 and result["watch_events_checked"] > 0
    assert result["finding"] is None, result["finding"]


def test_the_soak_driver_catches_a_lost_filter(monkeypatch):
    """A fuzzer that cannot fail is no check: break the watch start filter and see it found."""
    from emu.apiserver import watch

    original = watch.WatchStream.offer

    def offer_everything(self, change):
        self.start_rev = 0
        original(self, change)

    monkeypatch.setattr(watch.WatchStream, "offer", offer_everything)
    result = fuzz.soak(20000, seed=2)
    assert result["finding"] and "watch" in result["finding"]
