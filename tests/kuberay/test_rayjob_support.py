"""Shared builders for the RayJob controller tests (no tests here).

KubeRay's envtest suite runs the RayCluster and RayJob controllers with a fake dashboard client
(``utils.FakeRayDashboardClient``) and plays the kubelet and the Job controller by writing
statuses. `start_kuberay` does the same here: one operator replica, leader election off, KubeRay's
cache selectors, and a `FakeRayDashboardClient` behind the RayJob reconciler's
``dashboard_client_func``. The end-to-end scenarios (``test_rayjob_scenarios.py``) use the real
fake Ray instead, through `world`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from test_raycluster_support import NS, set_pod_status

from emu.kube import cluster as kube_cluster
from emu.kuberay.dashboard_client import RayDashboardClient
from emu.kuberay.operator import (
    CACHE_SELECTORS,
    Configuration,
    OperatorContext,
    install_kuberay,
    setup_ray_cluster_controller,
)
from emu.kuberay.raycluster import rfc3339
from emu.kuberay.rayjob import RayJobReconciler, RayJobReconcilerOptions
from emu.kuberay.utils.features import parse_feature_gates
from emu.ray.images import register_ray_programs
from emu.runtime import OperatorConfig, start_operator

RAY_IMAGE = "rayproject/ray:2.46.0"
#: The submitter Job's and the RayJob's name in the article.
DEMO = "demo-job"


def rayjob(name: str = "rayjob-test", *, entrypoint: str = "sleep 999", workers: int = 3,
           annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """``rayJobTemplate`` (rayjob_controller_test.go): K8sJobMode, shutdownAfterJobFinishes, a
    head with the GCS/dashboard/client ports and one worker group of three."""
    body: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
                "name": "ray-head", "image": RAY_IMAGE,
                "resources": {"limits": {"cpu": "1", "memory": "2Gi"},
                              "requests": {"cpu": "1", "memory": "2Gi"}},
                "ports": [{"name": "gcs-server", "containerPort": 6379},
                          {"name": "dashboard", "containerPort": 8265},
                          {"name": "client", "containerPort": 10001}],
            }]}}},
            "workerGroupSpecs": [{
                "replicas": workers, "minReplicas": 0, "maxReplicas": 10000,
                "groupName": "small-group", "rayStartParams": {},
                "template": {"spec": {"containers": [{
                    "name": "ray-worker", "image": RAY_IMAGE,
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                  "requests": {"cpu": "1", "memory": "1Gi"}}}]}},
            }],
        },
    }
    body.update(spec)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": NS,
                         "annotations": dict(annotations if annotations is not None
                                             else {"foo": "bar"})},
            "spec": body}


class FakeRayDashboardClient(RayDashboardClient):
    """Port of ``utils.FakeRayDashboardClient`` (fake_serve_httpclient.go), RayJob part.

    ``get_job_info`` answers ``RUNNING`` unless `get_job_info_mock` is set (a function of the job
    id that returns the info or raises); ``submit_job`` and ``stop_job`` succeed and are recorded.
    """

    def __init__(self) -> None:
        async def unused(method: str, path: str, body: Any) -> tuple[int, Any]:
            raise AssertionError("the fake dashboard sends nothing")

        super().__init__(unused)
        self.get_job_info_mock: Callable[[str], dict[str, Any]] | None = None
        self.submitted: list[str] = []
        self.stopped: list[str] = []

    async def get_job_info(self, job_id: str) -> dict[str, Any]:
        if self.get_job_info_mock is not None:
            return self.get_job_info_mock(job_id)
        return {"status": "RUNNING"}

    async def submit_job(self, ray_job: Any) -> str:
        self.submitted.append((ray_job.get("status") or {}).get("jobId", ""))
        return ""

    async def stop_job(self, job_id: str) -> None:
        self.stopped.append(job_id)


def job_info(status: str, sim: Any) -> Callable[[str], dict[str, Any]]:
    """A ``GetJobInfoMock`` answering ``status`` with an end time of now (ms)."""
    from emu.ray.gcs_client import unix_ms

    def mock(_job_id: str) -> dict[str, Any]:
        return {"status": status, "end_time": unix_ms(sim.now)}

    return mock


def start_kuberay(sim: Any, fake: FakeRayDashboardClient, *, env: dict[str, str] | None = None,
                  gates: str = "", name: str = "kuberay-operator") -> dict[str, Any]:
    """suite_test.go: the RayCluster and RayJob controllers on one manager, the RayJob one with
    the fake dashboard client. Returns a dict that receives the reconcilers once set up."""
    feature_gates = parse_feature_gates(gates)
    ctx = OperatorContext(Configuration(enable_leader_election=False), feature_gates, env or {})
    out: dict[str, Any] = {}

    def setup(mgr: Any, _cfg: OperatorConfig) -> None:
        out["RayCluster"] = setup_ray_cluster_controller(mgr, ctx)
        reconciler = RayJobReconciler(
            mgr.get_client(), RayJobReconcilerOptions(env=dict(env or {}), gates=feature_gates),
            dashboard_client_func=lambda _cluster, _url: fake)
        reconciler.setup_with_manager(mgr, 1)
        out["RayJob"] = reconciler

    start_operator(sim, name, OperatorConfig(setup=setup, leader_election=False,
                                             cache_selectors=dict(CACHE_SELECTORS)))
    return out


async def get_rayjob(sim: Any, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = await sim.client().get("RayJob", name, NS)
    return obj


def deployment_status(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("jobDeploymentStatus", ""))


async def wait_status(sim: Any, name: str, want: str, timeout: float = 10.0) -> dict[str, Any]:
    """``Eventually(getRayJobDeploymentStatus).Should(Equal(want))`` in virtual seconds."""
    obj: dict[str, Any] = await sim.wait_for("RayJob", name,
                                             lambda o: deployment_status(o) == want,
                                             timeout=timeout)
    return obj


async def consistently_status(sim: Any, name: str, want: str, seconds: float = 3.0) -> None:
    """``Consistently(getRayJobDeploymentStatus).Should(Equal(want))``: sampled every 0.5 s."""
    for _ in range(int(seconds / 0.5)):
        assert deployment_status(await get_rayjob(sim, name)) == want
        await sim.sleep(0.5)


async def make_cluster_ready(sim: Any, cluster: str) -> dict[str, Any]:
    """``updateHeadPodToRunningAndReady`` + ``updateWorkerPodsToRunningAndReady``, then wait
    for the RayCluster's ``state: ready``."""
    await sim.wait_for("RayCluster", cluster, timeout=10)
    await sim.sleep(1)  # let the RayCluster controller create the Pods
    for pod in await sim.client().list("Pod", NS, label_selector=f"ray.io/cluster={cluster}"):
        await set_pod_status(sim, pod, "Running", ready=True)
    rc: dict[str, Any] = await sim.wait_for(
        "RayCluster", cluster, lambda o: (o.get("status") or {}).get("state") == "ready",
        timeout=10)
    return rc


async def to_running(sim: Any, name: str) -> dict[str, Any]:
    """``transitionRayJobToRunning``: Initializing, cluster ready, Running."""
    rj = await wait_status(sim, name, "Initializing")
    await make_cluster_ready(sim, rj["status"]["rayClusterName"])
    return await wait_status(sim, name, "Running")


async def update_k8s_job_to_complete(sim: Any, name: str, *, failed: bool = False) -> None:
    """``updateK8sJobToComplete`` (rayjob_controller_test.go): the Job controller's conditions."""
    c = sim.client("job-controller")
    job = await c.get("Job", name, NS)
    start = rfc3339(sim.now)
    done = rfc3339(sim.now + 1)
    if failed:
        conditions = [{"type": "FailureTarget", "status": "True", "lastTransitionTime": done,
                       "reason": "BackoffLimitExceeded", "message": "Job has reached the "
                       "specified backoff limit"},
                      {"type": "Failed", "status": "True", "lastTransitionTime": done,
                       "reason": "BackoffLimitExceeded",
                       "message": "Job has reached the specified backoff limit"}]
        job["status"] = {"conditions": conditions, "startTime": start, "failed": 1}
    else:
        conditions = [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": done},
                      {"type": "Complete", "status": "True", "lastTransitionTime": done}]
        job["status"] = {"conditions": conditions, "startTime": start, "completionTime": done,
                         "succeeded": 1}
    await c.update_status(job)


async def events(sim: Any, involved: str | None = None) -> list[dict[str, Any]]:
    items = list(await sim.client().list("Event", NS))
    items.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))  # in the order written
    return [e for e in items if involved is None or e["involvedObject"]["name"] == involved]


async def get_or_none(sim: Any, kind: str, name: str) -> dict[str, Any] | None:
    obj: dict[str, Any] | None = await sim.get(kind, name, NS)
    return obj


# ---------------------------------------------------------------------------------------------
# The whole world: kubelets run the Pods, the Job controller runs the submitter, fake Ray answers
# ---------------------------------------------------------------------------------------------

REDIS = [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "redis", "namespace": NS, "labels": {"app": "redis"}},
     "spec": {"containers": [{"name": "redis", "image": "redis:7.4",
                              "ports": [{"containerPort": 6379}]}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "redis", "namespace": NS},
     "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379, "targetPort": 6379}]}},
]


async def world(sim: Any, *, replicas: int = 1, nodes: int = 3, redis: bool = False,
                **install: Any) -> tuple[Any, Any]:
    """Kubernetes (nodes, kubelets, Jobs, Services, GC), the Ray image programs and KubeRay as
    its Deployment; returns ``(ray_config, kuberay)`` once a leader runs the controllers."""
    kube = kube_cluster.install(sim, nodes=nodes)
    config = register_ray_programs(sim.programs)
    await kube.wait_ready()
    if redis:
        for obj in REDIS:
            await sim.apply(obj)
    kuberay = await install_kuberay(sim, replicas=replicas, **install)
    await kuberay.wait_for_leader(timeout=120)
    return config, kuberay


def e2e_rayjob(name: str = DEMO, *, entrypoint: str = "python -c 'import time; time.sleep(30)'",
               mode: str = "K8sJobMode", workers: int = 1, redis: bool = False,
               **spec: Any) -> dict[str, Any]:
    """`rayjob` sized for the end-to-end world (one worker, a job of 30 virtual seconds)."""
    obj = rayjob(name, entrypoint=entrypoint, workers=workers, submissionMode=mode, **spec)
    if redis:
        obj["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    return copy.deepcopy(obj)


def terminal(obj: dict[str, Any]) -> bool:
    return deployment_status(obj) in ("Complete", "Failed")
