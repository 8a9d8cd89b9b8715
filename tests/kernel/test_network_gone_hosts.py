"""A gone host's address blackholes (the caller's timeout), a live host's closed port refuses."""

from __future__ import annotations

import asyncio

import pytest

from emu.kernel.network import ConnectionRefused, Timeout
from emu.kernel.world import World


async def _world() -> tuple[World, object]:
    world = World()

    async def handler(payload, info):
        return payload

    async def idle(proc):
        await asyncio.Event().wait()

    server = world.start_process("pod-a", idle)
    world.network.register("10.244.1.2:8265", handler, process=server)
    client = world.start_process("operator-0", idle)
    return world, client


def test_a_gone_hosts_address_times_out_after_the_callers_timeout(run):
    async def main():
        world, client = await _world()
        world.network.unregister("10.244.1.2:8265")
        world.network.host_gone("10.244.1.2")
        with pytest.raises(Timeout, match=r"^GET 10\.244\.1\.2:8265: i/o timeout after 2s$"):
            await world.network.call(client, "10.244.1.2:8265", 1, verb="GET", timeout=2.0)
        assert world.now == 2.0
        world.network.host_back("10.244.1.2")
        with pytest.raises(ConnectionRefused):
            await world.network.call(client, "10.244.1.2:8265", 1, timeout=2.0)
        assert world.now == 2.0

    run(main)


def test_a_live_host_with_nothing_on_the_port_refuses_at_once(run):
    async def main():
        world, client = await _world()
        world.network.host_gone("10.244.1.9")
        with pytest.raises(ConnectionRefused, match="^dial 10.244.1.2:6379: connection refused$"):
            await world.network.call(client, "10.244.1.2:6379", 1, timeout=2.0)
        assert await world.network.call(client, "10.244.1.2:8265", 7) == 7
        assert world.now == 0.0

    run(main)


def test_blackholing_can_be_turned_off_for_the_older_faster_refusal(run):
    async def main():
        world, client = await _world()
        world.network.blackhole_gone_hosts = False
        world.network.unregister("10.244.1.2:8265")
        world.network.host_gone("10.244.1.2")
        with pytest.raises(ConnectionRefused):
            await world.network.call(client, "10.244.1.2:8265", 1, timeout=2.0)
        assert world.now == 0.0

    run(main)
