"""Redis as a workload: a Pod running a ``redis`` image serves a fakeredis-backed Redis on the
emulated network, and a redis-py client that reaches it through that network.

KubeRay's external-Redis samples deploy Redis themselves (a Deployment, a Service, a password), so
Redis is a process in the world like any other: a network partition or an outage reaches it, and
its data lives and dies with its process — unless its data directory is on a mounted volume, where
it keeps a snapshot (written at most once per virtual second, like ``appendfsync everysec``; a
crash loses at most the last second).

The server (`redis_program`):
- listens on ``<pod ip>:6379`` (``--port`` changes it);
- password: ``--requirepass X`` in the command line, else ``requirepass`` in a config file named on
  the command line when that file is on a mounted volume, else ``REDIS_PASSWORD`` in the env;
- data directory: ``--dir``, else the config file's ``dir``, else ``/data`` (the official image's).

The client (`NetworkRedis`) is a ``redis.asyncio.Redis`` whose commands travel as
``{"args": [...], "password": ..., "username": ...}`` through `ContainerContext.call`; unreachable
→ redis-py's ``ConnectionError``/``TimeoutError``, so `emu.backends.RedisStoreClient` reports
`StorageUnavailable` exactly as with a real server. Credentials travel with every command: the
network has no connections, and a real client authenticates each new connection anyway.
"""

from __future__ import annotations

import asyncio
import pickle
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fakeredis
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from emu.kernel.network import CallInfo, ConnectionRefused, ConnectionReset, Timeout
from emu.kernel.programs import ContainerContext

from .net import Caller

REDIS_PORT = 6379
SNAPSHOT_FILE = "emu-redis-snapshot.pickle"
#: How often a dirty dataset is written to the volume (``appendfsync everysec``).
SNAPSHOT_PERIOD = 1.0

_READ_ONLY = frozenset({
    "PING", "GET", "MGET", "HGET", "HMGET", "HGETALL", "HSCAN", "HEXISTS", "HKEYS", "HLEN",
    "SCAN", "KEYS", "EXISTS", "TYPE", "TTL", "PTTL", "DBSIZE", "INFO", "ECHO", "AUTH", "SELECT",
    "CLIENT", "HELLO", "SMEMBERS", "LRANGE", "ZRANGE", "STRLEN", "CONFIG",
})


def resolve_in_volumes(ctx: ContainerContext, path: str) -> Path | None:
    """The host directory for container path ``path`` if a mounted volume covers it (the
    deepest mount's)."""
    found = ctx.host_paths(path)
    return found[0] if found else None


class RedisServer:
    """One Redis server process's data, commands and snapshots."""

    def __init__(self, ctx: ContainerContext, password: str | None, data_dir: Path | None) -> None:
        self.ctx = ctx
        self.password = password or None
        self.data_dir = data_dir
        self.server = fakeredis.FakeServer()
        self._raw = fakeredis.FakeAsyncRedis(server=self.server, decode_responses=False)
        self._raw.response_callbacks = {}  # answer raw replies; the client parses them
        self._dirty = False
        self._flush_timer: asyncio.TimerHandle | None = None
        self.commands = 0

    @property
    def snapshot_path(self) -> Path | None:
        return self.data_dir / SNAPSHOT_FILE if self.data_dir is not None else None

    # -- persistence -----------------------------------------------------------------------------

    async def load_snapshot(self) -> int:
        """Load the volume's snapshot, if any; how many keys."""
        path = self.snapshot_path
        if path is None or not path.exists():
            return 0
        data: dict[bytes, tuple[str, Any]] = pickle.loads(path.read_bytes())
        for key, (kind, value) in data.items():
            if kind == "string":
                await self._raw.execute_command(b"SET", key, value)
            elif kind == "hash" and value:
                flat = [item for pair in value for item in pair]
                await self._raw.execute_command(b"HSET", key, *flat)
            elif kind == "list" and value:
                await self._raw.execute_command(b"RPUSH", key, *value)
            elif kind == "set" and value:
                await self._raw.execute_command(b"SADD", key, *value)
        return len(data)

    async def _snapshot(self) -> None:
        path = self.snapshot_path
        if path is None:
            return
        self._dirty = False
        data: dict[bytes, tuple[str, Any]] = {}
        cursor = b"0"
        keys: list[bytes] = []
        while True:
            cursor, page = await self._raw.execute_command(b"SCAN", cursor, b"COUNT", b"1000")
            keys.extend(page)
            if cursor in (b"0", 0):
                break
        for key in sorted(set(keys)):
            kind = (await self._raw.execute_command(b"TYPE", key)).decode()
            if kind == "string":
                data[key] = (kind, await self._raw.execute_command(b"GET", key))
            elif kind == "hash":
                raw = await self._raw.execute_command(b"HGETALL", key)
                pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2],
                                                                      strict=True)
                data[key] = (kind, sorted(pairs))
            elif kind == "list":
                data[key] = (kind, await self._raw.execute_command(b"LRANGE", key, 0, -1))
            elif kind == "set":
                data[key] = (kind, sorted(await self._raw.execute_command(b"SMEMBERS", key)))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(data))
        tmp.replace(path)

    def _mark_dirty(self) -> None:
        if self.data_dir is None or self._dirty:
            return
        self._dirty = True
        loop = asyncio.get_running_loop()

        def flush() -> None:
            if self.ctx.process.alive:
                self.ctx.process.spawn(self._snapshot(), name="redis:snapshot")

        self._flush_timer = loop.call_later(SNAPSHOT_PERIOD, flush)

    def stop(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()

    # -- commands --------------------------------------------------------------------------------

    def _check_auth(self, password: str | None) -> None:
        if self.password is None:
            if password:
                raise ResponseError(
                    "AUTH <password> called without any password configured for the default "
                    "user. Are you sure your configuration is correct?")
            return
        if not password:
            raise AuthenticationError("NOAUTH Authentication required.")
        if password != self.password:
            raise AuthenticationError(
                "WRONGPASS invalid username-password pair or user is disabled.")

    async def handle(self, payload: Any, info: CallInfo) -> Any:
        args = [a if isinstance(a, bytes) else str(a).encode() for a in payload["args"]]
        self._check_auth(payload.get("password"))
        name = args[0].decode().upper()
        self.commands += 1
        result = await self._raw.execute_command(*args)
        if name not in _READ_ONLY:
            self._mark_dirty()
        return result


def parse_redis_command_line(command_line: str) -> dict[str, str]:
    """``redis-server [conf] --opt value ...`` → options (``conf`` under the key ``conf``)."""
    try:
        words = shlex.split(command_line)
    except ValueError:
        words = command_line.split()
    opts: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key = word[2:]
            if "=" in key:
                key, value = key.split("=", 1)
            elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                value = words[i + 1]
                i += 1
            else:
                value = ""
            opts[key.lower()] = value
        elif word.endswith(".conf"):
            opts["conf"] = word
        i += 1
    return opts


def read_redis_conf(text: str) -> dict[str, str]:
    opts: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        opts[key.lower()] = value.strip().strip('"')
    return opts


async def redis_program(ctx: ContainerContext, records: Any = None) -> int:
    """The ``redis`` image: a Redis server at the Pod's address until the container is killed.

    ``records`` (a `RayRecords`) learns the server under the Pod's name, for tests."""
    opts = parse_redis_command_line(ctx.command_line)
    conf_path = opts.get("conf")
    if conf_path:
        host = resolve_in_volumes(ctx, conf_path)
        if host is not None and host.is_file():
            opts = {**read_redis_conf(host.read_text()), **opts}
    password = opts.get("requirepass") or ctx.env.get("REDIS_PASSWORD") or None
    port = int(opts.get("port") or REDIS_PORT)
    data_dir = resolve_in_volumes(ctx, opts.get("dir") or "/data")
    server = RedisServer(ctx, password, data_dir)
    loaded = await server.load_snapshot()
    ctx.listen(port, server.handle)
    ctx.process.on_exit(lambda _p: server.stop())
    if records is not None:
        records.redis_servers[ctx.pod_name or ctx.process.name] = server
    ctx.process.log("redis_started", port=port, password=password is not None,
                    persistent=data_dir is not None, loaded_keys=loaded)
    ctx.set_ready(True)
    await asyncio.Event().wait()
    return 0


# -- client ----------------------------------------------------------------------------------------


class NetworkRedis(aioredis.Redis):
    """A ``redis.asyncio.Redis`` whose commands go through the emulated network.

    Supports single commands (everything `emu.backends.RedisStoreClient` uses), not pipelines,
    transactions or pub/sub. Build it with ``decode_responses=False`` semantics (always).
    """

    def __init__(self, call: Caller, address: str, *, password: str | None = None,
                 username: str | None = None, timeout: float | None = None) -> None:
        super().__init__(decode_responses=False)
        self._emu_call = call
        self._emu_address = address
        self._emu_password = password or None
        self._emu_username = username or None
        self._emu_timeout = timeout

    def __repr__(self) -> str:
        return f"NetworkRedis({self._emu_address!r})"

    @property
    def address(self) -> str:
        return self._emu_address

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        encoder = self.get_encoder()
        wire = [encoder.encode(a) for a in args]
        command = str(args[0]).upper()
        payload = {"args": wire, "password": self._emu_password, "username": self._emu_username}
        try:
            raw = await self._emu_call(self._emu_address, payload, verb=command, name="redis",
                                       timeout=self._emu_timeout)
        except (ConnectionRefused, ConnectionReset) as err:
            raise RedisConnectionError(f"Error connecting to {self._emu_address}: {err}") from err
        except Timeout as err:
            raise RedisTimeoutError(f"Timeout talking to {self._emu_address}: {err}") from err
        options.pop("keys", None)
        options.pop("NEVER_DECODE", None)
        options.pop("EMPTY_RESPONSE", None)
        if isinstance(raw, dict):
            return raw
        callback: Callable[..., Any] | None = self.response_callbacks.get(args[0]) \
            or self.response_callbacks.get(command)
        if callback is None:
            return raw
        result = callback(raw, **options)
        if isinstance(result, Awaitable):
            return await result
        return result


def parse_redis_address(spec: str) -> tuple[str, bool, str | None, str | None]:
    """``RAY_REDIS_ADDRESS`` (first of a comma list; ``redis://``/``rediss://`` optional) →
    ``(host:port, tls, username, password)`` (credentials only when the URL carries them)."""
    first = spec.split(",", 1)[0].strip()
    if "://" not in first:
        first = "redis://" + first
    url = urlsplit(first)
    host = url.hostname or "localhost"
    port = url.port or REDIS_PORT
    return f"{host}:{port}", url.scheme == "rediss", url.username or None, url.password or None
