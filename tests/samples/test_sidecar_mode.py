"""A SidecarMode RayJob with a pip runtime environment (shaped like KubeRay's
ray-job.sidecar-mode.yaml): its environment's setup time lets the RayCluster become ready before
the job ends, as on a real cluster; when setup costs nothing the job ends first, the submitter
exits, the head Pod is no longer Ready and — as in KubeRay's Go — the RayJob waits in
Initializing for a cluster that never becomes ready."""

from __future__ import annotations

import pytest

from emu.ray.config import RuntimeEnvCosts

SIDECAR_JOB = """
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: sidecar
spec:
  submissionMode: SidecarMode
  entrypoint: python /home/ray/samples/sample_code.py
  runtimeEnvYAML: |
    pip:
      - requests==2.26.0
      - pendulum==2.1.2
  rayClusterSpec:
    rayVersion: "2.52.0"
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.52.0
            resources: {limits: {cpu: "1", memory: 5Gi}}
    workerGroupSpecs:
    - replicas: 1
      minReplicas: 1
      maxReplicas: 5
      groupName: small-group
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-worker
            image: rayproject/ray:2.52.0
            resources: {limits: {cpu: "1", memory: 1Gi}}
"""


def _status(job: dict) -> tuple[str | None, str | None]:
    status = job.get("status") or {}
    return status.get("jobDeploymentStatus"), status.get("jobStatus")


@pytest.mark.emu(cluster=True)
async def test_sidecar_job_with_pip_env_completes_after_its_cluster_is_ready(sim):
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=300)
    await sim.apply(SIDECAR_JOB)
    job = await sim.wait_for("RayJob", "sidecar",
                             lambda j: _status(j) == ("Complete", "SUCCEEDED"), timeout=900)
    assert job["status"]["rayClusterStatus"]["state"] == "ready"


@pytest.mark.emu(cluster=True)
async def test_sidecar_job_that_ends_before_its_cluster_is_ready_stays_initializing(sim):
    sim.ray.runtime_env_costs = RuntimeEnvCosts.free()
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=300)
    await sim.apply(SIDECAR_JOB)
    await sim.sleep(600)
    job = await sim.get("RayJob", "sidecar")
    assert _status(job) == ("Initializing", None)
    head = [p for p in await sim.client().list("Pod", "default",
                                                label_selector="ray.io/node-type=head")]
    submitter = [s for s in head[0]["status"]["containerStatuses"]
                 if s["name"] == "ray-job-submitter"]
    assert submitter[0]["state"]["terminated"]["exitCode"] == 0
