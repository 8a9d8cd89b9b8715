"""Events written by the built-ins (kubelet, scheduler, StatefulSet controller): ``record.EventRecorder``.

Why the built-ins need them: a failure to start a container or to place a Pod must be visible to a
user (``kubectl describe pod`` shows these Events), never a silent stall. Like client-go's
recorder, a repeat of the same (object, type, reason, message) does not create a new Event but
bumps the first one's ``count`` and ``lastTimestamp`` (the EventCorrelator's aggregation), and a
write that fails is dropped. A name is ``<object>.<nanoseconds + sequence, hex>``; one that
another recorder took at the same virtual instant moves on to the next number. Every Event is
also a trace event (``k8s_event``) of the process that records it, so a trace shows the failure
too.

In a standard cluster (``KubeConfig.standard_cluster``) the built-ins also record the Events of
normal operation with kube's reasons and texts: the scheduler's ``Scheduled``; the kubelet's
``Pulling``, ``Pulled``, ``Created``, ``Started`` and ``Killing``; ``SuccessfulCreate`` and
``SuccessfulDelete`` of the ReplicaSet, DaemonSet, Job and StatefulSet controllers; the
Deployment controller's ``ScalingReplicaSet``; the Job controller's ``Completed``. A minimal
world records none of them (its history stays what it was).
"""

from __future__ import annotations

from typing import Any

from ..apiserver.errors import ApiError, is_already_exists
from ..client.client import Client
from ..kernel import clock
from ..kernel.network import NetworkError
from ..kernel.process import Process
from .common import Obj, rfc3339


class EventRecorder:
    """Records core/v1 Events for one component (``kubelet``, ``default-scheduler``, ...)."""

    def __init__(self, client: Client, process: Process, component: str,
                 host: str | None = None) -> None:
        self.client = client
        self.process = process
        self.component = component
        self.host = host
        self._seq = 0
        #: (uid, type, reason, message) → [event name, namespace, count]
        self._seen: dict[tuple[str, str, str, str], list[Any]] = {}

    def event(self, obj: Obj, event_type: str, reason: str, message: str, *,
              component: str | None = None) -> None:
        """Record an Event about ``obj`` (written in the background; never raises);
        ``component`` reports it as another component than the recorder's (a provisioner the
        recording process plays)."""
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        key = (str(meta.get("uid", "")), event_type, reason, message)
        self.process.log("k8s_event", object=f"{obj.get('kind', '')}/{ns}/{meta.get('name')}",
                         type=event_type, reason=reason, message=message)
        now = clock.now()
        seen = self._seen.get(key)
        if seen is not None:
            seen[2] += 1
            patch = {"count": seen[2], "lastTimestamp": rfc3339(now)}
            self.process.spawn(self._write_patch(seen[0], seen[1], patch))
            return
        self._seq += 1
        name = f"{meta.get('name', '')}.{round(now * 1e9) + self._seq:x}"
        self._seen[key] = [name, ns, 1]
        component = component or self.component
        source: Obj = {"component": component}
        if self.host:
            source["host"] = self.host
        stamp = rfc3339(now)
        event: Obj = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"),
                               "kind": obj.get("kind", ""), "name": meta.get("name", ""),
                               "namespace": meta.get("namespace", ""),
                               "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": event_type,
            "source": source, "reportingComponent": component,
            "reportingInstance": self.host or "",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        self.process.spawn(self._write_create(event, key))

    async def _write_create(self, event: Obj, key: tuple[str, str, str, str]) -> None:
        """Create the Event; a name another recorder took at the same instant (its time and
        sequence number alike, which virtual time makes common) moves on to the next one."""
        for _ in range(8):
            try:
                await self.client.create(event)
                return
            except ApiError as err:
                if not is_already_exists(err):
                    return  # the broadcaster drops what it cannot write
            except (TimeoutError, NetworkError, OSError):
                return
            base, _, suffix = event["metadata"]["name"].rpartition(".")
            name = f"{base}.{int(suffix, 16) + 1:x}"
            event = {**event, "metadata": {**event["metadata"], "name": name}}
            seen = self._seen.get(key)
            if seen is not None:  # repeats meanwhile are counted in the Event written now
                seen[0] = name
                event["count"] = seen[2]

    async def _write_patch(self, name: str, namespace: str, patch: Obj) -> None:
        try:
            await self.client.patch("Event", name, patch, namespace)
        except (TimeoutError, ApiError, NetworkError, OSError):
            pass
