"""Fake Ray: the GCS (memory, Redis and RocksDB storage), raylets, tasks and actors, the
dashboard's Jobs and Serve APIs and Serve proxies, run as container programs.

Start with `register_ray_programs` (what a Pod running a Ray or Redis image does), `RayConfig`
(behaviours a test decides and records it reads) and `RayClient` (a driver for tests).
``emu.ray`` imports only ``emu.kernel`` and ``emu.backends``; it meets ``emu.kube`` only through the
network and the container program contract.
"""

from .config import CheckpointStore as CheckpointStore
from .config import JobBehaviour as JobBehaviour
from .config import RayConfig as RayConfig
from .config import ServeAppBehaviour as ServeAppBehaviour
from .images import register_ray_programs as register_ray_programs
from .workloads import ActorDiedError as ActorDiedError
from .workloads import ActorHandle as ActorHandle
from .workloads import ActorUnavailableError as ActorUnavailableError
from .workloads import RayClient as RayClient
from .workloads import RayTaskError as RayTaskError
from .workloads import WorkerCrashedError as WorkerCrashedError

__all__ = [
    "ActorDiedError", "ActorHandle", "ActorUnavailableError", "CheckpointStore", "JobBehaviour",
    "RayClient", "RayConfig", "RayTaskError", "ServeAppBehaviour", "WorkerCrashedError",
    "register_ray_programs",
]
