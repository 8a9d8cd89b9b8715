"""cleanup-after-delete: no dependents, finalizers or Redis keys outlive a deletion's bound."""

from __future__ import annotations

import fakeredis
from invariant_worlds import create, delete, owner_ref, pod, raycluster, rayjob

from emu.invariants import Cleanup, Monitors, Violation


async def test_a_pod_left_behind_by_a_deleted_cluster_is_reported(sim):
    monitors = Monitors.attach(sim, [Cleanup(bound=30.0)])
    rc = create(sim, raycluster("rc"))
    create(sim, pod("rc-head", cluster="rc", owner=owner_ref(rc)))
    await sim.sleep(10)
    delete(sim, "RayCluster", "rc")   # the bare API server runs no garbage collector
    assert await monitors.finish(sim) == [Violation(
        "cleanup-after-delete",
        "RayCluster default/rc was deleted at t=10.000s but 30s later 1 of its objects "
        "remained: Pod/default/rc-head", 40.0, ("RayCluster/default/rc", "Pod/default/rc-head"))]


async def test_a_dependent_removed_in_time_and_a_cluster_of_a_deleted_job_are_clean(sim):
    monitors = Monitors.attach(sim, [Cleanup(bound=30.0)])
    job = create(sim, rayjob("rj"))
    rc = create(sim, raycluster("rj-a", owner=owner_ref(job)))
    create(sim, pod("rj-a-head", cluster="rj-a", owner=owner_ref(rc)))
    delete(sim, "RayJob", "rj")
    sim.call_later(20, lambda: delete(sim, "Pod", "rj-a-head"))
    sim.call_later(25, lambda: delete(sim, "RayCluster", "rj-a"))
    await monitors.assert_ok(sim)


async def test_a_finalizer_that_stays_is_reported_even_if_removed_later(sim):
    monitors = Monitors.attach(sim, [Cleanup(bound=30.0)])
    create(sim, rayjob("rj", finalizers=["ray.io/rayjob-finalizer"]))
    await sim.sleep(5)
    delete(sim, "RayJob", "rj")
    await sim.sleep(50)
    obj = sim.api.get("RayJob", "rj", "default")
    obj["metadata"]["finalizers"] = []
    sim.api.update(obj, caller="test")
    assert await monitors.finish(sim) == [Violation(
        "cleanup-after-delete",
        "RayJob default/rj was still present 30s after its deletion at t=5.000s "
        "(cleared only after the deadline)", 35.0, ("RayJob/default/rj",))]


class FakeRedisServer:
    """What the cleanup check reads of a ``RedisServer``: its fakeredis server."""

    def __init__(self, keys):
        self.server = fakeredis.FakeServer()
        raw = fakeredis.FakeRedis(server=self.server)
        for key in keys:
            raw.set(key, b"1")


async def test_redis_keys_of_a_deleted_redis_ft_cluster_are_reported(sim):
    monitors = Monitors.attach(sim, [Cleanup(bound=30.0)])
    sim.ray_config.records.redis_servers["redis"] = FakeRedisServer(
        [b"RAYns-a@NODE:1", b"RAYns-a@JOB:2", b"RAYns-b@NODE:1"])
    for name in ("a", "b"):
        rc = raycluster(name)
        rc["metadata"]["finalizers"] = ["ray.io/gcs-ft-redis-cleanup-finalizer"]
        create(sim, rc)
        create(sim, pod(f"{name}-head", cluster=name))
        sim.trace.emit(f"default/{name}-head/ray-head/gcs_server", "gcs_started",
                       storage="redis", namespace=f"ns-{name}")
    delete(sim, "Pod", "a-head")
    obj = sim.api.get("RayCluster", "a", "default")
    obj["metadata"]["finalizers"] = []
    sim.api.update(obj, caller="test")
    delete(sim, "RayCluster", "a")
    assert await monitors.finish(sim) == [Violation(
        "cleanup-after-delete",
        "RayCluster default/a was deleted at t=0.000s with the Redis cleanup finalizer, but 30s "
        "later its storage namespace ns-a still had 2 keys on Redis redis", 30.0,
        ("RayCluster/default/a",))]
