"""The layers are a contract: checked here, so a leak fails the suite."""

from __future__ import annotations

import ast
import re
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
    for path in sorted((ROOT / "emu" / "kuberay").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("emu"):
                offenders += [f"{path.name}: {a.name}" for a in node.names
                              if a.name.startswith("_")]
    assert offenders == []


def test_nothing_outside_the_kernel_reads_the_machine_clock_or_unseeded_randomness():
    banned = ("time.time(", "time.monotonic(", "uuid.uuid4(", "random.random(", "datetime.now(")
    offenders = []
    for pkg in ("emu",):
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


def _declared_distributions() -> set[str]:

    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    names = {re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0] for spec in specs}
    return {re.sub(r"[-_.]+", "-", name).lower() for name in names}


def test_every_third_party_import_is_declared_in_pyproject():
    # A package installed by hand on a developer's machine passes locally and fails on a clean
    # checkout (kr8s did, once): every module imported anywhere in the tree must come from a
    # distribution the project's own files install.
    from importlib.metadata import packages_distributions

    owners = packages_distributions()
    declared = _declared_distributions()
    local = {"emu", "tests", "conftest", "docs", "scripts",
             "benchmarks"}
    # Imported under try/except ImportError with a message that says what to install.
    optional = {"cloudpickle"}
    undeclared = []
    for folder in ("emu", "tests", "benchmarks", "scripts", "docs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if (top in sys.stdlib_module_names or top in local or top in optional
                            or top.startswith("_")):
                        continue
                    dists = {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(top, [])}
                    if not dists & declared and not _is_sibling_module(path, top):
                        undeclared.append(f"{path.relative_to(ROOT)}: {module}")
    assert undeclared == [], "imported but not installed by pyproject.toml:\n" + "\n".join(
        sorted(set(undeclared)))


def _is_sibling_module(path: Path, top: str) -> bool:
    # Test helpers are imported by basename (pytest puts each test folder on sys.path; the
    # benchmarks add tests/kuberay and their own folder themselves): a module of the tree is not
    # a dependency.
    # The scripts import their own helper packages the same way (scripts/client_suites).
    del path
    return (any((ROOT / "tests").rglob(f"{top}.py")) or (ROOT / "benchmarks" / f"{top}.py").exists()
            or (ROOT / "scripts" / top / "__init__.py").exists())
