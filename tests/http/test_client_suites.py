"""The Kubernetes clients' own test suites against ``emu serve`` (``scripts/client-suites.py``):
the CI selection of each suite (``--ci``: what
fits in a few minutes; the script without it runs the whole suite) must pass; the ones that need a node are
deselected by the list in ``scripts/client_suites/deselected.py`` (with the reason for each).

The released source distributions are fetched through the package index once and cached
(``~/.cache/kuberay-emu/client-suites``). External: kubectl and the index are needed; a missing
one skips locally and fails under ``CI``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.external import ROOT, env_with_root, require

SCRIPT = ROOT / "scripts" / "client-suites.py"


def run_suite(suite: str, tmp: Path) -> dict[str, object]:
    out = tmp / "out.json"
    done = subprocess.run([sys.executable, str(SCRIPT), suite, "--ci", "--json", str(out),
                           "--work", str(tmp)], capture_output=True, text=True, timeout=900,
                          env=env_with_root(), cwd=str(ROOT))
    assert out.is_file(), (f"client-suites.py {suite} exited {done.returncode} without "
                           f"results:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (row,) = json.loads(out.read_text())
    assert isinstance(row, dict)
    return row


@pytest.mark.external
@pytest.mark.parametrize("suite", ["kubernetes", "kr8s", "kopf"])
def test_the_clients_own_suite_passes_against_emu_serve(suite: str, tmp_path: Path) -> None:
    require(shutil.which("kubectl") is not None, "kubectl")
    if suite == "kopf":
        require(importlib.util.find_spec("freezegun") is not None,
                "freezegun (imported by kopf's tests/conftest.py)")
    row = run_suite(suite, tmp_path)
    messages = row["messages"]
    assert isinstance(messages, dict)
    bad = [*row["failed"], *row["skipped"]]  # type: ignore[misc]
    assert not bad, f"{suite}: {len(bad)} of its tests did not pass against emu serve:\n" + "\n".join(
        f"--- {nodeid}\n{messages.get(nodeid, '')[-1200:]}" for nodeid in bad)
    assert row["passed"], f"{suite}: no test ran"


@pytest.mark.external
def test_lightkube_ships_no_tests_to_run(tmp_path: Path) -> None:
    # lightkube's e2e tests live only in its repository; the script checks that its source
    # distribution still ships none (it stops with an error once one does)
    row = run_suite("lightkube", tmp_path)
    assert "ships no tests" in str(row["no_tests"])


def test_docs_list_every_deselected_test_with_its_reason() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from client_suites.deselected import DESELECTED
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    docs = (ROOT / "docs" / "http.md").read_text()
    missing = [f"{suite}: {nodeid}" for suite, tests in DESELECTED.items()
               for nodeid, why in tests.items()
               if f"| {suite} | `{suite}:{nodeid}` | {why} |" not in docs]
    assert not missing, "docs/http.md's list lacks (or words differently):\n" + "\n".join(missing)
