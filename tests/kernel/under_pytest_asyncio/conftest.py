from __future__ import annotations

from emu.kernel.loop import VirtualTimeLoop


def pytest_asyncio_loop_factories(config, item):
    """pytest-asyncio's documented hook: run this directory's asyncio tests on virtual time."""
    return {"virtual": VirtualTimeLoop}
