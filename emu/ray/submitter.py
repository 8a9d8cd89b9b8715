"""KubeRay's light-weight submitter image (``quay.io/kuberay/submitter``, ``/submitter``).

Why: a RayJob's ``submitterPodTemplate`` may run this small Go binary instead of a full Ray image
(the light-weight-submitter sample). Port of ``ray-operator/rayjob-submitter/cmd/main.go``:

- flags ``--runtime-env-json``, ``--metadata-json``, ``--entrypoint-resources``,
  ``--entrypoint-num-cpus``, ``--entrypoint-num-gpus``; everything after them (after ``--``) is
  the entrypoint, joined with spaces;
- ``RAY_DASHBOARD_ADDRESS`` and ``RAY_JOB_SUBMISSION_ID`` must be set (KubeRay injects both),
  else it exits 1 with ``missing ... in environment variables``;
- it submits the job; a duplicate-submission-id error means the job is already there and it goes
  on to tail it; any other error exits 1;
- it tails the job's logs until the job is terminal (the websocket closes normally) and exits 0
  whatever the job's final status (``SUCC -- Job '<id>' succeeded``), as the Go code does.
"""

from __future__ import annotations

from typing import Any

import orjson

from emu.kernel.network import NetworkError
from emu.kernel.programs import ContainerContext

from .cli import TERMINAL, flag
from .net import http_call

_VALUE_FLAGS = ("runtime-env-json", "metadata-json", "entrypoint-resources",
                "entrypoint-num-cpus", "entrypoint-num-gpus")
#: How often the tail re-reads the job (the websocket pushes; polling at 1 s is equivalent here).
TAIL_PERIOD_S = 1.0


def parse_args(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """pflag's parse: the known ``--flag value`` / ``--flag=value`` pairs, then the positional
    arguments (after ``--`` or the first non-flag)."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return opts, args[i + 1:]
        name = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if name not in _VALUE_FLAGS:
            return opts, args[i:]
        value = flag(args[i:i + 2], name)
        opts[name] = value or ""
        i += 1 if "=" in arg else 2
    return opts, []


async def submitter_program(ctx: ContainerContext) -> int:
    """The ``/submitter`` binary."""
    args = [str(a) for a in (ctx.container.get("args") or [])]
    command = [str(c) for c in (ctx.container.get("command") or [])]
    if command[1:]:
        args = command[1:] + args
    opts, positional = parse_args(args)
    address = ctx.env.get("RAY_DASHBOARD_ADDRESS", "")
    sid = ctx.env.get("RAY_JOB_SUBMISSION_ID", "")
    for name, value in (("RAY_DASHBOARD_ADDRESS", address), ("RAY_JOB_SUBMISSION_ID", sid)):
        if not value:
            ctx.process.log("submitter_error", error=f"missing {name} in environment variables")
            return 1
    address = address.split("://", 1)[-1].rstrip("/")
    body: dict[str, Any] = {"entrypoint": " ".join(positional), "submission_id": sid}
    try:
        for name, key in (("runtime-env-json", "runtime_env"), ("metadata-json", "metadata"),
                          ("entrypoint-resources", "entrypoint_resources")):
            if opts.get(name):
                body[key] = orjson.loads(opts[name])
        for name, key in (("entrypoint-num-cpus", "entrypoint_num_cpus"),
                          ("entrypoint-num-gpus", "entrypoint_num_gpus")):
            if opts.get(name):
                body[key] = float(opts[name])
    except ValueError as err:
        ctx.process.log("submitter_error", error=str(err))
        return 1
    ctx.set_ready(True)
    try:
        answer = await http_call(ctx.call, address, "POST", "/api/jobs/", body, timeout=10.0)
        if not answer.ok and "Please use a different submission_id" not in answer.body:
            ctx.process.log("submitter_error", error=answer.body)
            return 1
        ctx.process.log("submitter_submitted", submission_id=sid,
                        already=not answer.ok)
        while True:
            status = await http_call(ctx.call, address, "GET", f"/api/jobs/{sid}",
                                     timeout=10.0)
            if status.status != 200:
                ctx.process.log("submitter_error", error=status.body)
                return 1
            if status.json().get("status") in TERMINAL:
                ctx.process.log("submitter_done", submission_id=sid,
                                status=status.json().get("status"))
                return 0
            await ctx.process.sleep(TAIL_PERIOD_S)
    except NetworkError as err:
        ctx.process.log("submitter_error", error=str(err))
        return 1
