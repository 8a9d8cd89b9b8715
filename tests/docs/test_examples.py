"""The examples' own tests run as part of the suite, each in a pytest subprocess (they have their
own conftest and option, and test module names of their own): the Greeter's recovery tests pass,
the naive Greeter fails exactly the lost-response test with the replay line, and the KubeRay
failover example passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOST = ("examples/my_controller/test_recovery.py::"
        "test_a_lost_create_response_is_adopted_not_reported_as_a_name_clash")


def pytest_run(*args: str) -> subprocess.CompletedProcess[str]:
    # Without the suite's own EMU_* settings (scripts/test.sh sets EMU_REDIS_URL): the reproduce
    # line rightly carries them, and these tests compare it word for word.
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMU_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False, env=env)


def test_the_greeter_survives_crash_outage_and_lost_response_under_three_seeds():
    out = pytest_run("examples/my_controller", "--emu-seeds=3")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "12 passed" in out.stdout


def test_the_naive_greeter_fails_only_the_lost_response_test_with_its_replay_line():
    out = pytest_run("examples/my_controller", "--greeter=naive")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    # pytest prints "FAILED <id>" alone, or followed by " - <message>" (under CI=true)
    failed = [line for line in out.stdout.splitlines() if line.startswith("FAILED ")]
    assert [line.split(" - ")[0] for line in failed] == [f"FAILED {LOST}"]
    assert "1 failed, 3 passed" in out.stdout
    assert "{'message': 'ConfigMap hello-greeting already exists'} != {'message': ''}" in out.stdout
    # the option that chose the naive Greeter is carried: the line reproduces the failure
    assert f"reproduce: pytest {LOST} --greeter=naive -p no:cacheprovider --emu-seed=0" in out.stdout


def test_the_kuberay_failover_example_passes():
    out = pytest_run("examples/kuberay_recovery")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 passed" in out.stdout
