"""Workloads to explore: manifests, the knob space that varies them, and how a run drives them.

A `Workload` is data: the manifests a user would ``kubectl apply``, a `Knob` per spec field the
explorer may vary (`Knob.values[0]` is the default, ``None`` meaning "leave the field out"), the
world it needs (`Setup`: operator replicas, Redis, Nodes) and when a run is over (`Goal`). Knobs
with an ``at`` are changes made *during* a run (``kubectl patch`` of that field at that many
virtual seconds after the manifests were applied): suspend toggles, a serve config change, a
cluster spec change.

Built-ins (`builtin`): ``raycluster``, ``rayjob`` and ``rayservice``, each a small but realistic
manifest set with KubeRay installed with two replicas (``rayservice`` also sends requests to
its serve Service, `Setup.traffic`). `from_file` reads any YAML manifests; a
document of ``kind: KnobSpace`` in the file declares its knobs (see docs/explore.md). A scenario
name is a workload too (`scenario_workload`): the scenario drives the world, the explorer adds
faults and invariants on top.

About 670 lines, one module: the knob space, the checks that refuse a knob or goal that could
do nothing (or that the kind's schema does not declare), the YAML reader, the built-ins and the
``module:attr`` loader of your own workloads share one vocabulary (`Knob`, `Goal`, `Setup`).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

Obj = dict[str, Any]

NS = "default"


def _tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(values)


@attrs.frozen
class Knob:
    """One spec field the explorer may vary: ``path`` (dotted, e.g. ``spec.backoffLimit``) of
    every manifest of ``kind`` (and ``name`` when given). ``values[0]`` is the default; ``None``
    removes the field. With ``at``, the value is patched in ``at`` virtual seconds after the
    manifests were applied (``None`` then means "no change")."""

    name: str
    kind: str
    path: str
    values: tuple[Any, ...] = attrs.field(converter=_tuple)
    at: float | None = None
    object_name: str | None = None

    @property
    def default(self) -> Any:
        return self.values[0] if self.values else None

    def to_dict(self) -> Obj:
        return attrs.asdict(self)


@attrs.frozen
class Setup:
    """The world a workload runs in: operator replicas (leader election on), an in-cluster Redis
    at ``redis:6379``, the number of Nodes, and fast Serve builds for ``serve_import_paths``.

    ``install`` (``"module:function"``) starts *your* controller instead of KubeRay: it is called
    as ``function(sim)`` (awaited when it returns an awaitable) once the Nodes are ready;
    ``operator`` is a part of its processes' names and ``lease`` its leader-election Lease (empty:
    none to wait for), so the plans can find its writes and its leader.

    ``traffic``: URLs (``host:port/path``, a Service's DNS name) a client GETs every
    ``traffic_interval`` seconds from the apply on, as the application's users would; its lane
    is ``traffic/serve`` (the first URL) or ``traffic/serve-<i>``, each refusal streak a
    ``requests_failing`` event the request-traffic invariants read."""

    operator_replicas: int = 2
    redis: bool = False
    nodes: int = 3
    serve_import_paths: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    install: str | None = None
    operator: str = "kuberay-operator"
    lease: str = "ray-operator-leader"
    traffic: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    traffic_interval: float = 1.0

    def __attrs_post_init__(self) -> None:
        for url in self.traffic:
            host, sep, _path = str(url).partition("/")
            if not sep or ":" not in host:
                raise ValueError(f"Setup.traffic: {url!r} is not host:port/path (e.g. "
                                 "'rs-serve-svc.default.svc.cluster.local:8000/fruit')")
        if self.traffic_interval <= 0:
            raise ValueError(f"Setup.traffic_interval must be positive, not "
                             f"{self.traffic_interval!r}")


@attrs.frozen
class Goal:
    """When a run is over: every object of ``kind`` reached ``path`` in ``states`` (or the run
    reached ``horizon`` virtual seconds after the apply); then, when ``delete`` is set, the
    workload's objects are deleted and the run waits ``after_delete`` seconds (the cleanup
    invariants look at what is left). Each path of ``clear`` must be empty too (absent, null,
    ``""``, ``{}`` or ``[]``): a change in progress that the status names — a RayService's
    pending cluster — is waited for, so the run does not delete the workload mid-change."""

    kind: str
    path: str
    states: tuple[str, ...] = attrs.field(converter=_tuple)
    horizon: float = 400.0
    delete: bool = True
    after_delete: float = 60.0
    clear: tuple[str, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen(eq=False)
class Workload:
    """Manifests, the knob space, the world they need, and when a run is over."""

    name: str
    manifests: tuple[Obj, ...] = attrs.field(converter=_tuple, repr=False)
    knobs: tuple[Knob, ...] = attrs.field(converter=_tuple, factory=tuple)
    setup: Setup = attrs.field(factory=Setup)
    goal: Goal | None = None
    scenario: str | None = None
    #: The plan families to generate (`emu.explore.plans.FAMILIES`); empty: all but the opt-in
    #: ones (`emu.explore.plans.OPT_IN`). A user who suspects one kind of fault narrows the
    #: search to it.
    families: tuple[str, ...] = attrs.field(converter=_tuple, default=())

    def __attrs_post_init__(self) -> None:
        _check_manifest_fields(self.name, self.manifests)
        for k in self.knobs:
            _check_reach(self.name, k, self.manifests)
            _check_declared(self.name, k, self.manifests)
        goal = self.goal
        if goal is None or self.scenario is not None:
            return
        # a goal of a kind no manifest has would be reached at once (no object to wait for):
        # every run would delete the workload straight away and test nothing
        if not any(m.get("kind") == goal.kind for m in self.manifests):
            kinds = ", ".join(sorted({str(m.get("kind")) for m in self.manifests})) or "none"
            raise ValueError(f"the goal of workload {self.name!r} waits for {goal.kind}, which "
                             f"no manifest is (kinds: {kinds})")
        for k in self.knobs:
            if k.at is not None and not 0 <= k.at < goal.horizon:
                raise ValueError(f"knob {k.name!r} of workload {self.name!r} changes at "
                                 f"t={k.at:g}s, outside the goal's horizon (0 to "
                                 f"{goal.horizon:g}s): a run may end before the change")

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        known = ", ".join(k.name for k in self.knobs) or "none"
        raise KeyError(f"workload {self.name!r} has no knob {name!r}; its knobs: {known}")

    def check_knobs(self, knobs: Mapping[str, Any]) -> None:
        """A `KeyError` naming an unknown knob, a `ValueError` naming a value not in its space."""
        for name, value in knobs.items():
            k = self.knob(name)
            if value not in k.values:
                raise ValueError(f"knob {name!r} of workload {self.name!r} takes one of "
                                 f"{list(k.values)!r}, not {value!r}")

    def manifests_for(self, knobs: Mapping[str, Any]) -> list[Obj]:
        """The manifests with the static knobs (those without ``at``) set."""
        out = copy.deepcopy(list(self.manifests))
        for name, value in sorted(knobs.items()):
            k = self.knob(name)
            if k.at is not None:
                continue
            for obj in out:
                if _targets(k, obj):
                    set_path(obj, k.path, value)
        return out

    def changes_for(self, knobs: Mapping[str, Any]) -> list[tuple[float, Knob, Any]]:
        """The timed knob changes ``(at, knob, value)`` to make during the run, by time. A timed
        knob not in ``knobs`` takes its default (``values[0]``; a static knob's default is what
        the manifests already say): a workload whose default is a change (``values=(True,
        None)``) makes it in every run that does not set the knob."""
        for name in knobs:
            self.knob(name)
        out = []
        for k in self.knobs:
            value = knobs.get(k.name, k.default)
            if k.at is not None and value is not None:
                out.append((k.at, k, value))
        return sorted(out, key=lambda c: (c[0], c[1].name))

    def changed(self, knobs: Mapping[str, Any]) -> dict[str, Any]:
        """Only the knobs that differ from their default, by name."""
        return {n: v for n, v in sorted(knobs.items()) if self.knob(n).default != v}


def _targets(knob: Knob, obj: Obj) -> bool:
    return obj.get("kind") == knob.kind and (
        knob.object_name is None or (obj.get("metadata") or {}).get("name") == knob.object_name)


def _check_reach(workload: str, knob: Knob, manifests: Iterable[Obj]) -> None:
    """A `ValueError` when ``knob`` could never change anything: no manifest of its kind (and
    name), no values, or a value its path cannot be set to in a manifest it targets (a list
    index past the end, a field on the way that is not a mapping). Such a knob would be
    accepted and silently do nothing, while every run that sets it counts as tested."""
    if not knob.values:
        raise ValueError(f"knob {knob.name!r} of workload {workload!r} has no values "
                         "(values[0] is the default)")
    targets = [m for m in manifests if _targets(knob, m)]
    if not targets:
        what = knob.kind + (f" named {knob.object_name!r}" if knob.object_name else "")
        kinds = ", ".join(sorted({f"{m.get('kind')}/{(m.get('metadata') or {}).get('name')}"
                                  for m in manifests})) or "none"
        raise ValueError(f"knob {knob.name!r} of workload {workload!r} targets {what}, which no "
                         f"manifest is (manifests: {kinds})")
    for obj in targets:
        for value in knob.values:
            if value is None:
                continue
            probe = copy.deepcopy(obj)
            try:
                set_path(probe, knob.path, value)
                reached = get_path(probe, knob.path) == value
            except (IndexError, ValueError, TypeError):
                reached = False
            if not reached:
                name = (obj.get("metadata") or {}).get("name")
                raise ValueError(
                    f"knob {knob.name!r} of workload {workload!r}: path {knob.path!r} cannot "
                    f"be set in {knob.kind} {name!r} (a list index past its end, or a field "
                    "on the way that is not a mapping), so the knob would change nothing")


def kind_schema(kind: str, manifests: Iterable[Obj] = ()) -> Obj | None:
    """The ``openAPIV3Schema`` the API server checks ``kind`` against: a CRD among
    ``manifests`` that defines it (its storage version), else the built-in ray.io kinds' derived
    schema (`emu.apiserver.rayschemas`); None for other kinds (no schema here)."""
    from ..apiserver.schema import version_schema

    for m in manifests:
        if m.get("kind") != "CustomResourceDefinition":
            continue
        spec = m.get("spec") or {}
        if (spec.get("names") or {}).get("kind") != kind:
            continue
        versions = spec.get("versions") or []
        chosen = next((v for v in versions if v.get("storage")), versions[0] if versions else {})
        return version_schema(m, str(chosen.get("name", "")))
    from ..apiserver.rayschemas import RAY_SCHEMAS

    return RAY_SCHEMAS.get(kind)


def undeclared_path(schema: Obj, path: str) -> str | None:
    """Why ``path`` is not a field ``schema`` declares (naming the first part that is not, and
    the close matches at that level), or None when it is declared or the schema keeps unknown
    fields there. ``apiVersion``, ``kind`` and ``metadata`` are the API server's, not the
    schema's: not checked."""
    parts = _parts(path)
    if not parts or parts[0] in ("apiVersion", "kind", "metadata"):
        return None
    node: Any = schema
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            return None
        if node.get("type") == "array" or "items" in node:
            if not part.isdigit():
                return (f"{'.'.join(parts[:i]) or 'the object'} is a list: {part!r} is not an "
                        "index")
            node = node.get("items")
            continue
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if isinstance(props, dict) and part in props:
            node = props[part]
            continue
        if isinstance(extra, dict):
            node = extra
            continue
        if node.get("x-kubernetes-preserve-unknown-fields") or extra is True or \
                (props is None and extra is None):
            return None
        where = ".".join(parts[:i])
        close = difflib.get_close_matches(part, sorted(props or {}), n=3, cutoff=0.6)
        prefix = where + "." if where else ""
        hint = ("; did you mean " + " or ".join(repr(prefix + c) for c in close) + "?"
                if close else "")
        under = f"under {where!r}" if where else "at the top level"
        return f"the schema declares no field {part!r} {under}{hint}"
    return None


def _check_manifest_fields(workload: str, manifests: Iterable[Obj]) -> None:
    """A `ValueError` naming the fields of a manifest its kind's schema does not declare: every
    run applies the manifests with ``fieldValidation=Strict`` (as kubectl does), which refuses
    them, so the mistake is named before any run rather than failing each."""
    from ..apiserver.schema import compile_schema

    manifests = list(manifests)
    for m in manifests:
        schema = kind_schema(str(m.get("kind")), manifests)
        if schema is None:
            continue
        unknown = compile_schema(schema).unknown_fields(m)
        if unknown:
            name = (m.get("metadata") or {}).get("name")
            raise ValueError(
                f"workload {workload!r}: {m.get('kind')} {name!r} has field(s) its schema does "
                f"not declare: {', '.join(unknown)} (the API server refuses them: "
                "fieldValidation=Strict)")


def _check_declared(workload: str, knob: Knob, manifests: Iterable[Obj]) -> None:
    """A `ValueError` when ``knob.path`` is not a field of its kind's schema (`kind_schema`): a
    misspelt path (``spec.backofLimit``) would be pruned by the API server and vary nothing."""
    schema = kind_schema(knob.kind, manifests)
    if schema is None:
        return
    problem = undeclared_path(schema, knob.path)
    if problem is not None:
        raise ValueError(f"knob {knob.name!r} of workload {workload!r}: path {knob.path!r} is "
                         f"not a field of {knob.kind}: {problem}")


def _parts(path: str) -> list[str]:
    """``spec.a.0.b`` or, for keys with dots, a JSON pointer ``/metadata/annotations/ray.io~1x``."""
    if path.startswith("/"):
        return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
    return path.split(".")


def _step(cur: Any, part: str, create: bool) -> Any:
    if isinstance(cur, list):
        i = int(part)
        return cur[i] if -len(cur) <= i < len(cur) else None
    if not isinstance(cur, dict):
        return None
    nxt = cur.get(part)
    if nxt is None and create:
        nxt = cur[part] = {}
    return nxt


def set_path(obj: Obj, path: str, value: Any) -> None:
    """Set a dotted ``path`` in ``obj`` (list items by index; maps created on the way);
    ``None`` removes the field."""
    parts = _parts(path)
    cur: Any = obj
    for part in parts[:-1]:
        cur = _step(cur, part, create=value is not None)
        if cur is None:
            return
    last = parts[-1]
    if isinstance(cur, list):
        cur[int(last)] = copy.deepcopy(value)
    elif value is None:
        cur.pop(last, None)
    else:
        cur[last] = copy.deepcopy(value)


def get_path(obj: Obj | None, path: str) -> Any:
    """The value at ``path`` in ``obj``, or None."""
    cur: Any = obj
    for part in _parts(path):
        cur = _step(cur, part, create=False)
        if cur is None:
            return None
    return cur


# ---------------------------------------------------------------------------------------------
# Built-in workloads
# ---------------------------------------------------------------------------------------------


def _cluster_spec(workers: int = 1) -> Obj:
    """The scenarios' RayCluster spec (one head, ``workers`` workers, GCS in memory)."""
    from ..scenarios._common import raycluster

    return dict(raycluster(workers=workers)["spec"])


SLEEP_OK = "python -c 'import time; time.sleep(20)'"
SLEEP_FAIL = "python -c 'import sys, time; time.sleep(20); sys.exit(1)'"


def rayjob_workload() -> Workload:
    """A RayJob (K8sJobMode, a 20 s job, the cluster shut down when it finishes)."""
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "demo-job", "namespace": NS},
                "spec": {"entrypoint": SLEEP_OK, "submissionMode": "K8sJobMode",
                         "shutdownAfterJobFinishes": True, "rayClusterSpec": _cluster_spec(1)}}
    knobs = [
        Knob("submissionMode", "RayJob", "spec.submissionMode",
             ("K8sJobMode", "HTTPMode", "SidecarMode")),
        Knob("entrypoint", "RayJob", "spec.entrypoint", (SLEEP_OK, SLEEP_FAIL)),
        Knob("backoffLimit", "RayJob", "spec.backoffLimit", (None, 1, 2)),
        Knob("submitterBackoffLimit", "RayJob", "spec.submitterConfig.backoffLimit",
             (None, 0, 1)),
        Knob("shutdownAfterJobFinishes", "RayJob", "spec.shutdownAfterJobFinishes",
             (True, False)),
        Knob("ttlSecondsAfterFinished", "RayJob", "spec.ttlSecondsAfterFinished", (None, 10)),
        Knob("activeDeadlineSeconds", "RayJob", "spec.activeDeadlineSeconds", (None, 30, 120)),
        Knob("workers", "RayJob", "spec.rayClusterSpec.workerGroupSpecs.0.replicas", (1, 0, 2)),
        Knob("suspend", "RayJob", "spec.suspend", (None, True), at=8.0),
        Knob("unsuspend", "RayJob", "spec.suspend", (None, False), at=40.0),
    ]
    return Workload("rayjob", [manifest], knobs,
                    goal=Goal("RayJob", "status.jobDeploymentStatus",
                              ("Complete", "Failed", "Suspended", "ValidationFailed"),
                              horizon=400.0))


def raycluster_workload() -> Workload:
    """A RayCluster of a head and one worker; GCS fault tolerance is a knob."""
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "raycluster", "namespace": NS}, "spec": _cluster_spec(1)}
    knobs = [
        Knob("gcsFaultTolerance", "RayCluster", "spec.gcsFaultToleranceOptions",
             (None, {"redisAddress": "redis:6379"})),
        Knob("externalStorageNamespace", "RayCluster",
             "spec.gcsFaultToleranceOptions.externalStorageNamespace", (None, "shared-ns")),
        Knob("workers", "RayCluster", "spec.workerGroupSpecs.0.replicas", (1, 0, 2)),
        Knob("suspend", "RayCluster", "spec.suspend", (None, True), at=30.0),
        Knob("unsuspend", "RayCluster", "spec.suspend", (None, False), at=60.0),
        # suspended again while the resumed Pods start (Kueue preempting just after admitting)
        Knob("resuspend", "RayCluster", "spec.suspend", (None, True), at=63.0),
        Knob("disableHeadRestart", "RayCluster",
             "/metadata/annotations/ray.io~1disable-provisioned-head-restart", (None, "true")),
        Knob("scale", "RayCluster", "spec.workerGroupSpecs.0.replicas", (None, 3), at=20.0),
    ]
    return Workload("raycluster", [manifest], knobs, setup=Setup(redis=True),
                    goal=Goal("RayCluster", "status.state", ("ready", "suspended"),
                              horizon=120.0))


SERVE_PATH = "fruit.deployment_graph"


def _serve_config(import_path: str = SERVE_PATH, replicas: int = 1) -> str:
    return yaml.safe_dump({"applications": [{
        "name": "app1", "import_path": import_path, "route_prefix": "/fruit",
        "deployments": [{"name": "MangoStand", "num_replicas": replicas,
                         "ray_actor_options": {"num_cpus": 0.1}}]}]}, sort_keys=False)


def rayservice_workload() -> Workload:
    """A RayService (NewCluster upgrades) with a head-only cluster serving one application."""
    spec = _cluster_spec(0)
    spec["workerGroupSpecs"] = []
    # KubeRay's default ports (serve 8000 included) only when the container names none
    spec["headGroupSpec"]["template"]["spec"]["containers"][0].pop("ports")
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayService",
                "metadata": {"name": "rs", "namespace": NS},
                "spec": {"upgradeStrategy": {"type": "NewCluster"},
                         "serveConfigV2": _serve_config(), "rayClusterConfig": spec}}
    knobs = [
        Knob("upgradeStrategy", "RayService", "spec.upgradeStrategy.type",
             ("NewCluster", "None")),
        Knob("deletionDelay", "RayService", "spec.rayClusterDeletionDelaySeconds", (None, 0, 5)),
        Knob("serveConfigChange", "RayService", "spec.serveConfigV2",
             (None, _serve_config(replicas=2)), at=40.0),
        Knob("clusterSpecChange", "RayService", "spec.rayClusterConfig.rayVersion",
             (None, "2.47.0"), at=40.0),
        Knob("gcsFaultTolerance", "RayService", "spec.rayClusterConfig.gcsFaultToleranceOptions",
             (None, {"redisAddress": "redis:6379"})),
        Knob("externalStorageNamespace", "RayService",
             "spec.rayClusterConfig.gcsFaultToleranceOptions.externalStorageNamespace",
             (None, "shared-ns")),
    ]
    return Workload("rayservice", [manifest], knobs,
                    setup=Setup(redis=True, serve_import_paths=(SERVE_PATH,),
                                traffic=("rs-serve-svc.default.svc.cluster.local:8000/fruit",)),
                    goal=Goal("RayService", "status.serviceStatus", ("Running",),
                              horizon=300.0,
                              clear=("status.pendingServiceStatus.rayClusterName",)))


BUILTINS = {"raycluster": raycluster_workload, "rayjob": rayjob_workload,
            "rayservice": rayservice_workload}


def builtin(name: str) -> Workload:
    """The built-in workload ``name`` (``raycluster``, ``rayjob``, ``rayservice``)."""
    try:
        return BUILTINS[name]()
    except KeyError:
        raise KeyError(f"no built-in workload {name!r}; built-ins: "
                       + ", ".join(sorted(BUILTINS))) from None


def scenario_workload(name: str) -> Workload:
    """A registered scenario as a workload: it drives its own world; no knobs."""
    from .. import scenarios

    scenarios.get(name)  # KeyError naming the known scenarios
    return Workload(name, [], scenario=name)


def load_python(ref: str, what: str) -> Any:
    """The object ``module:attr`` names (``module`` imported from ``sys.path``), called with no
    arguments when it is a function or a class; a `ValueError` naming ``what`` and the
    reference when either part is missing."""
    import importlib

    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{what} {ref!r}: give module:attr (a module on sys.path, e.g. "
                         "my_workloads:nightly)")
    try:
        obj = importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ValueError(f"{what} {ref!r}: {err} (it is imported from sys.path: add the folder "
                         "that holds it to PYTHONPATH)") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what} {ref!r}: {getattr(obj, '__name__', module)!r} has no "
                             f"{part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        return obj
    try:
        return obj()
    except TypeError as err:
        raise ValueError(f"{what} {ref!r} could not be called with no arguments: {err}") \
            from None


def resolve(name: str) -> Workload:
    """A built-in workload, a scenario, by name, or ``module:attr``: your `Workload` value (or a
    function returning one) in a module on ``sys.path``. A `KeyError` listing the built-ins
    and scenarios otherwise; a `ValueError` for a ``module:attr`` that is not a workload."""
    if name in BUILTINS:
        return builtin(name)
    if ":" in name:
        obj = load_python(name, "workload")
        if not isinstance(obj, Workload):
            raise ValueError(f"workload {name!r} is a {type(obj).__name__}, not an "
                             "emu.explore.workload.Workload")
        return obj
    try:
        return scenario_workload(name)
    except KeyError as err:
        raise KeyError(f"no workload {name!r}: not a built-in ("
                       + ", ".join(sorted(BUILTINS)) + f") and {err.args[0]}") from None


#: The keys of a ``kind: KnobSpace`` document, of each of its knobs and of its goal; anything
#: else is refused by name (a misspelt key silently ignored would change what is explored).
KNOBSPACE_KEYS = ("apiVersion", "kind", "metadata", "knobs", "goal", "setup", "families")
KNOB_KEYS = ("name", "kind", "path", "values", "at", "objectName")
GOAL_KEYS = ("kind", "path", "states", "horizon", "delete", "after_delete", "clear")


def _unknown(where: str, item: Mapping[str, Any], known: tuple[str, ...]) -> None:
    extra = sorted(str(k) for k in item if k not in known)
    if extra:
        raise ValueError(f"{where} has unknown key(s) {', '.join(extra)}; its keys are "
                         + ", ".join(known))


def _mapping(where: str, item: Any) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a mapping, not {item!r}")
    return item


def _knob_from(where: str, item: Any) -> Knob:
    item = _mapping(where, item)
    _unknown(where, item, KNOB_KEYS)
    missing = [k for k in ("name", "kind", "path", "values") if k not in item]
    if missing:
        raise ValueError(f"{where} needs name, kind, path and values (missing: "
                         f"{', '.join(missing)})")
    values = item["values"]
    if not isinstance(values, list) or not values:
        raise ValueError(f"{where}: values must be a non-empty list (the first the default), "
                         f"not {values!r}")
    at = item.get("at")
    if at is not None and (isinstance(at, bool) or not isinstance(at, (int, float))):
        raise ValueError(f"{where}: at must be a number of seconds, not {at!r}")
    return Knob(name=str(item["name"]), kind=str(item["kind"]), path=str(item["path"]),
                values=values, at=None if at is None else float(at),
                object_name=item.get("objectName"))


def _goal_from(where: str, item: Any) -> Goal:
    g = _mapping(where, item)
    _unknown(where, g, GOAL_KEYS)
    missing = [k for k in ("kind", "path", "states") if k not in g]
    if missing:
        raise ValueError(f"{where} needs kind, path and states (missing: {', '.join(missing)})")
    if not isinstance(g["states"], list) or not g["states"]:
        raise ValueError(f"{where}: states must be a non-empty list, not {g['states']!r}")
    try:
        return Goal(kind=str(g["kind"]), path=str(g["path"]),
                    states=[str(x) for x in g["states"]],
                    horizon=float(g.get("horizon", 400.0)), delete=bool(g.get("delete", True)),
                    after_delete=float(g.get("after_delete", 60.0)),
                    clear=[str(x) for x in g.get("clear") or ()])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _setup_from(where: str, item: Any) -> Setup:
    item = _mapping(where, item)
    _unknown(where, item, tuple(a.name for a in attrs.fields(Setup)))
    try:
        return Setup(**item)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def from_file(path: str | Path) -> Workload:
    """Manifests from a YAML file; a ``kind: KnobSpace`` document declares the knobs (``knobs:``
    a list of {name, kind, path, values, at, objectName}) and optionally ``goal:`` (kind, path,
    states, horizon, delete, after_delete), ``setup:`` (`Setup`'s fields) and ``families:``.
    Raises `ValueError` naming what was wrong: a missing or unknown key, a knob that could
    change nothing."""
    from ..client.apply import load_yaml

    p = Path(path)
    try:
        loaded = load_yaml(p.read_text())
    except OSError as err:
        raise ValueError(f"cannot read workload file {p}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"workload file {p} is not valid YAML: {err}") from None
    for i, (_doc, repeated) in enumerate(loaded):
        if repeated:  # what a manifest applied with fieldValidation=Strict would be refused for
            raise ValueError(f"workload file {p}: document {i + 1} gives a key twice: "
                             + "; ".join(repeated))
    docs = [d for d, _ in loaded if d]
    manifests: list[Obj] = []
    knobs: list[Knob] = []
    goal: Goal | None = None
    setup = Setup()
    families: list[str] = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or "kind" not in doc:
            raise ValueError(f"workload file {p}: document {i + 1} is not a manifest "
                             "(a mapping with a kind)")
        if doc["kind"] == "KnobSpace":
            where = f"workload file {p}: the KnobSpace (document {i + 1})"
            _unknown(where, doc, KNOBSPACE_KEYS)
            raw = doc.get("knobs") or []
            if not isinstance(raw, list):
                raise ValueError(f"{where}: knobs must be a list, not {raw!r}")
            knobs += [_knob_from(f"{where}: knob {j + 1}", item) for j, item in enumerate(raw)]
            if doc.get("goal"):
                goal = _goal_from(f"{where}: goal", doc["goal"])
            if doc.get("setup"):
                setup = _setup_from(f"{where}: setup", doc["setup"])
            families = [str(f) for f in doc.get("families") or []]
            continue
        manifests.append(doc)
    if not manifests:
        raise ValueError(f"workload file {p} has no manifests")
    from .plans import check_families

    try:
        check_families(families)
        return Workload(p.stem, manifests, knobs, setup=setup, goal=goal, families=families)
    except ValueError as err:
        raise ValueError(f"workload file {p}: {err}") from None
