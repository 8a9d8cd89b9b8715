"""The GCS storage protocol every backend implements.

Modelled on Ray's ``StoreClient`` (``src/ray/gcs/store_client/store_client.h``): the GCS keeps a
few named tables (``JOB``, ``ACTOR``, ``NODE``, ``KV``, …; the ``TablePrefix`` names) of key →
serialized record, plus one job counter. A client is bound to one storage namespace at construction
— Ray's ``RAY_external_storage_namespace``, which KubeRay sets to the RayCluster UID unless the
``ray.io/external-storage-namespace`` annotation overrides it — so two clusters sharing one Redis
never see each other's tables.

Ray's client is callback-based; this one is ``async``. Keys are ``str`` (encoded as UTF-8 where the
store wants bytes, so byte order and ``str`` order agree), values are ``bytes``. Everything that
returns several entries returns them sorted by key, whatever the store's own order, so a run never
depends on hash order.

Failures a caller must handle:
- `StorageUnavailable`: the store can't be reached. Ray's GCS exits when its Redis PING fails; the
  emulated GCS exits on this error.
- `StorageLocked`: an embedded store's directory is already held by another writer (RocksDB's LOCK).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

#: Ray's ``maximum_gcs_storage_operation_batch_size``: multi-key reads and deletes go in chunks.
BATCH_SIZE = 1000


class StorageUnavailable(Exception):
    """The storage backend can't be reached (a Redis server down or refusing connections)."""


class StorageLocked(Exception):
    """An embedded store's directory is already opened for writing by someone else."""


@runtime_checkable
class GcsStorage(Protocol):
    """One storage namespace's tables and job counter.

    Every method may raise `StorageUnavailable`. Calls from one task complete in the order they
    were awaited, as Ray's per-key queues guarantee for requests on the same (table, key).
    """

    @property
    def namespace(self) -> str:
        """The storage namespace this client is bound to."""
        ...

    async def put(self, table: str, key: str, value: bytes, overwrite: bool = True) -> bool:
        """Store ``value`` under ``key``; True if the key was newly added.

        With ``overwrite=False`` an existing entry is left untouched (Redis ``HSETNX``).
        """
        ...

    async def batch_put(self, table: str, items: Mapping[str, bytes]) -> int:
        """Store every entry of ``items`` (overwriting); returns how many keys were newly added."""
        ...

    async def get(self, table: str, key: str) -> bytes | None:
        """The value under ``key``, or None."""
        ...

    async def multi_get(self, table: str, keys: Iterable[str]) -> dict[str, bytes]:
        """The entries among ``keys`` that exist, sorted by key; missing keys are left out."""
        ...

    async def get_all(self, table: str) -> dict[str, bytes]:
        """Every entry of ``table``, sorted by key (what the GCS loads on restart)."""
        ...

    async def keys(self, table: str, prefix: str = "") -> list[str]:
        """The keys of ``table`` starting with ``prefix``, sorted."""
        ...

    async def exists(self, table: str, key: str) -> bool:
        """Whether ``key`` is in ``table``."""
        ...

    async def delete(self, table: str, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        ...

    async def batch_delete(self, table: str, keys: Iterable[str]) -> int:
        """Remove every key of ``keys``; returns how many existed."""
        ...

    async def get_next_job_id(self) -> int:
        """Bump the job counter and return its new value (1 for the first job).

        Durable backends keep counting across GCS restarts, which is why job IDs never repeat
        with Redis or RocksDB.
        """
        ...

    async def delete_namespace(self) -> int:
        """Remove every table and the job counter of this namespace; returns how many went.

        The count is of storage units removed: one per non-empty table plus one for the job
        counter if it was ever bumped (with Redis, exactly the number of keys deleted). This is what
        KubeRay's cleanup Job runs (Ray's ``cleanup_redis_storage``).
        """
        ...

    async def health_check(self) -> None:
        """Return if the store answers; raise `StorageUnavailable` if it doesn't."""
        ...

    async def close(self) -> None:
        """Release connections and locks. Idempotent."""
        ...


def sorted_entries(entries: Mapping[str, bytes]) -> dict[str, bytes]:
    """``entries`` as a dict in key order: the one order every backend returns."""
    return {key: entries[key] for key in sorted(entries)}


def chunks(keys: Iterable[str], size: int = BATCH_SIZE) -> list[list[str]]:
    """``keys`` without repeats, split into lists of at most ``size``, in their given order."""
    batch: list[str] = []
    out: list[list[str]] = []
    for key in dict.fromkeys(keys):
        batch.append(key)
        if len(batch) == size:
            out.append(batch)
            batch = []
    if batch:
        out.append(batch)
    return out
