"""A real local Ray head (the ``ray`` package's ``ray start --head --block``) with GCS fault
tolerance on a real redis-server, for the contract tests that compare the fake Ray with it.

Loopback only as far as Ray lets it be (``--node-ip-address=127.0.0.1``, dashboard on 127.0.0.1),
one CPU, its own temp dir, Redis namespace and ports (every port ``ray start`` takes is given, so
two heads on one machine never fight over Ray's defaults such as the agent's 52365).

Readiness is what real Ray itself offers, each condition polled until a generous deadline (a
loaded machine takes tens of seconds): the dashboard's ``/api/gcs_healthz`` and ``/api/jobs/``,
the head node's id in the internal KV, the dashboard agent's address under that id (what the
dashboard's job module looks up before it forwards a submit, a stop or a logs request) and the
agent's own ``/api/healthz``. A failure names the unmet condition and the head's log paths.

Before each start the previous head's dashboard address is removed from the Redis-backed KV:
``ray start`` waits for the new dashboard to publish its address before it starts the raylet, and
a stale address (a restart on Redis) makes it start the raylet at once, so the agent's start
competes with the dashboard's for the CPU and, on a loaded machine, misses its 15 s (below).

A start is tried again when it fails: the raylet gives the dashboard agent a fixed 15 s to write
its port file (``NodeManager::WaitForDashboardAgentPorts``, not configurable in Ray 2.60) and
aborts after, and ``ray start`` gives the raylet 30 s to register; a loaded machine has been seen
to need 20 s to import the agent.

`RealHead.stop` ends exactly the processes this head started (the ``ray start`` process, its
descendants, its process group and anything whose working directory is the head's temp dir), by
pid, never ``ray stop``, which would kill every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

#: How long a start may take before it is abandoned (and tried again): a head on a machine with a
#: load of 6 on 2 cores has been seen to need ~40 s.
START_DEADLINE_S = 240.0
#: How long `stop` waits after SIGTERM before SIGKILL (``ray start`` drains for up to 30 s).
STOP_GRACE_S = 40.0


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports the kernel had free a moment ago (held together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


class HeadNotReady(RuntimeError):
    """The real head did not become ready; the message says which condition and where its logs
    are."""


def wait_for(what: str, check: Callable[[], str | None], deadline: float,
             every: float = 0.5) -> None:
    """Poll ``check`` (None when satisfied, else why not) until ``deadline`` (monotonic)."""
    why = "never checked"
    while True:
        why = check() or ""
        if not why:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: {why}")
        time.sleep(every)


class RealHead:
    """One real Ray head; `start` and `stop` can be repeated (a head restart on the same Redis,
    with the same ports)."""

    def __init__(self, tmp: Path, redis_host_port: str, namespace: str) -> None:
        self.tmp = tmp
        self.redis = redis_host_port
        self.namespace = namespace
        (self.gcs_port, self.dashboard_port, self.agent_port, self.agent_grpc_port,
         self.metrics_port, self.runtime_env_port, self.node_manager_port,
         self.object_manager_port, self.client_port,
         self.dashboard_metrics_port) = free_ports(10)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        #: Keep the temp dir (the logs) at the end: a step failed.
        self.keep = False

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def agent(self) -> str:
        return f"http://127.0.0.1:{self.agent_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def temp_dir(self) -> Path:
        """Ray's temp dir of the current start: each start has its own, so a restarted head
        (which keeps its session name from the KV) does not reopen the old session's logs,
        which its log monitor would read through again."""
        return self.tmp / f"ray{self.starts}"

    @property
    def start_log(self) -> Path:
        return self.tmp / f"ray-start-{self.starts}.log"

    def logs_hint(self) -> str:
        """Where to look when the real head misbehaved."""
        return (f"the real head's logs: {self.start_log} and "
                f"{self.temp_dir / 'session_latest' / 'logs'}")

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
            # The dashboard's own metrics port, 44227 by default: shared by every head on the
            # machine otherwise.
            "DASHBOARD_METRIC_PORT": str(self.dashboard_metrics_port),
            # How long ``ray start`` waits for the dashboard to publish its address (60 s).
            "RAY_DASHBOARD_STARTUP_TIMEOUT_S": str(int(START_DEADLINE_S)),
        })
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self, timeout: float = START_DEADLINE_S, attempts: int = 6) -> None:
        """``ray start --head --block`` and wait until it is ready (module docstring); a start
        that fails or is not ready in time is stopped and tried again, up to ``attempts``."""
        errors = []
        for _attempt in range(attempts):
            try:
                self._start(timeout)
                return
            except (HeadNotReady, TimeoutError) as err:
                errors.append(f"start {self.starts}: {err} ({self.logs_hint()})")
                self.stop()
        raise HeadNotReady("the real Ray head never became ready:\n" + "\n".join(errors))

    def _forget_dashboard_address(self) -> None:
        """Delete the KV's ``dashboard`` / ``dashboard`` entry (``ray_constants.
        DASHBOARD_ADDRESS``) from Redis, where the GCS keeps it (module docstring)."""
        import redis

        client = redis.Redis.from_url(f"redis://{self.redis}")
        try:
            client.hdel(f"RAY{self.namespace}@KV", "@namespace_dashboard:dashboard")
        finally:
            client.close()

    def _start(self, timeout: float) -> None:
        assert self.proc is None, "already started"
        self._forget_dashboard_address()
        self.starts += 1
        ray = str(Path(sys.executable).parent / "ray")
        with open(self.start_log, "wb") as log:
            self.proc = subprocess.Popen(
                [ray, "start", "--head", "--block", "--num-cpus=1", "--num-gpus=0",
                 "--node-ip-address=127.0.0.1", f"--port={self.gcs_port}",
                 "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
                 f"--dashboard-agent-listen-port={self.agent_port}",
                 f"--dashboard-agent-grpc-port={self.agent_grpc_port}",
                 f"--metrics-export-port={self.metrics_port}",
                 f"--runtime-env-agent-port={self.runtime_env_port}",
                 f"--node-manager-port={self.node_manager_port}",
                 f"--object-manager-port={self.object_manager_port}",
                 f"--ray-client-server-port={self.client_port}",
                 "--include-dashboard=true", "--disable-usage-stats",
                 f"--temp-dir={self.temp_dir}", "--object-store-memory=100000000"],
                env=self.env(), stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        for what, check in (("the dashboard's /api/gcs_healthz", self._gcs_healthy),
                            ("the dashboard's Jobs API", self._jobs_api_answers),
                            ("the head node's job agent", self._agent_registered),
                            ("the job agent's /api/healthz", self._agent_healthy)):
            wait_for(f"{what} was not ready within {timeout:g}s", self._alive_and(check),
                     deadline)

    def _alive_and(self, check: Callable[[], str | None]) -> Callable[[], str | None]:
        def checked() -> str | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise HeadNotReady(f"ray start exited {self.proc.returncode}")
            return check()
        return checked

    @staticmethod
    def _get(url: str) -> str | None:
        try:
            r = httpx.get(url, timeout=10)
        except httpx.HTTPError as err:
            return f"GET {url}: {type(err).__name__} {err}"
        return None if r.status_code == 200 else f"GET {url}: {r.status_code} {r.text[:300]}"

    def _gcs_healthy(self) -> str | None:
        return self._get(self.dashboard + "/api/gcs_healthz")

    def _jobs_api_answers(self) -> str | None:
        return self._get(self.dashboard + "/api/jobs/")

    def _agent_healthy(self) -> str | None:
        return self._get(self.agent + "/api/healthz")

    def gcs(self) -> Any:
        """A GCS client of this process (``ray._raylet.GcsClient``) on this head's GCS."""
        from ray._raylet import GcsClient

        return GcsClient(address=self.gcs_address)

    def _agent_registered(self) -> str | None:
        """``JobHead._get_head_node_agent_once``: the head node id in KV ``job`` /
        ``head_node_id``, then the agent's ``[ip, http_port, grpc_port]`` under
        ``DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX:<id>`` in KV ``dashboard``; the port must be this
        head's (after a restart on Redis, the old head's entries are still there)."""
        from ray._private import ray_constants
        from ray.dashboard import consts

        try:
            gcs = self.gcs()
            head = gcs.internal_kv_get(ray_constants.KV_HEAD_NODE_ID_KEY,
                                       ray_constants.KV_NAMESPACE_JOB, timeout=10)
            if not head:
                return "no head_node_id in the internal KV yet"
            key = f"{consts.DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX}{head.decode()}".encode()
            raw = gcs.internal_kv_get(key, ray_constants.KV_NAMESPACE_DASHBOARD, timeout=10)
        except Exception as err:  # the GCS client raises its own RpcError / TimeoutError kinds
            return f"internal KV: {type(err).__name__} {err}"
        if not raw:
            return f"no agent address for head node {head.decode()} yet"
        _ip, http_port, _grpc = json.loads(raw)
        if http_port != self.agent_port:
            return f"agent of head node {head.decode()} on port {http_port}, not {self.agent_port}"
        return None

    def _tree(self) -> list[int]:
        """The ``ray start`` process, its descendants, its process group and the processes
        working in this head's temp dir (orphans reparented to init), from /proc; parents
        first."""
        assert self.proc is not None
        root = str(self.tmp.resolve())
        children: dict[int, list[int]] = {}
        out = [self.proc.pid]
        for entry in sorted(Path("/proc").iterdir(), key=lambda e: e.name):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(pid)
            if pid in out:
                continue
            if int(fields[2]) == self.proc.pid:  # the process group ``ray start`` leads
                out.append(pid)
                continue
            with contextlib.suppress(OSError):
                cwd = os.readlink(entry / "cwd").removesuffix(" (deleted)")
                if cwd == root or cwd.startswith(root + "/"):
                    out.append(pid)
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

    @staticmethod
    def _signal(pids: list[int], sig: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        """End this head's processes, by pid: SIGTERM to ``ray start`` alone first (as a Pod's
        deletion does; it drains the node and ends its children in order), then SIGTERM to
        whatever of the head is left, then SIGKILL."""
        if self.proc is None:
            return
        pids = self._tree()
        self._signal([self.proc.pid], signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=STOP_GRACE_S)
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
            # Children forked while stopping (a worker the raylet was starting) are found too.
            pids = sorted(set(pids) | set(self._tree()))
            # ``ray start`` itself, once reaped, is not signalled again (its pid may be reused).
            left = [p for p in pids if self._alive(p)
                    and not (p == self.proc.pid and self.proc.poll() is not None)]
            if not left:
                break
            self._signal(left, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(self._alive(p) for p in left):
                time.sleep(0.1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self.proc = None

    def kill_all(self) -> None:
        """A crash: SIGKILL to every process of this head at once (as a node or container
        that dies does), without reaping ``ray start`` (`stop` does that)."""
        if self.proc is not None:
            self._signal(self._tree(), signal.SIGKILL)

    def exit_code(self) -> int | None:
        """``ray start``'s exit code once it has exited (a signal as its negative number)."""
        return None if self.proc is None else self.proc.poll()

    def pids_of(self, name: str) -> list[int]:
        """This head's live processes whose command name (``/proc/<pid>/comm``) is ``name``."""
        out = []
        for pid in self._tree():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == name and self._alive(pid):
                    out.append(pid)
        return out
