"""Kubernetes faults as fault-plan values: ``[FailNode(at=30.0, node="node-2")]``.

Each acts as a person or the infrastructure would, and says what undoes it:

================  ===============================================  ==========================
fault             what it does                                     undo
================  ===============================================  ==========================
DeletePod         ``kubectl delete pod`` (graceful unless 0)        — (a controller replaces it)
KillContainer     the container's process dies (exit 137)           the kubelet restarts it
FailNode          the machine is gone: kubelet and containers die   RecoverNode (or duration)
RecoverNode       the machine boots again, empty                    —
SlowKubelet       container starts and pod syncs take longer        after duration, or seconds=0
DelayEndpoints    EndpointSlice updates lag by ``seconds``           after duration
================  ===============================================  ==========================

They need a cluster from `emu.kube.cluster.install` in the simulation. Each `apply` returns what
``emu.faults.Faults`` records: None when the fault took effect, else why not (a string, or a
function answering at the end of the run); a Node that does not exist is a `ValueError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..apiserver.errors import ApiError, is_not_found
from ..kernel.faultbase import Fault
from ..kernel.network import NetworkError
from .cluster import cluster_of

if TYPE_CHECKING:
    from ..kernel.world import World as Simulation


def _node(sim: Simulation, node: str) -> str:
    known = cluster_of(sim).node_names
    if node not in known:
        raise ValueError(f"no Node named {node!r} (known: {', '.join(known) or 'none'})")
    return node


@attrs.frozen
class DeletePod(Fault):
    """Delete a Pod through the API server, as ``kubectl delete pod`` does."""

    name: str = ""
    namespace: str = "default"
    grace_period_seconds: int | None = None

    def apply(self, sim: Simulation) -> Any:
        client = cluster_of(sim).client("kubectl")
        outcome: list[str | None] = []

        async def delete() -> None:
            # kubectl's delete fails when the API server cannot be reached (an outage in the
            # same plan): the fault then did not take effect, and says why, rather than dying
            # in a background task while the plan prints as if the Pod had been deleted
            try:
                await client.delete("Pod", self.name, self.namespace,
                                    grace_period_seconds=self.grace_period_seconds)
            except ApiError as err:
                outcome.append(f"Pod {self.namespace}/{self.name}: {err}")
                if not is_not_found(err):
                    raise
            except NetworkError as err:
                why = (f"Pod {self.namespace}/{self.name} was not deleted at t={sim.now:g}s: "
                       f"the API server could not be reached ({type(err).__name__}: {err})")
                outcome.append(why)
                sim.trace.emit("faults", "fault_failed", fault=repr(self), reason=why)
            else:
                outcome.append(None)

        sim.loop.create_task(delete())
        return lambda: outcome[0] if outcome else "the delete never completed"


@attrs.frozen
class KillContainer(Fault):
    """Kill a running container's process (every container of the Pod when ``container`` is
    empty); the kubelet sees exit code 137 and acts by ``restartPolicy``."""

    pod: str = ""
    namespace: str = "default"
    container: str = ""

    def apply(self, sim: Simulation) -> Any:
        prefix = f"{self.namespace}/{self.pod}/"
        killed = 0
        for proc in sim.processes.all():
            if not proc.alive or not proc.name.startswith(prefix):
                continue
            if self.container and proc.name != prefix + self.container:
                continue
            proc.crash("fault: container killed")
            killed += 1
        if killed:
            return None
        what = f"container {self.container!r}" if self.container else "container"
        return f"no running {what} in Pod {self.namespace}/{self.pod} at t={sim.now:g}s"


@attrs.frozen
class FailNode(Fault):
    """The Node's machine is gone (`KubeCluster.fail_node`); it boots again after ``duration``
    seconds when given. ``delete_node`` also removes the Node object (a cloud provider's node
    controller), so PodGC force-deletes its Pods."""

    node: str = ""
    delete_node: bool = False
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        cluster = cluster_of(sim)
        node = _node(sim, self.node)
        if self.duration is not None:
            cluster.fail_node_for(node, self.duration, delete_node=self.delete_node)
        else:
            cluster.fail_node(node, delete_node=self.delete_node)


@attrs.frozen
class RecoverNode(Fault):
    """A failed Node boots again (empty) and its kubelet re-registers it."""

    node: str = ""

    def apply(self, sim: Simulation) -> str | None:
        cluster = cluster_of(sim)
        node = _node(sim, self.node)
        if cluster.node_is_up(node):
            return f"Node {node} is up at t={sim.now:g}s: nothing to recover"
        cluster.recover_node(node)
        return None


@attrs.frozen
class SlowKubelet(Fault):
    """Every container start and pod sync on ``node`` (every Node when empty) takes ``seconds``
    longer, for ``duration`` seconds when given."""

    node: str = ""
    seconds: float = 5.0
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        cluster = cluster_of(sim)
        nodes = [_node(sim, self.node)] if self.node else list(cluster.node_names)

        def set_delay(seconds: float) -> None:
            for node in nodes:
                rt = cluster.runtimes.get(node)
                if rt is not None:
                    rt.extra_delay = seconds

        set_delay(self.seconds)
        if self.duration is not None:
            sim.loop.call_later(self.duration, set_delay, 0.0)


@attrs.frozen
class DelayEndpoints(Fault):
    """EndpointSlice updates lag by ``seconds`` (instead of the configured propagation delay),
    for ``duration`` seconds when given."""

    seconds: float = 10.0
    duration: float | None = None

    def apply(self, sim: Simulation) -> None:
        cluster = cluster_of(sim)
        cluster.endpoint_delay_override = self.seconds
        if self.duration is not None:
            def restore() -> None:
                cluster.endpoint_delay_override = None

            sim.loop.call_later(self.duration, restore)
