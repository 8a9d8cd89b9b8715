"""Helpers for the Kubernetes built-ins tests: manifests and tiny container programs.

Every test installs a cluster with `emu.kube.cluster.install` inside the ``sim`` fixture's world
and registers the programs its images run with ``sim.programs.register``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from emu.kernel.programs import ContainerContext

Obj = dict[str, Any]


def pod(name: str, image: str = "example/app:1", *, namespace: str = "default",
        restart_policy: str = "Always", labels: dict[str, str] | None = None,
        **spec: Any) -> Obj:
    """A one-container Pod manifest."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"restartPolicy": restart_policy,
                     "containers": [{"name": "app", "image": image}], **spec}}


def template(image: str, labels: dict[str, str], restart_policy: str = "Always") -> Obj:
    return {"metadata": {"labels": labels},
            "spec": {"restartPolicy": restart_policy,
                     "containers": [{"name": "app", "image": image}]}}


def condition(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def is_true(ctype: str) -> Callable[[Obj], bool]:
    return lambda obj: (condition(obj, ctype) or {}).get("status") == "True"


def phase_is(phase: str) -> Callable[[Obj], bool]:
    return lambda obj: (obj.get("status") or {}).get("phase") == phase


def exits(code: int, *, after: float = 0.0,
          starts: list[float] | None = None) -> Callable[[ContainerContext], Awaitable[int]]:
    """A program that exits with ``code`` after ``after`` seconds (recording start times)."""

    async def program(ctx: ContainerContext) -> int:
        if starts is not None:
            starts.append(asyncio.get_running_loop().time())
        if after:
            await asyncio.sleep(after)
        return code

    return program


def ready_after(seconds: float, *, reply: str = "") -> Callable[[ContainerContext],
                                                                 Awaitable[int]]:
    """A server on port 8080 answering ``reply`` (its Pod name by default), ready after
    ``seconds``."""

    async def program(ctx: ContainerContext) -> int:
        async def handle(payload: Any, info: Any) -> str:
            return reply or ctx.pod_name

        ctx.listen(8080, handle)
        if seconds:
            await asyncio.sleep(seconds)
        ctx.set_ready(True)
        await asyncio.Event().wait()
        return 0

    return program
