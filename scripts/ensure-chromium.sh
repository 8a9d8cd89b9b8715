#!/usr/bin/env bash
# Install Debian's chromium for the HTML timeline's browser test, when it is missing.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) != 0 ]]; then
    echo "ensure-chromium.sh: chromium is missing and can't be installed here (needs root and apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends chromium >&2; then
    apt-get update >&2
    apt-get install -y --no-install-recommends chromium >&2
fi
