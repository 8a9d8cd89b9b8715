"""In-memory backend specifics: the tables die with the object (the GCS process) that holds them."""

from __future__ import annotations

from emu.backends import MemoryStoreClient


def test_a_new_instance_in_the_same_namespace_starts_empty_with_job_ids_from_one(run):
    async def body():
        old = MemoryStoreClient("uid-1")
        await old.put("ACTOR", "a1", b"alive")
        assert await old.get_next_job_id() == 1
        await old.close()
        new = MemoryStoreClient("uid-1")
        assert await new.get_all("ACTOR") == {}
        assert await new.get_next_job_id() == 1

    run(body)


def test_instances_never_share_tables(run):
    async def body():
        first, second = MemoryStoreClient("uid-1"), MemoryStoreClient("uid-1")
        await first.put("NODE", "n", b"x")
        assert await second.exists("NODE", "n") is False

    run(body)


def test_stored_value_is_a_copy_of_what_was_put(run):
    async def body():
        store = MemoryStoreClient("uid-1")
        value = bytearray(b"abc")
        await store.put("KV", "k", value)  # type: ignore[arg-type]
        value[0] = ord("z")
        assert await store.get("KV", "k") == b"abc"

    run(body)
