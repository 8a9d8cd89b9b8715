"""How the suite shares its work among pytest-xdist workers (scripts/test.sh runs ``-n auto``).

One work unit per test file, as ``--dist loadfile`` does, so a module-scoped fixture (a wheel
built into a fresh venv, a real Ray head, an ``emu serve`` process) is built once. The folders
whose tests drive real programs on the wall clock — the real Ray head, the real KubeRay binary,
the Go client check — form a single unit instead: they run one after another on one worker and
never beside each other, so their waits only ever share the machine with virtual-time tests.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Folders under tests/ whose files form the one wall-clock work unit.
WALL_CLOCK = ("tests/realray/", "tests/realop/", "tests/go/")


def _scope(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return "wall-clock" if path.startswith(WALL_CLOCK) else path


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SuiteScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return SuiteScheduling(config, log)
