"""``kubectl logs``: a container's output is what its program recorded in the trace.

Programs in the emulated world do not write to stdout; what they do is recorded as trace events
from their process, named ``<namespace>/<pod>/<container>`` by the kubelet. The log of a container
is those events, one line each (``<RFC 3339 time> <event> key=value ...``), the same lines the
``emu run`` timeline shows for that process, from its current run (``previous=true``: the run
before a restart). ``follow=true`` keeps the response open and adds each new line as it is
recorded, until the container's process ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import BadRequest
from ..kernel.clock import rfc3339
from ..kernel.trace import TraceEvent

if TYPE_CHECKING:
    from ..simulation import Simulation


def default_container(pod: dict[str, Any]) -> str:
    """kubectl's choice: the ``kubectl.kubernetes.io/default-container`` annotation, else the
    first container."""
    meta = pod.get("metadata") or {}
    chosen = (meta.get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    containers = (pod.get("spec") or {}).get("containers") or []
    return str(chosen or (containers[0].get("name") if containers else ""))


def container_process(pod: dict[str, Any], container: str | None) -> str:
    """The process name of ``container`` (kubectl's default when None); 400 for a container the
    Pod does not have."""
    meta = pod["metadata"]
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    names += [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []]
    name = container or default_container(pod)
    if name not in names:
        raise BadRequest(f"container {name} is not valid for pod {meta['name']}")
    return f"{meta.get('namespace', 'default')}/{meta['name']}/{name}"


def check_started(pod: dict[str, Any], container: str | None) -> None:
    """400 as kube answers a log request for a container with nothing to show yet: a Pod not
    scheduled (``does not have a host assigned``) or a container that has not started (``is
    waiting to start: ContainerCreating``); a container waiting to restart shows its last run."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    status = pod.get("status") or {}
    name = container or default_container(pod)
    if not spec.get("nodeName"):
        raise BadRequest(f"pod {meta['name']} does not have a host assigned")
    statuses = [*(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or [])]
    found = next((cs for cs in statuses if cs.get("name") == name), None)
    reason = "ContainerCreating"
    if found is not None:
        state = found.get("state") or {}
        if "waiting" not in state or (found.get("lastState") or {}).get("terminated"):
            return
        reason = (state.get("waiting") or {}).get("reason") or reason
    raise BadRequest(f'container "{name}" in pod "{meta["name"]}" is waiting to start: '
                     f"{reason}")


def log_line(ev: TraceEvent) -> str:
    fields = " ".join(f"{k}={v}" for k, v in ev.fields.items())
    return f"{rfc3339(ev.t)} {ev.event}" + (f" {fields}" if fields else "") + "\n"


def _incarnations(events: list[TraceEvent]) -> list[list[TraceEvent]]:
    """The events of a container's process cut at each start: one list per container run
    (a restart, or a new Pod of the same name, starts a new one)."""
    runs: list[list[TraceEvent]] = []
    for ev in events:
        if ev.event == "process_started" or not runs:
            runs.append([])
        runs[-1].append(ev)
    return runs


def pod_log(sim: Simulation, pod: dict[str, Any], container: str | None,
            tail: int | None = None, *, previous: bool = False, since: float | None = None,
            limit_bytes: int | None = None) -> str:
    """The log of the container's current run (``previous``: of the run before it, 400 when
    there is none, as the kubelet answers); ``since`` keeps the lines recorded at or after that
    virtual time (``sinceSeconds``, ``sinceTime``), ``tail`` only that many last lines
    (``tailLines``), ``limit_bytes`` the first bytes (``limitBytes``)."""
    process = container_process(pod, container)
    runs = _incarnations(sim.trace.select(process=process))
    if previous:
        if len(runs) < 2:
            name = process.rsplit("/", 1)[1]
            raise BadRequest(f'previous terminated container "{name}" in pod '
                             f'"{pod["metadata"]["name"]}" not found')
        events = runs[-2]
    else:
        events = runs[-1] if runs else []
    lines = [log_line(ev) for ev in events if since is None or ev.t >= since]
    if tail is not None:
        lines = lines[max(0, len(lines) - tail):]
    text = "".join(lines)
    if limit_bytes is not None and limit_bytes >= 0:
        text = text.encode()[:limit_bytes].decode(errors="ignore")
    return text


#: Events after which a container's process writes nothing more.
_ENDS = frozenset({"process_exited", "process_crashed", "process_stopped"})


class LogFollowers:
    """``kubectl logs -f``: one trace subscription for the whole server, fanning new events out
    to the streams following each process; a stream ends when its process exits."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self._queues: dict[str, dict[int, asyncio.Queue[str | None]]] = {}
        self._subscribed = False

    def _on_event(self, ev: TraceEvent) -> None:
        followers = self._queues.get(ev.process)
        if not followers:
            return
        line: str | None = log_line(ev)
        for queue in followers.values():
            queue.put_nowait(line)
            if ev.event in _ENDS:
                queue.put_nowait(None)

    def follow(self, pod: dict[str, Any], container: str | None, tail: int | None = None,
               since: float | None = None) -> tuple[AsyncIterator[bytes], Callable[[], None]]:
        """The log so far, then each new line until the container's process ends."""
        process = container_process(pod, container)
        if not self._subscribed:
            self.sim.trace.subscribe(self._on_event)
            self._subscribed = True
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._queues.setdefault(process, {})[id(queue)] = queue
        backlog = pod_log(self.sim, pod, container, tail, since=since)
        proc = self.sim.processes.find(process)
        if proc is None or not proc.alive:
            queue.put_nowait(None)

        def close() -> None:
            self._queues.get(process, {}).pop(id(queue), None)
            queue.put_nowait(None)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                if backlog:
                    yield backlog.encode()
                while True:
                    line = await queue.get()
                    if line is None:
                        return
                    yield line.encode()
            finally:
                close()

        return chunks(), close
