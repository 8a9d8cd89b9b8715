"""Fault values the explorer's plans need beyond `emu.faults`: faults keyed to the n-th action
of a run rather than to a clock time, and faults whose target is found when they fire.

A plan generated from a reference run says "right after the operator's 3rd ``update_status`` of
RayJob ``demo-job``, crash the process that sent it", which stays meaningful when a knob or an
earlier fault moves every clock time; and "delete the head Pod of the cluster RayJob
``demo-job`` created", whose Pod name is generated at run time. They are `Fault` values like the
others: they print as code, store as JSON and replay exactly (same seed, same plan, same run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..faults import Crash, Fault, LoseResponses, Pause, Restart
from ..kernel.network import CallInfo, Match

if TYPE_CHECKING:
    from ..simulation import Simulation

OPERATOR_LEASE = "ray-operator-leader"


def _on_caller(then: Fault, info: CallInfo) -> Fault:
    """``then`` with an empty process acts on the caller; a `LoseResponses` without a caller
    loses the caller's next matching response."""
    if isinstance(then, (Crash, Pause, Restart)) and not then.process:
        return attrs.evolve(then, process=info.src)
    if isinstance(then, LoseResponses) and then.caller is None:
        return attrs.evolve(then, caller=info.src)
    return then


@attrs.frozen
class AtCall(Fault):
    """Perform ``then`` right after the ``n``-th call matching (verb, kind, name, caller, dst)
    took effect at its endpoint, before the caller hears back. A ``then`` with an empty process
    (`Crash`, `Pause`, `Restart`) acts on the process that made the call; a `LoseResponses`
    without a caller loses that process's next matching response. ``caller`` matches a process
    name or a part of it (``kuberay-operator``: any operator replica)."""

    n: int = 1
    then: Fault = attrs.field(factory=lambda: Fault())
    verb: str | None = None
    kind: str | None = None
    name: str | None = None
    caller: str | None = "kuberay-operator"
    dst: str | None = "apiserver"

    def apply(self, sim: Simulation) -> Any:
        if self.n < 1:
            raise ValueError(f"AtCall.n counts from 1, not {self.n}")
        match = Match(self.verb, self.kind, self.name, None, None, self.dst)
        # A run that arms its plan late (`runner.RunSpec.arm_at`) counts its calls from the
        # start of the run, as the same plan armed at the start would
        counter = getattr(sim, "explore_calls", None)
        seen = [counter.count(match, self.caller) if counter is not None else 0]
        if seen[0] >= self.n:
            return (f"its call came before the plan was armed ({seen[0]} matching call(s) by "
                    f"then, n={self.n})")
        rule: list[int] = []

        def fire(info: CallInfo) -> None:
            if self.caller is not None and self.caller not in info.src:
                return
            seen[0] += 1
            if seen[0] == self.n:
                sim.network.clear_rule(rule[0])
                sim.loop.call_soon(sim.faults.perform_planned, _on_caller(self.then, info))

        rule.append(sim.network.after_call(match, fire, count=None))

        def check() -> str | None:
            if seen[0] >= self.n:
                return None
            return f"only {seen[0]} matching call(s) came, not {self.n}"

        return check

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["then"] = self.then.to_dict()
        return out


def leader_process(sim: Simulation, namespace: str = "default",
                   lease_name: str = OPERATOR_LEASE) -> str | None:
    """The live process whose identity holds the Lease (KubeRay's by default; None when nobody
    valid does)."""
    try:
        lease = sim.api.get("Lease", lease_name, namespace)
    except Exception:  # NotFound: nobody ever led
        return None
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    host = holder.rsplit("_", 1)[0]
    if not host:
        return None
    for proc in sim.processes.all():
        if proc.alive and (f"/{host}/" in f"/{proc.name}/" or proc.host == host):
            return str(proc.name)
    return None


@attrs.frozen
class CrashLeader(Fault):
    """Crash whichever operator replica holds the Lease (``lease``) now (nothing when nobody
    does); its container is restarted by the kubelet as a new incarnation."""

    lease: str = OPERATOR_LEASE

    def apply(self, sim: Simulation) -> str | None:
        proc = leader_process(sim, lease_name=self.lease)
        if proc is None:
            return "no live process held the Lease"
        sim.faults.perform_planned(Crash(process=proc))
        return None


@attrs.frozen
class PauseLeader(Fault):
    """Freeze the Lease holder for ``duration`` seconds (a zombie leader: a successor takes over
    after 15 s, and the old one's in-flight writes land when it resumes: no fencing)."""

    duration: float = 30.0
    lease: str = OPERATOR_LEASE

    def apply(self, sim: Simulation) -> str | None:
        proc = leader_process(sim, lease_name=self.lease)
        if proc is None:
            return "no live process held the Lease"
        sim.faults.perform_planned(Pause(process=proc, duration=self.duration))
        return None


def ray_pods(sim: Simulation, owner: str, node_type: str,
             namespace: str = "default") -> list[dict[str, Any]]:
    """Live Pods of type ``node_type`` of RayClusters named ``owner`` or ``owner-*`` (the
    clusters a RayJob or RayService of that name creates), by name."""
    items = sim.api.list("Pod", namespace, label_selector=f"ray.io/node-type={node_type}")
    out = []
    for pod in items.get("items") or []:
        cluster = ((pod.get("metadata") or {}).get("labels") or {}).get("ray.io/cluster", "")
        if (cluster == owner or cluster.startswith(owner + "-")) \
                and not pod["metadata"].get("deletionTimestamp"):
            out.append(pod)
    return sorted(out, key=lambda p: p["metadata"]["name"])


@attrs.frozen
class LoseRayPod(Fault):
    """Lose a Ray Pod of the clusters of ``owner`` (a RayCluster, or the RayJob/RayService that
    creates ``owner-xxxxx`` clusters): the ``index``-th ``node_type`` Pod (``head`` or
    ``worker``) by name, ``how``: ``delete`` (kubectl delete, grace 0), ``kill`` (its containers
    die, exit 137), ``gcs`` (the head's gcs_server dies), ``node`` (its Node fails; back after
    ``duration`` when given) or ``evict`` (its kubelet evicts it under node pressure: phase
    Failed, reason Evicted, containers stopped, whatever its ``restartPolicy``; the Pod object
    stays until someone deletes it). Nothing happens when there is no such Pod."""

    owner: str = ""
    node_type: str = "head"
    how: str = "delete"
    index: int = 0
    duration: float | None = None

    def apply(self, sim: Simulation) -> str | None:
        from ..faults import KillGcs
        from ..kube.faults import DeletePod, FailNode, KillContainer

        if self.how not in ("delete", "kill", "gcs", "node", "evict"):
            raise ValueError("LoseRayPod.how is delete, kill, gcs, node or evict, not "
                             f"{self.how!r}")
        pods = ray_pods(sim, self.owner, self.node_type)
        if not pods:
            return f"no live {self.node_type} Pod of {self.owner!r}"
        pod = pods[min(self.index, len(pods) - 1)]
        name = pod["metadata"]["name"]
        if self.how == "delete":
            sim.faults.perform_planned(DeletePod(name=name, grace_period_seconds=0))
        elif self.how == "kill":
            sim.faults.perform_planned(KillContainer(pod=name))
        elif self.how == "gcs":
            sim.faults.perform_planned(KillGcs(pod=name))
        elif self.how == "evict":
            return _evict(sim, pod)
        else:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                return f"Pod {name} is not on a Node yet"
            sim.faults.perform_planned(FailNode(node=node, duration=self.duration))
        return None


@attrs.frozen
class LoseSubmitter(Fault):
    """Lose the submitter of RayJob ``owner`` (K8sJobMode: the Kubernetes Job KubeRay creates,
    named as the RayJob): ``how``: ``pod`` (``kubectl delete`` of its live Pod, graceful: the
    Job controller counts it failed and starts another while the backoff limit allows),
    ``job`` (``kubectl delete job``, background propagation: its Pods go with it) or ``hang``
    (its live Pod's processes freeze for good: a ``ray job logs --follow`` that never returns,
    the Pod Running all the while). Nothing happens when there is no such Pod or Job."""

    owner: str = ""
    how: str = "pod"

    def apply(self, sim: Simulation) -> str | None:
        from ..kube.faults import DeletePod

        if self.how not in ("pod", "job", "hang"):
            raise ValueError(f"LoseSubmitter.how is pod, job or hang, not {self.how!r}")
        if self.how == "job":
            jobs = sim.api.list("Job", "default").get("items") or []
            if not any(j["metadata"]["name"] == self.owner
                       and not j["metadata"].get("deletionTimestamp") for j in jobs):
                return f"no submitter Job {self.owner!r}"
            sim.api.delete("Job", self.owner, "default", caller="kubectl",
                           propagation_policy="Background")
            return None
        items = sim.api.list("Pod", "default", label_selector=f"job-name={self.owner}")
        live = sorted((p for p in items.get("items") or []
                       if not p["metadata"].get("deletionTimestamp")
                       and (p.get("status") or {}).get("phase") in ("Pending", "Running")),
                      key=lambda p: p["metadata"]["name"])
        if not live:
            return f"no live submitter Pod of {self.owner!r}"
        name = live[0]["metadata"]["name"]
        if self.how == "hang":
            from ..faults import Pause

            prefix = f"default/{name}/"
            procs = sorted(p.name for p in sim.processes.all()
                           if p.name.startswith(prefix) and p.alive and not p.paused)
            if not procs:
                return f"submitter Pod {name} runs no process yet"
            for proc in procs:
                sim.faults.perform_planned(Pause(process=proc))
            return None
        sim.faults.perform_planned(DeletePod(name=name))
        return None


def _evict(sim: Simulation, pod: dict[str, Any]) -> str | None:
    """The kubelet's eviction manager: the Pod's status says Failed/Evicted (written as its
    kubelet would); the kubelet then keeps the terminal phase and stops the containers."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        return f"Pod {pod['metadata']['name']} is not on a Node yet"
    pod["status"] = {**(pod.get("status") or {}), "phase": "Failed", "reason": "Evicted",
                     "message": "The node was low on resource: memory."}
    sim.api.update_status(pod, caller=f"kubelet-{node}")
    return None


@attrs.frozen
class PartitionLeaderFromHead(Fault):
    """Cut the network between the Lease holder's Pod and the head Pod of ``owner``'s cluster
    for ``duration`` seconds (the operator cannot reach the dashboard; the API server still
    answers both)."""

    owner: str = ""
    duration: float = 60.0

    def apply(self, sim: Simulation) -> str | None:
        from ..faults import Partition

        proc = leader_process(sim)
        heads = ray_pods(sim, self.owner, "head")
        if proc is None or not heads:
            return "no leader or no head Pod to partition"
        host = sim.processes.get(proc).host
        head_ip = (heads[0].get("status") or {}).get("podIP") or heads[0]["metadata"]["name"]
        sim.faults.perform_planned(Partition(a=host, b=head_ip, duration=self.duration))
        return None
