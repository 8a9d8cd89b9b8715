"""The Go client check (``go/cmd/client-check``, built on client-go) against ``emu serve``: what Go
controllers rely on — informers with resync and a relist after 410 Gone, leader election on a
Lease, server-side apply with typed apply configurations, protobuf bodies, watch bookmarks — over
real sockets, against the full served world and against ``--bare``.

The program is built with the machine's ``go`` into a temporary directory (the module cache and
the build cache make rebuilds fast). Without ``go`` the test skips on a developer's machine and
fails when ``CI`` is set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.external import ROOT, require
from tests.http.serving import start_serve

pytestmark = pytest.mark.external

#: Changes the served world keeps for watches: small, so the check's 410 is quick to reach.
WINDOW = 50


@pytest.fixture(scope="module")
def client_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    require(go is not None, "go (the Go toolchain)")
    assert go is not None
    out = tmp_path_factory.mktemp("go-build") / "client-check"
    # -mod=readonly: go.mod and go.sum, as committed, must be complete.
    built = subprocess.run([go, "build", "-mod=readonly", "-o", str(out), "./cmd/client-check"],
                           cwd=ROOT / "go", capture_output=True, text=True, timeout=1800,
                           env={**os.environ, "CGO_ENABLED": "0"})
    assert built.returncode == 0, f"go build failed:\n{built.stdout}\n{built.stderr}"
    return out


@pytest.mark.parametrize("mode", [[], ["--bare"]], ids=["cluster", "bare"])
def test_client_go_check_passes_against_emu_serve(client_check: Path, tmp_path: Path,
                                                  mode: list[str]):
    # --speed 30: the minute of silence after which a watch gets a bookmark takes 2 s.
    srv = start_serve(tmp_path, *mode, "--speed", "30", "--history-window", str(WINDOW))
    try:
        done = subprocess.run([str(client_check), "-kubeconfig", str(srv.kubeconfig),
                               "-history-window", str(WINDOW), "-v"],
                              capture_output=True, text=True, timeout=300)
    finally:
        code = srv.stop()
    report = f"{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, report
    for name in ("informer-resync", "informer-relist-410", "leader-election",
                 "server-side-apply", "protobuf-bodies", "watch-bookmarks"):
        assert f"ok   {name} " in done.stdout, report
    assert "6 checks, 0 failed" in done.stdout
    assert code == 0, f"emu serve exited {code} on Ctrl-C"


def test_client_check_refuses_unknown_check_names(client_check: Path, tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    done = subprocess.run([str(client_check), "-kubeconfig", str(kubeconfig), "-only", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'no check named "nope"' in done.stderr and "leader-election" in done.stderr
