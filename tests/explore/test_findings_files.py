"""Every pytest file docs/findings.md links still fails on its own, for the invariant it names.

docs/findings.md promises, for each finding, a standalone file that fails while the port keeps
KubeRay's behaviour. A change elsewhere in the world (a kubelet's timing, a controller's order)
can make a recorded plan miss its window; then the file would pass and the page would be wrong
without anyone noticing. Each file is replayed here exactly as pytest would run it (its
workload, knobs, plan and seed), in this process, and the explorer's classification of what it
shows must name the known finding (`emu.explore.known`) whose replays list the file, as a
KubeRay behaviour: the shipped signatures recognise the shipped findings.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import emu
from emu.explore.export import replay_run
from emu.explore.known import KNOWN, classify
from emu.explore.runner import world_options

FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings"
FILES = sorted(FINDINGS.glob("test_*.py"))


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"finding_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seed(module: ModuleType) -> int:
    tests = [v for k, v in vars(module).items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 1, f"{module.__name__}: expected one test function"
    [mark] = [m for m in getattr(tests[0], "pytestmark", []) if m.name == "emu"]
    return int(mark.kwargs["seed"])


def test_every_finding_file_is_linked_from_findings_md() -> None:
    page = (FINDINGS.parent / "findings.md").read_text()
    linked = set(re.findall(r"docs/findings/(test_\w+\.py)", page))
    assert {p.name for p in FILES} == linked


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_finding_file_fails_for_its_invariant(path: Path) -> None:
    module = _load(path)
    box: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        box["found"], box["emulator"] = await replay_run(
            sim, module.WORKLOAD, module.KNOBS, module.PLAN, getattr(module, "INVARIANTS", None))

    emu.run(main, seed=_seed(module), **world_options(module.WORKLOAD))
    broken = [v for v in box["found"] if v["invariant"] == module.INVARIANT]
    assert broken, f"{path.name} no longer shows {module.INVARIANT}: {box['found']}"
    [expected] = [k.id for k in KNOWN if path.name in k.replays]
    verdict = classify(module.WORKLOAD, module.KNOBS, module.PLAN, module.INVARIANT, broken[0],
                       box["found"], box["emulator"])
    assert (verdict.known, verdict.klass) == (expected, "kuberay"), (verdict, box["found"])
    assert verdict.mitigation
