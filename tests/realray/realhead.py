"""A real local Ray head (the ``ray`` package's ``ray start --head --block``) with GCS fault
tolerance on a real redis-server, for the contract tests that compare the fake Ray with it.

Loopback only as far as Ray lets it be (``--node-ip-address=127.0.0.1``, dashboard on 127.0.0.1),
one CPU, its own temp dir and Redis namespace. `RealHead.stop` ends exactly the processes this
head started (the ``ray start`` process and its descendants, by pid), never ``ray stop``, which
would kill every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RealHead:
    """One real Ray head; `start` and `stop` can be repeated (a head restart on the same Redis)."""

    def __init__(self, tmp: Path, redis_host_port: str, namespace: str) -> None:
        self.tmp = tmp
        self.redis = redis_host_port
        self.namespace = namespace
        self.gcs_port = free_port()
        self.dashboard_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def env(self) -> dict[str, str]:
        bindir = str(Path(sys.executable).parent)
        env = dict(os.environ)
        env.update({
            "PATH": bindir + os.pathsep + env.get("PATH", ""),
            "RAY_REDIS_ADDRESS": self.redis,
            "RAY_external_storage_namespace": self.namespace,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
            # Isolated from the user's ~/.ray (a token there would turn on token auth: 401s).
            "HOME": str(self.tmp),
            "RAY_AUTH_MODE": "disabled",
        })
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self, timeout: float = 90.0, attempts: int = 3) -> None:
        """``ray start --head --block`` and wait until the dashboard's Jobs API answers; on a
        loaded machine a dashboard module sometimes dies while starting, so a failed start is
        cleaned up and tried again."""
        for attempt in range(attempts):
            try:
                self._start(timeout)
                return
            except RuntimeError:
                self.stop()
                if attempt == attempts - 1:
                    raise

    def _start(self, timeout: float) -> None:
        assert self.proc is None, "already started"
        self.starts += 1
        ray = str(Path(sys.executable).parent / "ray")
        log = open(self.tmp / f"ray-start-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [ray, "start", "--head", "--block", "--num-cpus=1", "--num-gpus=0",
             "--node-ip-address=127.0.0.1", f"--port={self.gcs_port}",
             "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
             "--include-dashboard=true", "--disable-usage-stats",
             f"--temp-dir={self.tmp / 'ray'}", "--object-store-memory=100000000"],
            env=self.env(), stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited {self.proc.returncode}; see "
                                   f"{self.tmp / f'ray-start-{self.starts}.log'}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.dashboard + "/api/jobs/", timeout=2).status_code == 200:
                    return
            time.sleep(0.25)
        raise RuntimeError(f"the real Ray head's dashboard did not answer within {timeout:g}s")

    def _tree(self) -> list[int]:
        """The ``ray start`` process and its descendants (from /proc), parents first."""
        assert self.proc is not None
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
        out = [self.proc.pid]
        # Processes orphaned earlier (a dashboard's forkserver outlives a dashboard that died)
        # are reparented to init: they are found by their working directory, this head's.
        root = str(self.tmp.resolve())
        for entry in sorted(Path("/proc").iterdir(), key=lambda e: e.name):
            if entry.name.isdigit() and int(entry.name) not in out:
                try:
                    cwd = os.readlink(entry / "cwd").removesuffix(" (deleted)")
                except OSError:
                    continue
                if cwd == root or cwd.startswith(root + "/"):
                    out.append(int(entry.name))
        for pid in out:
            out.extend(p for p in sorted(children.get(pid, [])) if p not in out)
        return out

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def _signal(self, pids: list[int], sig: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        """End this head's processes (SIGTERM, then SIGKILL after 15 s), by pid."""
        if self.proc is None:
            return
        pids = self._tree()
        self._signal(pids, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(self._alive(p) for p in pids):
            self.proc.poll()
            time.sleep(0.1)
        self._signal([p for p in pids if self._alive(p)], signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.proc = None

    def kill_gcs(self) -> None:
        """SIGKILL the GCS process only (a GCS crash; ``ray start`` does not restart it)."""
        for pid in self._tree():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "gcs_server":
                    os.kill(pid, signal.SIGKILL)
