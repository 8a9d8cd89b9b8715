#!/usr/bin/env bash
# Create a throwaway venv for another Python version, with only kuberay-emu's runtime
# dependencies, for the cross-interpreter determinism test (tests/determinism). Prints the venv's
# python on stdout. Usage: scripts/setup-python.sh 3.12
# The interpreter is found under pyenv (~/.pyenv/versions/X.Y.*) or as a working pythonX.Y on PATH; none
# found exits 3 (the test then says so, and fails in CI). Re-running is cheap: the venv is
# reinstalled only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:?usage: scripts/setup-python.sh X.Y}"
exe=""
root="${PYENV_ROOT:-$HOME/.pyenv}"
for d in $(ls -d "$root/versions/$version".* 2>/dev/null | sort -V -r); do
    if [[ -x "$d/bin/python$version" ]]; then exe="$d/bin/python$version"; break; fi
done
if [[ -z "$exe" ]] && command -v "python$version" >/dev/null 2>&1 \
        && "python$version" -c 'pass' >/dev/null 2>&1; then
    exe="$(command -v "python$version")"
fi
if [[ -z "$exe" ]]; then
    echo "setup-python.sh: no Python $version on PATH or under pyenv" >&2
    exit 3
fi
venv=".venvs/$version"
if [[ ! -x "$venv/bin/python" ]]; then
    "$exe" -m venv "$venv" >&2
fi
stamp="$venv/.kuberay-emu-deps"
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    # Runtime dependencies only (the list in pyproject.toml, at constraints.txt's versions), not
    # the package itself: the test runs
    # the worktree's code with PYTHONPATH.
    deps="$("$venv/bin/python" - <<'PY'
import re, pathlib
text = pathlib.Path("pyproject.toml").read_text()
block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M).group(1)
print("\n".join(re.findall(r'"([^"]+)"', block)))
PY
)"
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet --constraint constraints.txt $deps >&2
    echo "$want" >"$stamp"
fi
echo "$PWD/$venv/bin/python"
