"""Replay docs/findings.md's findings with a real KubeRay operator binary and print a verdict
table (see scripts/replay-findings-real.sh). Each run is a child process of its own (a paced
world with the binary's replicas as OS processes), ``-j`` at a time."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BINARY = os.path.expanduser("~/.cache/kuberay-emu/bin/ray-operator-v1.5.0")


def _one(path: str, binary: str, limit: float, shift: float, out: str) -> int:
    from emu.differential import replay_finding_once

    row = replay_finding_once(path, binary, limit=limit, shift=shift)
    Path(out).write_text(json.dumps(row, indent=1))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("files", nargs="*", help="docs/findings/test_*.py files (default: all)")
    p.add_argument("--binary", default=DEFAULT_BINARY)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--limit", type=float, default=900.0, help="virtual seconds per run")
    p.add_argument("--shift", type=float, default=0.0,
                   help="seconds to move every planned fault later (default 0: as recorded)")
    p.add_argument("--out", default="", help="a directory for each run's JSON (default: temp)")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return _one(args.one, args.binary, args.limit, args.shift, args.out)
    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        print(f"replay-findings-real: --binary {args.binary}: not an executable file "
              "(build it with scripts/build-kuberay.sh)", file=sys.stderr)
        return 2
    if args.runs < 1 or args.jobs < 1:
        print("replay-findings-real: --runs and -j must be at least 1", file=sys.stderr)
        return 2
    from emu.differential import finding_verdict, known_in_run, load_finding
    from emu.explore.known import KNOWN
    from emu.http.real_operator import binary_version

    files = [Path(f).resolve() for f in args.files] or \
        sorted((ROOT / "docs" / "findings").glob("test_*.py"))
    owner = {f: k.id for k in KNOWN for f in k.replays}
    for f in files:
        if not f.is_file():
            print(f"replay-findings-real: {f}: no such file", file=sys.stderr)
            return 2
    out = Path(args.out or tempfile.mkdtemp(prefix="emu-findings-real-"))
    out.mkdir(parents=True, exist_ok=True)
    # with --out, a run whose result is already there is kept (an interrupted table resumes)
    jobs = [(f, n) for n in range(args.runs) for f in files
            if not (out / f"{f.stem}.{n}.json").exists()]
    running: list[tuple[subprocess.Popen[bytes], Path, int]] = []
    while jobs or running:
        while jobs and len(running) < args.jobs:
            f, n = jobs.pop(0)
            target = out / f"{f.stem}.{n}.json"
            log = open(out / f"{f.stem}.{n}.log", "wb")  # noqa: SIM115 (the child's own)
            proc = subprocess.Popen([sys.executable, __file__, "--one", str(f), "--binary",
                                     args.binary, "--limit", str(args.limit), "--shift",
                                     str(args.shift), "--out",
                                     str(target)], stdout=log, stderr=subprocess.STDOUT)
            running.append((proc, f, n))
        done = [r for r in running if r[0].poll() is not None]
        if not done:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)  # until a child ends (not reaped)
            continue
        for proc, f, n in done:
            running.remove((proc, f, n))
            print(f"replay-findings-real: {f.name} run {n + 1}: exit {proc.returncode}",
                  file=sys.stderr, flush=True)
    version = binary_version(args.binary) or "(unknown version)"
    print(f"| finding | replay | verdict ({version}) | each run |")
    print("|---|---|---|---|")
    for f in files:
        rows = []
        for n in range(args.runs):
            target = out / f"{f.stem}.{n}.json"
            rows.append(json.loads(target.read_text()) if target.exists() else
                        {"outcome": "error", "error": f"the run wrote no result "
                                                      f"(see {target.with_suffix('.log')})"})
        module = load_finding(f)
        for r in rows:
            if r["outcome"] != "error":
                r["known"] = known_in_run(module, r)
        each = "; ".join(
            f"{i + 1}: " + (f"error ({r['error'][:120]}...)" if r["outcome"] == "error" else
                            f"{', '.join(r['known']) or 'nothing'} "
                            f"(broke {', '.join(r['invariants']) or 'nothing'})")
            for i, r in enumerate(rows))
        known_id = owner.get(f.name, "?")
        cells = [known_id, f.name, finding_verdict(rows, version, known_id), each]
        print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    print(f"(each run's JSON and log: {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
