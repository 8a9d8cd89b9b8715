"""What the tests that need a real tool share (kubectl, the ``kubernetes`` package, kopf, Go, the
KubeRay operator binary): their ``external`` marker, `require`, and the wall clock they wait on.

Imported as ``tests.external`` (the project root is on pytest's ``pythonpath``): test modules
and their helpers are imported by their basename, with their own folder on ``sys.path``, so a
helper two folders share must live under a package path, not beside the tests as
``tests/http/serving.py`` does.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real processes are waited on in real time, never the emulator's virtual clock.
wall_clock = time.monotonic  # noqa: TID251 - real processes are waited on in real time


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``external`` marker (a conftest re-exports this)."""
    config.addinivalue_line("markers", "external: needs a real tool (kubectl, the kubernetes "
                                       "package, kopf, go); deselect with -m 'not external'")


def require(ok: bool, what: str) -> None:
    """Skip on a developer's machine, fail in CI (``CI`` set), when ``what`` is not available:
    CI must run every external test."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing; CI must provide it")
    pytest.skip(f"{what} is not available")


def env_with_root() -> dict[str, str]:
    """This environment with the project root first on ``PYTHONPATH`` (for ``python -m emu``)."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), out.get("PYTHONPATH")) if p)
    return out
