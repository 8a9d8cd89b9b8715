"""Fixtures of the contract tests against the real Ray: a real redis-server and a real Ray head.

These tests are marked ``realray``; deselect them locally with ``-m "not realray"``. They never
skip in CI: with ``CI=true`` a missing ``ray`` package or redis-server fails them loudly. The real
Redis is ``EMU_REDIS_URL`` (scripts/test.sh starts one) or, without it, a throwaway one started by
scripts/redis-server.sh and stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
for extra in (HERE, HERE.parent / "ray"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from realhead import RealHead  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "realray: a contract test that starts the real Ray "
                                       "(deselect locally with -m 'not realray')")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.path).startswith(str(HERE)):
            item.add_marker(pytest.mark.realray)


def _unavailable(what: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} (CI=true: the contract tests against real Ray never skip in CI)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("EMU_REDIS_URL")
    if url:
        yield url
        return
    state = tmp_path_factory.mktemp("redis") / "state"
    script = ROOT / "scripts" / "redis-server.sh"
    run = subprocess.run(["bash", str(script), "start", str(state)], capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        _unavailable(f"no real redis-server: scripts/redis-server.sh failed: {run.stderr[-500:]}")
    try:
        yield run.stdout.strip()
    finally:
        subprocess.run(["bash", str(script), "stop", str(state)], capture_output=True, check=False)


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """A SIGTERM to pytest (a CI timeout, a user's kill) raises instead of ending the process at
    once, so the ``finally`` that stops the real head's processes still runs."""
    def unwind(signum: int, _frame: object) -> None:
        raise SystemExit(f"pytest got signal {signum}: stopping the real Ray head first")

    saved = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


@pytest.fixture(scope="module")
def real_head(redis_url: str) -> Iterator[RealHead]:
    """A real Ray head with Redis GCS FT in its own namespace; its processes are stopped and its
    keys deleted at the end whatever happened; its temp dir (logs) is kept when a step failed
    (``head.keep``, set by the tests), else removed."""
    try:
        import ray  # noqa: F401
    except ImportError as err:
        _unavailable(f"the real ray package is not installed ({err}); pip install 'ray[default]'")
    import redis

    host_port = redis_url.removeprefix("redis://").rstrip("/")
    namespace = f"realray-{uuid.uuid4().hex[:8]}"
    # A short directory: Ray's AF_UNIX socket paths under it must stay within 107 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="realray-"))
    head = RealHead(tmp, host_port, namespace)
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # this process's GcsClient, as the head's
    with _sigterm_unwinds():
        try:
            try:
                head.start()
            except BaseException:
                head.keep = True
                raise
            yield head
        finally:
            head.stop()
            if saved is None:
                os.environ.pop("RAY_AUTH_MODE", None)
            else:
                os.environ["RAY_AUTH_MODE"] = saved
            if not head.keep:
                shutil.rmtree(tmp, ignore_errors=True)
            client = redis.Redis.from_url(redis_url)
            keys = list(client.scan_iter(match=f"RAY{namespace}@*"))
            if keys:
                client.delete(*keys)
            client.close()
