"""scripts/check_samples.py's logic on small manifests written here (the script itself needs a
KubeRay checkout, so it does not run in CI): apply goes on past a refused document, each Ray object
is driven to its goal, world options give a sample what a real cluster would."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from emu.client.apply import apply_each

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "check_samples.py"
_spec = importlib.util.spec_from_file_location("check_samples", _PATH)
assert _spec is not None and _spec.loader is not None
check_samples = importlib.util.module_from_spec(_spec)
sys.modules["check_samples"] = check_samples
_spec.loader.exec_module(check_samples)

CLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: tiny
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      metadata: null
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
          resources: {limits: {cpu: "1", memory: 2Gi}}
  workerGroupSpecs:
  - groupName: workers
    replicas: 1
    rayStartParams:
      resources: '"{\\"custom\\": 2}"'
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.52.0
          resources: {limits: {cpu: "1", memory: 2Gi}}
"""

UNKNOWN_THEN_CONFIGMAP = """
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: after
data: {a: "1"}
"""

LIGHT_WEIGHT_JOB = """
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: lw
spec:
  entrypoint: python -c "print(1)"
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.52.0
  submitterPodTemplate:
    spec:
      restartPolicy: Never
      containers:
      - name: submitter
        image: quay.io/kuberay/submitter:v1.5.1
        command: ["/submitter"]
        args: ["--runtime-env-json", '{"env_vars": {"A": "1"}}', "--", "python", "main.py"]
"""

INTERACTIVE_JOB = """
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: interactive
spec:
  submissionMode: InteractiveMode
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.52.0
"""

GPU_CLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: gpu
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
          resources: {limits: {cpu: "1", memory: 2Gi, nvidia.com/gpu: "1"}}
        nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}
"""


def test_a_cluster_reaches_ready_with_null_template_metadata_and_go_quoted_resources():
    result = check_samples.check_text(CLUSTER, timeout=600)
    assert [tuple(r) for r in result["ray"]] == [("RayCluster", "tiny", True, "ok")], result
    line, full, ray_ok = check_samples.verdict(result)
    assert (line, full, ray_ok) == ("applied 1/1, ray 1/1", True, True)


def test_apply_goes_on_past_a_refused_document_and_reports_each():
    import emu

    async def main(sim):
        outcomes = await apply_each(sim.client("kubectl"), UNKNOWN_THEN_CONFIGMAP)
        again = await apply_each(sim.client("kubectl"), UNKNOWN_THEN_CONFIGMAP)
        return outcomes, again, await sim.get("ConfigMap", "after")

    outcomes, again, cm = emu.run(main)
    assert [(o.kind, o.name, o.ok) for o in outcomes] == [("Widget", "w", False),
                                                         ("ConfigMap", "after", True)]
    assert outcomes[0].outcome == 'the server doesn\'t have a resource type "Widget"'
    assert outcomes[1].outcome == "created" and again[1].outcome == "unchanged"
    assert cm is not None


def test_sim_apply_raises_the_first_refusal_after_applying_the_rest():
    import emu
    from emu.apiserver.errors import ApiError

    async def main(sim):
        with pytest.raises(ApiError) as err:
            await sim.apply(UNKNOWN_THEN_CONFIGMAP)
        return err.value, await sim.get("ConfigMap", "after")

    err, cm = emu.run(main)
    assert err.code == 404 and cm is not None
    assert "ConfigMap/after: created" in "\n".join(err.__notes__)


def test_light_weight_submitter_job_completes():
    result = check_samples.check_text(LIGHT_WEIGHT_JOB, timeout=900)
    assert [tuple(r) for r in result["ray"]] == [("RayJob", "lw", True, "ok")], result


def test_interactive_job_is_driven_as_its_user_would():
    result = check_samples.check_text(INTERACTIVE_JOB, timeout=900)
    assert [tuple(r) for r in result["ray"]] == [("RayJob", "interactive", True, "ok")], result


def test_gpu_sample_needs_a_gpu_pool_as_a_real_cluster_would():
    without = check_samples.check_text(GPU_CLUSTER, timeout=300)
    assert [r[2] for r in without["ray"]] == [False]
    pool = {"name": "l4", "count": 1,
            "labels": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "capacity": {"nvidia.com/gpu": "1"}}
    with_pool = check_samples.check_text(GPU_CLUSTER, {"node_pools": [pool]}, timeout=300)
    assert [r[2] for r in with_pool["ray"]] == [True], with_pool


def test_world_options_name_real_sample_files_and_known_keys():
    keys = {"node_pools", "feature_gates", "objects", "ray_images", "cert_manager",
            "gateway_classes"}
    for name, options in check_samples.WORLD_OPTIONS.items():
        assert name.endswith(".yaml")
        assert set(options) <= keys, name


def test_sample_files_lists_yaml_under_a_checkout(tmp_path):
    samples = tmp_path / "ray-operator" / "config" / "samples"
    (samples / "sub").mkdir(parents=True)
    for rel in ("b.yaml", "a.yaml", "sub/c.yaml", "notes.md"):
        (samples / rel).write_text("")
    assert [p.relative_to(samples).as_posix() for p in check_samples.sample_files(tmp_path)] == \
        ["a.yaml", "b.yaml", "sub/c.yaml"]
