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
    from .client.apply import ApplyOutcome as ApplyOutcome
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
    from .http.server import HttpServer as HttpServer
    from .http.transport import httpx_transport as httpx_transport
    from .http.transport import kr8s_api as kr8s_api
    from .http.transport import lightkube_client as lightkube_client
    from .kernel.loop import Deadlock as Deadlock
    from .kernel.network import ConnectionRefused as ConnectionRefused
    from .kernel.network import ConnectionReset as ConnectionReset
    from .kernel.network import NetworkError as NetworkError
    from .kernel.network import Timeout as Timeout
    from .kernel.process import Panic as Panic
    from .kernel.process import Process as Process
    from .kube.certmanager import install_cert_manager as install_cert_manager
    from .kube.config import KubeConfig as KubeConfig
    from .kube.config import NodePool as NodePool
    from .kube.volumes import install_standard_storage_class as install_standard_storage_class
    from .simulation import ReconcilePanic as ReconcilePanic
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
    "ApplyOutcome": ".client.apply",
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
    "HttpServer": ".http.server",
    "httpx_transport": ".http.transport",
    "kr8s_api": ".http.transport",
    "lightkube_client": ".http.transport",
    "Deadlock": ".kernel.loop",
    "ConnectionRefused": ".kernel.network",
    "ConnectionReset": ".kernel.network",
    "NetworkError": ".kernel.network",
    "Timeout": ".kernel.network",
    "Process": ".kernel.process",
    "KubeConfig": ".kube.config",
    "NodePool": ".kube.config",
    "install_cert_manager": ".kube.certmanager",
    "install_standard_storage_class": ".kube.volumes",
    "Simulation": ".simulation",
    "VirtualTimeExceeded": ".simulation",
    "Panic": ".kernel.process",
    "ReconcilePanic": ".simulation",
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
    "AfterRequest", "AlreadyExists", "ApiError", "ApplyOutcome", "BadRequest", "Client", "Conflict",
    "ConnectionRefused",
    "ConnectionReset", "Crash", "Deadlock", "FailRequests", "Fault", "FaultPlan", "Gone", "Heal",
    "HttpServer",
    "Informer", "Invalid", "KubeConfig", "Latency", "LoseResponses", "NetworkError", "NodePool",
    "NotFound", "Outage",
    "Panic",
    "Partition", "Pause", "Process",
    "ReconcilePanic",
    "RequestEntityTooLarge", "Restart", "Restore", "Resume",
    "Simulation", "Timeout", "VirtualTimeExceeded", "WaitTimeout",
    "httpx_transport", "lightkube_client",
    "run",
]
# The in-process kr8s client (emu.http.transport).
__all__ += ["kr8s_api"]
# Observation faults and strict-fault reporting (emu.faults).
__all__ += ["CoalesceEvents", "InformerLag", "ShuffleLists", "StaleList", "UnperformedFaults"]
# RBAC (emu.apiserver.rbac) and its 403.
if TYPE_CHECKING:
    from .apiserver.errors import Forbidden as Forbidden
    from .apiserver.rbac import RBAC as RBAC
    from .apiserver.rbac import UserInfo as UserInfo
_EXPORTS.update({"Forbidden": ".apiserver.errors", "RBAC": ".apiserver.rbac",
                 "UserInfo": ".apiserver.rbac"})
__all__ += ["RBAC", "Forbidden", "UserInfo"]

# World snapshot and restore (emu.snapshots).
if TYPE_CHECKING:
    from .snapshots import NotQuiescent as NotQuiescent
    from .snapshots import RestoredRunError as RestoredRunError
    from .snapshots import Snapshot as Snapshot
    from .snapshots import SnapshotError as SnapshotError
    from .snapshots import snapshot_world as snapshot_world
_EXPORTS.update({name: ".snapshots" for name in (
    "NotQuiescent", "RestoredRunError", "Snapshot", "SnapshotError", "snapshot_world")})
__all__ += ["NotQuiescent", "RestoredRunError", "Snapshot", "SnapshotError", "snapshot_world"]
# The explorer's workloads, run specs and fault values (emu.explore; docs/explore.md).
__all__ += ["AtCall", "CrashLeader", "Goal", "Knob", "LoseRayPod", "PartitionLeaderFromHead",
            "PauseLeader", "RunSpec", "Setup", "Workload"]
# cert-manager for KubeRay's mTLS (emu.kube.certmanager).
__all__ += ["install_cert_manager"]
# kind's default StorageClass, provisioned on first consumer (emu.kube.volumes).
__all__ += ["install_standard_storage_class"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'emu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
