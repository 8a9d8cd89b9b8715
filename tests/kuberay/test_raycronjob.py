"""The RayCronJob controller (gate RayCronJob): ticks of a cron schedule create RayJobs named by
the tick; robfig/cron's ParseStandard semantics."""

from __future__ import annotations

import datetime as dt

import pytest

from emu.kube import cluster as kube_cluster
from emu.kuberay.raycronjob import CronError, CronSchedule, get_ray_job_name

UTC = dt.UTC


def at(*args):
    return dt.datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize("spec,after,expected", [
    ("* * * * *", at(2026, 1, 1, 0, 0, 30), at(2026, 1, 1, 0, 1)),
    ("*/15 * * * *", at(2026, 1, 1, 0, 1), at(2026, 1, 1, 0, 15)),
    ("0 9 * * mon-fri", at(2026, 1, 2, 10, 0), at(2026, 1, 5, 9, 0)),  # Fri → Mon
    ("30 2 1 jan,jul *", at(2026, 1, 1, 3, 0), at(2026, 7, 1, 2, 30)),
    ("0 0 13 * 5", at(2026, 1, 1), at(2026, 1, 2)),  # day-of-month OR day-of-week (Friday)
    ("@hourly", at(2026, 1, 1, 0, 0), at(2026, 1, 1, 1, 0)),
    ("@every 90s", at(2026, 1, 1, 0, 0), at(2026, 1, 1, 0, 1, 30)),
    ("TZ=Asia/Taipei 45 21 * * *", at(2026, 1, 1), at(2026, 1, 1, 13, 45)),
])
def test_next_tick(spec, after, expected):
    assert CronSchedule.parse(spec).next(after) == expected


@pytest.mark.parametrize("spec", ["* * * *", "61 * * * *", "* * * * * *", "@sometimes",
                                  "*/0 * * * *", "TZ=Mars/Olympus * * * * *"])
def test_bad_schedules(spec):
    with pytest.raises(CronError):
        CronSchedule.parse(spec)


def test_job_name_is_the_tick_in_unix_minutes():
    assert get_ray_job_name("nightly", at(2026, 1, 1, 0, 1)) == "nightly-29453761"


CRON = {
    "apiVersion": "ray.io/v1", "kind": "RayCronJob",
    "metadata": {"name": "every-minute", "namespace": "default"},
    "spec": {"schedule": "* * * * *", "jobTemplate": {
        "entrypoint": "sleep 1", "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
            "containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}}},
}


async def _install(sim, gate):
    kube = kube_cluster.install(sim, nodes=2)
    await kube.wait_ready()
    kuberay = await sim.install_kuberay(feature_gates={"RayCronJob": gate})
    await kuberay.wait_for_leader(timeout=120)


async def test_each_tick_creates_a_ray_job_and_records_it(sim):
    await _install(sim, True)
    await sim.apply(CRON)
    cron = await sim.wait_for("RayCronJob", "every-minute",
                              lambda c: (c.get("status") or {}).get("lastScheduleTime"),
                              timeout=120)
    first = cron["status"]["lastScheduleTime"]
    assert first.endswith(":00Z")
    jobs = sim.api.list("RayJob", "default")["items"]
    assert len(jobs) == 1
    job = jobs[0]
    assert job["metadata"]["labels"]["ray.io/cronjob-name"] == "every-minute"
    assert job["metadata"]["annotations"]["ray.io/cronjob-scheduled-timestamp"] == first
    assert job["metadata"]["ownerReferences"][0]["kind"] == "RayCronJob"
    assert job["spec"]["entrypoint"] == "sleep 1"
    await sim.wait_for("RayCronJob", "every-minute",
                       lambda c: c["status"]["lastScheduleTime"] != first, timeout=120)
    assert len(sim.api.list("RayJob", "default")["items"]) == 2


async def test_gate_off_means_no_controller(sim):
    await _install(sim, False)
    await sim.apply(CRON)
    await sim.sleep(180)
    assert sim.api.list("RayJob", "default")["items"] == []


async def test_invalid_schedule_is_a_warning_event(sim):
    await _install(sim, True)
    await sim.apply({**CRON, "spec": {**CRON["spec"], "schedule": "TZ=UTC * * * * *"}})
    await sim.sleep(10)
    events = [e for e in sim.api.list("Event", "default")["items"]
              if e["reason"] == "InvalidRayCronJobSpec"]
    assert events and "cannot use TZ or CRON_TZ in schedule" in events[0]["message"]
    assert sim.api.list("RayJob", "default")["items"] == []
