#!/usr/bin/env bash
# Replay every finding of docs/findings.md (docs/findings/test_*.py) with the real KubeRay
# operator binary, paced by the wall clock, several runs each, and print the verdict table.
#   scripts/replay-findings-real.sh [--binary PATH] [--runs 3] [-j 2] [--out DIR] [FILE...]
# The binary defaults to ~/.cache/kuberay-emu/bin/ray-operator-v1.5.0 (scripts/build-kuberay.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../.venv/bin/python" "$here/replay_findings_real.py" "$@"
