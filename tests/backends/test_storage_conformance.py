"""The `GcsStorage` contract, checked on every backend: memory, fakeredis, a real redis-server
(when ``EMU_REDIS_URL`` is set) and RocksDB."""

from __future__ import annotations

import asyncio

import pytest

from emu.backends import BATCH_SIZE, GcsStorage, StorageUnavailable


def test_client_is_a_gcs_storage_bound_to_its_namespace(backend):
    async def body():
        store = backend.open("864b004c-6305-42e3-ac46-adfa8eb6f752")
        assert isinstance(store, GcsStorage)
        assert store.namespace == backend.namespace_prefix + "864b004c-6305-42e3-ac46-adfa8eb6f752"

    backend.run(body)


def test_get_of_missing_key_or_table_is_none(backend):
    async def body():
        store = backend.open()
        assert await store.get("ACTOR", "nope") is None
        await store.put("ACTOR", "a", b"1")
        assert await store.get("ACTOR", "nope") is None

    backend.run(body)


def test_put_returns_true_only_when_the_key_is_new(backend):
    async def body():
        store = backend.open()
        assert await store.put("NODE", "n1", b"v1") is True
        assert await store.put("NODE", "n1", b"v2") is False
        assert await store.get("NODE", "n1") == b"v2"

    backend.run(body)


def test_put_without_overwrite_keeps_the_existing_value(backend):
    async def body():
        store = backend.open()
        assert await store.put("KV", "k", b"first", overwrite=False) is True
        assert await store.put("KV", "k", b"second", overwrite=False) is False
        assert await store.get("KV", "k") == b"first"

    backend.run(body)


def test_values_are_binary_safe_including_empty(backend):
    async def body():
        store = backend.open()
        every_byte = bytes(range(256))
        await store.put("ACTOR", "bin", every_byte)
        await store.put("ACTOR", "empty", b"")
        assert await store.get("ACTOR", "bin") == every_byte
        assert await store.get("ACTOR", "empty") == b""
        assert await store.exists("ACTOR", "empty") is True
        assert await store.get_all("ACTOR") == {"bin": every_byte, "empty": b""}

    backend.run(body)


def test_get_all_returns_every_entry_sorted_by_key(backend):
    async def body():
        store = backend.open()
        keys = [f"actor-{i:05d}" for i in range(2 * BATCH_SIZE + 500)]
        shuffled = keys[1::2] + keys[::2]
        for key in shuffled[:10]:
            await store.put("ACTOR", key, key.encode())
        await store.batch_put("ACTOR", {key: key.encode() for key in shuffled[10:]})
        await store.put("ACTOR", "Zed", b"z")
        await store.put("ACTOR", "é-unicode", b"u")
        everything = await store.get_all("ACTOR")
        assert list(everything) == sorted([*keys, "Zed", "é-unicode"])
        assert everything["actor-01234"] == b"actor-01234"

    backend.run(body)


def test_tables_are_independent(backend):
    async def body():
        store = backend.open()
        await store.put("JOB", "same", b"job")
        await store.put("ACTOR", "same", b"actor")
        assert await store.get("JOB", "same") == b"job"
        assert await store.get_all("ACTOR") == {"same": b"actor"}
        assert await store.delete("JOB", "same") is True
        assert await store.get("ACTOR", "same") == b"actor"
        assert await store.get_all("PLACEMENT_GROUP") == {}

    backend.run(body)


def test_multi_get_returns_existing_keys_sorted_and_leaves_out_missing(backend):
    async def body():
        store = backend.open()
        await store.batch_put("WORKERS", {f"w{i:04d}": str(i).encode() for i in range(1500)})
        wanted = ["w1499", "missing", "w0000", "w1000", "w0999", "w0000"]
        assert await store.multi_get("WORKERS", wanted) == {
            "w0000": b"0", "w0999": b"999", "w1000": b"1000", "w1499": b"1499",
        }
        assert await store.multi_get("WORKERS", []) == {}
        assert await store.multi_get("NO_SUCH_TABLE", ["w0000"]) == {}

    backend.run(body)


def test_keys_are_sorted_and_filtered_by_literal_prefix(backend):
    async def body():
        store = backend.open()
        tricky = ["a-[1]", "a-[1]*x", "a-?b", "a-*", "a-^\\", "a-1", "ab", "b", "@namespace_job:x"]
        await store.batch_put("KV", {key: b"" for key in tricky})
        assert await store.keys("KV") == sorted(tricky)
        assert await store.keys("KV", "a-") == ["a-*", "a-1", "a-?b", "a-[1]", "a-[1]*x", "a-^\\"]
        assert await store.keys("KV", "a-[1]") == ["a-[1]", "a-[1]*x"]
        assert await store.keys("KV", "a-*") == ["a-*"]
        assert await store.keys("KV", "a-^\\") == ["a-^\\"]
        assert await store.keys("KV", "@namespace_job:") == ["@namespace_job:x"]
        assert await store.keys("KV", "zzz") == []
        assert await store.keys("EMPTY") == []

    backend.run(body)


def test_exists_and_delete_report_whether_the_key_was_there(backend):
    async def body():
        store = backend.open()
        await store.put("NODE", "n1", b"x")
        assert await store.exists("NODE", "n1") is True
        assert await store.exists("NODE", "n2") is False
        assert await store.delete("NODE", "n1") is True
        assert await store.delete("NODE", "n1") is False
        assert await store.exists("NODE", "n1") is False
        assert await store.delete("NO_SUCH_TABLE", "n1") is False

    backend.run(body)


def test_batch_put_counts_new_keys_and_overwrites_old_ones(backend):
    async def body():
        store = backend.open()
        assert await store.batch_put("JOB", {"j1": b"a", "j2": b"b"}) == 2
        assert await store.batch_put("JOB", {"j2": b"B", "j3": b"c"}) == 1
        assert await store.get_all("JOB") == {"j1": b"a", "j2": b"B", "j3": b"c"}
        assert await store.batch_put("JOB", {}) == 0

    backend.run(body)


def test_batch_delete_counts_only_keys_that_existed_once_each(backend):
    async def body():
        store = backend.open()
        await store.batch_put("ACTOR", {f"a{i:04d}": b"x" for i in range(2100)})
        doomed = [f"a{i:04d}" for i in range(0, 2100, 2)]
        assert await store.batch_delete("ACTOR", [*doomed, "a0000", "nope"]) == 1050
        assert await store.keys("ACTOR", "a000") == ["a0001", "a0003", "a0005", "a0007", "a0009"]
        assert len(await store.get_all("ACTOR")) == 1050
        assert await store.batch_delete("ACTOR", []) == 0
        assert await store.batch_delete("NO_SUCH_TABLE", ["a0001"]) == 0

    backend.run(body)


def test_job_counter_starts_at_one_and_counts_up(backend):
    async def body():
        store = backend.open()
        assert [await store.get_next_job_id() for _ in range(3)] == [1, 2, 3]

    backend.run(body)


def test_delete_namespace_removes_every_table_and_the_job_counter(backend):
    async def body():
        store = backend.open()
        await store.put("JOB", "j", b"1")
        await store.put("ACTOR", "a", b"1")
        await store.put("KV", "k", b"1")
        await store.put("NODE", "n", b"1")
        await store.delete("NODE", "n")  # an emptied table is no longer there to delete
        await store.get_next_job_id()
        await store.get_next_job_id()
        assert await store.delete_namespace() == 4
        assert await store.get_all("JOB") == {}
        assert await store.get_all("ACTOR") == {}
        assert await store.keys("KV") == []
        assert await store.get_next_job_id() == 1
        await store.put("JOB", "j", b"again")
        assert await store.get("JOB", "j") == b"again"

    backend.run(body)


def test_delete_namespace_of_an_empty_namespace_removes_nothing(backend):
    async def body():
        store = backend.open()
        assert await store.delete_namespace() == 0

    backend.run(body)


def test_health_check_passes_on_an_open_store(backend):
    async def body():
        store = backend.open()
        await store.health_check()
        await store.put("KV", "k", b"v")
        await store.health_check()

    backend.run(body)


def test_closed_store_raises_storage_unavailable_and_close_is_idempotent(backend):
    async def body():
        store = backend.open()
        await store.put("KV", "k", b"v")
        await store.close()
        await store.close()
        for call in (store.health_check(), store.get("KV", "k"), store.put("KV", "k", b"w"),
                     store.get_next_job_id(), store.delete_namespace()):
            with pytest.raises(StorageUnavailable) as caught:
                await call
            assert str(caught.value) == backend.closed_message(store)

    backend.run(body)


def test_storage_calls_take_no_virtual_time(backend):
    async def body():
        loop = asyncio.get_running_loop()
        sleeper = asyncio.create_task(asyncio.sleep(5))
        store = backend.open()
        await store.batch_put("ACTOR", {f"a{i}": b"x" * 100 for i in range(300)})
        for i in range(50):
            await store.put("NODE", f"n{i}", b"y")
            await store.get("NODE", f"n{i}")
        await store.get_all("ACTOR")
        await store.get_next_job_id()
        assert loop.time() == 0.0
        assert not sleeper.done()
        await sleeper
        assert loop.time() == 5.0

    backend.run(body)


def test_reopened_store_keeps_tables_and_job_counter_only_if_durable(backend):
    """A new GCS (a new client on the same storage) reloads what the old one wrote — except in
    memory, where the tables died with the old GCS process."""

    async def first_gcs():
        store = backend.open(holder="head-1")
        await store.batch_put("ACTOR", {"a1": b"alive", "a2": b"dead"})
        await store.put("JOB", "01000000", b"job-1")
        assert await store.get_next_job_id() == 1
        await store.close()

    async def second_gcs():
        store = backend.open(holder="head-2")
        if backend.durable:
            assert await store.get_all("ACTOR") == {"a1": b"alive", "a2": b"dead"}
            assert await store.get("JOB", "01000000") == b"job-1"
            assert await store.get_next_job_id() == 2
        else:
            assert await store.get_all("ACTOR") == {}
            assert await store.get("JOB", "01000000") is None
            assert await store.get_next_job_id() == 1

    backend.run(first_gcs)
    backend.run(second_gcs)
