"""Apply every KubeRay sample file, unchanged, to a fresh emulated world and drive its Ray objects.

Usage::

    python scripts/check_samples.py DIR [-k SUBSTRING] [--timeout SECONDS] [--wall SECONDS] [-v]

``DIR`` is a KubeRay checkout (or its ``ray-operator/config/samples`` directory). For each
``*.yaml`` file, in path order, a fresh world (seed 1) gets the Kubernetes built-ins and the
KubeRay operator (its Helm chart's defaults), then every document of the file is applied as
``kubectl apply -f`` does (going on past a refused document). Each Ray object is then driven to its
goal within a virtual-time bound:

- RayCluster: ``status.state == "ready"``;
- RayJob: ``jobDeploymentStatus == "Complete"`` and ``jobStatus == "SUCCEEDED"``;
- RayService: ``serviceStatus == "Running"`` and its ``Ready`` condition ``True``.

One line per file and a total are printed. A sample may get what a real cluster would also need
(GPU nodes, a Secret the sample says to create, a feature gate) from the world options in
`WORLD_OPTIONS`, which docs/samples.md lists; the sample itself is never edited. Each file runs in
its own subprocess with a wall-clock limit, so one hang or crash does not stop the others.

The logic (`check_text`) is importable so tests can run it on small manifests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

Obj = dict[str, Any]
RAY_KINDS = ("RayCluster", "RayJob", "RayService", "RayCronJob")

#: World options by sample file name (relative to the samples directory): what a real cluster
#: would also need for the sample (docs/samples.md lists each and why). Keys: ``feature_gates``
#: (operator feature gates), ``node_pools`` (extra Nodes: dicts of `emu.kube.config.NodePool`
#: fields), ``kinds`` (CRDs an add-on such as Kueue installs: (group, version, kind, plural,
#: namespaced)), ``objects`` (manifests a sample's instructions say to create first).
WORLD_OPTIONS: dict[str, Obj] = {}


def sample_files(directory: Path) -> list[Path]:
    """The sample files under ``directory`` (a checkout or its samples directory), sorted."""
    samples = directory / "ray-operator" / "config" / "samples"
    base = samples if samples.is_dir() else directory
    return sorted(p for p in base.rglob("*.yaml") if p.is_file())


def goal_reached(kind: str, obj: Obj) -> bool:
    """Whether a Ray object has reached the goal this script drives it to."""
    status = obj.get("status") or {}
    if kind == "RayCluster":
        return bool(status.get("state") == "ready")
    if kind == "RayJob":
        return bool(status.get("jobDeploymentStatus") == "Complete"
                    and status.get("jobStatus") == "SUCCEEDED")
    if kind == "RayService":
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        return bool(status.get("serviceStatus") == "Running" and ready)
    if kind == "RayCronJob":
        return bool(status.get("lastScheduleTime"))
    return True


def describe(kind: str, obj: Obj | None) -> str:
    """A short account of where a Ray object got to, for a failure line."""
    if obj is None:
        return "absent"
    status = obj.get("status") or {}
    if kind == "RayCluster":
        return f"state={status.get('state')!r} reason={status.get('reason')!r}"
    if kind == "RayJob":
        return (f"deployment={status.get('jobDeploymentStatus')!r} "
                f"job={status.get('jobStatus')!r} msg={status.get('message')!r}"[:200])
    if kind == "RayService":
        conds = {c.get("type"): c.get("reason") for c in status.get("conditions") or []}
        return f"serviceStatus={status.get('serviceStatus')!r} conditions={conds}"
    return f"status={status}"[:200]


async def _world_setup(sim: Any, options: Obj) -> None:
    for kind in options.get("kinds") or ():
        group, version, name, plural, namespaced = kind
        sim.register_kind(name, group=group, version=version, plural=plural,
                          namespaced=namespaced)
    for manifest in options.get("objects") or ():
        await sim.apply(manifest)


async def check_documents(sim: Any, text: str, options: Obj, *,
                          timeout: float = 1800.0) -> Obj:
    """Apply ``text`` to ``sim`` (KubeRay installed here) and drive its Ray objects; a result
    record: ``applied`` [(kind, name, outcome)], ``ray`` [(kind, name, ok, detail)]."""
    from emu.client.apply import apply_each

    kuberay = await sim.install_kuberay(feature_gates=options.get("feature_gates"))
    await kuberay.wait_for_leader(timeout=300)
    await _world_setup(sim, options)
    outcomes = await apply_each(sim.client("kubectl"), text, namespace="default")
    applied = [(o.kind, o.name, o.outcome) for o in outcomes]
    ray: list[tuple[str, str, bool, str]] = []
    deadline = sim.now + timeout
    for o in outcomes:
        if o.kind not in RAY_KINDS:
            continue
        if not o.ok:
            ray.append((o.kind, o.name, False, "not applied"))
            continue
        kind, name, ns = o.kind, o.name, o.namespace
        try:
            obj = await sim.wait_for(kind, name, lambda x, k=kind: goal_reached(k, x),
                                     namespace=ns, timeout=max(deadline - sim.now, 1.0))
            ray.append((kind, name, True, "ok"))
        except TimeoutError:
            obj = await sim.get(kind, name, ns)
            ray.append((kind, name, False, describe(kind, obj)))
    return {"applied": applied, "ray": ray}


def check_text(text: str, options: Obj | None = None, *, timeout: float = 1800.0,
               seed: int = 1) -> Obj:
    """Run one sample's text in a fresh world; the result record (see `check_documents`), with
    ``error`` set when the run itself failed."""
    import emu
    from emu.kube.config import KubeConfig

    options = options or {}
    cluster = KubeConfig(**(options.get("cluster") or {}))

    async def main(sim: Any) -> Obj:
        return await check_documents(sim, text, options, timeout=timeout)

    try:
        result: Obj = emu.run(main, seed=seed, cluster=cluster,
                              max_virtual_time=timeout + 3600.0)
    except Exception as err:  # a crash of the world is a result too
        return {"applied": [], "ray": [], "error": f"{type(err).__name__}: {err}"[:300]}
    return result


def verdict(result: Obj) -> tuple[str, bool, bool]:
    """(line suffix, file works fully, its Ray objects all work)."""
    if result.get("error"):
        return f"error: {result['error']}", False, False
    applied, ray = result["applied"], result["ray"]
    refused = [f"{k}/{n}: {o}" for k, n, o in applied
               if o not in ("created", "configured", "unchanged")]
    ray_ok = bool(ray) and all(ok for _k, _n, ok, _d in ray)
    parts = [f"applied {len(applied) - len(refused)}/{len(applied)}"]
    if ray:
        parts.append(f"ray {sum(ok for _k, _n, ok, _d in ray)}/{len(ray)}")
    detail = "; ".join(refused + [f"{k}/{n}: {d}" for k, n, ok, d in ray if not ok])
    line = ", ".join(parts) + (f"  -- {detail}" if detail else "")
    return line, not refused and (ray_ok or not ray), ray_ok


def _run_one(path: str, timeout: float, options: Obj) -> None:
    text = Path(path).read_text()
    print(json.dumps(check_text(text, options, timeout=timeout)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("-k", dest="pattern", default="", help="only files whose path has this")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="virtual seconds each file's Ray objects get (default 1800)")
    parser.add_argument("--wall", type=float, default=300.0,
                        help="wall-clock seconds a file may take (default 300)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        _run_one(str(args.directory), args.timeout, json.loads(args.options))
        return 0
    if not args.directory.is_dir():
        parser.error(f"{args.directory} is not a directory (give a KubeRay checkout)")
    files = [p for p in sample_files(args.directory) if args.pattern in str(p)]
    if not files:
        parser.error(f"no *.yaml files under {args.directory}")
    base = files[0]
    for p in files:
        while base not in p.parents and base != p:
            base = base.parent
    if base.is_file():
        base = base.parent
    full = with_ray = ray_ok_count = 0
    start = time.monotonic()  # noqa: TID251 (wall-clock report)
    for path in files:
        rel = str(path.relative_to(base))
        has_ray = any(isinstance(d, dict) and d.get("kind") in RAY_KINDS
                      for d in _docs(path))
        options = WORLD_OPTIONS.get(rel, {})
        t0 = time.monotonic()  # noqa: TID251 (wall-clock report)
        try:
            proc = subprocess.run(
                [sys.executable, __file__, str(path), "--one", "--timeout", str(args.timeout),
                 "--options", json.dumps(options)],
                capture_output=True, text=True, timeout=args.wall, cwd=ROOT)
            lines = proc.stdout.strip().splitlines()
            result = (json.loads(lines[-1]) if proc.returncode == 0 and lines else
                      {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]})
        except subprocess.TimeoutExpired:
            result = {"error": f"wall-clock limit of {args.wall:g}s"}
        line, ok, ray_ok = verdict(result)
        full += ok
        with_ray += has_ray
        ray_ok_count += has_ray and ray_ok
        took = time.monotonic() - t0  # noqa: TID251 (wall-clock report)
        print(f"{'PASS' if ok else 'FAIL'}  {rel}  {line}  ({took:.1f}s)", flush=True)
    took = time.monotonic() - start  # noqa: TID251 (wall-clock report)
    print(f"total: {full}/{len(files)} files work fully; {ray_ok_count}/{with_ray} files with "
          f"Ray objects get them all working ({took:.0f}s)")
    return 0 if full == len(files) else 1


def _docs(path: Path) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError:
        return []


if __name__ == "__main__":
    sys.exit(main())
