"""The eviction API and PodDisruptionBudget status.

Ports pkg/registry/core/pod/storage/eviction.go (``EvictionREST.Create``: Pods that may be
deleted without a budget, one budget at most per Pod, ``checkAndDecrement``'s 429 "Cannot evict
pod as it would violate the pod's disruption budget." with its ``DisruptionBudget`` cause,
``unhealthyPodEvictionPolicy``) and the status that pkg/controller/disruption keeps
(``currentHealthy``, ``desiredHealthy``, ``expectedPods``, ``disruptionsAllowed``,
``disruptedPods``, ``observedGeneration`` and the ``DisruptionAllowed`` condition).

The status is recalculated in place after every write of a Pod or a budget in a namespace that
holds a budget (kube's controller does it asynchronously), and ``expectedPods`` is the number
of Pods the selector matches (kube asks the Pods' controllers for their scale when the budget
is a percentage or ``maxUnavailable``) (docs/deviations.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import orjson

from ..kernel.clock import parse_time
from .errors import BadRequest, InternalError, NotFound, TooManyRequests
from .selectors import selector_from_dict

if TYPE_CHECKING:
    from .server import APIServer

Obj = dict[str, Any]
#: How long an eviction keeps its Pod in ``disruptedPods`` (``DeletionTimeout``).
DELETION_TIMEOUT = 120.0
_SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}


def _ready(pod: Obj) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """``GetScaledValueFromIntOrPercent``."""
    if isinstance(value, int):
        return value
    pct = int(str(value).rstrip("%"))
    return math.ceil(pct * total / 100) if round_up else (pct * total) // 100


class Disruption:
    """The eviction subresource and the budgets' status for one `APIServer`."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.pdbs = api.store.table(api.kinds.resolve("PodDisruptionBudget"))
        self.pods = api.store.table(api.kinds.resolve("Pod"))
        self._syncing = False

    def _budgets(self, ns: str) -> list[Obj]:
        entries = self.pdbs.by_ns.get(ns) or {}
        return [orjson.loads(entries[name].data) for name in sorted(entries)]

    def _pods_of(self, pdb: Obj, ns: str) -> list[Obj]:
        sel_spec = (pdb.get("spec") or {}).get("selector")
        if sel_spec is None:
            return []
        sel = selector_from_dict(sel_spec)  # policy/v1: {} selects every Pod of the namespace
        entries = self.pods.by_ns.get(ns) or {}
        return [orjson.loads(e.data) for name, e in sorted(entries.items())
                if sel.matches(e.labels)]

    # -- status ----------------------------------------------------------------------------------

    def budget_status(self, pdb: Obj, ns: str) -> Obj:
        """``trySync``: the counts of the budget's Pods, as the disruption controller writes
        them."""
        spec = pdb.get("spec") or {}
        old = pdb.get("status") or {}
        now = self.api._clock()
        pods = self._pods_of(pdb, ns)
        names = {p["metadata"]["name"] for p in pods}
        disrupted = {}
        for name, when in sorted((old.get("disruptedPods") or {}).items()):
            pod_gone = name not in names
            deleting = any(p["metadata"]["name"] == name and p["metadata"].get(
                "deletionTimestamp") for p in pods)
            if not pod_gone and not deleting and parse_time(when) + DELETION_TIMEOUT > now:
                disrupted[name] = when
        healthy = sum(1 for p in pods if _ready(p) and not p["metadata"].get(
            "deletionTimestamp") and p["metadata"]["name"] not in disrupted)
        expected = len(pods)
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, True))
        elif spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected, True)
        else:
            desired = expected
        allowed = max(0, healthy - desired) if expected else 0
        status: Obj = {"observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
                       "disruptionsAllowed": allowed, "currentHealthy": healthy,
                       "desiredHealthy": desired, "expectedPods": expected}
        if disrupted:
            status["disruptedPods"] = disrupted
        ok = allowed > 0
        prev = next((c for c in old.get("conditions") or () if c.get("type") ==
                     "DisruptionAllowed"), None)
        cond = {"type": "DisruptionAllowed", "status": "True" if ok else "False",
                "observedGeneration": status["observedGeneration"],
                "reason": "SufficientPods" if ok else "InsufficientPods", "message": "",
                "lastTransitionTime": self.api._now()}
        if prev is not None and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime", cond[
                "lastTransitionTime"])
        status["conditions"] = [cond]
        return status

    def sync(self, ns: str) -> None:
        """Write each budget of ``ns`` whose status is not what `budget_status` says."""
        if self._syncing:
            return
        self._syncing = True
        try:
            for pdb in self._budgets(ns):
                if pdb["metadata"].get("deletionTimestamp"):
                    continue
                status = self.budget_status(pdb, ns)
                if pdb.get("status") == status:
                    continue
                pdb["status"] = status
                self.api.update_status(pdb, caller="disruption-controller")
        finally:
            self._syncing = False

    # -- eviction --------------------------------------------------------------------------------

    def evict(self, name: str, ns: str, body: Any, caller: str, dry_run: bool) -> Obj:
        """``POST pods/<name>/eviction``: delete the Pod unless that breaks its budget."""
        if body is not None:
            if not isinstance(body, dict):
                raise BadRequest("the body of an eviction must be a policy/v1 Eviction")
            meta = body.get("metadata") or {}
            if meta.get("name") and meta["name"] != name:
                raise BadRequest("name in URL does not match name in Eviction object")
        entry = self.pods.objs.get((ns, name))
        if entry is None:
            raise NotFound("pods", name)
        pod = orjson.loads(entry.data)
        options = (body or {}).get("deleteOptions") or {}
        grace = options.get("gracePeriodSeconds")
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed",
                                                                 "Pending"):
            return self._delete(name, ns, grace, caller, dry_run)  # ``canIgnorePDB``
        budgets = [b for b in self._budgets(ns) if (b.get("spec") or {}).get("selector")
                   is not None and selector_from_dict(b["spec"]["selector"]).matches(
                       entry.labels)]
        if not budgets:
            return self._delete(name, ns, grace, caller, dry_run)
        if len(budgets) > 1:
            raise InternalError("This pod has more than one PodDisruptionBudget, which the "
                                "eviction subresource does not support.")
        pdb = budgets[0]
        status = pdb.get("status") or {}
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        if not _ready(pod) and (policy == "AlwaysAllow" or (
                status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0)):
            return self._delete(name, ns, grace, caller, dry_run)
        self._check_and_decrement(pdb, name, dry_run)
        return self._delete(name, ns, grace, caller, dry_run)

    def _check_and_decrement(self, pdb: Obj, pod: str, dry_run: bool) -> None:
        """``checkAndDecrement``."""
        status = dict(pdb.get("status") or {})
        pname = pdb["metadata"]["name"]
        if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise TooManyRequests(f"Cannot evict pod as it would violate the pod's disruption "
                                  f"budget. The disruption budget {pname} is still being "
                                  f"processed by the server.")
        if status.get("disruptionsAllowed", 0) <= 0:
            err = TooManyRequests("Cannot evict pod as it would violate the pod's disruption "
                                  "budget.")
            err.details = {"causes": [{
                "reason": "DisruptionBudget",
                "message": f"The disruption budget {pname} needs "
                           f"{status.get('desiredHealthy', 0)} healthy pods and has "
                           f"{status.get('currentHealthy', 0)} currently"}]}
            raise err
        if dry_run:
            return
        status["disruptionsAllowed"] -= 1
        disrupted = dict(status.get("disruptedPods") or {})
        disrupted[pod] = self.api._now()
        status["disruptedPods"] = disrupted
        pdb["status"] = status
        self._syncing = True  # the budget's own write: the counts follow the Pod's deletion
        try:
            self.api.update_status(pdb, caller="eviction")
        finally:
            self._syncing = False

    def _delete(self, name: str, ns: str, grace: Any, caller: str, dry_run: bool) -> Obj:
        self.api.delete("Pod", name, ns, grace_period_seconds=grace, caller=caller,
                        dry_run=dry_run)
        return dict(_SUCCESS)
