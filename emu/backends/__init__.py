"""GCS storage backends: where the fake Ray's GCS keeps its tables.

One async protocol, `GcsStorage` (Ray's ``StoreClient``), and three stores, chosen as Ray chooses
them (see ``shared/ray/FACTS.md`` §1.1):
- `MemoryStoreClient`: no fault tolerance; the tables die with the GCS process;
- `RedisStoreClient`: ``RAY_REDIS_ADDRESS`` set; Ray's real key layout, over fakeredis or a real
  server;
- `RocksDBStoreClient`: ``RAY_gcs_storage=rocksdb`` with a PersistentVolume directory.

This package may import only from ``emu.kernel``.
"""

from .base import BATCH_SIZE as BATCH_SIZE
from .base import GcsStorage as GcsStorage
from .base import StorageLocked as StorageLocked
from .base import StorageUnavailable as StorageUnavailable
from .memory import MemoryStoreClient as MemoryStoreClient
from .redis import RedisStoreClient as RedisStoreClient
from .rocksdb import EMBEDDED_STORAGE_FEATURE_GATE as EMBEDDED_STORAGE_FEATURE_GATE
from .rocksdb import RocksDBStoreClient as RocksDBStoreClient

__all__ = [
    "BATCH_SIZE",
    "EMBEDDED_STORAGE_FEATURE_GATE",
    "GcsStorage",
    "MemoryStoreClient",
    "RedisStoreClient",
    "RocksDBStoreClient",
    "StorageLocked",
    "StorageUnavailable",
]
