"""The RayCronJob controller (feature gate ``RayCronJob``, alpha, off by default).

Port of ``raycronjob_controller.go`` and ``ValidateRayCronJobSpec`` (validation.go): on each pass
the RayCronJob's cron schedule (``robfig/cron`` ``ParseStandard``, with ``TZ=<timeZone>``) gives
the next tick after ``status.lastScheduleTime`` (or the creation time); a tick not yet due is a
RequeueAfter until it; a due tick creates the RayJob ``<name>-<unix minutes of the tick>``
(labelled ``ray.io/cronjob-name``, annotated with the tick, owned by the RayCronJob, its spec the
``jobTemplate``; AlreadyExists is fine), records ``lastScheduleTime`` = that tick (a Status
Update) and requeues for the following tick. Like Go, only the earliest missed tick is run per
pass (the next pass catches up one tick at a time). A suspended RayCronJob only records a
``SuspendedRayCronJob`` Event; an invalid one an ``InvalidRayCronJobSpec`` Warning, no requeue.

`CronSchedule` is a port of the parts of ``robfig/cron/v3`` ``ParseStandard`` that matter: five
fields (minute, hour, day of month, month, day of week) with ``*``, ``?``, ``a-b``, ``/step``,
lists and month/day names; the descriptors ``@yearly`` … ``@hourly`` and ``@every <duration>``;
day-of-month and day-of-week ORed when both are restricted; a ``TZ=``/``CRON_TZ=`` prefix.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Mapping
from typing import Any

import attrs

from emu.apiserver.errors import ApiError, is_already_exists, is_not_found
from emu.kuberay.raycluster import VIRTUAL_EPOCH, EventRecorder, rfc3339
from emu.kuberay.utils import constant as C
from emu.kuberay.utils.util import deep_copy
from emu.kuberay.utils.validation import ValidationError, validate_ray_job_spec
from emu.runtime import Request, Result

Obj = dict[str, Any]

#: ``RayCronJobDefaultRequeueDuration``.
DEFAULT_REQUEUE = 3.0
_EPOCH = VIRTUAL_EPOCH
_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")


class CronError(ValueError):
    """A schedule ``ParseStandard`` refuses (the message is robfig/cron's where it matters)."""


def _field(text: str, low: int, high: int, names: Mapping[str, int]) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it is unrestricted (``*`` or ``?``)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"failed to parse int from {step_text}")
            step = int(step_text)
        if rng in ("*", "?"):
            start, end = low, high
            star = star or not step_text
        else:
            lo_text, _, hi_text = rng.partition("-")
            start = _value(lo_text, names)
            end = _value(hi_text, names) if hi_text else (high if step_text else start)
        if start < low or end > high or start > end:
            raise CronError(f"end of range ({end}) above maximum ({high}): {part}"
                            if end > high else f"beginning of range ({start}) below minimum "
                            f"({low}): {part}")
        values.update(range(start, end + 1, step))
    return frozenset(values), star


def _value(text: str, names: Mapping[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise CronError(f"failed to parse int from {text}")
    return int(text)


@attrs.frozen
class CronSchedule:
    """A parsed schedule: `next` gives the first tick strictly after a time."""

    minutes: frozenset[int]
    hours: frozenset[int]
    dom: frozenset[int]
    months: frozenset[int]
    dow: frozenset[int]
    dom_star: bool
    dow_star: bool
    tz: dt.tzinfo
    every: float | None = None

    @classmethod
    def parse(cls, spec: str) -> CronSchedule:
        """``cron.ParseStandard``."""
        text = spec.strip()
        tz: dt.tzinfo = dt.UTC
        if text.startswith(("TZ=", "CRON_TZ=")):
            head, _, text = text.partition(" ")
            name = head.split("=", 1)[1]
            try:
                tz = zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise CronError(f"provided bad location {name}: unknown time zone "
                                f"{name}") from None
            text = text.strip()
        if text.startswith("@every "):
            parts = _GO_DURATION.findall(text[len("@every "):])
            if not parts:
                raise CronError(f"failed to parse duration {text}")
            unit = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
            seconds = sum(float(n) * unit[u] for n, u in parts)
            return cls(frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), True,
                       True, tz, every=max(seconds, 1.0))
        text = _DESCRIPTORS.get(text, text)
        if text.startswith("@"):
            raise CronError(f"unrecognized descriptor: {text}")
        fields = text.split()
        if len(fields) != 5:
            raise CronError(f"expected exactly 5 fields, found {len(fields)}: {fields}")
        minutes, _ = _field(fields[0], 0, 59, {})
        hours, _ = _field(fields[1], 0, 23, {})
        dom, dom_star = _field(fields[2], 1, 31, {})
        months, _ = _field(fields[3], 1, 12, _MONTHS)
        dow, dow_star = _field(fields[4], 0, 7, _DAYS)
        dow = frozenset(d % 7 for d in dow)
        return cls(minutes, hours, dom, months, dow, dom_star, dow_star, tz)

    def _day_matches(self, day: dt.datetime) -> bool:
        dom_ok = day.day in self.dom
        dow_ok = (day.isoweekday() % 7) in self.dow
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def next(self, after: dt.datetime) -> dt.datetime:
        """The first tick strictly after ``after`` (in UTC)."""
        if self.every is not None:  # ConstantDelaySchedule: rounded to the second
            base = after.replace(microsecond=0)
            return base + dt.timedelta(seconds=self.every)
        t = after.astimezone(self.tz).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        limit = t + dt.timedelta(days=366 * 5)
        while t < limit:
            if t.month not in self.months or not self._day_matches(t):
                t = (t + dt.timedelta(days=1)).replace(hour=0, minute=0)
                continue
            if t.hour not in self.hours:
                t = (t + dt.timedelta(hours=1)).replace(minute=0)
                continue
            if t.minute not in self.minutes:
                t += dt.timedelta(minutes=1)
                continue
            return t.astimezone(dt.UTC)
        raise CronError("schedule never fires")


def _time(seconds: float) -> dt.datetime:
    return _EPOCH + dt.timedelta(seconds=seconds)


def _seconds(t: dt.datetime) -> float:
    return (t - _EPOCH).total_seconds()


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def format_schedule(cron_job: Mapping[str, Any]) -> str:
    """Port of ``formatSchedule``."""
    spec = cron_job.get("spec") or {}
    if spec.get("timeZone") is not None:
        return f"TZ={spec['timeZone']} {spec.get('schedule', '')}"
    return str(spec.get("schedule", ""))


def validate_ray_cron_job_spec(cron_job: Mapping[str, Any]) -> None:
    """Port of ``ValidateRayCronJobSpec`` (validation.go)."""
    name = str((cron_job.get("metadata") or {}).get("name") or "")
    spec = cron_job.get("spec") or {}
    if len(name) > C.MAX_RAY_CRON_JOB_NAME_LENGTH:
        raise ValidationError(f"RayCronJob name should be no more than "
                              f"{C.MAX_RAY_CRON_JOB_NAME_LENGTH} characters")
    schedule = str(spec.get("schedule") or "")
    if "TZ" in schedule:
        raise ValidationError("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    try:
        CronSchedule.parse(schedule)
    except CronError as err:
        raise ValidationError(f"invalid cron schedule: {err}") from None
    if spec.get("timeZone") is not None:
        tz = spec["timeZone"]
        if tz == "":
            raise ValidationError("timeZone must not be empty string, omit the field to use the "
                                  "local time zone of the KubeRay operator")
        try:
            zoneinfo.ZoneInfo(str(tz))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValidationError(f"invalid time zone: unknown time zone {tz}") from None
    try:
        validate_ray_job_spec({"spec": spec.get("jobTemplate") or {}})
    except ValidationError as err:
        raise ValidationError(f"invalid RayJob template: {err}") from None


def get_ray_job_name(cron_job_name: str, scheduled: dt.datetime) -> str:
    """Port of ``getRayJobName``: ``<cronjob>-<unix minutes>``."""
    return f"{cron_job_name}-{int(scheduled.timestamp()) // 60}"


def construct_ray_job(cron_job: Mapping[str, Any], scheduled: dt.datetime) -> Obj:
    """Port of ``constructRayJob``."""
    meta = cron_job.get("metadata") or {}
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {
            "name": get_ray_job_name(str(meta.get("name")), scheduled),
            "namespace": meta.get("namespace"),
            "labels": {C.RAY_CRON_JOB_NAME_LABEL_KEY: meta.get("name")},
            "annotations": {C.RAY_CRON_JOB_TIMESTAMP_ANNOTATION_KEY:
                            scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCronJob",
                                 "name": meta.get("name"), "uid": meta.get("uid"),
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": deep_copy((cron_job.get("spec") or {}).get("jobTemplate") or {}),
    }


class RayCronJobReconciler:
    """Port of ``RayCronJobReconciler``."""

    def __init__(self, client: Any, *, recorder: EventRecorder | None = None) -> None:
        self.client = client
        self.recorder = recorder or EventRecorder(client, "raycronjob-controller")

    def now(self) -> float:
        import asyncio

        return asyncio.get_running_loop().time()

    async def reconcile(self, request: Request) -> Result:
        """Port of ``Reconcile`` (raycronjob_controller.go)."""
        try:
            instance = await self.client.get("RayCronJob", request.name, request.namespace)
        except ApiError as err:
            if is_not_found(err):
                return Result()
            raise
        original = deep_copy(instance)
        try:
            validate_ray_cron_job_spec(instance)
        except ValidationError as err:
            meta = instance["metadata"]
            self.recorder.eventf(instance, "Warning", C.INVALID_RAY_CRON_JOB_SPEC, "Validate",
                                 f"{meta.get('namespace')}/{meta.get('name')}: {err}")
            return Result()
        spec = instance.get("spec") or {}
        if spec.get("suspend"):
            self.recorder.eventf(instance, "Normal", C.SUSPENDED_RAY_CRON_JOB, "Suspend",
                                 "RayCronJob suspended, no new RayJobs will be created")
            return Result()
        schedule = CronSchedule.parse(format_schedule(instance))
        now = _time(self.now())
        status = instance.get("status") or {}
        earliest = _parse_time(status["lastScheduleTime"]) if status.get("lastScheduleTime") \
            else _parse_time(instance["metadata"]["creationTimestamp"])
        scheduled = schedule.next(earliest)
        if scheduled > now:
            return Result(requeue_after=(scheduled - now).total_seconds())
        ray_job = construct_ray_job(instance, scheduled)
        try:
            await self.client.create(ray_job)
        except ApiError as err:
            if not is_already_exists(err):
                raise
        instance.setdefault("status", {})["lastScheduleTime"] = rfc3339(_seconds(scheduled))
        following = schedule.next(scheduled)
        requeue_at = (following - now).total_seconds()
        if (original.get("status") or {}).get("lastScheduleTime") != \
                instance["status"]["lastScheduleTime"]:
            try:
                await self.client.update_status(instance)
            except ApiError:
                return Result(requeue_after=DEFAULT_REQUEUE)
        return Result(requeue_after=max(requeue_at, 0.0))

    def setup_with_manager(self, mgr: Any, reconcile_concurrency: int) -> Any:
        """Port of ``SetupWithManager``: For RayCronJob."""
        from emu.runtime import ControllerOptions

        return (mgr.new_controller()
                .for_("RayCronJob", api_version="ray.io/v1")
                .with_options(ControllerOptions(max_concurrent_reconciles=reconcile_concurrency))
                .complete(self))


def setup(mgr: Any, ctx: Any) -> RayCronJobReconciler | None:
    """main.go: the RayCronJob controller only when its feature gate is on."""
    if not ctx.gates.enabled("RayCronJob"):
        return None
    reconciler = RayCronJobReconciler(mgr.get_client())
    reconciler.setup_with_manager(mgr, ctx.config.reconcile_concurrency)
    return reconciler
