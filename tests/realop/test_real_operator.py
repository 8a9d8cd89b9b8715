"""The released KubeRay operator binary as the operator of an emulated world: ``emu serve
--kuberay-binary`` runs it, the world's kubelets, scheduler, Job controller and fake Ray do the
rest. A RayCluster becomes ready, a RayJob (K8sJobMode, shaped like KubeRay's
ray-job.sample.yaml) completes: the operator reached the Ray dashboard through the world's
forward proxy (the job's status comes only from there) and the submitter Job ran in the world;
a RayService runs its Serve application."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from realop_serving import Served, start_serve

from tests.external import wall_clock

pytestmark = pytest.mark.external

HERE = Path(__file__).parent
_clock = wall_clock
Obj = dict[str, Any]


def _client(srv: Served) -> httpx.Client:
    return httpx.Client(base_url=srv.url, timeout=30,
                        headers={"User-Agent": "realop-test/1.0"})


def _path(kind: str, namespace: str, name: str = "") -> str:
    group = {"RayJob": "/apis/ray.io/v1", "RayCluster": "/apis/ray.io/v1",
             "RayService": "/apis/ray.io/v1",
             "Job": "/apis/batch/v1", "Lease": "/apis/coordination.k8s.io/v1",
             "Pod": "/api/v1"}[kind]
    plural = {"RayJob": "rayjobs", "RayCluster": "rayclusters", "RayService": "rayservices",
              "Job": "jobs",
              "Lease": "leases", "Pod": "pods"}[kind]
    return f"{group}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


def wait_for(srv: Served, kind: str, name: str, cond: Callable[[Obj], bool], *,
             timeout: float, namespace: str = "default") -> Obj:
    """Watch ``kind/name`` until ``cond`` holds (bounded by ``timeout`` wall seconds)."""
    deadline = _clock() + timeout
    last: Obj = {}
    with _client(srv) as client:
        while True:
            got = client.get(_path(kind, namespace, name))
            if got.status_code == 200:
                last = got.json()
                if cond(last):
                    return last
                rv = last["metadata"]["resourceVersion"]
            else:
                rv = got.json().get("metadata", {}).get("resourceVersion", "")
            left = deadline - _clock()
            if left <= 0:
                raise AssertionError(f"{kind} {name} did not get there within {timeout:g} s; "
                                     f"last seen:\n{json.dumps(last.get('status'), indent=1)}\n"
                                     f"operator log tail:\n{_log_tail(srv)}")
            params = {"watch": "1", "fieldSelector": f"metadata.name={name}",
                      "timeoutSeconds": str(max(1, int(min(left, 30))))}
            if rv:
                params["resourceVersion"] = rv
            with client.stream("GET", _path(kind, namespace), params=params,
                               timeout=httpx.Timeout(30, read=left + 5)) as stream:
                for line in stream.iter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    if event["type"] in ("ADDED", "MODIFIED") and cond(event["object"]):
                        return event["object"]
                    if event["type"] == "ERROR":
                        break


def wait_gone(srv: Served, kind: str, name: str, *, timeout: float,
              namespace: str = "default") -> None:
    """Watch ``kind/name`` until it is deleted (bounded by ``timeout`` wall seconds)."""
    with _client(srv) as client:
        got = client.get(_path(kind, namespace, name))
        if got.status_code == 404:
            return
        params = {"watch": "1", "fieldSelector": f"metadata.name={name}",
                  "resourceVersion": got.json()["metadata"]["resourceVersion"],
                  "timeoutSeconds": str(int(timeout))}
        with client.stream("GET", _path(kind, namespace), params=params,
                           timeout=httpx.Timeout(30, read=timeout + 5)) as stream:
            for line in stream.iter_lines():
                if line and json.loads(line)["type"] == "DELETED":
                    return
    raise AssertionError(f"{kind} {name} was not deleted within {timeout:g} s; operator log "
                         f"tail:\n{_log_tail(srv)}")


def _log_tail(srv: Served) -> str:
    try:
        _, log = srv.operator_line()
        return "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    except (AssertionError, OSError):
        return srv.stderr()


def test_the_operator_leads_on_the_worlds_lease(served: Served):
    lease = wait_for(served, "Lease", "ray-operator-leader",
                     lambda o: bool(o.get("spec", {}).get("holderIdentity")), timeout=60)
    assert lease["spec"]["leaseDurationSeconds"] == 15  # controller-runtime's default


def test_a_raycluster_becomes_ready(served: Served):
    manifest = yaml.safe_load((HERE / "rayjob.yaml").read_text())
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "realop-cluster", "namespace": "default"},
               "spec": manifest["spec"]["rayClusterSpec"]}
    with _client(served) as client:
        made = client.post(_path("RayCluster", "default"), json=cluster)
        assert made.status_code == 201, made.text
    ready = wait_for(served, "RayCluster", "realop-cluster",
                     lambda o: o.get("status", {}).get("state") == "ready", timeout=180)
    status = ready["status"]
    assert status["readyWorkerReplicas"] == 1
    assert status["head"]["podIP"] and status["head"]["serviceName"]
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    assert conditions.get("HeadPodReady") == "True"  # RayClusterStatusConditions is on
    with _client(served) as client:
        pods = client.get(_path("Pod", "default"),
                          params={"labelSelector": "ray.io/cluster=realop-cluster"}).json()
        assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods["items"]) == \
            ["head", "worker"]
        client.delete(_path("RayCluster", "default", "realop-cluster"))


def test_a_rayjob_completes_with_its_submitter_job(served: Served):
    with _client(served) as client:
        made = client.post(_path("RayJob", "default"),
                           json=yaml.safe_load((HERE / "rayjob.yaml").read_text()))
        assert made.status_code == 201, made.text
    done = wait_for(served, "RayJob", "realop-job",
                    lambda o: o.get("status", {}).get("jobDeploymentStatus")
                    in ("Complete", "Failed"), timeout=240)
    status = done["status"]
    assert status["jobDeploymentStatus"] == "Complete", status
    assert status["jobStatus"] == "SUCCEEDED"  # read from the fake Ray's dashboard
    assert status["rayClusterName"].startswith("realop-job-")
    assert status["jobId"]  # the submission id the submitter used
    with _client(served) as client:
        job = client.get(_path("Job", "default", "realop-job")).json()
    assert job["status"].get("succeeded") == 1  # the submitter ran `ray job submit` in it
    # shutdownAfterJobFinishes: the operator deletes the RayCluster it made
    wait_gone(served, "RayCluster", status["rayClusterName"], timeout=60)
    # the chart's RBAC for this version allowed everything it did
    _, log = served.operator_line()
    denied = [line for line in log.read_text().splitlines() if "forbidden" in line]
    assert not denied, denied[:3]


def test_stopping_serve_stops_the_operator_process(kuberay_binary: Path, tmp_path: Path):
    srv = start_serve(tmp_path, kuberay_binary)
    pid, log = srv.operator_line()
    os.kill(pid, 0)  # it runs
    assert srv.stop() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    text = log.read_text()
    assert "starting manager" in text  # its output went to the log that was printed


def test_a_rayservice_runs_with_a_serve_endpoint(served: Served):
    with _client(served) as client:
        made = client.post("/apis/ray.io/v1/namespaces/default/rayservices",
                           json=yaml.safe_load((HERE / "rayservice.yaml").read_text()))
        assert made.status_code == 201, made.text
    running = wait_for(served, "RayService", "realop-svc",
                       lambda o: o.get("status", {}).get("serviceStatus") == "Running",
                       timeout=240)
    # counted from the Serve Service's core/v1 Endpoints (v1.5 and earlier) or EndpointSlices
    assert running["status"]["numServeEndpoints"] >= 1
    apps = running["status"]["activeServiceStatus"]["applicationStatuses"]
    assert apps["fruit_app"]["status"] == "RUNNING"  # read from the fake Serve API via the proxy
