"""What the KubeRay scenarios share: a small cluster, manifests, a narrator, actor classes.

Every scenario runs the same kind of world, kept small so that twenty seeds of each fit in the
test suite: two Nodes with fast image pulls, KubeRay installed from its Helm chart (the operator
runs as its Deployment's Pods), and Ray clusters of a head and one or two workers. The
`Narrator` turns API-server writes into readable timeline lines (a RayJob's state, a Pod added
or gone, a submitter Job finished), so ``emu run`` tells the story without the noise.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import attrs

from ..apiserver.errors import ApiError
from ..kernel.trace import TraceEvent
from ..kube.config import KubeConfig
from ..simulation import Simulation

Obj = dict[str, Any]

NS = "default"
RAY_IMAGE = "rayproject/ray:2.46.0"
#: The article's RayJob.
DEMO = "demo-job"
#: controller-runtime's Lease timings, as KubeRay leaves them (SPEC §6.12).
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
#: client-go's jitter: a candidate retries every RetryPeriod x [1, 2.2).
MAX_RETRY = RETRY_PERIOD * 2.2
#: The Lease's holder label in the timeline.
LEASE = "ray-operator-leader"
#: The observer's lane in the timeline.
OBSERVER = "observer"


def kube(nodes: int = 2, *, stop_delay: float = 0.0) -> KubeConfig:
    """A small, quick cluster: ``nodes`` Nodes of 4 CPUs (so the scheduler's LeastAllocated
    score spreads the operator's replicas, which request 100m each, over different Nodes), short
    image pulls and container starts; containers take ``stop_delay`` s to exit on SIGTERM."""
    return KubeConfig(nodes=nodes, node_cpu="4", node_memory="16Gi", image_pull_delay=0.5,
                      container_start_delay=0.25, container_stop_delay=stop_delay)


REDIS: list[Obj] = [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "redis", "namespace": NS, "labels": {"app": "redis"}},
     "spec": {"containers": [{"name": "redis", "image": "redis:7.4",
                              "ports": [{"containerPort": 6379}]}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "redis", "namespace": NS},
     "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379, "targetPort": 6379}]}},
]


async def start(sim: Simulation, *, replicas: int = 1, redis: bool = False,
                **install: Any) -> Any:
    """Wait for the Nodes, start Redis when asked, install KubeRay from its chart and wait for a
    leader; the ``KubeRayInstall``."""
    await sim.cluster.wait_ready()
    if redis:
        for obj in REDIS:
            await sim.apply(obj)
    # The chart sets only limits; Kubernetes' Pod defaulting copies them into requests, which
    # the emulated API server does not do, so the requests are written out here (the scheduler
    # then spreads the replicas over Nodes, as it would).
    install.setdefault("resources", {"limits": {"cpu": "100m", "memory": "512Mi"},
                                     "requests": {"cpu": "100m", "memory": "512Mi"}})
    kuberay = await sim.install_kuberay(replicas=replicas, **install)
    await kuberay.wait_for_leader(timeout=120)
    return kuberay


def raycluster(name: str = "raycluster", *, workers: int = 1, storage: str = "memory",
               annotations: dict[str, str] | None = None,
               worker_env: dict[str, str] | None = None, node: str | None = None) -> Obj:
    """A RayCluster of a head and ``workers`` workers; ``storage`` is the GCS's: ``memory``,
    ``redis`` (external Redis at ``redis:6379``) or ``rocksdb`` (embedded, on a PVC); ``node``
    pins its Pods to one Node."""
    worker_container: Obj = {"name": "ray-worker", "image": RAY_IMAGE}
    if worker_env:
        worker_container["env"] = [{"name": k, "value": v} for k, v in sorted(worker_env.items())]
    spec: Obj = {
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
            "name": "ray-head", "image": RAY_IMAGE,
            "ports": [{"name": "gcs-server", "containerPort": 6379},
                      {"name": "dashboard", "containerPort": 8265},
                      {"name": "client", "containerPort": 10001}]}]}}},
        "workerGroupSpecs": [{
            "groupName": "workers", "replicas": workers, "minReplicas": 0, "maxReplicas": 10,
            "rayStartParams": {}, "template": {"spec": {"containers": [worker_container]}}}],
    }
    if node is not None:
        for template in (spec["headGroupSpec"]["template"],
                         spec["workerGroupSpecs"][0]["template"]):
            template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    if storage == "redis":
        spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    elif storage == "rocksdb":
        spec["gcsFaultToleranceOptions"] = {"backend": "rocksdb"}
    meta: Obj = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def rayjob(name: str = DEMO, *, seconds: int = 10, workers: int = 1,
           node: str | None = None) -> Obj:
    """The article's RayJob: K8sJobMode, a job of ``seconds`` virtual seconds, the cluster
    deleted when it finishes (its Pods on ``node`` when given)."""
    cluster = raycluster(name, workers=workers, node=node)["spec"]
    spec: Obj = {"entrypoint": f"python -c 'import time; time.sleep({seconds})'",
                 "submissionMode": "K8sJobMode", "shutdownAfterJobFinishes": True,
                 "rayClusterSpec": cluster}
    if node is not None:  # KubeRay's default submitter container, pinned to the Node
        spec["submitterPodTemplate"] = {"spec": {
            "restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "ray-job-submitter", "image": RAY_IMAGE,
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                          "requests": {"cpu": "500m", "memory": "200Mi"}}}]}}
    return copy.deepcopy({"apiVersion": "ray.io/v1", "kind": "RayJob",
                          "metadata": {"name": name, "namespace": NS}, "spec": spec})


def head_svc(cluster: str) -> str:
    return f"{cluster}-head-svc.{NS}.svc.cluster.local"


def condition(obj: Obj | None, ctype: str) -> Obj:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


def cluster_ready(obj: Obj) -> bool:
    """``state: ready`` and ``HeadPodReady`` True."""
    return bool((obj.get("status") or {}).get("state") == "ready"
                and condition(obj, "HeadPodReady").get("status") == "True")


def workers_ready(n: int) -> Callable[[Obj], bool]:
    return lambda obj: cluster_ready(obj) and (obj.get("status") or {}).get(
        "readyWorkerReplicas") == n


def rayjob_done(obj: Obj) -> bool:
    return (obj.get("status") or {}).get("jobDeploymentStatus") in ("Complete", "Failed")


def pods(sim: Simulation, selector: str) -> list[Obj]:
    """Pods matching ``selector`` as the API server has them (an observer's read), by name."""
    items: list[Obj] = sim.api.list("Pod", NS, label_selector=selector)["items"]
    return items


def ray_pods(sim: Simulation, cluster: str, node_type: str) -> list[Obj]:
    return pods(sim, f"ray.io/cluster={cluster},ray.io/node-type={node_type}")


def names(objs: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def restarts(pod: Obj) -> int:
    return sum(int(s.get("restartCount", 0))
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


def operator_pods(sim: Simulation) -> list[Obj]:
    return pods(sim, "app.kubernetes.io/name=kuberay-operator")


def short(process: str) -> str:
    """A Pod's container process name without its namespace: ``pod/container``."""
    return process.removeprefix(f"{NS}/")


# ---------------------------------------------------------------------------------------------
# The narrator
# ---------------------------------------------------------------------------------------------


class Narrator:
    """Watches API-server writes (through the trace, so it sees the truth even in an outage) and
    adds a line to the timeline when something a reader cares about changed: a RayJob's
    deployment or job status, a RayCluster's state or head readiness, a Ray or operator Pod
    added, running, deleting or gone, a submitter Job created or finished, a Lease holder.

    Its lines are on the ``observer`` lane; they are part of the digest, like every event."""

    KINDS = ("RayJob", "RayCluster", "Pod", "Job", "Lease")

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self._last: dict[tuple[str, str], tuple[Any, ...]] = {}
        sim.trace.subscribe(self._on_event)

    def say(self, event: str, **fields: Any) -> None:
        self.sim.trace.emit(OBSERVER, event, **fields)

    def _on_event(self, ev: TraceEvent) -> None:
        if ev.event != "write":
            return
        kind = ev.fields.get("kind")
        if kind not in self.KINDS or ev.fields.get("ns") != NS:
            return
        name = str(ev.fields.get("name"))
        obj = self._get(str(kind), name)
        key = (str(kind), name)
        state = self._state(str(kind), obj)
        if state is None or state == self._last.get(key):
            return
        self._last[key] = state
        self._tell(str(kind), name, obj, state)

    def _get(self, kind: str, name: str) -> Obj | None:
        try:
            obj: Obj = self.sim.api.get(kind, name, NS)
        except ApiError:  # NotFound: the object is gone
            return None
        return obj

    @staticmethod
    def _state(kind: str, obj: Obj | None) -> tuple[Any, ...] | None:
        if obj is None:
            return ("gone",)
        status = obj.get("status") or {}
        meta = obj.get("metadata") or {}
        if kind == "RayJob":
            return (status.get("jobDeploymentStatus", ""), status.get("jobStatus", ""))
        if kind == "RayCluster":
            return (status.get("state", ""),
                    condition(obj, "HeadPodReady").get("status", ""),
                    status.get("readyWorkerReplicas", 0),
                    "deleting" if meta.get("deletionTimestamp") else "")
        if kind == "Pod":
            labels = meta.get("labels") or {}
            if not (labels.get("ray.io/node-type") or labels.get("app.kubernetes.io/name") ==
                    "kuberay-operator" or labels.get("app") == "redis"):
                return None
            if meta.get("deletionTimestamp"):
                return ("deleting",)
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in status.get("conditions") or [])
            return ("ready" if ready else status.get("phase", "") or "Pending",)
        if kind == "Job":
            done = [c["type"] for c in status.get("conditions") or []
                    if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"]
            return (done[0] if done else "created",)
        if kind == "Lease":
            return (str((obj.get("spec") or {}).get("holderIdentity", "")),)
        return None

    def _tell(self, kind: str, name: str, obj: Obj | None, state: tuple[Any, ...]) -> None:
        if state != ("gone",) and kind in ("RayJob", "RayCluster") and not any(state):
            return  # just created, no status yet
        if kind == "RayJob":
            if state == ("gone",):
                self.say("rayjob_gone", rayjob=name)
            else:
                self.say("rayjob_status", rayjob=name, deployment=state[0] or "-",
                         job=state[1] or "-")
        elif kind == "RayCluster":
            if state == ("gone",):
                self.say("raycluster_gone", raycluster=name)
            else:
                self.say("raycluster_status", raycluster=name, state=state[0] or "-",
                         head_ready=state[1] or "-", ready_workers=state[2],
                         **({"deleting": True} if state[3] else {}))
        elif kind == "Pod":
            node = ((obj or {}).get("spec") or {}).get("nodeName")
            self.say(f"pod_{state[0].lower()}", pod=name, **({"node": node} if node else {}))
        elif kind == "Job":
            self.say(f"job_{state[0].lower()}", job=name)
        elif kind == "Lease" and name == LEASE:
            self.say("lease_holder", holder=state[0] or "-")


# ---------------------------------------------------------------------------------------------
# Actor classes (importable by name, as Ray's actor specs need)
# ---------------------------------------------------------------------------------------------


class Counter:
    """Counts in memory; a restart runs the constructor again, so the count is lost."""

    def __init__(self, start: int = 0) -> None:
        self.value = start

    def incr(self, by: int = 1) -> int:
        self.value += by
        return self.value

    def get(self) -> int:
        return self.value


class CheckpointedCounter(Counter):
    """A counter that saves its count after every call and loads it after a (re)start."""

    def save_checkpoint(self) -> dict[str, int]:
        return {"value": self.value}

    def load_checkpoint(self, state: dict[str, int]) -> None:
        self.value = int(state["value"])


# ---------------------------------------------------------------------------------------------
# Operator replicas as the trace tells of them
# ---------------------------------------------------------------------------------------------


@attrs.define
class ReplicaLife:
    """One operator container incarnation: when it started, first saw the Lease, led, ended."""

    process: str
    incarnation: int
    started: float
    first_observed: float | None = None
    acquired: float | None = None
    lost: float | None = None
    first_reconcile: float | None = None
    ended: float | None = None
    ended_by: str = ""


class OperatorLog:
    """Every operator replica's life and every reconcile, from the trace (attach it early)."""

    def __init__(self, sim: Simulation) -> None:
        self.lives: list[ReplicaLife] = []
        self._current: dict[str, ReplicaLife] = {}
        #: (time, process) of every reconcile an operator started.
        self.reconciles: list[tuple[float, str]] = []
        sim.trace.subscribe(self._on_event)

    @staticmethod
    def is_operator(process: str) -> bool:
        return process.endswith("/kuberay-operator")

    def _on_event(self, ev: TraceEvent) -> None:
        if not self.is_operator(ev.process):
            return
        if ev.event == "process_started":
            born = ReplicaLife(ev.process, int(ev.fields.get("incarnation", 1)), ev.t)
            self.lives.append(born)
            self._current[ev.process] = born
            return
        life = self._current.get(ev.process)
        if life is None:
            return
        if ev.event == "leader_observed" and life.first_observed is None:
            life.first_observed = ev.t
        elif ev.event == "leader_acquired" and life.acquired is None:
            life.acquired = ev.t
        elif ev.event == "leader_lost" and life.lost is None:
            life.lost = ev.t
        elif ev.event == "reconcile_started":
            self.reconciles.append((ev.t, ev.process))
            if life.first_reconcile is None:
                life.first_reconcile = ev.t
        elif ev.event in ("process_crashed", "process_exited") and life.ended is None:
            life.ended = ev.t
            life.ended_by = f"{ev.event.removeprefix('process_')} ({ev.fields.get('code')})"

    def reconciles_between(self, start: float, end: float) -> list[tuple[float, str]]:
        return [(t, p) for t, p in self.reconciles if start < t < end]

    def leaders(self) -> list[ReplicaLife]:
        return [life for life in self.lives if life.acquired is not None]

    def summary(self) -> list[tuple[Any, ...]]:
        """One row per incarnation: (pod/container#n, started, acquired, ended, how)."""
        return [(f"{short(life.process)}#{life.incarnation}", round(life.started, 3),
                 None if life.acquired is None else round(life.acquired, 3),
                 None if life.ended is None else round(life.ended, 3), life.ended_by or "running")
                for life in self.lives]
