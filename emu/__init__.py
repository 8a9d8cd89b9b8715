"""kuberay-emu: the Kubernetes control plane, the KubeRay operator and a fake Ray, in-process on a
virtual clock.

Start with `run` and `Simulation`::

    import emu

    async def main(sim: emu.Simulation) -> None:
        c = sim.client("my-test")
        await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "1"}})

    emu.run(main, seed=7)


Names are imported on first use, so ``import emu.kernel`` (and the pytest plugin) stay cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .apiserver.errors import AlreadyExists as AlreadyExists
    from .apiserver.errors import ApiError as ApiError
    from .apiserver.errors import BadRequest as BadRequest
    from .apiserver.errors import Conflict as Conflict
    from .apiserver.errors import Gone as Gone
    from .apiserver.errors import Invalid as Invalid
    from .apiserver.errors import NotFound as NotFound
    from .apiserver.errors import RequestEntityTooLarge as RequestEntityTooLarge
    from .client.client import Client as Client
    from .client.informer import Informer as Informer
    from .explore.faults import AtCall as AtCall
    from .explore.faults import CrashLeader as CrashLeader
    from .explore.faults import LoseRayPod as LoseRayPod
    from .explore.faults import PartitionLeaderFromHead as PartitionLeaderFromHead
    from .explore.faults import PauseLeader as PauseLeader
    from .explore.runner import RunSpec as RunSpec
    from .explore.workload import Goal as Goal
    from .explore.workload import Knob as Knob
    from .explore.workload import Setup as Setup
    from .explore.workload import Workload as Workload
    from .faults import AfterRequest as AfterRequest
    from .faults import CoalesceEvents as CoalesceEvents
    from .faults import Crash as Crash
    from .faults import FailRequests as FailRequests
    from .faults import Fault as Fault
    from .faults import FaultPlan as FaultPlan
    from .faults import Heal as Heal
    from .faults import InformerLag as InformerLag
    from .faults import Latency as Latency
    from .faults import LoseResponses as LoseResponses
    from .faults import Outage as Outage
    from .faults import Partition as Partition
    from .faults import Pause as Pause
    from .faults import Restart as Restart
    from .faults import Restore as Restore
    from .faults import Resume as Resume
    from .faults import ShuffleLists as ShuffleLists
    from .faults import StaleList as StaleList
    from .faults import UnperformedFaults as UnperformedFaults
    from .kernel.loop import Deadlock as Deadlock
    from .kernel.network import ConnectionRefused as ConnectionRefused
    from .kernel.network import ConnectionReset as ConnectionReset
    from .kernel.network import NetworkError as NetworkError
    from .kernel.network import Timeout as Timeout
    from .kernel.process import Process as Process
    from .simulation import Simulation as Simulation
    from .simulation import VirtualTimeExceeded as VirtualTimeExceeded
    from .simulation import WaitTimeout as WaitTimeout
    from .simulation import run as run

_EXPORTS = {
    "AlreadyExists": ".apiserver.errors",
    "ApiError": ".apiserver.errors",
    "BadRequest": ".apiserver.errors",
    "Conflict": ".apiserver.errors",
    "Gone": ".apiserver.errors",
    "Invalid": ".apiserver.errors",
    "NotFound": ".apiserver.errors",
    "RequestEntityTooLarge": ".apiserver.errors",
    "Client": ".client.client",
    "Informer": ".client.informer",
    "AfterRequest": ".faults",
    "Crash": ".faults",
    "FailRequests": ".faults",
    "Fault": ".faults",
    "FaultPlan": ".faults",
    "Heal": ".faults",
    "Latency": ".faults",
    "LoseResponses": ".faults",
    "Outage": ".faults",
    "Partition": ".faults",
    "Pause": ".faults",
    "Restart": ".faults",
    "Restore": ".faults",
    "Resume": ".faults",
    "CoalesceEvents": ".faults",
    "InformerLag": ".faults",
    "ShuffleLists": ".faults",
    "StaleList": ".faults",
    "UnperformedFaults": ".faults",
    "Deadlock": ".kernel.loop",
    "ConnectionRefused": ".kernel.network",
    "ConnectionReset": ".kernel.network",
    "NetworkError": ".kernel.network",
    "Timeout": ".kernel.network",
    "Process": ".kernel.process",
    "Simulation": ".simulation",
    "VirtualTimeExceeded": ".simulation",
    "WaitTimeout": ".simulation",
    "run": ".simulation",
    "AtCall": ".explore.faults",
    "CrashLeader": ".explore.faults",
    "LoseRayPod": ".explore.faults",
    "PartitionLeaderFromHead": ".explore.faults",
    "PauseLeader": ".explore.faults",
    "RunSpec": ".explore.runner",
    "Goal": ".explore.workload",
    "Knob": ".explore.workload",
    "Setup": ".explore.workload",
    "Workload": ".explore.workload",
}

__all__ = [
    "AfterRequest", "AlreadyExists", "ApiError", "BadRequest", "Client", "Conflict",
    "ConnectionRefused",
    "ConnectionReset", "Crash", "Deadlock", "FailRequests", "Fault", "FaultPlan", "Gone", "Heal",
    "Informer", "Invalid", "Latency", "LoseResponses", "NetworkError", "NotFound", "Outage",
    "Partition", "Pause", "Process", "RequestEntityTooLarge", "Restart", "Restore", "Resume",
    "Simulation", "Timeout", "VirtualTimeExceeded", "WaitTimeout", "run",
]
# Observation faults and strict-fault reporting (emu.faults).
__all__ += ["CoalesceEvents", "InformerLag", "ShuffleLists", "StaleList", "UnperformedFaults"]
# The explorer's workloads, run specs and fault values (emu.explore; docs/explore.md).
__all__ += ["AtCall", "CrashLeader", "Goal", "Knob", "LoseRayPod", "PartitionLeaderFromHead",
            "PauseLeader", "RunSpec", "Setup", "Workload"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'emu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
