"""In-memory GCS storage: Ray's ``IN_MEMORY`` store, the default without fault tolerance.

The tables live in this object, which lives in the GCS process that made it. When that process
dies (a head Pod restart) the object goes with it, so a new GCS starts from empty tables and the job
counter starts again at 1 — exactly Ray's behaviour without GCS FT.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .base import StorageUnavailable, sorted_entries


class MemoryStoreClient:
    """Tables as dicts in this process. Implements `emu.backends.base.GcsStorage`."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._tables: dict[str, dict[str, bytes]] = {}
        self._job_counter = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryStoreClient(namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        return self._namespace

    def _check_open(self) -> None:
        if self._closed:
            raise StorageUnavailable(
                f"in-memory GCS storage for namespace {self._namespace!r} is closed"
            )

    def _table(self, table: str) -> dict[str, bytes]:
        self._check_open()
        return self._tables.setdefault(table, {})

    async def put(self, table: str, key: str, value: bytes, overwrite: bool = True) -> bool:
        entries = self._table(table)
        added = key not in entries
        if added or overwrite:
            entries[key] = bytes(value)
        return added

    async def batch_put(self, table: str, items: Mapping[str, bytes]) -> int:
        entries = self._table(table)
        added = 0
        for key, value in items.items():
            added += key not in entries
            entries[key] = bytes(value)
        return added

    async def get(self, table: str, key: str) -> bytes | None:
        return self._table(table).get(key)

    async def multi_get(self, table: str, keys: Iterable[str]) -> dict[str, bytes]:
        entries = self._table(table)
        return sorted_entries({key: entries[key] for key in keys if key in entries})

    async def get_all(self, table: str) -> dict[str, bytes]:
        return sorted_entries(self._table(table))

    async def keys(self, table: str, prefix: str = "") -> list[str]:
        return sorted(key for key in self._table(table) if key.startswith(prefix))

    async def exists(self, table: str, key: str) -> bool:
        return key in self._table(table)

    async def delete(self, table: str, key: str) -> bool:
        return self._table(table).pop(key, None) is not None

    async def batch_delete(self, table: str, keys: Iterable[str]) -> int:
        entries = self._table(table)
        return sum(entries.pop(key, None) is not None for key in dict.fromkeys(keys))

    async def get_next_job_id(self) -> int:
        self._check_open()
        self._job_counter += 1
        return self._job_counter

    async def delete_namespace(self) -> int:
        self._check_open()
        removed = sum(1 for entries in self._tables.values() if entries)
        removed += self._job_counter > 0
        self._tables.clear()
        self._job_counter = 0
        return removed

    async def health_check(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._closed = True
        self._tables.clear()
