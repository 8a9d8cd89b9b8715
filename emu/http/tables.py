"""``Table`` responses (``meta.k8s.io/v1``), what ``kubectl get`` asks for and prints.

A client asks with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``. Columns follow
kube's printers (``pkg/printers/internalversion/printers.go``) for the built-ins this emulator
serves, KubeRay's ``+kubebuilder:printcolumn`` markers for RayCluster, RayJob and RayService, and
``additionalPrinterColumns`` for CustomResourceDefinitions applied at run time; anything else gets
kube's default ``Name`` and ``Created At``. Ages are computed on the server from virtual time, as
kube computes them from its own clock. Each row carries every column, the priority-1 ones that
``kubectl get -o wide`` shows included, as kube-apiserver builds Tables (``Wide: true``).

Longer than 500 lines because it is one port of one Kubernetes file's printers, kind by kind;
split, the shared helpers (ages, selectors, container cells) would be imported everywhere.
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
    """Whether the answer is a transformed view: a Table, or the metadata-only
    ``PartialObjectMetadata(List)`` client-go's metadata client and controller-runtime's
    metadata-only watches ask for (`to_table` makes either)."""
    accept = req.header("accept").lower().replace(" ", "")
    return "as=table" in accept or "as=partialobjectmetadata" in accept


def _metadata_only(obj: Obj) -> Obj:
    """``PartialObjectMetadata`` of an object, ``PartialObjectMetadataList`` of a List."""
    if "items" in obj and str(obj.get("kind", "")).endswith("List"):
        meta = {k: v for k, v in (obj.get("metadata") or {}).items()
                if k in ("resourceVersion", "continue", "remainingItemCount")}
        return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": meta, "items": [_metadata_only(i) for i in obj.get("items") or []]}
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": _meta(obj)}


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


def _since(ts: Any, now: float) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return parse_time(ts)
    except ValueError:
        return None


def _pod(obj: Obj, now: float) -> list[Any]:
    """``printPod``: readiness, the status reason kubectl shows (waiting or terminated reasons,
    ``Init:`` states, Terminating), restarts with the last restart's age."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    meta = _meta(obj)
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    total = len(spec.get("containers") or [])
    inits = {c.get("name"): c for c in spec.get("initContainers") or []}
    sidecar = {n for n, c in inits.items() if c.get("restartPolicy") == "Always"}
    total += len(sidecar)
    ready = restarts = sidecar_restarts = 0
    last: float | None = None
    last_sidecar: float | None = None

    def finished(cs: Obj) -> float | None:
        term = (cs.get("lastState") or {}).get("terminated") or {}
        return _since(term.get("finishedAt"), now)

    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        done = finished(cs)
        if done is not None and (last is None or done > last):
            last = done
        is_sidecar = cs.get("name") in sidecar
        if is_sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            if done is not None and (last_sidecar is None or done > last_sidecar):
                last_sidecar = done
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and int(term.get("exitCode") or 0) == 0:
            continue
        if is_sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if term is not None:
            if term.get("reason"):
                reason = "Init:" + term["reason"]
            elif term.get("signal"):
                reason = f"Init:Signal:{term['signal']}"
            else:
                reason = f"Init:ExitCode:{term.get('exitCode', 0)}"
        elif waiting is not None and waiting.get("reason") and \
                waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in status.get("conditions") or [])
    if not initializing or initialized:
        restarts, last = sidecar_restarts, last_sidecar
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            done = finished(cs)
            if done is not None and (last is None or done > last):
                last = done
            state = cs.get("state") or {}
            waiting, term = state.get("waiting") or {}, state.get("terminated")
            if waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else \
                    f"ExitCode:{term.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in status.get("conditions") or [])
            reason = "Running" if ready_cond else "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    shown = str(restarts)
    if restarts and last is not None:
        shown = f"{restarts} ({human_duration(now - last)} ago)"
    ips = status.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else None) or status.get("podIP") or "<none>"
    gates = spec.get("readinessGates") or []
    gated = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        gated = f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/" \
                f"{len(gates)}"
    return [f"{ready}/{total}", reason, shown,
            _age(meta.get("creationTimestamp"), now), ip, spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", gated]


def _containers(spec: Obj) -> list[str]:
    """``layoutContainerCells``: the template's container names and images, comma-joined."""
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [",".join(str(c.get("name", "")) for c in containers),
            ",".join(str(c.get("image", "")) for c in containers)]


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: ``k=v`` pairs sorted by key, ``<none>`` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: match labels then expressions; ``<none>`` when it
    selects nothing, ``<none>`` for a nil selector too."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    shown = ",".join(parts)
    return shown if shown else "<none>"


def _job(obj: Obj, now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if conds.get("Complete") == "True":
        state = "Complete"
    elif conds.get("Failed") == "True":
        state = "Failed"
    elif _meta(obj).get("deletionTimestamp"):
        state = "Terminating"
    elif conds.get("Suspended") == "True":
        state = "Suspended"
    elif conds.get("FailureTarget") == "True":
        state = "FailureTarget"
    else:
        state = "Running"
    completions = spec.get("completions")
    succeeded = status.get("succeeded", 0)
    if completions is not None:
        done = f"{succeeded}/{completions}"
    elif int(spec.get("parallelism") or 0) > 1:
        done = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        done = f"{succeeded}/1"
    start, end = _since(status.get("startTime"), now), _since(status.get("completionTime"), now)
    duration = ""
    if start is not None:
        duration = human_duration((end if end is not None else now) - start)
    return [state, done, duration, _age(_meta(obj).get("creationTimestamp"), now),
            *_containers(spec), format_selector(spec.get("selector"))]


def _service(obj: Obj, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = []
    for p in spec.get("ports") or []:
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        ports.append(f"{p.get('port')}{node}/{p.get('protocol', 'TCP')}")
    kind = spec.get("type", "ClusterIP")
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP")
                                             else [])
    external = ",".join(spec.get("externalIPs") or [])
    if kind == "LoadBalancer":
        ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        found = sorted({i.get("ip") or i.get("hostname") for i in ingress
                        if i.get("ip") or i.get("hostname")})
        external = ",".join([*found, *(spec.get("externalIPs") or [])]) or "<pending>"
    elif kind == "ExternalName":
        external = spec.get("externalName", "")
    return [kind, cluster_ips[0] if cluster_ips else "<none>", external or "<none>",
            ",".join(ports) or "<none>", _age(_meta(obj).get("creationTimestamp"), now),
            format_labels(spec.get("selector"))]


def _node(obj: Obj, now: float) -> list[Any]:
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Unknown" if ready is None else \
        "Ready" if ready.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = set()
    for key, value in (_meta(obj).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/"):]:
            roles.add(key[len("node-role.kubernetes.io/"):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), "<none>")

    info = status.get("nodeInfo") or {}
    return [state, ",".join(sorted(roles)) or "<none>",
            _age(_meta(obj).get("creationTimestamp"), now), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _event(obj: Obj, now: float) -> list[Any]:
    """``printEvent`` of a core/v1 Event, or of an ``events.k8s.io/v1`` one read as kube reads
    it (``regarding``, ``note`` and the ``deprecated*`` fields are the core ones)."""
    if "regarding" in obj or "note" in obj or "deprecatedCount" in obj:
        obj = {"metadata": obj.get("metadata"), "type": obj.get("type"),
               "reason": obj.get("reason"), "involvedObject": obj.get("regarding") or {},
               "message": obj.get("note"), "source": obj.get("deprecatedSource") or {},
               "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
               "lastTimestamp": obj.get("deprecatedLastTimestamp"),
               "count": obj.get("deprecatedCount"), "series": obj.get("series"),
               "eventTime": obj.get("eventTime"),
               "reportingComponent": obj.get("reportingController"),
               "reportingInstance": obj.get("reportingInstance")}
    first = _age(obj.get("firstTimestamp") or obj.get("eventTime"), now)
    last = _age(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 0
    series = obj.get("series")
    if isinstance(series, dict) and series:
        last = _age(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif not count:
        count = 1
    involved = obj.get("involvedObject") or {}
    target = str(involved.get("kind", "")).lower()
    if involved.get("name"):
        target = f"{target}/{involved['name']}"
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    shown_source = f"{component}, {host}" if component and host else component
    return [last, obj.get("type", ""), obj.get("reason", ""), target,
            involved.get("fieldPath", ""), shown_source, str(obj.get("message") or "").strip(),
            first, int(count), _meta(obj).get("name", "")]


def _endpoints(obj: Obj, now: float) -> list[Any]:
    """``formatEndpoints``: the first three ``ip:port`` pairs, then ``+ N more...``."""
    subsets = obj.get("subsets") or []
    shown: list[str] = []
    count = 0
    for subset in subsets:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        for port in ports or [None]:
            count += len(addresses)
            for ip in addresses:
                if len(shown) == 3:
                    break
                shown.append(ip if port is None else
                             (f"[{ip}]:{port.get('port')}" if ":" in ip
                              else f"{ip}:{port.get('port')}"))
    text = ",".join(shown)
    if count > 3:
        text = f"{text} + {count - 3} more..."
    return [text if subsets else "<none>", _age_only(obj, now)]


def _more(items: list[str], count: int) -> str:
    text = ",".join(items[:3])
    if count > 3:
        return f"{text} + {count - 3} more..."
    return text or "<unset>"


def _endpoint_slice(obj: Obj, now: float) -> list[Any]:
    ports = [str(p["port"]) if p.get("port") is not None else p.get("name") or "*"
             for p in obj.get("ports") or []]
    addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
    return [obj.get("addressType", ""), _more(ports, len(ports)),
            _more(addresses, len(addresses)), _age_only(obj, now)]


_ACCESS = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
           "ReadWriteOncePod": "RWOP"}


def _access_modes(modes: Any) -> str:
    """``GetAccessModesAsString``: the short forms in kube's fixed order."""
    have = set(modes or [])
    return ",".join(short for mode, short in _ACCESS.items() if mode in have)


def _pvc(obj: Obj, now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    phase = "Terminating" if _meta(obj).get("deletionTimestamp") else status.get("phase", "")
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = _access_modes(status.get("accessModes"))
        capacity = str((status.get("capacity") or {}).get("storage", ""))
    storage_class = spec.get("storageClassName") or (_meta(obj).get("annotations") or {}).get(
        "volume.beta.kubernetes.io/storage-class", "")
    return [phase, spec.get("volumeName", ""), capacity, modes, storage_class,
            spec.get("volumeAttributesClassName") or "<unset>", _age_only(obj, now),
            spec.get("volumeMode") or "<unset>"]


def _pv(obj: Obj, now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    claim = spec.get("claimRef")
    phase = "Terminating" if _meta(obj).get("deletionTimestamp") else status.get("phase", "")
    storage_class = spec.get("storageClassName") or (_meta(obj).get("annotations") or {}).get(
        "volume.beta.kubernetes.io/storage-class", "")
    return [str((spec.get("capacity") or {}).get("storage", "")),
            _access_modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), phase,
            f"{claim.get('namespace', '')}/{claim.get('name', '')}" if claim else "",
            storage_class, spec.get("volumeAttributesClassName") or "<unset>",
            status.get("reason", ""), _age_only(obj, now), spec.get("volumeMode") or "<unset>"]


def _ingress(obj: Obj, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    rules = spec.get("rules") or []
    hosts = [r["host"] for r in rules if r.get("host")][:3]
    shown = ",".join(hosts) or "*"
    if len(rules) > 3 and hosts:
        shown = f"{shown} + {len(rules) - 3} more..."
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    address = ",".join(sorted({i.get("ip") or i.get("hostname") for i in ingress
                               if i.get("ip") or i.get("hostname")}))
    return [spec.get("ingressClassName") or "<none>", shown, address,
            "80, 443" if spec.get("tls") else "80", _age_only(obj, now)]


def _binding(obj: Obj, now: float) -> list[Any]:
    """``printRoleBinding``: the role, then (wide) users, groups and service accounts."""
    ref = obj.get("roleRef") or {}
    users, groups, sas = [], [], []
    for s in obj.get("subjects") or []:
        kind = s.get("kind")
        if kind == "User":
            users.append(s.get("name", ""))
        elif kind == "Group":
            groups.append(s.get("name", ""))
        elif kind == "ServiceAccount":
            sas.append(f"{s.get('namespace', '')}/{s.get('name', '')}")
    return [f"{ref.get('kind', '')}/{ref.get('name', '')}", _age_only(obj, now),
            ", ".join(users), ", ".join(groups), ", ".join(sas)]


def _age_only(obj: Obj, now: float) -> str:
    return _age(_meta(obj).get("creationTimestamp"), now)


def _workload(ready: Callable[[Obj], list[Any]], selector: bool = True
              ) -> Callable[[Obj, float], list[Any]]:
    """The cells of a Pod-template owner: its own columns, the age, then (wide) the template's
    containers and images and, for most, the selector."""
    def cells(obj: Obj, now: float) -> list[Any]:
        spec = obj.get("spec") or {}
        extra = [format_selector(spec.get("selector"))] if selector else []
        return [*ready(obj), _age_only(obj, now), *_containers(spec), *extra]
    return cells


def _st(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _sp(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


_S, _I = "string", "integer"
_WIDE_TEMPLATE = [("Containers", _S, 1), ("Images", _S, 1)]
_SELECTOR = [("Selector", _S, 1)]
BUILTIN: dict[tuple[str, str], tuple[list[Column], Cells]] = {
    ("", "Pod"): ([("Ready", _S, 0), ("Status", _S, 0), ("Restarts", _S, 0), ("Age", _S, 0),
                  ("IP", _S, 1), ("Node", _S, 1), ("Nominated Node", _S, 1),
                  ("Readiness Gates", _S, 1)], _pod),
    ("batch", "Job"): ([("Status", _S, 0), ("Completions", _S, 0), ("Duration", _S, 0),
                        ("Age", _S, 0), *_WIDE_TEMPLATE, *_SELECTOR], _job),
    ("", "Service"): ([("Type", _S, 0), ("Cluster-IP", _S, 0), ("External-IP", _S, 0),
                      ("Port(s)", _S, 0), ("Age", _S, 0), *_SELECTOR], _service),
    ("", "Node"): ([("Status", _S, 0), ("Roles", _S, 0), ("Age", _S, 0), ("Version", _S, 0),
                    ("Internal-IP", _S, 1), ("External-IP", _S, 1), ("OS-Image", _S, 1),
                    ("Kernel-Version", _S, 1), ("Container-Runtime", _S, 1)], _node),
    ("", "Namespace"): ([("Status", _S, 0), ("Age", _S, 0)], lambda o, now: [
        _st(o).get("phase", "Active"), _age_only(o, now)]),
    ("", "ConfigMap"): ([("Data", _I, 0), ("Age", _S, 0)], lambda o, now: [
        len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age_only(o, now)]),
    ("", "Secret"): ([("Type", _S, 0), ("Data", _I, 0), ("Age", _S, 0)], lambda o, now: [
        o.get("type", "Opaque"), len(o.get("data") or {}), _age_only(o, now)]),
    ("", "ServiceAccount"): ([("Secrets", _I, 0), ("Age", _S, 0)], lambda o, now: [
        len(o.get("secrets") or []), _age_only(o, now)]),
    ("apps", "Deployment"): ([("Ready", _S, 0), ("Up-to-date", _I, 0), ("Available", _I, 0),
                              ("Age", _S, 0), *_WIDE_TEMPLATE, *_SELECTOR], _workload(
        lambda o: [f"{_st(o).get('readyReplicas', 0)}/{_sp(o).get('replicas', 1)}",
                   _st(o).get("updatedReplicas", 0), _st(o).get("availableReplicas", 0)])),
    ("apps", "ReplicaSet"): ([("Desired", _I, 0), ("Current", _I, 0), ("Ready", _I, 0),
                              ("Age", _S, 0), *_WIDE_TEMPLATE, *_SELECTOR], _workload(
        lambda o: [_sp(o).get("replicas", 1), _st(o).get("replicas", 0),
                   _st(o).get("readyReplicas", 0)])),
    ("apps", "StatefulSet"): ([("Ready", _S, 0), ("Age", _S, 0), *_WIDE_TEMPLATE], _workload(
        lambda o: [f"{_st(o).get('readyReplicas', 0)}/{_sp(o).get('replicas', 1)}"],
        selector=False)),
    ("", "Event"): ([("Last Seen", _S, 0), ("Type", _S, 0), ("Reason", _S, 0),
                     ("Object", _S, 0), ("Subobject", _S, 1), ("Source", _S, 1),
                     ("Message", _S, 0), ("First Seen", _S, 1), ("Count", _S, 1),
                     ("Name", _S, 1)], _event),
    ("", "Endpoints"): ([("Endpoints", _S, 0), ("Age", _S, 0)], _endpoints),
    ("discovery.k8s.io", "EndpointSlice"): ([("AddressType", _S, 0), ("Ports", _S, 0),
                                             ("Endpoints", _S, 0), ("Age", _S, 0)],
                                            _endpoint_slice),
    ("coordination.k8s.io", "Lease"): ([("Holder", _S, 0), ("Age", _S, 0)], lambda o, now: [
        _sp(o).get("holderIdentity", ""), _age_only(o, now)]),
    ("", "PersistentVolumeClaim"): ([("Status", _S, 0), ("Volume", _S, 0), ("Capacity", _S, 0),
                                     ("Access Modes", _S, 0), ("StorageClass", _S, 0),
                                     ("VolumeAttributesClass", _S, 0), ("Age", _S, 0),
                                     ("VolumeMode", _S, 1)], _pvc),
    ("", "PersistentVolume"): ([("Capacity", _S, 0), ("Access Modes", _S, 0),
                                ("Reclaim Policy", _S, 0), ("Status", _S, 0), ("Claim", _S, 0),
                                ("StorageClass", _S, 0), ("VolumeAttributesClass", _S, 0),
                                ("Reason", _S, 0), ("Age", _S, 0), ("VolumeMode", _S, 1)],
                               _pv),
    ("networking.k8s.io", "Ingress"): ([("Class", _S, 0), ("Hosts", _S, 0), ("Address", _S, 0),
                                        ("Ports", _S, 0), ("Age", _S, 0)], _ingress),
    ("networking.k8s.io", "IngressClass"): ([("Controller", _S, 0), ("Parameters", _S, 0),
                                             ("Age", _S, 0)], lambda o, now: [
        _sp(o).get("controller", ""), _ingress_class_parameters(_sp(o).get("parameters")),
        _age_only(o, now)]),
    ("networking.k8s.io", "NetworkPolicy"): ([("Pod-Selector", _S, 0), ("Age", _S, 0)],
                                             lambda o, now: [
        format_selector(_sp(o).get("podSelector")), _age_only(o, now)]),
    ("rbac.authorization.k8s.io", "RoleBinding"): ([("Role", _S, 0), ("Age", _S, 0),
                                                    ("Users", _S, 1), ("Groups", _S, 1),
                                                    ("ServiceAccounts", _S, 1)], _binding),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ([("Role", _S, 0), ("Age", _S, 0),
                                                           ("Users", _S, 1), ("Groups", _S, 1),
                                                           ("ServiceAccounts", _S, 1)],
                                                          _binding),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ([("Created At", "date", 0)],
                                                           lambda o, now: [
        _meta(o).get("creationTimestamp")]),
}
BUILTIN[("events.k8s.io", "Event")] = BUILTIN[("", "Event")]
# stored-only kinds (no controller runs them): kube's columns all the same
BUILTIN[("", "ReplicationController")] = (
    [("Desired", _I, 0), ("Current", _I, 0), ("Ready", _I, 0), ("Age", _S, 0),
     *_WIDE_TEMPLATE, *_SELECTOR],
    lambda o, now: [_sp(o).get("replicas", 1), _st(o).get("replicas", 0),
                    _st(o).get("readyReplicas", 0), _age_only(o, now), *_containers(_sp(o)),
                    format_labels(_sp(o).get("selector"))])
BUILTIN[("apps", "DaemonSet")] = (
    [("Desired", _I, 0), ("Current", _I, 0), ("Ready", _I, 0), ("Up-to-date", _I, 0),
     ("Available", _I, 0), ("Node Selector", _S, 0), ("Age", _S, 0), *_WIDE_TEMPLATE,
     *_SELECTOR],
    lambda o, now: [_st(o).get("desiredNumberScheduled", 0),
                    _st(o).get("currentNumberScheduled", 0), _st(o).get("numberReady", 0),
                    _st(o).get("updatedNumberScheduled", 0), _st(o).get("numberAvailable", 0),
                    format_labels(((_sp(o).get("template") or {}).get("spec") or {}).get(
                        "nodeSelector")), _age_only(o, now), *_containers(_sp(o)),
                    format_selector(_sp(o).get("selector"))])
BUILTIN[("batch", "CronJob")] = (
    [("Schedule", _S, 0), ("Timezone", _S, 0), ("Suspend", "boolean", 0), ("Active", _I, 0),
     ("Last Schedule", _S, 0), ("Age", _S, 0), *_WIDE_TEMPLATE, *_SELECTOR],
    lambda o, now: [_sp(o).get("schedule", ""), _sp(o).get("timeZone") or "<none>",
                    bool(_sp(o).get("suspend")), len(_st(o).get("active") or []),
                    _age(_st(o)["lastScheduleTime"], now) if _st(o).get("lastScheduleTime")
                    else "<none>", _age_only(o, now),
                    *_containers((_sp(o).get("jobTemplate") or {}).get("spec") or {}),
                    format_selector(((_sp(o).get("jobTemplate") or {}).get("spec") or {}).get(
                        "selector"))])
#: ``kubectl get --subresource=scale``: an ``autoscaling/v1`` Scale.
BUILTIN[("autoscaling", "Scale")] = ([("Desired", _I, 0), ("Available", _I, 0)], lambda o, now: [
    _sp(o).get("replicas", 0), _st(o).get("replicas", 0)])
SCALE = KindInfo(group="autoscaling", version="v1", kind="Scale", plural="scale")

#: Kinds whose printer has no leading Name column (kube's Events table puts the name last,
#: shown only with ``-o wide``).
_NAME_IN_CELLS = frozenset({("", "Event"), ("events.k8s.io", "Event")})


def _ingress_class_parameters(params: Any) -> str:
    if not isinstance(params, dict):
        return "<none>"
    kind = str(params.get("kind", ""))
    if params.get("apiGroup"):
        kind = f"{kind}.{params['apiGroup']}"
    return f"{kind}/{params.get('name', '')}"


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
    from .storedtables import STORED_COLUMNS  # the stored-only kinds' printers use ours

    builtin = STORED_COLUMNS.get((info.group, info.kind))
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
    Metadata) says what each row carries. A request for ``as=PartialObjectMetadata`` (and no
    Table) gets the metadata-only view instead."""
    accept = req.header("accept").lower().replace(" ", "")
    if "as=partialobjectmetadata" in accept and "as=table" not in accept:
        return _metadata_only(obj)
    cols, cells = _columns(sim, info)
    named = (info.group, info.kind) in _NAME_IN_CELLS
    include = req.param("includeObject", "Metadata")
    is_list = "items" in obj and obj.get("kind", "").endswith("List")
    items = obj.get("items") or [] if is_list else [obj]
    now = sim.now
    rows = []
    for item in items:
        row: Obj = {"cells": cells(item, now) if named else
                    [_meta(item).get("name", ""), *cells(item, now)]}
        if include == "Object":
            row["object"] = item
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": _meta(item)}
        rows.append(row)
    definitions = [] if named else [{"name": "Name", "type": "string", "format": "name",
                                     "priority": 0,
                                     "description": "Name must be unique within a namespace."}]
    definitions += [{"name": n, "type": t, "format": "name" if n == "Name" else "",
                     "priority": p, "description": n} for n, t, p in cols]
    meta = obj.get("metadata") or {}
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")} if is_list else {},
            "columnDefinitions": definitions, "rows": rows}
