"""Shared pieces of the runtime tests: a recording reconciler and operator start-up helpers."""

from __future__ import annotations

from typing import Any

from emu.runtime.manager import Manager
from emu.runtime.operator_process import OperatorConfig, setup_reconciler, start_operator
from emu.runtime.reconcile import Request, Result


class Recording:
    """Reconciles ConfigMaps: reads through the cache and records (time, process, key)."""


    def __init__(self, mgr: Manager, log: list[tuple[float, str, str]]) -> None:
        self.mgr = mgr
        self.client = mgr.get_client()
        self.log = log

    async def reconcile(self, request: Request) -> Result:
        await self.client.get("ConfigMap", request.name, request.namespace)
        self.log.append((self.mgr.process.table.loop.time(), self.mgr.process.name, request.key))
        return Result()


def start_replicas(sim: Any, names: list[str], log: list[tuple[float, str, str]],
                   managers: dict[str, Manager], **config: Any) -> None:
    cfg = OperatorConfig(setup=setup_reconciler("ConfigMap", lambda m: Recording(m, log)),
                         **config)
    for name in names:
        start_operator(sim, name, cfg, on_manager=lambda m: managers.__setitem__(m.process.name, m))


def configmap(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": {"k": "v"}}


def events(sim: Any, event: str, process: str | None = None) -> list[Any]:
    return sim.trace.select(event=event, process=process)
