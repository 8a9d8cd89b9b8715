"""Helpers and fixtures of the tests against the real KubeRay operator binary (conftest.py
imports the fixtures).

The binary is built by scripts/build-kuberay.sh (``go install``, cached under
``~/.cache/kuberay-emu/bin``, so only the first run pays for the build). Without Go these tests
skip on a developer's machine and fail in CI (``CI`` set): CI must run them. They are marked
``external`` like the other tests that need a tool nobody here wrote (deselect with
``-m 'not external'``). Every wait is bounded, and every process started here is stopped by its
pid at the end.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.external import ROOT, env_with_root, require, wall_clock

HERE = Path(__file__).parent
#: The release the end-to-end tests run (the newest the module proxy serves here).
VERSION = os.environ.get("EMU_KUBERAY_VERSION", "v1.5.0")
_clock = wall_clock


@pytest.fixture(scope="session")
def kuberay_binary() -> Path:
    """The real operator at `VERSION`, built once (a cached build is reused at once)."""
    require(shutil.which("go") is not None, "the Go toolchain (go)")
    try:
        done = subprocess.run(["bash", str(ROOT / "scripts" / "build-kuberay.sh"), VERSION],
                              capture_output=True, text=True, timeout=1800, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"building ray-operator {VERSION} took over 30 minutes")
    if done.returncode != 0:
        pytest.fail(f"scripts/build-kuberay.sh {VERSION} failed ({done.returncode}):\n"
                    f"{done.stderr[-3000:]}")
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_file() and os.access(path, os.X_OK), path
    return path


@attrs.define
class Served:
    """A running ``emu serve --kuberay-binary``."""

    proc: subprocess.Popen[str]
    url: str
    kubeconfig: Path
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def operator_line(self) -> tuple[int, Path]:
        """(pid, log path) of the operator, from serve's line about it."""
        found = re.search(r"running as pid (\d+), proxy \S+, log (\S+)", self.stderr())
        assert found, f"no operator line in emu serve's stderr:\n{self.stderr()}"
        return int(found.group(1)), Path(found.group(2))

    def stop(self) -> int:
        """Ctrl-C, as a person would; the exit status (killed after 60 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return int(self.proc.returncode)


def start_serve(tmp: Path, binary: Path, *args: str, timeout: float = 300) -> Served:
    """Start ``emu serve --kuberay-binary`` and wait (bounded) for its ready line, which comes
    once the operator's probe port answers."""
    kubeconfig = tmp / "kubeconfig"
    stderr_path = tmp / "serve.stderr"
    env = env_with_root()
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "emu", "serve", "--kubeconfig",
                                 str(kubeconfig), "--kuberay-binary", str(binary), *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=str(ROOT))
    assert proc.stdout is not None
    deadline = _clock() + timeout
    line = ""
    while _clock() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if "ready at" in line or not line:
                break
        elif proc.poll() is not None:
            break
    found = re.search(r"ready at (\S+)", line)
    served = Served(proc, found.group(1) if found else "", kubeconfig, stderr_path)
    if found is None:
        served.stop()
        raise AssertionError(f"emu serve did not become ready: {line!r}\n{served.stderr()}")
    return served


@pytest.fixture(scope="module")
def served(kuberay_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    srv = start_serve(tmp_path_factory.mktemp("realop"), kuberay_binary)
    try:
        yield srv
    finally:
        srv.stop()
