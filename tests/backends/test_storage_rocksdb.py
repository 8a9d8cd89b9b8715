"""RocksDB backend specifics: single writer, layout on disk, durability across close and reopen."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from rocksdict import Options, Rdict

from emu.backends import EMBEDDED_STORAGE_FEATURE_GATE, RocksDBStoreClient, StorageLocked
from emu.backends.rocksdb import holder_of


def test_feature_gate_name_is_kuberays():
    assert EMBEDDED_STORAGE_FEATURE_GATE == "GCSFaultToleranceEmbeddedStorage"


def test_second_writer_on_the_same_path_gets_storage_locked_naming_path_and_holder(run, tmp_path):
    path = tmp_path / "gcs"

    async def body():
        first = RocksDBStoreClient(path, "uid-1", holder="pod default/rc-head-abc (gcs_server)")
        with pytest.raises(StorageLocked) as caught:
            RocksDBStoreClient(path, "uid-1", holder="pod default/rc-head-def (gcs_server)")
        assert str(caught.value) == (
            f"RocksDB GCS storage at {path} is locked: pod default/rc-head-abc (gcs_server) holds "
            "it; a RocksDB directory has one writer at a time, so pod default/rc-head-def "
            "(gcs_server) cannot open it"
        )
        # The refused opener changed nothing: the holder still writes.
        assert await first.put("NODE", "n", b"x") is True
        await first.close()

    run(body)


def test_same_directory_through_another_spelling_is_still_locked(run, tmp_path):
    (tmp_path / "gcs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "gcs")

    async def body():
        first = RocksDBStoreClient(tmp_path / "gcs", "uid-1", holder="head-1")
        with pytest.raises(StorageLocked):
            RocksDBStoreClient(tmp_path / "link", "uid-1", holder="head-2")
        await first.close()

    run(body)


def test_close_releases_the_lock_for_the_next_gcs(run, tmp_path):
    path = tmp_path / "gcs"

    async def body():
        first = RocksDBStoreClient(path, "uid-1", holder="head-1")
        assert holder_of(path) == "head-1"
        await first.close()
        assert holder_of(path) is None
        second = RocksDBStoreClient(path, "uid-1", holder="head-2")
        assert holder_of(path) == "head-2"
        await second.close()

    run(body)


def test_writer_in_another_os_process_gets_storage_locked(run, tmp_path):
    path = tmp_path / "gcs"
    holder_script = textwrap.dedent(f"""
        import sys
        from rocksdict import Rdict
        db = Rdict({str(path)!r})
        print("ready", flush=True)
        sys.stdin.read()
        db.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder_script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"

        async def body():
            with pytest.raises(StorageLocked) as caught:
                RocksDBStoreClient(path, "uid-1", holder="head-2")
            assert str(caught.value) == (
                f"RocksDB GCS storage at {path} is locked by another process (its LOCK file is "
                "held); a RocksDB directory has one writer at a time, so head-2 cannot open it"
            )
            assert holder_of(path) is None

        run(body)
    finally:
        proc.communicate(input="", timeout=60)
    assert proc.returncode == 0


def test_writer_outside_the_registry_in_this_process_gets_storage_locked(run, tmp_path):
    path = tmp_path / "gcs"
    raw = Rdict(str(path))
    try:

        async def body():
            with pytest.raises(StorageLocked) as caught:
                RocksDBStoreClient(path, "uid-1", holder="head-2")
            assert str(caught.value) == (
                f"RocksDB GCS storage at {path} is locked in this process (its LOCK file is "
                "held); a RocksDB directory has one writer at a time, so head-2 cannot open it"
            )

        run(body)
    finally:
        raw.close()


def test_tables_and_job_counter_survive_close_and_reopen(run, tmp_path):
    path = tmp_path / "gcs"

    async def first_gcs():
        store = RocksDBStoreClient(path, "uid-1")
        await store.batch_put("ACTOR", {"a2": b"two", "a1": b"one"})
        await store.put("PLACEMENT_GROUP", "pg", b"bundle")
        await store.put("KV", "@namespace_cluster:ray_cluster_id", b"cid")
        await store.get_next_job_id()
        await store.get_next_job_id()
        await store.close()

    async def second_gcs():
        store = RocksDBStoreClient(path, "uid-1")
        assert await store.get_all("ACTOR") == {"a1": b"one", "a2": b"two"}
        assert await store.get("PLACEMENT_GROUP", "pg") == b"bundle"
        assert await store.keys("KV") == ["@namespace_cluster:ray_cluster_id"]
        assert await store.get_next_job_id() == 3
        await store.close()

    run(first_gcs)
    run(second_gcs)


def test_tables_are_column_families_and_the_counter_a_reserved_key(run, tmp_path):
    path = tmp_path / "gcs"

    async def body():
        store = RocksDBStoreClient(path, "uid-1")
        await store.put("NODE", "n1", b"info")
        await store.put("JOB", "j1", b"job")
        await store.get_next_job_id()
        await store.close()

    run(body)
    assert sorted(Rdict.list_cf(str(path))) == ["JOB", "NODE", "default"]
    raw_mode = Options(raw_mode=True)
    db = Rdict(str(path), options=raw_mode, column_families={"JOB": raw_mode, "NODE": raw_mode})
    try:
        assert db[b"__ray_job_counter__"] == b"1"
        assert db.get_column_family("NODE")[b"n1"] == b"info"
    finally:
        db.close()


def test_delete_namespace_drops_the_column_families(run, tmp_path):
    path = tmp_path / "gcs"

    async def body():
        store = RocksDBStoreClient(path, "uid-1")
        await store.put("NODE", "n1", b"info")
        await store.put("ACTOR", "a1", b"actor")
        assert await store.delete_namespace() == 2
        await store.close()

    run(body)
    assert Rdict.list_cf(str(path)) == ["default"]


def test_default_column_family_is_not_a_table(run, tmp_path):
    async def body():
        store = RocksDBStoreClient(tmp_path / "gcs", "uid-1")
        with pytest.raises(ValueError) as caught:
            await store.put("default", "k", b"v")
        assert str(caught.value) == "table name 'default' is RocksDB's default column family"
        await store.close()

    run(body)
