"""The head Pod lost, with each GCS storage; and the annotation that keeps a lost head dead.

The article: the head runs the GCS; with the default in-memory storage a lost head takes the
cluster's metadata with it, and a recreated head does not restore the old cluster. With Redis
fault tolerance (``gcsFaultToleranceOptions``, RAY_REDIS_ADDRESS injected into the head) the new
GCS reloads the tables from Redis, provided the data is still there under the same storage
namespace (the RayCluster's UID). KubeRay gives workers a 600 s reconnect window with FT (Ray's
default is 60 s). RocksDB (alpha, behind a feature gate) keeps the tables on a PVC instead.
"""

from __future__ import annotations

from ..apiserver.errors import ApiError
from ..faults import DeletePod, SlowKubelet
from ..kernel.trace import TraceEvent
from ..ray.workloads import RayClient
from ..simulation import Simulation
from . import Report, scenario
from ._common import (
    NS,
    Counter,
    Narrator,
    condition,
    head_svc,
    kube,
    names,
    ray_pods,
    raycluster,
    restarts,
    start,
    workers_ready,
)

#: How long the new head takes to start (a slow container start: an image pull on a fresh
#: Node, say): longer than Ray's default 60 s reconnect window, shorter than KubeRay's 600 s.
HEAD_RETURN = 90.0
#: How long after the loss the scenario looks.
LOOK_AFTER = 100.0


def _is_head_pod_name(cluster: str, name: str) -> bool:
    """Whether ``name`` is one KubeRay gives ``cluster``'s head Pod: ``<cluster>-head-`` and five
    random characters (``generateName``), or the fixed ``<cluster>-head`` that
    ``ENABLE_DETERMINISTIC_HEAD_POD_NAME=true`` selects and that KubeRay up to v1.4 always used."""
    return name == f"{cluster}-head" or name.startswith(f"{cluster}-head-")


def _head_creates(sim: Simulation, cluster: str, since: float) -> list[float]:
    """When a head Pod of ``cluster`` was created, from ``since`` on (the API server's writes)."""
    return [e.t for e in sim.trace.select("write") if e.fields.get("kind") == "Pod"
            and e.fields.get("verb") == "create"
            and _is_head_pod_name(cluster, str(e.fields.get("name"))) and e.t >= since]


def _slow_new_head(sim: Simulation, cluster: str, old_uid: str) -> None:
    """Once the replacement head Pod is bound to a Node, that Node's kubelet takes
    `HEAD_RETURN` seconds more to start it (only what starts in the next half second). The
    replacement is told from the lost head by its UID, not its name: KubeRay up to v1.4 gives
    the new head the old one's name."""
    done: list[bool] = []

    def on_event(ev: TraceEvent) -> None:
        name = str(ev.fields.get("name", ""))
        if done or ev.event != "write" or ev.fields.get("kind") != "Pod" or \
                ev.fields.get("verb") == "delete" or not _is_head_pod_name(cluster, name):
            return
        try:
            pod = sim.api.get("Pod", name, NS)
        except ApiError:  # NotFound: gone again
            return
        meta = pod.get("metadata") or {}
        if meta.get("uid") == old_uid or \
                (meta.get("labels") or {}).get("ray.io/node-type") != "head":
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            done.append(True)
            sim.faults.do(SlowKubelet(node=node, seconds=HEAD_RETURN, duration=0.5))

    sim.trace.subscribe(on_event)


async def _head_loss(sim: Simulation, report: Report, storage: str) -> None:
    Narrator(sim)
    gates = {"GCSFaultToleranceEmbeddedStorage": True} if storage == "rocksdb" else None
    await start(sim, redis=storage == "redis", feature_gates=gates)
    await sim.apply(raycluster(workers=2, storage=storage))
    await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    old_pod = ray_pods(sim, "raycluster", "head")[0]
    old_head, old_uid = old_pod["metadata"]["name"], old_pod["metadata"]["uid"]
    workers = names(ray_pods(sim, "raycluster", "worker"))
    driver = RayClient(sim.network, f"{head_svc('raycluster')}:6379", caller="driver")
    job_id = await driver.connect()
    nodes = {n["node_name"]: n["node_id"] for n in await driver.nodes()}
    keeper = await driver.create_actor(Counter, name="keeper", detached=True,
                                       node_id=nodes[workers[0]])
    await keeper.call("incr", 3)
    phoenix = await driver.create_actor(Counter, 100, name="phoenix", detached=True,
                                        head=True, num_cpus=0, max_restarts=1)
    await phoenix.call("incr")
    await driver.gcs.kv_put("scenario", "greeting", b"hello")
    before = (await driver.gcs.check_alive())["cluster_id"]

    lost_at = sim.now
    _slow_new_head(sim, "raycluster", old_uid)
    sim.faults.do(DeletePod(name=old_head))
    await sim.sleep(LOOK_AFTER)
    rc = await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=600)
    if storage != "memory":
        async def phoenix_back() -> bool:
            record = await driver.gcs.named_actor("phoenix", "")
            return bool(record and record["num_restarts"] >= 1 and record["state"] == "ALIVE")

        # the new GCS declares the old head node dead after its health checks fail, then
        # restarts the head's actor
        await sim.wait_until(phoenix_back, timeout=120, every=1,
                             what="the head's actor restarted")
    head_pods = ray_pods(sim, "raycluster", "head")
    heads = names(head_pods)
    after = (await driver.gcs.check_alive())["cluster_id"]
    jobs = [j["job_id"] for j in await driver.gcs.jobs()]
    kv = await driver.gcs.kv_get("scenario", "greeting")
    alive = {n["node_name"]: n["node_id"] for n in await driver.nodes() if n["state"] == "ALIVE"}
    survivors = {}
    for name in ("keeper", "phoenix"):
        record = await driver.gcs.named_actor(name, "")
        survivors[name] = None if record is None else (record["state"], record["num_restarts"])
    fatal = [(round(e.t - lost_at, 3), e.process.split("/")[1], str(e.fields.get("message")))
             for e in sim.trace.select("raylet_fatal") if e.t > lost_at]
    rejoined = [(e.process.split("/")[1], round(float(e.fields.get("after", 0)), 3))
                for e in sim.trace.select("gcs_reconnected") if e.t > lost_at]
    worker_restarts = {p["metadata"]["name"]: restarts(p)
                       for p in ray_pods(sim, "raycluster", "worker")}
    new_head = _head_creates(sim, "raycluster", lost_at)

    report.fact("head_lost_at", round(lost_at, 3))
    report.fact("new_head_created_after", round(new_head[0] - lost_at, 3) if new_head else None)
    report.fact("cluster_id_kept", after == before)
    report.fact("new_gcs_knows", {"jobs": len(jobs), "driver_job": job_id in jobs,
                                  "kv_greeting": kv, "actors": survivors})
    report.fact("worker_raylet_exits", [(t, pod, msg.split(".")[0]) for t, pod, msg in fatal])
    report.fact("worker_reconnects", rejoined)
    report.fact("worker_restarts", worker_restarts)
    report.expect("KubeRay creates a new head Pod; the cluster is ready again with two workers",
                  len(heads) == 1 and head_pods[0]["metadata"]["uid"] != old_uid
                  and workers_ready(2)(rc)
                  and condition(rc, "RayClusterProvisioned").get("status") == "True",
                  f"head {old_head} -> {heads}")
    if storage == "memory":
        report.expect("the new GCS is a new, empty cluster: new cluster id, no jobs, no actors, "
                      "no KV", after != before and not jobs and kv is None
                      and survivors == {"keeper": None, "phoenix": None},
                      f"cluster id {before[:8]} -> {after[:8]}, {len(jobs)} jobs")
        report.expect("the workers' raylets exit when Ray's 60 s reconnect window ends, and "
                      "their containers restart and join the new cluster as new nodes",
                      sorted(p for _, p, _ in fatal) == sorted(workers)
                      and all(60 <= t <= 61.5 for t, _, _ in fatal)
                      and all(worker_restarts.get(w, 0) >= 1 for w in workers)
                      and all(w in alive and alive[w] != nodes[w] for w in workers),
                      f"exits {[(t, m.split('.')[0]) for t, _, m in fatal]}")
        report.expect("no actor survives: not even the worker's, whose process was fine",
                      survivors == {"keeper": None, "phoenix": None}, f"{survivors}")
        return
    report.expect("the new GCS reloads the old cluster from storage: same cluster id, the "
                  "driver's job, the KV entry", after == before and job_id in jobs
                  and kv == b"hello", f"cluster id {before[:8]} -> {after[:8]}")
    report.expect("the workers wait out the head's 90 s absence inside KubeRay's 600 s window "
                  "(Ray's default 60 s would have ended them) and re-register without "
                  "restarting",
                  not fatal and sorted(p for p, _ in rejoined) == sorted(workers)
                  and all(60 < a < 600 for _, a in rejoined)
                  and all(worker_restarts.get(w) == 0 for w in workers)
                  and all(alive.get(w) == nodes[w] for w in workers),
                  f"reconnected after {[a for _, a in rejoined]} s")
    keeper_count = await keeper.call("get")
    # a fresh handle: the old one holds the address of the actor's first incarnation
    phoenix_count = await (await driver.get_actor("phoenix")).call("get")
    report.expect("the worker's actor lives on with its memory; the head's actor is restarted "
                  "from its spec with fresh memory", survivors == {
                      "keeper": ("ALIVE", 0), "phoenix": ("ALIVE", 1)}
                  and keeper_count == 3 and phoenix_count == 100,
                  f"{survivors}, keeper={keeper_count}, phoenix={phoenix_count}")


@scenario("head-loss-memory",
          "the head Pod lost with in-memory GCS storage: a new, empty cluster; workers' raylets "
          "exit and restart; no actor or job survives", cluster=kube())
async def head_loss_memory(sim: Simulation, report: Report) -> None:
    """A RayCluster (head and two workers, default in-memory GCS) runs a driver's job, a
    detached actor on a worker, a restartable detached actor on the head and a KV entry; the
    head Pod is deleted, and its replacement takes 90 s to start. Expectations:

    - KubeRay creates a new head Pod (a new Pod: a new UID, and a new name since v1.5) and the
      cluster is ready again;
    - the new GCS is a new cluster: new cluster id, no jobs, no actors, no KV entry;
    - the workers' raylets exit when Ray's 60 s reconnect window ends, and their containers
      restart and join the new cluster as new nodes;
    - no actor survives, not even the one whose worker process never died.
    """
    await _head_loss(sim, report, "memory")


@scenario("head-loss-redis",
          "the head Pod lost with Redis GCS fault tolerance: same cluster id, jobs, actors and KV "
          "reloaded; workers re-register within 600 s", cluster=kube())
async def head_loss_redis(sim: Simulation, report: Report) -> None:
    """The same cluster with ``gcsFaultToleranceOptions.redisAddress`` (a Redis Pod in the
    namespace): KubeRay sets RAY_REDIS_ADDRESS and the storage namespace (the cluster's UID) on
    the head, and a 600 s reconnect window on the workers. The new head again takes 90 s to
    start. Expectations:

    - KubeRay creates a new head Pod and the cluster is ready again;
    - the new GCS reloads the old cluster: same cluster id, the driver's job, the KV entry;
    - the workers wait out the 90 s inside their 600 s window and re-register without
      restarting (same node ids);
    - the worker's actor lives on with its memory (its process never died); the head's actor
      is restarted from the stored creation spec (``max_restarts=1``) with fresh memory.
    """
    await _head_loss(sim, report, "redis")


@scenario("head-loss-rocksdb",
          "the head Pod lost with embedded RocksDB GCS storage on a PVC: the new head reloads "
          "the tables from the volume; workers re-register", cluster=kube())
async def head_loss_rocksdb(sim: Simulation, report: Report) -> None:
    """The same cluster with ``gcsFaultToleranceOptions.backend: rocksdb`` (feature gate
    ``GCSFaultToleranceEmbeddedStorage`` on): KubeRay creates a PVC owned by the RayCluster and
    mounts it on the head; the new head Pod mounts the same volume. Expectations are those of
    ``head-loss-redis``: same cluster id, job, KV and actors; workers re-register in time.
    """
    await _head_loss(sim, report, "rocksdb")


@scenario("head-restart-disabled",
          "ray.io/disable-provisioned-head-restart on a provisioned cluster: the lost head is "
          "not recreated", cluster=kube())
async def head_restart_disabled(sim: Simulation, report: Report) -> None:
    """A RayCluster annotated ``ray.io/disable-provisioned-head-restart: "true"`` (what KubeRay
    sets on SidecarMode RayJobs' clusters) becomes ready (``RayClusterProvisioned``), then its
    head Pod is deleted. Expectations:

    - for two minutes, through repeated reconciles of the cluster, no head Pod is created;
    - the cluster reports ``HeadPodReady`` False with reason ``HeadPodNotFound``;
    - its workers, without a GCS, have their raylets exit after Ray's 60 s window.
    """
    Narrator(sim)
    await start(sim)
    await sim.apply(raycluster(workers=1, annotations={
        "ray.io/disable-provisioned-head-restart": "true"}))
    rc = await sim.wait_for("RayCluster", "raycluster", workers_ready(1), timeout=300)
    provisioned = condition(rc, "RayClusterProvisioned").get("status")
    head = names(ray_pods(sim, "raycluster", "head"))[0]
    lost_at = sim.now
    sim.faults.do(DeletePod(name=head))
    await sim.sleep(120)
    rc = await sim.get("RayCluster", "raycluster") or {}
    passes = [e.t for e in sim.trace.select("reconcile_started")
              if e.fields.get("controller") == "raycluster" and e.t > lost_at + 1]
    created = _head_creates(sim, "raycluster", lost_at)
    exits = [(round(e.t - lost_at, 3), str(e.fields.get("message")).split(".")[0])
             for e in sim.trace.select("raylet_fatal") if e.t > lost_at]
    fatal = [t for t, _ in exits]
    report.fact("reconciles_after_loss", len(passes))
    report.fact("worker_raylet_exits_after", fatal)
    report.expect("the cluster was provisioned before the loss", provisioned == "True", "")
    report.expect("no head Pod is created through two minutes of reconciles",
                  not created and not ray_pods(sim, "raycluster", "head") and len(passes) >= 2,
                  f"{len(passes)} reconciles, head creates {created}")
    ready = condition(rc, "HeadPodReady")
    report.expect("HeadPodReady is False with reason HeadPodNotFound",
                  (ready.get("status"), ready.get("reason")) == ("False", "HeadPodNotFound"),
                  f"{ready.get('status')}/{ready.get('reason')}")
    report.expect("the workers' raylets exit after Ray's 60 s window without a GCS",
                  bool(fatal) and all(60 <= t <= 61.5 for t in fatal),
                  "; ".join(f"after {t} s: {why}" for t, why in exits) or "none exited")
