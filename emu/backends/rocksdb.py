"""Embedded RocksDB GCS storage (Ray ≥ 2.57 ``RocksDbStoreClient``, alpha), via ``rocksdict``.

The database lives in a directory — in the emulated cluster, the directory that stands for the
GCS PersistentVolume (mounted at ``/data/gcs``) — so it survives the GCS process and a head Pod
restart, like the Redis backend, without a Redis.

Layout, following Ray's ``rocksdb_store_client.h``:
- each table is a column family named after the table (``ACTOR``, ``NODE``, …), created lazily on
  the first write; keys are the UTF-8 entry keys, values the records, both raw bytes;
- the job counter is ``__ray_job_counter__`` in the ``default`` column family (decimal ASCII), so
  job IDs keep counting across restarts;
- the namespace is not part of any key: the directory is the unit of isolation, one cluster per
  directory, and `delete_namespace` empties the whole database.

Writes are synced to the WAL before they return, except to the tables of
``gcs_rocksdb_soft_durability_tables`` (``NODE`` and ``ACTOR`` by default), as in Ray.

Single writer: RocksDB's ``LOCK`` file lets one opener at a time hold a directory. A second
`RocksDBStoreClient` on the same path gets `StorageLocked` naming the path and the holder (a
process-wide registry remembers who holds each path); a writer in another OS process is caught from
RocksDB's own lock error. `close` releases the lock.

Enabling this backend is KubeRay's decision behind the `EMBEDDED_STORAGE_FEATURE_GATE` operator
feature gate; this module only provides the store. rocksdict calls are synchronous and fast, so
they run directly on the loop, taking no virtual time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import cast

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from .base import StorageLocked, StorageUnavailable, chunks, sorted_entries

#: The KubeRay operator feature gate that allows ``gcsFaultToleranceOptions.backend: rocksdb``.
EMBEDDED_STORAGE_FEATURE_GATE = "GCSFaultToleranceEmbeddedStorage"

#: Where the job counter lives in the default column family (Ray's reserved key).
JOB_COUNTER_KEY = b"__ray_job_counter__"

#: Ray's default ``gcs_rocksdb_soft_durability_tables``: written without fsync.
SOFT_DURABILITY_TABLES = ("NODE", "ACTOR")

_DEFAULT_CF = "default"

#: Real path → holder name of every directory opened by a live client in this process.
_HOLDERS: dict[str, str] = {}


def holder_of(path: str | os.PathLike[str]) -> str | None:
    """Who holds the RocksDB directory ``path`` in this process, if anyone."""
    return _HOLDERS.get(os.path.realpath(path))


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    return opts


def _raw(item: object) -> bytes:
    """A key or value read back in raw mode (rocksdict's stubs type them as any scalar)."""
    assert isinstance(item, bytes), f"raw-mode RocksDB returned {type(item).__name__}"
    return item


def _write_options(sync: bool) -> WriteOptions:
    opts = WriteOptions()
    opts.sync = sync
    return opts


class RocksDBStoreClient:
    """Tables as column families of one RocksDB. Implements `emu.backends.base.GcsStorage`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        namespace: str,
        *,
        holder: str | None = None,
        soft_durability_tables: Iterable[str] = SOFT_DURABILITY_TABLES,
    ) -> None:
        """Open (creating if needed) the database in directory ``path``.

        ``holder`` names this writer in the `StorageLocked` error another opener gets (say, the
        head Pod's GCS); it defaults to the namespace. Raises `StorageLocked` if the directory is
        already held.
        """
        self._path = os.fspath(path)
        self._real_path = os.path.realpath(self._path)
        self._namespace = namespace
        if holder is None:
            holder = f"the GCS of storage namespace {namespace!r}"
        self._holder = holder
        current = _HOLDERS.get(self._real_path)
        if current is not None:
            raise StorageLocked(
                f"RocksDB GCS storage at {self._path} is locked: {current} holds it; "
                f"a RocksDB directory has one writer at a time, so {self._holder} cannot open it"
            )
        opts = _options()
        existing: list[str] = []
        if os.path.exists(os.path.join(self._path, "CURRENT")):
            existing = [name for name in Rdict.list_cf(self._path) if name != _DEFAULT_CF]
        try:
            self._db = Rdict(self._path, options=opts,
                             column_families={name: _options() for name in existing})
        except Exception as err:  # rocksdict raises a bare Exception for every RocksDB status
            text = str(err).lower()
            if "lock" in text:
                # RocksDB tells a lock held in this process (an opener outside this registry)
                # from one held by another OS process.
                who = "in this process" if "current process" in text else "by another process"
                raise StorageLocked(
                    f"RocksDB GCS storage at {self._path} is locked {who} (its LOCK file is "
                    f"held); a RocksDB directory has one writer at a time, so {self._holder} "
                    "cannot open it"
                ) from err
            raise
        _HOLDERS[self._real_path] = self._holder
        self._families: dict[str, Rdict] = {
            name: self._db.get_column_family(name) for name in sorted(existing)
        }
        self._soft = frozenset(soft_durability_tables)
        self._sync = _write_options(True)
        self._nosync = _write_options(False)
        self._closed = False

    def __repr__(self) -> str:
        return f"RocksDBStoreClient(path={self._path!r}, namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def path(self) -> str:
        return self._path

    @property
    def holder(self) -> str:
        return self._holder

    # -- helpers ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StorageUnavailable(f"RocksDB GCS storage at {self._path} is closed")

    def _family(self, table: str, *, create: bool) -> Rdict | None:
        self._check_open()
        if table == _DEFAULT_CF:
            raise ValueError(f"table name {table!r} is RocksDB's default column family")
        family = self._families.get(table)
        if family is None and create:
            family = self._db.create_column_family(table, _options())
            self._families[table] = family
        return family

    def _write_opts(self, table: str) -> WriteOptions:
        return self._nosync if table in self._soft else self._sync

    # -- GcsStorage ------------------------------------------------------------------------------

    async def put(self, table: str, key: str, value: bytes, overwrite: bool = True) -> bool:
        family = self._family(table, create=True)
        assert family is not None
        raw = key.encode()
        added = family.get(raw) is None
        if added or overwrite:
            family.put(raw, bytes(value), self._write_opts(table))
        return added

    async def batch_put(self, table: str, items: Mapping[str, bytes]) -> int:
        family = self._family(table, create=True)
        assert family is not None
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._db.get_column_family_handle(table))
        added = 0
        for key, value in items.items():
            raw = key.encode()
            added += family.get(raw) is None
            batch.put(raw, bytes(value))
        self._db.write(batch, self._write_opts(table))
        return added

    async def get(self, table: str, key: str) -> bytes | None:
        family = self._family(table, create=False)
        if family is None:
            return None
        value = family.get(key.encode())
        return None if value is None else bytes(value)

    async def multi_get(self, table: str, keys: Iterable[str]) -> dict[str, bytes]:
        family = self._family(table, create=False)
        if family is None:
            return {}
        found: dict[str, bytes] = {}
        for batch in chunks(keys):
            values = cast(list[bytes | None], family.get([key.encode() for key in batch]))
            for key, value in zip(batch, values, strict=True):
                if value is not None:
                    found[key] = bytes(value)
        return sorted_entries(found)

    async def get_all(self, table: str) -> dict[str, bytes]:
        family = self._family(table, create=False)
        if family is None:
            return {}
        # RocksDB iterates in byte order, which for UTF-8 is also str order.
        return {_raw(key).decode(): _raw(value) for key, value in family.items()}

    async def keys(self, table: str, prefix: str = "") -> list[str]:
        family = self._family(table, create=False)
        if family is None:
            return []
        raw_prefix = prefix.encode()
        found: list[str] = []
        for item in family.keys(from_key=raw_prefix):
            key = _raw(item)
            if not key.startswith(raw_prefix):
                break
            found.append(key.decode())
        return found

    async def exists(self, table: str, key: str) -> bool:
        family = self._family(table, create=False)
        return family is not None and family.get(key.encode()) is not None

    async def delete(self, table: str, key: str) -> bool:
        return await self.batch_delete(table, [key]) == 1

    async def batch_delete(self, table: str, keys: Iterable[str]) -> int:
        family = self._family(table, create=False)
        if family is None:
            return 0
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._db.get_column_family_handle(table))
        removed = 0
        for key in dict.fromkeys(keys):
            raw = key.encode()
            if family.get(raw) is not None:
                batch.delete(raw)
                removed += 1
        if removed:
            self._db.write(batch, self._write_opts(table))
        return removed

    async def get_next_job_id(self) -> int:
        self._check_open()
        current = self._db.get(JOB_COUNTER_KEY)
        value = (int(current) if current is not None else 0) + 1
        self._db.put(JOB_COUNTER_KEY, str(value).encode(), self._sync)
        return value

    async def delete_namespace(self) -> int:
        """Empty the database: drop every table's column family and the job counter."""
        self._check_open()
        removed = 0
        for name in sorted(self._families):
            family = self._families.pop(name)
            removed += any(True for _ in family.keys())  # noqa: SIM118 (not a dict)
            del family  # a live handle would keep the column family's files open
            self._db.drop_column_family(name)
        if self._db.get(JOB_COUNTER_KEY) is not None:
            self._db.delete(JOB_COUNTER_KEY, self._sync)
            removed += 1
        return removed

    async def health_check(self) -> None:
        self._check_open()

    async def close(self) -> None:
        """Flush and release the directory's lock so the next GCS can open it."""
        if self._closed:
            return
        self._closed = True
        # Every column-family handle holds the DB open: drop them before closing.
        self._families.clear()
        try:
            self._db.close()
        finally:
            if _HOLDERS.get(self._real_path) == self._holder:
                del _HOLDERS[self._real_path]
