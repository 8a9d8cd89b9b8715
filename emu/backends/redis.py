"""Redis GCS storage with Ray's real key layout (Ray ≥ 2.38, ``redis_store_client.cc``).

Layout, so a ``redis-cli KEYS 'RAY*'`` on the emulated cluster's Redis shows what a real one would:
- each table is one HASH at ``RAY<namespace>@<TABLE>`` (``RAY864b…f752@NODE``); the hash field is
  the entry key and the value the serialized record;
- the job counter is the one plain string key, ``RAY<namespace>@JobCounter``, bumped with
  ``INCRBY 1``, so job IDs keep counting across GCS restarts;
- the namespace may not contain ``@``, which separates it from the table name (Ray checks this too).

Commands follow Ray's: ``HSET`` / ``HSETNX`` for put, ``HGET``, ``HMGET`` and ``HDEL`` in batches of
1000, ``HSCAN`` (``MATCH`` only for a key prefix, with ``[ ] - ? * ^ \\`` escaped) for get-all and
keys, ``HEXISTS``. `delete_namespace` is ``cleanup_redis_storage``: ``SCAN MATCH RAY<ns>@*`` then
``DEL``.

Two ways to connect:
- `RedisStoreClient(client, namespace)` over any ``redis.asyncio.Redis`` — typically
  ``fakeredis.FakeAsyncRedis``, the embedded default, which does no real I/O;
- `RedisStoreClient.from_url(url, namespace)` for a real server. Every command runs under
  `emu.kernel.outside.block_on`: on a loop of its own, with the world's loop blocked until the
  server answers, so neither virtual time nor any other task moves meanwhile and a run's history
  does not depend on the server's latency. It uses a single connection, so commands reach the
  server in the order they were sent, and no retries: an unreachable server is reported at once as
  `StorageUnavailable`, which makes the GCS exit as Ray's does when its Redis PING fails.

Timeouts are Ray's and run on the wall clock (virtual time is stopped while a real server
answers): until the first answer, `CONNECT_TIMEOUT` (``redis_db_connect_retries`` 120 times
``redis_db_connect_wait_milliseconds`` 500 = 60 s); then `READ_TIMEOUT` per command
(``redis_db_probe_timeout_milliseconds``, 30 s). A server that accepts and never answers, or that
answers something that is not RESP, is `StorageUnavailable` naming its address.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError

from emu.kernel.outside import OnOutsideLoop, block_on

from .base import BATCH_SIZE, StorageUnavailable, chunks, sorted_entries

T = TypeVar("T")

#: Seconds Ray's GCS keeps trying to reach Redis: ``redis_db_connect_retries`` (120) times
#: ``redis_db_connect_wait_milliseconds`` (500 ms), ray_config_def.h.
CONNECT_TIMEOUT = 120 * 0.5
#: Seconds Ray waits for a Redis answer: ``redis_db_probe_timeout_milliseconds`` (30 000).
READ_TIMEOUT = 30.0

#: The name of the job counter "table": ``RAY<ns>@JobCounter``.
JOB_COUNTER = "JobCounter"

_MATCH_SPECIALS = frozenset("[]-?*^\\")


def escape_match(text: str) -> str:
    """``text`` with Redis glob specials escaped, as Ray escapes prefixes in ``MATCH`` patterns."""
    return "".join("\\" + ch if ch in _MATCH_SPECIALS else ch for ch in text)


def table_key(namespace: str, table: str) -> str:
    """The Redis key of a table's hash: ``RAY<namespace>@<table>``."""
    return f"RAY{namespace}@{table}"


def redact_url(url: str) -> str:
    """``host:port/db`` of a Redis URL, without the password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    db = parts.path.lstrip("/") or "0"
    return f"{host}:{port}/{db}"


class RedisStoreClient:
    """Ray's ``RedisStoreClient`` over ``redis.asyncio``. Implements `emu.backends.base.GcsStorage`."""

    def __init__(
        self,
        client: aioredis.Redis,
        namespace: str,
        *,
        address: str | None = None,
        external: bool | None = None,
        owns_client: bool = False,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        """Bind ``client`` to ``namespace``.

        ``address`` names the server in error messages (defaults to the client's host:port/db).
        ``external`` says the client talks to a real server, so its commands run under
        `block_on` (the client then lives on the outside loop: send raw commands through the
        `client` property); by default it is true for anything but fakeredis. ``owns_client``:
        `close` also closes ``client``.
        ``connect_timeout`` / ``read_timeout``: wall-clock seconds before a real server that does
        not answer is `StorageUnavailable` (until its first answer / for each later command).
        """
        for what, value in (("connect_timeout", connect_timeout),
                            ("read_timeout", read_timeout)):
            if not value > 0 or value == float("inf"):
                raise ValueError(f"{what} must be a positive number of seconds, not {value!r}")
        if "@" in namespace:
            raise ValueError(
                f"storage namespace {namespace!r} must not contain '@': "
                "it separates the namespace from the table name in Redis keys"
            )
        kwargs = client.get_connection_kwargs()
        if kwargs.get("decode_responses"):
            raise ValueError("the Redis client must be built with decode_responses=False: "
                             "GCS values are bytes")
        is_fake = type(client).__module__.split(".", 1)[0] == "fakeredis"
        self._client: Any = client  # redis-py's command stubs type results as `Awaitable | value`
        self._namespace = namespace
        self._external = (not is_fake) if external is None else external
        self._owns_client = owns_client
        if address is None:
            if is_fake:
                address = "fakeredis"
            else:
                address = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/" \
                          f"{kwargs.get('db', 0)}"
        self._address = address
        self._closed = False
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._answered = False  # a first command succeeded: the connection is up

    @classmethod
    def from_url(cls, url: str, namespace: str, *, connect_timeout: float = CONNECT_TIMEOUT,
                 read_timeout: float = READ_TIMEOUT) -> RedisStoreClient:
        """A client for a real server at ``redis://[[user]:password@]host:port[/db]``.

        No I/O happens here; the first command (or `health_check`) connects.
        """
        client = aioredis.Redis.from_url(
            url,
            # RESP2, as Ray's GCS speaks it through hiredis. redis-py 8 opens with HELLO 3
            # unless told otherwise, which a RESP2-only server (or a proxy) cannot answer.
            protocol=2,
            decode_responses=False,
            single_connection_client=True,
            retry=Retry(NoBackoff(), 0),
        )
        return cls(client, namespace, address=redact_url(url), external=True, owns_client=True,
                   connect_timeout=connect_timeout, read_timeout=read_timeout)

    def __repr__(self) -> str:
        return f"RedisStoreClient(address={self._address!r}, namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def address(self) -> str:
        """Where the server is (``host:port/db`` without password, or ``fakeredis``)."""
        return self._address

    @property
    def client(self) -> Any:
        """The underlying ``redis.asyncio`` client, for raw commands (tests that inspect keys);
        for a real server, a proxy that runs each of its commands under `block_on`, as this
        store runs its own."""
        if self._external:
            return OnOutsideLoop(self._client, self._read_timeout)
        return self._client

    def _key(self, table: str) -> str:
        return table_key(self._namespace, table)

    async def _run(self, awaitable: Awaitable[T]) -> T:
        """Await one Redis command: frozen if the server is real, errors as `StorageUnavailable`."""
        if self._closed:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never awaited: don't leave a "coroutine was never awaited" warning
            raise StorageUnavailable(f"GCS storage: Redis client for {self._address} is closed")
        try:
            if self._external:
                result = self._blocking(awaitable)
                self._answered = True
                return result
            return await awaitable
        except (RedisConnectionError, RedisTimeoutError, OSError) as err:
            raise StorageUnavailable(
                f"GCS storage: Redis at {self._address} is unreachable ({type(err).__name__})"
            ) from err
        except InvalidResponse as err:
            raise StorageUnavailable(
                f"GCS storage: the server at {self._address} is not a Redis server ({err})"
            ) from err

    def _blocking(self, awaitable: Awaitable[T]) -> T:
        """A real server's answer, with the world stopped until it comes (`block_on`), for at
        most the connect or read timeout of the wall clock."""
        limit = self._read_timeout if self._answered else self._connect_timeout
        try:
            return block_on(awaitable, limit)
        except TimeoutError:
            self._drop_connection()
            phase = "read" if self._answered else "connect"
            raise StorageUnavailable(
                f"GCS storage: Redis at {self._address} did not answer within {limit:g} s "
                f"({phase} timeout)") from None

    def _drop_connection(self) -> None:
        """After a timeout the connection may hold a half-read answer: never reuse it."""
        try:
            block_on(self._client.aclose(), self._read_timeout)
        except (RedisConnectionError, RedisTimeoutError, InvalidResponse, OSError):
            pass

    async def _hscan(self, table: str, match: str | None) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        cursor = 0
        while True:
            cursor, page = await self._run(
                self._client.hscan(self._key(table), cursor, match=match, count=BATCH_SIZE)
            )
            for field, value in page.items():
                found[field.decode()] = value
            if cursor == 0:
                return found

    async def put(self, table: str, key: str, value: bytes, overwrite: bool = True) -> bool:
        if overwrite:
            added = await self._run(self._client.hset(self._key(table), key, value))
        else:
            added = await self._run(self._client.hsetnx(self._key(table), key, value))
        return bool(added)

    async def batch_put(self, table: str, items: Mapping[str, bytes]) -> int:
        added = 0
        keys = list(items)
        for batch in chunks(keys):
            mapping = {key: items[key] for key in batch}
            added += await self._run(self._client.hset(self._key(table), mapping=mapping))
        return added

    async def get(self, table: str, key: str) -> bytes | None:
        value = await self._run(self._client.hget(self._key(table), key))
        return None if value is None else bytes(value)

    async def multi_get(self, table: str, keys: Iterable[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for batch in chunks(keys):
            values = await self._run(self._client.hmget(self._key(table), batch))
            for key, value in zip(batch, values, strict=True):
                if value is not None:
                    found[key] = bytes(value)
        return sorted_entries(found)

    async def get_all(self, table: str) -> dict[str, bytes]:
        return sorted_entries(await self._hscan(table, None))

    async def keys(self, table: str, prefix: str = "") -> list[str]:
        match = escape_match(prefix) + "*" if prefix else None
        return sorted(await self._hscan(table, match))

    async def exists(self, table: str, key: str) -> bool:
        return bool(await self._run(self._client.hexists(self._key(table), key)))

    async def delete(self, table: str, key: str) -> bool:
        return bool(await self._run(self._client.hdel(self._key(table), key)))

    async def batch_delete(self, table: str, keys: Iterable[str]) -> int:
        removed = 0
        for batch in chunks(keys):
            removed += await self._run(self._client.hdel(self._key(table), *batch))
        return removed

    async def get_next_job_id(self) -> int:
        return int(await self._run(self._client.incrby(self._key(JOB_COUNTER), 1)))

    async def delete_namespace(self) -> int:
        """Port of ``RedisDelKeyPrefixSync`` (redis_store_client.cc), Ray's cleanup_redis_storage.

        Scans ``RAY<ns>@*`` (never ``KEYS``) to the end, then deletes what it found; keys of other
        namespaces, even ones whose name starts with this one, are untouched.
        """
        pattern = "RAY" + escape_match(self._namespace) + "@*"
        found: dict[bytes, None] = {}
        cursor = 0
        while True:
            cursor, page = await self._run(
                self._client.scan(cursor, match=pattern, count=BATCH_SIZE)
            )
            found.update(dict.fromkeys(page))
            if cursor == 0:
                break
        removed = 0
        ordered = sorted(found)
        for start in range(0, len(ordered), BATCH_SIZE):
            removed += await self._run(self._client.delete(*ordered[start:start + BATCH_SIZE]))
        return removed

    async def health_check(self) -> None:
        """Ray's GCS PINGs Redis every 100 ms and exits when it fails; this is one PING."""
        await self._run(self._client.ping())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            try:
                if self._external:
                    block_on(self._client.aclose(), self._read_timeout)
                else:
                    await self._client.aclose()
            except (RedisConnectionError, RedisTimeoutError, OSError):
                pass  # closing a connection to a dead server has nothing left to release
