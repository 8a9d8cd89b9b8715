"""Deleting a RayCluster with Redis fault tolerance: the finalizer and the cleanup Job.

The article: the Redis path cleans up by default — deleting the cluster deletes its data in
Redis, so an external Redis is not an archive. KubeRay adds a finalizer to a RayCluster with
Redis GCS FT; on deletion it waits for the head Pod to be gone, runs a Job that deletes the
cluster's storage namespace (its UID) in Redis, and removes the finalizer when the Job ends.
"""

from __future__ import annotations

from typing import Any

from ..kernel.trace import TraceEvent
from ..simulation import Simulation
from . import Report, scenario
from ._common import NS, Narrator, kube, ray_pods, raycluster, start, workers_ready

FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"


async def _keys(sim: Simulation, namespace: str) -> int:
    """How many Redis keys hold storage namespace ``namespace`` (read on the server itself)."""
    server = sim.ray_config.records.redis_servers["redis"]
    keys: list[Any] = await server._raw.keys(f"RAY{namespace}@*".encode())
    return len(keys)


@scenario("redis-cleanup",
          "deleting a RayCluster with Redis FT: finalizer, cleanup Job only after the head is "
          "gone, its Redis keys removed and no other cluster's", cluster=kube(stop_delay=5))
async def redis_cleanup(sim: Simulation, report: Report) -> None:
    """Two RayClusters, ``a`` and ``b``, keep their GCS tables in one Redis (each under its own
    UID); containers take 5 s to exit on SIGTERM. ``a`` is deleted. Expectations:

    - both carry KubeRay's ``ray.io/gcs-ft-redis-cleanup-finalizer``; ``a`` stays (with a
      deletionTimestamp) while its Pods go;
    - the cleanup Job ``a-redis-cleanup`` is created only after ``a``'s head Pod is gone;
    - the Job completes, the finalizer is removed and ``a`` disappears;
    - ``a``'s keys are gone from Redis; ``b``'s are all still there.
    """
    Narrator(sim)
    await start(sim, redis=True)
    await sim.apply(raycluster("a", storage="redis"))
    await sim.apply(raycluster("b", storage="redis"))
    for name in ("a", "b"):
        await sim.wait_for("RayCluster", name, workers_ready(1), timeout=300)
    uids = {}
    finalizers = {}
    for name in ("a", "b"):
        obj = await sim.get("RayCluster", name) or {}
        uids[name] = obj["metadata"]["uid"]
        finalizers[name] = list(obj["metadata"].get("finalizers") or [])
    before = {name: await _keys(sim, uid) for name, uid in uids.items()}
    box: dict[str, float] = {}

    def on_event(ev: TraceEvent) -> None:
        f = ev.fields
        if ev.event != "write":
            return
        if f.get("kind") == "Pod" and f.get("verb") == "delete" and \
                str(f.get("name", "")).startswith("a-head-") and \
                sim.api.list("Pod", NS, field_selector=f"metadata.name={f.get('name')}")[
                    "items"] == []:
            box.setdefault("head_gone", ev.t)
        elif f.get("kind") == "Job" and f.get("verb") == "create" and f.get("name") == \
                "a-redis-cleanup":
            box.setdefault("job_created", ev.t)
        elif f.get("kind") == "RayCluster" and f.get("name") == "a" and \
                f.get("verb") == "delete":
            box.setdefault("deleted" if "deleted" in box or "requested" in box
                           else "requested", ev.t)

    sim.trace.subscribe(on_event)
    requested = sim.now
    await sim.client("kubectl").delete("RayCluster", "a", NS)
    held = await sim.get("RayCluster", "a")
    job = await sim.wait_for("Job", "a-redis-cleanup", lambda j: any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in (j.get("status") or {}).get("conditions") or []), timeout=600)
    await sim.wait_until(lambda: sim.api.list("RayCluster", NS, field_selector=(
        "metadata.name=a"))["items"] == [], timeout=120, every=0.5, what="RayCluster a gone")
    gone_at = next((e.t for e in sim.trace.select("raycluster_gone")
                    if e.fields.get("raycluster") == "a"), sim.now)
    after = {name: await _keys(sim, uid) for name, uid in uids.items()}
    outcome = [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"]

    report.fact("storage_namespaces", uids)
    report.fact("redis_keys_before", before)
    report.fact("redis_keys_after", after)
    report.fact("delete_requested_at", round(requested, 3))
    report.fact("head_gone_at", round(box.get("head_gone", float("nan")), 3))
    report.fact("cleanup_job_created_at", round(box.get("job_created", float("nan")), 3))
    report.fact("cluster_gone_at", round(gone_at, 3))
    report.expect("both clusters carry the Redis cleanup finalizer, and a deleted one is held "
                  "with a deletionTimestamp", all(FINALIZER in f for f in finalizers.values())
                  and held is not None and bool(held["metadata"].get("deletionTimestamp")),
                  f"{finalizers}")
    report.expect("the cleanup Job is created only after the head Pod is gone",
                  "head_gone" in box and "job_created" in box
                  and box["head_gone"] <= box["job_created"],
                  f"head gone t={box.get('head_gone', float('nan')):.3f}s, Job "
                  f"t={box.get('job_created', float('nan')):.3f}s")
    report.expect("the Job completes and the finalizer's removal lets the cluster go",
                  outcome[-1:] == ["Complete"] and not ray_pods(sim, "a", "head"),
                  f"Job {outcome}, cluster gone t={gone_at:.3f}s")
    report.expect("a's keys are removed from Redis; b's are all still there",
                  before["a"] > 0 and after["a"] == 0 and after["b"] == before["b"] > 0,
                  f"a {before['a']} -> {after['a']}, b {before['b']} -> {after['b']}")
