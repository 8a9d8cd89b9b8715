# Written by emu explore (emu.explore.export): the long lines are data.
# ruff: noqa: E501, I001
"""Found by the explorer: retry-attempts-fenced on workload 'rayjob', seed 1.

RayJob default/demo-job had Pods of attempt 1 (RayCluster demo-job-s825x: demo-
job-s825x-workers-worker-wh9bw on Node node-2 (Ready Unknown), demo-job-s825x-head-4zgb4 on Node
node-2 (Ready Unknown)) and attempt 2 (RayCluster demo-job-s4ccw: demo-job-s4ccw-head-cgxcx)
running at once, from t=95.207s

Fails while the port keeps the behaviour (KubeRay's, see docs/findings.md).
Found with: emu explore rayjob --seed 1 --budget 2000
"""

import pytest

from emu.explore.export import replay
from emu.explore.runner import world_options
from emu.explore.workload import Goal, Knob, Setup, Workload
from emu.explore.faults import LoseRayPod

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

KNOBS = {'backoffLimit': 1}

PLAN = [LoseRayPod(at=34.457, owner='demo-job', node_type='head', how='delete', index=0, duration=None), LoseRayPod(at=38.105, owner='demo-job', node_type='head', how='node', index=0, duration=60.0)]

INVARIANT = 'retry-attempts-fenced'


@pytest.mark.emu(seed=1, **world_options(WORKLOAD))
async def test_rayjob_retry_attempts_fenced(sim):
    found = await replay(sim, WORKLOAD, KNOBS, PLAN)
    broken = [v for v in found if v['invariant'] == INVARIANT]
    assert not broken, '\n'.join(f"t={v['at']:.3f}s {v['message']}" for v in broken)
