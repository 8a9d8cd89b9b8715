"""CHANGELOG.md keeps the Keep a Changelog format and agrees with the package's version, which is
SemVer (docs/versioning.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_version_is_semver():
    assert re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", _version())


def test_the_changelog_has_an_unreleased_section_then_releases_newest_first():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (.*)$", text, re.M)
    assert releases[0] == "[Unreleased]"
    dated = [re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", r) for r in releases[1:]]
    assert None not in dated, releases
    versions = [tuple(int(n) for n in m.group(1).split(".")) for m in dated if m]
    assert versions == sorted(versions, reverse=True)


def test_every_changelog_subsection_is_one_of_keep_a_changelogs():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert set(re.findall(r"^### (.*)$", text, re.M)) <= set(SECTIONS)


def test_the_package_version_is_released_or_announced_as_the_next_release():
    text = (ROOT / "CHANGELOG.md").read_text()
    version = _version()
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## ", 1)[0]
    assert f"## [{version}] - " in text or f"The first release will be {version}" in unreleased \
        or f"The next release will be {version}" in unreleased
