from __future__ import annotations

import asyncio

import anyio
import pytest

from emu.kernel.loop import VirtualTimeLoop


@pytest.mark.asyncio
async def test_the_virtual_loop_runs_pytest_asyncio_tests_given_by_the_loop_factory_hook():
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop)
    await asyncio.sleep(3600)
    with anyio.move_on_after(10):
        await anyio.sleep(100)
    assert loop.time() == 3610.0
