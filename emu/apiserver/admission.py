"""kube-apiserver's LimitRanger and ResourceQuota admission plugins, and the quota's usage.

Ports plugin/pkg/admission/limitranger (``Admit``'s defaults, ``PodValidateLimitFunc``'s
``minConstraint``, ``maxConstraint`` and ``limitRequestRatioConstraint``) and
plugin/pkg/admission/resourcequota (``checkRequest``), with the usage that
pkg/quota/v1/evaluator/core (``PodUsageFunc``, ``podComputeUsageHelper``, the Service and
PersistentVolumeClaim evaluators, the generic ``count/<resource>`` evaluator) charges, and the
resource quota controller's ``CalculateUsage`` keeping each ResourceQuota's ``status.hard`` and
``status.used``.

Both plugins run only in namespaces that hold a LimitRange or a ResourceQuota: the API server
looks that up with one dictionary read per create, so worlds without them write as before.

Usage is recalculated in place, after every committed write to a tracked kind in a namespace
with a quota (kube's admission adds the admitted object's usage to ``status.used`` at once and
its quota controller recalculates after deletions): ``status.used`` is always the exact usage,
where kube's can lag a deletion by the controller's sync (docs/deviations.md).

Over 500 lines because the two plugins share the quantity and resource-list helpers and the Pod
usage functions (what LimitRanger bounds per Pod is what a quota charges), which read best side
by side with kube's messages.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import orjson

from .errors import Forbidden
from .quantity import DECIMAL_SI, ZERO, Quantity, parse

if TYPE_CHECKING:
    from .kinds import KindInfo
    from .server import APIServer

Obj = dict[str, Any]
Usage = dict[str, Quantity]

LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
ONE = Quantity(Fraction(1), DECIMAL_SI)
#: Resources a Pod is charged for (``podResources``); ``requests.<extended>`` and
#: ``requests.hugepages-*`` are matched by prefix.
POD_RESOURCES = frozenset((
    "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "pods"))
#: The resources a quota makes every container state (``validationSet``: "this was a mistake",
#: kube's comment says, kept for compatibility).
_MUST_SPECIFY = frozenset(("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                           "limits.memory"))
#: Core kinds with a legacy quota name besides ``count/<resource>``.
_LEGACY_COUNT = {"Service": "services", "ConfigMap": "configmaps", "Secret": "secrets",
                 "PersistentVolumeClaim": "persistentvolumeclaims",
                 "ReplicationController": "replicationcontrollers",
                 "ResourceQuota": "resourcequotas"}
_NATIVE_PREFIXES = ("kubernetes.io/", "requests.", "limits.")


def _resource_list(value: Any) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    if isinstance(value, dict):
        for key in sorted(value):
            try:
                out[str(key)] = parse(value[key])
            except ValueError:
                continue  # validation refuses malformed quantities before admission runs
    return out


def _add(a: Usage, b: Usage) -> Usage:
    """``quota.Add``."""
    out = dict(a)
    for key, q in b.items():
        have = out.get(key)
        out[key] = q if have is None else have.add(q)
    return out


def pretty_print(items: Usage) -> str:
    """``prettyPrint``: ``name=value`` by sorted name, comma-joined."""
    return ",".join(f"{k}={items[k]}" for k in sorted(items))


def _is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: a fully-qualified name outside ``kubernetes.io/`` that is
    not a quota's ``requests.`` name."""
    return "/" in name and not name.startswith(_NATIVE_PREFIXES)


# -- Pod usage --------------------------------------------------------------------------------


def _containers(pod: Obj, group: str) -> list[Obj]:
    spec = pod.get("spec") or {}
    items = spec.get(group) if isinstance(spec, dict) else None
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def _resources(container: Obj, which: str) -> dict[str, Quantity]:
    res = container.get("resources")
    return _resource_list(res.get(which)) if isinstance(res, dict) else {}


def pod_resources(pod: Obj, which: str) -> dict[str, Quantity]:
    """``resourcehelper.PodRequests`` / ``PodLimits``: the containers' sum, or an init
    container's when that is larger, plus the Pod's overhead."""
    total: dict[str, Quantity] = {}
    for c in _containers(pod, "containers"):
        total = _add(total, _resources(c, which))
    init_max: dict[str, Quantity] = {}
    for c in _containers(pod, "initContainers"):
        for key, q in _resources(c, which).items():
            if key not in init_max or q.value > init_max[key].value:
                init_max[key] = q
    for key, q in init_max.items():
        if key not in total or q.value > total[key].value:
            total[key] = q
    overhead = _resource_list((pod.get("spec") or {}).get("overhead"))
    if overhead:
        total = _add(total, {k: v for k, v in overhead.items() if k in total})
    return total


def pod_compute_usage(requests: dict[str, Quantity], limits: dict[str, Quantity]) -> Usage:
    """``podComputeUsageHelper``."""
    result: Usage = {"pods": ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = requests[name]
            result["requests." + name] = requests[name]
        if name in limits:
            result["limits." + name] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            result[name] = q
            result["requests." + name] = q
        elif _is_extended(name):
            result["requests." + name] = q
    return result


def _pod_counts(pod: Obj, now: float) -> bool:
    """``QuotaV1Pod``: a Pod is charged for compute until it ends (Succeeded or Failed) or
    its grace period after a deletion has passed."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    ts, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if ts and grace is not None:
        from ..kernel.clock import parse_time

        if now > parse_time(ts) + float(grace):
            return False
    return True


def pod_usage(pod: Obj, now: float) -> Usage:
    """``PodUsageFunc`` (with the ``count/pods`` every stored Pod is charged)."""
    result: Usage = {"count/pods": ONE}
    if not _pod_counts(pod, now):
        return result
    return _add(result, pod_compute_usage(pod_resources(pod, "requests"),
                                          pod_resources(pod, "limits")))


def _pod_matches(name: str) -> bool:
    if name in POD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-")):
        return True
    return name.startswith("requests.") and _is_extended(name[len("requests."):])


def _best_effort(pod: Obj) -> bool:
    for group in ("containers", "initContainers"):
        for c in _containers(pod, group):
            for which in ("requests", "limits"):
                if any(k in ("cpu", "memory") for k in _resources(c, which)):
                    return False
    return True


def _pod_in_scope(pod: Obj, req: Obj) -> bool:
    """``podMatchesScopeFunc``: Terminating, NotTerminating, BestEffort, NotBestEffort, and
    PriorityClass (``In``/``NotIn`` the Pod's ``priorityClassName``, ``Exists``,
    ``DoesNotExist``); other scopes (CrossNamespacePodAffinity, VolumeAttributesClass) match."""
    scope = req.get("scopeName")
    if scope == "PriorityClass":
        name = (pod.get("spec") or {}).get("priorityClassName") or ""
        op, values = req.get("operator"), req.get("values") or ()
        if op == "In":
            return name in values
        if op == "NotIn":
            return name not in values
        if op == "Exists":
            return bool(name)
        if op == "DoesNotExist":
            return not name
        return False
    terminating = (pod.get("spec") or {}).get("activeDeadlineSeconds") is not None
    if scope == "Terminating":
        return terminating
    if scope == "NotTerminating":
        return not terminating
    if scope == "BestEffort":
        return _best_effort(pod)
    if scope == "NotBestEffort":
        return not _best_effort(pod)
    return True


# -- evaluators ---------------------------------------------------------------------------------


def _count_name(info: KindInfo) -> str:
    return f"count/{info.plural}" + (f".{info.group}" if info.group else "")


def matching_resources(info: KindInfo, names: list[str]) -> list[str]:
    """The evaluator's ``MatchingResources``: which of a quota's ``names`` the kind is charged
    for."""
    if info.group == "" and info.kind == "Pod":
        return [n for n in names if _pod_matches(n)]
    wanted = {_count_name(info)}
    if info.group == "":
        legacy = _LEGACY_COUNT.get(info.kind)
        if legacy:
            wanted.add(legacy)
        if info.kind == "Service":
            wanted.update(("services.loadbalancers", "services.nodeports"))
        elif info.kind == "PersistentVolumeClaim":
            wanted.add("requests.storage")
    return [n for n in names if n in wanted]


def object_usage(info: KindInfo, obj: Obj, now: float) -> Usage:
    """What one object is charged (the kind's ``Usage``)."""
    if info.group == "" and info.kind == "Pod":
        return pod_usage(obj, now)
    usage: Usage = {_count_name(info): ONE}
    if info.group != "":
        return usage
    legacy = _LEGACY_COUNT.get(info.kind)
    if legacy:
        usage[legacy] = ONE
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if info.kind == "Service":
        kind = spec.get("type", "ClusterIP")
        ports = len(spec.get("ports") or ())
        usage["services.loadbalancers"] = Quantity(Fraction(kind == "LoadBalancer"))
        node_ports = kind == "NodePort" or (
            kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True))
        usage["services.nodeports"] = Quantity(Fraction(ports if node_ports else 0))
    elif info.kind == "PersistentVolumeClaim":
        storage = _resource_list((spec.get("resources") or {}).get("requests")).get("storage")
        if storage is not None:
            usage["requests.storage"] = storage
    return usage


# -- the plugins ----------------------------------------------------------------------------------


class Admission:
    """The two built-in admission plugins of one `APIServer`, and its quotas' usage.

    ``fills`` holds the ``(namespace, resource)`` pairs a `emu.faults.FillQuota` fault has
    filled: their quotas' ``status.used`` reads as their ``status.hard`` until it is lifted.
    """

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.quotas = api.store.table(api.kinds.resolve("ResourceQuota"))
        self.limits = api.store.table(api.kinds.resolve("LimitRange"))
        self.fills: dict[tuple[str, str], None] = {}
        self._syncing = False

    # LimitRanger -------------------------------------------------------------------------------

    def _limit_ranges(self, ns: str) -> list[Obj]:
        entries = self.limits.by_ns.get(ns) or {}
        return [orjson.loads(entries[name].data) for name in sorted(entries)]

    def limit_ranger_admit(self, pod: Obj, ns: str) -> None:
        """LimitRanger's ``Admit`` on a Pod create: each container gets the ``default`` limits
        and ``defaultRequest`` requests of the namespace's Container items that it lacks, and
        the Pod an annotation saying what was set."""
        notes: list[str] = []
        for lr in self._limit_ranges(ns):
            limits: Obj = {}
            requests: Obj = {}
            for item in (lr.get("spec") or {}).get("limits") or ():
                if isinstance(item, dict) and item.get("type") == "Container":
                    limits.update(item.get("default") or {})
                    requests.update(item.get("defaultRequest") or {})
            if not limits and not requests:
                continue
            spec = dict(pod.get("spec") or {})  # the caller's dicts stay as they were
            pod["spec"] = spec
            for group, prefix in (("initContainers", "init container"),
                                  ("containers", "container")):
                items = spec.get(group)
                if not isinstance(items, list):
                    continue
                new_items = []
                for c in items:
                    if isinstance(c, dict):
                        c = self._merge_defaults(c, limits, requests, prefix, notes)
                    new_items.append(c)
                spec[group] = new_items
        if notes:
            meta = pod["metadata"]
            ann = dict(meta.get("annotations") or {})
            ann[LIMIT_RANGER_ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
            meta["annotations"] = ann

    @staticmethod
    def _merge_defaults(c: Obj, limits: Obj, requests: Obj, prefix: str,
                        notes: list[str]) -> Obj:
        """``mergeContainerResources``."""
        res = dict(c.get("resources") or {})
        have_l = dict(res.get("limits") or {})
        have_r = dict(res.get("requests") or {})
        set_l = sorted(k for k in limits if k not in have_l)
        set_r = sorted(k for k in requests if k not in have_r)
        if not set_l and not set_r:
            return c
        for k in set_l:
            have_l[k] = limits[k]
        for k in set_r:
            have_r[k] = requests[k]
        if have_l:
            res["limits"] = have_l
        if have_r:
            res["requests"] = have_r
        name = c.get("name", "")
        if set_r:
            notes.append(f"{', '.join(set_r)} request for {prefix} {name}")
        if set_l:
            notes.append(f"{', '.join(set_l)} limit for {prefix} {name}")
        return {**c, "resources": res}

    def limit_ranger_validate(self, info: KindInfo, pod: Obj, ns: str, name: str) -> None:
        """``PodValidateLimitFunc``: each container within its Container items' min, max and
        maxLimitRequestRatio, the Pod's sums within its Pod items'; 403 with every breach."""
        errs: list[str] = []
        for lr in self._limit_ranges(ns):
            for item in (lr.get("spec") or {}).get("limits") or ():
                if not isinstance(item, dict):
                    continue
                kind = item.get("type")
                if kind == "Container":
                    for group in ("containers", "initContainers"):
                        for c in _containers(pod, group):
                            _check_item(item, "Container", _resources(c, "requests"),
                                        _resources(c, "limits"), errs)
                elif kind == "Pod":
                    _check_item(item, "Pod", pod_resources(pod, "requests"),
                                pod_resources(pod, "limits"), errs)
        if errs:
            text = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
            raise Forbidden.for_object(info.plural, info.group, name, text)

    # ResourceQuota -----------------------------------------------------------------------------

    def _quotas(self, ns: str) -> list[Obj]:
        entries = self.quotas.by_ns.get(ns) or {}
        return [orjson.loads(entries[name].data) for name in sorted(entries)]

    def quota_check(self, info: KindInfo, obj: Obj, ns: str, name: str) -> None:
        """``checkRequest`` for a create: every quota of the namespace that tracks what the
        object is charged must have room for it; 403 with kube's message otherwise."""
        quotas = self._quotas(ns)
        is_pod = info.group == "" and info.kind == "Pod"
        interesting: list[tuple[Obj, list[str]]] = []

        def forbid(text: str) -> Forbidden:
            return Forbidden.for_object(info.plural, info.group, name, text)

        for q in quotas:
            if is_pod and not all(_pod_in_scope(obj, s) for s in _quota_scopes(q)):
                continue
            status = q.get("status") or {}
            hard = _resource_list(status.get("hard"))
            restricted = matching_resources(info, list(hard))
            if not restricted:
                continue
            qname = q["metadata"]["name"]
            if is_pod:
                missing = _pod_constraints(obj, restricted)
                if missing:
                    raise forbid(f"failed quota: {qname}: must specify {missing}")
            used = status.get("used") or {}
            if any(r not in used for r in restricted):
                raise forbid(f"status unknown for quota: {qname}, resources: "
                             f"{','.join(sorted(restricted))}")
            interesting.append((q, list(hard)))
        if not interesting:
            return
        delta = object_usage(info, obj, self.api._clock())
        negative = sorted(k for k, q in delta.items() if q.value < 0)
        if negative:
            raise forbid(f"quota usage is negative for resource(s): {','.join(negative)}")
        delta = {k: q for k, q in delta.items() if q.value != 0}
        if not delta:
            return
        for q, hard_names in interesting:
            status = q["status"]
            hard = _resource_list(status.get("hard"))
            used = _resource_list(status.get("used"))
            requested = {k: delta[k] for k in hard_names if k in delta}
            exceeded = sorted(k for k, r in requested.items()
                              if used.get(k, ZERO).add(r).value > hard[k].value)
            if exceeded:
                raise forbid(
                    f"exceeded quota: {q['metadata']['name']}, "
                    f"requested: {pretty_print({k: requested[k] for k in exceeded})}, "
                    f"used: {pretty_print({k: used.get(k, ZERO) for k in exceeded})}, "
                    f"limited: {pretty_print({k: hard[k] for k in exceeded})}")

    def quota_status(self, quota: Obj, ns: str) -> Obj:
        """The controller's ``CalculateUsage``: ``status.hard`` from the spec and ``used`` for
        each tracked resource, summed over the namespace's objects (a filled resource reads as
        full)."""
        hard = _resource_list((quota.get("spec") or {}).get("hard"))
        names = list(hard)
        scopes = _quota_scopes(quota)
        now = self.api._clock()
        used: Usage = {}
        for table in self.api.store.tables.values():
            tinfo = table.info
            if not tinfo.namespaced:
                continue
            matched = matching_resources(tinfo, names)
            if not matched:
                continue
            is_pod = tinfo.group == "" and tinfo.kind == "Pod"
            total: Usage = {k: ZERO for k in matched}
            entries = table.by_ns.get(ns) or {}
            for key in sorted(entries):
                obj = orjson.loads(entries[key].data)
                if is_pod and not all(_pod_in_scope(obj, s) for s in scopes):
                    continue
                charge = object_usage(tinfo, obj, now)
                total = _add(total, {k: charge[k] for k in matched if k in charge})
            used.update(total)
        for name in names:
            used.setdefault(name, ZERO)
            if (ns, name) in self.fills and name in used and used[name].value < hard[name].value:
                used[name] = hard[name]
        return {"hard": {k: str(hard[k]) for k in names},
                "used": {k: str(used[k]) for k in names if k in used}}

    def sync_quotas(self, ns: str, caller: str) -> None:
        """Write each quota of ``ns`` whose status is not what `quota_status` says."""
        if self._syncing:
            return
        self._syncing = True
        try:
            for q in self._quotas(ns):
                if q["metadata"].get("deletionTimestamp"):
                    continue
                status = self.quota_status(q, ns)
                if q.get("status") == status:
                    continue
                q["status"] = status
                self.api.update_status(q, caller="resourcequota-controller")
        finally:
            self._syncing = False

    def fill(self, ns: str, resource: str, caller: str = "faults") -> str | None:
        """Fill ``resource`` in every quota of ``ns`` that limits it (`emu.faults.FillQuota`);
        None when one does, else why nothing was filled."""
        quotas = self._quotas(ns)
        if not any(resource in ((q.get("spec") or {}).get("hard") or {}) for q in quotas):
            known = []
            for q in quotas:
                hard = (q.get("spec") or {}).get("hard") or {}
                known.append(f"{q['metadata']['name']} ({', '.join(sorted(hard)) or 'nothing'})")
            return (f"no ResourceQuota in namespace {ns!r} limits {resource!r} (quotas there: "
                    f"{'; '.join(known) or 'none'})")
        self.fills[(ns, resource)] = None
        self.sync_quotas(ns, caller)
        return None

    def release(self, ns: str, resource: str, caller: str = "faults") -> str | None:
        """Undo `fill`; None when ``resource`` was filled in ``ns``, else why not."""
        if (ns, resource) not in self.fills:
            return f"{resource!r} is not filled in namespace {ns!r}"
        del self.fills[(ns, resource)]
        self.sync_quotas(ns, caller)
        return None

    def tracked(self, info: KindInfo, ns: str) -> bool:
        """Whether a write of ``info`` in ``ns`` can change a quota's usage or hard limits."""
        if info.group == "" and info.kind == "ResourceQuota":
            return True
        for q in self._quotas(ns):
            hard = (q.get("spec") or {}).get("hard") or {}
            if matching_resources(info, list(hard)):
                return True
        return False


def _quota_scopes(quota: Obj) -> list[Obj]:
    """``getScopeSelectorsFromQuota``: ``spec.scopes`` as ``Exists`` requirements, then the
    ``scopeSelector``'s ``matchExpressions``."""
    spec = quota.get("spec") or {}
    out: list[Obj] = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or ()]
    out += list((spec.get("scopeSelector") or {}).get("matchExpressions") or ())
    return out


def _pod_constraints(pod: Obj, restricted: list[str]) -> str:
    """The podEvaluator's ``Constraints``: the resources of the must-specify set a container
    lacks, as ``<resource> for: <containers>`` joined by ``; `` (empty when none)."""
    required = set(restricted) & _MUST_SPECIFY
    if not required:
        return ""
    missing: dict[str, set[str]] = {}
    for group in ("containers", "initContainers"):
        for c in _containers(pod, group):
            have = pod_compute_usage(_resources(c, "requests"), _resources(c, "limits"))
            for r in required - set(have):
                missing.setdefault(r, set()).add(str(c.get("name", "")))
    return "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))


def _check_item(item: Obj, kind: str, requests: dict[str, Quantity],
                limits: dict[str, Quantity], errs: list[str]) -> None:
    checks: list[tuple[str, Callable[..., str | None]]] = [
        ("min", _min_constraint), ("max", _max_constraint),
        ("maxLimitRequestRatio", _ratio_constraint)]
    for field, check in checks:
        bounds = _resource_list(item.get(field))
        for resource in sorted(bounds):
            err = check(kind, resource, bounds[resource], requests.get(resource),
                        limits.get(resource))
            if err:
                errs.append(err)


def _min_constraint(kind: str, resource: str, enforced: Quantity, req: Quantity | None,
                    lim: Quantity | None) -> str | None:
    """``minConstraint``."""
    if req is None:
        return f"minimum {resource} usage per {kind} is {enforced}.  No request is specified"
    if req.value < enforced.value:
        return f"minimum {resource} usage per {kind} is {enforced}, but request is {req}"
    if lim is not None and lim.value < enforced.value:
        return f"minimum {resource} usage per {kind} is {enforced}, but limit is {lim}"
    return None


def _max_constraint(kind: str, resource: str, enforced: Quantity, req: Quantity | None,
                    lim: Quantity | None) -> str | None:
    """``maxConstraint``."""
    if lim is None:
        return f"maximum {resource} usage per {kind} is {enforced}.  No limit is specified"
    if lim.value > enforced.value:
        return f"maximum {resource} usage per {kind} is {enforced}, but limit is {lim}"
    if req is not None and req.value > enforced.value:
        return f"maximum {resource} usage per {kind} is {enforced}, but request is {req}"
    return None


def _ratio_constraint(kind: str, resource: str, enforced: Quantity, req: Quantity | None,
                      lim: Quantity | None) -> str | None:
    """``limitRequestRatioConstraint`` (the ratio printed as Go's ``%f``)."""
    if req is None or req.milli() == 0:
        return (f"{resource} max limit to request ratio per {kind} is {enforced}, but no "
                f"request is specified or request is 0")
    if lim is None or lim.milli() == 0:
        return (f"{resource} max limit to request ratio per {kind} is {enforced}, but no "
                f"limit is specified or limit is 0")
    ratio = Fraction(lim.milli(), req.milli())
    if ratio * 1000 > enforced.milli():
        return (f"{resource} max limit to request ratio per {kind} is {enforced}, but "
                f"provided ratio is {float(ratio):f}")
    return None
