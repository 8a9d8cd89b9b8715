"""The ``ray_world`` fixture: ``async def test_x(ray_world)`` runs the body on a fresh
virtual-time loop with a `raytestworld.RayTestWorld`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from raytestworld import RayTestWorld

from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.world import World


class _Placeholder:
    pass


@pytest.fixture
def ray_world() -> Any:
    """Replaced by a fresh `RayTestWorld` when the ``async def`` test runs."""
    return _Placeholder()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    funcargs = pyfuncitem.funcargs
    if not isinstance(funcargs.get("ray_world"), _Placeholder):
        return None
    func: Callable[..., Awaitable[Any]] = pyfuncitem.obj
    assert inspect.iscoroutinefunction(func), "tests using ray_world must be async def"
    tmp: Path = funcargs["tmp_path"] if "tmp_path" in funcargs else Path("/tmp")
    names = pyfuncitem._fixtureinfo.argnames

    async def main() -> None:
        world = World(seed=0)
        rw = RayTestWorld(world, tmp)
        kwargs = {n: funcargs[n] for n in names if n in funcargs}
        kwargs["ray_world"] = rw
        try:
            await func(**kwargs)
        finally:
            world.processes.crash_all()

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        runner.run(main())
    return True
