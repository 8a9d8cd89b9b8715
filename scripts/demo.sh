#!/usr/bin/env bash
# Set everything up and run the main demo: a recovery scenario printed as a timeline, with its
# HTML timeline written to out/. Extra arguments go to `emu run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p out
scenario="${EMU_DEMO_SCENARIO:-operator-failover}"
exec .venv/bin/emu run "$scenario" --seed 1 --html "out/$scenario.html" "$@"
