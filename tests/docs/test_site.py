"""The documentation site builds from docs/ with mkdocs, warnings as errors: a dead link, a
missing anchor or a page left out of the nav fails the suite, and so does a link from docs/ to a
path of the repository that does not exist (scripts/mkdocs_hooks.py)."""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    assert importlib.util.find_spec("mkdocs") is not None, (
        "mkdocs is not installed: it is in the dev extra (bash scripts/setup.sh installs it)")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)], capture_output=True, text=True,
                          cwd=config.parent, timeout=120, check=False)


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" /
                                                  "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    out = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stderr[-4000:]
    for page in ("index.html", "api/index.html", "tutorial/index.html",
                 "performance/index.html", "versioning/index.html", "scenarios/index.html"):
        assert (tmp_path / "site" / page).exists(), page
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert 'id="emusimulation"' in api  # the generated reference, one anchor per entry


def test_a_dead_link_fails_the_build_and_names_the_page_and_the_link(tmp_path):
    for name in ("docs", "scripts"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.png"))
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "timeline-operator-failover.png").write_bytes(b"")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [the missing page](missing.md) and "
                     "[a missing example](../examples/nowhere.py).\n")
    out = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 1
    assert ("Doc file 'index.md' contains a link 'missing.md', but the target is not found "
            "among documentation files.") in out.stderr
    assert ("Doc file 'index.md' links to '../examples/nowhere.py', which is not in the "
            "repository (examples/nowhere.py)") in out.stderr


def test_links_that_leave_docs_become_repository_paths_on_the_site(caplog):
    hooks = _hooks()
    docs = ROOT / "docs"
    text = ("[`examples/`](../examples) and [where a test goes](../tests/README.md), "
            "[the files](findings/), [the tutorial](tutorial.md#top), ![a picture](x.png), "
            "[a site](https://example.org/a)\n```\n[kept](../examples)\n```\n")
    with caplog.at_level(logging.WARNING):
        out = hooks.rewrite(text, "index.md", docs)
    assert out == ("`examples/` (in the repository) and where a test goes "
                   "(`tests/README.md` in the repository), the files (`docs/findings/` in the "
                   "repository), [the tutorial](tutorial.md#top), ![a picture](x.png), "
                   "[a site](https://example.org/a)\n```\n[kept](../examples)\n```\n")
    assert caplog.records == []


def test_a_link_from_a_nested_page_resolves_against_that_page(caplog):
    hooks = _hooks()
    with caplog.at_level(logging.WARNING):
        out = hooks.rewrite("[the demo](../../scripts/demo.sh) [gone](../../scripts/gone.sh)",
                            "scenarios/operator-failover.md", ROOT / "docs")
    assert out == ("the demo (`scripts/demo.sh` in the repository) "
                   "[gone](../../scripts/gone.sh)")
    assert [r.getMessage() for r in caplog.records] == [
        "Doc file 'scenarios/operator-failover.md' links to '../../scripts/gone.sh', which is "
        "not in the repository (scripts/gone.sh)"]
