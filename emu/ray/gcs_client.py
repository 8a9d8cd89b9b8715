"""The GCS's client side: what raylets, dashboards, actors and drivers call, and Ray's ids.

Every call is one RPC through the network (``{"method": ..., ...}``); an unreachable GCS surfaces
as the network's `NetworkError`, a refusal as `RpcError`. Records are plain dicts (the JSON the
GCS stores); ids are hex strings of Ray's widths (node and cluster ids 28 bytes, actor ids 16,
job ids 4).
"""

from __future__ import annotations

from typing import Any

from emu.kernel import clock
from emu.kernel.rng import SimRandom

from .net import Caller

#: Ray's default GCS port (``ray start --port``), where KubeRay points workers.
GCS_PORT = 6379
#: Ray's ``gcs_rpc_server_reconnect_timeout_s`` default.
DEFAULT_RECONNECT_TIMEOUT_S = 60.0
#: ``gcs_rpc_server_connect_timeout_s``: how long one RPC waits for an unresponsive GCS.
GCS_RPC_TIMEOUT_S = 5.0

JOB_NAMESPACE = "job"


def hex_id(rng: SimRandom, nbytes: int) -> str:
    return f"{rng.getrandbits(nbytes * 8):0{nbytes * 2}x}"


def job_id_hex(counter: int) -> str:
    """Ray's JobID for the n-th job: 4 bytes, little-endian, hex (job 1 → ``01000000``)."""
    return counter.to_bytes(4, "little").hex()


def unix_ms(t: float) -> int:
    """Unix milliseconds of virtual time ``t`` (the simulation's epoch plus ``t``)."""
    return round((clock.EPOCH.timestamp() + t) * 1000)


class GcsClient:
    """RPCs to the GCS at ``address`` through ``call``."""

    def __init__(self, call: Caller, address: str, timeout: float = GCS_RPC_TIMEOUT_S) -> None:
        self._call = call
        self.address = address
        self.timeout = timeout

    async def rpc(self, method: str, timeout: float | None = None, **fields: Any) -> Any:
        return await self._call(self.address, {"method": method, **fields}, verb=method,
                                name="gcs", timeout=self.timeout if timeout is None else timeout)

    # -- cluster ----------------------------------------------------------------------------------

    async def check_alive(self) -> dict[str, Any]:
        """What ``ray health-check`` asks: the GCS answers with its cluster id."""
        result: dict[str, Any] = await self.rpc("CheckAlive")
        return result

    async def nodes(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.rpc("GetAllNodeInfo")
        return result

    async def alive_nodes(self) -> list[dict[str, Any]]:
        return [n for n in await self.nodes() if n["state"] == "ALIVE"]

    # -- internal KV ------------------------------------------------------------------------------

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        value: bytes | None = await self.rpc("InternalKVGet", namespace=namespace, key=key)
        return value

    async def kv_put(self, namespace: str, key: str, value: bytes,
                     overwrite: bool = True) -> bool:
        """True if the key was newly added (Ray's ``InternalKVPut`` reply)."""
        return bool(await self.rpc("InternalKVPut", namespace=namespace, key=key, value=value,
                                   overwrite=overwrite))

    async def kv_del(self, namespace: str, key: str) -> bool:
        return bool(await self.rpc("InternalKVDel", namespace=namespace, key=key))

    async def kv_keys(self, namespace: str, prefix: str = "") -> list[str]:
        result: list[str] = await self.rpc("InternalKVKeys", namespace=namespace, prefix=prefix)
        return result

    async def kv_multi_get(self, namespace: str, keys: list[str]) -> dict[str, bytes]:
        result: dict[str, bytes] = await self.rpc("InternalKVMultiGet", namespace=namespace,
                                                  keys=keys)
        return result

    # -- jobs -------------------------------------------------------------------------------------

    async def next_job_id(self) -> str:
        return job_id_hex(int(await self.rpc("GetNextJobID")))

    async def add_job(self, job: dict[str, Any]) -> None:
        await self.rpc("AddJob", job=job)

    async def mark_job_finished(self, job_id: str) -> None:
        await self.rpc("MarkJobFinished", job_id=job_id)

    async def jobs(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.rpc("GetAllJobInfo")
        return result

    # -- actors -----------------------------------------------------------------------------------

    async def create_actor(self, actor: dict[str, Any], spec: bytes,
                           timeout: float | None = None) -> dict[str, Any]:
        """Register and create an actor; the record once it is ALIVE or DEAD."""
        result: dict[str, Any] = await self.rpc("CreateActor", actor=actor, spec=spec,
                                                timeout=timeout)
        return result

    async def actor(self, actor_id: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self.rpc("GetActorInfo", actor_id=actor_id)
        return result

    async def named_actor(self, name: str, namespace: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self.rpc("GetNamedActorInfo", name=name,
                                                       namespace=namespace)
        return result

    async def actors(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.rpc("ListActors")
        return result

    async def wait_actor(self, actor_id: str, version: int, timeout: float = 30.0
                         ) -> dict[str, Any] | None:
        """Long poll: the actor's record once its version is past ``version`` (or after
        ``timeout``, whatever it is then)."""
        result: dict[str, Any] | None = await self.rpc(
            "WaitActorStateChange", actor_id=actor_id, version=version, wait=timeout,
            timeout=timeout + self.timeout)
        return result

    async def kill_actor(self, actor_id: str, no_restart: bool = True,
                         exit_actor: bool = False) -> None:
        """``ray.kill``; ``exit_actor``: the actor ends itself (``ray.actor.exit_actor()``),
        which Ray records as its worker's intended exit, not a kill."""
        await self.rpc("KillActor", actor_id=actor_id, no_restart=no_restart,
                       exit_actor=exit_actor)
