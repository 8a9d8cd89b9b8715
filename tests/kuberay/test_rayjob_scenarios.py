"""End-to-end RayJob scenarios: the operator runs as its Deployment's Pods, kubelets run the
cluster and the submitter, the Job controller retries the submitter, and the fake Ray records
every submission its dashboards receive (``RayConfig.records``).

- The article's ``demo-job``: the leader dies after creating the submitter Job and before writing
  the RayJob status; the successor finds the Job by its fixed name and the submitter's
  ``ray job status`` check keeps the submission single.
- The crash-point loop: the same run with the leader crashed right after each API write the
  RayJob controller makes during the job's life, one write per run.
- Head Pod loss in every submission mode, with and without Redis GCS fault tolerance (SPEC §7.4).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_raycluster_support import NS
from test_rayjob_support import (
    DEMO,
    deployment_status,
    e2e_rayjob,
    events,
    get_rayjob,
    terminal,
    world,
)

import emu
from emu.runtime import HttpClient

#: Virtual seconds a scenario may take from creation to a terminal RayJob.
DONE_TIMEOUT = 900.0


def _is_rayjob_controller_write(fields: dict[str, Any], name: str = DEMO) -> bool:
    """A write the RayJob controller makes for ``name`` (the RayCluster controller shares the
    process: its writes to the cluster, Pods and head Service are not counted)."""
    kind, obj, verb = fields.get("kind"), fields.get("name") or "", fields.get("verb")
    if kind == "RayJob":
        return bool(obj == name)
    if kind == "Job":
        return bool(obj == name)
    if kind == "RayCluster":
        return verb in ("create", "delete") and obj.startswith(name + "-")
    if kind == "Service":
        return bool(obj == f"{name}-head-svc")
    if kind == "Event":
        return bool(obj.split(".")[0] == name)
    return False


class CrashAfterWrite:
    """Crash the leading operator right after its ``nth`` RayJob-controller write (0-based).

    The trace tells of a write when the API server commits it; the crash is scheduled at once
    (``call_soon``), so the reply reaches a dead process and nothing the controller would have
    done next happens. With ``nth=None`` nothing crashes and the writes are only recorded."""

    def __init__(self, sim: emu.Simulation, kuberay: Any, nth: int | None) -> None:
        self.sim = sim
        self.kuberay = kuberay
        self.nth = nth
        self.writes: list[tuple[str, str, str]] = []
        self.crashed: tuple[str, str, str] | None = None
        self.victim = kuberay.leader()
        sim.trace.subscribe(self._on_event)

    def _on_event(self, ev: Any) -> None:
        if ev.event != "write" or self.victim is None or self.crashed is not None:
            return
        if ev.fields.get("caller") != self.victim.name:
            return
        if not _is_rayjob_controller_write(ev.fields):
            return
        write = (ev.fields["verb"], ev.fields["kind"], ev.fields["name"].split(".")[0])
        self.writes.append(write)
        if self.nth is not None and len(self.writes) - 1 == self.nth:
            self.crashed = write
            self.sim.loop.call_soon(self.victim.crash, "fault: crash after write")


async def _outcome(sim: emu.Simulation, config: Any) -> dict[str, Any]:
    rj = await sim.wait_for("RayJob", DEMO, terminal, timeout=DONE_TIMEOUT)
    jobs = list(await sim.client().list(
        "Job", NS, label_selector=f"ray.io/originated-from-cr-name={DEMO}"))
    return {
        "deployment": deployment_status(rj), "job_status": rj["status"].get("jobStatus"),
        "job_id": rj["status"].get("jobId"), "submitter_jobs": len(jobs),
        "submissions": [(s.submission_id, s.status) for s in config.records.submissions],
        "created_events": sum(1 for e in await events(sim, DEMO)
                              if e["reason"] == "CreatedRayJobSubmitter"),
    }


def _run_with_crash(nth: int | None, seed: int = 7) -> tuple[dict[str, Any], CrashAfterWrite]:
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        config, kuberay = await world(sim, replicas=2)
        crasher = CrashAfterWrite(sim, kuberay, nth)
        await sim.apply(e2e_rayjob())
        box["outcome"] = await _outcome(sim, config)
        box["crasher"] = crasher

    emu.run(main, seed=seed)
    return box["outcome"], box["crasher"]


def _assert_exactly_once(outcome: dict[str, Any]) -> None:
    assert outcome["deployment"] == "Complete", outcome
    assert outcome["job_status"] == "SUCCEEDED", outcome
    assert outcome["submitter_jobs"] == 1, outcome
    assert outcome["submissions"] == [(outcome["job_id"], 200)], outcome


def test_leader_crash_between_submitter_job_create_and_status_write_submits_once():
    """The article's case: the leader creates the submitter Job of ``demo-job`` and dies before
    writing Running. The successor reads the persisted jobId and cluster name, finds the Job by
    its name (no second Job), and the one submitter submits once; the job completes."""
    _, baseline = _run_with_crash(None)
    nth = baseline.writes.index(("create", "Job", DEMO))
    outcome, crasher = _run_with_crash(nth)
    assert crasher.crashed == ("create", "Job", DEMO)
    assert crasher.victim is not None and not crasher.victim.alive
    _assert_exactly_once(outcome)
    # The dead leader never got to record its event; the successor found the Job, created none.
    assert outcome["created_events"] == 0


def test_crash_after_every_rayjob_controller_write_still_completes_exactly_once():
    """The crash-point loop: for each API write the RayJob controller makes in ``demo-job``'s life
    (finalizer, status writes, RayCluster, submitter Job, head Service, Events, cluster
    deletion), a run with the leader crashed right after it. Every run: one submitter Job, one
    submission to Ray, the job complete."""
    baseline_outcome, baseline = _run_with_crash(None)
    _assert_exactly_once(baseline_outcome)
    assert ("create", "Job", DEMO) in baseline.writes
    assert ("update", "RayJob", DEMO) in baseline.writes  # the finalizer
    failures = []
    for nth, write in enumerate(baseline.writes):
        outcome, crasher = _run_with_crash(nth)
        if crasher.crashed != write:
            failures.append((nth, write, "crash landed on", crasher.crashed))
            continue
        try:
            _assert_exactly_once(outcome)
        except AssertionError as err:
            failures.append((nth, write, str(err)))
    assert failures == []
    assert len(baseline.writes) >= 8


async def test_submitter_job_invisible_to_the_cache_gets_already_exists_until_it_is_seen(sim):
    """SPEC §3.6: ``createK8sJobIfNeed`` GETs the Job through the cache and creates it on
    NotFound; AlreadyExists is an ordinary error (no status write, backoff). A Job named like
    the RayJob but without KubeRay's ``created-by`` label is outside the cache's selector, so
    the RayJob stays Initializing with FailedToCreateRayJobSubmitter events; once the label is
    added the cache sees the Job and the RayJob goes Running without creating another."""
    config, _ = await world(sim)
    blocker = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": DEMO, "namespace": NS},
               "spec": {"suspend": True, "template": {"spec": {
                   "restartPolicy": "Never",
                   "containers": [{"name": "c", "image": "busybox"}]}}}}
    await sim.client().create(blocker)
    await sim.apply(e2e_rayjob())
    await sim.wait_until(lambda: sum(1 for e in sim.api.list("Event", NS)["items"]
                                     if e["reason"] == "FailedToCreateRayJobSubmitter") >= 2,
                         timeout=300)
    failed = [e for e in await events(sim, DEMO) if e["reason"] == "FailedToCreateRayJobSubmitter"]
    assert failed[0]["message"] == (
        f'Failed to create new Kubernetes Job default/{DEMO}: jobs.batch '
        f'"{DEMO}" already exists')
    assert deployment_status(await get_rayjob(sim, DEMO)) == "Initializing"
    job = await sim.client().get("Job", DEMO, NS)
    job["metadata"].setdefault("labels", {})["app.kubernetes.io/created-by"] = "kuberay-operator"
    await sim.client().update(job)
    rj = await sim.wait_for("RayJob", DEMO, lambda o: deployment_status(o) == "Running",
                            timeout=600)
    assert rj["status"]["jobDeploymentStatus"] == "Running"
    assert not any(e["reason"] == "CreatedRayJobSubmitter" for e in await events(sim, DEMO))
    assert config.records.submissions == []  # the user's suspended Job submits nothing


# ---------------------------------------------------------------------------------------------
# Head Pod loss during a running job (SPEC §7.4)
# ---------------------------------------------------------------------------------------------


async def _head_pods(sim: emu.Simulation, cluster: str) -> list[dict[str, Any]]:
    return list(await sim.client().list(
        "Pod", NS, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head"))


async def _submit_interactively(sim: emu.Simulation, rj: dict[str, Any], sid: str) -> None:
    """What a user does in InteractiveMode: ``ray job submit`` to the dashboard, then set
    ``spec.jobId``."""
    http = HttpClient(sim.network, None)
    resp = await http.request(rj["status"]["dashboardURL"], "POST", "/api/jobs/",
                              {"entrypoint": "python -c 'import time; time.sleep(120)'",
                               "submission_id": sid})
    assert resp.status == 200, resp
    live = await get_rayjob(sim, DEMO)
    live["spec"]["jobId"] = sid
    await sim.client().update(live)


async def _lose_head_while_running(sim: emu.Simulation, mode: str, redis: bool
                                   ) -> tuple[dict[str, Any], Any, str, str]:
    config, _ = await world(sim, redis=redis)
    await sim.apply(e2e_rayjob(mode=mode, redis=redis,
                               entrypoint="python -c 'import time; time.sleep(120)'"))
    if mode == "InteractiveMode":
        rj = await sim.wait_for("RayJob", DEMO, lambda o: deployment_status(o) == "Waiting",
                                timeout=300)
        await _submit_interactively(sim, rj, "interactive-1")
    def running(o: dict[str, Any]) -> bool:
        if mode == "SidecarMode":
            # The fake kubelet gives a Pod no loopback route yet, so the sidecar's probe of
            # localhost:8265 never succeeds and it never submits: lose the head once Running.
            return deployment_status(o) == "Running"
        return (o.get("status") or {}).get("jobStatus") == "RUNNING"

    rj = await sim.wait_for("RayJob", DEMO, running, timeout=300)
    cluster = rj["status"]["rayClusterName"]
    old_head = (await _head_pods(sim, cluster))[0]["metadata"]["name"]
    await sim.client().delete("Pod", old_head, NS)
    return config, rj, cluster, old_head


@pytest.mark.parametrize("redis", [False, True], ids=["memory", "redis-ft"])
async def test_head_loss_k8s_job_mode_resubmits_the_same_id_only_without_ft(sim, redis):
    """K8sJobMode: KubeRay recreates the head. The submitter's ``ray job logs --follow`` follows
    a websocket that closes when the head goes: the real CLI then exits 0 with the job not
    terminal (Ray issues 60665, 51601), so the submitter Job completes, no second submission is
    made, and KubeRay's "submitter finished but the job is not terminal" handling fails the
    RayJob once its 30 s grace period is over (KubeRay issues 3903, 3860, 4217) — with Redis FT,
    where the job record survives; without it the new head answers 404 for the id and the RayJob
    fails with AppFailed."""
    config, rj, cluster, old_head = await _lose_head_while_running(sim, "K8sJobMode", redis)
    done = await sim.wait_for("RayJob", DEMO, terminal, timeout=DONE_TIMEOUT)
    heads = await _head_pods(sim, cluster) if await sim.get("RayCluster", cluster) else []
    assert old_head not in [h["metadata"]["name"] for h in heads]
    accepted = [s.submission_id for s in config.records.accepted()]
    job = await sim.client().get("Job", DEMO, NS)
    assert accepted == [rj["status"]["jobId"]]
    reason = "JobDeploymentStatusTransitionGracePeriodExceeded" if redis else "AppFailed"
    assert (done["status"]["jobDeploymentStatus"], done["status"]["reason"]) == ("Failed", reason)
    assert (job["status"].get("succeeded") or 0) == 1  # the submitter exited 0


@pytest.mark.parametrize("redis", [False, True], ids=["memory", "redis-ft"])
async def test_head_loss_http_mode_resubmits_on_404_only_without_ft(sim, redis):
    """HTTPMode: without FT the fresh GCS answers 404 for the id and the operator POSTs it again
    (same id) and the job completes. With Redis FT the record is there and still says RUNNING:
    the new head's job manager starts lazily, on the first submit, stop, delete or logs request
    (measured on Ray 2.60, tests/realray), and HTTPMode's operator only GETs the job, so the
    RayJob stays Running with no second submission, for as long as nothing else asks."""
    config, rj, _, _ = await _lose_head_while_running(sim, "HTTPMode", redis)
    if not redis:
        done = await sim.wait_for("RayJob", DEMO, terminal, timeout=DONE_TIMEOUT)
        accepted = [s.submission_id for s in config.records.accepted()]
        assert accepted == [rj["status"]["jobId"]] * 2
        assert done["status"]["jobDeploymentStatus"] == "Complete"
    else:
        await _stays_running(sim)
        assert [s.submission_id for s in config.records.accepted()] == [rj["status"]["jobId"]]


async def _stays_running(sim) -> None:
    """The RayJob never leaves Running/RUNNING within `DONE_TIMEOUT`: with GCS fault tolerance a
    lost head's job record keeps RUNNING until the new head's lazy job manager starts."""
    with pytest.raises(emu.WaitTimeout):
        await sim.wait_for("RayJob", DEMO, terminal, timeout=DONE_TIMEOUT)
    rj = await sim.get("RayJob", DEMO)
    assert (rj["status"]["jobDeploymentStatus"], rj["status"]["jobStatus"]) == (
        "Running", "RUNNING")


@pytest.mark.parametrize("redis", [False, True], ids=["memory", "redis-ft"])
async def test_head_loss_sidecar_mode_fails_the_rayjob_and_the_head_is_not_recreated(sim, redis):
    """SidecarMode: the next pass finds no head Pod → Failed/AppFailed "Ray head pod not
    found."; the cluster carries disable-provisioned-head-restart, so no new head appears,
    whatever the GCS storage."""
    config, rj, cluster, _ = await _lose_head_while_running(sim, "SidecarMode", redis)
    done = await sim.wait_for("RayJob", DEMO, terminal, timeout=DONE_TIMEOUT)
    assert (done["status"]["jobDeploymentStatus"], done["status"]["reason"],
            done["status"]["message"]) == ("Failed", "AppFailed", "Ray head pod not found.")
    rc = await sim.get("RayCluster", cluster)
    assert rc is None or rc["metadata"]["annotations"][
        "ray.io/disable-provisioned-head-restart"] == "true"
    assert [s.submission_id for s in config.records.accepted()] in ([], [rj["status"]["jobId"]])


@pytest.mark.parametrize("redis", [False, True], ids=["memory", "redis-ft"])
async def test_head_loss_interactive_mode(sim, redis):
    """InteractiveMode: the operator never submits. Without FT the status checks fail while the
    head is gone (the failure timer starts) and then get 404 from the new GCS; a 404 outside
    HTTPMode with no submitter just requeues and does **not** clear the timer (**quirk**), so
    300 s after the head went away the RayJob fails with JobStatusCheckTimeoutExceeded, never
    retried. With Redis FT the record keeps RUNNING and so does the RayJob."""
    config, _, _, _ = await _lose_head_while_running(sim, "InteractiveMode", redis)
    lost_at = sim.now
    if not redis:
        rj = await sim.wait_for("RayJob", DEMO, terminal, timeout=DONE_TIMEOUT)
        assert (rj["status"]["jobDeploymentStatus"], rj["status"]["reason"]) == (
            "Failed", "JobStatusCheckTimeoutExceeded")
        assert sim.now >= lost_at + 300
        assert rj["status"]["jobStatus"] == "RUNNING"  # the last answer before the head went
    else:  # the record keeps RUNNING: the operator only GETs it (see the HTTPMode test)
        await _stays_running(sim)
    assert [s.submission_id for s in config.records.accepted()] == ["interactive-1"]
