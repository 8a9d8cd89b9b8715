"""The README's example test runs, as written, under the project's pytest plugin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readmes_first_test_passes(tmp_path):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A first test"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "test_readme_example.py").write_text(code)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:asyncio", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout


def test_the_readme_opens_with_the_demo_and_test_commands_that_ci_runs():
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert first_block == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci
