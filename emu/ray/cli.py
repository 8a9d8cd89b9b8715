"""The Ray image's command lines: what a container runs, read as KubeRay writes it.

`classify` decides the role of a Ray container from its command line (``command`` + ``args``,
after ``$VAR`` expansion from its env):

- ``ray start --head ...`` → ``head``; ``ray start --address=<host>:<port> ...`` → ``worker``
  (`parse_ray_start` reads ``--port``, ``--num-cpus``, ``--resources``, ``--redis-password``,
  ``--redis-username``, ``--dashboard-port``, ``--node-manager-port``, ``--labels``);
- a script with ``cleanup_redis_storage`` → ``cleanup-redis`` (KubeRay's Redis cleanup Job);
- a loop around ``ray health-check`` → ``wait-gcs`` (the ``wait-gcs-ready`` init container);
- anything else with ``ray job``/``ray health-check``/``gcs_healthz`` → ``script``: the small shell
  subset KubeRay's submitter uses, run by `run_script` (``;``-separated statements,
  ``until CMD; do ...; done``, ``if ! CMD; then ...; fi``, ``echo``, ``sleep``; ``-e``);
- otherwise ``idle`` (a sidecar that runs until killed).

Commands `run_script` knows: ``ray job submit|status|logs|stop|delete``, ``ray health-check``,
any health probe naming a ``.../api/gcs_healthz`` URL (wget or python), ``sleep``, ``echo``.
Addresses default to ``RAY_DASHBOARD_ADDRESS`` / ``RAY_ADDRESS`` from the env.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from typing import Any

import attrs
import orjson

from emu.kernel.network import NetworkError
from emu.kernel.programs import ContainerContext

from .gcs_client import GCS_PORT, GcsClient
from .net import RpcError, http_call

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_HEALTH_URL = re.compile(r"https?://[^\s'\"\\)]+/api/gcs_healthz")
TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")


def expand(text: str, env: dict[str, str]) -> str:
    """Shell ``$VAR``/``${VAR}`` expansion (unknown → empty), except inside single quotes."""
    out: list[str] = []
    for i, part in enumerate(text.split("'")):
        out.append(part if i % 2 else _VAR.sub(
            lambda m: env.get(m.group(1) or m.group(2), "")
            if (m.group(1) or m.group(2)) != "SECONDS" else m.group(0), part))
    return "'".join(out)


def split_statements(script: str) -> list[str]:
    """Split on ``;``, ``&&`` and newlines outside quotes (``&&`` is treated as ``;`` under
    ``-e``)."""
    out: list[str] = []
    cur: list[str] = []
    quote = ""
    i = 0
    while i < len(script):
        ch = script[i]
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch in ";\n" or script.startswith("&&", i):
            out.append("".join(cur).strip())
            cur = []
            if ch == "&":
                i += 1
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return [s for s in out if s]


def words(statement: str) -> list[str]:
    try:
        parts = shlex.split(statement)
    except ValueError:
        parts = statement.split()
    return [p for p in parts if not re.fullmatch(r"\d?>.*|2>&1|>&\d", p)]


def flag(args: list[str], name: str) -> str | None:
    """``--name=value`` or ``--name value`` among ``args``."""
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


@attrs.frozen
class RayStartOptions:
    """What ``ray start`` was told."""

    head: bool
    address: str | None
    port: int
    num_cpus: float | None
    num_gpus: float | None
    resources: dict[str, float]
    redis_password: str | None
    redis_username: str | None
    dashboard_port: int
    node_manager_port: int | None
    labels: dict[str, str]
    block: bool


def parse_ray_start(command_line: str) -> RayStartOptions:
    """The options of the ``ray start`` in ``command_line`` (already env-expanded)."""
    text = command_line[command_line.find("ray start"):]
    statement = split_statements(text)[0] if text else ""
    args = words(statement)[2:]

    def num(name: str) -> float | None:
        value = flag(args, name)
        return float(value) if value not in (None, "") else None

    resources_text = flag(args, "resources")
    resources: dict[str, float] = {}
    if resources_text:
        try:
            resources = {k: float(v) for k, v in orjson.loads(resources_text).items()}
        except (ValueError, AttributeError):
            resources = {}
    labels: dict[str, str] = {}
    for pair in (flag(args, "labels") or "").split(","):
        if "=" in pair:
            k, v = pair.split("=", 1)
            labels[k.strip()] = v.strip()
    nm_port = flag(args, "node-manager-port")
    return RayStartOptions(
        head="--head" in args, address=flag(args, "address"),
        port=int(flag(args, "port") or GCS_PORT), num_cpus=num("num-cpus"),
        num_gpus=num("num-gpus"), resources=resources,
        redis_password=flag(args, "redis-password") or None,
        redis_username=flag(args, "redis-username") or None,
        dashboard_port=int(flag(args, "dashboard-port") or 8265),
        node_manager_port=int(nm_port) if nm_port else None, labels=labels,
        block="--block" in args)


def classify(command_line: str) -> str:
    """The role of a Ray container (see the module docstring)."""
    if "cleanup_redis_storage" in command_line:
        return "cleanup-redis"
    if re.search(r"\bray start\b", command_line):
        return "head" if re.search(r"(^|\s)--head(\s|=|$)", command_line) else "worker"
    if "ray health-check" in command_line and re.search(r"\b(while|until)\b", command_line):
        return "wait-gcs"
    if re.search(r"\bray (job|health-check)\b", command_line) or "gcs_healthz" in command_line:
        return "script"
    return "idle"


def script_of(ctx: ContainerContext) -> str:
    """The shell text a container runs: the argument after ``-c``/``-ce``/``-lc`` (and ``--``)
    of a shell, else the whole command line."""
    container = ctx.container  # decoded on each read
    parts = [str(p) for p in (*(container.get("command") or []), *(container.get("args") or []))]
    if parts and parts[0].rsplit("/", 1)[-1] in ("bash", "sh"):
        rest = [p for p in parts[1:] if not (p.startswith("-") and "c" in p) and p != "--"]
        return expand(" ".join(rest), ctx.env)
    return expand(" ".join(parts), ctx.env)


class Shell:
    """Runs the submitter's shell subset with ``-e`` semantics; `run` returns the exit code."""

    def __init__(self, ctx: ContainerContext, *, follow_ends_on_disconnect: bool = True) -> None:
        self.ctx = ctx
        self.output: list[str] = []
        #: See `_follow`; False keeps the older model (a lost dashboard makes it exit 1).
        self.follow_ends_on_disconnect = follow_ends_on_disconnect

    def _dashboard(self, args: list[str]) -> str:
        address = flag(args, "address") or self.ctx.env.get("RAY_DASHBOARD_ADDRESS") \
            or self.ctx.env.get("RAY_ADDRESS") or "127.0.0.1:8265"
        return address.split("://", 1)[-1].rstrip("/")

    async def run(self, script: str) -> int:
        statements = split_statements(script)
        code, _ = await self._block(statements, 0, ())
        return code

    async def _block(self, st: list[str], i: int, ends: tuple[str, ...]) -> tuple[int, int]:
        """Run statements from ``i`` until one starting with a word in ``ends``; returns
        (exit code, index of that statement)."""
        while i < len(st):
            first = st[i].split(None, 1)[0] if st[i] else ""
            if first in ends:
                return 0, i
            if first == "until":
                cond = st[i][len("until"):].strip()
                j = self._find(st, i + 1, "done")
                while await self._command(cond) != 0:
                    body = [st[i + 1].split(None, 1)[1] if st[i + 1].startswith("do ")
                            else st[i + 1], *st[i + 2:j]]
                    await self._block(body, 0, ())
                i = j + 1
                continue
            if first == "if":
                cond = st[i][len("if"):].strip()
                negate = cond.startswith("!")
                ok = await self._command(cond.lstrip("!").strip()) == 0
                j = self._find(st, i + 1, "fi")
                then = [st[i + 1][len("then"):].strip(), *st[i + 2:j]]
                if ok != negate:
                    code, _ = await self._block([s for s in then if s], 0, ())
                    if code != 0:
                        return code, j
                i = j + 1
                continue
            code = await self._command(st[i])
            if code != 0:
                return code, i
            i += 1
        return 0, i

    @staticmethod
    def _find(st: list[str], i: int, word: str) -> int:
        for j in range(i, len(st)):
            if st[j].split(None, 1)[0] == word:
                return j
        return len(st)

    async def _command(self, statement: str) -> int:
        url = _HEALTH_URL.search(statement)
        if url is not None:
            return await self._probe(url.group(0))
        args = words(statement)
        if not args:
            return 0
        if args[0] == "sleep":
            await self.ctx.process.sleep(float(args[1]) if len(args) > 1 else 1.0)
            return 0
        if args[0] in ("echo", "true", "ulimit", "export", ":", "set"):
            self.output.append(" ".join(args[1:]))
            return 0
        if args[:2] == ["ray", "health-check"]:
            return await health_check(self.ctx, flag(args, "address") or "")
        if args[:2] == ["ray", "job"] and len(args) > 2:
            return await self._ray_job(args[2], args[3:])
        self.ctx.process.log("shell_unknown_command", command=statement[:200])
        return 0

    async def _probe(self, url: str) -> int:
        address, _, path = url.split("://", 1)[1].partition("/")
        try:
            answer = await http_call(self.ctx.call, address, "GET", "/" + path, timeout=2.0)
        except NetworkError:
            return 1
        return 0 if answer.status == 200 and "success" in answer.body else 1

    async def _ray_job(self, verb: str, args: list[str]) -> int:
        address = self._dashboard(args)
        positional = _positional(args)
        try:
            if verb == "submit":
                return await self._submit(address, args)
            sid = positional[0] if positional else self.ctx.env.get("RAY_JOB_SUBMISSION_ID", "")
            if verb == "status":
                answer = await http_call(self.ctx.call, address, "GET", f"/api/jobs/{sid}")
                if answer.status != 200:
                    self.output.append(answer.body)
                    return 1
                self.output.append(f"Status for job '{sid}': {answer.json()['status']}")
                return 0
            if verb == "logs":
                if "--follow" in args or "-f" in args:
                    return await self._follow(address, sid, stream=True)
                answer = await http_call(self.ctx.call, address, "GET", f"/api/jobs/{sid}/logs")
                return 0 if answer.ok else 1
            if verb in ("stop", "delete"):
                method, path = ("POST", f"/api/jobs/{sid}/stop") if verb == "stop" \
                    else ("DELETE", f"/api/jobs/{sid}")
                answer = await http_call(self.ctx.call, address, method, path)
                return 0 if answer.ok else 1
        except NetworkError as err:
            self.output.append(f"ConnectionError: {err}")
            return 1
        return 2

    async def _submit(self, address: str, args: list[str]) -> int:
        sep = args.index("--") if "--" in args else len(args)
        opts, entry = args[:sep], args[sep + 1:]
        body: dict[str, Any] = {"entrypoint": " ".join(entry)}
        sid = flag(opts, "submission-id") or flag(opts, "job-id")
        if sid:
            body["submission_id"] = sid
        for name, key in (("runtime-env-json", "runtime_env"), ("metadata-json", "metadata"),
                          ("entrypoint-resources", "entrypoint_resources")):
            value = flag(opts, name)
            if value:
                body[key] = orjson.loads(value)
        for name, key in (("entrypoint-num-cpus", "entrypoint_num_cpus"),
                          ("entrypoint-num-gpus", "entrypoint_num_gpus")):
            value = flag(opts, name)
            if value:
                body[key] = float(value)
        answer = await http_call(self.ctx.call, address, "POST", "/api/jobs/", body)
        if not answer.ok:
            self.output.append(f"RuntimeError: Request failed with status code "
                               f"{answer.status}: {answer.body}.")
            return 1
        submitted = answer.json()["submission_id"]
        self.output.append(f"Job '{submitted}' submitted successfully")
        if "--no-wait" in opts:
            return 0
        return await self._follow(address, submitted, exit_on_status=True)

    async def _follow(self, address: str, sid: str, exit_on_status: bool = False,
                      stream: bool = False) -> int:
        """Tail until the job is terminal (``ray job logs --follow``; ``submit`` without
        ``--no-wait`` also exits 1 unless it SUCCEEDED).

        ``ray job logs --follow`` (``stream``) follows a websocket opened through the head's job
        manager: opening it starts that manager (so a job whose supervisor was lost with the old
        head is failed), an unknown id (a head restarted without fault tolerance) ends it with
        "job not found" and exit 1, and a stream that closes because the dashboard went away ends
        the command with exit 0 although the job is not terminal (Ray issues 60665, 51601;
        KubeRay's submitter-finished handling). The tail itself is modelled by polling."""
        if stream:
            opened = await http_call(self.ctx.call, address, "GET", f"/api/jobs/{sid}/logs")
            if opened.status != 200:
                self.output.append(f"Job {sid} not found: {opened.body}")
                return 1
        while True:
            try:
                answer = await http_call(self.ctx.call, address, "GET", f"/api/jobs/{sid}")
            except NetworkError:
                if stream and self.follow_ends_on_disconnect:
                    self.output.append(f"the log stream of job '{sid}' closed")
                    return 0
                raise
            if answer.status != 200:
                self.output.append(answer.body)
                return 1
            status = answer.json()["status"]
            if status in TERMINAL:
                self.output.append(f"Job '{sid}' {status.lower()}")
                return 0 if not exit_on_status or status == "SUCCEEDED" else 1
            await self.ctx.process.sleep(1.0)


def _positional(args: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("--") and "=" not in arg and arg not in ("--follow", "--no-wait",
                                                                    "--verify"):
            skip = True
            continue
        if arg.startswith("-"):
            continue
        out.append(arg)
    return out


async def health_check(ctx: ContainerContext, address: str) -> int:
    """``ray health-check --address host:port``: 0 if the GCS answers, else 1."""
    gcs = GcsClient(ctx.call, address or f"127.0.0.1:{GCS_PORT}")
    try:
        await gcs.check_alive()
    except (NetworkError, RpcError):
        return 1
    return 0


async def wait_gcs_ready(ctx: ContainerContext, script: str) -> int:
    """The ``wait-gcs-ready`` init container: ``ray health-check`` every 5 s until it passes."""
    match = re.search(r"ray health-check\s+--address[ =](\S+)", script)
    address = match.group(1) if match else f"127.0.0.1:{GCS_PORT}"
    started = asyncio.get_running_loop().time()
    while await health_check(ctx, address) != 0:
        ctx.process.log("waiting_for_gcs", address=address,
                        elapsed=asyncio.get_running_loop().time() - started)
        await ctx.process.sleep(5.0)
    ctx.process.log("gcs_ready", address=address)
    return 0
