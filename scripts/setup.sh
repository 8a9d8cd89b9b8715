#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install kuberay-emu with its development tools, once, at the
# versions CI tested (constraints.txt). Re-running is cheap: it reinstalls only when pyproject.toml
# or constraints.txt changed.
# EMU_VENV picks another venv folder; EMU_CONSTRAINTS=none installs the newest versions the ranges
# in pyproject.toml allow (scripts/check-newest.sh does both).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
venv="${EMU_VENV:-.venv}"
constraints="${EMU_CONSTRAINTS:-constraints.txt}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "setup.sh: kuberay-emu needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1))" >&2
    exit 1
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$PY" -m venv "$venv"
fi
pins=()
if [[ "$constraints" != none ]]; then
    pins=(--constraint "$constraints")
fi
stamp="$venv/.kuberay-emu-installed"
want="$(cat pyproject.toml "${pins[@]:1}" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]] || ! "$venv/bin/python" -c 'import emu' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet "${pins[@]}" -e '.[dev]' >&2
    echo "$want" >"$stamp"
fi
