"""A server that accepts and never answers, and one that answers something other than RESP: both
are `StorageUnavailable` naming the address, and virtual time stands still meanwhile. The
timeouts are Ray's by default and wall-clock; these tests shorten them."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from emu.backends import RedisStoreClient, StorageUnavailable
from emu.backends.redis import CONNECT_TIMEOUT, READ_TIMEOUT


class Server:
    """A loopback TCP server on its own thread: ``reply`` answers whatever a connection sends
    (a RESP status once per command; None: read forever, answer nothing)."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        while not self.stop.is_set():
            try:
                data = conn.recv(4096)
            except OSError:
                continue
            if not data:
                return
            reply = self.reply
            if reply is not None:
                if reply.startswith(b"+"):  # RESP: one answer per command (pipelined on connect)
                    reply *= max(1, sum(1 for line in data.split(b"\r\n")
                                        if line.startswith(b"*")))
                try:
                    conn.sendall(reply)
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[Server]:
    server = Server(None)
    yield server
    server.close()


@pytest.fixture
def garbage() -> Iterator[Server]:
    server = Server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    yield server
    server.close()


def test_the_defaults_are_rays():
    assert CONNECT_TIMEOUT == 60.0  # redis_db_connect_retries 120 x 500 ms
    assert READ_TIMEOUT == 30.0     # redis_db_probe_timeout_milliseconds
    with pytest.raises(ValueError, match="read_timeout must be a positive number"):
        RedisStoreClient.from_url("redis://127.0.0.1:1/0", "ns", read_timeout=-1)


def test_a_server_that_never_answers_is_unavailable_after_the_connect_timeout(run, silent):
    async def body():
        loop = asyncio.get_running_loop()
        store = RedisStoreClient.from_url(f"redis://127.0.0.1:{silent.port}/0", "uid-1",
                                          connect_timeout=0.05)
        with pytest.raises(StorageUnavailable) as caught:
            await store.health_check()
        assert str(caught.value) == (f"GCS storage: Redis at 127.0.0.1:{silent.port}/0 did not "
                                     "answer within 0.05 s (connect timeout)")
        assert loop.time() == 0.0
        with pytest.raises(StorageUnavailable):
            await store.put("NODE", "n", b"x")
        await store.close()

    run(body)


def test_a_server_that_stops_answering_is_unavailable_after_the_read_timeout(run):
    server = Server(b"+PONG\r\n")
    try:
        async def body():
            store = RedisStoreClient.from_url(f"redis://127.0.0.1:{server.port}/0", "uid-1",
                                              connect_timeout=5, read_timeout=0.05)
            await store.health_check()  # answered: connected
            server.reply = None
            with pytest.raises(StorageUnavailable, match=r"did not answer within 0\.05 s "
                                                         r"\(read timeout\)"):
                await store.health_check()
            await store.close()

        run(body)
    finally:
        server.close()


def test_a_server_that_is_not_redis_is_unavailable_naming_the_address(run, garbage):
    async def body():
        store = RedisStoreClient.from_url(f"redis://127.0.0.1:{garbage.port}/0", "uid-1",
                                          connect_timeout=5)
        with pytest.raises(StorageUnavailable) as caught:
            await store.health_check()
        message = str(caught.value)
        assert message.startswith(f"GCS storage: the server at 127.0.0.1:{garbage.port}/0 is "
                                  "not a Redis server ("), message
        assert caught.value.__cause__ is not None
        await store.close()

    run(body)
