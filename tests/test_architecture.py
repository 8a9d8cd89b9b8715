"""The layers are a contract: checked here, so a leak fails the suite."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import emu

ROOT = Path(__file__).resolve().parents[1]


def test_import_layers_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         check=False, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "0 broken" in out.stdout


def test_every_public_name_has_a_docstring():
    missing = [name for name in emu.__all__ if not (getattr(emu, name).__doc__ or "").strip()]
    assert missing == []


def test_the_public_surface_lists_exactly_what_it_exports():
    assert sorted(emu.__all__) == sorted(set(emu.__all__))
    for name in emu.__all__:
        assert getattr(emu, name) is not None


def test_controllers_import_no_private_name_from_emu():
    offenders = []
    for path in sorted((ROOT / "controllers").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("emu"):
                offenders += [f"{path.name}: {a.name}" for a in node.names
                              if a.name.startswith("_")]
    assert offenders == []


def test_nothing_outside_the_kernel_reads_the_machine_clock_or_unseeded_randomness():
    banned = ("time.time(", "time.monotonic(", "uuid.uuid4(", "random.random(", "datetime.now(")
    offenders = []
    for pkg in ("emu", "controllers", "backends"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "kernel" in path.parts:
                continue
            text = path.read_text()
            offenders += [f"{path.relative_to(ROOT)}: {b}" for b in banned if b in text]
    assert offenders == []


def test_test_module_names_are_unique_across_folders():
    # pytest imports test folders without __init__.py by basename: a repeated name breaks
    # collection of the whole suite.
    names = [p.name for p in sorted((ROOT / "tests").rglob("test_*.py"))]
    assert sorted({n for n in names if names.count(n) > 1}) == []
