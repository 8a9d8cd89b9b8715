"""RayJob invariants: one Ray job run per attempt, a status that agrees with itself, fenced retries.

- `OneJobRunPerAttempt` (``one-job-run-per-attempt``). Rationale (SPEC.md 3.3 and 3.6,
  ``initRayJobStatusIfNeed``, ``createK8sJobIfNeed``, ``BuildJobSubmitCommand``): a RayJob's
  submission id is ``status.jobId``, persisted before anything is created, and every submitter
  path is idempotent — the K8sJobMode command runs ``ray job status <id>`` first and re-attaches,
  and the dashboard rejects a reused id — so each id starts at most one Ray job run. Only a retry
  asks for another run (``checkBackoffLimitAndUpdateStatusIfNeeded`` → Retrying), and that run
  gets a fresh id unless ``spec.jobId`` pins it. Observed through the trace: every
  ``job_submission_received`` a dashboard answered 200 is one run started. Allowed runs of an id:
  1 + the times the RayJob that owns it entered Retrying or Suspended (a resumed RayJob starts
  again from New, under ``spec.jobId`` if it pins one). Bound: none (a second run is at once).
- `RayJobStatusConsistent` (``rayjob-status-consistent``). Rationale (SPEC.md 3.5 and 3.7,
  the Running branch of ``Reconcile`` and ``checkTransitionGracePeriodAndUpdateStatusIfNeeded``):
  ``Complete`` is written only when Ray reported SUCCEEDED or STOPPED; ``Failed`` with reason
  ``AppFailed`` only when the app failed (Ray FAILED, or the submitter failed after Ray's
  FAILED, or no job/head to run it); a deployment ``Failed`` never stands beside a Ray
  ``SUCCEEDED``; and a ``Running`` RayJob whose jobStatus is terminal moves on within the 300 s
  transition grace period (``RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS``; the
  30 s submitter-finished timeout is shorter). Failed for a deadline, a status-check timeout, a
  submission failure or validation is allowed with any jobStatus: those reasons speak of the
  deployment, not of the app, and Ray's job may still run then, by design. ``AppFailed`` speaks
  of the app, so it is a violation beside a jobStatus that says the job runs or waits — also
  when KubeRay wrote it on purpose because no head or job is left (SidecarMode's "Ray head pod
  not found.", "Submitter completed but Ray job not found in RayCluster."): the job is gone,
  jobStatus keeps its last value for good, and clients that wait on jobStatus (KubeRay's python
  client ``wait_until_job_finished``) never see the end (docs/findings.md F2). Bounds: ``bound``
  (default 5 s) for the terminal contradictions — written in one status update, they never
  resolve by themselves — and ``running_bound`` (default 330 s).
- `RetryAttemptsFenced` (``retry-attempts-fenced``). Rationale (SPEC.md 3.5 Suspending/Retrying,
  ``deleteClusterResources``, ``deleteSubmitterJob``): a retry tears the attempt down and waits
  until its RayCluster and submitter Job are gone before it goes back to New and creates the next
  attempt's cluster. The attempts of a RayJob are the RayClusters created for it (labels
  ``ray.io/originated-from-crd=RayJob`` and ``ray.io/originated-from-cr-name``), in creation
  order; a Pod *runs* from phase Running until it is gone from the API server (a terminating Pod's
  containers still run). Violation: a Pod of attempt N+1 runs while a Pod of an earlier attempt
  still runs, for longer than ``bound`` (default 0). A Pod on a Node that is not Ready is named
  with it (``on Node N (Ready Unknown)``): its phase is the last its kubelet reported, so it may
  run (a partition) or be dead (a lost machine) — Kubernetes cannot tell, and KubeRay does not
  wait to find out.
- `SubmitterLossRecovered` (``rayjob-submitter-recovered``). Rationale (SPEC.md 3.5 and 3.6,
  ``checkSubmitterAndUpdateStatusIfNeeded``, ``createK8sJobIfNeed``): a K8sJobMode RayJob's
  submitter Job is created in Initializing, before the RayJob is written Running, and KubeRay
  deletes it itself only after it has left Running (Suspending, Retrying, a finished RayJob), so
  a ``Running`` K8sJobMode RayJob always has it. In Running, KubeRay reads its progress from that
  Job (and from the dashboard after it). A level-triggered controller that owns the Job is
  expected to react to its loss: create it again, or give the RayJob a terminal status. This is
  the contract the invariant asks for, not one KubeRay states: KubeRay v1.5.0 and the version
  SPEC.md follows do neither (docs/findings.md F8). Violation: a RayJob in K8sJobMode (the
  default) whose ``jobDeploymentStatus`` is ``Running`` and whose submitter Job (same namespace,
  the RayJob's name: ``RayJobK8sJobNamespacedName``) is absent from the API server, for longer
  than ``bound`` (default 60 s, twenty of the RayJob's 3 s requeues).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from ..kernel.trace import TraceEvent
from .base import BaseMonitor, Invariant
from .bounded import Bounded
from .view import Obj, WorldView, labels

if TYPE_CHECKING:
    from ..simulation import Simulation

TERMINAL_JOB = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})
#: Failure reasons after which Ray's own job may legitimately be in any state.
_ANY_JOB_STATUS_REASONS = frozenset({
    "DeadlineExceeded", "PreRunningDeadlineExceeded", "JobStatusCheckTimeoutExceeded",
    "SubmissionFailed", "ValidationFailed"})


def _status(obj: Obj) -> dict[str, object]:
    return obj.get("status") or {}


def _name(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("namespace", "")), str(meta["name"])


def _rayjob_of_cluster(cluster: Obj) -> str | None:
    lab = labels(cluster)
    if lab.get("ray.io/originated-from-crd") == "RayJob":
        return lab.get("ray.io/originated-from-cr-name")
    return None


# -- one job run per attempt ---------------------------------------------------------------------


@attrs.frozen
class OneJobRunPerAttempt(Invariant):
    """No submission id of a RayJob starts more Ray job runs than 1 + the RayJob's retries and
    suspensions."""

    name: ClassVar[str] = "one-job-run-per-attempt"
    rationale: ClassVar[str] = (
        "status.jobId is persisted before any submission and every submitter path is idempotent "
        "(SPEC.md 3.3, 3.6: initRayJobStatusIfNeed, BuildJobSubmitCommand); only a Retrying "
        "transition (or a suspension, then resume) asks for another run. No bound")

    def attach(self, sim: Simulation) -> _RunsMonitor:
        return _RunsMonitor(self, sim)


class _RunsMonitor(BaseMonitor):
    def __init__(self, inv: OneJobRunPerAttempt, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.view = WorldView.of(sim)
        #: submission id → [(t, pod)] of accepted submissions.
        self.runs: dict[str, list[tuple[float, str]]] = {}
        #: (ns, rayjob) → Retrying transitions seen.
        self.retries: dict[tuple[str, str], int] = {}
        #: submission id → (ns, rayjob) that carried it in status.jobId or spec.jobId.
        self.owner: dict[str, tuple[str, str]] = {}
        self.view.subscribe(self._on_change, replay=("RayJob",))
        sim.trace.subscribe(self._on_event)

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        if kind != "RayJob":
            return
        key = _name(obj)
        for sid in (_status(obj).get("jobId"), (obj.get("spec") or {}).get("jobId")):
            if sid:
                self.owner.setdefault(str(sid), key)
        now = _status(obj).get("jobDeploymentStatus")
        before = _status(old).get("jobDeploymentStatus") if old is not None else None
        if now in ("Retrying", "Suspended") and before != now:
            self.retries[key] = self.retries.get(key, 0) + 1

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event != "job_submission_received" or ev.fields.get("status") != 200:
            return
        sid = str(ev.fields.get("submission_id") or "")
        if not sid:
            return
        parts = ev.process.split("/")
        pod = "/".join(parts[:2]) if len(parts) >= 2 else ev.process
        runs = self.runs.setdefault(sid, [])
        runs.append((ev.t, pod))
        owner = self.owner.get(sid)
        if owner is None:
            return  # not a RayJob's id: not KubeRay's contract
        allowed = 1 + self.retries.get(owner, 0)
        if len(runs) > allowed:
            where = ", ".join(f"t={t:.3f}s on {p}" for t, p in runs)
            ns, job = owner
            self.report(
                f"RayJob {ns}/{job}: Ray job {sid} started {len(runs)} times ({where}) with "
                f"{allowed - 1} retries or resumes asked for", ev.t,
                (f"RayJob/{ns}/{job}", *tuple(sorted({f"Pod/{p}" for _, p in runs}))))


# -- status consistency --------------------------------------------------------------------------


@attrs.frozen
class RayJobStatusConsistent(Invariant):
    """jobDeploymentStatus and jobStatus never contradict each other for longer than a bound."""

    name: ClassVar[str] = "rayjob-status-consistent"
    rationale: ClassVar[str] = (
        "Complete only after Ray reported SUCCEEDED/STOPPED, Failed/AppFailed only for a failed "
        "app, never Failed beside SUCCEEDED (SPEC.md 3.5, RayJob Reconcile Running branch); "
        "Running with a terminal jobStatus ends within the 300 s transition grace period "
        "(SPEC.md 3.7, checkTransitionGracePeriodAndUpdateStatusIfNeeded)")

    #: Seconds a terminal deployment status may contradict jobStatus.
    bound: float = 5.0
    #: Seconds a Running RayJob may carry a terminal jobStatus (grace period 300 s + slack).
    running_bound: float = 330.0

    @property
    def hold_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _StatusMonitor:
        return _StatusMonitor(self, sim)


def contradiction(job: Obj) -> str | None:
    """What is contradictory about a terminal RayJob's status now, or None."""
    st = _status(job)
    deployment = st.get("jobDeploymentStatus")
    ray = str(st.get("jobStatus") or "")
    reason = str(st.get("reason") or "")
    if deployment == "Complete" and ray not in ("SUCCEEDED", "STOPPED"):
        return f"jobDeploymentStatus Complete with jobStatus {ray or '(empty)'!s}"
    if deployment == "Failed":
        if ray == "SUCCEEDED":
            return f"jobDeploymentStatus Failed (reason {reason or '(empty)'}) with jobStatus " \
                   "SUCCEEDED"
        if ray not in TERMINAL_JOB and reason not in _ANY_JOB_STATUS_REASONS and ray:
            return f"jobDeploymentStatus Failed (reason {reason or '(empty)'}) with " \
                   f"non-terminal jobStatus {ray}"
    return None


class _StatusMonitor(BaseMonitor):
    def __init__(self, inv: RayJobStatusConsistent, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.view = WorldView.of(sim)
        self.terminal = Bounded(self, inv.bound)
        self.running = Bounded(self, inv.running_bound)
        self.view.subscribe(self._on_change, replay=("RayJob",))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        now = self.view.now
        if kind == "RayJob":
            ns, name = _name(obj)
            ref = (f"RayJob/{ns}/{name}",)
            gone = type_ == "DELETED"
            what = None if gone else contradiction(obj)
            self.terminal.set((ns, name), what is not None, now,
                              f"RayJob {ns}/{name} had {what}", ref)
            st = _status(obj)
            stuck = not gone and st.get("jobDeploymentStatus") == "Running" and \
                st.get("jobStatus") in TERMINAL_JOB
            self.running.set((ns, name), stuck, now,
                             f"RayJob {ns}/{name} stayed Running with jobStatus "
                             f"{st.get('jobStatus')}", ref)
        self.terminal.check(now)
        self.running.check(now)

    async def check_end(self, sim: Simulation) -> None:
        self.terminal.check(sim.now)
        self.running.check(sim.now)


# -- fenced retries ------------------------------------------------------------------------------


@attrs.frozen
class RetryAttemptsFenced(Invariant):
    """Attempt N+1's Pods never run while attempt N's Pods still run."""

    name: ClassVar[str] = "retry-attempts-fenced"
    rationale: ClassVar[str] = (
        "Retrying deletes the attempt's RayCluster and submitter Job and waits until both are "
        "gone before New creates the next cluster (SPEC.md 3.5, deleteClusterResources, "
        "deleteSubmitterJob); a Pod runs from phase Running until it is gone. Bound 0")

    #: Seconds two attempts' Pods may run together before it is a violation (0: never).
    bound: float = 0.0

    @property
    def hold_time(self) -> float:
        return self.bound

    def attach(self, sim: Simulation) -> _FenceMonitor:
        return _FenceMonitor(self, sim)


class _FenceMonitor(BaseMonitor):
    def __init__(self, inv: RetryAttemptsFenced, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.view = WorldView.of(sim)
        self.overlaps = Bounded(self, inv.bound)
        #: (ns, rayjob) → its clusters in creation order.
        self.attempts: dict[tuple[str, str], list[str]] = {}
        #: (ns, cluster) → (ns, rayjob).
        self.job_of: dict[tuple[str, str], tuple[str, str]] = {}
        #: (ns, cluster) → running Pods (names, in the order they started running).
        self.running: dict[tuple[str, str], dict[str, None]] = {}
        self.view.subscribe(self._on_change, replay=("RayCluster", "Pod"))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        if kind == "RayCluster" and type_ == "ADDED":
            job = _rayjob_of_cluster(obj)
            ns, cluster = _name(obj)
            if job is not None and (ns, cluster) not in self.job_of:
                self.job_of[(ns, cluster)] = (ns, job)
                self.attempts.setdefault((ns, job), []).append(cluster)
        elif kind == "Pod":
            ns, pod = _name(obj)
            cluster = labels(obj).get("ray.io/cluster") or ""
            if (ns, cluster) not in self.job_of:
                self.overlaps.check(self.view.now)
                return
            runs = type_ != "DELETED" and (obj.get("status") or {}).get("phase") == "Running"
            pods = self.running.setdefault((ns, cluster), {})
            if runs:
                pods.setdefault(pod, None)
            else:
                pods.pop(pod, None)
            self._judge(self.job_of[(ns, cluster)])
        self.overlaps.check(self.view.now)

    def _judge(self, job: tuple[str, str]) -> None:
        ns, name = job
        live = [(i, c) for i, c in enumerate(self.attempts.get(job, []))
                if self.running.get((ns, c))]
        overlap = len(live) >= 2
        parts = [f"attempt {i + 1} (RayCluster {c}: "
                 f"{', '.join(p + self._note(ns, p) for p in self.running[(ns, c)])})"
                 for i, c in live]
        self.overlaps.set(job, overlap, self.view.now,
                          f"RayJob {ns}/{name} had Pods of {' and '.join(parts)} running at once",
                          [f"RayJob/{ns}/{name}"] + [f"RayCluster/{ns}/{c}" for _, c in live])

    def _note(self, ns: str, pod: str) -> str:
        obj = self.view.get("Pod", ns, pod)
        return self.view.node_note(obj) if obj is not None else ""

    async def check_end(self, sim: Simulation) -> None:
        self.overlaps.check(sim.now)


# -- the submitter's loss ------------------------------------------------------------------------


@attrs.frozen
class SubmitterLossRecovered(Invariant):
    """A Running K8sJobMode RayJob whose submitter Job is gone gets it back, or a terminal
    status, within a bound."""

    name: ClassVar[str] = "rayjob-submitter-recovered"
    rationale: ClassVar[str] = (
        "the submitter Job of a K8sJobMode RayJob exists before the RayJob is Running and KubeRay "
        "deletes it only after leaving Running (SPEC.md 3.5, 3.6: createK8sJobIfNeed, "
        "checkSubmitterAndUpdateStatusIfNeeded); a Running RayJob whose Job was lost must "
        "recreate it or end. Bound 60 s")

    #: Seconds a Running K8sJobMode RayJob may be without its submitter Job.
    bound: float = 60.0

    # No ``hold_time``: the condition needs a Running RayJob, so it never holds in a state a
    # driver stops at (a goal of terminal RayJob states); the default set's hold stays 5 s.

    def attach(self, sim: Simulation) -> _SubmitterMonitor:
        return _SubmitterMonitor(self, sim)


class _SubmitterMonitor(BaseMonitor):
    def __init__(self, inv: SubmitterLossRecovered, sim: Simulation) -> None:
        super().__init__(inv.name)
        self.view = WorldView.of(sim)
        self.missing = Bounded(self, inv.bound)
        self.view.subscribe(self._on_change, replay=("RayJob",))

    def _on_change(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> None:
        if kind == "RayJob":
            ns, name = _name(obj)
            self._judge(ns, name, None if type_ == "DELETED" else obj)
        elif kind == "Job":  # the view holds the Job's new state (absent once DELETED)
            ns, name = _name(obj)
            self._judge(ns, name, self.view.get("RayJob", ns, name))
        self.missing.check(self.view.now)

    def _judge(self, ns: str, name: str, job: Obj | None) -> None:
        st = _status(job) if job is not None else {}
        mode = str((job or {}).get("spec", {}).get("submissionMode") or "K8sJobMode")
        lost = (job is not None and mode == "K8sJobMode"
                and st.get("jobDeploymentStatus") == "Running"
                and self.view.get("Job", ns, name) is None)
        self.missing.set((ns, name), lost, self.view.now,
                         f"RayJob {ns}/{name} (jobDeploymentStatus Running, jobStatus "
                         f"{st.get('jobStatus') or '(none)'}) had no submitter Job {ns}/{name}",
                         (f"RayJob/{ns}/{name}", f"Job/{ns}/{name}"))

    async def check_end(self, sim: Simulation) -> None:
        self.missing.check(sim.now)
