"""The ray.io CRDs' schema defaults are applied on create, as the real API server does."""

from __future__ import annotations

import emu

HEAD = {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}
WORKER = {"groupName": "small", "template": {"spec": {"containers": [
    {"name": "ray-worker", "image": "rayproject/ray"}]}}}


def test_raycluster_worker_groups_get_replica_bounds_and_num_of_hosts_defaults():
    async def main(sim):
        return await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                "metadata": {"name": "rc"},
                                "spec": {"headGroupSpec": HEAD,
                                         "workerGroupSpecs": [WORKER, {**WORKER, "groupName": "b",
                                                                       "replicas": 2}]}})

    rc = emu.run(main)
    groups = rc["spec"]["workerGroupSpecs"]
    assert [(g["replicas"], g["minReplicas"], g["maxReplicas"], g["numOfHosts"]) for g in groups] \
        == [(0, 0, 2147483647, 1), (2, 0, 2147483647, 1)]


def test_rayjob_defaults_submission_mode_backoff_limit_and_its_cluster_spec():
    async def main(sim):
        return await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayJob",
                                "metadata": {"name": "rj"},
                                "spec": {"entrypoint": "python x.py",
                                         "rayClusterSpec": {"headGroupSpec": HEAD,
                                                            "workerGroupSpecs": [WORKER]}}})

    spec = emu.run(main)["spec"]
    assert (spec["submissionMode"], spec["backoffLimit"]) == ("K8sJobMode", 0)
    assert spec["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"] == 2147483647


def test_rayservice_defaults_its_cluster_config_worker_groups():
    async def main(sim):
        return await sim.apply({"apiVersion": "ray.io/v1", "kind": "RayService",
                                "metadata": {"name": "rs"},
                                "spec": {"rayClusterConfig": {"headGroupSpec": HEAD,
                                                              "workerGroupSpecs": [WORKER]}}})

    group = emu.run(main)["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    assert (group["minReplicas"], group["numOfHosts"]) == (0, 1)
