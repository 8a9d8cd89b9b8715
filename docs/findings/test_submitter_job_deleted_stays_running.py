# Written by emu explore (emu.explore.export): the long lines are data.
# ruff: noqa: E501, I001, RUF100
"""Found by the explorer: rayjob-submitter-recovered on workload 'rayjob', seed 1.

RayJob default/demo-job (jobDeploymentStatus Running, jobStatus (none)) had no submitter Job
default/demo-job, from t=20.105s (longer than the bound of 60s)

Known finding F8, class kuberay: A K8sJobMode RayJob whose submitter Job is deleted while it
runs stays Running forever (a Running K8sJobMode RayJob without its submitter Job).
Go: ray-operator/controllers/ray/rayjob_controller.go
RayJobReconciler.checkSubmitterAndUpdateStatusIfNeeded; ray-
operator/controllers/ray/rayjob_controller.go RayJobReconciler.Reconcile (Running); ray-
operator/controllers/ray/rayjob_controller.go RayJobReconciler.createK8sJobIfNeed (Initializing
only).
What to do: Set activeDeadlineSeconds on the RayJob: the stuck RayJob then fails
(DeadlineExceeded) instead of waiting forever. Do not delete a RayJob's submitter Job by hand or
by a cleanup policy while the RayJob runs: delete or suspend the RayJob instead. A RayJob
already stuck can be suspended (spec.suspend: true): KubeRay tears its cluster down; resuming it
runs the job again.

Fails while the port keeps the behaviour (KubeRay's, see docs/findings.md).
Found with: emu explore rayjob --seed 1 --budget 400
"""

import pytest

from emu.explore.export import explain, replay
from emu.explore.runner import world_options
from emu.explore.workload import Goal, Knob, Setup, Workload
from emu.explore.faults import LoseSubmitter

WORKLOAD = Workload(
    name='rayjob',
    manifests=[{'apiVersion': 'ray.io/v1',
  'kind': 'RayJob',
  'metadata': {'name': 'demo-job', 'namespace': 'default'},
  'spec': {'entrypoint': "python -c 'import time; time.sleep(20)'",
           'submissionMode': 'K8sJobMode',
           'shutdownAfterJobFinishes': True,
           'rayClusterSpec': {'rayVersion': '2.46.0',
                              'headGroupSpec': {'rayStartParams': {},
                                                'template': {'spec': {'containers': [{'name': 'ray-head',
                                                                                      'image': 'rayproject/ray:2.46.0',
                                                                                      'ports': [{'name': 'gcs-server',
                                                                                                 'containerPort': 6379},
                                                                                                {'name': 'dashboard',
                                                                                                 'containerPort': 8265},
                                                                                                {'name': 'client',
                                                                                                 'containerPort': 10001}]}]}}},
                              'workerGroupSpecs': [{'groupName': 'workers',
                                                    'replicas': 1,
                                                    'minReplicas': 0,
                                                    'maxReplicas': 10,
                                                    'rayStartParams': {},
                                                    'template': {'spec': {'containers': [{'name': 'ray-worker',
                                                                                          'image': 'rayproject/ray:2.46.0'}]}}}]}}}],
    knobs=[
    Knob(name='submissionMode', kind='RayJob', path='spec.submissionMode', values=('K8sJobMode', 'HTTPMode', 'SidecarMode'), at=None, object_name=None),
    Knob(name='entrypoint', kind='RayJob', path='spec.entrypoint', values=("python -c 'import time; time.sleep(20)'", "python -c 'import sys, time; time.sleep(20); sys.exit(1)'"), at=None, object_name=None),
    Knob(name='backoffLimit', kind='RayJob', path='spec.backoffLimit', values=(None, 1, 2), at=None, object_name=None),
    Knob(name='submitterBackoffLimit', kind='RayJob', path='spec.submitterConfig.backoffLimit', values=(None, 0, 1), at=None, object_name=None),
    Knob(name='shutdownAfterJobFinishes', kind='RayJob', path='spec.shutdownAfterJobFinishes', values=(True, False), at=None, object_name=None),
    Knob(name='ttlSecondsAfterFinished', kind='RayJob', path='spec.ttlSecondsAfterFinished', values=(None, 10), at=None, object_name=None),
    Knob(name='activeDeadlineSeconds', kind='RayJob', path='spec.activeDeadlineSeconds', values=(None, 30, 120), at=None, object_name=None),
    Knob(name='workers', kind='RayJob', path='spec.rayClusterSpec.workerGroupSpecs.0.replicas', values=(1, 0, 2), at=None, object_name=None),
    Knob(name='suspend', kind='RayJob', path='spec.suspend', values=(None, True), at=8.0, object_name=None),
    Knob(name='unsuspend', kind='RayJob', path='spec.suspend', values=(None, False), at=40.0, object_name=None)],
    setup=Setup(operator_replicas=2, redis=False, nodes=3, serve_import_paths=(), install=None, operator='kuberay-operator', lease='ray-operator-leader', traffic=(), traffic_interval=1.0),
    goal=Goal(kind='RayJob', path='status.jobDeploymentStatus', states=('Complete', 'Failed', 'Suspended', 'ValidationFailed'), horizon=400.0, delete=True, after_delete=60.0, clear=()),
    scenario=None)

KNOBS = {}

PLAN = [LoseSubmitter(at=20.105, owner='demo-job', how='job')]

INVARIANT = 'rayjob-submitter-recovered'

# the trace digest of the explorer's run: a replay with another one is not the
# same run (the emulator or the port changed since)
DIGEST = '6242df2c4a2a8cc890d1859b713069bd3b7acc0bd29e063c8887ead51cb5bb53'


@pytest.mark.emu(seed=1, **world_options(WORKLOAD))
async def test_rayjob_rayjob_submitter_recovered(sim):
    found = await replay(sim, WORKLOAD, KNOBS, PLAN)
    broken = [v for v in found if v['invariant'] == INVARIANT]
    assert not broken, explain(broken, sim, DIGEST)
