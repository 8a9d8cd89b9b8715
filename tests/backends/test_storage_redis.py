"""Redis backend Ray's key layout, namespace cleanup, unreachable servers, frozen clock."""

from __future__ import annotations

import asyncio
import socket

import fakeredis
import pytest

from emu.backends import RedisStoreClient, StorageUnavailable
from emu.backends.redis import escape_match, redact_url, table_key
from emu.kernel.clock import freeze_while


class RecordingFakeRedis(fakeredis.FakeAsyncRedis):
    """fakeredis that remembers the name of every command it was sent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    async def execute_command(self, *args, **options):
        self.commands.append(str(args[0]).upper())
        return await super().execute_command(*args, **options)


class Frozen:
    """A raw ``redis.asyncio`` client whose every command is awaited under `freeze_while`.

    Tests inspect a real server with it: unfrozen, the virtual clock would jump to redis-py's
    socket timeout while the server was still answering.
    """

    def __init__(self, client):
        self._client = client

    def __getattr__(self, name):
        command = getattr(self._client, name)

        async def call(*args, **kwargs):
            return await freeze_while(command(*args, **kwargs))

        return call


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_each_table_is_a_hash_at_RAY_namespace_at_TABLE_and_the_counter_a_string(redis_backend):
    async def body():
        store = redis_backend.open("864b004c-6305-42e3-ac46-adfa8eb6f752")
        ns = store.namespace
        raw = Frozen(store.client)
        await store.put("NODE", "node-1", b"\x00info")
        await store.put("ACTOR", "actor-1", b"spec")
        await store.put("KV", "@namespace_cluster:ray_cluster_id", b"cid")
        assert await store.get_next_job_id() == 1
        assert await store.get_next_job_id() == 2
        keys = sorted(await raw.keys(f"RAY{escape_match(ns)}@*"))
        tables = ["ACTOR", "JobCounter", "KV", "NODE"]
        assert keys == sorted(f"RAY{ns}@{t}".encode() for t in tables)
        assert await raw.type(f"RAY{ns}@NODE") == b"hash"
        assert await raw.hgetall(f"RAY{ns}@NODE") == {b"node-1": b"\x00info"}
        assert await raw.hgetall(f"RAY{ns}@KV") == {b"@namespace_cluster:ray_cluster_id": b"cid"}
        assert await raw.type(f"RAY{ns}@JobCounter") == b"string"
        assert await raw.get(f"RAY{ns}@JobCounter") == b"2"

    redis_backend.run(body)


def test_table_key_and_match_escaping_follow_ray():
    assert table_key("864b004c-6305", "NODE") == "RAY864b004c-6305@NODE"
    assert escape_match("a-[b]*?^\\c") == "a\\-\\[b\\]\\*\\?\\^\\\\c"


def test_records_written_by_ray_layout_are_read_back(redis_backend):
    """A GCS finds what another GCS (or real Ray) wrote with raw HSET/INCRBY in the same layout."""

    async def body():
        store = redis_backend.open("uid-7")
        raw = Frozen(store.client)
        jobs = {b"02000000": b"j2", b"01000000": b"j1"}
        await raw.hset(f"RAY{store.namespace}@JOB", mapping=jobs)
        await raw.incrby(f"RAY{store.namespace}@JobCounter", 41)
        assert await store.get_all("JOB") == {"01000000": b"j1", "02000000": b"j2"}
        assert await store.get_next_job_id() == 42

    redis_backend.run(body)


def test_delete_namespace_removes_only_keys_of_its_own_namespace(redis_backend):
    async def body():
        mine = redis_backend.open("uid-1")
        longer = redis_backend.open("uid-1-b")  # "uid-1" is a prefix of this namespace
        raw = Frozen(mine.client)
        p = redis_backend.namespace_prefix
        for store in (mine, longer):
            await store.put("ACTOR", "a", b"x")
            await store.put("NODE", "n", b"x")
            await store.get_next_job_id()
        # Keys starting with the namespace but not with RAY<ns>@ are not the GCS's.
        strays = [f"{p}uid-1@ACTOR", f"RAY{p}uid-1", f"RAY{p}uid-1:ACTOR", f"RAY{p}uid-10@NODE"]
        for key in strays:
            await raw.set(key, b"keep")
        assert await mine.delete_namespace() == 3
        assert await mine.get_all("ACTOR") == {}
        assert await longer.get_all("ACTOR") == {"a": b"x"}
        assert await longer.get_next_job_id() == 2
        for key in strays:
            assert await raw.get(key) == b"keep"
            await raw.delete(key)
        assert await mine.delete_namespace() == 0

    redis_backend.run(body)


def test_delete_namespace_scans_and_never_sends_keys(run):
    async def body():
        raw = RecordingFakeRedis()
        store = RedisStoreClient(raw, "uid-1")
        for i in range(2500):
            await raw.hset(f"RAYuid-1@T{i:04d}", "k", "v")
        raw.commands.clear()
        assert await store.delete_namespace() == 2500
        assert "KEYS" not in raw.commands
        assert raw.commands.count("SCAN") >= 2
        assert set(raw.commands) == {"SCAN", "DEL"}

    run(body)


def test_put_without_overwrite_is_hsetnx_and_reads_are_batched_hmget(run):
    async def body():
        raw = RecordingFakeRedis()
        store = RedisStoreClient(raw, "ns")
        await store.put("KV", "k", b"v", overwrite=False)
        await store.put("KV", "k", b"v")
        await store.multi_get("KV", [f"k{i}" for i in range(2500)])
        await store.get_all("KV")
        await store.keys("KV", "k")
        await store.exists("KV", "k")
        assert raw.commands == ["HSETNX", "HSET", "HMGET", "HMGET", "HMGET", "HSCAN", "HSCAN",
                                "HEXISTS"]

    run(body)


def test_namespace_containing_at_sign_is_rejected():
    with pytest.raises(ValueError) as caught:
        RedisStoreClient(fakeredis.FakeAsyncRedis(), "a@b")
    assert str(caught.value) == (
        "storage namespace 'a@b' must not contain '@': "
        "it separates the namespace from the table name in Redis keys"
    )


def test_client_that_decodes_responses_is_rejected():
    with pytest.raises(ValueError) as caught:
        RedisStoreClient(fakeredis.FakeAsyncRedis(decode_responses=True), "ns")
    assert str(caught.value) == (
        "the Redis client must be built with decode_responses=False: GCS values are bytes"
    )


def test_unreachable_redis_raises_storage_unavailable_naming_the_address(run):
    port = closed_port()

    async def body():
        loop = asyncio.get_running_loop()
        store = RedisStoreClient.from_url(f"redis://127.0.0.1:{port}/0", "uid-1")
        expected = f"GCS storage: Redis at 127.0.0.1:{port}/0 is unreachable (ConnectionError)"
        for call in (store.health_check(), store.put("NODE", "n", b"x"), store.get_all("NODE"),
                     store.get_next_job_id(), store.delete_namespace()):
            with pytest.raises(StorageUnavailable) as caught:
                await call
            assert str(caught.value) == expected
        assert loop.time() == 0.0
        await store.close()

    run(body)


def test_password_in_the_url_never_reaches_a_message(run):
    port = closed_port()

    async def body():
        store = RedisStoreClient.from_url(f"redis://:s3cret@127.0.0.1:{port}/2", "uid-1")
        assert store.address == f"127.0.0.1:{port}/2"
        with pytest.raises(StorageUnavailable) as caught:
            await store.health_check()
        assert str(caught.value) == (
            f"GCS storage: Redis at 127.0.0.1:{port}/2 is unreachable (ConnectionError)"
        )
        assert "s3cret" not in repr(store)
        await store.close()

    run(body)


def test_redact_url_keeps_host_port_and_db_only():
    assert redact_url("redis://:pw@redis.default.svc:6380/3") == "redis.default.svc:6380/3"
    assert redact_url("redis://user:pw@10.0.0.1") == "10.0.0.1:6379/0"


def test_real_server_answers_while_virtual_time_stands_still(run, redis_url):
    async def body():
        loop = asyncio.get_running_loop()
        timer = asyncio.create_task(asyncio.sleep(0.001))
        store = RedisStoreClient.from_url(redis_url, "emu-test-frozen-time")
        try:
            await store.health_check()
            await store.batch_put("ACTOR", {f"a{i:04d}": b"x" * 64 for i in range(2000)})
            for i in range(100):
                await store.put("NODE", f"n{i}", b"y")
            assert len(await store.get_all("ACTOR")) == 2000
            # Real milliseconds passed; a 1 ms virtual timer would have fired had the clock moved.
            assert loop.time() == 0.0
            assert not timer.done()
            await timer
            assert loop.time() == 0.001
        finally:
            await store.delete_namespace()
            await store.close()

    run(body)


def test_concurrent_tasks_on_a_real_server_keep_per_key_order(run, redis_url):
    async def body():
        store = RedisStoreClient.from_url(redis_url, "emu-test-order")
        try:
            await asyncio.gather(*(store.put("KV", "k", str(i).encode()) for i in range(200)))
            assert await store.get("KV", "k") == b"199"
        finally:
            await store.delete_namespace()
            await store.close()

    run(body)
