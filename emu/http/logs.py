"""``kubectl logs``: a container's output is what its program recorded in the trace.

Programs in the emulated world do not write to stdout; what they do is recorded as trace events
from their process, named ``<namespace>/<pod>/<container>`` by the kubelet. The log of a container
is those events, one line each (``<RFC 3339 time> <event> key=value ...``), the same lines the
``emu run`` timeline shows for that process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..apiserver.errors import BadRequest
from ..kernel.clock import rfc3339

if TYPE_CHECKING:
    from ..simulation import Simulation


def default_container(pod: dict[str, Any]) -> str:
    """kubectl's choice: the ``kubectl.kubernetes.io/default-container`` annotation, else the
    first container."""
    meta = pod.get("metadata") or {}
    chosen = (meta.get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    containers = (pod.get("spec") or {}).get("containers") or []
    return str(chosen or (containers[0].get("name") if containers else ""))


def pod_log(sim: Simulation, pod: dict[str, Any], container: str | None) -> str:
    meta = pod["metadata"]
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    names += [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []]
    name = container or default_container(pod)
    if name not in names:
        raise BadRequest(f"container {name} is not valid for pod {meta['name']}")
    process = f"{meta.get('namespace', 'default')}/{meta['name']}/{name}"
    lines = []
    for ev in sim.trace.select(process=process):
        fields = " ".join(f"{k}={v}" for k, v in ev.fields.items())
        lines.append(f"{rfc3339(ev.t)} {ev.event}" + (f" {fields}" if fields else "") + "\n")
    return "".join(lines)
