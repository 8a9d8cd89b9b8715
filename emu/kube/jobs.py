"""The Job controller (batch/v1): Pods per attempt until enough succeed or the Job fails.

A port of what ``pkg/controller/job/job_controller.go`` (``syncJob``,
``trackJobStatusAndRemoveFinalizers``, ``manageJob``, ``pastBackoffLimitOnFailure``) does for
non-indexed Jobs, as of Kubernetes 1.33:

- each Pod is created from the template with ``generateName: <job>-``, a controller
  ownerReference and the ``batch.kubernetes.io/job-tracking`` finalizer; the template already
  carries ``controller-uid`` / ``job-name`` labels (the API server's ``generateSelector``);
- finished Pods are counted exactly once through ``status.uncountedTerminatedPods``: recorded,
  finalizer removed, then moved to ``succeeded`` / ``failed``; a Pod deleted before it succeeded
  counts as failed (pod replacement policy ``TerminatingOrFailed``) and is replaced at once;
- ``restartPolicy: Never`` retries with new Pods; ``OnFailure`` restarts in place and the sum of
  container restarts counts against ``backoffLimit`` (``pastBackoffLimitOnFailure``);
- new Pods after failures wait 10 s x 2^(failures-1), at most 6 min (the pod failure back-off);
- ``failed > backoffLimit`` → ``FailureTarget`` (reason ``BackoffLimitExceeded``), then, once no
  Pod is active, ``Failed``; past ``startTime + activeDeadlineSeconds`` the same with
  ``DeadlineExceeded``; ``succeeded >= completions`` → ``SuccessCriteriaMet`` then ``Complete`` with
  ``completionTime``. Active Pods of a failing Job are deleted;
- ``spec.suspend`` deletes active Pods and sets ``Suspended``; ``ttlSecondsAfterFinished``
  deletes a finished Job (the TTL-after-finished controller's job, folded in here);
- a Pod that still has the tracking finalizer but whose Job is gone (deleted, replaced by one of
  the same name, or the ownerReference removed by an Orphan deletion) is an orphan: it goes on a
  second queue whose worker removes the finalizer (``enqueueOrphanPod``, ``syncOrphanPod``), so
  the Pods of a deleted Job can go away. The Pods seen are those with the controller-uid label.

Not emulated: indexed completion, pod failure and success policies, managedBy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.process import Process
from .common import (
    Expectations,
    KeyQueue,
    Obj,
    condition_true,
    controller_ref,
    get_condition,
    owner_reference,
    pod_is_ready,
    rfc3339,
)
from .events import EventRecorder

if TYPE_CHECKING:
    from .cluster import KubeCluster

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
POD_FAILURE_BACKOFF = 10.0
POD_FAILURE_BACKOFF_MAX = 360.0

BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"


def job_finished(job: Obj) -> bool:
    return condition_true(job, "Complete") or condition_true(job, "Failed")


def past_backoff_limit_on_failure(job: Obj, pods: list[Obj]) -> bool:
    """Port of ``pastBackoffLimitOnFailure`` (job_controller.go)."""
    spec = job.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") in ("Running", "Pending"):
            for key in ("initContainerStatuses", "containerStatuses"):
                restarts += sum(int(cs.get("restartCount") or 0) for cs in status.get(key) or [])
    limit = int(spec.get("backoffLimit", 6))
    if limit == 0:
        return restarts > 0
    return restarts >= limit


def pod_failed(pod: Obj) -> bool:
    """``isPodFailed`` with the TerminatingOrFailed replacement policy."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and phase != "Succeeded"


def _condition(ctype: str, reason: str, message: str) -> Obj:
    now = rfc3339(clock.now())
    return {"type": ctype, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


class JobController:
    """The Job controller process."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.process: Process | None = None
        self.client: Client | None = None
        self.jobs: Informer | None = None
        self.pods: Informer | None = None
        self.queue: KeyQueue | None = None
        self.orphans: KeyQueue | None = None
        self.expectations = Expectations()
        self.events: EventRecorder | None = None
        #: Per Job: (failures seen, time of the last failure): the pod failure back-off record.
        self._backoff: dict[str, tuple[int, float]] = {}

    async def main(self, process: Process) -> None:
        self.process = process
        self.expectations, self._backoff = Expectations(), {}  # a new process remembers nothing
        self.client = Client(self.cluster.world.network, process=process)
        if self.cluster.config.standard_cluster:
            self.events = EventRecorder(self.client, process, "job-controller")
        self.queue = KeyQueue(process, "job")
        self.orphans = KeyQueue(process, "job-orphan-pod")
        self.jobs = Informer(self.client, "Job")
        self.pods = Informer(self.client, "Pod", label_selector=CONTROLLER_UID_LABEL)
        self.jobs.add_event_handler(FuncHandler(
            on_add=self._job_changed, on_update=lambda _o, n: self._job_changed(n),
            on_delete=self._job_deleted))
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda _o, n: self._pod_changed(n),
            on_delete=self._pod_changed))
        for inf in (self.jobs, self.pods):
            process.spawn(inf.run())
        for inf in (self.jobs, self.pods):
            await inf.wait_synced()
        process.spawn(self.orphans.run(self.sync_orphan_pod), name=f"{process.name}:orphans")
        await self.queue.run(self.sync)

    def _job_changed(self, job: Obj) -> None:
        assert self.queue is not None
        self.queue.add(f"{job['metadata']['namespace']}/{job['metadata']['name']}")

    def _job_deleted(self, job: Obj) -> None:
        """``deleteJob``: sync the key, and queue the Job's Pods that still carry the finalizer
        (``cleanupPodFinalizers``)."""
        self._job_changed(job)
        for pod in self.job_pods(job):
            if pod_is_tracked(pod):
                self._enqueue_orphan(pod)

    def _resolve(self, namespace: str, ref: Obj) -> Obj | None:
        """``resolveControllerRef``: the Job ``ref`` names, if it is the one it names by uid."""
        assert self.jobs is not None
        if ref.get("kind") != "Job":
            return None
        job = self.jobs.get(str(ref.get("name")), namespace)
        if job is None or job["metadata"].get("uid") != ref.get("uid"):
            return None
        return job

    def _enqueue_orphan(self, pod: Obj) -> None:
        assert self.orphans is not None
        self.orphans.add(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")

    def _pod_changed(self, pod: Obj) -> None:
        ref = controller_ref(pod)
        ns = pod["metadata"]["namespace"]
        if ref is not None and self._resolve(ns, ref) is not None:
            assert self.queue is not None
            self.queue.add(f"{ns}/{ref['name']}")
        elif pod_is_tracked(pod):
            self._enqueue_orphan(pod)  # its Job is gone, or it has none: an orphan

    async def sync_orphan_pod(self, key: str) -> None:
        """``syncOrphanPod``: remove the tracking finalizer unless the Pod is (again) controlled
        by a Job that exists and has not finished."""
        assert self.pods is not None
        ns, _, name = key.partition("/")
        pod = self.pods.get(name, ns)
        if pod is None or not pod_is_tracked(pod):
            return
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return  # controlled by something else: not ours to touch
            job = self._resolve(ns, ref)
            if job is not None and not job_finished(job):
                return
        await self.remove_finalizers([pod])

    def job_pods(self, job: Obj) -> list[Obj]:
        assert self.pods is not None
        uid = job["metadata"]["uid"]
        return [p for p in self.pods.list(job["metadata"]["namespace"], {CONTROLLER_UID_LABEL: uid})
                if (controller_ref(p) or {}).get("uid") == uid]

    # -- sync ------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        """``syncJob`` for one Job."""
        assert self.jobs is not None and self.pods is not None and self.queue is not None
        ns, _, name = key.partition("/")
        job = self.jobs.get(name, ns)
        if job is None:
            self.expectations.clear(key)
            self._backoff.pop(key, None)
            return
        pods = self.job_pods(job)
        if job_finished(job):
            await self.remove_finalizers([p for p in pods if pod_is_tracked(p)])
            await self.maybe_delete_after_ttl(key, job)
            return
        if not self.expectations.satisfied(key, lambda n: self.pods.get(n, ns)):  # type: ignore[union-attr]
            self.queue.add_after(key, 0.05)
            return
        spec = job.get("spec") or {}
        status: Obj = dict(job.get("status") or {})
        now = clock.now()
        suspended = bool(spec.get("suspend"))
        if not status.get("startTime") and not suspended:
            status["startTime"] = rfc3339(now)
        uncounted = {k: list(v) for k, v in (status.get("uncountedTerminatedPods") or {}).items()}
        uncounted.setdefault("succeeded", [])
        uncounted.setdefault("failed", [])
        newly: list[Obj] = []
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if not pod_is_tracked(pod):
                continue
            if uid in uncounted["succeeded"] or uid in uncounted["failed"]:
                newly.append(pod)  # recorded by an earlier sync that did not finish
                continue
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Succeeded":
                uncounted["succeeded"].append(uid)
                newly.append(pod)
            elif pod_failed(pod):
                uncounted["failed"].append(uid)
                newly.append(pod)
                count, _ = self._backoff.get(key, (0, 0.0))
                self._backoff[key] = (count + 1, now)
        active = [p for p in pods if not p["metadata"].get("deletionTimestamp")
                  and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        terminating = [p for p in pods if p["metadata"].get("deletionTimestamp")
                       and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        succeeded = int(status.get("succeeded") or 0) + len(uncounted["succeeded"])
        failed = int(status.get("failed") or 0) + len(uncounted["failed"])
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
        conditions: list[Obj] = list(status.get("conditions") or [])

        # -- what finishes the Job ----------------------------------------------------------
        failure = get_condition(status, "FailureTarget")
        finished_reason: tuple[str, str] | None = None
        if failure is not None and failure.get("status") == "True":
            finished_reason = (str(failure.get("reason")), str(failure.get("message")))
        elif failed > int(spec.get("backoffLimit", 6)) or past_backoff_limit_on_failure(job,
                                                                                        active):
            finished_reason = ("BackoffLimitExceeded", BACKOFF_LIMIT_MESSAGE)
        elif self._past_deadline(job, status, now):
            finished_reason = ("DeadlineExceeded", DEADLINE_MESSAGE)
        complete = finished_reason is None and succeeded >= completions
        if finished_reason is not None:
            if failure is None:
                conditions.append(_condition("FailureTarget", *finished_reason))
            await self.delete_pods(key, active)
            if not active and not terminating:
                conditions.append(_condition("Failed", *finished_reason))
        elif complete:
            if get_condition(status, "SuccessCriteriaMet") is None:
                conditions.append(_condition("SuccessCriteriaMet", "CompletionsReached",
                                             COMPLETIONS_MESSAGE))
            await self.delete_pods(key, active)
            if not active and not terminating:
                conditions.append(_condition("Complete", "CompletionsReached",
                                             COMPLETIONS_MESSAGE))
                status["completionTime"] = rfc3339(now)
        elif suspended:
            await self.delete_pods(key, active)
            if get_condition(status, "Suspended") is None:
                conditions.append(_condition("Suspended", "JobSuspended", "Job suspended"))
        else:
            conditions = [c for c in conditions if c.get("type") != "Suspended"]
            want = min(parallelism, completions - succeeded)
            await self.manage_pods(key, job, active, terminating, want)
            self._requeue_at_deadline(key, job, status, now)
        active_left = [] if finished_reason or complete or suspended else active

        # -- the status, with uncounted Pods flushed ----------------------------------------
        status["conditions"] = conditions
        status["active"] = len(active_left)
        status["ready"] = sum(1 for p in active_left if pod_is_ready(p))
        status["terminating"] = len(terminating)
        if newly:
            # Record the finished Pods first; the Job finishes only once they are counted.
            interim = {**status, "uncountedTerminatedPods": uncounted, "conditions": [
                c for c in conditions if c.get("type") not in ("Complete", "Failed")]}
            interim.pop("completionTime", None)
            job = await self.write_status(job, interim)
            await self.remove_finalizers(newly)
            completion_time = status.get("completionTime")
            status = {**(job.get("status") or {}), "conditions": conditions}
            if completion_time:
                status["completionTime"] = completion_time
        status["succeeded"] = int(status.get("succeeded") or 0) + len(uncounted["succeeded"])
        status["failed"] = int(status.get("failed") or 0) + len(uncounted["failed"])
        status["uncountedTerminatedPods"] = {}
        for field in ("active", "succeeded", "failed"):
            if not status.get(field):
                status.pop(field, None)
        if status != (job.get("status") or {}):
            was_complete = condition_true(job, "Complete")
            job = await self.write_status(job, status)
            if self.events is not None and not was_complete and condition_true(job, "Complete"):
                self.events.event(job, "Normal", "Completed", "Job completed")
        if job_finished(job):
            await self.maybe_delete_after_ttl(key, job)

    def _past_deadline(self, job: Obj, status: Obj, now: float) -> bool:
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        if deadline is None or not status.get("startTime"):
            return False
        return now >= clock.parse_time(status["startTime"]) + float(deadline)

    def _requeue_at_deadline(self, key: str, job: Obj, status: Obj, now: float) -> None:
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        if deadline is not None and status.get("startTime"):
            assert self.queue is not None
            due = clock.parse_time(status["startTime"]) + float(deadline)
            self.queue.add_after(key, max(due - now, 0.0))

    async def write_status(self, job: Obj, status: Obj) -> Obj:
        assert self.client is not None
        return await self.client.update_status({**job, "status": status})

    # -- Pods ------------------------------------------------------------------------------------

    async def manage_pods(self, key: str, job: Obj, active: list[Obj], terminating: list[Obj],
                          want: int) -> None:
        """``manageJob``: create or delete Pods so ``want`` are active, after the back-off."""
        assert self.client is not None and self.queue is not None
        if len(active) > want:
            extra = sorted(active, key=lambda p: p["metadata"].get("creationTimestamp", ""),
                           reverse=True)[: len(active) - want]
            await self.delete_pods(key, extra)
            return
        missing = want - len(active)
        if missing <= 0:
            return
        failures, last = self._backoff.get(key, (0, 0.0))
        if failures:
            wait = min(POD_FAILURE_BACKOFF * 2 ** (failures - 1), POD_FAILURE_BACKOFF_MAX)
            remaining = last + wait - clock.now()
            if remaining > 0:
                self.queue.add_after(key, remaining)
                return
        template = (job.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        meta = job["metadata"]
        for _ in range(missing):
            pod_meta: Obj = {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                             "labels": dict(tmeta.get("labels") or {}),
                             "ownerReferences": [owner_reference(job)],
                             "finalizers": [JOB_TRACKING_FINALIZER]}
            if tmeta.get("annotations"):
                pod_meta["annotations"] = dict(tmeta["annotations"])
            created = await self.client.create({"apiVersion": "v1", "kind": "Pod",
                                                "metadata": pod_meta,
                                                "spec": template.get("spec") or {}})
            self.expectations.expect_create(key, created["metadata"]["name"])
            assert self.process is not None
            self.process.log("job_pod_created", job=key, pod=created["metadata"]["name"])
            if self.events is not None:
                self.events.event(job, "Normal", "SuccessfulCreate",
                                  f"Created pod: {created['metadata']['name']}")

    async def delete_pods(self, key: str, pods: list[Obj]) -> None:
        assert self.client is not None
        for pod in pods:
            meta = pod["metadata"]
            try:
                await self.client.delete("Pod", meta["name"], meta["namespace"])
                self.expectations.expect_delete(key, meta["name"])
            except ApiError as err:
                if not is_not_found(err):
                    raise

    async def remove_finalizers(self, pods: list[Obj]) -> None:
        assert self.client is not None
        for pod in pods:
            meta = pod["metadata"]
            rest = [f for f in meta.get("finalizers") or [] if f != JOB_TRACKING_FINALIZER]
            try:
                await self.client.patch("Pod", meta["name"],
                                        {"metadata": {"finalizers": rest or None}},
                                        meta["namespace"])
            except ApiError as err:
                if not is_not_found(err):
                    raise

    async def maybe_delete_after_ttl(self, key: str, job: Obj) -> None:
        """The TTL-after-finished controller: delete a finished Job ``ttlSecondsAfterFinished``
        after it finished (Foreground, so its Pods go first)."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None or job["metadata"].get("deletionTimestamp"):
            return
        cond = get_condition(job.get("status"), "Complete") or get_condition(
            job.get("status"), "Failed")
        if cond is None:
            return
        due = clock.parse_time(cond["lastTransitionTime"]) + float(ttl)
        now = clock.now()
        if due > now:
            assert self.queue is not None
            self.queue.add_after(key, due - now)
            return
        assert self.client is not None
        try:
            await self.client.delete("Job", job["metadata"]["name"], job["metadata"]["namespace"],
                                     propagation_policy="Foreground")
        except ApiError as err:
            if not is_not_found(err):
                raise


def pod_is_tracked(pod: Obj) -> bool:
    return JOB_TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or [])
