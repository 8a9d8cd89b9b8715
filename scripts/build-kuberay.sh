#!/usr/bin/env bash
# Build the real KubeRay operator (module github.com/ray-project/kuberay/ray-operator) at VERSION
# with `go install` and keep the binary in a cache outside the repository:
#   $KUBERAY_EMU_CACHE/bin/ray-operator-VERSION   (KUBERAY_EMU_CACHE defaults to ~/.cache/kuberay-emu)
# Idempotent: a cached binary is reused. Prints the binary's path on stdout (progress on stderr).
# VERSION is what `go install` takes: a release tag (v1.4.0, v1.5.0) or, where the module proxy
# serves it, a commit. Default: v1.5.0, the newest release the proxy here serves (the commit the
# ported controllers follow is not served by it: 403 "This module version is not available").
# Uses the default GOCACHE and module cache, so builds share them with every other Go build here.
set -euo pipefail
default_version=v1.5.0
version="${1:-$default_version}"
if [[ ! "$version" =~ ^[A-Za-z0-9._+-]+$ ]]; then
    echo "build-kuberay.sh: VERSION must be a tag or a commit, got '$version'" >&2
    exit 2
fi
if ! command -v go >/dev/null 2>&1; then
    echo "build-kuberay.sh: the Go toolchain (go) is not on PATH" >&2
    exit 1
fi
cache="${KUBERAY_EMU_CACHE:-$HOME/.cache/kuberay-emu}"
bin="$cache/bin/ray-operator-$version"
if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi
gobin="$cache/build/$version"
rm -rf "$gobin"
mkdir -p "$gobin" "$cache/bin"
echo "build-kuberay.sh: go install github.com/ray-project/kuberay/ray-operator@$version (slow the first time)" >&2
GOBIN="$gobin" GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" \
    go install "github.com/ray-project/kuberay/ray-operator@$version" >&2
# Rename atomically so a build interrupted half-way never looks cached.
mv "$gobin/ray-operator" "$bin.tmp"
mv "$bin.tmp" "$bin"
rm -rf "$gobin"
echo "$bin"
