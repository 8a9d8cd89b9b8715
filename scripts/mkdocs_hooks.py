"""mkdocs hook (mkdocs.yml ``hooks:``): links from docs/ to the rest of the repository.

The pages are read in two places: on the repository's web view, where a link such as
``../examples/`` or ``findings/`` (a folder of test files) opens the folder, and on the site
``mkdocs build`` makes, which holds only docs/. On the site such a link would be dead, so this
hook rewrites it to its text followed by the path in the repository, as code. A link whose target
does not exist in the repository is logged as a warning, which ``mkdocs build --strict`` turns
into a failed build: the links that leave docs/ are checked as strictly as mkdocs checks the
others.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repository_links")

ROOT = Path(__file__).resolve().parents[1]
#: ``[text](target)``, not an image; the target without spaces or a title.
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)", re.M)


def repository_path(page_path: str, target: str, docs_dir: Path) -> str | None:
    """The repository-relative path a relative link of the page ``page_path`` (relative to
    ``docs_dir``) points at, when mkdocs cannot serve it: outside docs/, or a folder with no
    index page. None for a link mkdocs handles itself (a page, a file in docs/, a URL, an
    anchor)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return None
    path = target.split("#", 1)[0]
    if not path:
        return None
    inside = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), path))
    on_disk = docs_dir / inside
    if not inside.startswith("../") and inside != ".." and not on_disk.is_dir():
        return None
    if on_disk.is_dir() and (on_disk / "index.md").exists():
        return None
    docs_in_repo = docs_dir.resolve().relative_to(ROOT).as_posix()
    return posixpath.normpath(posixpath.join(docs_in_repo, inside))


def rewrite(markdown: str, page_path: str, docs_dir: Path) -> str:
    """``markdown`` with every link mkdocs cannot serve replaced by its text and its path in the
    repository; a link to a path that does not exist is logged as a warning."""
    parts = FENCE.split(markdown)
    out: list[str] = []
    in_code = False
    index = 0
    while index < len(parts):
        part = parts[index]
        if index % 2 == 1:  # a fence marker
            in_code = not in_code
            out.append(part)
            index += 1
            continue
        out.append(part if in_code else LINK.sub(
            lambda m: _replacement(m, page_path, docs_dir), part))
        index += 1
    return "".join(out)


def _replacement(match: re.Match[str], page_path: str, docs_dir: Path) -> str:
    text, target = match.group("text"), match.group("target")
    found = repository_path(page_path, target, docs_dir)
    if found is None:
        return match.group(0)
    if found.startswith("../") or not (ROOT / found).exists():
        log.warning("Doc file '%s' links to '%s', which is not in the repository (%s)",
                    page_path, target, found)
        return match.group(0)
    shown = found.rstrip("/") + ("/" if (ROOT / found).is_dir() else "")
    if text.strip("`").rstrip("/") == found.rstrip("/"):
        return f"`{shown}` (in the repository)"
    return f"{text} (`{shown}` in the repository)"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return rewrite(markdown, page.file.src_uri, Path(config["docs_dir"]))
