"""A CI log reader takes a traceback on stderr for a crash: a scenario run and a served world
(KubeRay creating and tearing down a RayCluster) must leave stderr clean — no "Task exception
was never retrieved", no "Traceback"."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from serving import ROOT, env, start_serve

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


def watch_until(http: httpx.Client, path: str, selector: dict[str, str],
                done: Callable[[dict[str, dict[str, Any]]], bool]) -> None:
    """List ``path`` then watch it (bounded by the client's read timeout) until ``done`` holds
    for the objects by name."""
    listing = http.get(path, params=selector).json()
    objects = {o["metadata"]["name"]: o for o in listing["items"]}
    if done(objects):
        return
    params = {**selector, "watch": "1", "timeoutSeconds": "120",
              "resourceVersion": listing["metadata"]["resourceVersion"]}
    with http.stream("GET", path, params=params) as resp:
        for line in resp.iter_lines():
            event = json.loads(line)
            obj = event["object"]
            if event["type"] == "DELETED":
                objects.pop(obj["metadata"]["name"], None)
            elif event["type"] in ("ADDED", "MODIFIED"):
                objects[obj["metadata"]["name"]] = obj
            if done(objects):
                return
    raise AssertionError(f"{path} {selector}: the watch ended before the condition held")


def test_a_served_raycluster_created_and_deleted_leaves_stderr_clean(tmp_path: Path) -> None:
    srv = start_serve(tmp_path, "--kuberay", "--speed", "20")
    try:
        rc = yaml.safe_load((Path(__file__).parent / "manifests" / "raycluster.yaml").read_text())
        ns = rc["metadata"].get("namespace", "default")
        name = rc["metadata"]["name"]
        url = f"/apis/ray.io/v1/namespaces/{ns}/rayclusters"
        with httpx.Client(base_url=srv.url, timeout=150) as http:
            assert http.post(url, json=rc).status_code == 201
            watch_until(http, url, {"fieldSelector": f"metadata.name={name}"},
                        lambda got: (got.get(name, {}).get("status") or {}).get("state")
                        == "ready")
            assert http.delete(f"{url}/{name}").status_code == 200
            # until every Pod of the cluster is gone (its raylets and GCS ended)
            watch_until(http, f"/api/v1/namespaces/{ns}/pods",
                        {"labelSelector": f"ray.io/cluster={name}"}, lambda got: not got)
    finally:
        code = srv.stop()
    assert code == 0
    assert srv.proc.stderr is not None
    assert_clean(srv.proc.stderr.read())
