#!/usr/bin/env bash
# Set everything up and run the whole test suite, with a real redis-server for the Redis backend
# tests (installed from Debian's packages when missing, started on a free loopback port, stopped
# at the end) and Debian's chromium for the HTML timeline's browser test. Extra arguments go to
# pytest. EMU_VENV and EMU_CONSTRAINTS are setup.sh's (scripts/check-newest.sh uses them).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${EMU_VENV:-.venv}"
bash scripts/setup.sh
state="$(mktemp -d)/redis"
if url="$(bash scripts/redis-server.sh start "$state")"; then
    export EMU_REDIS_URL="$url"
    trap 'bash scripts/redis-server.sh stop "$state" >/dev/null 2>&1 || true' EXIT
else
    echo "test.sh: could not start a real redis-server; its tests will say so" >&2
fi
# The other supported Pythons, for the cross-interpreter determinism test (runtime deps only).
main_version="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
for version in 3.11 3.12 3.13; do
    [[ "$version" == "$main_version" ]] && continue
    bash scripts/setup-python.sh "$version" >/dev/null \
        || echo "test.sh: no Python $version; the determinism test will say so" >&2
done
bash scripts/ensure-chromium.sh || echo "test.sh: no chromium; the browser test will say so" >&2
bash scripts/ensure-kubectl.sh || echo "test.sh: no kubectl; tests/http will say so" >&2
# Every core (pytest-xdist; EMU_TEST_WORKERS=0 runs in this process), one file per work unit
# and the wall-clock folders as one unit (tests/conftest.py).
"$venv/bin/python" -m pytest -q -n "${EMU_TEST_WORKERS:-auto}" --dist loadfile "$@"
