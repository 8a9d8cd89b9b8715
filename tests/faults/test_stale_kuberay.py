"""`StaleList` on KubeRay: a restarted operator whose Pod cache starts behind.

KubeRay's scale expectations live in the operator's memory, so a restarted operator trusts its
first Pod list entirely. When that list is served at a revision from before the cluster's Pods
were created (an API server whose watch cache lags: Sieve's stale-state class), the port — as
KubeRay's Go `reconcilePods`, whose head Pods use ``generateName`` — creates a second head and a
second set of workers; once the cache catches up, every reconcile stops at "2 head pods found
... Please delete extra head pods" and nothing removes them. Without the stale list the restart
is harmless. (A finding, not a fix: the port stays faithful.)
"""

from __future__ import annotations

import emu
from emu.faults import StaleList
from emu.kuberay.operator import Configuration, operator_config
from emu.kuberay.utils.features import parse_feature_gates
from emu.runtime import start_operator

NS = "default"


def raycluster() -> dict[str, object]:
    container = {"name": "ray", "image": "rayproject/ray:2.46.0"}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": NS},
            "spec": {"rayVersion": "2.46.0",
                     "headGroupSpec": {"rayStartParams": {},
                                       "template": {"spec": {"containers": [container]}}},
                     "workerGroupSpecs": [{
                         "groupName": "small", "replicas": 3, "minReplicas": 0,
                         "maxReplicas": 5, "rayStartParams": {},
                         "template": {"spec": {"containers": [container]}}}]}}


def restart_operator(seed: int, *, stale: bool) -> tuple[int, int]:
    """Head and worker Pods a minute after the operator restarted (its Pod list stale or not)."""

    async def main(sim: emu.Simulation) -> tuple[int, int]:
        config = Configuration(enable_leader_election=False)
        start_operator(sim, "kuberay-operator",
                       operator_config(config, parse_feature_gates(""), env={}, pod_namespace=NS))
        await sim.sleep(1)
        before_pods = sim.api.store.rev
        await sim.apply(raycluster())
        await sim.sleep(5)
        if stale:
            sim.faults.do(StaleList(process="kuberay-operator", kind="Pod",
                                    at_revision=before_pods, hold=10))
        sim.faults.restart("kuberay-operator")
        await sim.sleep(60)
        client = sim.client()
        heads = await client.list("Pod", NS, label_selector="ray.io/node-type=head")
        workers = await client.list("Pod", NS, label_selector="ray.io/node-type=worker")
        if stale:
            [listed] = sim.trace.select(event="stale_list")
            assert listed.fields["revision"] == before_pods
        return len(heads), len(workers)

    return emu.run(main, seed=seed)


def test_a_restart_with_a_current_cache_keeps_one_head() -> None:
    assert restart_operator(1, stale=False) == (1, 3)


def test_a_restart_with_a_stale_pod_list_creates_a_second_head_for_good() -> None:
    assert restart_operator(1, stale=True) == (2, 6)
    assert restart_operator(1, stale=True) == (2, 6)  # replays
