"""Apply every KubeRay sample file, unchanged, to a fresh emulated world and drive its Ray objects.

Usage::

    python scripts/check_samples.py DIR [-k SUBSTRING] [--timeout SECONDS] [--wall SECONDS]
                                        [--crds] [--markdown]

``DIR`` is a KubeRay checkout (or its ``ray-operator/config/samples`` directory). For each
``*.yaml`` file, in path order, a fresh world (seed 1) gets the Kubernetes built-ins and the
KubeRay operator (its Helm chart's defaults), then every document of the file is applied as
``kubectl apply -f`` does (going on past a refused document). Each Ray object is then driven to its
goal within a virtual-time bound:

- RayCluster: ``status.state == "ready"``;
- RayJob: ``jobDeploymentStatus == "Complete"`` and ``jobStatus == "SUCCEEDED"`` (for an
  ``InteractiveMode`` RayJob the script does what its user does: submits the job and sets
  ``spec.jobId``, `drive_interactive`);
- RayService: ``serviceStatus == "Running"`` and its ``Ready`` condition ``True``;
- RayCronJob: ``status.lastScheduleTime`` set, i.e. it created its first RayJob (within
  `CRON_BOUND`, a day and an hour of virtual time, so a daily schedule fires).

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
#: Virtual seconds a RayCronJob gets to run its first tick (a daily schedule, any time zone).
CRON_BOUND = 25 * 3600.0

def _gpu(count: int, gpus: int, accelerator: str | None = None) -> Obj:
    """A GKE-style GPU node pool: ``count`` Nodes with ``gpus`` ``nvidia.com/gpu`` each."""
    labels = {"cloud.google.com/gke-accelerator": accelerator} if accelerator else {}
    return {"name": f"gpu-{accelerator or 'nvidia'}", "count": count, "labels": labels,
            "capacity": {"nvidia.com/gpu": str(gpus), "cpu": "224", "memory": "2Ti"}}


def _tpu(accelerator: str, topology: str, chips: int, hosts: int) -> Obj:
    """A GKE TPU slice: ``hosts`` Nodes labelled with the accelerator and topology, ``chips``
    ``google.com/tpu`` each."""
    return {"name": f"{accelerator}-{topology.replace('x', '-')}", "count": hosts,
            "labels": {"cloud.google.com/gke-tpu-accelerator": accelerator,
                       "cloud.google.com/gke-tpu-topology": topology},
            "capacity": {"google.com/tpu": str(chips), "cpu": "224", "memory": "1Ti"}}


def _labelled(name: str, count: int, labels: dict[str, str]) -> Obj:
    return {"name": name, "count": count, "labels": labels}


def _secret(name: str, **data: str) -> Obj:
    """A Secret the sample's instructions tell the user to create."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
            "stringData": data}


def _crd(group: str, version: str, kind: str, plural: str, scope: str = "Namespaced") -> Obj:
    """The CustomResourceDefinition an add-on (Kueue, KAI, Volcano, agent-sandbox) installs."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}},
                                   "subresources": {"status": {}}}]}}


_HF = _secret("hf-secret", hf_api_token="hf_fake")
#: The RayCluster ray-job.use-existing-raycluster.yaml selects: the sample says it must exist.
_EXISTING_CLUSTER: Obj = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "ray-cluster-kuberay", "namespace": "default"},
    "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:2.52.0",
         "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
             "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 1,
                                   "maxReplicas": 1, "rayStartParams": {},
                                   "template": {"spec": {"containers": [
                                       {"name": "ray-worker", "image": "rayproject/ray:2.52.0",
                                        "resources": {"limits": {"cpu": "1",
                                                                 "memory": "2Gi"}}}]}}}]}}
_KAI_QUEUE = _crd("scheduling.run.ai", "v2", "Queue", "queues", "Cluster")
_VOLCANO_QUEUE = _crd("scheduling.volcano.sh", "v1beta1", "Queue", "queues", "Cluster")
_TPU_V4_1 = _tpu("tpu-v4-podslice", "2x2x1", 4, 1)
_TPU_V6E_1 = _tpu("tpu-v6e-slice", "2x2", 4, 1)
_TPU_V6E_16 = _tpu("tpu-v6e-slice", "4x4", 4, 4)
_TPU_V6E_256 = _tpu("tpu-v6e-slice", "16x16", 4, 64)

#: World options by sample file name (relative to the samples directory): what a real cluster
#: would also need for the sample, never an edit of the sample (docs/samples.md lists each and
#: why). Keys: ``node_pools`` (`emu.kube.config.NodePool` fields: accelerator Nodes, labelled
#: Nodes a nodeSelector asks for), ``feature_gates`` (operator feature gates the sample says to
#: enable), ``gateway_classes`` (a Gateway API implementation such as Istio, `emu.kube.gateway`),
#: ``objects`` (what an add-on or the sample's instructions create first: CRDs,
#: Secrets), ``ray_images`` (an image the sample says to build or substitute, e.g. ``$VLLM_IMAGE``,
#: or a third-party image that ships Ray, e.g. verl's: it runs as a Ray image), ``cert_manager``
#: (cert-manager installed before KubeRay, `emu.kube.certmanager`).
WORLD_OPTIONS: dict[str, Obj] = {
    "agent-sandbox/sandbox.yaml": {"objects": [
        _crd("extensions.agents.x-k8s.io", "v1beta1", "SandboxTemplate", "sandboxtemplates"),
        _crd("extensions.agents.x-k8s.io", "v1beta1", "SandboxWarmPool", "sandboxwarmpools")]},
    "pytorch-resnet-image-classifier/ray-job.pytorch-image-classifier.yaml": {
        "node_pools": [_gpu(4, 1)]},
    "pytorch-text-classifier/ray-job.pytorch-distributed-training.yaml": {
        "node_pools": [_gpu(4, 1)]},
    "ray-cluster-label-selector.yaml": {"node_pools": [
        _labelled("n4", 1, {"cloud.google.com/machine-family": "N4"})]},
    "ray-cluster-resource-isolation-with-overrides.gke.yaml": {"node_pools": [
        _labelled("cgroups", 2, {"node.gke.io/enable-writable-cgroups": "true"})]},
    "ray-cluster-resource-isolation.gke.yaml": {"node_pools": [
        _labelled("cgroups", 2, {"node.gke.io/enable-writable-cgroups": "true"})]},
    "ray-cluster.auth-manual.yaml": {"objects": [
        _secret("ray-cluster-with-auth", auth_token="raycluster_secret")]},
    "ray-cluster.embedded-gcs-ft.yaml": {"feature_gates": {
        "GCSFaultToleranceEmbeddedStorage": True}},
    "ray-cluster.gke-bucket.yaml": {"node_pools": [
        _labelled("gke-metadata", 1, {"iam.gke.io/gke-metadata-server-enabled": "true"})]},
    "ray-cluster.historyserver.yaml": {"feature_gates": {"RayClusterHistoryServer": True}},
    "ray-cluster.kai-gpu-sharing.yaml": {"objects": [_KAI_QUEUE]},
    "ray-cluster.kai-scheduler.yaml": {"objects": [_KAI_QUEUE]},
    "ray-cluster.mtls.yaml": {"feature_gates": {"RayClusterMTLS": True}, "cert_manager": True},
    "ray-cluster.network-policy-deny-all.yaml": {"feature_gates": {
        "RayClusterNetworkPolicy": True}},
    "ray-cluster.tpu-v4-multihost.yaml": {"node_pools": [
        _tpu("tpu-v4-podslice", "2x2x2", 4, 2)]},
    "ray-cluster.tpu-v4-singlehost.yaml": {"node_pools": [_TPU_V4_1]},
    "ray-cluster.tpu-v6e-16-multihost.yaml": {"node_pools": [_TPU_V6E_16]},
    "ray-cluster.tpu-v6e-256-multihost.yaml": {"node_pools": [_TPU_V6E_256]},
    "ray-cluster.tpu-v6e-singlehost.yaml": {"node_pools": [_TPU_V6E_1]},
    # verl's image ships Ray; without probes a generic program passed for a Ray head here
    "ray-cluster.verl.yaml": {"node_pools": [_gpu(1, 4)], "ray_images": [
        "hiyouga/verl"]},
    "ray-cluster.volcano-scheduler-queue.yaml": {"objects": [_VOLCANO_QUEUE]},
    "ray-cronjob-timezone.sample.yaml": {"feature_gates": {"RayCronJob": True}},
    "ray-cronjob.sample.yaml": {"feature_gates": {"RayCronJob": True}},
    "ray-job.batch-inference.yaml": {"node_pools": [_gpu(1, 4, "nvidia-tesla-t4")]},
    "ray-job.tpu-jax.yaml": {"node_pools": [_TPU_V4_1]},
    "ray-job.tpu-v6e-16-multihost.yaml": {"node_pools": [_TPU_V6E_16]},
    "ray-job.tpu-v6e-256-multihost.yaml": {"node_pools": [_TPU_V6E_256]},
    "ray-job.tpu-v6e-singlehost.yaml": {"node_pools": [_TPU_V6E_1]},
    "ray-job.use-existing-raycluster.yaml": {"objects": [_EXISTING_CLUSTER]},
    "ray-job.volcano-scheduler-queue.yaml": {"objects": [_VOLCANO_QUEUE]},
    "ray-service.deepseek.yaml": {"node_pools": [_gpu(2, 8)]},
    "ray-service.high-throughput-gemma4.yaml": {"node_pools": [_gpu(1, 8, "nvidia-b200")],
                                                "objects": [_HF]},
    "ray-service.high-throughput-llm.yaml": {"node_pools": [_gpu(4, 1, "nvidia-l4")],
                                             "objects": [_HF]},
    "ray-service.incremental-upgrade.yaml": {"gateway_classes": ["istio"]},
    "ray-service.llm-serve.yaml": {"node_pools": [_gpu(1, 4)]},
    "ray-service.stable-diffusion.yaml": {"node_pools": [_gpu(1, 1)]},
    "ray-service.text-summarizer.yaml": {"node_pools": [_gpu(1, 1)]},
    "ray-service.tpu-single-host.yaml": {"node_pools": [_TPU_V4_1]},
    "vllm/ray-service.vllm-tpu-v6e-singlehost.yaml": {
        "node_pools": [_tpu("tpu-v6e-slice", "2x4", 8, 1)], "objects": [_HF],
        "ray_images": ["$VLLM_IMAGE"]},
}


def samples_dir(directory: Path) -> Path:
    """The samples directory of a KubeRay checkout (or ``directory`` itself)."""
    samples = directory / "ray-operator" / "config" / "samples"
    return samples if samples.is_dir() else directory


def sample_files(directory: Path) -> list[Path]:
    """The sample files under ``directory`` (a checkout or its samples directory), sorted."""
    return sorted(p for p in samples_dir(directory).rglob("*.yaml") if p.is_file())


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


async def drive_interactive(sim: Any, name: str, namespace: str | None, *,
                            timeout: float) -> None:
    """What the user of an InteractiveMode RayJob does (``kubectl ray job submit``): once the
    RayJob is Waiting, submit its entrypoint (or ``python -c "import ray; ray.init()"``) to its
    cluster's dashboard and set ``spec.jobId`` to the submission id."""
    from emu.ray.net import bind_caller, http_call

    job = await sim.wait_for("RayJob", name, lambda x: (x.get("status") or {}).get(
        "jobDeploymentStatus") == "Waiting" and (x.get("status") or {}).get("dashboardURL"),
        namespace=namespace, timeout=timeout)
    address = job["status"]["dashboardURL"].split("://", 1)[-1]
    entrypoint = (job.get("spec") or {}).get("entrypoint") or 'python -c "import ray; ray.init()"'
    answer = await http_call(bind_caller(sim.network, caller="kubectl-ray"), address, "POST",
                             "/api/jobs/", {"entrypoint": entrypoint})
    sid = answer.json()["submission_id"]
    await sim.client("kubectl").patch("RayJob", name, {"spec": {"jobId": sid}}, namespace)


async def _world_setup(sim: Any, options: Obj) -> None:
    for path in options.get("crd_files") or ():  # `kubectl create`: too big for apply's annotation
        crd = yaml.safe_load(Path(path).read_text())
        await sim.client("kubectl").create(crd)
    ray = sim.programs.lookup("rayproject/ray")
    for image in options.get("ray_images") or ():  # the user's own Ray-based image
        sim.programs.register(image, ray)
    for manifest in options.get("objects") or ():
        await sim.apply(manifest)


async def check_documents(sim: Any, text: str, options: Obj, *,
                          timeout: float = 1800.0) -> Obj:
    """Apply ``text`` to ``sim`` (KubeRay installed here) and drive its Ray objects; a result
    record: ``applied`` [(kind, name, outcome)], ``ray`` [(kind, name, ok, detail)]."""
    from emu.client.apply import apply_each

    if options.get("cert_manager"):  # before KubeRay: the operator looks for it at start
        from emu.kube.certmanager import install_cert_manager

        await install_cert_manager(sim)
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
        spec = (o.object or {}).get("spec") or {}
        if kind == "RayJob" and spec.get("submissionMode") == "InteractiveMode":
            try:
                await drive_interactive(sim, name, ns, timeout=max(deadline - sim.now, 1.0))
            except TimeoutError:
                pass  # reported below with where the RayJob got to
        bound = max(deadline - sim.now, 1.0)
        if kind == "RayCronJob":  # a daily schedule may first fire nearly a day later
            bound = max(bound, CRON_BOUND)
        try:
            obj = await sim.wait_for(kind, name, lambda x, k=kind: goal_reached(k, x),
                                     namespace=ns, timeout=bound)
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
    cluster = KubeConfig(node_pools=tuple(options.get("node_pools") or ()),
                         gateway_classes=tuple(options.get("gateway_classes") or ()))

    async def main(sim: Any) -> Obj:
        return await check_documents(sim, text, options, timeout=timeout)

    try:
        result: Obj = emu.run(main, seed=seed, cluster=cluster,
                              max_virtual_time=timeout + CRON_BOUND + 3600.0)
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
    parser.add_argument("--crds", action="store_true",
                        help="first create the checkout's own CRDs (ray-operator/config/crd/"
                             "bases), so the real schemas validate and default the samples")
    parser.add_argument("--markdown", action="store_true",
                        help="print a Markdown table (docs/samples.md's per-file results)")
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
        parser.error(f"no *.yaml files under {args.directory}"
                     + (f" with {args.pattern!r} in their path" if args.pattern else ""))
    base = samples_dir(args.directory)
    full = with_ray = ray_ok_count = 0
    start = time.monotonic()  # noqa: TID251 (wall-clock report)
    if args.markdown:
        print("| sample file | result | world options | applied, Ray objects (and what failed) |")
        print("|---|---|---|---|")
    for path in files:
        rel = path.relative_to(base).as_posix()
        has_ray = any(isinstance(d, dict) and d.get("kind") in RAY_KINDS
                      for d in _docs(path))
        options = dict(WORLD_OPTIONS.get(rel, {}))
        if args.crds:
            options["crd_files"] = [str(p) for p in sorted(
                (args.directory / "ray-operator" / "config" / "crd" / "bases").glob("*.yaml"))]
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
        if args.markdown:
            opts = ", ".join(sorted(options)) or "-"
            print(f"| `{rel}` | {'works' if ok else 'fails'} | {opts} | "
                  f"{line.replace('|', '/')} |", flush=True)
        else:
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
