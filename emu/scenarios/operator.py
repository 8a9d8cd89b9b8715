"""The operator's own availability: failover between replicas, one replica, a Recreate upgrade.

The article's first point: leader election is on by default, but the Helm chart runs one
replica, and its Deployment uses the Recreate strategy, so "election on" is not "highly
available". These scenarios show each path with KubeRay running as its Deployment's Pods.
"""

from __future__ import annotations

import copy
from typing import Any

from ..faults import DeletePod, FailNode
from ..invariants import LeadershipTenures, LeaseHolderChecker
from ..kernel.trace import TraceEvent
from ..simulation import Simulation
from . import Report, scenario
from ._common import (
    DEMO,
    LEASE,
    LEASE_DURATION,
    MAX_RETRY,
    NS,
    OBSERVER,
    Narrator,
    OperatorLog,
    ReplicaLife,
    kube,
    names,
    operator_pods,
    ray_pods,
    raycluster,
    rayjob,
    rayjob_done,
    short,
    start,
    workers_ready,
)


def _manager_of(kuberay: Any, process: Any) -> Any:
    for record in kuberay.replica_records:
        if record.process is process:
            return record.manager
    return None


def _node_of(sim: Simulation, process: Any) -> str:
    """The Node of an operator replica's Pod (its process name is ``ns/pod/container``)."""
    pod = process.name.split("/")[1]
    return str(sim.api.get("Pod", pod, NS)["spec"]["nodeName"])


@scenario("operator-failover",
          "two replicas; the leader's Node fails between creating demo-job's submitter Job and "
          "writing the RayJob status; the standby takes over after the Lease expires; one Job, "
          "one submission", cluster=kube(3))
async def operator_failover(sim: Simulation, report: Report) -> None:
    """The article's failover walk-through, with ``demo-job`` (K8sJobMode).

    Two operator replicas on different Nodes, the Ray Pods on a third. The leader creates the
    RayCluster, then the submitter Job ``demo-job``; the instant that create is committed, the
    leader's Node fails (its Pod and process are gone, nothing restarts it for minutes), before
    it writes the RayJob's ``Running`` status. Expectations:

    - the failure landed between the Job create and the status write (the RayJob is still
      ``Initializing``);
    - the standby acquires the Lease no earlier than 15 s (LeaseDuration) after it last saw the
      Lease change, and no later than that plus one jittered retry (4.4 s); its first reconcile
      follows its cache sync (SPEC §7.4);
    - the API server never had two valid holders (`LeaseHolderChecker`);
    - the standby finds the submitter Job by its fixed name: the Job is created once;
    - the RayJob completes: one submitter Job, one Ray submission, under the persisted jobId.

    (Had only the leader's container been killed, the kubelet would restart it at once under a
    new identity, and that newcomer would usually win the race against the standby; the bounds
    hold for whoever wins, measured from its own observation.)
    """
    narrator = Narrator(sim)
    holders = LeaseHolderChecker(sim, NS, LEASE).start()
    tenures = LeadershipTenures(sim.trace)
    kuberay = await start(sim, replicas=2)
    leader = kuberay.leader()
    standby = next(p for p in kuberay.replicas() if p is not leader)
    leader_node, standby_node = _node_of(sim, leader), _node_of(sim, standby)
    ray_node = next(n for n in sim.cluster.node_names if n not in (leader_node, standby_node))
    narrator.say("operator_replicas", leader=short(leader.name), leader_node=leader_node,
                 standby=short(standby.name), standby_node=standby_node)

    box: dict[str, Any] = {}
    job_creates: list[str] = []

    def on_event(ev: TraceEvent) -> None:
        f = ev.fields
        if ev.event == "write" and f.get("kind") == "Job" and f.get("name") == DEMO \
                and f.get("verb") == "create":
            job_creates.append(short(str(f.get("caller"))))
            if f.get("caller") == leader.name and "crash_at" not in box:
                box["crash_at"] = sim.now
                rj = sim.api.get("RayJob", DEMO, NS)
                box["status_at_crash"] = (rj.get("status") or {}).get("jobDeploymentStatus")
                sim.loop.call_soon(sim.faults.do, FailNode(node=leader_node))
        elif ev.event == "leader_acquired" and ev.process == standby.name:
            box.setdefault("acquired", sim.now)
        elif ev.event == "caches_synced" and ev.process == standby.name:
            box["synced"] = sim.now
        elif ev.event == "reconcile_started" and ev.process == standby.name:
            box.setdefault("first_reconcile", sim.now)

    sim.trace.subscribe(on_event)
    await sim.apply(rayjob(DEMO, node=ray_node))
    await sim.wait_until(lambda: "crash_at" in box, timeout=120, every=0.5,
                         what="the submitter Job created by the leader")
    crash_at = box["crash_at"]
    # The standby polls the Lease every 2-4.4 s: 5 s after the failure it has seen the last
    # renewal the dead leader made, and nobody can win before that renewal is 15 s old.
    await sim.sleep(5)
    observed = float(_manager_of(kuberay, standby).elector.observed_time)
    narrator.say("standby_saw_last_lease_change", at=round(observed, 3),
                 expires_for_it_at=round(observed + LEASE_DURATION, 3))
    rj = await sim.wait_for("RayJob", DEMO, rayjob_done, timeout=600)

    report.expect("the leader died after creating the submitter Job and before writing the "
                  "RayJob status", box.get("status_at_crash") == "Initializing"
                  and not leader.alive,
                  f"its Node failed at t={crash_at:.3f}s, RayJob then "
                  f"{box.get('status_at_crash')}")
    acquired = box.get("acquired", float("nan"))
    takeover = acquired - observed
    sync = box.get("synced", acquired) - acquired
    first = box.get("first_reconcile", float("nan"))
    report.fact("leader_lost_at", round(crash_at, 3))
    report.fact("standby_saw_last_lease_change_at", round(observed, 3))
    report.fact("standby_acquired_at", round(acquired, 3))
    report.fact("takeover_after_crash", round(acquired - crash_at, 3))
    report.fact("takeover_after_observed_change", round(takeover, 3))
    report.fact("cache_sync_seconds", round(sync, 3))
    report.expect("the standby acquires the Lease 15 s to 15 + 4.4 s after it last saw it "
                  "change", LEASE_DURATION <= takeover <= LEASE_DURATION + MAX_RETRY,
                  f"{takeover:.3f}s")
    report.expect("its first reconcile follows its cache sync, within 15 + 4.4 s + sync",
                  acquired + sync <= first <= observed + LEASE_DURATION + MAX_RETRY + sync,
                  f"first reconcile at t={first:.3f}s, sync {sync:.3f}s")
    report.expect("the API server never saw two valid Lease holders", not holders.violations,
                  f"{holders.holder_changes} holder changes")
    report.fact("tenures", [(short(t.process), round(t.start, 3), None if t.end is None
                             else round(t.end, 3), t.ended_by) for t in tenures.all()])
    jobs = sim.api.list("Job", NS, label_selector=f"ray.io/originated-from-cr-name={DEMO}")
    report.expect("the standby found the submitter Job by its name: created once",
                  job_creates == [short(leader.name)] and len(jobs["items"]) == 1,
                  f"creates by {job_creates}, {len(jobs['items'])} Job(s)")
    status = rj.get("status") or {}
    accepted = [s.submission_id for s in sim.ray_config.records.accepted()]
    report.fact("job_id", status.get("jobId"))
    report.fact("submissions", accepted)
    report.expect("the RayJob completes with one Ray submission under its persisted jobId",
                  (status.get("jobDeploymentStatus"), status.get("jobStatus")) == (
                      "Complete", "SUCCEEDED") and accepted == [status.get("jobId")],
                  f"{status.get('jobDeploymentStatus')}/{status.get('jobStatus')}, "
                  f"accepted {accepted}")
    holders.stop()


@scenario("operator-single-replica",
          "the Helm defaults (one replica): the operator Pod dies; nothing reconciles until the "
          "Deployment's replacement wins the Lease; a worker lost meanwhile is replaced only then",
          cluster=kube())
async def operator_single_replica(sim: Simulation, report: Report) -> None:
    """Leader election on, one replica (the chart's defaults): no standby.

    A RayCluster with two workers is ready; the operator's Pod is deleted (``--force``), and a
    second later a worker Pod is lost. The Deployment's ReplicaSet starts a replacement Pod at
    once, but its process has a new identity, so it must wait for the dead one's Lease to expire.
    Expectations:

    - the replacement is a new Pod whose first look at the Lease shows the old holder;
    - it acquires the Lease 15 s to 15 + 4.4 s after that first look;
    - no reconcile happens between the old process's death and the replacement's leadership;
    - the lost worker is replaced only after that, and the cluster is ready with two workers.
    """
    Narrator(sim)
    log = OperatorLog(sim)
    await start(sim)
    await sim.apply(raycluster(workers=2))
    await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    [old_pod] = operator_pods(sim)
    old = next(life for life in log.lives if life.ended is None)
    sim.faults.do(DeletePod(name=old_pod["metadata"]["name"], grace_period_seconds=0))
    await sim.wait_until(lambda: old.ended is not None, timeout=30, every=0.25,
                         what="the operator process gone")
    await sim.sleep(1)
    victim = names(ray_pods(sim, "raycluster", "worker"))[0]
    lost_at = sim.now
    sim.faults.do(DeletePod(name=victim, grace_period_seconds=0))
    await sim.wait_until(lambda: any(life.acquired is not None for life in log.lives[1:]),
                         timeout=120, every=0.5, what="the replacement leading")
    await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    new = next(life for life in log.lives[1:] if life.acquired is not None)
    assert old.ended is not None and new.acquired is not None
    created = [t for t, pod in _pod_creates(sim) if t > lost_at]
    report.fact("operator_died_at", round(old.ended, 3))
    report.fact("worker_lost_at", round(lost_at, 3))
    report.fact("replacement_started_at", round(new.started, 3))
    report.fact("replacement_acquired_at", round(new.acquired, 3))
    report.fact("worker_recreated_at", round(created[0], 3) if created else None)
    report.fact("no_reconcile_seconds", round(new.acquired - old.ended, 3))
    report.fact("replicas", log.summary())
    first_look = new.first_observed if new.first_observed is not None else float("nan")
    report.expect("the Deployment starts a replacement Pod, which first sees the old holder",
                  new.process != old.process and first_look >= new.started,
                  f"{short(new.process)} started t={new.started:.3f}s, saw the Lease at "
                  f"t={first_look:.3f}s")
    wait = new.acquired - first_look
    report.expect("its new identity waits out the old Lease: acquired 15 s to 15 + 4.4 s after "
                  "its first look", LEASE_DURATION <= wait <= LEASE_DURATION + MAX_RETRY,
                  f"{wait:.3f}s")
    quiet = log.reconciles_between(old.ended, new.acquired)
    report.expect("nothing reconciles while no replica leads", not quiet,
                  f"{len(quiet)} reconciles in {new.acquired - old.ended:.3f}s")
    report.expect("the lost worker is replaced only after the replacement leads",
                  bool(created) and created[0] >= new.acquired,
                  f"lost t={lost_at:.3f}s, new worker Pod t={created[0] if created else None}")
    workers = ray_pods(sim, "raycluster", "worker")
    report.expect("the cluster is ready with two workers again",
                  len(workers) == 2 and victim not in names(workers), f"workers {names(workers)}")


def _pod_creates(sim: Simulation) -> list[tuple[float, str]]:
    """Worker Pods the operator created, from the trace."""
    return [(e.t, str(e.fields.get("name"))) for e in sim.trace.select("write")
            if e.fields.get("kind") == "Pod" and e.fields.get("verb") == "create"
            and "-worker-" in str(e.fields.get("name"))]


@scenario("operator-upgrade-recreate",
          "a Helm upgrade of a two-replica operator with the Recreate strategy: a window with no "
          "replica running, and a longer one with nobody leading", cluster=kube())
async def operator_upgrade_recreate(sim: Simulation, report: Report) -> None:
    """``helm upgrade`` to a new operator image with ``replicas: 2``.

    The chart's Deployment uses ``strategy: Recreate``: the controller scales the old
    ReplicaSet to zero, waits until its Pods are gone, and only then creates the new one. The
    new replicas have new identities, and the old leader never released the Lease (KubeRay does
    not set ``LeaderElectionReleaseOnCancel``). Expectations:

    - no new replica starts before every old one has ended (a window with no replica at all);
    - nobody leads from the old leader's end until a new replica acquires the Lease, at least
      15 s (the Lease the old leader renewed last) and at most 15 + 4.4 s after a new replica
      first saw it;
    - no reconcile happens in that window; the RayCluster is still ready afterwards.
    """
    Narrator(sim)
    log = OperatorLog(sim)
    kuberay = await start(sim, replicas=2)
    await sim.apply(raycluster(workers=1))
    await sim.wait_for("RayCluster", "raycluster", workers_ready(1), timeout=300)
    old = [life for life in log.lives if life.ended is None]
    deployment = copy.deepcopy(next(m for m in kuberay.manifests if m["kind"] == "Deployment"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "quay.io/kuberay/operator:v1.4.1"
    upgrade_at = sim.now
    sim.trace.emit(OBSERVER, "helm_upgrade", image=container["image"],
                   strategy=deployment["spec"]["strategy"]["type"])
    await sim.apply(deployment)

    def new_leader() -> ReplicaLife | None:
        return next((life for life in log.lives if life not in old
                     and life.acquired is not None), None)

    await sim.wait_until(lambda: new_leader() is not None, timeout=120, every=0.5,
                         what="a new replica leading")
    await sim.sleep(5)
    leader = new_leader()
    assert leader is not None and leader.acquired is not None
    new = [life for life in log.lives if life not in old]
    old_ends = [life.ended for life in old if life.ended is not None]
    old_leader = next(life for life in old if life.acquired is not None)
    last_old_end = max(old_ends) if len(old_ends) == len(old) else float("nan")
    first_new_start = min(life.started for life in new)
    no_replica = first_new_start - last_old_end
    nobody_leads = leader.acquired - (old_leader.ended or float("nan"))
    report.fact("upgrade_at", round(upgrade_at, 3))
    report.fact("old_replicas_gone_at", round(last_old_end, 3))
    report.fact("new_replicas_started_at", round(first_new_start, 3))
    report.fact("new_leader_acquired_at", round(leader.acquired, 3))
    report.fact("no_replica_seconds", round(no_replica, 3))
    report.fact("nobody_leads_seconds", round(nobody_leads, 3))
    report.fact("replicas", log.summary())
    report.expect("Recreate: no new replica starts before every old one has ended",
                  no_replica > 0, f"{no_replica:.3f}s with no replica running")
    first_look = leader.first_observed if leader.first_observed is not None else float("nan")
    wait = leader.acquired - first_look
    report.expect("nobody leads until a new identity has waited out the old Lease (15 s to "
                  "15 + 4.4 s after its first look)",
                  nobody_leads >= LEASE_DURATION and
                  LEASE_DURATION <= wait <= LEASE_DURATION + MAX_RETRY,
                  f"nobody led for {nobody_leads:.3f}s; the winner waited {wait:.3f}s")
    quiet = log.reconciles_between(old_leader.ended or 0.0, leader.acquired)
    report.expect("nothing reconciles while nobody leads", not quiet,
                  f"{len(quiet)} reconciles")
    rc = await sim.get("RayCluster", "raycluster")
    report.expect("the RayCluster is still ready after the upgrade",
                  rc is not None and workers_ready(1)(rc), "")
