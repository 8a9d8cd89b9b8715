"""The Priority admission plugin: a Pod's ``spec.priority`` from its PriorityClass.

Ports plugin/pkg/admission/priority (``admitPod``): a Pod naming a class gets its ``value`` as
``spec.priority`` and its ``preemptionPolicy``; one naming none gets the ``globalDefault``
class's (the lowest-valued one when several claim it); a class that does not exist, or a
``priority``/``preemptionPolicy`` the Pod sets itself that differs from the class's, is
kube's 403. The two system classes (``system-node-critical``, ``system-cluster-critical``)
resolve without being stored.

It acts only when the world has a PriorityClass or the Pod names one: kube gives every Pod
``priority: 0`` when no default class exists, which would change every Pod of every world here
(docs/deviations.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from .errors import Forbidden

if TYPE_CHECKING:
    from .kinds import KindInfo
    from .server import APIServer

Obj = dict[str, Any]
#: ``scheduling.SystemPriorityClasses``: name -> value.
SYSTEM_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
PREEMPT_LOWER = "PreemptLowerPriority"


class Priority:
    """The Priority plugin of one `APIServer`."""

    def __init__(self, api: APIServer) -> None:
        self.classes = api.store.table(api.kinds.resolve("PriorityClass"))

    def _class(self, name: str) -> Obj | None:
        entry = self.classes.objs.get(("", name))
        if entry is not None:
            out: Obj = orjson.loads(entry.data)
            return out
        if name in SYSTEM_CLASSES:
            return {"metadata": {"name": name}, "value": SYSTEM_CLASSES[name],
                    "preemptionPolicy": PREEMPT_LOWER}
        return None

    def _default(self) -> Obj | None:
        """``getDefaultPriorityClass``: the global default with the lowest value."""
        best: Obj | None = None
        for key in sorted(self.classes.objs):
            pc = orjson.loads(self.classes.objs[key].data)
            if pc.get("globalDefault") and (best is None or pc.get("value", 0) <
                                            best.get("value", 0)):
                best = pc
        return best

    def admit(self, info: KindInfo, pod: Obj, name: str) -> None:
        """Resolve ``pod``'s priority in place (its ``spec`` is copied first)."""
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        wanted = spec.get("priorityClassName") or ""
        if wanted:
            pc = self._class(wanted)
            if pc is None:
                raise Forbidden.for_object(info.plural, info.group, name,
                                           f"no PriorityClass with name {wanted} was found")
        else:
            pc = self._default()
        value = int(pc.get("value", 0)) if pc is not None else 0
        policy = (pc.get("preemptionPolicy") if pc is not None else None) or PREEMPT_LOWER
        given = spec.get("priority")
        if given is not None and given != value:
            raise Forbidden.for_object(
                info.plural, info.group, name,
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given "
                f"PriorityClass name")
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise Forbidden.for_object(
                info.plural, info.group, name,
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided "
                f"in pod spec; priority admission controller computed {policy} from the given "
                f"PriorityClass name")
        spec = dict(spec)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
        spec["priority"] = value
        spec["preemptionPolicy"] = policy
        pod["spec"] = spec
