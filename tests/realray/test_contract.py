"""Contract tests: the same client operations against the real Ray (``ray start --head`` with
Redis GCS FT on a real redis-server) and against the fake, compared field by field.

Each observation must be equal on both sides, except the differences listed in `KNOWN`, whose
real and fake values are both asserted (so a change on either side fails here and the list in
docs/deviations.md, "Compared with real Ray", is updated with it). Observations named
``measured:...`` are durations kept for a look, not compared; ``REALRAY_DUMP=<file>`` writes
everything the real side showed to that file.
"""

from __future__ import annotations

import asyncio
import os
import pprint
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from raytestworld import HEAD_SVC, RayTestWorld
from realhead import RealHead
from sequences import LOSSES, MEASURED, fail, head_loss, head_restart, jobs_api, redis_layout

from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.world import World
from emu.ray import faults

pytestmark = pytest.mark.realray

DASH = f"{HEAD_SVC}:8265"

#: Observations that differ (docs/deviations.md, "Compared with real Ray"): name → (real, fake).
KNOWN: dict[str, tuple[Any, Any]] = {
    # The real GCS keys its tables by binary ids, the fake by hex strings.
    "layout.id_lengths": ({"ACTOR": [16], "JOB": [4], "NODE": [28], "WORKERS": [28]},
                          {"ACTOR": [32], "JOB": [8], "NODE": [56], "WORKERS": [28]}),
    # A real job is PENDING for 1-2.4 s (the supervisor actor's worker starts); the fake's
    # default JobBehaviour.start_delay is 0, so polling sees RUNNING first.
    "jobs.s1_statuses": (["PENDING", "RUNNING", "SUCCEEDED"], ["RUNNING", "SUCCEEDED"]),
    "jobs.s1_messages": ({"PENDING": "Job has not started yet.",
                          "RUNNING": "Job is currently running.",
                          "SUCCEEDED": "Job finished successfully."},
                         {"RUNNING": "Job is currently running.",
                          "SUCCEEDED": "Job finished successfully."}),
}


def _keys(url: str, namespace: str) -> dict[str, tuple[str, list[bytes]]]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        out: dict[str, tuple[str, list[bytes]]] = {}
        prefix = f"RAY{namespace}@"
        for raw in client.scan_iter(match=f"{prefix}*"):
            name = raw.decode()[len(prefix):]
            kind = client.type(raw).decode()
            fields = sorted(client.hkeys(raw)) if kind == "hash" else []
            out[name] = (kind, fields)
        return out
    finally:
        client.close()


class RealSide:
    name = "real"

    def __init__(self, head: RealHead, url: str) -> None:
        self.head = head
        self.url = url
        # No kept-alive connections: a restarted head listens on the same port, and a connection
        # to the old dashboard would be reused and dropped ("Server disconnected").
        self.client = httpx.AsyncClient(base_url=head.dashboard, timeout=180,
                                        limits=httpx.Limits(max_keepalive_connections=0))

    def where(self) -> str:
        return self.head.logs_hint()

    def clock(self) -> float:
        return time.monotonic()

    async def http(self, method: str, path: str, body: Any = None) -> tuple[int, str]:
        try:
            r = await self.client.request(method, path, json=body)
        except httpx.HTTPError as err:
            raise fail(self, f"{method} {path}: {type(err).__name__} {err}") from err
        return r.status_code, r.text

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def restart_head(self) -> None:
        await asyncio.to_thread(self.head.stop)
        await asyncio.to_thread(self.head.start)

    async def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        self.head.gcs().internal_kv_put(key.encode(), value, True, namespace.encode(),
                                        timeout=30)

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        got: bytes | None = self.head.gcs().internal_kv_get(key.encode(), namespace.encode(),
                                                            timeout=30)
        return got

    def redis_keys(self) -> dict[str, tuple[str, list[bytes]]]:
        return _keys(self.url, self.head.namespace)

    async def nodes(self) -> list[tuple[str, bool, str]]:
        from ray.core.generated.gcs_pb2 import GcsNodeInfo

        infos = self.head.gcs().get_all_node_info(timeout=30)
        return sorted((GcsNodeInfo.GcsNodeState.Name(n.state), bool(n.is_head_node),
                       n.death_info.reason_message) for n in infos.values())

    async def kill(self, how: str) -> None:
        if how == "head-KILL":
            self.head.kill_all()
            return
        pids = self.head.pids_of("gcs_server")
        if len(pids) != 1:
            raise fail(self, f"{how}: wanted one gcs_server, found pids {pids}")
        os.kill(pids[0], signal.SIGKILL if how == "gcs-KILL" else signal.SIGTERM)

    async def head_exit(self) -> int | None:
        return self.head.exit_code()

    async def start_again(self) -> None:
        """What is left of the lost head is stopped (by pid), then a new head starts."""
        await asyncio.to_thread(self.head.stop)
        await asyncio.to_thread(self.head.start)


class FakeSide:
    name = "fake"

    def __init__(self, rw: RayTestWorld, url: str, namespace: str) -> None:
        self.rw = rw
        self.url = url
        self.namespace = namespace
        rw.config.redis_urls["redis:6379"] = url
        self.head = rw.head("raycluster-head-0", extra="--num-cpus=1", env={
            "RAY_REDIS_ADDRESS": "redis:6379", "RAY_external_storage_namespace": namespace})

    def where(self) -> str:
        return f"the fake world at virtual t={self.clock():g}s"

    def clock(self) -> float:
        return asyncio.get_running_loop().time()

    async def http(self, method: str, path: str, body: Any = None) -> tuple[int, str]:
        answer = await self.rw.http(DASH, method, path, body)
        return answer.status, answer.body

    async def sleep(self, seconds: float) -> None:
        await self.rw.sleep(seconds)

    async def restart_head(self) -> None:
        """The head container stops as ``ray start`` does on SIGTERM (its raylet unregisters the
        node), about as long as that takes, and starts again."""
        assert self.head.ctx is not None
        for handler in self.head.ctx.sigterm_handlers:
            await handler()
        self.head.crash()
        await self.rw.sleep(10)
        self.head.start()
        await self.head.wait_ready()

    async def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        await self.rw.driver().gcs.kv_put(namespace, key, value)

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        return await self.rw.driver().gcs.kv_get(namespace, key)

    def redis_keys(self) -> dict[str, tuple[str, list[bytes]]]:
        return _keys(self.url, self.namespace)

    async def nodes(self) -> list[tuple[str, bool, str]]:
        return sorted((n["state"], bool(n.get("is_head")), n.get("death_reason") or "")
                      for n in await self.rw.driver().gcs.nodes())

    async def kill(self, how: str) -> None:
        if how == "head-KILL":
            self.head.crash()
        else:
            faults.kill_gcs(self.rw.world, self.head.name, how.removeprefix("gcs-"))

    async def head_exit(self) -> int | None:
        assert self.head.process is not None
        return None if self.head.alive else self.head.process.exit_code

    async def start_again(self) -> None:
        """The head container starts again in place (same address, same Redis)."""
        self.head.start()
        await self.head.wait_ready()


async def _observe(side: Any) -> dict[str, Any]:
    out = {"jobs": await jobs_api(side)}
    out["layout"] = redis_layout(side)
    out["restart"] = await head_restart(side)
    out["loss"] = {how: await head_loss(side, how) for how in LOSSES}
    return out


@pytest.fixture(scope="module")
def real(real_head: RealHead, redis_url: str) -> dict[str, Any]:
    try:
        observed = asyncio.run(_observe(RealSide(real_head, redis_url)))
        dump = os.environ.get("REALRAY_DUMP")
        if dump:  # what the real side showed, measurements included, for a look
            Path(dump).write_text(pprint.pformat(observed, width=100) + "\n")
        return observed
    except BaseException:
        real_head.keep = True  # its logs, named in the failure, stay for a look
        raise


@pytest.fixture(scope="module")
def fake(redis_url: str) -> dict[str, Any]:
    namespace = f"realray-fake-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {}

    async def main() -> None:
        world = World(seed=0)
        rw = RayTestWorld(world, Path(os.environ.get("TMPDIR", "/tmp")))
        try:
            side = FakeSide(rw, redis_url, namespace)
            await side.head.wait_ready()
            result.update(await _observe(side))
        finally:
            world.processes.crash_all()

    try:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            runner.run(main())
    finally:
        import redis

        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"RAY{namespace}@*"))
        if keys:
            client.delete(*keys)
        client.close()
    return result


def _compare(real: dict[str, Any], fake: dict[str, Any], prefix: str) -> None:
    differ = {}
    for name in sorted(set(real) | set(fake)):
        key = f"{prefix}.{name}"
        r, f = real.get(name), fake.get(name)
        if name.startswith(MEASURED):
            continue
        if key in KNOWN:
            assert (r, f) == KNOWN[key], f"{key}: the listed difference changed"
        elif r != f:
            differ[key] = {"real": r, "fake": f}
    assert not differ, "\n" + pprint.pformat(differ, width=100)


def test_jobs_api_answers_as_real_ray(real: dict[str, Any], fake: dict[str, Any]) -> None:
    _compare(real["jobs"], fake["jobs"], "jobs")


def test_redis_keys_and_types_as_real_gcs(real: dict[str, Any], fake: dict[str, Any]) -> None:
    _compare(real["layout"], fake["layout"], "layout")


def test_head_restart_on_redis_as_real_ray(real: dict[str, Any], fake: dict[str, Any]) -> None:
    _compare(real["restart"], fake["restart"], "restart")


@pytest.mark.parametrize("how", LOSSES)
def test_head_loss_as_real_ray(real: dict[str, Any], fake: dict[str, Any], how: str) -> None:
    _compare(real["loss"][how], fake["loss"][how], f"loss.{how}")
