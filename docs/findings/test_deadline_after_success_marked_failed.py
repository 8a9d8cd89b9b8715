# Written by emu explore (emu.explore.export): the long lines are data.
# ruff: noqa: E501, I001, RUF100
"""Found by the explorer: rayjob-status-consistent on workload 'rayjob', seed 2.

RayJob default/demo-job had jobDeploymentStatus Failed (reason DeadlineExceeded) with jobStatus
SUCCEEDED, from t=32.855s (longer than the bound of 5s)

Fails while the port keeps the behaviour (KubeRay's, see docs/findings.md).
Found with: emu explore rayjob --seed 2 --budget 150 --families perturbations,lose-responses
"""

import pytest

from emu.explore.export import explain, replay
from emu.explore.runner import world_options
from emu.explore.workload import Goal, Knob, Setup, Workload
from emu.faults import CoalesceEvents

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
    setup=Setup(operator_replicas=2, redis=False, nodes=3, serve_import_paths=(), install=None, operator='kuberay-operator', lease='ray-operator-leader'),
    goal=Goal(kind='RayJob', path='status.jobDeploymentStatus', states=('Complete', 'Failed', 'Suspended', 'ValidationFailed'), horizon=400.0, delete=True, after_delete=60.0),
    scenario=None)

KNOBS = {'activeDeadlineSeconds': 30, 'submissionMode': 'SidecarMode', 'workers': 0}

PLAN = [CoalesceEvents(at=16.738, process='default/kuberay-operator-qzcxtfbltw-shmk8/kuberay-operator', kind='Pod', duration=20.0)]

INVARIANT = 'rayjob-status-consistent'

# the trace digest of the explorer's run: a replay with another one is not the
# same run (the emulator or the port changed since)
DIGEST = '5eb5d881cb75a77bd80988e6360b1ad8c0bb25c0de1786dcb21a33ea0f96f97c'


@pytest.mark.emu(seed=2, **world_options(WORKLOAD))
async def test_rayjob_rayjob_status_consistent(sim):
    found = await replay(sim, WORKLOAD, KNOBS, PLAN)
    broken = [v for v in found if v['invariant'] == INVARIANT]
    assert not broken, explain(broken, sim, DIGEST)
