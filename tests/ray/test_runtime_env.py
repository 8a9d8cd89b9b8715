"""Runtime environments cost setup time before a job's driver starts (the job is PENDING), as
Ray's runtime-env agent builds them; a node reuses an environment it built."""

from __future__ import annotations

from test_ray_jobs import cluster, status, submit

from emu.ray.config import RuntimeEnvCosts


def test_setup_seconds_follow_what_the_environment_asks_for():
    costs = RuntimeEnvCosts()
    assert costs.seconds({"env_vars": {"A": "1"}}) == 0
    assert costs.seconds({"pip": ["requests==2.26.0", "pendulum==2.1.2"]}) == 30
    assert costs.seconds({"pip": {"packages": ["a"], "pip_check": False}}) == 20
    assert costs.seconds({"uv": ["a", "b", "c"]}) == 5
    assert costs.seconds({"conda": {"dependencies": ["python=3.11", "pip"]}}) == 80
    assert costs.seconds({"conda": "existing-env"}) == 0
    assert costs.seconds({"working_dir": "s3://b/x.zip", "py_modules": ["a", "b"]}) == 6
    assert RuntimeEnvCosts.free().seconds({"pip": ["a"], "working_dir": "."}) == 0


async def test_a_pip_job_stays_pending_while_its_environment_installs_then_reuses_it(ray_world):
    rw = ray_world
    await cluster(rw)
    env = {"pip": ["requests==2.26.0", "pendulum==2.1.2"]}
    await submit(rw, "sleep 1", "first", runtime_env=env)
    await rw.sleep(29)
    first = await status(rw, "first")
    assert (first["status"], first["message"]) == (
        "PENDING",
        "Job has not started yet. It may be waiting for the runtime environment to be set up.")
    await rw.sleep(2)
    assert (await status(rw, "first"))["status"] == "RUNNING"
    await rw.sleep(5)
    assert (await status(rw, "first"))["status"] == "SUCCEEDED"
    await submit(rw, "sleep 1", "again", runtime_env=env)  # built on this node already
    await rw.sleep(0.5)
    assert (await status(rw, "again"))["status"] == "RUNNING"


async def test_free_costs_start_the_driver_at_once(ray_world):
    rw = ray_world
    rw.config.runtime_env_costs = RuntimeEnvCosts.free()
    await cluster(rw)
    await submit(rw, "sleep 1", "free", runtime_env={"pip": ["a"]})
    await rw.sleep(0.5)
    assert (await status(rw, "free"))["status"] == "RUNNING"
