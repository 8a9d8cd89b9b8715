"""The known KubeRay findings, shipped with the package, and how a new finding is classified.

docs/findings.md tells each known finding's story (F1..F8: the minimized plan, the timeline, the
Go code). This module is the same list as data, so an installed explorer can say of every
finding it reports (`classify`):

- ``known``: which known finding it matches (``"F1"``...), or ``"new"``;
- ``class``: ``kuberay`` — KubeRay's behaviour as ported (with the Go function to read), or
  ``emulator-suspect`` — the same run broke one of the emulator's own consistency checks
  (`emu.explore.checks`: a reconcile panic, an exception in the loop, a hot loop the emulator
  charged time for, a fault flagged emulator-only), so it may be the emulator's artefact; with
  ``-f`` and a ``Setup.install`` of your own, ``operator`` — your operator's behaviour;
- ``mitigation``: what to change in your manifests or the operator's install to avoid it, when
  anything is known (a known finding with none says so).

A known finding is recognised by a `Shape`, never by its message alone: the invariant broken
(and the others the same run broke), the roles of the plan's faults (`fault_roles`: the
operator stalled, the head lost, a watch delayed...), facts of the world the manifests describe
(`world_facts`: the submission mode, GCS fault tolerance, retries, a deadline), and the status
the violation reports (`reported_status`: the RayJob's ``jobDeploymentStatus``, ``reason`` and
``jobStatus``, read from the invariants' own words). tests/explore/test_known_findings.py checks
that docs/findings.md says what this data says, and the docs/findings replays classify as their
ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

Obj = dict[str, Any]

ISSUES = "https://github.com/ray-project/kuberay/issues/"
#: Where the Go files live in ray-project/kuberay (at the commit SPEC.md follows).
RAY = "ray-operator/controllers/ray/"

#: The classes a finding can have.
KUBERAY = "kuberay"
EMULATOR_SUSPECT = "emulator-suspect"
OPERATOR = "operator"
NEW = "new"


@attrs.frozen
class Shape:
    """One way a known finding shows. Every condition given must hold:

    - ``invariants``: the finding's invariant is one of these;
    - ``also``: the same run also broke one of these; ``not_also``: it broke none of these
      (a steadiness report whose run had two live heads is F1's, not another's);
    - ``faults``: for each set, the plan has a fault of one of its roles (`fault_roles`);
    - ``facts``: ``(name, value)`` pairs of `world_facts` that hold;
    - ``status``: ``(field, values)`` pairs: the status the violation reports
      (`reported_status`) has the field at one of the values;
    - ``mitigation``: replaces the finding's own for this shape (None: the finding's).
    """

    invariants: frozenset[str]
    variant: str = ""
    also: frozenset[str] = frozenset()
    not_also: frozenset[str] = frozenset()
    faults: tuple[frozenset[str], ...] = ()
    facts: tuple[tuple[str, Any], ...] = ()
    status: tuple[tuple[str, frozenset[str]], ...] = ()
    mitigation: str | None = None


@attrs.frozen
class Known:
    """A known finding: its id and title (docs/findings.md's heading), the Go functions with the
    same logic, upstream issues and pull requests, what a user can do, the docs/findings
    replay files that show it, the shapes that recognise it, and ``real``: what its replays
    showed with the released KubeRay binary (scripts/replay-findings-real.sh; docs/findings.md,
    "Checked on the real operator")."""

    id: str
    title: str
    go: tuple[str, ...]
    issues: tuple[int, ...]
    mitigation: str
    replays: tuple[str, ...]
    shapes: tuple[Shape, ...]
    real: str = ""

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(f"{ISSUES}{n}" for n in self.issues)


def _s(*names: str) -> frozenset[str]:
    return frozenset(names)


HEAD_LOST = _s("head-loss", "node-loss")
STEADY = _s("eventually-steady", "workload-goal")

KNOWN: tuple[Known, ...] = (
    Known(
        id="F1",
        title="A zombie leader and its successor both create a head Pod for the retried "
              "RayJob's new cluster; the RayJob never recovers",
        go=(RAY + "raycluster_controller.go RayClusterReconciler.reconcilePods",
            RAY + "expectations/scale_expectations.go (per-process expectations)",
            RAY + "rayjob_controller.go RayJobReconciler.Reconcile "
                  "(getOrCreateRayClusterInstance)",
            "ray-operator/main.go (leader election without fencing)"),
        issues=(3013, 3872),
        mitigation="Set ENABLE_DETERMINISTIC_HEAD_POD_NAME=true in the operator's environment "
                   "(the Helm chart's env): the head Pod is then named <cluster>-head, so a "
                   "second replica's create is refused (AlreadyExists) and no cluster gets two "
                   "heads. Or run one operator replica (the chart's default): a paused leader "
                   "then has no successor acting beside it.",
        replays=("test_zombie_leader_second_head.py",
                 "test_zombie_leader_creates_cluster_for_suspended_rayjob.py"),
        real=('reproduced on KubeRay v1.5.0 (3 of 6 runs). The paused status write with suspend: 2 '
              "of 3 runs; when the paused leader resumed (t=31 s), the suspended RayJob's cluster "
              'had two live head Pods. CrashLeader then PauseLeader: 1 of 3 runs; after the retry '
              '(t=64 s) the new cluster had two live head Pods and the RayJob stayed Initializing '
              'to the end. In the other runs the retried RayJob failed as it should, one head at a '
              'time.'),
        shapes=(
            Shape(_s("one-live-head"), "two live head Pods after a stalled operator replica",
                  faults=(_s("operator-stall"),)),
            Shape(STEADY | _s("retry-attempts-fenced", "rayjob-status-consistent"),
                  "the consequence of two live heads after a stalled operator replica",
                  also=_s("one-live-head"), faults=(_s("operator-stall"),)),
            Shape(_s("retry-attempts-fenced"),
                  "a stalled operator replica's cluster overlapping the next attempt",
                  faults=(_s("operator-stall"),)),
        )),
    Known(
        id="F2",
        title="Losing the head of a running RayJob without GCS fault tolerance: the job runs "
              "twice, or the RayJob fails beside a RUNNING jobStatus",
        go=(RAY + "common/job.go BuildJobSubmitCommand",
            RAY + "rayjob_controller.go RayJobReconciler.Reconcile",
            RAY + "rayjob_controller.go reconcileHTTPModeJobNotFound",
            RAY + "rayjob_controller.go RayJobReconciler.checkSubmitterAndUpdateStatusIfNeeded",
            RAY + "raycluster_controller.go RayClusterReconciler.reconcilePods"),
        issues=(1902, 3903, 4080),
        mitigation="Turn on GCS fault tolerance (gcsFaultToleranceOptions with a Redis, in the "
                   "RayJob's rayClusterSpec): a restarted or recreated head reads the job "
                   "table back, so the submission id is not run again and KubeRay does not find "
                   "the job missing.",
        replays=("test_head_container_kill_job_runs_twice.py",
                 "test_head_pod_deleted_failed_beside_running.py"),
        real=('reproduced on KubeRay v1.5.0 with the head container kill (3 of 3 runs: the job ran '
              'twice in 2, Failed (AppFailed) beside RUNNING in 1). Not with the head Pod deletion '
              "(3 runs): v1.5.0 creates no new head for a RayJob's cluster, so the RayJob stayed "
              'Running until the transition grace period and then failed consistently (Failed, '
              'JobDeploymentStatusTransitionGracePeriodExceeded, jobStatus FAILED).'),
        shapes=(
            Shape(_s("one-job-run-per-attempt"), "the job ran twice after its head was lost",
                  faults=(HEAD_LOST,), facts=(("gcsFaultTolerance", False),)),
            Shape(_s("rayjob-status-consistent"),
                  "SidecarMode: Failed (AppFailed) beside a running jobStatus after the head "
                  "was lost",
                  faults=(HEAD_LOST,), facts=(("submissionMode", "SidecarMode"),),
                  status=(("reason", _s("AppFailed")), ("jobStatus", _s("RUNNING", "PENDING"))),
                  mitigation="None known in the spec: KubeRay fails the RayJob on purpose when "
                             "the head of a SidecarMode RayJob is lost and leaves jobStatus "
                             "as it was. Read status.jobDeploymentStatus (Failed), not "
                             "status.jobStatus alone."),
            Shape(_s("rayjob-status-consistent"),
                  "Failed (AppFailed) beside a running jobStatus after the head was lost",
                  faults=(HEAD_LOST,), facts=(("gcsFaultTolerance", False),),
                  status=(("reason", _s("AppFailed")), ("jobStatus", _s("RUNNING", "PENDING")))),
        )),
    Known(
        id="F3",
        title="SidecarMode: a job that ends before the RayCluster is first Ready leaves the "
              "RayJob Initializing forever",
        go=(RAY + "rayjob_controller.go RayJobReconciler.Reconcile (Initializing)",
            RAY + "raycluster_controller.go RayClusterReconciler.calculateStatus",
            RAY + "common/job.go (the SidecarMode ray-job-submitter container)"),
        issues=(4945, 4946, 4976),
        mitigation="Use K8sJobMode (the default) or HTTPMode: the submitter is then not a "
                   "container of the head Pod, so its exit cannot make the head un-Ready. If you "
                   "need SidecarMode, set preRunningDeadlineSeconds (or activeDeadlineSeconds): "
                   "the wedged RayJob then fails instead of waiting forever.",
        replays=("test_sidecar_job_ends_before_cluster_ready.py",),
        real=("reproduced on KubeRay v1.5.0 (3 of 3 runs): the lost response to the operator's "
              'first RayCluster status write reached the binary, and the SidecarMode RayJob stayed '
              'Initializing with its head never Ready for the whole run.'),
        shapes=(
            Shape(STEADY, "a SidecarMode RayJob stuck in Initializing",
                  not_also=_s("one-live-head"), facts=(("submissionMode", "SidecarMode"),),
                  status=(("jobDeploymentStatus", _s("Initializing")),)),
        )),
    Known(
        id="F4",
        title="A job that succeeded is reported Failed when its head is lost before KubeRay "
              "sees the submitter finish",
        go=(RAY + "rayjob_controller.go RayJobReconciler.Reconcile (Running: GetJobInfo "
                  "not found with the submitter finished)",),
        issues=(1919,),
        mitigation="Turn on GCS fault tolerance (gcsFaultToleranceOptions with a Redis): the "
                   "new head still knows the job, so KubeRay reads SUCCEEDED instead of \"not "
                   "found\". Without it, leave backoffLimit unset for a job that must not run "
                   "twice: a retry would run again a job that succeeded.",
        replays=("test_head_lost_after_success_marked_failed.py",),
        real=('not reproduced on KubeRay v1.5.0 (3 runs, and 2 more with the plan 4 s later): the '
              "head was lost before the job ended (Failed beside RUNNING, F2's shape: the RayJob "
              'had started later than on the port), or after KubeRay had already seen the submitter'
              ' finish, written Complete and deleted the cluster (the kill found no head). The '
              'window is narrower on the binary, which completed the RayJob within a second of the '
              "job's end."),
        shapes=(
            Shape(_s("rayjob-status-consistent"), "Failed (AppFailed) beside SUCCEEDED after "
                  "the head was lost", faults=(HEAD_LOST,),
                  status=(("reason", _s("AppFailed")), ("jobStatus", _s("SUCCEEDED")))),
        )),
    Known(
        id="F5",
        title="A retry does not wait for the failed attempt's Pods; on a lost Node they may "
              "still run",
        go=(RAY + "rayjob_controller.go RayJobReconciler.Reconcile (Suspending/Retrying: "
                  "deleteClusterResources)",),
        issues=(1798,),
        mitigation="None known in KubeRay's settings: a retry or a resume waits only for the "
                   "RayCluster object to be gone, never for its Pods. Where two attempts must "
                   "never run at once, leave backoffLimit unset and do not suspend and resume "
                   "the RayJob, or make the job's side effects safe to run twice.",
        replays=("test_retry_does_not_wait_for_pods_on_lost_node.py",),
        real=('cannot be replayed on KubeRay v1.5.0 as recorded (3 runs): its second fault loses '
              'the Node of the head the port recreates after the first fault; v1.5.0 creates no new'
              " head for a RayJob's cluster, so that fault found no head. The retry came after the "
              'transition grace period and completed.'),
        shapes=(
            Shape(_s("retry-attempts-fenced"), "Pods of two attempts alive at once",
                  not_also=_s("one-live-head")),
        )),
    Known(
        id="F6",
        title="A job that succeeded is reported Failed for its deadline while KubeRay waits to "
              "see the submitter finish",
        go=(RAY + "rayjob_controller.go RayJobReconciler.Reconcile (Running)",
            RAY + "rayjob_controller.go checkActiveDeadlineAndUpdateStatusIfNeeded"),
        issues=(1919,),
        mitigation="None known that removes the race: give activeDeadlineSeconds a margin over "
                   "the job's expected run time (only a job that ends in the last seconds "
                   "before its deadline, or whose submitter's exit is seen late, loses it), "
                   "and treat DeadlineExceeded beside jobStatus SUCCEEDED as a success.",
        replays=("test_deadline_after_success_marked_failed.py",),
        real=("cannot be replayed on the binary (2 runs): its fault, CoalesceEvents on the leader's"
              " Pod informer, acts on the port's informers and does not reach a Go process. A "
              "network fault is not equivalent (a partition or latency on the replica's API "
              'connection also holds its writes, and breaks the watch into a relist). Without it '
              'the runs completed.'),
        shapes=(
            Shape(_s("rayjob-status-consistent"), "Failed (DeadlineExceeded) beside SUCCEEDED",
                  facts=(("activeDeadline", True),),
                  status=(("reason", _s("DeadlineExceeded")), ("jobStatus", _s("SUCCEEDED")))),
        )),
    Known(
        id="F7",
        title="With GCS fault tolerance, an HTTPMode RayJob whose head was lost stays Running "
              "forever",
        go=(RAY + "rayjob_controller.go RayJobReconciler.Reconcile (Running: GetJobInfo)",
            RAY + "utils/dashboard_httpclient.go RayDashboardClient.GetJobInfo"),
        issues=(),
        mitigation="Set activeDeadlineSeconds on the RayJob: the stuck RayJob then fails "
                   "(DeadlineExceeded) instead of waiting forever. Or use K8sJobMode: its "
                   "submitter Job's end is seen and fails the RayJob after the transition grace "
                   "period.",
        replays=("test_gcs_ft_http_mode_head_lost_stays_running.py",),
        real=('reproduced on KubeRay v1.5.0 (3 of 3 runs; and 2 of 2 in the earlier check of '
              'real-operator.md): the RayJob stayed Running, jobStatus RUNNING, for the whole run. '
              'On v1.5.0 no new head is created at all, so KubeRay asks a dashboard that is gone; '
              'on the port the new head answers RUNNING from Redis.'),
        shapes=(
            Shape(STEADY, "an HTTPMode RayJob with GCS fault tolerance stuck Running after its "
                  "head was lost", not_also=_s("one-live-head"), faults=(HEAD_LOST,),
                  facts=(("submissionMode", "HTTPMode"), ("gcsFaultTolerance", True)),
                  status=(("jobDeploymentStatus", _s("Running")),)),
        )),
    Known(
        id="F8",
        title="A K8sJobMode RayJob whose submitter Job is deleted while it runs stays Running "
              "forever",
        go=(RAY + "rayjob_controller.go RayJobReconciler.checkSubmitterAndUpdateStatusIfNeeded",
            RAY + "rayjob_controller.go RayJobReconciler.Reconcile (Running)",
            RAY + "rayjob_controller.go RayJobReconciler.createK8sJobIfNeed (Initializing only)"),
        issues=(),
        mitigation="Set activeDeadlineSeconds on the RayJob: the stuck RayJob then fails "
                   "(DeadlineExceeded) instead of waiting forever. Do not delete a RayJob's "
                   "submitter Job by hand or by a cleanup policy while the RayJob runs: delete or "
                   "suspend the RayJob instead. A RayJob already stuck can be suspended "
                   "(spec.suspend: true): KubeRay tears its cluster down; resuming it runs the "
                   "job again.",
        replays=("test_submitter_job_deleted_stays_running.py",),
        real=('reproduced on KubeRay v1.5.0 (3 of 3 runs, with the plan moved 10 s later by --shift '
              "10: the binary wrote the RayJob Running only at 26 to 28 s, when the port's plan had "
              'already fired at 20.1 s): the submitter Job was deleted at t=30.1 s and the RayJob '
              'stayed Running, jobStatus RUNNING, for the rest of each 430 s run.'),
        shapes=(
            Shape(_s("rayjob-submitter-recovered"),
                  "a Running K8sJobMode RayJob without its submitter Job"),
            Shape(STEADY, "a K8sJobMode RayJob stuck Running after its submitter Job was lost",
                  also=_s("rayjob-submitter-recovered"), not_also=_s("one-live-head"),
                  status=(("jobDeploymentStatus", _s("Running")),)),
            Shape(STEADY, "a K8sJobMode RayJob stuck Running after its submitter Job was deleted",
                  not_also=_s("one-live-head"), faults=(_s("submitter-job-loss"),),
                  facts=(("submissionMode", "K8sJobMode"),),
                  status=(("jobDeploymentStatus", _s("Running")),)),
        )),
)

#: The reconciler to start reading for a new finding, by the kind of the objects it involves.
RECONCILERS = (
    ("RayJob", RAY + "rayjob_controller.go RayJobReconciler.Reconcile"),
    ("RayService", RAY + "rayservice_controller.go RayServiceReconciler.Reconcile"),
    ("RayCluster", RAY + "raycluster_controller.go RayClusterReconciler.rayClusterReconcile"),
    ("Pod", RAY + "raycluster_controller.go RayClusterReconciler.reconcilePods"),
)


def by_id(known_id: str) -> Known:
    """The known finding ``known_id`` (``"F1"``...); a `KeyError` naming the ids otherwise."""
    for k in KNOWN:
        if k.id == known_id:
            return k
    raise KeyError(f"no known finding {known_id!r}; the known ones: "
                   f"{', '.join(k.id for k in KNOWN)}")


# ---------------------------------------------------------------------------------------------
# What a finding is made of
# ---------------------------------------------------------------------------------------------


def _is_head_pod(name: Any) -> bool:
    return isinstance(name, str) and "-head" in name


def fault_roles(plan: Iterable[Any], operator: str = "kuberay-operator") -> set[str]:
    """What the plan's faults do, by role: ``operator-stall`` (a paused operator replica),
    ``operator-crash``, ``head-loss`` (a Ray head Pod or container lost), ``worker-loss``,
    ``node-loss``, ``watch-delay`` (delayed, coalesced or stale informer events),
    ``lost-response``, ``outage``, ``submitter-loss`` (a RayJob's submitter Pod lost or hung),
    ``submitter-job-loss`` (its submitter Job deleted); any other fault by its type's name."""
    roles: set[str] = set()
    for fault in plan:
        name = type(fault).__name__
        then = getattr(fault, "then", None)
        if then is not None:  # an AtCall: it acts on the caller's process, or as its then says
            caller = str(getattr(fault, "caller", "") or "")
            inner = type(then).__name__
            on_operator = operator in caller or operator in str(getattr(then, "process", ""))
            if inner == "Pause" and on_operator:
                roles.add("operator-stall")
            elif inner in ("Crash", "Restart") and on_operator:
                roles.add("operator-crash")
            elif inner == "LoseResponses":
                roles.add("lost-response")
            else:
                roles |= fault_roles([then], operator)
            continue
        process = str(getattr(fault, "process", "") or "")
        if name == "PauseLeader" or (name == "Pause" and operator in process):
            roles.add("operator-stall")
        elif name == "CrashLeader" or (name in ("Crash", "Restart") and operator in process):
            roles.add("operator-crash")
        elif name == "LoseRayPod":
            roles.add("head-loss" if fault.node_type == "head" else "worker-loss")
            if fault.how == "node":
                roles.add("node-loss")
        elif name in ("KillContainer", "KillGcs"):
            roles.add("head-loss" if _is_head_pod(getattr(fault, "pod", "")) else "worker-loss")
        elif name == "DeletePod":
            if _is_head_pod(getattr(fault, "name", "")):
                roles.add("head-loss")
        elif name == "FailNode":
            roles.add("node-loss")
        elif name in ("InformerLag", "CoalesceEvents", "StaleList"):
            roles.add("watch-delay")
        elif name == "LoseResponses":
            roles.add("lost-response")
        elif name == "LoseSubmitter":
            roles.add("submitter-job-loss" if fault.how == "job" else "submitter-loss")
        elif name == "Outage":
            roles.add("outage")
        else:
            roles.add(name)
    return roles


def _cluster_specs(obj: Obj) -> list[Obj]:
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "RayCluster":
        return [spec]
    if kind == "RayJob":
        return [spec.get("rayClusterSpec") or {}]
    if kind == "RayService":
        return [spec.get("rayClusterConfig") or {}]
    return []


def world_facts(workload: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Facts of the world a run's manifests (with ``knobs``, its timed changes included)
    describe: ``submissionMode`` (of the first RayJob; None without one),
    ``gcsFaultTolerance`` (a cluster spec with ``gcsFaultToleranceOptions`` or the
    ``ray.io/ft-enabled`` annotation), ``retries`` (a RayJob ``backoffLimit`` above 0),
    ``activeDeadline`` (a RayJob ``activeDeadlineSeconds``), ``suspend`` (an object suspended by
    its manifest or a timed change), ``operatorReplicas`` and ``kuberay`` (KubeRay is the
    operator, not a ``Setup.install`` of your own)."""
    manifests = workload.manifests_for(dict(knobs))
    jobs = [m for m in manifests if m.get("kind") == "RayJob"]
    job = (jobs[0].get("spec") or {}) if jobs else None
    gcs_ft = False
    for m in manifests:
        notes = (m.get("metadata") or {}).get("annotations") or {}
        if str(notes.get("ray.io/ft-enabled", "")).lower() == "true":
            gcs_ft = True
        if any(s.get("gcsFaultToleranceOptions") for s in _cluster_specs(m)):
            gcs_ft = True
    suspend = any((m.get("spec") or {}).get("suspend") is True for m in manifests) or any(
        value is True and str(knob.path).endswith("suspend")
        for _, knob, value in workload.changes_for(dict(knobs)))
    return {
        "kuberay": workload.setup.install is None,
        "submissionMode": None if job is None else str(job.get("submissionMode")
                                                         or "K8sJobMode"),
        "gcsFaultTolerance": gcs_ft,
        "retries": bool(job and int(job.get("backoffLimit") or 0) > 0),
        "activeDeadline": bool(job and job.get("activeDeadlineSeconds")),
        "suspend": suspend,
        "operatorReplicas": int(workload.setup.operator_replicas),
    }


_STATUS = (("jobDeploymentStatus", re.compile(r"\bjobDeploymentStatus (\w+)")),
           ("reason", re.compile(r"\(reason (\w+)\)")),
           ("jobStatus", re.compile(r"\bjobStatus (\w+)")))
_GOAL = re.compile(r"\{'[^']*': '(\w+)'.*never reached status\.(\w+)")


def reported_status(violation: Mapping[str, Any]) -> dict[str, str]:
    """The status fields a violation reports, from the words the invariants (and the
    explorer's goal) use: ``jobDeploymentStatus``, ``reason``, ``jobStatus``, or the field a
    ``workload-goal`` report names. Only what the message says; an empty dict otherwise."""
    message = str(violation.get("message", ""))
    out: dict[str, str] = {}
    for field, pattern in _STATUS:
        m = pattern.search(message)
        if m:
            out[field] = m.group(1)
    goal = _GOAL.search(message)
    if goal:
        out[goal.group(2)] = goal.group(1)
    return out


# ---------------------------------------------------------------------------------------------
# Classifying a finding
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class Verdict:
    """What the explorer says of a finding beside the violation: ``known`` (``"F1"``... or
    ``"new"``), its ``klass`` (``kuberay``, ``emulator-suspect`` or ``operator``) and why
    (``basis``), the Go functions (``go``: the known finding's, or for a new one the reconciler
    of the objects involved, where to start reading), the ``mitigation`` (None when nothing is
    known), and the known finding's ``title``, ``variant`` and upstream ``links``."""

    known: str
    klass: str
    basis: str
    go: tuple[str, ...] = ()
    mitigation: str | None = None
    title: str = ""
    variant: str = ""
    links: tuple[str, ...] = ()

    def to_json(self) -> Obj:
        return {"known": self.known, "class": self.klass, "mitigation": self.mitigation,
                "class_basis": self.basis, "go": list(self.go), "known_title": self.title,
                "known_variant": self.variant, "links": list(self.links)}

    def line(self) -> str:
        """One line for a report: ``F1 (kuberay): title`` or ``new (kuberay)``."""
        head = f"{self.known} ({self.klass})"
        return f"{head}: {self.title}" if self.title else head


def _matches(shape: Shape, invariant: str, others: set[str], roles: set[str],
             facts: Mapping[str, Any], status: Mapping[str, str]) -> bool:
    if invariant not in shape.invariants:
        return False
    if shape.also and not shape.also & others:
        return False
    if shape.not_also & others:
        return False
    if any(not group & roles for group in shape.faults):
        return False
    if any(facts.get(name) != value for name, value in shape.facts):
        return False
    return all(status.get(field) in values for field, values in shape.status)


def match(invariant: str, violation: Mapping[str, Any], violations: Sequence[Mapping[str, Any]],
          plan: Iterable[Any], facts: Mapping[str, Any], operator: str = "kuberay-operator"
          ) -> tuple[Known, Shape] | None:
    """The first known finding (in id order) one of whose shapes the finding has, or None."""
    others = {str(v["invariant"]) for v in violations} - {invariant}
    roles = fault_roles(plan, operator)
    status: dict[str, str] = {}
    for v in violations:  # the run's other reports of the same invariant fill what this omits
        if v["invariant"] == invariant:
            for key, value in reported_status(v).items():
                status.setdefault(key, value)
    status.update(reported_status(violation))
    for known in KNOWN:
        for shape in known.shapes:
            if _matches(shape, invariant, others, roles, facts, status):
                return known, shape
    return None


def _reconcilers(violations: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    kinds = {str(o).split("/", 1)[0] for v in violations for o in v.get("objects") or ()}
    return tuple(go for kind, go in RECONCILERS if kind in kinds)


def classify(workload: Any, knobs: Mapping[str, Any], plan: Iterable[Any], invariant: str,
             violation: Mapping[str, Any], violations: Sequence[Mapping[str, Any]] = (),
             emulator: Sequence[Mapping[str, Any]] = ()) -> Verdict:
    """The `Verdict` on one finding: ``workload`` and ``knobs`` (every knob set, by name) as
    run, the minimized ``plan``, the ``invariant`` and ``violation`` reported, every violation
    of that run (``violations``) and the emulator's checks it broke (``emulator``,
    `emu.explore.checks`)."""
    plan = list(plan)
    violations = list(violations) or [violation]
    facts = world_facts(workload, knobs)
    found = match(invariant, violation, violations, plan, facts, workload.setup.operator) \
        if facts["kuberay"] else None
    if emulator:
        first = emulator[0]
        more = f" (and {len(emulator) - 1} more)" if len(emulator) > 1 else ""
        klass = EMULATOR_SUSPECT
        basis = f"the same run broke the emulator's {first['check']} check: {first['detail']}{more}"
    elif not facts["kuberay"]:
        klass = OPERATOR
        basis = f"your operator's behaviour (Setup.install {workload.setup.install!r})"
    else:
        klass = KUBERAY
        basis = "KubeRay's behaviour as ported: no emulator check broke in the same run"
    if found is None:
        go = _reconcilers([violation, *violations]) if facts["kuberay"] else ()
        return Verdict(NEW, klass, basis, go)
    known, shape = found
    mitigation = shape.mitigation if shape.mitigation is not None else known.mitigation
    return Verdict(known.id, klass, basis, known.go, mitigation, known.title, shape.variant,
                   known.links)
