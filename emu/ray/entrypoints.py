"""Scripted Ray job entrypoints: what a job's driver does, written by the test.

Why: every job used to "run" as a fixed delay whatever its entrypoint; a user testing recovery
needs the workload itself to act — run tasks and actors, checkpoint, print, fail. The contract:

    async def train(job: emu.ray.entrypoints.JobContext) -> int | None:
        job.print("epoch 0")
        ref = job.ray.remote(step, 1)          # a task on the cluster (a RayClient)
        await job.ray.get(ref)
        job.checkpoint("train", {"epoch": 1})  # saved outside the cluster, survives it
        ray = job.init(namespace="team")       # ray.init(namespace="team")
        await ray.create_actor(Keeper, name="keeper", detached=True)  # outlives the job
        keeper = await ray.get_actor("keeper") # from this job or a later one
        await job.sleep(30)                    # 30 virtual seconds of work
        job.fail(3, "diverged")                # or: return 0 / None (SUCCEEDED), return N

    sim.ray.entrypoint("python train.py", train)   # (RayConfig.entrypoint)

The job's driver (the JobSupervisor actor on the head) awaits the program once the job is
RUNNING: returning 0 or None makes it SUCCEEDED, a non-zero code or `JobContext.fail` FAILED with
Ray's "Job entrypoint command failed with exit code N" message and the printed lines as its logs;
an exception the program raises is exit code 1 with its traceback line in the logs. Stopping the
job cancels the program.

Without a registered program, an entrypoint made only of simple shell — statements joined by
``&&``, ``;`` or newlines among ``sleep N``, ``exit N``, ``echo ...``, ``true``, ``false`` and
``python -c "..."`` — is run by `run_shell`: ``sleep`` waits, ``echo`` prints, ``exit N`` ends
with N, ``false`` fails a ``&&`` chain, and ``python -c`` takes `RayConfig.python_seconds`
(default: ``default_job.duration``, 5 s) and exits with ``default_job.exit_code``, unless its
code has ``time.sleep(N)`` (their sum) or ``sys.exit(N)``. Anything else keeps
`RayConfig.job_behaviour`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .workloads import ActorRuntime, RayClient

_SIMPLE = ("sleep", "exit", "echo", "true", "false", "python", "python3", ":")
_PY_SLEEP = re.compile(r"time\.sleep\(\s*(\d+(?:\.\d+)?)\s*\)")
_PY_EXIT = re.compile(r"sys\.exit\(\s*(\d+)\s*\)")


class JobExit(Exception):
    """Raised by `JobContext.fail`: the program ends with ``code``."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"exit code {code}")
        self.code = code
        self.message = message


@attrs.define
class JobContext:
    """What a scripted entrypoint sees of its job (see the module docstring)."""

    entrypoint: str
    submission_id: str
    #: The Ray job id, None for a driver that never connects to Ray (real Ray leaves it null).
    job_id: str | None
    rt: ActorRuntime
    logs: list[str]
    _ray: RayClient | None = None

    @property
    def now(self) -> float:
        return self.rt.now

    async def sleep(self, seconds: float) -> None:
        """Take ``seconds`` of virtual time (the job's work)."""
        await self.rt.sleep(seconds)

    def print(self, *parts: Any) -> None:
        """A line of the job's logs (``ray job logs``)."""
        self.logs.append(" ".join(str(p) for p in parts))

    def fail(self, code: int = 1, message: str = "") -> None:
        """End the job with exit code ``code`` (FAILED), printing ``message`` first."""
        if message:
            self.print(message)
        raise JobExit(code, message)

    @property
    def ray(self) -> RayClient:
        """A driver on this job's cluster (``ray.init()``): tasks, actors, `RayClient`."""
        if self._ray is None:
            from .workloads import RayClient

            client = RayClient(self.rt.raylet.ctx.network, self.rt.gcs.address,
                               process=self.rt.process)
            client.job_id = self.job_id or ""
            self._ray = client
        return self._ray

    def init(self, namespace: str = "") -> RayClient:
        """``ray.init(namespace=...)``: `ray` in the Ray namespace ``namespace`` (where its
        named actors are created and looked up, ``ray.get_actor``)."""
        client = self.ray
        client.namespace = namespace
        return client

    def checkpoint(self, store: str, state: Any) -> None:
        """Save ``state`` under this entrypoint in the named `CheckpointStore` (outside the
        cluster, so it survives the cluster)."""
        self.rt.config.checkpoint_store(store).save(self.entrypoint, state)

    def restore(self, store: str) -> Any:
        """The last state `checkpoint` saved in ``store`` for this entrypoint, or None."""
        return self.rt.config.checkpoint_store(store).load(self.entrypoint)


EntrypointProgram = Callable[[JobContext], Awaitable[int | None]]


def _statements(text: str) -> list[tuple[str, list[str]]] | None:
    """``(joiner, argv)`` per statement (joiner: the operator before it), or None when the
    text is not simple shell."""
    try:
        lexer = shlex.shlex(text.replace("\n", " ; "), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return None
    out: list[tuple[str, list[str]]] = []
    joiner, argv = ";", list[str]()
    for token in tokens:
        if token in (";", "&&"):
            if argv:
                out.append((joiner, argv))
            joiner, argv = token, []
        elif set(token) <= {";", "&", "|"}:
            return None  # pipes, ||, background: not simple
        else:
            argv.append(token)
    if argv:
        out.append((joiner, argv))
    if not out or any(a[0] not in _SIMPLE for _, a in out):
        return None
    for _, a in out:
        if a[0].startswith("python") and (len(a) < 3 or a[1] != "-c"):
            return None  # a script file: not simple shell
    return out


def is_simple_shell(text: str) -> bool:
    """Whether `run_shell` understands ``text``."""
    return _statements(text) is not None


async def run_shell(job: JobContext, text: str, python_seconds: float,
                    python_exit: int = 0) -> int:
    """Run simple shell (see the module docstring); the exit code. ``python -c`` takes
    ``python_seconds`` and exits ``python_exit`` unless its code sleeps or exits itself."""
    statements = _statements(text)
    if statements is None:
        raise ValueError(f"not simple shell: {text!r}")
    code = 0
    for joiner, argv in statements:
        if joiner == "&&" and code != 0:
            continue
        cmd, args = argv[0], argv[1:]
        if cmd == "sleep":
            await job.sleep(float(args[0]) if args else 0.0)
            code = 0
        elif cmd == "echo":
            job.print(" ".join(args))
            code = 0
        elif cmd == "exit":
            return int(args[0]) if args else code
        elif cmd in ("true", ":"):
            code = 0
        elif cmd == "false":
            code = 1
        else:  # python -c "..."
            source = args[1] if len(args) > 1 else ""
            naps = [float(n) for n in _PY_SLEEP.findall(source)]
            await job.sleep(sum(naps) if naps else python_seconds)
            exit_code = _PY_EXIT.search(source)
            code = int(exit_code.group(1)) if exit_code else python_exit
    return code
