"""Fixtures for the GCS storage backends: one factory per backend, run inside virtual time.

Every backend test is a plain function that hands an ``async def`` body to `Backend.run`; the body
runs on a fresh `emu.kernel.loop.VirtualTimeLoop`, and every store it opened is closed on that loop
afterwards (so RocksDB locks are released and Redis connections closed).

The real-server parameter needs ``EMU_REDIS_URL``; without it that parameter is skipped with the
reason below. Each test gets its own namespace prefix there, and its keys are deleted afterwards.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import fakeredis
import pytest
import redis

from emu.backends import GcsStorage, MemoryStoreClient, RedisStoreClient, RocksDBStoreClient
from emu.backends.redis import redact_url
from emu.kernel.loop import VirtualTimeLoop

T = TypeVar("T")

REDIS_URL_ENV = "EMU_REDIS_URL"
NO_REDIS_REASON = f"{REDIS_URL_ENV} not set: start one with scripts/redis-server.sh"


def skip_without_real_redis() -> None:
    """Skip a real-server test when no URL is given; in CI (``CI=true``) that is a failure, so a
    missing server can never pass as green."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{REDIS_URL_ENV} is not set in CI: .ci/run must start a real redis-server")
    pytest.skip(NO_REDIS_REASON)


def run_virtual(body: Callable[[], Awaitable[T]]) -> T:
    """Run ``body()`` to completion on a fresh virtual-time loop."""

    async def main() -> T:
        return await body()

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())


class Backend:
    """Opens stores of one backend kind, all sharing one underlying storage (server or directory).

    ``durable``: a store opened again sees what an earlier one wrote (Redis, RocksDB; not memory).
    """

    def __init__(self, name: str, durable: bool,
                 opener: Callable[[str, str | None], GcsStorage],
                 closed_message: Callable[[GcsStorage], str],
                 namespace_prefix: str = "") -> None:
        self.name = name
        self.durable = durable
        self._opener = opener
        self._closed_message = closed_message
        self.namespace_prefix = namespace_prefix
        self._opened: list[GcsStorage] = []

    def open(self, namespace: str = "ns", holder: str | None = None) -> GcsStorage:
        """A new client (call inside the loop); on a real server the namespace gets a prefix."""
        store = self._opener(self.namespace_prefix + namespace, holder)
        self._opened.append(store)
        return store

    def closed_message(self, store: GcsStorage) -> str:
        """The whole `StorageUnavailable` message a closed ``store`` of this kind raises."""
        return self._closed_message(store)

    def run(self, body: Callable[[], Awaitable[T]]) -> T:
        """Run ``body()`` in virtual time, then close every store it opened."""

        async def main() -> T:
            try:
                return await body()
            finally:
                opened, self._opened = self._opened, []
                for store in reversed(opened):
                    await store.close()

        return run_virtual(main)


BACKENDS = ["memory", "fakeredis", "redis-server", "rocksdb"]


def _test_prefix(request: pytest.FixtureRequest) -> str:
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12]
    return f"emu-test-{os.getpid()}-{digest}-"


def _drop_prefix(url: str, prefix: str) -> None:
    """Delete every key a test wrote on the real server (a blocking client: outside the loop)."""
    client = redis.Redis.from_url(url)
    try:
        keys = sorted(client.scan_iter(match=f"RAY{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def make_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The `Backend` called ``name``, skipping the real server when ``EMU_REDIS_URL`` is unset."""
    if name == "memory":
        yield Backend(
            name, False,
            lambda ns, holder: MemoryStoreClient(ns),
            lambda store: f"in-memory GCS storage for namespace {store.namespace!r} is closed",
        )
    elif name == "fakeredis":
        server = fakeredis.FakeServer()
        yield Backend(
            name, True,
            lambda ns, holder: RedisStoreClient(fakeredis.FakeAsyncRedis(server=server), ns,
                                                owns_client=True),
            lambda store: "GCS storage: Redis client for fakeredis is closed",
        )
    elif name == "redis-server":
        url = os.environ.get(REDIS_URL_ENV)
        if not url:
            skip_without_real_redis()
        prefix = _test_prefix(request)
        try:
            yield Backend(
                name, True,
                lambda ns, holder: RedisStoreClient.from_url(url, ns),
                lambda store: f"GCS storage: Redis client for {redact_url(url)} is closed",
                namespace_prefix=prefix,
            )
        finally:
            _drop_prefix(url, prefix)
    elif name == "rocksdb":
        path = tmp_path / "gcs"
        yield Backend(
            name, True,
            lambda ns, holder: RocksDBStoreClient(path, ns, holder=holder),
            lambda store: f"RocksDB GCS storage at {path} is closed",
        )
    else:
        raise AssertionError(f"unknown backend {name!r}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each backend in turn; the real-server one is skipped without ``EMU_REDIS_URL``."""
    yield from make_backend(request.param, request, tmp_path)


@pytest.fixture(params=["fakeredis", "redis-server"])
def redis_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The two Redis flavours: embedded fakeredis and a real server."""
    yield from make_backend(request.param, request, tmp_path)


@pytest.fixture
def run() -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """`run_virtual`: ``run(body)`` runs ``body()`` on a fresh virtual-time loop."""
    return run_virtual


@pytest.fixture
def redis_url() -> str:
    """The real server's URL, or a skip with the reason how to start one."""
    url = os.environ.get(REDIS_URL_ENV)
    if not url:
        skip_without_real_redis()
    return url
