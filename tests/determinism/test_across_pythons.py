"""Same seed, same history on every supported Python: each scenario's seed-1 digest is computed
under every interpreter the machine has (3.11, 3.12, 3.13) and must be equal.

The other interpreters run from throwaway venvs holding only the runtime dependencies
(``scripts/setup-python.sh X.Y``, which ``scripts/test.sh`` runs first), with this checkout on
``PYTHONPATH``. A version the machine lacks is a skip here and a failure in CI (``CI=true``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUPPORTED = ("3.11", "3.12", "3.13")
SEED = 1

#: Prints ``<scenario> <digest>`` for every scenario, one per line.
DIGESTS = """
import sys
from emu import scenarios
for s in scenarios.all_scenarios():
    print(s.name, scenarios.run_scenario(s.name, int(sys.argv[1])).digest, flush=True)
"""


def _this_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def _interpreter(version: str) -> str | None:
    if _this_version() == version:
        return sys.executable
    out = subprocess.run(["bash", str(ROOT / "scripts" / "setup-python.sh"), version],
                         capture_output=True, text=True, check=False, timeout=900)
    if out.returncode == 3:
        return None
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_every_scenario_has_one_digest_on_every_supported_python():
    found = {v: _interpreter(v) for v in SUPPORTED}
    missing = [v for v, exe in found.items() if exe is None]
    if missing:
        why = (f"Python {', '.join(missing)} not found (scripts/setup-python.sh looks on PATH and "
               "under pyenv)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why + ": CI must have every supported Python")
        pytest.skip(why)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    runs = {v: subprocess.Popen([exe, "-c", DIGESTS, str(SEED)], env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for v, exe in found.items() if exe is not None}
    digests: dict[str, dict[str, str]] = {}
    for version, proc in runs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"Python {version}:\n{err[-3000:]}"
        digests[version] = dict(line.split() for line in out.splitlines())
    names = sorted(digests[_this_version()])
    assert len(names) >= 15
    differ = {name: {v: d[name][:12] for v, d in digests.items()} for name in names
              if len({d.get(name) for d in digests.values()}) != 1}
    assert not differ, f"seed-{SEED} digests differ between interpreters: {differ}"
