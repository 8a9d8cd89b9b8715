"""The kubelet: one process per Node that runs the Pods bound to it and reports their status.

What it does, as the real kubelet does it (``pkg/kubelet``: ``kubelet.go`` ``syncPod``,
``kuberuntime_manager.go`` ``computePodActions``, ``kubelet_pods.go`` ``generateAPIPodStatus`` and
``getPhase``, ``status/generate.go``):

- registers its Node (capacity, addresses, ``Ready=True`` ``KubeletReady``) and renews its Lease in
  ``kube-node-lease`` every `KubeConfig.node_lease_renew_interval`, posting the Node's status then
  too when it changed (the node lifecycle controller marked it ``Unknown``) or every 5 min;
- watches the Pods with ``spec.nodeName`` = its Node; for each, a pod worker creates the sandbox
  (a deterministic IP ``10.244.<node>.<n>``), runs init containers one by one, then the
  containers, each a process running the program its image names;
- restarts exited containers by ``restartPolicy`` with CrashLoopBackOff (10 s doubling to 300 s,
  the first restart immediate, reset after ten stable minutes);
- probes (`emu.kube.probes`): startup, liveness and readiness workers per container attempt;
  readiness from the readiness probe where one is set, a liveness or startup failure kills the
  container; without a readiness probe, the program's readiness as it changes (a deliberate
  difference: real containers without a probe are ready as soon as they run; here the program
  decides, and `idle_program` is ready at once). With ``KubeConfig(probes=False)`` only
  readiness is sampled, from the program's state, on the readiness probe's schedule;
- writes ``status`` (phase, the PodReadyToStartContainers / Initialized / Ready / ContainersReady
  conditions, container statuses with state, lastState, restartCount, started, ready) through the
  API server, only when it changed, keeping conditions other components own;
- on ``deletionTimestamp``: SIGTERM to every container (programs that handle it run their
  handler), SIGKILL once a handler returned and `KubeConfig.container_stop_delay` passed, or at
  the grace period's end; then writes the terminal status and deletes the Pod with grace 0.

- native sidecars (init containers with ``restartPolicy: Always``): started in order, kept
  running and restarted beside the containers, counted for readiness, stopped once the
  containers are done for good (`is_sidecar`, ``getPhase``'s restartable init containers);
  a regular container's own ``restartPolicy`` / ``restartPolicyRules`` override the Pod's
  (`container_should_restart`).

Not emulated: lifecycle hooks, ``activeDeadlineSeconds`` on Pods,
resource limits (nothing is OOM-killed), image pull errors.
This module is long because the pod worker and the status it reports are one state machine.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import math
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, is_already_exists, is_conflict, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel import clock
from ..kernel.network import NetworkError
from ..kernel.process import Process, ProcessGone
from . import probes, projected, standard
from .common import ConfigError, Obj, milli, parse_quantity, rfc3339, set_condition
from .containers import ContainerRecord, NodeRuntime, PodSandbox
from .events import EventRecorder

if TYPE_CHECKING:
    from .cluster import KubeCluster

NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_LEASE_DURATION = 40
#: Conditions the kubelet owns; any other condition on a Pod is kept as it is.
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
CONFIG_RETRY = 10.0
#: ``syncFrequency``: how often Secret and ConfigMap volumes are refreshed (`sync_projected_volumes`).
VOLUME_SYNC_PERIOD = 60.0
STATUS_RETRY = 1.0
#: ``nodeStatusReportFrequency``: the Node's status is posted at least this often, changed or not.
NODE_STATUS_REPORT_FREQUENCY = 300.0


def node_ip(index: int) -> str:
    return f"10.0.{index >> 8 & 255}.{index & 255}"


class Kubelet:
    """The kubelet of one Node; `main` is its process's entry point."""

    def __init__(self, cluster: KubeCluster, node: str, index: int) -> None:
        self.cluster = cluster
        self.config = cluster.config
        self.node = node
        self.index = index
        self.ip = standard.CONTROL_PLANE_IP if node == cluster.control_plane else node_ip(index)
        #: Whether to record the Events of normal operation (a standard cluster's).
        self.normal_events = cluster.config.standard_cluster
        self.workers: dict[str, PodWorker] = {}
        #: The informer's current object per Pod uid (shared with the cache: never mutated).
        self.latest: dict[str, Obj] = {}
        self.process: Process | None = None
        self.client: Client | None = None
        self.pods: Informer | None = None
        self.runtime: NodeRuntime | None = None
        self.node_informer: Informer | None = None
        self._last_node_report = 0.0
        self.events: EventRecorder | None = None
        self._mirror_wake = asyncio.Event()

    async def main(self, process: Process) -> None:
        self.process = process
        self.client = Client(self.cluster.world.network, process=process)
        self.events = EventRecorder(self.client, process, "kubelet", self.node)
        self.runtime = self.cluster.runtime_for(self.node, self.index)
        if self.normal_events:
            self.runtime.on_started = self._container_started
        await self._retry(self.register_node)
        self.node_informer = Informer(self.client, "Node", field_selector=f"metadata.name={self.node}")
        process.spawn(self.node_informer.run(), name=f"{process.name}:node")
        process.spawn(self.lease_loop(), name=f"{process.name}:lease")
        self.pods = Informer(self.client, "Pod", field_selector=f"spec.nodeName={self.node}")
        self.pods.add_event_handler(FuncHandler(
            on_add=self._pod_changed, on_update=lambda _old, new: self._pod_changed(new),
            on_delete=lambda pod: self._pod_changed(pod, deleted=True)))
        process.spawn(self._adopt_after_sync(), name=f"{process.name}:adopt")
        if self.cluster.static_pods.get(self.node):
            process.spawn(self.sync_mirror_pods(), name=f"{process.name}:mirror")
        await self.pods.run()

    def event(self, pod: Obj, event_type: str, reason: str, message: str) -> None:
        """Record an Event about ``pod`` (see `emu.kube.events`)."""
        if self.events is not None:
            self.events.event({"apiVersion": "v1", "kind": "Pod", **pod}, event_type, reason,
                              message)

    def _container_started(self, box: PodSandbox, rec: ContainerRecord) -> None:
        """A container runs: the Events the kubelet records on the way (``Pulled``,
        ``Created``, ``Started``, with kube 1.33's texts)."""
        pod = self.latest.get(box.uid)
        if pod is None:
            return
        if rec.pulled is not None:
            self.event(pod, "Normal", "Pulled",
                       f'Successfully pulled image "{rec.image}" in '
                       f"{go_duration_string(rec.pulled)} ({go_duration_string(rec.pulled)} "
                       f"including waiting). Image size: 0 bytes.")
        else:
            self.event(pod, "Normal", "Pulled",
                       f'Container image "{rec.image}" already present on machine')
        self.event(pod, "Normal", "Created", f"Created container: {rec.name}")
        self.event(pod, "Normal", "Started", f"Started container {rec.name}")

    # -- static Pods ------------------------------------------------------------------------------

    async def sync_mirror_pods(self) -> None:
        """The static Pods' mirror Pods (``podManager``, ``mirrorClient.CreateMirrorPod``):
        created once the Pod list arrived where none of that name is bound here, and again
        whenever one is deleted."""
        assert self.process is not None and self.pods is not None
        assert self.node_informer is not None
        await self.pods.wait_synced()
        await self.node_informer.wait_synced()
        self._mirror_wake = asyncio.Event()
        self.pods.add_event_handler(FuncHandler(on_delete=self._mirror_deleted))
        while True:
            self._mirror_wake.clear()
            try:
                await self.ensure_mirror_pods()
            except (ApiError, NetworkError) as err:
                self.process.log("mirror_pod_failed", error=str(err))
                await self.process.sleep(STATUS_RETRY)
                continue
            await self._mirror_wake.wait()

    def _mirror_deleted(self, pod: Obj) -> None:
        if standard.is_mirror_pod(pod):
            self._mirror_wake.set()

    async def ensure_mirror_pods(self) -> None:
        assert self.client is not None and self.pods is not None
        assert self.node_informer is not None
        node = self.node_informer.get(self.node)
        if node is None:
            return
        for manifest in self.cluster.static_pods.get(self.node, []):
            mirror = standard.mirror_pod(manifest, node, clock.now())
            meta = mirror["metadata"]
            if self.pods.get(meta["name"], meta["namespace"]) is not None:
                continue
            try:
                await self.client.create(mirror)
            except ApiError as err:
                if not is_already_exists(err):
                    raise

    async def _retry(self, fn: Any) -> None:
        delay = 0.5
        while True:
            try:
                await fn()
                return
            except (ApiError, NetworkError) as err:
                assert self.process is not None
                self.process.log("kubelet_retry", what=fn.__name__, error=str(err))
                await self.process.sleep(delay)
                delay = min(delay * 2, 10.0)

    # -- the Node --------------------------------------------------------------------------------

    def node_object(self) -> Obj:
        cfg = self.config
        capacity = {"cpu": cfg.node_cpu, "memory": cfg.node_memory, "pods": str(cfg.node_pods),
                    "ephemeral-storage": "100Gi"}
        labels = {"kubernetes.io/hostname": self.node, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64", **cfg.node_labels}
        pool = self.cluster.node_pools.get(self.node)
        spec: Obj = {}
        if self.node == self.cluster.control_plane:  # kubeadm's label and taint
            labels[standard.CONTROL_PLANE_LABEL] = ""
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
            spec["taints"] = [dict(standard.CONTROL_PLANE_TAINT)]
        if pool is not None:  # a node pool's Node: its labels, taints and extended resources
            capacity.update({k: str(v) for k, v in pool.capacity.items()})
            labels.update(pool.labels)
            if pool.taints:
                spec["taints"] = [dict(t) for t in pool.taints]
        base = ((10 << 24) | (244 << 16)) + (self.index << 8)
        cidr = ".".join(str(base >> s & 255) for s in (24, 16, 8, 0)) + "/24"
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.node, "labels": labels},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr], **spec},
            "status": {
                "capacity": capacity, "allocatable": dict(capacity),
                "conditions": self.node_conditions(),
                "addresses": [{"type": "InternalIP", "address": self.ip},
                              {"type": "Hostname", "address": self.node}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": self.node_info(),
                "phase": "Running",
            },
        }

    def node_info(self) -> Obj:
        """``NodeSystemInfo`` with every field kube's schema requires (typed clients such as
        lightkube refuse a Node without them); the ids are derived from the Node's name, so
        they are stable and draw nothing from the world's random stream."""
        digest = hashlib.sha256(f"emu-node:{self.node}".encode()).hexdigest()
        uuid = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        return {"machineID": digest[32:64], "systemUUID": uuid, "bootID": uuid[::-1],
                "kernelVersion": "6.1.0-emu", "osImage": "kuberay-emu",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": self.config.kubernetes_version,
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}

    def node_conditions(self) -> list[Obj]:
        now = rfc3339(clock.now())
        out = []
        for ctype, status, reason, message in (
                ("MemoryPressure", "False", "KubeletHasSufficientMemory",
                 "kubelet has sufficient memory available"),
                ("DiskPressure", "False", "KubeletHasNoDiskPressure",
                 "kubelet has no disk pressure"),
                ("PIDPressure", "False", "KubeletHasSufficientPID",
                 "kubelet has sufficient PID available"),
                ("Ready", "True", "KubeletReady", "kubelet is posting ready status")):
            out.append({"type": ctype, "status": status, "reason": reason, "message": message,
                        "lastHeartbeatTime": now, "lastTransitionTime": now})
        return out

    async def register_node(self) -> None:
        """``registerWithAPIServer``: create the Node, or report it Ready again."""
        assert self.client is not None
        try:
            await self.client.create(self.node_object())
            return
        except ApiError as err:
            if not is_already_exists(err):
                raise
        existing = await self.client.get("Node", self.node)
        conditions = list((existing.get("status") or {}).get("conditions") or [])
        for cond in self.node_conditions():
            conditions = set_condition(conditions, cond)
        await self.client.patch("Node", self.node, {"status": {"conditions": conditions}},
                                subresource="status")
        self._last_node_report = clock.now()

    async def lease_loop(self) -> None:
        """Renew the Node's Lease (``nodelease`` controller), the heartbeat the node lifecycle
        controller watches, and post the Node's status (``syncNodeStatus``, every 10 s too);
        each failure is retried on the next round, so both resume after an outage."""
        assert self.client is not None and self.process is not None
        lease: Obj | None = None
        while True:
            try:
                lease = await self._renew(lease)
            except (ApiError, NetworkError) as err:
                lease = None
                self.process.log("lease_renew_failed", error=str(err))
            try:
                await self.sync_node_status()
            except (ApiError, NetworkError) as err:
                self.process.log("node_status_failed", error=str(err))
            await self.process.sleep(self.config.node_lease_renew_interval)

    async def sync_node_status(self) -> None:
        """``tryUpdateNodeStatus``: this kubelet's conditions over the Node its informer holds,
        patched when they changed (heartbeats aside) or `NODE_STATUS_REPORT_FREQUENCY` after the
        last report. A Node the node lifecycle controller marked ``Unknown`` is ``Ready`` again
        one round after the kubelet reaches the API server."""
        assert self.client is not None and self.node_informer is not None
        node = self.node_informer.get(self.node)
        if node is None:
            return
        old = list((node.get("status") or {}).get("conditions") or [])
        conditions = old
        for cond in self.node_conditions():
            conditions = set_condition(conditions, cond)

        def beatless(conds: list[Obj]) -> list[Obj]:
            return [{k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in conds]

        if beatless(conditions) == beatless(old) and \
                clock.now() - self._last_node_report < NODE_STATUS_REPORT_FREQUENCY:
            return
        await self.client.patch("Node", self.node, {"status": {"conditions": conditions}},
                                subresource="status")
        self._last_node_report = clock.now()

    async def _renew(self, lease: Obj | None) -> Obj:
        assert self.client is not None
        now = clock.rfc3339_micro(clock.now())
        if lease is None:
            try:
                lease = await self.client.get("Lease", self.node, NODE_LEASE_NAMESPACE)
            except ApiError as err:
                if not is_not_found(err):
                    raise
                return await self.client.create({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.node, "namespace": NODE_LEASE_NAMESPACE},
                    "spec": {"holderIdentity": self.node,
                             "leaseDurationSeconds": NODE_LEASE_DURATION, "renewTime": now}})
        lease = dict(lease)
        lease["spec"] = {**(lease.get("spec") or {}), "holderIdentity": self.node,
                         "leaseDurationSeconds": NODE_LEASE_DURATION, "renewTime": now}
        try:
            return await self.client.update(lease)
        except ApiError as err:
            if is_conflict(err) or is_not_found(err):
                return await self._renew(None)
            raise

    # -- pods ------------------------------------------------------------------------------------

    def _pod_changed(self, pod: Obj, deleted: bool = False) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        if deleted:
            self.latest.pop(uid, None)
        else:
            self.latest[uid] = pod
        worker = self.workers.get(uid)
        if worker is None:
            if deleted:
                return  # a deletion of a Pod this kubelet never ran
            worker = PodWorker(self, pod)
            self.workers[uid] = worker
            assert self.process is not None
            self.process.spawn(worker.run(), name=f"{self.process.name}:pod:{meta['name']}")
        worker.wake()

    async def _adopt_after_sync(self) -> None:
        """After the first list: stop sandboxes whose Pod no longer exists (it was deleted while
        this kubelet was down)."""
        assert self.pods is not None and self.runtime is not None
        await self.pods.wait_synced()
        known = {(p.get("metadata") or {}).get("uid") for p in self.pods.peek_list()}
        for uid in sorted(self.runtime.sandboxes):
            if uid not in known:
                self.runtime.remove_sandbox(uid)


def is_sidecar(c: Obj) -> bool:
    """``IsRestartableInitContainer``: an init container with ``restartPolicy: Always`` (a
    native sidecar, Kubernetes 1.29+)."""
    return c.get("restartPolicy") == "Always"


def container_should_restart(c: Obj, spec: Obj, exit_code: int | None) -> bool:
    """``podutil.ContainerShouldRestart`` (ContainerRestartRules, beta in Kubernetes 1.35): the
    container's ``restartPolicyRules`` (the first whose exit codes match; action ``Restart``),
    then its own ``restartPolicy``, then the Pod's."""
    code = 0 if exit_code is None else exit_code
    own = c.get("restartPolicy")
    if own is not None:
        for rule in c.get("restartPolicyRules") or []:
            codes = (rule.get("exitCodes") or {})
            values = codes.get("values") or []
            hit = code in values if codes.get("operator") == "In" else \
                code not in values if codes.get("operator") == "NotIn" else False
            if hit:
                if rule.get("action") == "Restart":
                    return True
                break
        if own in ("Always", "OnFailure", "Never"):
            return own == "Always" or (own == "OnFailure" and code != 0)
    policy = spec.get("restartPolicy", "Always")
    return policy == "Always" or (policy == "OnFailure" and code != 0)


def _go_list(names: list[str]) -> str:
    return "[" + " ".join(names) + "]"


def _image_id(image: str) -> str:
    repo = image.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo[: repo.rfind(":")]
    if "/" not in repo:
        repo = f"library/{repo}"
    if "." not in repo.split("/", 1)[0]:
        repo = f"docker.io/{repo}"
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def qos_class(spec: Obj) -> str:
    """``qos.GetPodQOS``, for cpu and memory."""
    requests: dict[str, float] = {}
    limits: dict[str, float] = {}
    guaranteed = True
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = c.get("resources") or {}
        req = {k: parse_quantity(v) for k, v in (res.get("requests") or {}).items()
               if k in ("cpu", "memory")}
        lim = {k: parse_quantity(v) for k, v in (res.get("limits") or {}).items()
               if k in ("cpu", "memory")}
        for k, val in req.items():
            requests[k] = requests.get(k, 0.0) + val
        for k, val in lim.items():
            limits[k] = limits.get(k, 0.0) + val
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for k in ("cpu", "memory"):
            if k in req and k in lim and req[k] != lim[k]:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class VolumeError(Exception):
    """A Pod volume can't be set up yet (FailedMount)."""

    def __init__(self, volume: str, detail: str) -> None:
        super().__init__(f"{volume}: {detail}")
        self.volume = volume
        self.detail = detail


class PodWorker:
    """Runs one Pod on the Node until it is gone: ``syncPod`` / ``syncTerminatingPod``."""

    def __init__(self, kubelet: Kubelet, pod: Obj) -> None:
        meta = pod["metadata"]
        self.kubelet = kubelet
        self.config = kubelet.config
        self.uid: str = meta["uid"]
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace", "default")
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._last_status: Obj | None = None
        self._volumes: dict[str, Path] | None = None
        self._volumes_synced_at = 0.0
        #: Projected volumes by name (their tokens' refresh times live there).
        self._projected: dict[str, projected.ProjectedVolume] = {}
        self._config_errors: dict[str, str] = {}
        #: The waiting reason of a container in `_config_errors` (CreateContainerConfigError or
        #: CreateContainerError).
        self._error_reasons: dict[str, str] = {}
        self._backoff_msg: dict[str, str] = {}
        self._lost: dict[str, Obj] = {}
        self._probes: dict[str, asyncio.Task[Any]] = {}
        self._stop_timer: asyncio.TimerHandle | None = None
        self._grace_timer: asyncio.TimerHandle | None = None
        #: SIGTERM handlers at work, by container id (`terminate`).
        self._sigterm: dict[str, asyncio.Task[Any]] = {}
        self._terminal_phase: str | None = None
        self._qos_class: str | None = None
        #: Take every running container for ready (the status of a booted Pod whose programs
        #: have not taken their first step yet: `emu.kube.standard.boot`).
        self.assume_ready = False

    # -- scheduling the next sync ----------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def wake_at(self, when: float) -> None:
        """Sync again by ``when``; a pending earlier wake-up covers it."""
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._timer_fired)

    def _timer_fired(self) -> None:
        # Forget the timer as it fires: the loop runs a timer up to its clock resolution early,
        # so a fired timer's ``when()`` can still be ahead of ``time()`` and must not be taken
        # for a pending one (that dropped every later retry: docs/findings.md E4).
        self._timer = None
        self.wake()

    async def run(self) -> None:
        try:
            while True:
                self._wake.clear()
                try:
                    if await self.sync():
                        return
                except (ApiError, NetworkError) as err:
                    assert self.kubelet.process is not None
                    self.kubelet.process.log("pod_sync_error", pod=f"{self.namespace}/{self.name}",
                                             error=f"{type(err).__name__}: {err}")
                    self.wake_at(clock.now() + STATUS_RETRY)
                await self._wake.wait()
        finally:
            if self._timer is not None:
                self._timer.cancel()
            if self._grace_timer is not None:
                self._grace_timer.cancel()
            for task in self._probes.values():
                task.cancel()
            if self.kubelet.workers.get(self.uid) is self:
                del self.kubelet.workers[self.uid]

    # -- the sync --------------------------------------------------------------------------------

    @property
    def runtime(self) -> NodeRuntime:
        assert self.kubelet.runtime is not None
        return self.kubelet.runtime

    async def sync(self) -> bool:
        """One pass; True when the Pod is gone and the worker can end."""
        pod = self.kubelet.latest.get(self.uid)
        if pod is None:
            self.runtime.remove_sandbox(self.uid)
            self._remove_pod_dirs()
            return True
        if self.runtime.extra_delay:
            assert self.kubelet.process is not None
            await self.kubelet.process.sleep(self.runtime.extra_delay)
        box = self.runtime.sandbox(pod)
        box.listener = self.wake
        if pod["metadata"].get("deletionTimestamp"):
            return await self.terminate(pod, box)
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            self._terminal_phase = phase
        if self._terminal_phase is None:
            await self.start_containers(pod, box)
            self._stop_sidecars(pod.get("spec") or {}, box)
        self._ensure_probes(pod, box)
        status = self.generate_status(pod, box, terminal=False)
        if status["phase"] in ("Succeeded", "Failed"):
            self._terminal_phase = status["phase"]
            for rec in box.containers.values():
                if rec.state != "exited":
                    self.runtime.kill(rec, "pod is terminal")
        await self.write_status(pod, status)
        return False

    async def start_containers(self, pod: Obj, box: PodSandbox) -> None:
        """``computePodActions``: the next init container, or every container that should run."""
        spec = pod.get("spec") or {}
        policy = spec.get("restartPolicy", "Always")
        for c in spec.get("initContainers") or []:
            rec = box.containers.get(c["name"])
            if rec is None:
                await self.start(pod, box, c, init=True)
                return
            if is_sidecar(c):
                # started in order like an init container, but the next one starts once it
                # runs; restarted whenever it exits, whatever the Pod's restartPolicy
                if rec.state == "creating":
                    return
                if rec.state == "exited":
                    if self._regular_done(spec, box):
                        continue  # the Pod is completing: its sidecars stay stopped
                    ran = rec.started_at is not None
                    await self.restart_with_backoff(pod, box, c, rec, init=True)
                    if not ran:
                        return
                continue
            if rec.state != "exited":
                return
            if rec.exit_code == 0:
                continue
            if policy == "Never":
                return  # the Pod fails (getPhase)
            await self.restart_with_backoff(pod, box, c, rec, init=True)
            return
        for c in spec.get("containers") or []:
            rec = box.containers.get(c["name"])
            if rec is None:
                await self.start(pod, box, c, init=False)
            elif rec.state == "exited" and container_should_restart(c, spec, rec.exit_code):
                await self.restart_with_backoff(pod, box, c, rec, init=False)

    @staticmethod
    def _regular_done(spec: Obj, box: PodSandbox) -> bool:
        """Every regular container exited and none will be restarted (by its own or the Pod's
        ``restartPolicy``): the Pod completes, so its sidecars stop."""
        containers = spec.get("containers") or []
        if not containers:
            return False
        for c in containers:
            rec = box.containers.get(c["name"])
            if rec is None or rec.state != "exited" or \
                    container_should_restart(c, spec, rec.exit_code):
                return False
        return True

    def _stop_sidecars(self, spec: Obj, box: PodSandbox) -> None:
        """Sidecars do not hold a Pod: once its regular containers are done for good, the
        kubelet stops them (``computePodActions`` kills the Pod's remaining containers)."""
        sidecars = [c for c in spec.get("initContainers") or [] if is_sidecar(c)]
        if not sidecars or not self._regular_done(spec, box):
            return
        for c in reversed(sidecars):
            rec = box.containers.get(c["name"])
            if rec is not None and rec.state != "exited":
                self.runtime.kill(rec, "main containers completed")

    async def restart_with_backoff(self, pod: Obj, box: PodSandbox, c: Obj, rec: ContainerRecord,
                             *, init: bool) -> None:
        """``doBackOff``: restart now unless in back-off since the container finished."""
        name = c["name"]
        now = clock.now()
        assert rec.finished_at is not None
        cap = self.config.crash_loop_backoff_max
        entry = box.backoff.get(name)
        if entry is not None and not rec.finished_at - entry[1] > 2 * cap:
            backoff = entry[0]
            if now - rec.finished_at < backoff - 1e-9:  # float sums must not loop at the edge
                if name not in self._backoff_msg:
                    self.kubelet.event(pod, "Warning", "BackOff",
                                       f"Back-off restarting failed container {name} in pod "
                                       f"{self.name}_{self.namespace}({self.uid})")
                self._backoff_msg[name] = (
                    f"back-off {_go_duration(backoff)} restarting failed container={name} "
                    f"pod={self.name}_{self.namespace}({self.uid})")
                self.wake_at(rec.finished_at + backoff)
                return
        if entry is None or rec.finished_at - entry[1] > 2 * cap:
            backoff = self.config.crash_loop_backoff
        else:
            backoff = min(entry[0] * 2, cap)
        box.backoff[name] = (backoff, now)
        self._backoff_msg.pop(name, None)
        await self.start(pod, box, c, init=init)

    async def start(self, pod: Obj, box: PodSandbox, c: Obj, *, init: bool) -> None:
        name = c["name"]
        if self._volumes is None:
            try:
                self._volumes = await self.resolve_volumes(pod)
            except VolumeError as err:
                self._mount_failed(pod, name, err)
                return
            self._volumes_synced_at = clock.now()
            # (the volumes, not the Pod: a Pod's volumes never change, and a closure over the
            # whole Pod kept one more copy of it alive for the Pod's life)
            volumes = (pod.get("spec") or {}).get("volumes") or []
            box.services["sync_volumes"] = lambda: self.sync_projected_volumes(volumes)
        try:
            env = await self.resolve_env(pod, c, box)
            mounts = self.mounts(c)
        except ConfigError as err:
            self._start_failed(pod, name, "CreateContainerConfigError", str(err))
            return
        except (OSError, ValueError, KeyError, TypeError) as err:
            # anything else that stops the runtime creating the container (a volume it cannot
            # lay out, a malformed mount): CreateContainerError, never a dead pod worker
            self._start_failed(pod, name, "CreateContainerError",
                               f"failed to create containerd container: {err}")
            return
        self._config_errors.pop(name, None)
        self._error_reasons.pop(name, None)
        if box.containers.get(name) is not None and box.containers[name].state != "exited":
            return  # started meanwhile
        prev = box.containers.get(name)
        attempt = prev.attempt + 1 if prev is not None else self._lost_attempts(pod, name, init)
        image, policy = str(c.get("image", "")), str(c.get("imagePullPolicy", "IfNotPresent"))
        delay = self.runtime.start_delay(image, policy, self.config.image_pull_delay,
                                         self.config.container_start_delay)
        rec = self.runtime.create_container(box, c, init=init and not is_sidecar(c),
                                            attempt=attempt, delay=delay, pod=pod,
                                            env=env, volumes=mounts)
        if self.kubelet.normal_events and self.runtime.needs_pull(image, policy):
            rec.pulled = self.config.image_pull_delay
            self.kubelet.event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
        self.wake()

    def _start_failed(self, pod: Obj, name: str, reason: str, message: str) -> None:
        """A container could not be created: its waiting reason, a Warning Event ``Failed``
        (``Error: <message>``, as the kubelet's ``kuberuntime_container`` records it) and a
        retry after `CONFIG_RETRY`."""
        self._config_errors[name] = message
        self._error_reasons[name] = reason
        self.kubelet.event(pod, "Warning", "Failed", f"Error: {message}")
        self.wake_at(clock.now() + CONFIG_RETRY)

    def _mount_failed(self, pod: Obj, name: str, err: VolumeError) -> None:
        """A volume could not be set up (the volume manager's ``MountVolume.SetUp failed``):
        the container waits in ``ContainerCreating``, a Warning Event ``FailedMount`` says why,
        and the mount is retried after `CONFIG_RETRY`."""
        message = f'MountVolume.SetUp failed for volume "{err.volume}" : {err.detail}'
        self._config_errors[name] = message
        self._error_reasons[name] = "ContainerCreating"
        self.kubelet.event(pod, "Warning", "FailedMount", message)
        self.wake_at(clock.now() + CONFIG_RETRY)

    def _lost_attempts(self, pod: Obj, name: str, init: bool) -> int:
        """Restart count for a container the runtime does not know but the API status shows
        (the Node rebooted): the count goes on, and lastState says the container was lost."""
        key = "initContainerStatuses" if init else "containerStatuses"
        for cs in (pod.get("status") or {}).get(key) or []:
            if cs.get("name") != name:
                continue
            state = cs.get("state") or {}
            if "running" in state or "terminated" in state or (
                    cs.get("lastState") or {}).get("terminated"):
                was = "Running" if "running" in state else "Terminated"
                self._lost[name] = {
                    "exitCode": 137, "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was deleted."
                               f"  The container used to be {was}",
                    "startedAt": None, "finishedAt": None}
                return int(cs.get("restartCount") or 0) + 1
        return 0

    # -- env and volumes -------------------------------------------------------------------------

    async def _lookup(self, kind: str, name: str, optional: bool) -> Obj | None:
        assert self.kubelet.client is not None
        try:
            return await self.kubelet.client.get(kind, name, self.namespace)
        except ApiError as err:
            if not is_not_found(err):
                raise
            if optional:
                return None
            raise ConfigError(f'{kind.lower()} "{name}" not found') from None

    @staticmethod
    def _data(obj: Obj) -> dict[str, str]:
        if obj.get("kind") == "Secret":
            out = {k: base64.b64decode(v).decode(errors="replace")
                   for k, v in (obj.get("data") or {}).items()}
            out.update(obj.get("stringData") or {})
            return out
        return dict(obj.get("data") or {})

    async def resolve_env(self, pod: Obj, c: Obj, box: PodSandbox) -> dict[str, str]:
        """Environment as the kubelet builds it: envFrom, then env with ``$(VAR)`` expansion
        and fieldRef / configMapKeyRef / secretKeyRef / resourceFieldRef."""
        env: dict[str, str] = {}
        for src in c.get("envFrom") or []:
            prefix = src.get("prefix", "")
            for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                ref = src.get(key)
                if ref:
                    obj = await self._lookup(kind, ref["name"], bool(ref.get("optional")))
                    if obj is not None:
                        for k, v in sorted(self._data(obj).items()):
                            env[prefix + k] = v
        for e in c.get("env") or []:
            name = e["name"]
            if "valueFrom" not in e:
                env[name] = _VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)),
                                         str(e.get("value", "")))
                continue
            vf = e["valueFrom"] or {}
            if "fieldRef" in vf:
                env[name] = self._field(pod, box, vf["fieldRef"].get("fieldPath", ""))
            elif "resourceFieldRef" in vf:
                env[name] = self._resource_field(c, vf["resourceFieldRef"])
            else:
                for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                    ref = vf.get(key)
                    if not ref:
                        continue
                    optional = bool(ref.get("optional"))
                    obj = await self._lookup(kind, ref["name"], optional)
                    data = self._data(obj) if obj is not None else {}
                    if ref.get("key") in data:
                        env[name] = data[ref["key"]]
                    elif not optional:
                        raise ConfigError(f"couldn't find key {ref.get('key')} in {kind} "
                                          f"{self.namespace}/{ref['name']}")
        return env

    def _field(self, pod: Obj, box: PodSandbox, path: str) -> str:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.*)'\]", path)
        if m:
            return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        values = {
            "metadata.name": meta.get("name", ""), "metadata.namespace": self.namespace,
            "metadata.uid": self.uid, "spec.nodeName": self.kubelet.node,
            "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
            "status.hostIP": self.kubelet.ip, "status.hostIPs": self.kubelet.ip,
            "status.podIP": box.ip, "status.podIPs": box.ip,
        }
        return str(values.get(path, ""))

    @staticmethod
    def _resource_field(c: Obj, ref: Obj) -> str:
        resource = str(ref.get("resource", ""))
        group, _, rname = resource.partition(".")
        value = ((c.get("resources") or {}).get(group) or {}).get(rname)
        if value is None:
            return "0"
        divisor = parse_quantity(ref.get("divisor", "1") or "1")
        if rname == "cpu":
            return str(max(1, -(-milli(value) // max(1, int(divisor * 1000)))))
        return str(int(-(-parse_quantity(value) // divisor)))

    async def resolve_volumes(self, pod: Obj) -> dict[str, Path]:
        """Volume name → host directory, for volumes a program can use as files; a volume that
        can't be set up raises `VolumeError` naming it."""
        out: dict[str, Path] = {}
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            try:
                await self._resolve_volume(vol, out, pod)
            except (ConfigError, OSError) as err:
                raise VolumeError(str(vol.get("name", "")), str(err)) from None
        return out

    async def _resolve_volume(self, vol: Obj, out: dict[str, Path], pod: Obj | None = None
                              ) -> None:
        """Set up one volume into ``out`` (ConfigError / OSError when it can't be yet); ``pod``:
        the Pod, on the first set-up (a projected volume keeps what it needs of it)."""
        name = vol.get("name", "")
        if "persistentVolumeClaim" in vol:
            claim = vol["persistentVolumeClaim"].get("claimName", "")
            pvc = await self._lookup("PersistentVolumeClaim", claim, False)
            assert pvc is not None
            pv_name = (pvc.get("spec") or {}).get("volumeName")
            if not pv_name or (pvc.get("status") or {}).get("phase") != "Bound":
                raise ConfigError(f'persistentvolumeclaim "{claim}" is not bound')
            assert self.kubelet.client is not None
            pv = await self.kubelet.client.get("PersistentVolume", pv_name)
            out[name] = self.kubelet.cluster.volume_dir(pv)
        elif "emptyDir" in vol:
            path = self.kubelet.cluster.workdir / "pods" / self.uid / "volumes" / name
            path.mkdir(parents=True, exist_ok=True)
            out[name] = path
        elif "hostPath" in vol:
            rel = str(vol["hostPath"].get("path", "")).lstrip("/")
            path = self.kubelet.cluster.workdir / "nodes" / self.kubelet.node / rel
            path.mkdir(parents=True, exist_ok=True)
            out[name] = path
        elif "configMap" in vol or "secret" in vol:
            kind, key, ref_key = (("ConfigMap", "configMap", "name") if "configMap" in vol
                                  else ("Secret", "secret", "secretName"))
            src = vol[key]
            obj = await self._lookup(kind, src.get(ref_key, ""), bool(src.get("optional")))
            path = self.kubelet.cluster.workdir / "pods" / self.uid / "volumes" / name
            path.mkdir(parents=True, exist_ok=True)
            for k, v in sorted(self._data(obj or {}).items()):
                (path / k).write_text(v)
            out[name] = path
        elif "projected" in vol:
            found = self._projected.get(name)
            if found is None:
                path = self.kubelet.cluster.workdir / "pods" / self.uid / "volumes" / name
                assert pod is not None, "a projected volume is first set up with its Pod"
                found = self._projected[name] = projected.ProjectedVolume(self, name, path, pod)
            await found.fill(vol["projected"] or {})
            out[name] = found.path

    async def sync_projected_volumes(self, volumes: list[Obj]) -> None:
        """The kubelet's periodic refresh of Secret and ConfigMap volumes (every
        ``syncFrequency``, `VOLUME_SYNC_PERIOD`, since the volumes were set up): a program that
        re-reads such a file sees the object as of the latest sync. Done lazily, when a program
        asks (``ContainerContext.services["sync_volumes"]``), so a Pod whose programs never
        re-read their files costs nothing; a failed read keeps the old files, as the kubelet
        does. ``volumes``: the Pod's ``spec.volumes``."""
        if self._volumes is None:
            return
        ticks = math.floor((clock.now() - self._volumes_synced_at) / VOLUME_SYNC_PERIOD)
        if ticks < 1:
            return
        self._volumes_synced_at += ticks * VOLUME_SYNC_PERIOD
        for vol in volumes:
            if "configMap" not in vol and "secret" not in vol and "projected" not in vol:
                continue
            try:
                await self._resolve_volume(vol, {})
            except (ConfigError, ApiError, NetworkError, OSError):
                continue

    def mounts(self, c: Obj) -> dict[str, Path]:
        """Mount path → host path, for the container ``c`` (a `projected.Mounts`: its projected
        volumes are written to disk when its program first looks)."""
        out: dict[str, Path] = {}
        pending: dict[str, projected.ProjectedVolume] = {}
        for m in c.get("volumeMounts") or []:
            name = m.get("name", "")
            base = (self._volumes or {}).get(name)
            if base is None:
                continue
            volume = self._projected.get(name)
            if volume is not None:
                if m.get("subPath"):
                    volume.materialize()  # whether the subPath is a file: look now
                else:
                    pending[m["mountPath"]] = volume
            path = base / m["subPath"] if m.get("subPath") else base
            if not path.is_file():  # a subPath naming a ConfigMap/Secret key mounts that file
                path.mkdir(parents=True, exist_ok=True)
            out[m["mountPath"]] = path
        return projected.Mounts(out, pending) if pending else out

    def _remove_pod_dirs(self) -> None:
        if self._volumes is None:
            return
        path = self.kubelet.cluster.workdir / "pods" / self.uid
        shutil.rmtree(path, ignore_errors=True)

    # -- readiness -------------------------------------------------------------------------------

    def _ensure_probes(self, pod: Obj, box: PodSandbox) -> None:
        """Start the probe workers of each running container attempt that has probes (the
        prober manager's ``AddPod``): `_prober` with `KubeConfig.probes`, else the readiness
        sampler `_probe_loop`."""
        spec = pod.get("spec") or {}
        specs = {c["name"]: c for c in [*(c for c in spec.get("initContainers") or []
                                           if is_sidecar(c)), *(spec.get("containers") or [])]}
        process = self.kubelet.process
        assert process is not None
        for name, rec in box.containers.items():
            c = specs.get(name)
            if rec.init or c is None or rec.state != "running":
                continue
            if not self.config.probes:
                probe = c.get("readinessProbe")
                if probe and rec.container_id not in self._probes:
                    self._probes[rec.container_id] = process.spawn(self._probe_loop(rec, probe))
                continue
            # what a probe worker reads of the container (its name, its named ports), not the
            # whole spec of the Pod version it started from, kept for the container's life
            probed = {"name": name, "ports": c.get("ports") or []}
            for kind, pspec in probes.probe_specs(c).items():
                key = f"{rec.container_id}:{kind}"
                if key in self._probes:
                    continue
                if kind == "startup" and rec.started_ok is None:
                    rec.started_ok = False
                if kind == "readiness" and rec.probe_ready is None:
                    rec.probe_ready = self._was_ready(pod, name, rec)
                self._probes[key] = process.spawn(self._prober(rec, probed, pspec, box.ip),
                                                  name=f"{process.name}:probe:{self.name}:"
                                                       f"{name}:{kind}")

    def _was_ready(self, pod: Obj, name: str, rec: ContainerRecord) -> bool:
        """A restarted kubelet keeps the readiness the API shows for the same container (its
        probe results are gone; real kubelets keep them in the status manager)."""
        for key in ("containerStatuses", "initContainerStatuses"):
            for cs in (pod.get("status") or {}).get(key) or []:
                if cs.get("name") == name and cs.get("containerID") == rec.container_id:
                    return bool(cs.get("ready"))
        return False

    async def _prober(self, rec: ContainerRecord, c: Obj, spec: probes.ProbeSpec,
                      ip: str) -> None:
        """One probe worker (``prober/worker.go`` ``run`` / ``doProbe``) for one container
        attempt: a probe on each tick of ``periodSeconds`` counted from the container's start,
        none before ``initialDelaySeconds``; thresholds in a row set the result."""
        kubelet = self.kubelet
        assert kubelet.process is not None and rec.started_at is not None
        kind, name = spec.kind, c["name"]
        loop = asyncio.get_running_loop()
        start = rec.started_at
        last: bool | None = None
        run = 0
        while rec.state == "running":
            pod = kubelet.latest.get(self.uid)
            deleting = pod is None or bool(pod["metadata"].get("deletionTimestamp"))
            waiting_start = kind != "startup" and rec.started_ok is False
            if int(loop.time() - start + 1e-9) >= spec.initial_delay and not waiting_start \
                    and not (deleting and kind != "readiness"):
                # an exec probe runs inside the container, the others come from the kubelet
                source = rec.process if "exec" in spec.handler else kubelet.process
                try:
                    ok, output = await probes.run_probe(
                        spec, network=kubelet.cluster.world.network, source=source,
                        caller=kubelet.process.name, ip=ip, container=c)
                except ProcessGone:  # the container died under its exec probe: this attempt ends
                    return
                if rec.state != "running":
                    return
                if not ok and pod is not None:
                    kubelet.event(pod, "Warning", "Unhealthy",
                                  probes.unhealthy_message(kind, output))
                run = run + 1 if ok == last else 1
                last = ok
                if run >= (spec.success_threshold if ok else spec.failure_threshold):
                    if kind == "readiness":
                        if rec.probe_ready is not ok:
                            rec.probe_ready = ok
                            self.wake()
                    elif kind == "startup" and ok:
                        rec.started_ok = True
                        self.wake()
                        return  # a startup probe stops once it succeeded
                    elif not ok:  # liveness or startup failed: kill, restart by policy
                        if pod is not None:
                            kubelet.event(pod, "Normal", "Killing",
                                          probes.killing_message(name, kind))
                        self.runtime.kill(rec, f"{kind} probe failed")
                        self.wake()
                        return
            pod = None  # not kept while waiting: the next tick reads the kubelet's latest
            now = loop.time()
            # (the slack keeps float rounding from landing on the tick just passed: a wait of
            # ~0 s would spin without moving virtual time)
            ticks = int((now - start + 1e-6) // spec.period) + 1
            await asyncio.sleep(start + ticks * spec.period - now)

    async def _probe_loop(self, rec: ContainerRecord, probe: Obj) -> None:
        """The readiness prober (``prober/worker.go``): the program's readiness sampled every
        period after the initial delay; ``successThreshold`` / ``failureThreshold`` in a row
        flip the result."""
        initial = float(probe.get("initialDelaySeconds") or 0)
        period = float(probe.get("periodSeconds") or 10)
        succ_needed = int(probe.get("successThreshold") or 1)
        fail_needed = int(probe.get("failureThreshold") or 3)
        started = rec.started_at or clock.now()
        if started + initial > clock.now():
            await asyncio.sleep(started + initial - clock.now())
        succ = fail = 0
        while rec.state == "running":
            if rec.program_ready:
                succ, fail = succ + 1, 0
                if succ >= succ_needed and rec.probe_ready is not True:
                    rec.probe_ready = True
                    self.wake()
            else:
                succ, fail = 0, fail + 1
                if rec.probe_ready is None or (fail >= fail_needed and rec.probe_ready):
                    rec.probe_ready = False
                    self.wake()
            await asyncio.sleep(period)

    def container_ready(self, c: Obj, rec: ContainerRecord | None) -> bool:
        if rec is None or rec.state != "running" or rec.started_ok is False:
            return False
        if self.assume_ready:
            return True
        if c.get("readinessProbe"):
            return rec.probe_ready is True
        return rec.program_ready

    # -- status ----------------------------------------------------------------------------------

    def container_status(self, c: Obj, rec: ContainerRecord | None, box: PodSandbox,
                         default_waiting: str) -> Obj:
        name = c["name"]
        image = str(c.get("image", ""))
        status: Obj = {"name": name, "image": image, "imageID": "", "ready": False,
                       "restartCount": 0, "started": False, "lastState": {},
                       "state": {"waiting": {"reason": default_waiting}}}
        lost = self._lost.get(name)
        if lost is not None:
            status["lastState"] = {"terminated": {k: v for k, v in lost.items()
                                                  if v is not None}}
        if name in self._config_errors and (rec is None or rec.state == "exited"):
            status["state"] = {"waiting": {
                "reason": self._error_reasons.get(name, "CreateContainerConfigError"),
                "message": self._config_errors[name]}}
        if rec is None:
            return status
        status["restartCount"] = rec.attempt
        prev = box.previous.get(name)
        if prev is not None and prev is not rec:
            status["lastState"] = {"terminated": prev.terminated()}
        if rec.state == "creating":
            status["state"] = {"waiting": {"reason": "ContainerCreating"}}
            return status
        status["containerID"] = rec.container_id
        status["imageID"] = _image_id(image)
        if rec.state == "running":
            status["state"] = {"running": {"startedAt": rfc3339(rec.started_at or 0.0)}}
            status["started"] = rec.started_ok is not False  # a startup probe passed, if any
            status["ready"] = self.container_ready(c, rec)
        elif name in self._backoff_msg:
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff",
                                           "message": self._backoff_msg[name]}}
            status["lastState"] = {"terminated": rec.terminated()}
        elif name in self._config_errors:
            status["lastState"] = {"terminated": rec.terminated()}
        else:
            status["state"] = {"terminated": rec.terminated()}
        return status

    def generate_status(self, pod: Obj, box: PodSandbox, *, terminal: bool) -> Obj:
        """``generateAPIPodStatus``: phase, conditions and container statuses."""
        spec = pod.get("spec") or {}
        old = pod.get("status") or {}
        inits = spec.get("initContainers") or []
        containers = spec.get("containers") or []
        init_statuses = []
        incomplete = []
        unready = []
        for c in inits:
            rec = box.containers.get(c["name"])
            cs = self.container_status(c, rec, box, "PodInitializing")
            init_statuses.append(cs)
            if is_sidecar(c):  # initialized once started; its readiness counts for the Pod's
                if not cs["started"]:
                    incomplete.append(c["name"])
                if not cs["ready"]:
                    unready.append(c["name"])
            elif rec is None or rec.state != "exited" or rec.exit_code != 0:
                incomplete.append(c["name"])
        initialized = not incomplete
        if incomplete and any(is_sidecar(c) for c in inits) and any(
                (r := box.containers.get(c["name"])) is not None and r.state != "creating"
                for c in containers):
            initialized = True  # initialized before: its sidecars are only restarting
        statuses = []
        for c in containers:
            rec = box.containers.get(c["name"])
            cs = self.container_status(
                c, rec, box, "ContainerCreating" if initialized else "PodInitializing")
            statuses.append(cs)
            if not cs["ready"]:
                unready.append(c["name"])
        statuses.sort(key=lambda s: s["name"])
        phase = self.get_phase(spec, init_statuses, statuses, terminal)
        if self._terminal_phase is not None:
            phase = self._terminal_phase
        now = rfc3339(clock.now())
        conditions: list[Obj] = list(old.get("conditions") or [])

        def cond(ctype: str, ok: bool, reason: str = "", message: str = "") -> None:
            nonlocal conditions
            new: Obj = {"type": ctype, "status": "True" if ok else "False",
                        "lastTransitionTime": now}
            if not ok and reason:
                new["reason"] = reason
                if message:
                    new["message"] = message
            conditions = set_condition(conditions, new)

        cond("PodReadyToStartContainers", not terminal)
        if phase == "Succeeded":
            cond("Initialized", True, "PodCompleted")
        else:
            cond("Initialized", initialized, "ContainersNotInitialized",
                 f"containers with incomplete status: {_go_list(incomplete)}")
        if phase == "Succeeded":
            cond("Ready", False, "PodCompleted")
            cond("ContainersReady", False, "PodCompleted")
        else:
            msg = f"containers with unready status: {_go_list(unready)}"
            cond("Ready", not unready, "ContainersNotReady", msg)
            cond("ContainersReady", not unready, "ContainersNotReady", msg)
        if not any(c.get("type") == "PodScheduled" for c in conditions):
            cond("PodScheduled", True)
        order = {t: i for i, t in enumerate((*KUBELET_CONDITIONS, "PodScheduled"))}
        conditions.sort(key=lambda c: order.get(c.get("type", ""), len(order)))
        status: Obj = {
            "phase": phase, "conditions": conditions,
            "hostIP": self.kubelet.ip, "hostIPs": [{"ip": self.kubelet.ip}],
            "podIP": box.ip, "podIPs": [{"ip": box.ip}],
            "startTime": old.get("startTime") or rfc3339(box.created_at),
            "qosClass": self._qos(spec), "containerStatuses": statuses,
        }
        if inits:
            status["initContainerStatuses"] = init_statuses
        return status

    def _qos(self, spec: Obj) -> str:
        if self._qos_class is None:
            self._qos_class = qos_class(spec)
        return self._qos_class

    @staticmethod
    def get_phase(spec: Obj, init_statuses: list[Obj], statuses: list[Obj],
                  terminal: bool) -> str:
        """Port of ``getPhase`` (kubelet_pods.go)."""
        policy = spec.get("restartPolicy", "Always")
        pending_init = failed_init = 0
        # restartable init containers (sidecars): running ones count as running, terminated
        # ones not at all; one that never ran keeps the Pod Pending
        side_pending = side_running = side_waiting = 0
        sidecars = {c.get("name") for c in spec.get("initContainers") or [] if is_sidecar(c)}
        for cs in init_statuses:
            state = cs["state"]
            if cs.get("name") in sidecars:
                if "running" in state:
                    side_running += 1
                    if not cs.get("started"):
                        side_pending += 1
                elif "terminated" not in state and not (cs.get("lastState") or {}).get(
                        "terminated"):
                    side_pending += 1
                    side_waiting += 1
                continue
            if "running" in state:
                pending_init += 1
            elif "terminated" in state:
                if state["terminated"]["exitCode"] != 0:
                    failed_init += 1
            elif (cs.get("lastState") or {}).get("terminated", {}).get("exitCode", 0) != 0:
                failed_init += 1
            else:
                pending_init += 1
        if failed_init and policy == "Never":
            return "Failed"
        if pending_init or failed_init:
            return "Pending"
        if side_pending and not any("running" in cs["state"] or "terminated" in cs["state"]
                                    for cs in statuses):
            return "Pending"  # (HasAnyRegularContainerStarted: not while sidecars restart)
        running, waiting, stopped, succeeded = side_running, side_waiting, 0, 0
        restarting = False
        own = {c.get("name"): c for c in spec.get("containers") or [] if c.get("restartPolicy")}
        for cs in statuses:
            state = cs["state"]
            if "running" in state:
                running += 1
            elif "terminated" in state:
                stopped += 1
                if state["terminated"]["exitCode"] == 0:
                    succeeded += 1
                c = own.get(cs.get("name"))
                restarting = restarting or (c is not None and container_should_restart(
                    c, spec, state["terminated"]["exitCode"]))
            elif (cs.get("lastState") or {}).get("terminated"):
                stopped += 1
                c = own.get(cs.get("name"))
                restarting = restarting or (c is not None and container_should_restart(
                    c, spec, cs["lastState"]["terminated"].get("exitCode")))
            else:
                waiting += 1
        if waiting:
            return "Failed" if terminal else "Pending"
        if running:
            return "Running"
        if stopped:
            if terminal:
                return "Succeeded" if stopped == succeeded else "Failed"
            if policy == "Always":
                return "Running"
            if restarting:  # a container's own restartPolicy restarts it: not done yet
                return "Running"
            if stopped == succeeded:
                return "Succeeded"
            if policy == "Never":
                return "Failed"
            return "Running"
        return "Pending"

    async def write_status(self, pod: Obj, status: Obj) -> None:
        """The status manager: write only a change; keys dropped are set to null."""
        if status == self._last_status:
            return
        old = pod.get("status") or {}
        patch = dict(status)
        for key in old:
            if key not in patch and key in ("initContainerStatuses",):
                patch[key] = None
        comparable = {k: old.get(k) for k in status}
        if comparable == status:
            self._last_status = status
            return
        assert self.kubelet.client is not None
        try:
            await self.kubelet.client.patch("Pod", self.name, {"status": patch}, self.namespace,
                                            subresource="status")
        except ApiError as err:
            if is_not_found(err):
                return
            raise
        self._last_status = status

    # -- termination -----------------------------------------------------------------------------

    async def terminate(self, pod: Obj, box: PodSandbox) -> bool:
        """``syncTerminatingPod``: stop containers, report the terminal status, then delete the
        Pod with grace 0 (``syncTerminatedPod``)."""
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        live = [r for r in box.containers.values() if r.state != "exited"]
        if live:
            if self._stop_timer is None:
                # SIGTERM now; SIGKILL once the program's handler is done and the stop delay
                # passed, or at the end of the grace period whatever happens
                for rec in live:
                    if self.kubelet.normal_events:
                        self.kubelet.event(pod, "Normal", "Killing",
                                           f"Stopping container {rec.name}")
                    task = self.runtime.sigterm(rec)
                    if task is not None:
                        self._sigterm[rec.container_id] = task
                delay = min(self.config.container_stop_delay, float(grace))
                loop = asyncio.get_running_loop()
                self._stop_timer = loop.call_later(delay, self._stop_all, box,
                                                   delay >= float(grace))
                if self._sigterm and float(grace) > delay:
                    self._grace_timer = loop.call_later(float(grace), self._stop_all, box, True)
            return False
        self._terminal_phase = None
        status = self.generate_status(pod, box, terminal=True)
        await self.write_status(pod, status)
        assert self.kubelet.client is not None
        try:
            await self.kubelet.client.delete("Pod", self.name, self.namespace,
                                             grace_period_seconds=0,
                                             preconditions={"uid": self.uid})
        except ApiError as err:
            if not (is_not_found(err) or is_conflict(err)):
                raise
        self.runtime.remove_sandbox(self.uid)
        self._remove_pod_dirs()
        return True

    def _stop_all(self, box: PodSandbox, grace_over: bool) -> None:
        """SIGKILL what still runs, except (before the grace period is over) a container whose
        SIGTERM handler is still at work: it is killed as soon as that returns."""
        for rec in list(box.containers.values()):
            if rec.state == "exited":
                continue
            task = self._sigterm.get(rec.container_id)
            if task is not None and not task.done() and not grace_over:
                task.add_done_callback(functools.partial(self._kill_after_sigterm, rec))
                continue
            self.runtime.kill(rec, "pod deleted")
        self.wake()

    def _kill_after_sigterm(self, rec: ContainerRecord, _task: asyncio.Task[Any]) -> None:
        self.runtime.kill(rec, "pod deleted")
        self.wake()


def go_duration_string(seconds: float) -> str:
    """Go's ``time.Duration.String`` (``500ms``, ``1.5s``, ``2m0.25s``; whole nanoseconds)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                whole, frac = divmod(ns, size)
                text = f"{whole}.{frac:0{len(str(size)) - 1}d}".rstrip("0").rstrip(".") \
                    if size > 1 else str(whole)
                return f"{sign}{text}{unit}"
    secs, frac = divmod(ns, 1_000_000_000)
    minutes, secs = divmod(secs, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{secs}.{frac:09d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return f"{sign}{text}"


def _go_duration(seconds: float) -> str:
    """Go's ``time.Duration`` text for whole seconds and minutes (``10s``, ``5m0s``)."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m{s % 60}s"
