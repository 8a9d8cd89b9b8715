"""Contract tests for actors: detached and non-detached actors of job drivers, their death causes,
the state API's ``/api/v0/actors`` answers and a detached actor across a head restart on Redis,
the same steps on the real Ray and on the fake (`actor_sequences`), compared observation by
observation.

A module of its own, so its real head is fresh (the state API's counts include every actor the
cluster ever had). Differences kept on purpose are listed in `KNOWN` with both values, as in
``test_contract.py``; ``REALRAY_DUMP_ACTORS=<file>`` writes what the real side showed.
"""

from __future__ import annotations

import asyncio
import os
import pprint
import uuid
from pathlib import Path
from typing import Any

import pytest
from actor_sequences import FAKE_PROGRAMS, actors_api
from raytestworld import RayTestWorld
from realhead import RealHead
from test_contract import FakeSide, RealSide

from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.world import World

pytestmark = pytest.mark.realray

#: Observations that differ on purpose (docs/deviations.md): name → (real, fake).
KNOWN: dict[str, tuple[Any, Any]] = {}


@pytest.fixture(scope="module")
def real(real_head: RealHead, redis_url: str) -> dict[str, Any]:
    try:
        observed = asyncio.run(actors_api(RealSide(real_head, redis_url)))
        dump = os.environ.get("REALRAY_DUMP_ACTORS")
        if dump:
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
        for entrypoint, program in FAKE_PROGRAMS.items():
            rw.config.entrypoint(entrypoint, program)
        try:
            side = FakeSide(rw, redis_url, namespace)
            await side.head.wait_ready()
            result.update(await actors_api(side))
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


def _observation_names() -> list[str]:
    from actor_sequences import QUERIES

    return ["list_after_a", "detail_after_a", "a_printed", "b_found_keeper", "victim",
            "states_after_b", *(f"query:{q}" for q in QUERIES), "query:bad_predicate",
            "d_second_ping_failed", "fragile", "keeper_after_restart", "c_found_keeper",
            "states_after_restart"]


@pytest.mark.parametrize("name", _observation_names())
def test_actors_as_real_ray(real: dict[str, Any], fake: dict[str, Any], name: str) -> None:
    assert name in real and name in fake, f"{name} was not observed"
    if name in KNOWN:
        assert (real[name], fake[name]) == KNOWN[name], f"{name}: the listed difference changed"
        return
    assert real[name] == fake[name], "\n" + pprint.pformat(
        {"real": real[name], "fake": fake[name]}, width=100)


def test_every_observation_is_compared(real: dict[str, Any], fake: dict[str, Any]) -> None:
    from sequences import MEASURED

    def compared(seen: dict[str, Any]) -> list[str]:
        return sorted(k for k in seen if not k.startswith(MEASURED))

    assert compared(real) == compared(fake) == sorted(_observation_names())
