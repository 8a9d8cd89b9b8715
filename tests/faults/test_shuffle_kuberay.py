"""`ShuffleLists` on KubeRay: a fixed scale-down bug that depends on which Pod of a list comes
first becomes visible again when it is re-introduced, and only with the shuffle.

The bug (ray-project/kuberay#1192, fixed by #1251 in v0.6.0): `reconcilePods` deleted the Pods
named in ``scaleStrategy.workersToDelete`` but did not drop them from ``runningPods``, so
``diff = replicas - len(runningPods)`` still counted them and KubeRay deleted that many more
Pods from the front of the list. When the front of the list is the Pod already being deleted,
the second delete is a no-op and nothing shows; when it is another Pod, a healthy worker is
killed. A sorted cache list hides the bug whenever the Pod to delete sorts first; Go's cache
returns map order, which `ShuffleLists` restores. The port itself keeps the fixed form; the
test re-introduces the buggy line into a copy of the method, without changing the port.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

import pytest

import emu
import emu.kuberay.raycluster as raycluster_module
from emu.faults import ShuffleLists
from emu.kuberay.operator import Configuration, operator_config
from emu.kuberay.raycluster import RayClusterReconciler
from emu.kuberay.utils.features import parse_feature_gates
from emu.runtime import start_operator

NS = "default"
FIXED = 'running = [p for p in worker_pods if p["metadata"]["name"] not in deleted]'
BUGGY = "running = list(worker_pods)  # before ray-project/kuberay#1251"


def raycluster(replicas: int) -> dict[str, Any]:
    container = {"name": "ray", "image": "rayproject/ray:2.46.0"}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": NS},
            "spec": {"rayVersion": "2.46.0",
                     "headGroupSpec": {"rayStartParams": {},
                                       "template": {"spec": {"containers": [container]}}},
                     "workerGroupSpecs": [{
                         "groupName": "small", "replicas": replicas, "minReplicas": 0,
                         "maxReplicas": 5, "rayStartParams": {},
                         "template": {"spec": {"containers": [container]}}}]}}


def buggy_reconcile_worker_group() -> Any:
    """`_reconcile_worker_group` with the pre-#1251 line, compiled from the port's own source."""
    source = textwrap.dedent(inspect.getsource(RayClusterReconciler._reconcile_worker_group))
    assert source.count(FIXED) == 1, "the port's line changed: update this test"
    namespace = dict(vars(raycluster_module))
    exec(compile(source.replace(FIXED, BUGGY), raycluster_module.__file__, "exec"), namespace)
    return namespace["_reconcile_worker_group"]


def scale_down(seed: int, *, shuffle: bool) -> list[str]:
    """Three workers; replicas 2 with workersToDelete = the Pod whose name sorts first. Which
    of the original workers were deleted."""

    async def main(sim: emu.Simulation) -> list[str]:
        config = Configuration(enable_leader_election=False)
        start_operator(sim, "kuberay-operator",
                       operator_config(config, parse_feature_gates(""), env={}, pod_namespace=NS))
        await sim.apply(raycluster(3))
        await sim.sleep(5)
        client = sim.client()
        workers = sorted(p["metadata"]["name"] for p in await client.list(
            "Pod", NS, label_selector="ray.io/node-type=worker"))
        assert len(workers) == 3
        if shuffle:
            sim.faults.do(ShuffleLists(process="kuberay-operator", kind="Pod"))
        await client.patch("RayCluster", "rc", {"spec": {"workerGroupSpecs": [{
            **raycluster(2)["spec"]["workerGroupSpecs"][0],
            "scaleStrategy": {"workersToDelete": [workers[0]]}}]}}, NS)
        await sim.sleep(10)
        now = {p["metadata"]["name"] for p in await client.list(
            "Pod", NS, label_selector="ray.io/node-type=worker")}
        assert len(now) == 2  # the replica count converges either way
        return [w for w in workers if w not in now]

    return emu.run(main, seed=seed)


SEEDS = range(1, 5)  # seed 2 shows the bug (and 6, among the next ones)


def test_the_port_deletes_only_the_named_worker_with_or_without_shuffle() -> None:
    for seed in SEEDS:
        assert len(scale_down(seed, shuffle=False)) == 1
        assert len(scale_down(seed, shuffle=True)) == 1


def test_the_reintroduced_bug_is_hidden_by_sorted_lists_and_shown_by_shuffle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RayClusterReconciler, "_reconcile_worker_group",
                        buggy_reconcile_worker_group())
    sorted_runs = {seed: scale_down(seed, shuffle=False) for seed in SEEDS}
    shuffled_runs = {seed: scale_down(seed, shuffle=True) for seed in SEEDS}
    # Sorted: the extra delete always hits the Pod already named, so nothing shows.
    assert all(len(deleted) == 1 for deleted in sorted_runs.values())
    # Shuffled: under some seeds the extra delete kills a healthy worker.
    extra = [seed for seed, deleted in shuffled_runs.items() if len(deleted) == 2]
    assert extra, shuffled_runs
    # Replayable: the same seed shows the same thing.
    assert scale_down(extra[0], shuffle=True) == shuffled_runs[extra[0]]
