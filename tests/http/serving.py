"""Helpers for the HTTP tests: a real ``emu serve`` subprocess and real clients against it.

Tests that need a tool nobody here wrote (kubectl, the ``kubernetes`` package, kopf) are marked
``external`` (deselect them locally with ``-m 'not external'``). A missing tool skips them on a
developer's machine but fails them when ``CI`` is set: CI must run them. Servers bind 127.0.0.1
on free ports; every subprocess is stopped (Ctrl-C first, then killed) and every wait is bounded.
"""

from __future__ import annotations

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

MANIFESTS = Path(__file__).parent / "manifests"
_clock = wall_clock


def env() -> dict[str, str]:
    return env_with_root()


@attrs.define
class Served:
    """A running ``emu serve``."""

    proc: subprocess.Popen[str]
    url: str
    kubeconfig: Path
    cache: Path
    ready_line: str

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None,
                timeout: float = 90) -> subprocess.CompletedProcess[str]:
        cmd = ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache),
               *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def stop(self) -> int:
        """Ctrl-C, as a person would; the exit status (killed after 20 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return int(self.proc.returncode)


def start_serve(tmp: Path, *args: str, timeout: float = 90) -> Served:
    """Start ``emu serve`` and wait (bounded) for its ready line."""
    tmp.mkdir(parents=True, exist_ok=True)
    kubeconfig = tmp / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "emu", "serve", "--kubeconfig",
                             str(kubeconfig), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=str(ROOT))
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
    if found is None:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"emu serve did not become ready: {line!r}\n{err}")
    return Served(proc, found.group(1), kubeconfig, tmp / "kubectl-cache", line)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``emu serve --kuberay --speed 20`` for the session's external tests."""
    srv = start_serve(tmp_path_factory.mktemp("serve"), "--kuberay", "--speed", "20")
    try:
        yield srv
    finally:
        code = srv.stop()
        assert code == 0, f"emu serve exited {code} on Ctrl-C"


@pytest.fixture(scope="session")
def kubectl_found() -> None:
    require(shutil.which("kubectl") is not None, "kubectl")
