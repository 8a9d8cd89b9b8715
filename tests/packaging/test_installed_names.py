"""The wheel installs nothing a user's project may also have: beside a project with its own
``controllers`` and ``backends`` packages (kubebuilder's usual layout), both projects' code and
tests work, and each import resolves to its own project.

The wheel is built from this checkout and installed without dependencies into a fresh venv, whose
``.pth`` file lends it this environment's site-packages for the dependencies (installing them anew
would fetch ~50 distributions for nothing). The user project's tests run with that venv's
interpreter, from the project's own folder, through the installed pytest plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = '''
import controllers.operator
import backends
import emu
import emu.backends
import emu.kuberay.operator


def test_the_users_own_packages_are_the_users():
    assert controllers.operator.reconcile() == "the user's reconcile"
    assert backends.NAME == "the user's backends"


def test_the_library_comes_from_the_wheel_not_the_checkout():
    for module in (emu, emu.kuberay.operator, emu.backends):
        assert module.__file__.startswith(SITE), module.__file__
    assert hasattr(emu.backends, "RedisStoreClient")


async def test_the_installed_plugin_gives_a_sim(sim):
    c = sim.client("user-test")
    await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "1"}})
    await sim.sleep(60)
    assert (await c.get("ConfigMap", "a", "default"))["data"] == {"k": "1"}
    assert sim.now == 60.0
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                            "-w", str(out), str(ROOT)], capture_output=True, text=True,
                           check=False, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (found,) = out.glob("kuberay_emu-*.whl")
    return found


def test_the_wheel_installs_only_the_emu_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        tops = sorted({name.split("/", 1)[0] for name in zf.namelist()
                       if not name.split("/", 1)[0].endswith(".dist-info")})
    assert tops == ["emu"]
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert "emu/kuberay/operator.py" in names and "emu/backends/redis.py" in names


def test_a_project_with_its_own_controllers_and_backends_packages(wheel: Path,
                                                                   tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, symlinks=True)  # this environment's pip installs
    python = env_dir / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                              "--no-deps", "--quiet", str(wheel)],
                             capture_output=True, text=True, check=False, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                              "['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies: this environment's site-packages, after the venv's own.
    Path(site, "zz-kuberay-emu-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "user-project"
    (project / "controllers").mkdir(parents=True)
    (project / "controllers" / "__init__.py").write_text("")
    (project / "controllers" / "operator.py").write_text(
        "def reconcile():\n    return \"the user's reconcile\"\n")
    (project / "backends").mkdir()
    (project / "backends" / "__init__.py").write_text("NAME = \"the user's backends\"\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_user.py").write_text(
        f"SITE = {site!r}\n" + textwrap.dedent(USER_TEST))
    (project / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.pytest.ini_options]
        pythonpath = ["."]
        asyncio_mode = "auto"
        """))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    run = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                         cwd=project, env=env, capture_output=True, text=True, check=False,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout, run.stdout[-2000:]

    # The library's own scenarios run from the installed wheel, next to the user's packages.
    cli = subprocess.run([str(env_dir / "bin" / "emu"), "run", "operator-failover", "--seed", "1"],
                         cwd=project, env=env, capture_output=True, text=True, check=False,
                         timeout=600)
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-2000:]
    assert "digest:" in cli.stdout
