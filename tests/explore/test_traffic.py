"""Request traffic in a workload (`Setup.traffic`), the goal's ``clear`` paths, and the
invariant that reads the traffic (`emu.explore.traffic.NoRefusalAfterSwitch`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emu.explore.runner import RunSpec, run_one
from emu.explore.traffic import NoRefusalAfterSwitch
from emu.explore.workload import Setup, builtin, from_file


def test_a_traffic_url_that_is_not_host_port_path_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'rs-serve-svc/fruit' is not host:port/path"):
        Setup(traffic=("rs-serve-svc/fruit",))
    with pytest.raises(ValueError, match="traffic_interval must be positive"):
        Setup(traffic_interval=0)
    with pytest.raises(ValueError, match="window must be positive"):
        NoRefusalAfterSwitch(window=0)


def test_the_rayservice_workload_waits_for_an_upgrade_to_finish_before_deleting() -> None:
    # the goal's clear path (no pending cluster) keeps the run going until the promotion;
    # before, the RayService was deleted 8 s after the spec change, mid-upgrade
    wl = builtin("rayservice")
    result = run_one(wl, RunSpec(knobs={"clusterSpecChange": "2.47.0"}), record=True)
    assert not result.violations
    deletions = [a for a in result.actions if a["type"] == "transition"
                and a["kind"] == "RayService" and a["state"] == "None"]
    [deleted] = deletions
    assert deleted["t"] > 55.0  # change at 40, the new cluster serving ~15 s later


def test_goal_clear_and_traffic_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
        "data: {k: '1'}\n---\nkind: KnobSpace\nknobs: []\n"
        "goal: {kind: ConfigMap, path: data.k, states: ['1'], clear: [data.pending]}\n"
        "setup: {traffic: ['web.default.svc.cluster.local:80/healthz'], "
        "traffic_interval: 2}\n")
    wl = from_file(path)
    assert wl.goal is not None and wl.goal.clear == ("data.pending",)
    assert wl.setup.traffic == ("web.default.svc.cluster.local:80/healthz",)
    assert wl.setup.traffic_interval == 2
