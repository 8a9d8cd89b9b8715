"""What a test decides about the fake Ray: how long jobs and Serve apps take, how they end, which
Redis addresses are real servers; and what the fake Ray records for the test to assert on.

One `RayConfig` is shared by every Ray program registered with `register_ray_programs` (it is the
"image": the same code in every Pod). A test keeps it to steer behaviour and to read
``config.records`` (every job submission any dashboard received, the Redis servers running).

Job entrypoints, in order: a program registered with `RayConfig.entrypoint` (see
`emu.ray.entrypoints`); an exact key of ``config.jobs``; simple shell (``sleep``, ``exit``,
``echo``, ``&&``, ``python -c``: `emu.ray.entrypoints.run_shell`); else the first ``sleep N`` /
``time.sleep(N)`` in the text sets the duration and the first ``exit N`` / ``sys.exit(N)`` the
exit code; else ``config.default_job`` (succeed after 5 virtual seconds).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

_SLEEP = re.compile(r"(?:\bsleep\s+|time\.sleep\(\s*)(\d+(?:\.\d+)?)")
_EXIT = re.compile(r"(?:\bexit\s+|sys\.exit\(\s*)(\d+)")
_RAY_SCRIPT = re.compile(r"\bray\b|\.py\b")


@attrs.define
class JobBehaviour:
    """What a job's entrypoint does once its driver runs.

    ``duration``: virtual seconds until it ends; ``exit_code``: 0 → SUCCEEDED, else FAILED;
    ``logs``: what it prints; ``start_delay``: PENDING time before the driver starts (runtime env
    setup). With ``checkpoint_store``, progress is saved every ``checkpoint_every`` seconds under
    ``checkpoint_key`` (default: the entrypoint), and a later run resumes from it.
    ``ray_init``: whether the entrypoint connects to Ray (``ray.init``) and so becomes a driver
    with a Ray job id; ``None`` infers it from the entrypoint (it mentions ``ray`` or runs a
    ``.py`` script). Real Ray leaves a submission's ``job_id`` and ``driver_info`` null otherwise.
    """

    duration: float = 5.0
    exit_code: int = 0
    logs: str = ""
    #: Real Ray shows a new job PENDING for a second or two (the supervisor actor starts, the
    #: runtime env is set up); 0 here by default, so the first poll already sees RUNNING.
    start_delay: float = 0.0
    checkpoint_store: str | None = None
    checkpoint_every: float = 10.0
    checkpoint_key: str | None = None
    ray_init: bool | None = None

    def connects(self, entrypoint: str) -> bool:
        """Whether the driver calls ``ray.init`` (see ``ray_init``)."""
        if self.ray_init is not None:
            return self.ray_init
        return bool(_RAY_SCRIPT.search(entrypoint))


@attrs.define
class ServeAppBehaviour:
    """What deploying a Serve application does (keyed by its ``import_path``).

    ``build_seconds``: the build-app task (import, runtime_env) while the app is DEPLOYING;
    ``fail_message``: the build fails, the app is DEPLOY_FAILED with this message;
    ``replica_start_seconds``: a replica's constructor time; ``handler``: answers a request
    (the request dict → a response dict or text; default: 200 with ``"<app>: <path>"``);
    ``request_seconds``: how long a replica works on each request (in flight meanwhile, so a
    replica that stops drains it or, past its graceful shutdown timeout, fails it).
    """

    build_seconds: float = 2.0
    replica_start_seconds: float = 3.0
    fail_message: str | None = None
    handler: Callable[[dict[str, Any]], Any] | None = None
    request_seconds: float = 0.0


class CheckpointStore:
    """Storage outside the cluster (an S3 bucket, a shared filesystem) for application checkpoints.

    Values are copied in and out (pickled), so nothing a process holds survives its death except
    what it saved here. With ``directory`` the checkpoints are also files there.
    """

    def __init__(self, name: str, directory: Path | None = None) -> None:
        self.name = name
        self.directory = directory
        self._data: dict[str, bytes] = {}
        #: How many saves and successful loads happened (for tests).
        self.saves = 0
        self.loads = 0

    def save(self, key: str, state: Any) -> None:
        blob = pickle.dumps(state)
        self._data[key] = blob
        self.saves += 1
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / _safe(key)).write_bytes(blob)

    def load(self, key: str) -> Any | None:
        blob = self._data.get(key)
        if blob is None and self.directory is not None:
            path = self.directory / _safe(key)
            if path.exists():
                blob = path.read_bytes()
        if blob is None:
            return None
        self.loads += 1
        return pickle.loads(blob)

    def keys(self) -> list[str]:
        return sorted(self._data)


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


@attrs.frozen
class SubmissionRecord:
    """One ``POST /api/jobs/`` a dashboard received, and what it answered."""

    t: float
    dashboard: str
    submission_id: str
    entrypoint: str
    status: int


@attrs.define
class RayRecords:
    """What happened, for tests: every job submission received, live Redis servers by name."""

    submissions: list[SubmissionRecord] = attrs.field(factory=list)
    redis_servers: dict[str, Any] = attrs.field(factory=dict)

    def accepted(self, submission_id: str | None = None) -> list[SubmissionRecord]:
        """Submissions answered 200 (for ``submission_id`` if given)."""
        return [s for s in self.submissions if s.status == 200
                and (submission_id is None or s.submission_id == submission_id)]


@attrs.frozen
class RuntimeEnvCosts:
    """Virtual seconds a job's runtime environment takes to set up on its node before the driver
    starts (the job stays PENDING meanwhile, "It may be waiting for the runtime environment to
    be set up."). Ray's runtime-env agent creates a virtualenv and pip-installs for ``pip``,
    likewise with uv for ``uv``, creates a conda env for a ``conda`` spec, and downloads and
    unpacks ``working_dir`` and each of ``py_modules``; a node that already built the same
    environment reuses it (Ray caches by URI), so a repeat costs nothing here.

    Measured on this project's 2-core machine (loaded): ``python -m venv
    --system-site-packages`` 32 s, then ``pip install requests==2.26.0 pendulum==2.1.2`` (the
    sidecar sample's; four packages with dependencies, one built from source) 46 s. The
    defaults are about a third of that, for a node with a pip cache or index nearby: ``pip``
    10 s + 10 s per package; ``uv`` 2 s + 1 s per package; ``conda`` 60 s + 10 s per
    dependency; ``working_dir`` 2 s; each ``py_modules`` entry 2 s. `free` gives the old
    behaviour (no cost)."""

    pip_base: float = 10.0
    pip_per_package: float = 10.0
    uv_base: float = 2.0
    uv_per_package: float = 1.0
    conda_base: float = 60.0
    conda_per_package: float = 10.0
    working_dir: float = 2.0
    py_module: float = 2.0

    @classmethod
    def free(cls) -> RuntimeEnvCosts:
        """Runtime environments that cost no time (the emulator's behaviour before)."""
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    @staticmethod
    def _packages(spec: Any) -> int:
        if isinstance(spec, dict):
            spec = spec.get("packages") or spec.get("dependencies") or []
        if isinstance(spec, str):  # a requirements file / an environment file: one unit
            return 1
        return len(spec) if isinstance(spec, list) else 0

    def seconds(self, runtime_env: Any) -> float:
        """The setup time of ``runtime_env`` (a job's ``runtime_env`` dict; env_vars are free)."""
        if not isinstance(runtime_env, dict):
            return 0.0
        total = 0.0
        if runtime_env.get("pip"):
            total += self.pip_base + self.pip_per_package * self._packages(runtime_env["pip"])
        if runtime_env.get("uv"):
            total += self.uv_base + self.uv_per_package * self._packages(runtime_env["uv"])
        conda = runtime_env.get("conda")
        if isinstance(conda, dict):  # a spec to build; a name is an existing env
            total += self.conda_base + self.conda_per_package * self._packages(conda)
        if runtime_env.get("working_dir"):
            total += self.working_dir
        modules = runtime_env.get("py_modules")
        if isinstance(modules, list):
            total += self.py_module * len(modules)
        return total


@attrs.define
class RayConfig:
    """Behaviour of the Ray image and the records it keeps (see the module docstring)."""

    ray_version: str = "2.46.0"
    jobs: dict[str, JobBehaviour] = attrs.field(factory=dict)
    default_job: JobBehaviour = attrs.field(factory=JobBehaviour)
    serve_apps: dict[str, ServeAppBehaviour] = attrs.field(factory=dict)
    default_serve_app: ServeAppBehaviour = attrs.field(factory=ServeAppBehaviour)
    #: A Redis address as written in ``RAY_REDIS_ADDRESS`` → a real server's ``redis://`` URL.
    redis_urls: dict[str, str] = attrs.field(factory=dict)
    #: Actor classes by descriptor (``module:QualName``), for classes not importable by name.
    actor_classes: dict[str, type] = attrs.field(factory=dict)
    checkpoint_stores: dict[str, CheckpointStore] = attrs.field(factory=dict)
    #: How often a raylet reports to the GCS (Ray's syncer); also how it notices a lost GCS.
    heartbeat_period: float = 1.0
    #: Current Ray: the head proxies job submission to the agent, so a duplicate id is a 500
    #: wrapping the agent's 400; False gives older Ray's plain 400.
    job_head_proxies_to_agent: bool = True
    #: Real Ray creates the head's job manager (and so starts monitoring the jobs it finds in the
    #: KV) on the first submit, stop, delete or logs request: after a head restart a job whose
    #: supervisor was lost stays RUNNING to GET polling until such a request arrives. False
    #: starts the manager with the dashboard (the emulator's older, eager behaviour).
    lazy_job_manager: bool = True
    #: With ``lazy_job_manager``, the manager also starts by itself this long after the
    #: dashboard. None (real Ray 2.60: the job agent creates its ``JobManager`` only in
    #: ``get_job_manager``, called by the submit, stop, delete and logs routes): only such a
    #: request starts it, and GET polling alone sees a lost head's job RUNNING for ever.
    job_manager_starts_after: float | None = None
    #: Real Ray's dashboard hangs while the GCS is down (health 503 after ~1 s, job list and submit
    #: 500 after ~30 s, job get and logs after ~59 s), so KubeRay's 2 s client sees timeouts; False
    #: answers 500/503 at once, as the emulator used to.
    dashboard_waits_for_gcs: bool = True
    #: Real Ray marks the other ALIVE head nodes DEAD as soon as a new head node registers; False
    #: leaves the old head to its health checks (~17 s), as the emulator used to.
    new_head_replaces_old: bool = True
    #: How long a stopped job takes to read STOPPED after its supervisor is told to stop (the
    #: driver gets SIGTERM at once). Measured on Ray 2.60, from the stop request to a 0.1 s poll
    #: seeing STOPPED: 0.5-2 s (the supervisor's kill-and-poll loop and the status write).
    job_stop_seconds: float = 1.5
    records: RayRecords = attrs.field(factory=RayRecords)
    #: Scripted entrypoints (`entrypoint`): exact entrypoint text → async program.
    programs: dict[str, Any] = attrs.field(factory=dict)
    #: How long ``python -c "..."`` takes in a simple-shell entrypoint (`emu.ray.entrypoints`);
    #: None (the default) means ``default_job.duration``.
    python_seconds: float | None = None
    #: How long a job's runtime environment takes to set up (`RuntimeEnvCosts`).
    runtime_env_costs: RuntimeEnvCosts = attrs.field(factory=RuntimeEnvCosts)

    def entrypoint(self, command: str, program: Callable[..., Any]) -> None:
        """Script what a job whose entrypoint is ``command`` does: ``program(job)`` is awaited
        as its driver (`emu.ray.entrypoints.JobContext`; return 0/None to succeed)."""
        if not command.strip():
            raise ValueError("an entrypoint is a non-empty command line")
        if not callable(program):
            raise TypeError(f"an entrypoint program is an async function taking the job, not "
                            f"{program!r}")
        self.programs[command.strip()] = program

    def job_program(self, entrypoint: str) -> Any:
        """The registered program for ``entrypoint``, or None."""
        return self.programs.get(entrypoint.strip())

    def job_behaviour(self, entrypoint: str) -> JobBehaviour:
        """The behaviour for ``entrypoint``: exact key, else parsed ``sleep``/``exit``, else
        the default."""
        text = entrypoint.strip()
        if text in self.jobs:
            return self.jobs[text]
        sleep = _SLEEP.search(text)
        code = _EXIT.search(text)
        if sleep is None and code is None:
            return self.default_job
        return attrs.evolve(
            self.default_job,
            duration=float(sleep.group(1)) if sleep else self.default_job.duration,
            exit_code=int(code.group(1)) if code else self.default_job.exit_code,
        )

    def serve_behaviour(self, import_path: str) -> ServeAppBehaviour:
        return self.serve_apps.get(import_path, self.default_serve_app)

    def checkpoint_store(self, name: str, directory: Path | None = None) -> CheckpointStore:
        """The store called ``name`` (created on first use)."""
        store = self.checkpoint_stores.get(name)
        if store is None:
            store = self.checkpoint_stores[name] = CheckpointStore(name, directory)
        return store
