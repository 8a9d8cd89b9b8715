"""Same seed, same history: digests compared across processes and PYTHONHASHSEED values."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HASH_SEEDS = ("0", "1", "12345")


def _digest(scenario: str, seed: int, hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-m", "emu", "run", scenario, "--seed", str(seed)],
        env=env, capture_output=True, text=True, check=False, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("digest: "), last
    return last.removeprefix("digest: ")


@pytest.mark.parametrize("scenario", ["apiserver-churn", "operator-failover", "head-loss-rocksdb"])
def test_a_scenario_has_one_digest_under_every_hash_seed(scenario):
    digests = {h: _digest(scenario, 3, h) for h in HASH_SEEDS}
    assert len(set(digests.values())) == 1, digests


def test_different_seeds_give_different_histories():
    assert _digest("apiserver-churn", 1, "0") != _digest("apiserver-churn", 2, "0")
