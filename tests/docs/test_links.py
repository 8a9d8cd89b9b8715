"""What the README and the docs show still works: every relative link and anchor resolves, every
path of the repository they name exists, every ``emu`` command line they show parses, and they
say nothing about how the work on the project was organised."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from emu.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md",
                ROOT / "tests" / "README.md", *(ROOT / "docs").rglob("*.md")])
IDS = [str(p.relative_to(ROOT)) for p in PAGES]
LINK = re.compile(r"(?<!!)\[[^\]\n]+\]\(([^)\s]+)\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
#: A path of the repository: scripts/x.py, tests/kube/test_nodes.py, emu/cli.py.
REPO_PATH = re.compile(r"^(?:scripts|benchmarks|examples|tests|emu|docs)/[\w./-]*$")
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _code_words(text: str) -> list[str]:
    """The words of the code spans and fenced blocks of ``text``."""
    code = [body for _, body in FENCED.findall(text)]
    code += CODE_SPAN.findall(_prose(text))
    return [word for chunk in code for word in chunk.split()]


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks."""
    return FENCED.sub("", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub and mkdocs give a heading: lower case, punctuation dropped, spaces to
    hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {github_slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", _prose(page.read_text()),
                                                         re.M)}


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for m in LINK.finditer(_prose(page.read_text())):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


#: architecture.md names paths the original design proposed and the code did not take.
CODE_PATH_PAGES = [p for p in PAGES if p.name != "architecture.md"]


@pytest.mark.parametrize("page", CODE_PATH_PAGES,
                         ids=[str(p.relative_to(ROOT)) for p in CODE_PATH_PAGES])
def test_every_repository_path_in_code_exists(page):
    missing = []
    for word in _code_words(page.read_text()):
        path = word.split("::")[0].strip("\"'(),;:").removeprefix("./")
        if not REPO_PATH.match(path) or re.search(r"[<>*{}]|NAME|WORKLOAD|\bx\b", path):
            continue  # not a path, or a placeholder
        if not (ROOT / path).exists():
            missing.append(path)
    assert missing == []


def _emu_command_lines(text: str, *, spans: bool) -> list[str]:
    """Every ``emu ...`` line of the fenced shell blocks, and with ``spans`` every ``emu ...``
    code span of the prose, without trailing comments and ``&``."""
    lines = []
    for lang, body in FENCED.findall(text):
        if lang in ("", "bash", "sh", "shell", "console"):
            lines += [line for line in body.splitlines() if line.startswith("emu ")]
    if spans:
        lines += re.findall(r"`(emu [^`]+)`", _prose(text))
    return [re.sub(r"\s+#.*$", "", line).rstrip(" &") for line in lines]


def test_the_readme_shows_the_commands_it_documents():
    shown = _emu_command_lines((ROOT / "README.md").read_text(), spans=True)
    assert {line.split()[1] for line in shown} >= {"list", "run", "explore", "serve", "bench"}


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "CONTRIBUTING.md",
                                  ROOT / "docs" / "index.md", ROOT / "docs" / "explore.md",
                                  ROOT / "docs" / "http.md", ROOT / "docs" / "tutorial.md",
                                  ROOT / "docs" / "performance.md",
                                  ROOT / "docs" / "scenarios" / "index.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_emu_command_line_shown_parses(page):
    parser = build_parser()
    wrong = []
    # The README's code spans are whole commands; elsewhere a span may quote part of one.
    for line in _emu_command_lines(page.read_text(), spans=page.name == "README.md"):
        if re.search(r"\b[A-Z]{2,}\b|\.\.\.", line):
            continue  # a placeholder (emu run NAME --seed N) or an elision
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit:
            wrong.append(line)
    assert wrong == []


#: Words about how the work was organised ("lead" and "session" alone are ordinary words: a
#: leader may lead through a Lease, a user runs a serve session).
ORGANISATION = re.compile(r"\b(waves?|helpers?|the lead|(?:this|last|next|previous|earlier|"
                          r"later|each|every|one) (?:work )?sessions?)\b(?! name)", re.I)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_the_docs_say_nothing_about_how_the_work_was_organised(page):
    text = page.read_text()
    found = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for m in ORGANISATION.finditer(text)]
    assert found == []
    assert "/work/" not in text  # no path of a development machine
