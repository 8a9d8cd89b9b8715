"""The Ray image's command lines: roles, ``ray start`` options, the init container, and how
``ray start --block`` reacts to a killed ``gcs_server``."""

from __future__ import annotations

import asyncio

import pytest
from raytestworld import HEAD_SVC

from emu.ray.cli import classify, expand, parse_ray_start, split_statements
from emu.ray.faults import kill_gcs

HEAD = "raycluster-head-0"
WAIT_GCS = f"""
    SECONDS=0
    while true; do
        if (( SECONDS <= 120 )); then
            if ray health-check --address {HEAD_SVC}:6379 > /dev/null 2>&1; then
                echo "GCS is ready."
                break
            fi
            echo "$SECONDS seconds elapsed: Waiting for GCS to be ready."
        else
            if ray health-check --address {HEAD_SVC}:6379; then
                echo "GCS is ready. Any error messages above can be safely ignored."
                break
            fi
        fi
        sleep 5
    done
"""


@pytest.mark.parametrize(("command", "role"), [
    ("ulimit -n 65536; ray start --head --dashboard-host=0.0.0.0 --block", "head"),
    (f"ulimit -n 65536; ray start --address={HEAD_SVC}:6379 --block", "worker"),
    (WAIT_GCS, "wait-gcs"),
    ("if ! ray job status --address http://h:8265 id >/dev/null 2>&1 ; then ray job submit "
     "--address http://h:8265 --no-wait --submission-id id -- python x.py ; fi", "script"),
    ("python -c \"from ray._private.gcs_utils import cleanup_redis_storage; ...\"",
     "cleanup-redis"),
    ("sleep infinity", "idle"),
])
def test_container_role_is_read_from_the_command_line(command, role):
    assert classify(command) == role


def test_ray_start_options_are_parsed_after_env_expansion():
    text = expand("ray start --head --port=6380 --num-cpus=0 --redis-password=$REDIS_PASSWORD "
                  "--resources='{\"TPU\": 4}' --labels=zone=a,tier=gpu --block",
                  {"REDIS_PASSWORD": "s3cret"})
    opts = parse_ray_start(text)
    assert (opts.head, opts.port, opts.num_cpus, opts.redis_password, opts.block) == (
        True, 6380, 0.0, "s3cret", True)
    assert opts.resources == {"TPU": 4.0}
    assert opts.labels == {"zone": "a", "tier": "gpu"}


def test_statements_split_outside_quotes_only():
    assert split_statements("echo 'a;b' ; sleep 2 && echo \"c;d\"\nfi") == [
        "echo 'a;b'", "sleep 2", "echo \"c;d\"", "fi"]


async def test_wait_gcs_ready_init_container_blocks_until_the_gcs_answers(ray_world):
    rw = ray_world
    init = rw.pod("worker-0-init", command=["/bin/bash", "-lc", "--"], args=[WAIT_GCS])
    await rw.sleep(30)
    assert init.alive, "no GCS yet: it keeps trying every 5 s"
    await rw.head(HEAD).wait_ready()
    started = rw.now
    assert await init.wait_exit(10) == 0
    assert rw.now - started <= 5.0


@pytest.mark.parametrize(("signal", "delay"), [("KILL", 1.0), ("TERM", 61.0)])
async def test_head_container_exits_after_its_gcs_dies_soon_for_sigkill_late_for_sigterm(
        ray_world, signal, delay):
    rw = ray_world
    head = rw.head(HEAD)
    await head.wait_ready()
    killed_at = rw.now
    kill_gcs(rw.world, HEAD, signal)
    assert not head.ready, "the readiness probe's GCS check fails at once"
    code = await asyncio.wait_for(head.wait_exit(), 120)
    assert code == 1
    # SIGTERM (143) is an expected exit for ray start --block: the head raylet's 60 s
    # reconnect timeout ends the container instead
    assert delay - 0.5 <= rw.now - killed_at <= delay + 1.0
