"""The docs stay true: the API reference matches the code, the tutorial's code runs, and what it
quotes from examples/ is what the files say.

Conventions in docs/tutorial.md: a fenced ```python block right after ``<!-- run -->`` is run as
a script in a fresh namespace (``<!-- run: continue -->`` reuses the previous runnable block's
namespace), and each ``async def test_*(sim)`` it defines is then run in a fresh world, as the
pytest plugin would; a block right after ``<!-- excerpt: PATH -->`` must appear verbatim in
PATH.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import emu

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
API = ROOT / "docs" / "api.md"
MARKED_BLOCK = re.compile(r"<!-- (run|run: continue|excerpt: (?P<path>[^ ]+)) -->\n```python\n"
                          r"(?P<code>.*?)\n```", re.S)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "scripts" /
                                                  "gen_api_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(kind: str) -> list[tuple[int, str, str]]:
    """(line, marker, code) of the tutorial's marked blocks whose marker starts with ``kind``."""
    text = TUTORIAL.read_text()
    out = []
    for m in MARKED_BLOCK.finditer(text):
        marker = m.group(1)
        if marker.startswith(kind):
            out.append((text.count("\n", 0, m.start()) + 1, marker, m.group("code")))
    return out


def test_the_api_reference_is_what_the_generator_writes_today():
    gen = _generator()
    assert API.read_text() == gen.render(), (
        "docs/api.md is out of date with the public surface: regenerate it with "
        f"`{gen.COMMAND}` and commit the result")


def test_every_public_name_has_an_entry_in_the_api_reference():
    text = API.read_text()
    missing = [name for name in emu.__all__ if f"#### `emu.{name}`" not in text]
    assert missing == []


def test_every_emu_runtime_name_and_fault_value_has_an_entry_in_the_api_reference():
    import emu.faults
    import emu.runtime

    text = API.read_text()
    wanted = [f"emu.runtime.{n}" for n in emu.runtime.__all__]
    wanted += [f"emu.faults.{n}" for n in emu.faults.__all__
               if n not in emu.__all__ and n != "Faults"]
    assert [w for w in wanted if f"`{w}`" not in text] == []


def test_the_tutorial_has_runnable_blocks_and_excerpts():
    assert len(_blocks("run")) >= 4
    assert len(_blocks("excerpt")) >= 6


def _run_tests_defined(namespace: dict[str, Any], before: set[str]) -> list[str]:
    ran = []
    for name, fn in list(namespace.items()):
        if name.startswith("test_") and name not in before and inspect.iscoroutinefunction(fn):
            emu.run(fn, seed=0)
            ran.append(name)
    return ran


def test_every_runnable_tutorial_block_runs(capsys):
    namespace: dict[str, Any] = {}
    ran: list[str] = []
    for line, marker, code in _blocks("run"):
        if marker == "run":
            namespace = {"__name__": "tutorial_block"}
        before = set(namespace)
        try:
            exec(compile(code, f"docs/tutorial.md:{line}", "exec"), namespace)
            ran += _run_tests_defined(namespace, before)
        except Exception as err:
            pytest.fail(f"the runnable block at docs/tutorial.md:{line} raised "
                        f"{type(err).__name__}: {err}")
    assert ran == ["test_a_stale_update_is_409_and_an_outage_refuses_calls"]


_EXCERPTS = [(line, m.split(": ", 1)[1], code) for line, m, code in _blocks("excerpt")]


@pytest.mark.parametrize("line,path,code", _EXCERPTS,
                         ids=[f"tutorial.md:{line}" for line, _, _ in _EXCERPTS])
def test_each_tutorial_excerpt_appears_verbatim_in_its_file(line, path, code):
    source = (ROOT / path).read_text()
    assert code in source, (f"the excerpt at docs/tutorial.md:{line} no longer matches {path}: "
                            "update the tutorial")


def test_the_index_links_to_pages_that_exist():
    text = (ROOT / "docs" / "index.md").read_text()
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links
    missing = [link for link in links if not link.startswith("http")
               and not (ROOT / "docs" / link).exists()]
    assert missing == []


def test_the_generator_check_mode_names_the_command_when_out_of_date(tmp_path, monkeypatch,
                                                                   capsys):
    gen = _generator()
    stale = tmp_path / "api.md"
    stale.write_text("# stale\n")
    monkeypatch.setattr(gen, "OUT", stale)
    assert gen.main(["--check"]) == 1
    assert capsys.readouterr().err == (
        "docs/api.md is out of date: run .venv/bin/python scripts/gen_api_docs.py\n")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
