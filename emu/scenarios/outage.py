"""The control plane's failures as the operator lives them: an API-server outage, a zombie leader.

The article: when the API server is unreachable, neither the leader nor a standby can write the
Lease, so nobody reconciles; Ray keeps computing, but Pods are not replaced and status is not
written. And leader election is not fencing: a leader that stalls past its Lease and wakes up
still sends what it was about to send, while a successor is already acting.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..faults import KillContainer
from ..invariants import TwoLeaderChecker
from ..kernel.trace import TraceEvent
from ..ray.workloads import RayClient, RayError
from ..simulation import Simulation, WaitTimeout
from . import Report, scenario
from ._common import (
    DEMO,
    LEASE,
    LEASE_DURATION,
    MAX_RETRY,
    NS,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    Counter,
    Narrator,
    OperatorLog,
    head_svc,
    kube,
    names,
    ray_pods,
    raycluster,
    rayjob,
    rayjob_done,
    short,
    start,
    workers_ready,
)

OUTAGE = 60.0


@scenario("apiserver-outage",
          "the API server down for 60 s: Ray keeps computing, a lost worker is not replaced, the "
          "leader cannot renew and exits, nobody leads; after recovery a leader is elected and "
          "the worker replaced", cluster=kube())
async def apiserver_outage(sim: Simulation, report: Report) -> None:
    """Two operator replicas and a RayCluster of a head and two workers (``restartPolicy:
    Never``, so a dead Ray container leaves a Failed Pod for KubeRay to replace). A driver keeps
    an actor on the head busy. The API server refuses every call for 60 s; 5 s in, one worker's
    Ray container dies. Expectations:

    - the actor answers every call made during the outage (Ray needs no API server);
    - no worker Pod is created during the outage;
    - the leader cannot renew: it loses leadership 10 s (RenewDeadline) after the renew round
      that began 2 s after its last successful renew, and its process exits;
    - nobody acquires the Lease during the outage;
    - after recovery a leader is elected as soon as some candidate has seen the same Lease
      record for 15 s: at once if it saw the leader's last renewal before the outage, else
      15 s after its first read after recovery (client-go times the Lease on its own clock,
      from when it last saw the record change) — within 15 + 2 x 4.4 s either way;
    - the dead worker's Pod is then replaced and the cluster has two ready workers again.
    """
    Narrator(sim)
    log = OperatorLog(sim)
    renews: list[tuple[float, str]] = []

    def on_event(ev: TraceEvent) -> None:
        if ev.event == "write" and ev.fields.get("kind") == "Lease" and \
                ev.fields.get("name") == LEASE:
            renews.append((ev.t, str(ev.fields.get("caller"))))

    sim.trace.subscribe(on_event)
    kuberay = await start(sim, replicas=2)
    cluster = raycluster(workers=2)
    cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["restartPolicy"] = "Never"
    await sim.apply(cluster)
    await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    driver = RayClient(sim.network, f"{head_svc('raycluster')}:6379", caller="driver")
    await driver.connect()
    counter = await driver.create_actor(Counter, name="counter", head=True, num_cpus=0)
    await counter.call("incr")
    leader = kuberay.leader()
    victim = names(ray_pods(sim, "raycluster", "worker"))[0]

    down_at = sim.now
    sim.faults.outage("apiserver", duration=OUTAGE)
    up_at = down_at + OUTAGE
    await sim.sleep(5)
    sim.faults.do(KillContainer(pod=victim, container="ray-worker"))
    answered = failed = 0
    while sim.now + 5 < up_at:
        await sim.sleep(5)
        try:
            await counter.call("incr", timeout=4)
            answered += 1
        except RayError:
            failed += 1
    await sim.sleep(up_at - sim.now)
    await sim.wait_until(lambda: any(life.acquired is not None and life.acquired >= up_at
                                     for life in log.lives), timeout=120, every=0.5,
                         what="a leader after the outage")
    await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=600)

    report.fact("outage", [round(down_at, 3), round(up_at, 3)])
    report.fact("actor_calls_during_outage", {"answered": answered, "failed": failed})
    report.expect("Ray keeps computing: the actor on the head answers every call during the "
                  "outage", answered > 0 and failed == 0,
                  f"{answered} answered, {failed} failed; count {await counter.call('get')}")
    created = [(e.t, e.fields.get("name")) for e in sim.trace.select("write")
               if e.fields.get("kind") == "Pod" and e.fields.get("verb") == "create"
               and "-worker-" in str(e.fields.get("name")) and e.t > down_at]
    report.expect("no worker Pod is created during the outage",
                  all(t >= up_at for t, _ in created), f"created {created}")
    old = next(life for life in log.lives if life.process == leader.name)
    last_renew = max((t for t, caller in renews if caller == leader.name and t <= down_at),
                     default=float("nan"))
    lost = old.lost if old.lost is not None else float("nan")
    report.fact("leader_last_renew_at", round(last_renew, 3))
    report.fact("leader_lost_at", round(lost, 3))
    report.fact("leader_exit", old.ended_by)
    report.expect("the leader cannot renew: it loses the Lease RenewDeadline (10 s) after the "
                  "renew round that followed its last renew, and exits",
                  abs(lost - (last_renew + RETRY_PERIOD + RENEW_DEADLINE)) < 0.5
                  and old.ended is not None and old.ended - lost < 0.01,
                  f"last renew t={last_renew:.3f}s, lost t={lost:.3f}s, {old.ended_by} "
                  f"at t={old.ended}")
    during = [(short(life.process), life.acquired) for life in log.lives
              if life.acquired is not None and down_at < life.acquired < up_at]
    report.expect("nobody acquires the Lease during the outage", not during, f"{during}")
    after = min(life.acquired for life in log.lives
                if life.acquired is not None and life.acquired >= up_at)
    report.fact("leader_elected_at", round(after, 3))
    report.expect("after recovery a leader is elected once a candidate's view of the Lease "
                  "is 15 s old: within 15 + 2 x 4.4 s", 0 <= after - up_at <=
                  LEASE_DURATION + 2 * MAX_RETRY,
                  f"{after - up_at:.3f}s after the API server came back")
    replaced = [t for t, _ in created if t >= up_at]
    report.fact("worker_replaced_at", round(replaced[0], 3) if replaced else None)
    workers = ray_pods(sim, "raycluster", "worker")
    report.expect("after recovery the dead worker's Pod is replaced and two workers are ready",
                  bool(replaced) and victim not in names(workers) and len(workers) == 2,
                  f"replacement created t={replaced[0] if replaced else None}")
    report.fact("replicas", log.summary())


@scenario("zombie-leader",
          "the leader freezes just before creating demo-job's submitter Job, past its Lease; a "
          "successor creates the Job; the zombie wakes and its request lands anyway",
          cluster=kube())
async def zombie_leader(sim: Simulation, report: Report) -> None:
    """No fencing: a leader paused past its Lease still acts when it wakes.

    Two replicas; ``demo-job`` (K8sJobMode). The leader is paused (a stop-the-world stall) at
    the start of the reconcile that will create the submitter Job, once the RayCluster is ready:
    its create is held, unsent. The standby takes over after the Lease expires, finds no Job,
    creates it and moves the RayJob to Running. Then the zombie resumes: its held create goes
    out and its elector only finds out it lost at the end of its renew deadline. Expectations:

    - the successor acquires the Lease while the zombie still believes it leads, and the
      `TwoLeaderChecker` reports that window with work by both (the no-fencing window);
    - the zombie's in-flight create reaches the API server after the successor's Job exists and
      is refused with AlreadyExists (409) — the API server's name uniqueness, not the Lease,
      keeps the Job single; every other request it makes in the window is reported;
    - the zombie then loses the Lease and exits; the RayJob completes with one submitter Job
      and one Ray submission.
    """
    Narrator(sim)
    log = OperatorLog(sim)
    two = TwoLeaderChecker(sim.trace)
    kuberay = await start(sim, replicas=2)
    zombie = kuberay.leader()
    box: dict[str, Any] = {}
    zombie_results: list[str] = []

    def on_event(ev: TraceEvent) -> None:
        if ev.process == zombie.name and "paused_at" not in box and \
                ev.event == "reconcile_started" and ev.fields.get("controller") == "rayjob":
            rc = next(iter(sim.api.list("RayCluster", NS)["items"]), None)
            rj = sim.api.get("RayJob", DEMO, NS)
            if rc is not None and (rc.get("status") or {}).get("state") == "ready" and \
                    (rj.get("status") or {}).get("jobDeploymentStatus") == "Initializing":
                box["paused_at"] = sim.now
                sim.faults.pause(zombie)
        elif ev.process == zombie.name and "resumed_at" in box and \
                ev.event == "reconcile_finished":
            zombie_results.append(str(ev.fields.get("outcome")) + (
                f": {ev.fields['error']}" if ev.fields.get("error") else ""))
        elif ev.event == "write" and ev.fields.get("caller") == zombie.name and \
                "resumed_at" in box:
            zombie_results.append(f"write {ev.fields.get('verb')} {ev.fields.get('kind')} "
                                  f"{ev.fields.get('name')}")
        elif ev.event == "write" and ev.fields.get("kind") == "Job" and \
                ev.fields.get("verb") == "create" and ev.fields.get("name") == DEMO:
            box.setdefault("job_created", (sim.now, short(str(ev.fields.get("caller")))))

    sim.trace.subscribe(on_event)
    await sim.apply(rayjob(DEMO, seconds=10))
    await sim.wait_until(lambda: "paused_at" in box, timeout=120, every=0.5,
                         what="the leader about to create the submitter Job")
    await sim.wait_for("RayJob", DEMO, lambda o: (o.get("status") or {}).get(
        "jobDeploymentStatus") == "Running", timeout=120)
    await sim.sleep(1)
    box["resumed_at"] = sim.now
    sim.faults.resume(zombie)
    rj = await sim.wait_for("RayJob", DEMO, rayjob_done, timeout=600)
    # The zombie finds out at the end of its renew deadline, 10 s after it wakes; the job may
    # complete first when the operator is a real binary on the wall clock (the port's zombie
    # has ended by then, so this waits for nothing there).
    with contextlib.suppress(WaitTimeout):
        await sim.wait_until(lambda: any(life.process == zombie.name and life.ended is not None
                                         for life in log.lives),
                             timeout=30, every=0.5, what="the zombie's end")

    paused_at, resumed_at = box["paused_at"], box["resumed_at"]
    zlife = next(life for life in log.lives if life.process == zombie.name)
    successor = next((life for life in log.lives if life.process != zombie.name
                      and life.acquired is not None), None)
    report.fact("paused", [round(paused_at, 3), round(resumed_at, 3)])
    report.fact("successor_acquired_at",
                None if successor is None else round(successor.acquired or 0.0, 3))
    report.fact("zombie_lost_at", None if zlife.lost is None else round(zlife.lost, 3))
    windows = [(round(w.start, 3), None if w.end is None else round(w.end, 3),
                {short(p): n for p, n in w.work.items()}) for w in two.windows]
    report.fact("two_leader_windows", windows)
    report.expect("a successor leads while the paused leader still believes it leads: the "
                  "no-fencing window, with work by both", bool(two.violations) and
                  successor is not None and (successor.acquired or 0) < resumed_at,
                  f"windows {windows}")
    created = box.get("job_created")
    already = [r for r in zombie_results if "already exists" in r]
    report.fact("zombie_after_resume", zombie_results)
    report.expect("the zombie's in-flight Job create lands after the successor's Job exists "
                  "and is refused with AlreadyExists (409)",
                  created is not None and created[1] != short(zombie.name) and bool(already),
                  f"Job created by {created}; zombie: {already[:1]}")
    report.expect("the zombie loses the Lease after it wakes, and exits",
                  zlife.lost is not None and zlife.lost >= resumed_at and zlife.ended is not None,
                  f"lost t={zlife.lost}, {zlife.ended_by}")
    jobs = sim.api.list("Job", NS, label_selector=f"ray.io/originated-from-cr-name={DEMO}")
    status = rj.get("status") or {}
    accepted = [s.submission_id for s in sim.ray_config.records.accepted()]
    report.expect("the RayJob completes with one submitter Job and one Ray submission",
                  status.get("jobDeploymentStatus") == "Complete" and len(jobs["items"]) == 1
                  and accepted == [status.get("jobId")],
                  f"{status.get('jobDeploymentStatus')}, {len(jobs['items'])} Job(s), "
                  f"accepted {accepted}")
