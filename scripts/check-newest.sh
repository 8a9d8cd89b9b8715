#!/usr/bin/env bash
# Try the newest versions pyproject.toml's ranges allow: a throwaway venv without constraints.txt,
# then the whole suite (scripts/test.sh, extra arguments go to pytest). Prints which packages
# differ from constraints.txt, and the suite's result. Run it on a schedule (weekly, say): green
# means `EMU_VENV=<the printed venv> bash scripts/lock.sh` may move the pins forward; red names
# what breaks before any user meets it.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
export EMU_VENV="$work/venv" EMU_CONSTRAINTS=none
bash scripts/setup.sh
echo "check-newest.sh: versions that differ from constraints.txt (pinned -> newest):"
"$EMU_VENV/bin/python" - <<'PY'
import re, subprocess, sys
pinned = {}
for line in open("constraints.txt"):
    m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
    if m:
        pinned[re.sub(r"[-_.]+", "-", m[1]).lower()] = m[2]
frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
                        capture_output=True, text=True, check=True).stdout
changed = 0
for line in frozen.splitlines():
    m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
    if not m:
        continue
    name = re.sub(r"[-_.]+", "-", m[1]).lower()
    if pinned.get(name) != m[2]:
        changed += 1
        print(f"  {name}: {pinned.get(name, '(not pinned)')} -> {m[2]}")
print(f"  {changed} package(s) differ")
PY
status=0
bash scripts/test.sh "$@" || status=$?
if [[ $status -eq 0 ]]; then
    echo "check-newest.sh: the suite passes on the newest versions; to pin them:"
    echo "  EMU_VENV=$EMU_VENV bash scripts/lock.sh"
else
    echo "check-newest.sh: the suite FAILS on the newest versions (exit $status); the venv is $EMU_VENV"
fi
exit $status
