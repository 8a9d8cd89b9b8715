#!/usr/bin/env bash
# KubeRay's own envtest suite (ray-operator/controllers/ray, Ginkgo) against `emu serve --bare`.
#
#   scripts/kuberay-envtest.sh [VERSION] [-- EXTRA TEST FLAGS...]
#
# VERSION is a release of the Go module github.com/ray-project/kuberay/ray-operator (default
# v1.5.0: the newest one the Go module proxy serves; docs/http.md says why not the commit
# /work/shared/kuberay/SPEC.md follows). The module comes from the module cache (`go mod
# download`), is copied to a work directory (the cache is read-only) and its test binary is
# built once (`go test -c`) and reused by later runs of the same version. The suite then runs
# with USE_EXISTING_CLUSTER=true against `emu serve --bare`; envtest creates KubeRay's CRDs
# (config/crd/bases) itself, as it does on any existing cluster (`emu serve -f` cannot apply
# them: like `kubectl apply`, its client-side apply would store each CRD again in the
# last-applied annotation, over the 256 KiB limit for RayCluster's).
# It prints the Ginkgo pass/fail counts and each failed spec; the full log, the Ginkgo JSON
# report and the server's log stay in the work directory.
#
# Environment: KUBERAY_ENVTEST_WORK (work directory, default $TMPDIR/kuberay-envtest-VERSION),
# EMU_PYTHON (the Python with kuberay-emu installed, default .venv/bin/python of this
# repository), EMU_SERVE_FLAGS (extra `emu serve` flags, e.g. "--speed 1").
# Nothing here is written into the repository; the Go caches are the machine's (GOPATH, GOCACHE).
set -euo pipefail

VERSION=v1.5.0
if [[ $# -gt 0 && $1 != -- ]]; then
    VERSION=$1
    shift
fi
[[ ${1:-} == -- ]] && shift
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${EMU_PYTHON:-$ROOT/.venv/bin/python}
WORK=${KUBERAY_ENVTEST_WORK:-${TMPDIR:-/tmp}/kuberay-envtest-$VERSION}
MODULE=github.com/ray-project/kuberay/ray-operator

command -v go >/dev/null || { echo "kuberay-envtest: go is not installed" >&2; exit 2; }
[[ -x $PY ]] || { echo "kuberay-envtest: no Python at $PY (run scripts/setup.sh or set EMU_PYTHON)" >&2; exit 2; }
mkdir -p "$WORK"

if [[ ! -x $WORK/ray.test ]]; then
    echo "kuberay-envtest: fetching $MODULE@$VERSION into the module cache"
    json=$(cd "$WORK" && go mod download -json "$MODULE@$VERSION") || {
        echo "kuberay-envtest: go mod download failed:" >&2; echo "$json" >&2; exit 2; }
    dir=$("$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or ""); \
sys.exit(0 if d.get("Dir") else "kuberay-envtest: " + d.get("Error", "no Dir"))' <<<"$json")
    rm -rf "$WORK/src"
    cp -r "$dir" "$WORK/src"
    chmod -R u+w "$WORK/src"
    echo "kuberay-envtest: building the controllers/ray test binary (several minutes on 2 cores)"
    (cd "$WORK/src" && go test -c -o "$WORK/ray.test" ./controllers/ray/)
fi

KUBECONFIG_FILE=$WORK/kubeconfig
rm -f "$KUBECONFIG_FILE" "$WORK/serve.log"
began=$(date +%s.%N)
# shellcheck disable=SC2086  # EMU_SERVE_FLAGS is a list of flags
"$PY" -m emu serve --bare --kubeconfig "$KUBECONFIG_FILE" \
    ${EMU_SERVE_FLAGS:-} > "$WORK/serve.log" 2>&1 &
serve=$!
stop_serve() {
    if kill -0 "$serve" 2>/dev/null; then
        kill -INT "$serve"
        for _ in $(seq 100); do kill -0 "$serve" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$serve" 2>/dev/null || true
    fi
}
trap stop_serve EXIT
for _ in $(seq 600); do
    grep -q "ready at" "$WORK/serve.log" && break
    kill -0 "$serve" 2>/dev/null || { echo "kuberay-envtest: emu serve exited:" >&2; cat "$WORK/serve.log" >&2; exit 2; }
    sleep 0.1
done
grep -q "ready at" "$WORK/serve.log" || { echo "kuberay-envtest: emu serve not ready in 60 s" >&2; exit 2; }
echo "kuberay-envtest: emu serve --bare ready in $(echo "$(date +%s.%N) - $began" | bc | cut -c1-5) s"

rm -f "$WORK/report.json"
set +e
(cd "$WORK/src/controllers/ray" && USE_EXISTING_CLUSTER=true KUBECONFIG=$KUBECONFIG_FILE \
    "$WORK/ray.test" -test.v -test.timeout 90m -ginkgo.no-color -ginkgo.v \
    -ginkgo.json-report="$WORK/report.json" "$@") > "$WORK/test.log" 2>&1
status=$?
set -e
echo "kuberay-envtest: go test exited $status; log in $WORK/test.log"
# The package's plain Go tests (fake clients, no server) run first, as under `go test`: one of
# the envtest specs reads a package variable their setup fills.
echo "kuberay-envtest: Go tests $(grep -c '^--- PASS' "$WORK/test.log") passed, $(grep -c '^--- FAIL' "$WORK/test.log") failed (TestAPIs is the Ginkgo suite):"
grep '^--- FAIL' "$WORK/test.log" | sed 's/^/  /' || true
"$PY" - "$WORK/report.json" <<'EOF'
import json
import sys

try:
    suites = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"kuberay-envtest: no Ginkgo report ({err}); see the test log")
counts: dict[str, int] = {}
failed = []
for suite in suites:
    for spec in suite.get("SpecReports") or []:
        if spec.get("LeafNodeType") != "It":
            if spec.get("State") not in ("passed", "skipped", "pending"):
                failed.append((spec.get("LeafNodeType", "?"), spec))
            continue
        state = spec.get("State", "?")
        counts[state] = counts.get(state, 0) + 1
        if state not in ("passed", "skipped", "pending"):
            failed.append(("It", spec))
print("kuberay-envtest: specs " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
for node, spec in failed:
    text = " ".join([*(spec.get("ContainerHierarchyTexts") or []), spec.get("LeafNodeText", "")])
    failure = spec.get("Failure") or {}
    loc = failure.get("Location") or {}
    msg = " ".join((failure.get("Message") or "").split())[:300]
    print(f"  {spec.get('State')}: {node} {text.strip()}\n    at {loc.get('FileName', '?').split('/controllers/')[-1]}:"
          f"{loc.get('LineNumber', '?')}: {msg}")
EOF
exit $status
