"""``Table`` responses (``meta.k8s.io/v1``), what ``kubectl get`` asks for and prints.

A client asks with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``. Columns follow
kube's printers (``pkg/printers/internalversion/printers.go``) for the built-ins this emulator
serves, KubeRay's ``+kubebuilder:printcolumn`` markers for RayCluster, RayJob and RayService, and
``additionalPrinterColumns`` for CustomResourceDefinitions applied at run time; anything else gets
kube's default ``Name`` and ``Created At``. Ages are computed on the server from virtual time, as
kube computes them from its own clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError
from ..apiserver.kinds import KindInfo
from ..kernel.clock import parse_time
from .wire import HttpRequest

if TYPE_CHECKING:
    from ..simulation import Simulation

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority
Cells = Callable[[Obj, float], list[Any]]

#: KubeRay's printer columns (``ray-operator/apis/ray/v1/*_types.go``): name, type, JSONPath,
#: priority.
KUBERAY_COLUMNS: dict[str, list[tuple[str, str, str, int]]] = {
    "RayCluster": [
        ("desired workers", "integer", ".status.desiredWorkerReplicas", 0),
        ("available workers", "integer", ".status.availableWorkerReplicas", 0),
        ("cpus", "string", ".status.desiredCPU", 0),
        ("memory", "string", ".status.desiredMemory", 0),
        ("gpus", "string", ".status.desiredGPU", 0),
        ("status", "string", ".status.state", 0),
        ("age", "date", ".metadata.creationTimestamp", 0),
        ("head pod IP", "string", ".status.head.podIP", 1),
        ("head service IP", "string", ".status.head.serviceIP", 1),
    ],
    "RayJob": [
        ("job status", "string", ".status.jobStatus", 0),
        ("deployment status", "string", ".status.jobDeploymentStatus", 0),
        ("ray cluster name", "string", ".status.rayClusterName", 0),
        ("start time", "string", ".status.startTime", 0),
        ("end time", "string", ".status.endTime", 0),
        ("age", "date", ".metadata.creationTimestamp", 0),
    ],
    "RayService": [
        ("service status", "string", ".status.serviceStatus", 0),
        ("num serve endpoints", "string", ".status.numServeEndpoints", 0),
    ],
}


def wants_table(req: HttpRequest) -> bool:
    return "as=table" in req.header("accept").lower().replace(" ", "")


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration`` (k8s.io/apimachinery): the AGE column's text."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(ts: Any, now: float) -> str:
    if not isinstance(ts, str) or not ts:
        return "<unknown>"
    try:
        return human_duration(now - parse_time(ts))
    except ValueError:
        return "<unknown>"


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def json_path(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (``.status.head.podIP``, ``.spec.ports[0].port``); None
    when absent or when the path uses filters this emulator does not evaluate."""
    pos = 0
    cur = obj
    while pos < len(path):
        found = _STEP.match(path, pos)
        if found is None:
            return None
        key, index = found.groups()
        if key is not None:
            cur = cur.get(key) if isinstance(cur, dict) else None
        else:
            cur = cur[int(index)] if isinstance(cur, list) and int(index) < len(cur) else None
        if cur is None:
            return None
        pos = found.end()
    return cur


# -- built-in printers -------------------------------------------------------------------------


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _pod(obj: Obj, now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    total = len(spec.get("containers") or [])
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for c in statuses:
        state = c.get("state") or {}
        waiting, term = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif term.get("reason"):
            reason = term["reason"]
    if _meta(obj).get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{total}", reason, restarts, _age(_meta(obj).get("creationTimestamp"), now),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>", "<none>",
            "<none>"]


def _job(obj: Obj, now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if conds.get("Complete") == "True":
        state = "Complete"
    elif conds.get("Failed") == "True":
        state = "Failed"
    elif conds.get("Suspended") == "True":
        state = "Suspended"
    else:
        state = "Running"
    completions = spec.get("completions")
    done = f"{status.get('succeeded', 0)}/{completions if completions is not None else 1}"
    start, end = status.get("startTime"), status.get("completionTime")
    duration = ""
    if start:
        duration = human_duration((parse_time(end) if end else now) - parse_time(start))
    return [state, done, duration, _age(_meta(obj).get("creationTimestamp"), now)]


def _service(obj: Obj, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = []
    for p in spec.get("ports") or []:
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        ports.append(f"{p.get('port')}{node}/{p.get('protocol', 'TCP')}")
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", "<none>",
            ",".join(ports) or "<none>", _age(_meta(obj).get("creationTimestamp"), now)]


def _node(obj: Obj, now: float) -> list[Any]:
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Ready" if ready is not None and ready.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    return [state, "<none>", _age(_meta(obj).get("creationTimestamp"), now),
            (status.get("nodeInfo") or {}).get("kubeletVersion", "")]


def _age_only(obj: Obj, now: float) -> str:
    return _age(_meta(obj).get("creationTimestamp"), now)


_S, _I = "string", "integer"
BUILTIN: dict[tuple[str, str], tuple[list[Column], Cells]] = {
    ("", "Pod"): ([("Ready", _S, 0), ("Status", _S, 0), ("Restarts", _I, 0), ("Age", _S, 0),
                  ("IP", _S, 1), ("Node", _S, 1), ("Nominated Node", _S, 1),
                  ("Readiness Gates", _S, 1)], _pod),
    ("batch", "Job"): ([("Status", _S, 0), ("Completions", _S, 0), ("Duration", _S, 0),
                        ("Age", _S, 0)], _job),
    ("", "Service"): ([("Type", _S, 0), ("Cluster-IP", _S, 0), ("External-IP", _S, 0),
                      ("Port(s)", _S, 0), ("Age", _S, 0)], _service),
    ("", "Node"): ([("Status", _S, 0), ("Roles", _S, 0), ("Age", _S, 0), ("Version", _S, 0)],
                   _node),
    ("", "Namespace"): ([("Status", _S, 0), ("Age", _S, 0)], lambda o, now: [
        (o.get("status") or {}).get("phase", "Active"), _age_only(o, now)]),
    ("", "ConfigMap"): ([("Data", _I, 0), ("Age", _S, 0)], lambda o, now: [
        len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age_only(o, now)]),
    ("", "Secret"): ([("Type", _S, 0), ("Data", _I, 0), ("Age", _S, 0)], lambda o, now: [
        o.get("type", "Opaque"), len(o.get("data") or {}), _age_only(o, now)]),
    ("apps", "Deployment"): ([("Ready", _S, 0), ("Up-to-date", _I, 0), ("Available", _I, 0),
                              ("Age", _S, 0)], lambda o, now: [
        f"{(o.get('status') or {}).get('readyReplicas', 0)}/"
        f"{(o.get('spec') or {}).get('replicas', 1)}",
        (o.get("status") or {}).get("updatedReplicas", 0),
        (o.get("status") or {}).get("availableReplicas", 0), _age_only(o, now)]),
    ("apps", "ReplicaSet"): ([("Desired", _I, 0), ("Current", _I, 0), ("Ready", _I, 0),
                              ("Age", _S, 0)], lambda o, now: [
        (o.get("spec") or {}).get("replicas", 1), (o.get("status") or {}).get("replicas", 0),
        (o.get("status") or {}).get("readyReplicas", 0), _age_only(o, now)]),
    ("", "Event"): ([("Last Seen", _S, 0), ("Type", _S, 0), ("Reason", _S, 0),
                     ("Object", _S, 0), ("Message", _S, 0)], lambda o, now: [
        _age(o.get("lastTimestamp") or o.get("eventTime") or _meta(o).get("creationTimestamp"),
             now), o.get("type", ""), o.get("reason", ""),
        f"{(o.get('involvedObject') or {}).get('kind', '').lower()}/"
        f"{(o.get('involvedObject') or {}).get('name', '')}", o.get("message", "")]),
    ("coordination.k8s.io", "Lease"): ([("Holder", _S, 0), ("Age", _S, 0)], lambda o, now: [
        (o.get("spec") or {}).get("holderIdentity", ""), _age_only(o, now)]),
    ("", "PersistentVolumeClaim"): ([("Status", _S, 0), ("Volume", _S, 0), ("Age", _S, 0)],
                                    lambda o, now: [
        (o.get("status") or {}).get("phase", "Pending"),
        (o.get("spec") or {}).get("volumeName", ""), _age_only(o, now)]),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ([("Created At", "date", 0)],
                                                           lambda o, now: [
        _meta(o).get("creationTimestamp")]),
}


def _custom_columns(sim: Simulation, info: KindInfo) -> list[tuple[str, str, str, int]] | None:
    """KubeRay's columns for its kinds, else the ``additionalPrinterColumns`` of the CRD that
    registered the kind, else None."""
    if info.group == "ray.io" and info.kind in KUBERAY_COLUMNS:
        return KUBERAY_COLUMNS[info.kind]
    try:
        crd = sim.api.get("CustomResourceDefinition", f"{info.plural}.{info.group}")
    except ApiError:
        return None
    for ver in (crd.get("spec") or {}).get("versions") or []:
        if ver.get("name") == info.version:
            cols = ver.get("additionalPrinterColumns")
            if cols:
                return [(c["name"], c.get("type", "string"), c["jsonPath"],
                         int(c.get("priority", 0))) for c in cols]
    return None


def _columns(sim: Simulation, info: KindInfo) -> tuple[list[Column], Cells]:
    builtin = BUILTIN.get((info.group, info.kind))
    if builtin is not None:
        return builtin
    custom = _custom_columns(sim, info)
    if custom is None:
        return [("Created At", "date", 0)], lambda o, now: [_meta(o).get("creationTimestamp")]
    cols = [(name, "string" if typ == "date" else typ, prio) for name, typ, _, prio in custom]

    def cells(obj: Obj, now: float) -> list[Any]:
        out = []
        for _, typ, path, _ in custom:
            value = json_path(obj, path)
            out.append(_age(value, now) if typ == "date" and value is not None else value)
        return out

    return cols, cells


def to_table(sim: Simulation, info: KindInfo, obj: Obj, req: HttpRequest) -> Obj:
    """The Table for one object or a List; ``includeObject`` (None | Metadata | Object, default
    Metadata) says what each row carries."""
    cols, cells = _columns(sim, info)
    include = req.param("includeObject", "Metadata")
    is_list = "items" in obj and obj.get("kind", "").endswith("List")
    items = obj.get("items") or [] if is_list else [obj]
    now = sim.now
    rows = []
    for item in items:
        row: Obj = {"cells": [_meta(item).get("name", ""), *cells(item, now)]}
        if include == "Object":
            row["object"] = item
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": _meta(item)}
        rows.append(row)
    definitions = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
                    "description": "Name must be unique within a namespace."}]
    definitions += [{"name": n, "type": t, "format": "", "priority": p, "description": n}
                    for n, t, p in cols]
    meta = obj.get("metadata") or {}
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")} if is_list else {},
            "columnDefinitions": definitions, "rows": rows}
