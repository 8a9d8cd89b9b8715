"""The real KubeRay operator binary as operator processes of the world, which the world's faults
reach (``emu.faults``, ``emu.explore.faults``).

`RealReplicas` starts ``replicas`` copies of the binary (``kuberay-operator-0``, ``-1``...), each
as a process of the world's process table named as a Pod's container is
(``default/kuberay-operator-0/kuberay-operator``), whose main runs the OS process
(`emu.http.real_operator.RealOperator`) and follows what happens to it:

- **crash** (``Crash``, ``CrashLeader``, ``Restart``): the world's process ends, its main is
  cancelled and the OS process is killed with SIGKILL, as a container's process is. Like a Pod's
  kubelet (``restartPolicy: Always``) the replica is started again, as a new process of the world
  and a new OS process, ``restart_delay`` seconds later (doubling on each restart within
  ``RESTART_RESET_S`` seconds, at most `MAX_RESTART_DELAY_S`, as the kubelet's back-off does). A
  binary that exits by itself is restarted the same way.
- **pause** (``Pause``, ``PauseLeader``): SIGSTOP, and SIGCONT on resume. The main looks at its
  process's state every `POLL_S` seconds, so the signal follows the fault by at most that much.
- **network faults**: each replica has an API endpoint of its own (an `HttpServer` whose caller
  identity is the replica's name, whatever User-Agent its clients send) and a forward proxy of
  its own (`ForwardProxy`, same identity) for the Ray dashboards. So ``Outage('apiserver')``
  makes its API requests fail (the TCP connection is dropped), and ``Partition(
  'default/kuberay-operator-0/kuberay-operator', 'apiserver')`` or a partition from the replica
  to a Ray Pod reaches that replica alone. Each replica acts as the chart's ServiceAccount.
- **trace**: the binary's log lines of leader election become the trace events the port's
  leader election records (``leader_acquired``, ``leader_lost``: `LOG_EVENTS`), so the
  scenarios' operator logs and the leadership invariants follow the real replicas too. Its
  reconciles become ``reconcile_started`` and ``reconcile_finished`` (`_LogTail`): controller-
  runtime gives every reconcile a ``reconcileID`` that each line logged in it carries, so the
  first line with a new id starts one; KubeRay logs at least one Info line in most reconciles
  (the RayJob controller one at the start of each). A reconcile that logs nothing is not seen.
  Its end is logged only when it fails (``Reconciler error``); otherwise it is inferred: the
  controller's next reconcile started (the chart's ``--reconcile-concurrency=1``: one at a
  time), or the process went quiet, running with no API request unanswered and no line for
  `IDLE_S` seconds (``inferred`` says which). The log is read every `POLL_S` seconds and before
  every API request of the replica, so the events of a reconcile come before its requests.
- **pause at once**: a request that reaches a paused replica's endpoint waits until the replica
  is resumed (and the SIGSTOP is sent then, not at the next look), as a paused port replica's
  call waits at its checkpoint: a scenario that pauses the leader on its ``reconcile_started``
  holds that reconcile's first write.

Leader election runs between the replicas on the world's Lease (``--enable-leader-election``, the
chart's default). controller-runtime names a candidate ``<hostname>_<uuid>``; the replicas all run
on this machine and share its hostname, so the Lease alone does not say which replica holds it.
Each replica's endpoint sees its own Lease writes: the replica that last wrote the current
``holderIdentity`` is the leader (`RealReplicas.leader`), and its world process's ``host`` is
set to the hostname part of that identity (the others keep their names as hosts), which is how
``emu.explore.faults.leader_process`` (``CrashLeader``, ``PauseLeader``) finds the process of a
Lease holder.

Everything started here is stopped by `RealReplicas.stop` (OS processes by their pid).

The module is longer than most because the replicas, their log reader and the install that
scenarios see (`RealInstall`) share one life cycle: each incarnation's log reader, endpoint
and signals are set up and torn down together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kernel.process import STOPPED_AT_END, Process, ProcessGone
from .real_operator import HTTP_IDENTITIES, RealOperator, RealOperatorError, binary_version
from .wire import Dropped

if TYPE_CHECKING:
    from ..simulation import Simulation
    from .forward_proxy import ForwardProxy
    from .server import HttpServer
    from .wire import HttpRequest

#: Seconds between two looks of a replica's main at its OS process and its world process.
POLL_S = 0.05
#: The kubelet's back-off limit for restarting a crashed container.
MAX_RESTART_DELAY_S = 300.0
#: Seconds a replica must run for its restart back-off to start again from ``restart_delay``.
RESTART_RESET_S = 600.0
#: The Lease KubeRay's leader election uses (the chart's ``ray-operator-leader``).
LEASE_NAME = "ray-operator-leader"
#: The chart's container name: a replica's world process is ``<ns>/<replica>/kuberay-operator``.
CONTAINER = "kuberay-operator"
#: Lines of the binary's log that become trace events of its world process (client-go's and
#: controller-runtime's leader election), as the port's leader election records them.
LOG_EVENTS = (("successfully acquired lease", "leader_acquired"),
              ("failed to renew lease", "leader_lost"),
              ("leader election lost", "leader_lost"))


#: Seconds a replica's process may stay quiet (running, no API request unanswered, no log line)
#: before its open reconciles count as finished.
IDLE_S = 1.0
#: controller-runtime's logger prefix for KubeRay's controllers (``controllers.RayJob``).
CONTROLLER_LOGGER = "controllers."


class _LogTail:
    """Reads what the binary appended to its log since the last look and records `LOG_EVENTS`
    (each once per process) and its reconciles (see the module's docstring) as trace events of
    its world process. ``concurrency`` is the binary's ``--reconcile-concurrency``: with 1, a
    controller's new reconcile ends its previous one."""

    def __init__(self, path: Path, concurrency: int = 1) -> None:
        self.path = path
        try:
            self.offset = path.stat().st_size  # earlier incarnations' lines are theirs
        except OSError:
            self.offset = 0
        self.partial = b""
        self.seen: set[str] = set()
        self.concurrency = concurrency
        self.reconcile_ids: set[str] = set()
        #: reconcileID → (controller, key) of the reconciles started and not yet finished.
        self.open: dict[str, tuple[str, str]] = {}
        self.last_line_at = 0.0

    def emit(self, proc: Process) -> None:
        try:
            if self.path.stat().st_size <= self.offset:
                return
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        self.last_line_at = proc.table.loop.time()
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for raw in lines:
            line = raw.decode(errors="replace")
            for needle, event in LOG_EVENTS:
                if needle in line and event not in self.seen:
                    self.seen.add(event)
                    proc.log(event, lease=LEASE_NAME, source="operator log")
            if '"reconcileID"' in line:
                self._reconcile_line(proc, line)

    def _reconcile_line(self, proc: Process, line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        rid, logger = record.get("reconcileID"), record.get("logger")
        if not isinstance(rid, str) or not isinstance(logger, str) or \
                not logger.startswith(CONTROLLER_LOGGER):
            return
        kind = logger.removeprefix(CONTROLLER_LOGGER)
        controller = kind.lower()
        if rid not in self.reconcile_ids:
            self.reconcile_ids.add(rid)
            if self.concurrency == 1:
                for other, (name, _key) in list(self.open.items()):
                    if name == controller:
                        self._finish(proc, other, "done", inferred="next reconcile started")
            obj = record.get(kind)
            key = ""
            if isinstance(obj, dict):
                ns, name = str(obj.get("namespace") or ""), str(obj.get("name") or "")
                key = f"{ns}/{name}" if ns else name
            self.open[rid] = (controller, key)
            proc.log("reconcile_started", controller=controller, key=key, reconcile_id=rid,
                     source="operator log")
        if record.get("msg") == "Reconciler error" and rid in self.open:
            self._finish(proc, rid, "error", error=str(record.get("error", "")))

    def _finish(self, proc: Process, rid: str, outcome: str, **fields: str) -> None:
        controller, key = self.open.pop(rid)
        proc.log("reconcile_finished", controller=controller, key=key, outcome=outcome,
                 reconcile_id=rid, source="operator log", **fields)

    def finish_quiet(self, proc: Process) -> None:
        """The process went quiet: every open reconcile is over."""
        for rid in list(self.open):
            self._finish(proc, rid, "done", inferred="quiet")


class Replica:
    """One replica: its API endpoint, proxy, kubeconfig and log; ``operator`` is the OS process
    of its current incarnation (None before the first start)."""

    def __init__(self, name: str, process: str, server: HttpServer, proxy: ForwardProxy,
                 kubeconfig: Path, log_path: Path) -> None:
        self.name = name
        #: Its world process's name, as a Pod's container is named (``ns/pod/container``).
        self.process = process
        self.server = server
        self.proxy = proxy
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.operator: RealOperator | None = None
        #: Every OS pid this replica ran, oldest first.
        self.pids: list[int] = []
        self.restarts = 0
        self.started_at = 0.0
        self.holder: str | None = None  # the holderIdentity it last wrote
        #: The current incarnation's log reader, and whether its OS process is SIGSTOPped.
        self.tail: _LogTail | None = None
        self.stopped = False
        #: API requests of the replica being answered (watches aside), and when the last ended
        #: or the replica last resumed (loop time): `IDLE_S` counts from the later.
        self.in_flight = 0
        self.active_at = 0.0

    @property
    def pid(self) -> int | None:
        return self.operator.pid if self.operator is not None else None


class RealReplicas:
    """``replicas`` copies of the real operator as processes of ``sim`` (see the module's
    docstring): ``await start()``, ``await wait_started()``, ``leader()``, ``await stop()``."""

    def __init__(self, sim: Simulation, binary: str | os.PathLike[str], *, replicas: int = 1,
                 namespace: str = "default", name: str = "kuberay-operator",
                 host: str = "127.0.0.1", log_dir: str | os.PathLike[str] | None = None,
                 restart_delay: float = 1.0, values: Mapping[str, Any] | None = None) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {replicas}")
        if not restart_delay >= 0:
            raise ValueError(f"restart_delay must be 0 or more seconds, got {restart_delay!r}")
        self.sim = sim
        self.binary = str(binary)
        self.version = binary_version(self.binary)
        self.count = replicas
        self.namespace = namespace
        self.prefix = name
        self.host = host
        self.log_dir = Path(log_dir) if log_dir else None
        self.restart_delay = restart_delay
        self.values = dict(values or {})
        self.replicas: list[Replica] = []
        self._stopping = False

    # -- start -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open every replica's endpoint and proxy, then start each as a world process."""
        from .forward_proxy import ForwardProxy
        from .serve import kubeconfig_text
        from .server import HttpServer

        RealOperator(self.binary, kubeconfig="", proxy_url="").check_binary()
        if self.log_dir is None:  # kept after the run, as the logs in it are
            self.log_dir = Path(tempfile.mkdtemp(prefix="emu-kuberay-replicas-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        rbac = getattr(self.sim, "rbac", None)
        user = rbac.service_account_user(self.namespace, self.prefix) if rbac is not None \
            else None
        for i in range(self.count):
            name = f"{self.prefix}-{i}"
            process = f"{self.namespace}/{name}/{CONTAINER}"
            server = HttpServer(self.sim, host=self.host, identity=process)
            url = await server.start()
            proxy = ForwardProxy(self.sim, identity=process, host=self.host)
            await proxy.start()
            kubeconfig = self.log_dir / f"{name}.kubeconfig"
            kubeconfig.write_text(kubeconfig_text(url, None, namespace=self.namespace))
            os.chmod(kubeconfig, 0o600)
            if rbac is not None and user is not None:
                rbac.assign(process, user)
            replica = Replica(name, process, server, proxy, kubeconfig,
                              self.log_dir / f"{name}.log")
            self._wrap_endpoint(replica)
            self.replicas.append(replica)
        for identity in HTTP_IDENTITIES:  # the Lease's readers that reach the shared endpoint
            if rbac is not None and user is not None:
                rbac.assign(identity, user)
        self.sim.processes.on_exit(self._on_exit)
        for replica in self.replicas:
            self._start_process(replica)

    def _start_process(self, replica: Replica) -> Process:
        replica.started_at = self.sim.now
        return self.sim.processes.start(replica.process, self._main_of(replica),
                                        host=replica.name)

    def _main_of(self, replica: Replica) -> Any:
        async def main(proc: Process) -> int:
            return await self._run(proc, replica)

        return main

    async def _run(self, proc: Process, replica: Replica) -> int:
        op = RealOperator(self.binary, kubeconfig=str(replica.kubeconfig),
                          proxy_url=replica.proxy.url, namespace=self.namespace,
                          log_path=replica.log_path, values=self.values)
        replica.operator = op
        replica.stopped = False
        concurrency = int(self.values.get("reconcileConcurrency", 1))
        tail = replica.tail = _LogTail(replica.log_path, concurrency)
        replica.in_flight, replica.active_at = 0, self.sim.loop.time()
        # killed in the crash itself (the world's process ends synchronously), not later when
        # the cancelled main next runs
        proc.on_exit(lambda _proc: op.kill_now())
        try:
            await op.start()
            assert op.pid is not None
            replica.pids.append(op.pid)
            proc.log("real_operator_started", pid=op.pid, incarnation=proc.incarnation)
            while True:
                self._look(replica, proc)
                code = op.returncode
                if code is not None:
                    tail.emit(proc)  # what it wrote between the last look and its exit
                    proc.log("real_operator_exited", pid=op.pid, code=code)
                    return code if code > 0 else 128 - code
                if tail.open and not replica.stopped and replica.in_flight == 0 and \
                        self.sim.loop.time() - max(tail.last_line_at, replica.active_at) >= IDLE_S:
                    tail.finish_quiet(proc)
                await asyncio.sleep(POLL_S)
        finally:
            replica.tail = None
            op.kill_now()  # SIGKILL by pid (a stopped process dies of it too)

    def _look(self, replica: Replica, proc: Process) -> None:
        """Read the replica's log into the trace, then make its OS process stopped or running
        as its world process is paused or not (SIGSTOP, SIGCONT)."""
        if replica.tail is not None and proc.alive:
            replica.tail.emit(proc)
        op = replica.operator
        if op is None or op.pid is None or not proc.alive or proc.paused == replica.stopped:
            return
        replica.stopped = proc.paused
        if not replica.stopped:
            replica.active_at = self.sim.loop.time()
        with contextlib.suppress(ProcessLookupError):
            os.kill(op.pid, signal.SIGSTOP if replica.stopped else signal.SIGCONT)
        proc.log("real_operator_signal", pid=op.pid,
                 signal="SIGSTOP" if replica.stopped else "SIGCONT")

    def _on_exit(self, proc: Process) -> None:
        replica = next((r for r in self.replicas if r.process == proc.name), None)
        if replica is None or self._stopping or proc.exit_reason == STOPPED_AT_END:
            return
        if self.sim.now - replica.started_at >= RESTART_RESET_S:
            replica.restarts = 0
        delay = min(self.restart_delay * (2 ** replica.restarts), MAX_RESTART_DELAY_S)
        replica.restarts += 1
        self._forget_holder(replica)

        def again() -> None:
            current = self.sim.processes.find(replica.process)
            if self._stopping or (current is not None and current.alive):
                return  # stopped meanwhile, or restarted already (the Restart fault)
            self._start_process(replica)

        self.sim.loop.call_later(delay, again)

    async def wait_started(self, timeout: float = 60.0) -> None:
        """Wait (wall clock) until every replica's current process answers on its probe port."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for replica in self.replicas:
            while replica.operator is None or replica.operator.pid is None:
                if loop.time() >= deadline:
                    raise RealOperatorError(f"replica {replica.name} did not start within "
                                            f"{timeout:g} s")
                await asyncio.sleep(POLL_S)
            await replica.operator.wait_started(max(1.0, deadline - loop.time()))

    # -- the leader ------------------------------------------------------------------------------

    def _wrap_endpoint(self, replica: Replica) -> None:
        """Before each request of ``replica``: read its log (`_look`) and hold the request while
        the replica is paused; count the requests being answered; after a Lease write, note the
        holder it wrote (`_holder_wrote`)."""
        server = replica.server
        handle = server.gateway.handle
        lease_path = (f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases")

        async def wrapped(req: HttpRequest) -> Any:
            proc = self.sim.processes.find(replica.process)
            if proc is not None and proc.alive:
                self._look(replica, proc)
                if proc.paused:
                    try:
                        await proc.checkpoint()
                    except ProcessGone:  # killed while held: its connection goes with it
                        raise Dropped(f"{replica.process} ended while paused",
                                      timeout=False) from None
                    self._look(replica, proc)
            watch = req.param("watch") in ("true", "1")
            if not watch:
                replica.in_flight += 1
            try:
                answer = await handle(req)
            finally:
                if not watch:
                    replica.in_flight -= 1
                    replica.active_at = self.sim.loop.time()
            # the body may be JSON or protobuf (client-go's leader election): the stored Lease
            # right after a successful write says what was written
            if req.method in ("POST", "PUT", "PATCH") and req.path.startswith(lease_path) \
                    and getattr(answer, "status", 0) in (200, 201):
                holder = self.lease_holder()
                if holder is not None:
                    self._holder_wrote(replica.name, holder)
            return answer

        server.gateway.handle = wrapped  # type: ignore[method-assign]

    def _holder_wrote(self, name: str, holder: str) -> None:
        for replica in self.replicas:
            if replica.name == name:
                replica.holder = holder or None
            elif holder and replica.holder == holder:
                replica.holder = None
        leader = self.leader()
        for replica in self.replicas:
            proc = self.sim.processes.find(replica.process)
            if proc is None:
                continue
            if replica.name == leader and replica.holder:
                proc.host = replica.holder.rsplit("_", 1)[0]
            else:
                proc.host = replica.name

    def _forget_holder(self, replica: Replica) -> None:
        replica.holder = None
        proc = self.sim.processes.find(replica.process)
        if proc is not None:
            proc.host = replica.name

    def lease_holder(self) -> str | None:
        """The Lease's ``holderIdentity`` now (None when nobody holds it)."""
        try:
            lease = self.sim.api.get("Lease", LEASE_NAME, self.namespace)
        except Exception:  # NotFound: nobody ever led
            return None
        return str((lease.get("spec") or {}).get("holderIdentity") or "") or None

    def leader(self) -> str | None:
        """The replica whose write made the Lease's current holder (None when none did)."""
        holder = self.lease_holder()
        if holder is None:
            return None
        for replica in self.replicas:
            if replica.holder == holder:
                return replica.name
        return None

    def replica(self, name: str) -> Replica:
        for replica in self.replicas:
            if replica.name == name:
                return replica
        known = ", ".join(r.name for r in self.replicas)
        raise KeyError(f"no replica named {name!r} (known: {known})")

    def describe(self) -> str:
        parts = [f"{r.name} pid {r.pid} (API {r.server.url}, log {r.log_path})"
                 for r in self.replicas]
        return (f"KubeRay operator {self.version or 'of unknown version'} ({self.binary}): "
                + "; ".join(parts))

    # -- stop ------------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Kill every replica's OS process (by pid), then close the endpoints and proxies."""
        self._stopping = True
        for replica in self.replicas:
            proc = self.sim.processes.find(replica.process)
            if proc is not None and proc.alive:
                proc.crash(STOPPED_AT_END)
            if replica.operator is not None:
                replica.operator.kill_now()
        await asyncio.sleep(0)  # let the cancelled mains run their cleanup
        for replica in self.replicas:
            await replica.proxy.stop()
            await replica.server.stop()


class RealInstall:
    """What `install_real` returns: the `RealReplicas` seen as the ported
    install's ``KubeRayInstall`` is seen by scenarios and tests (``leader()``, ``replicas()``,
    ``await wait_for_leader()``, ``manifests``). The port's in-memory views (``reconciler``,
    ``managers``, ``replica_records``) have nothing to show: the operator's memory is a Go
    process's."""

    def __init__(self, real: RealReplicas, manifests: list[dict[str, Any]]) -> None:
        self.real = real
        self.sim = real.sim
        self.manifests = manifests
        self.replica_records: list[Any] = []

    def __repr__(self) -> str:
        return f"<RealInstall {self.real.describe()}>"

    def replicas(self) -> list[Process]:
        """The replicas' current world processes that are alive, by name."""
        out = []
        for replica in self.real.replicas:
            proc = self.sim.processes.find(replica.process)
            if proc is not None and proc.alive:
                out.append(proc)
        return out

    def leader(self) -> Process | None:
        """The world process of the replica that holds the Lease (`RealReplicas.leader`)."""
        name = self.real.leader()
        proc = self.sim.processes.find(self.real.replica(name).process) if name else None
        return proc if proc is not None and proc.alive else None

    def lease(self) -> dict[str, Any] | None:
        try:
            return dict(self.sim.api.get("Lease", LEASE_NAME, self.real.namespace))
        except Exception:  # NotFound: nobody ever led
            return None

    def managers(self) -> list[Any]:
        return []

    def reconciler(self, name: str = "RayCluster") -> Any | None:
        return None

    async def wait_for_leader(self, timeout: float = 60.0) -> Process:
        """Wait until a replica holds the Lease; its world process (`TimeoutError` after
        ``timeout`` seconds)."""
        deadline = self.sim.now + timeout
        while True:
            proc = self.leader()
            if proc is not None:
                return proc
            if self.sim.now >= deadline:
                raise TimeoutError(f"no replica of the real operator held the Lease within "
                                   f"{timeout:g} s; {self.real.describe()}")
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        await self.real.stop()


async def install_real(sim: Simulation, binary: str | os.PathLike[str], *, replicas: int = 1,
                       leader_election: bool = True, namespace: str = "default",
                       feature_gates: Mapping[str, bool] | None = None,
                       reconcile_concurrency: int | None = None, **values: Any) -> RealInstall:
    """Install the real operator ``binary`` in ``sim`` (what ``sim.install_kuberay`` does in a
    world made with `real_installer`): prepare the world as the binary's release chart
    does (`emu.http.real_operator.prepare_world`) and start ``replicas`` copies of the binary
    as world processes (`RealReplicas`; the world must run on a wall-clock-paced loop).
    ``feature_gates`` and ``reconcile_concurrency`` as the port's ``install_kuberay`` takes them
    (a gate the binary does not know makes it exit at start); ``values`` are the chart's values
    (``--set``)."""
    from ..kuberay import helm
    from .real_operator import (
        NeedsNewerKubeRay,
        chart_feature_gates,
        chart_values,
        check_feature_gates,
        prepare_world,
        unknown_gate_in,
    )

    if getattr(sim, "virtual", False):
        raise RealOperatorError("the real operator keeps wall-clock time: run the world on a "
                                "paced loop (emu.run(..., paced=True), emu run --operator "
                                "real, emu serve)")
    if not leader_election:
        values = {**values, "leaderElectionEnabled": False}
    version = binary_version(binary)
    check_feature_gates(version, feature_gates)
    if feature_gates:
        gates = chart_feature_gates(version)
        for gate_name, enabled in sorted(feature_gates.items()):
            for gate in gates:
                if gate["name"] == gate_name:
                    gate["enabled"] = bool(enabled)
                    break
            else:
                gates.append({"name": gate_name, "enabled": bool(enabled)})
        values = {**values, "featureGates": gates}
    if reconcile_concurrency is not None:
        values = {**values, "reconcileConcurrency": reconcile_concurrency}
    await prepare_world(sim, namespace=namespace, version=version)
    real = RealReplicas(sim, binary, replicas=replicas, namespace=namespace, values=values)
    sim.real_kuberay = real  # stopped at the end of emu.run, even when it fails to start
    await real.start()
    try:
        await real.wait_started()
    except RealOperatorError as err:
        unknown = unknown_gate_in(str(err))
        if unknown is not None:  # a release line not known here, or a gate it lacks
            raise NeedsNewerKubeRay(version, unknown) from err
        raise
    manifests = helm.render(chart_values(version, values), namespace=namespace)
    return RealInstall(real, manifests)


def real_installer(binary: str | os.PathLike[str]) -> Any:
    """A ``kuberay_installer`` for `emu.Simulation` (and `emu.run`): ``install_kuberay`` then
    runs ``binary`` (`install_real`) instead of the port."""

    async def install(sim: Simulation, **kwargs: Any) -> RealInstall:
        return await install_real(sim, binary, **kwargs)

    return install


def real_operator_options(binary: str | os.PathLike[str],
                          options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`emu.run` options for a world (of ``options``, a scenario's) whose operator is the real
    ``binary``: a wall-clock-paced run (``paced``), its installer (`real_installer`), and the
    built-ins plus the core/v1 Endpoints controller, which KubeRay up to v1.5 reads."""
    import attrs

    from ..kube.config import KubeConfig
    from .real_operator import kube_config

    out = {**(options or {}), "kuberay_installer": real_installer(binary), "paced": True}
    cluster = out.get("cluster")
    if isinstance(cluster, KubeConfig):
        if "endpoints" not in cluster.controllers:
            out["cluster"] = attrs.evolve(cluster,
                                          controllers=(*cluster.controllers, "endpoints"))
    else:
        out["cluster"] = kube_config()
    return out
