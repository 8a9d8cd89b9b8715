"""The real KubeRay operator binary as the operator of a served world (``emu serve
--kuberay-binary PATH``).

The world is prepared as ``helm install kuberay-operator`` prepares a cluster (`prepare_world`):
KubeRay's CRDs, then the chart's ServiceAccount and RBAC (`emu.kuberay.helm.render`; the
ClusterRole's rules those of the binary's version, `release_rules`), with RBAC enforced and the
operator's HTTP identities acting as the chart's ServiceAccount; the ported operator is not
started. Then `RealOperator` runs the binary as an OS process with the chart's
container arguments (`operator_args`) and an environment of its own (`operator_env`):
``KUBECONFIG`` naming the served API, ``HTTP_PROXY`` naming the world's forward proxy
(`emu.http.forward_proxy`) through which it reaches the Ray dashboards at their Service names.

What differs from the chart's Pod, because the binary runs outside any cluster:

- ``--leader-election-namespace`` is given (in a Pod controller-runtime reads the namespace
  from the ServiceAccount's mounted files, which a process outside a cluster has not);
- ``--metrics-addr`` and ``--health-probe-bind-address`` are free loopback ports (the chart's
  ``:8080`` and ``:8082`` listen on every interface and would collide between two runs);
- ``argv[0]`` is the chart's ``/manager``, whatever the binary's file is called, so the
  User-Agent client-go derives from it (``manager/...``, the leader election's client) is the
  one it has in a Pod;
- the chart's values are those of the binary's own release chart when the binary is a known
  release (`RELEASE_CHARTS`: a newer chart's feature gates or flags can be unknown to an older
  binary, which then exits at once), the ported chart's otherwise.

The process is started in its own session with a parent-death signal (SIGKILL when ``emu
serve`` dies, Linux), and `RealOperator.stop` ends it by its pid: SIGTERM, then SIGKILL after a
grace period. Its stdout and stderr go to a log file that is kept after it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import yaml

from ..kuberay import helm

if TYPE_CHECKING:
    from ..simulation import Simulation

#: What ``args[0]`` is in the chart's Pod (``operatorCommand``).
CHART_COMMAND = "/manager"
#: The product of the User-Agent KubeRay sets on its clients (``kuberay-operator/<version>``),
#: and of the one client-go derives from ``argv[0]`` for the leader election's client.
HTTP_IDENTITIES = ("kuberay-operator", "manager")
#: Seconds between SIGTERM and SIGKILL when the operator is stopped.
STOP_GRACE_S = 5.0

_MODULE = b"github.com/ray-project/kuberay/ray-operator"
_MOD_LINE = b"\nmod\t" + _MODULE + b"\t"
_VERSION = re.compile(rb"(v[0-9A-Za-z.+-]+)[\t\n]")

#: What the released charts whose binaries can be built here set differently from the chart the
#: port follows: their ``featureGates`` (each release's chart lists the gates its
#: ``pkg/features`` defines, with their defaults) and the values they do not have yet (v1.4's
#: binary has no ``--qps``/``--burst`` flags, so its chart has no ``kubeClient``).
RELEASE_CHARTS: dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]] = {
    "v1.4": ([{"name": "RayClusterStatusConditions", "enabled": True},
              {"name": "RayJobDeletionPolicy", "enabled": False}], ("kubeClient",)),
    "v1.5": ([{"name": "RayClusterStatusConditions", "enabled": True},
              {"name": "RayJobDeletionPolicy", "enabled": False},
              {"name": "RayMultiHostIndexing", "enabled": False},
              {"name": "RayServiceIncrementalUpgrade", "enabled": False}], ()),
}


class RealOperatorError(Exception):
    """The binary cannot be run (missing, not executable, exited at start)."""


class NeedsNewerKubeRay(RealOperatorError):
    """What a run asks of the operator is unknown to the binary's release: a feature gate that a
    later KubeRay added. Not a failure of the binary: the run cannot be made with it."""

    def __init__(self, version: str | None, gate: str) -> None:
        self.version = version
        self.gate = gate
        super().__init__(f"needs a KubeRay newer than {version or 'this binary'}: the feature "
                         f"gate {gate} is unknown to it")


#: What the binary prints when its ``--feature-gates`` name a gate it does not know
#: (k8s.io/component-base's feature gate parser).
_UNKNOWN_GATE = re.compile(r"unrecognized feature gate:?\s*([A-Za-z0-9]+)")


def known_feature_gates(version: str | None) -> frozenset[str] | None:
    """The feature gates a binary of ``version`` knows, from its release line's chart (whose
    ``featureGates`` list every gate of that release's ``pkg/features/features.go``: checked
    for v1.4.0 and v1.5.0), or None for a version outside `RELEASE_CHARTS`."""
    release = _release(version)
    return frozenset(g["name"] for g in release[0]) if release else None


def check_feature_gates(version: str | None, gates: Mapping[str, bool] | None) -> None:
    """Raise `NeedsNewerKubeRay` for the first of ``gates`` (by name) that a binary of
    ``version`` does not know; nothing when its release line is not known here."""
    known = known_feature_gates(version)
    if known is None:
        return
    for name in sorted(gates or {}):
        if name not in known:
            raise NeedsNewerKubeRay(version, name)


def unknown_gate_in(text: str) -> str | None:
    """The gate named by the binary's ``unrecognized feature gate`` error in ``text``, if any."""
    found = _UNKNOWN_GATE.search(text)
    return found.group(1) if found else None


def binary_version(path: str | os.PathLike[str]) -> str | None:
    """The ray-operator module version a Go binary was built from (its embedded build info,
    what ``go version -m`` prints: ``v1.5.0``), or None when it carries none."""
    import mmap

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(_MOD_LINE)
            if at < 0:
                return None
            found = _VERSION.match(data[at + len(_MOD_LINE):at + len(_MOD_LINE) + 128])
    except (OSError, ValueError):
        return None
    return found.group(1).decode() if found else None


def _release(version: str | None) -> tuple[list[dict[str, Any]], tuple[str, ...]] | None:
    found = re.match(r"(v\d+\.\d+)\.\d+$", version or "")
    return RELEASE_CHARTS.get(found.group(1)) if found else None


def chart_feature_gates(version: str | None) -> list[dict[str, Any]]:
    """The chart's ``featureGates`` for a binary of ``version``: its release chart's for a
    known release line (``v1.5.x``), else the ported chart's (`helm.DEFAULT_VALUES`)."""
    release = _release(version)
    gates = release[0] if release else helm.DEFAULT_VALUES["featureGates"]
    return [dict(g) for g in gates]


def chart_values(version: str | None, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The chart's values for a binary of ``version`` (`RELEASE_CHARTS`), then ``values`` over
    them as ``--set`` would."""
    merged = helm.merge_values(helm.DEFAULT_VALUES, {"featureGates": chart_feature_gates(version)})
    release = _release(version)
    for key in release[1] if release else ():
        merged.pop(key, None)
    return helm.merge_values(merged, values or {})


def operator_args(version: str | None, *, namespace: str, metrics_port: int,
                  probe_port: int, values: Mapping[str, Any] | None = None) -> list[str]:
    """The chart's container arguments for a binary of ``version`` (`helm.operator_args` of
    `chart_values`), then what a process outside a Pod needs."""
    args = helm.operator_args(chart_values(version, values), namespace)
    return [*args, f"--leader-election-namespace={namespace}",
            f"--metrics-addr=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}"]


def operator_env(*, kubeconfig: str, proxy_url: str,
                 base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment: only ``PATH``, ``HOME`` and ``TMPDIR`` of ``base`` (so a proxy
    or kubeconfig of the caller's shell does not leak in), then ``KUBECONFIG`` and the proxy
    variables. Go ignores proxies for loopback hosts, so the API server is reached directly."""
    base = os.environ if base is None else base
    env = {k: base[k] for k in ("PATH", "HOME", "TMPDIR") if k in base}
    env.update({"KUBECONFIG": kubeconfig, "HTTP_PROXY": proxy_url, "http_proxy": proxy_url,
                "NO_PROXY": "", "no_proxy": ""})
    return env


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the kernel's pick for a socket bound to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def kube_config() -> Any:
    """The built-ins of a world the real operator runs: the defaults plus the core/v1 Endpoints
    controller (`emu.kube.endpoints`), which KubeRay up to v1.5 reads for RayServices."""
    import attrs

    from ..kube.config import KubeConfig

    base = KubeConfig()
    return attrs.evolve(base, controllers=(*base.controllers, "endpoints"))


def module_cache() -> Path:
    """Go's module cache: ``$GOMODCACHE``, else ``$GOPATH/pkg/mod`` (its first entry), else
    ``~/go/pkg/mod`` (Go's defaults, without running ``go env``)."""
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return Path(gopath or Path.home() / "go") / "pkg" / "mod"


def release_rules(version: str | None) -> list[dict[str, Any]] | None:
    """The operator's ClusterRole rules at ``version``: ``config/rbac/role.yaml`` of the module's
    source in Go's module cache (``go install`` put it there; the chart's rules are kept equal to
    it), or None when that source is not there. A release's binary may need what a later chart
    no longer grants (v1.5 watches core/v1 Endpoints; later releases EndpointSlices)."""
    if not version:
        return None
    path = (module_cache() / "github.com" / "ray-project" / "kuberay" /
            f"ray-operator@{version}" / "config" / "rbac" / "role.yaml")
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError):
        return None
    for doc in docs:
        if doc.get("kind") == "ClusterRole" and isinstance(doc.get("rules"), list):
            return [dict(r) for r in doc["rules"]]
    return None


async def prepare_world(sim: Simulation, *, namespace: str = "default",
                        version: str | None = None) -> list[dict[str, Any]]:
    """What ``helm install kuberay-operator`` puts in a cluster, minus the operator's Pods: the
    CRDs, the ServiceAccount and its RBAC (the ClusterRole's rules those of ``version``'s
    source when Go's module cache has it, `release_rules`); RBAC is enforced from then on and
    the binary's HTTP identities (`HTTP_IDENTITIES`) act as that ServiceAccount. The applied
    manifests."""
    from .serve import kuberay_crds

    applied: list[dict[str, Any]] = []
    for crd in kuberay_crds():
        await sim.apply(crd)
        applied.append(crd)
    rules = release_rules(version)
    manifests = helm.render(chart_values(version), namespace=namespace,
                            emulated_event_rule=rules is None)
    sa_name = "default"
    for manifest in manifests:
        if manifest["kind"] == "Deployment":
            sa_name = manifest["spec"]["template"]["spec"].get("serviceAccountName") or sa_name
            continue
        if manifest["kind"] == "ConfigMap":
            continue
        if manifest["kind"] == "ClusterRole" and rules is not None:
            manifest = {**manifest, "rules": rules}
        await sim.apply(manifest)
        applied.append(manifest)
    rbac = getattr(sim, "rbac", None)
    if rbac is not None and getattr(sim, "rbac_option", None) is not False:
        rbac.enable()
        user = rbac.service_account_user(namespace, sa_name)
        for identity in HTTP_IDENTITIES:
            rbac.assign(identity, user)
    return applied


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGKILL this child when the process that started it dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class RealOperator:
    """The binary as an OS process: ``await start()``, ``pid``, ``log_path``, ``returncode``
    (None while it runs), ``await stop()``."""

    def __init__(self, binary: str | os.PathLike[str], *, kubeconfig: str, proxy_url: str,
                 namespace: str = "default", log_path: str | os.PathLike[str] | None = None,
                 values: Mapping[str, Any] | None = None, extra_args: Sequence[str] = ()
                 ) -> None:
        self.binary = str(binary)
        self.kubeconfig = kubeconfig
        self.proxy_url = proxy_url
        self.namespace = namespace
        self.values = dict(values or {})
        self.extra_args = list(extra_args)
        self.version = binary_version(self.binary)
        self.metrics_port = 0
        self.probe_port = 0
        self.args: list[str] = []
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def check_binary(self) -> None:
        """Raise `RealOperatorError` unless ``binary`` is an executable file."""
        if not os.path.isfile(self.binary):
            raise RealOperatorError(f"--kuberay-binary {self.binary}: no such file")
        if not os.access(self.binary, os.X_OK):
            raise RealOperatorError(f"--kuberay-binary {self.binary}: not executable")

    async def start(self) -> None:
        self.check_binary()
        self.metrics_port, self.probe_port = free_port(), free_port()
        self.args = [*operator_args(self.version, namespace=self.namespace,
                                    metrics_port=self.metrics_port, probe_port=self.probe_port,
                                    values=self.values), *self.extra_args]
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="emu-kuberay-operator-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = operator_env(kubeconfig=self.kubeconfig, proxy_url=self.proxy_url)
        preexec = _die_with_parent if sys.platform.startswith("linux") else None
        try:
            self._proc = subprocess.Popen(
                [CHART_COMMAND, *self.args], executable=self.binary, env=env,
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=preexec)
        except OSError as err:
            self._close_log()
            raise RealOperatorError(f"--kuberay-binary {self.binary}: cannot run it: "
                                    f"{err.strerror or err}") from None

    async def wait_started(self, timeout: float = 30.0) -> None:
        """Wait (wall clock) until the operator answers on its health probe port; raise
        `RealOperatorError` with the end of its log if it exits first or does not answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            code = self.returncode
            if code is not None:
                raise RealOperatorError(f"the operator exited with status {code} at start; "
                                        f"its log ({self.log_path}) ends with:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                _reader, writer = await asyncio.open_connection("127.0.0.1", self.probe_port)
                writer.close()
                return
            if loop.time() >= deadline:
                raise RealOperatorError(f"the operator did not open its probe port within "
                                        f"{timeout:g} s; its log ({self.log_path}) ends with:\n"
                                        f"{self.log_tail()}")
            await asyncio.sleep(0.1)

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None:
            return ""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def stop(self, grace: float = STOP_GRACE_S) -> int | None:
        """End the process by its pid: SIGTERM, then SIGKILL after ``grace`` seconds (wall
        clock); its exit status (negative: the signal that ended it)."""
        proc = self._proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + grace
                while proc.poll() is None and loop.time() < deadline:
                    await asyncio.sleep(0.05)
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
            return proc.wait()
        finally:
            self._close_log()

    def kill_now(self) -> None:
        """SIGKILL at once, without waiting (for paths where nothing can be awaited)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class RealOperatorRun:
    """What ``emu serve --kuberay-binary`` adds to a served world once its API is listening:
    the forward proxy, then the operator process (``await start(kubeconfig)``), both ended by
    ``await stop()`` (the operator first, while the API still answers it)."""

    def __init__(self, sim: Simulation, binary: str, *, namespace: str = "default",
                 host: str = "127.0.0.1", log_path: str | None = None) -> None:
        from .forward_proxy import ForwardProxy

        self.sim = sim
        self.proxy = ForwardProxy(sim, identity=HTTP_IDENTITIES[0], host=host)
        self.binary = binary
        self.namespace = namespace
        self.log_path = log_path
        self.operator: RealOperator | None = None

    async def start(self, kubeconfig: str, *, timeout: float = 60.0) -> RealOperator:
        proxy_url = await self.proxy.start()
        self.operator = RealOperator(self.binary, kubeconfig=kubeconfig, proxy_url=proxy_url,
                                     namespace=self.namespace, log_path=self.log_path)
        await self.operator.start()
        await self.operator.wait_started(timeout)
        return self.operator

    def describe(self) -> str:
        op = self.operator
        if op is None:
            return "the KubeRay operator is not running"
        return (f"KubeRay operator {op.version or 'of unknown version'} ({op.binary}) running as "
                f"pid {op.pid}, proxy {self.proxy.url}, log {op.log_path}")

    async def stop(self) -> None:
        try:
            if self.operator is not None:
                await self.operator.stop()
        finally:
            if self.operator is not None:
                self.operator.kill_now()  # a no-op unless stop() was interrupted
            await self.proxy.stop()
