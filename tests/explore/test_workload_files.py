"""A workload a user writes (``emu explore -f FILE`` or ``Workload(...)``): every mistake is
refused naming what was wrong, never a traceback, and never accepted to do nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from explore_worlds import CONFIGMAP, FINE_YAML

from emu import cli
from emu.explore.workload import Knob, Workload, from_file

KNOBS = FINE_YAML.replace("kind: KnobSpace\n", "kind: KnobSpace\nknobs:\n  - {KNOB}\n")


@pytest.mark.parametrize(("text", "message"), [
    (FINE_YAML.replace("goal: {kind: ConfigMap, path: data.k,", "goal: {kind: ConfigMap,"),
     "goal needs kind, path and states (missing: path)"),
    (FINE_YAML.replace("setup: {nodes: 1,", "setup: {node: 1,"),
     "setup has unknown key(s) node; its keys are operator_replicas, redis, nodes, "
     "serve_import_paths, install, operator, lease"),
    (FINE_YAML.replace("kind: KnobSpace\n", "kind: KnobSpace\nfamiles: [outages]\n"),
     "the KnobSpace (document 2) has unknown key(s) familes; its keys are apiVersion, kind, "
     "metadata, knobs, goal, setup, families"),
    (FINE_YAML.replace("horizon: 5,", "horizon: 5, afterDelete: 3,"),
     "goal has unknown key(s) afterDelete"),
    (KNOBS.replace("{KNOB}", "{name: v, kind: ConfigMap, path: data.k, value: ['1', '2']}"),
     "knob 1 has unknown key(s) value"),
    (KNOBS.replace("{KNOB}", "{name: v, kind: ConfigMap, path: data.k, values: '12'}"),
     "knob 1: values must be a non-empty list (the first the default), not '12'"),
    (KNOBS.replace("{KNOB}", "{name: v, kind: Configmap, path: data.k, values: ['1', '2']}"),
     "knob 'v' of workload 'w' targets Configmap, which no manifest is (manifests: "
     "ConfigMap/settings)"),
    (KNOBS.replace("{KNOB}", "{name: v, kind: ConfigMap, path: data.k.x, values: ['1', '2']}"),
     "knob 'v' of workload 'w': path 'data.k.x' cannot be set in ConfigMap 'settings'"),
])
def test_a_mistake_in_a_workload_file_exits_2_naming_it(
        text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        from_file(path)
    assert message in str(err.value)
    assert cli.main(["explore", "-f", str(path), "--budget", "1",
                     "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written


def test_the_goal_of_a_workload_file_takes_after_delete(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(FINE_YAML.replace("horizon: 5,", "horizon: 5, after_delete: 7,"))
    goal = from_file(path).goal
    assert goal is not None and goal.after_delete == 7.0


def test_a_knob_that_could_change_nothing_is_refused_when_the_workload_is_made() -> None:
    # a list index past the end: setting it used to do nothing, silently, in every run
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "c", "namespace": "default"},
               "spec": {"workerGroupSpecs": [{"groupName": "w", "replicas": 1}]}}
    with pytest.raises(ValueError, match="path 'spec.workerGroupSpecs.1.replicas' cannot be set"):
        Workload("w", [cluster], [Knob("r", "RayCluster", "spec.workerGroupSpecs.1.replicas",
                                       (1, 2))])
    with pytest.raises(ValueError, match="targets RayCluster named 'd', which no manifest is"):
        Workload("w", [cluster], [Knob("r", "RayCluster", "spec.suspend", (None, True),
                                       object_name="d")])
    with pytest.raises(ValueError, match="knob 'r' of workload 'w' has no values"):
        Workload("w", [CONFIGMAP], [Knob("r", "ConfigMap", "data.k", ())])
    # a field created on the way, or removed, is a change
    Workload("w", [cluster], [Knob("s", "RayCluster", "spec.autoscalerOptions.idleTimeoutSeconds",
                                   (None, 1), at=5.0)])


RAYJOB_YAML = """\
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: job, namespace: default}
spec:
  entrypoint: python -c 'print(1)'
  rayClusterSpec:
    headGroupSpec:
      template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.46.0}]}}
    workerGroupSpecs:
      - groupName: small
        replicas: 1
        template: {spec: {containers: [{name: ray-worker, image: rayproject/ray:2.46.0}]}}
---
apiVersion: emu.dev/v1
kind: KnobSpace
knobs:
  - {KNOB}
"""


@pytest.mark.parametrize(("knob", "message"), [
    ("{name: b, kind: RayJob, path: spec.backofLimit, values: [null, 2]}",
     "knob 'b' of workload 'w': path 'spec.backofLimit' is not a field of RayJob: the schema "
     "declares no field 'backofLimit' under 'spec'; did you mean 'spec.backoffLimit'?"),
    ("{name: r, kind: RayJob, path: spec.rayClusterSpec.workerGroupSpecs.0.replica, "
     "values: [1, 2]}",
     "no field 'replica' under 'spec.rayClusterSpec.workerGroupSpecs.0'; did you mean "
     "'spec.rayClusterSpec.workerGroupSpecs.0.replicas'"),
    ("{name: t, kind: RayJob, path: spek.suspend, values: [null, true]}",
     "the schema declares no field 'spek' at the top level; did you mean 'spec'?"),
])
def test_a_knob_path_its_kinds_schema_does_not_declare_is_refused_before_any_run(
        knob: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(RAYJOB_YAML.replace("{KNOB}", knob))
    with pytest.raises(ValueError) as err:
        from_file(path)
    assert message in str(err.value)
    assert cli.main(["explore", "-f", str(path), "--budget", "1",
                     "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_manifest_field_its_schema_does_not_declare_is_refused_before_any_run(
        tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(RAYJOB_YAML.replace("  entrypoint:", "  backofLimit: 2\n  entrypoint:")
                    .replace("{KNOB}", "{name: b, kind: RayJob, path: spec.backoffLimit, "
                                       "values: [null, 2]}"))
    with pytest.raises(ValueError, match="workload 'w': RayJob 'job' has field\\(s\\) its schema "
                                         "does not declare: spec.backofLimit"):
        from_file(path)


def test_a_key_given_twice_in_a_workload_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(RAYJOB_YAML.replace("  entrypoint:", "  suspend: true\n  suspend: false\n"
                                                        "  entrypoint:")
                    .replace("{KNOB}", "{name: b, kind: RayJob, path: spec.backoffLimit, "
                                       "values: [null, 2]}"))
    with pytest.raises(ValueError, match='document 1 gives a key twice: line 6: key "suspend" '
                                         "already set in map"):
        from_file(path)


def test_knob_paths_below_fields_the_schema_keeps_open_and_of_kinds_without_one_pass() -> None:
    from emu.explore.workload import kind_schema, rayjob_workload, undeclared_path

    schema = kind_schema("RayJob")
    assert schema is not None
    assert undeclared_path(schema, "spec.backoffLimit") is None
    assert undeclared_path(schema, "metadata.labels.x") is None  # the API server's, not schema's
    assert undeclared_path(schema, "/spec/submitterPodTemplate/spec/containers/0/image") is None
    assert undeclared_path(schema, "spec.rayClusterSpec.workerGroupSpecs.small") == (
        "spec.rayClusterSpec.workerGroupSpecs is a list: 'small' is not an index")
    assert kind_schema("ConfigMap") is None
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "greetings.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Greeting", "plural": "greetings"},
                    "scope": "Namespaced", "versions": [
                        {"name": "v1", "served": True, "storage": True, "schema": {
                            "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                "type": "object", "properties": {
                                    "message": {"type": "string"}}}}}}}]}}
    greeting = kind_schema("Greeting", [crd])
    assert greeting is not None
    assert undeclared_path(greeting, "spec.mesage") == (
        "the schema declares no field 'mesage' under 'spec'; did you mean 'spec.message'?")
    rayjob_workload()  # the built-in workloads' knobs are all declared


def test_a_goal_no_manifest_can_reach_and_a_change_past_the_horizon_are_refused(
        tmp_path: Path) -> None:
    # A goal of a kind no manifest has was reached at once (nothing to wait for), so every
    # run deleted the workload straight away; a change past the horizon could come after the
    # run ended, or after the deletion, and do nothing.
    from emu.explore.workload import Goal

    with pytest.raises(ValueError, match="the goal of workload 'w' waits for Configmap, which "
                                         r"no manifest is \(kinds: ConfigMap\)"):
        Workload("w", [CONFIGMAP], goal=Goal("Configmap", "data.k", ("1",)))
    with pytest.raises(ValueError, match="knob 'late' of workload 'w' changes at t=130s, "
                                         r"outside the goal's horizon \(0 to 120s\)"):
        Workload("w", [CONFIGMAP], [Knob("late", "ConfigMap", "data.k", (None, "2"), at=130.0)],
                 goal=Goal("ConfigMap", "data.k", ("1", "2"), horizon=120.0))
    path = tmp_path / "w.yaml"
    path.write_text(FINE_YAML.replace("goal: {kind: ConfigMap,", "goal: {kind: Configmap,"))
    with pytest.raises(ValueError, match="waits for Configmap"):
        from_file(path)


def test_the_knobspace_example_of_docs_explore_md_runs(tmp_path: Path) -> None:
    # it used to name a Greeting kind, which an `emu explore -f` world (KubeRay) does not serve
    import re

    import yaml

    from emu.explore.search import explore
    from emu.explore.workload import builtin

    doc = (Path(__file__).resolve().parents[2] / "docs" / "explore.md").read_text()
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "KnobSpace" in b]
    cluster = dict(builtin("raycluster").manifests[0])
    cluster["metadata"] = {"name": "my-cluster", "namespace": "default"}
    path = tmp_path / "my-manifests.yaml"
    path.write_text(yaml.safe_dump(cluster) + block)
    wl = from_file(path)
    assert [k.name for k in wl.knobs] == ["workers", "suspend"]
    result = explore(wl, budget=2, seed=1, shrink_budget=0, export=False)
    assert result.runs == 2 and not result.errors and not result.findings
