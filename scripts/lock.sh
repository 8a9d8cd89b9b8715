#!/usr/bin/env bash
# Write constraints.txt: the exact versions installed in .venv (or EMU_VENV), which is what
# scripts/setup.sh installs on a fresh machine. Run it after the suite passed on those versions
# (typically after scripts/check-newest.sh reported a newer set green).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${EMU_VENV:-.venv}"
{
    echo "# The versions CI tested, installed by scripts/setup.sh (pip --constraint)."
    echo "# Regenerate with scripts/lock.sh from a venv whose suite passed; do not edit by hand."
    echo "# Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), $(uname -m) Linux."
    "$venv/bin/python" -m pip freeze --exclude-editable | grep -viE '^(kuberay-emu|pip|setuptools|wheel)(==| @)' | LC_ALL=C sort -f
} >constraints.txt.new
mv constraints.txt.new constraints.txt
echo "lock.sh: constraints.txt has $(grep -vc '^#' constraints.txt) pins"
