"""Scripted job entrypoints: a registered async program is the job's driver (tasks, actors,
prints, checkpoints, failure), and simple shell runs without one."""

from __future__ import annotations

import pytest
from raytestworld import HEAD_SVC

import emu
from emu.ray.entrypoints import is_simple_shell

HEAD = "raycluster-head-0"
DASH = f"{HEAD_SVC}:8265"


async def run_job(rw, entrypoint, sid, wait=120.0, workers=0):
    head = rw.head(HEAD)
    for i in range(workers):
        rw.worker(f"worker-{i}")
    await head.wait_ready()
    answer = await rw.http(DASH, "POST", "/api/jobs/", {"entrypoint": entrypoint,
                                                        "submission_id": sid})
    assert answer.status == 200, answer.body
    final = {}

    async def done():
        nonlocal final
        final = (await rw.http(DASH, "GET", f"/api/jobs/{sid}")).json()
        return final["status"] in ("SUCCEEDED", "FAILED", "STOPPED")

    deadline = rw.now + wait
    while not await done():
        assert rw.now < deadline, final
        await rw.sleep(1)
    logs = (await rw.http(DASH, "GET", f"/api/jobs/{sid}/logs")).json()["logs"]
    return final, logs


def square(x):
    return x * x


async def test_a_registered_program_runs_tasks_prints_and_checkpoints(ray_world):
    rw = ray_world
    seen = {}

    async def train(job):
        ref = job.ray.remote(square, 7)
        seen["value"] = await job.ray.get(ref)
        job.print("epoch", 1, "loss", 0.5)
        job.checkpoint("train", {"epoch": 1})
        start = job.now
        await job.sleep(30)
        seen["took"] = job.now - start
        return 0

    rw.config.entrypoint("python train.py", train)
    final, logs = await run_job(rw, "python train.py", "job-1", workers=1)
    assert final["status"] == "SUCCEEDED"
    assert seen == {"value": 49, "took": 30.0}
    assert "epoch 1 loss 0.5" in logs
    assert rw.config.checkpoint_store("train").load("python train.py") == {"epoch": 1}


async def test_a_program_that_fails_makes_the_job_failed_with_rays_message(ray_world):
    rw = ray_world

    async def diverge(job):
        job.fail(3, "loss is NaN")

    rw.config.entrypoint("python train.py --lr 10", diverge)
    final, _logs = await run_job(rw, "python train.py --lr 10", "job-2")
    assert final["status"] == "FAILED"
    assert final["message"].startswith("Job entrypoint command failed with exit code 3")
    assert "loss is NaN" in final["message"]


async def test_a_program_that_raises_exits_one(ray_world):
    rw = ray_world

    async def broken(job):
        raise KeyError("batch")

    rw.config.entrypoint("python broken.py", broken)
    final, _logs = await run_job(rw, "python broken.py", "job-3")
    assert final["status"] == "FAILED"
    assert "exit code 1" in final["message"] and "KeyError" in final["message"]


async def test_simple_shell_sleeps_echoes_and_exits(ray_world):
    rw = ray_world
    final, logs = await run_job(rw, "echo start && sleep 20 && echo done && exit 4", "job-4")
    assert final["status"] == "FAILED"
    assert "exit code 4" in final["message"]
    assert "start" in logs.splitlines() and "done" in logs.splitlines()
    assert final["end_time"] - final["start_time"] >= 20_000


async def test_false_stops_an_and_chain_and_python_c_takes_its_time(ray_world):
    rw = ray_world
    rw.config.python_seconds = 12
    final, logs = await run_job(rw, 'python -c "print(1)" && false && echo never', "job-5")
    assert final["status"] == "FAILED" and "never" not in logs.splitlines()
    assert final["end_time"] - final["start_time"] >= 12_000


@pytest.mark.parametrize("text,simple", [
    ("sleep 5", True), ("echo hi && exit 1", True), ('python -c "import ray"', True),
    ("sleep 1; sleep 2\nexit 0", True), ("python train.py", False), ("sleep 1 | cat", False),
    ("ray job submit -- python x.py", False), ("sleep 1 || true", False),
])
def test_what_counts_as_simple_shell(text, simple):
    assert is_simple_shell(text) is simple


def test_entrypoint_registration_checks_its_arguments():
    async def main(sim):
        with pytest.raises(ValueError):
            sim.ray.entrypoint("  ", lambda job: None)
        with pytest.raises(TypeError):
            sim.ray.entrypoint("python x.py", "not a program")
        return sim.ray

    assert emu.run(main) is not None


async def test_a_program_returning_something_else_than_an_exit_code_fails_the_job_saying_so(
        ray_world):
    rw = ray_world

    async def returns_a_handle(job):
        return job.ray

    rw.config.entrypoint("python oops.py", returns_a_handle)
    final, logs = await run_job(rw, "python oops.py", "oops")
    assert final["status"] == "FAILED"
    assert "the entrypoint program for 'python oops.py' returned <emu.ray.workloads.RayClient" \
        in logs
    assert "it must return an exit code (int) or None" in final["message"]
