#!/usr/bin/env bash
# Install kubectl for tests/http when it is missing: the distribution's `kubectl` package when a
# configured repository has one, else Debian's `kubernetes-client` (which provides kubectl).
set -euo pipefail
command -v kubectl >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) != 0 ]]; then
    echo "ensure-kubectl.sh: kubectl is missing and can't be installed here (needs root and apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update >&2
for pkg in kubectl kubernetes-client; do
    if apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        apt-get install -y --no-install-recommends "$pkg" >&2 && break
    fi
done
command -v kubectl >/dev/null 2>&1 || { echo "ensure-kubectl.sh: no package provides kubectl" >&2; exit 1; }
