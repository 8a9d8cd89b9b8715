"""A CI log reader takes a traceback on stderr for a crash: a scenario run and a served world
(KubeRay creating and tearing down a RayCluster) must leave stderr clean — no "Task exception
was never retrieved", no "Traceback"."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml
from serving import ROOT, env, start_serve

_clock = time.monotonic  # noqa: TID251 - a real subprocess is waited on in real time
STRAY = ("Task exception", "Traceback", "never retrieved", "was never awaited")


def assert_clean(stderr: str) -> None:
    found = [s for s in STRAY if s in stderr]
    assert not found, f"stderr has {found}:\n{stderr}"


def test_a_scenario_run_leaves_stderr_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "emu", "run", "operator-failover"],
                          capture_output=True, text=True, env=env(), cwd=str(ROOT), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "digest:" in done.stdout
    assert_clean(done.stderr)


def test_a_served_raycluster_created_and_deleted_leaves_stderr_clean(tmp_path: Path) -> None:
    srv = start_serve(tmp_path, "--kuberay", "--speed", "20")
    try:
        rc = yaml.safe_load((Path(__file__).parent / "manifests" / "raycluster.yaml").read_text())
        ns = rc["metadata"].get("namespace", "default")
        name = rc["metadata"]["name"]
        url = f"/apis/ray.io/v1/namespaces/{ns}/rayclusters"
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            assert http.post(url, json=rc).status_code == 201
            state, deadline = None, _clock() + 120
            while state != "ready" and _clock() < deadline:
                time.sleep(0.5)
                state = (http.get(f"{url}/{name}").json().get("status") or {}).get("state")
            assert state == "ready"
            assert http.delete(f"{url}/{name}").status_code == 200
            pods, deadline = ["?"], _clock() + 120
            while pods and _clock() < deadline:  # until every Pod of the cluster is gone
                time.sleep(0.5)
                pods = http.get(f"/api/v1/namespaces/{ns}/pods", params={
                    "labelSelector": f"ray.io/cluster={name}"}).json()["items"]
            assert pods == []
    finally:
        code = srv.stop()
    assert code == 0
    assert srv.proc.stderr is not None
    assert_clean(srv.proc.stderr.read())
