"""Container probes: the kubelet's startup, liveness and readiness probers, on virtual time.

What runs is what the kubelet runs (``pkg/kubelet/prober``: ``worker.go`` ``doProbe``,
``prober.go``), against the emulated programs over the emulated network:

- one worker per container attempt and probe type; its first probe when the container starts,
  then every ``periodSeconds`` (10), none before ``initialDelaySeconds`` (0) passed; each probe
  has ``timeoutSeconds`` (1); ``successThreshold`` (1) results in a row make a success,
  ``failureThreshold`` (3) a failure;
- readiness starts failed, liveness succeeded; until a startup probe succeeds the other two do
  not run (and the container is not ``started``); a liveness or startup failure kills the
  container, which the Pod's (or its own) ``restartPolicy`` then restarts with back-off;
- ``httpGet``: an HTTP request to the Pod's IP (or ``host``) and port (a number or a container
  port's name); 200-399 is success; ``tcpSocket`` and ``grpc``: something listens on the port;
  ``exec``: each ``http://`` URL the command fetches (``wget``, ``curl``, Python's ``urllib``:
  KubeRay's ``wget ... http://localhost:52365/api/local_raylet_healthz | grep success``) is
  requested from inside the container, and must answer 200 (with ``success`` in the body when
  the command greps for it); a command the emulator cannot read succeeds;
- a failed probe records a Warning Event ``Unhealthy`` ("Readiness probe failed: ...", kube's
  texts), a liveness kill a Normal Event ``Killing`` ("Container c failed liveness probe, will be
  restarted").

`run_probe` is the single probe; the kubelet (``emu.kube.kubelet``) runs the workers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from ..kernel.loop import wait_for
from ..kernel.network import ConnectionRefused, Network, NetworkError, Timeout
from ..kernel.process import Process

Obj = dict[str, Any]

#: Probe types in the order the kubelet reports them.
PROBE_KINDS = ("startup", "liveness", "readiness")
_FIELDS = {"startup": "startupProbe", "liveness": "livenessProbe",
           "readiness": "readinessProbe"}
_TITLE = {"startup": "Startup", "liveness": "Liveness", "readiness": "Readiness"}
_URL = re.compile(r"https?://[^\s'\"|;&)]+")


@attrs.frozen
class ProbeSpec:
    """A probe's timing (kube's defaults) and its handler."""

    kind: str
    handler: Obj
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def of(cls, kind: str, probe: Obj) -> ProbeSpec:
        def num(key: str, default: float) -> float:
            value = probe.get(key)
            return float(value) if isinstance(value, (int, float)) and value > 0 else default

        success = int(num("successThreshold", 1))
        return cls(kind, probe, float(probe.get("initialDelaySeconds") or 0),
                   num("periodSeconds", 10), num("timeoutSeconds", 1),
                   1 if kind != "readiness" else success, int(num("failureThreshold", 3)))


def probe_specs(container: Obj) -> dict[str, ProbeSpec]:
    """The container's probes by kind (``startup``, ``liveness``, ``readiness``)."""
    return {kind: ProbeSpec.of(kind, container[_FIELDS[kind]]) for kind in PROBE_KINDS
            if isinstance(container.get(_FIELDS[kind]), dict)}


def _port(value: Any, container: Obj) -> int | None:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    for p in container.get("ports") or []:
        if p.get("name") == text:
            return int(p.get("containerPort") or 0) or None
    return None


def _go_error(err: NetworkError, what: str) -> str:
    if isinstance(err, Timeout):
        return f"{what}: i/o timeout"
    if isinstance(err, ConnectionRefused):
        return f"{what}: connect: connection refused"
    return f"{what}: {err}"


async def _http(network: Network, source: Process | None, caller: str, address: str,
                path: str, timeout: float) -> tuple[int | None, str, str]:
    """GET ``path`` from ``address``: (status, body, error text)."""
    payload = {"method": "GET", "path": path or "/", "headers": {"User-Agent": "kube-probe/1.33"},
               "body": None}
    try:
        result = await network.call(source, address, payload, verb="GET", name=path,
                                    timeout=timeout, caller=None if source else caller)
    except NetworkError as err:
        return None, "", _go_error(err, f"dial tcp {address}")
    if isinstance(result, dict) and "status" in result:
        return int(result["status"]), str(result.get("body") or ""), ""
    return 200, "" if result is None else str(result), ""


async def _http_get(handler: Obj, *, network: Network, source: Process | None, caller: str,
                    ip: str, container: Obj, timeout: float) -> tuple[bool, str]:
    port = _port(handler.get("port"), container)
    host = str(handler.get("host") or ip)
    scheme = str(handler.get("scheme") or "HTTP").lower()
    path = str(handler.get("path") or "/")
    url = f"{scheme}://{host}:{port}{path}"
    if port is None:
        return False, f"unknown port {handler.get('port')!r}"
    status, _, error = await _http(network, source, caller, f"{host}:{port}", path, timeout)
    if status is None:
        if "i/o timeout" in error:
            return False, (f'Get "{url}": context deadline exceeded (Client.Timeout exceeded '
                           "while awaiting headers)")
        return False, f'Get "{url}": {error}'
    if 200 <= status < 400:
        return True, ""
    return False, f"HTTP probe failed with statuscode: {status}"


async def _connect(handler: Obj, *, network: Network, source: Process | None, caller: str,
                   ip: str, container: Obj, timeout: float) -> tuple[bool, str]:
    """tcpSocket and grpc: something live listens there (a gone host times out)."""
    port = _port(handler.get("port"), container)
    if port is None:
        return False, f"unknown port {handler.get('port')!r}"
    address = f"{handler.get('host') or ip}:{port}"
    ep = network.endpoint(address)
    if ep is not None and ep.up:
        return True, ""
    try:  # nothing answers: refused, or (a gone host) no answer within the timeout
        await network.call(source, address, None, verb="connect", timeout=timeout,
                           caller=None if source else caller)
    except NetworkError as err:
        return False, _go_error(err, f"dial tcp {address}")
    return True, ""


async def _exec(handler: Obj, *, network: Network, source: Process | None, caller: str,
                ip: str, container: Obj, timeout: float) -> tuple[bool, str]:
    command = [str(part) for part in handler.get("command") or []]
    text = " ".join(command)
    for step in re.split(r"&&|;", text):
        for url in _URL.findall(step):
            m = re.match(r"https?://([^/:]+)(?::(\d+))?(/.*)?$", url)
            if m is None:
                continue
            host = m.group(1)
            if host in ("localhost", "127.0.0.1"):
                host = ip
            port = int(m.group(2) or 80)
            inner = re.search(r"(?:-T|--timeout[= ])\s*(\d+)", step)
            limit = float(inner.group(1)) if inner else timeout
            status, body, _ = await _http(network, source, caller, f"{host}:{port}",
                                          m.group(3) or "/", limit)
            if status != 200 or ("success" in step and "success" not in body):
                return False, ""  # wget -q prints nothing; grep finds nothing
    return True, ""


_HANDLERS: dict[str, Callable[..., Any]] = {
    "exec": _exec, "httpGet": _http_get, "tcpSocket": _connect, "grpc": _connect}


async def run_probe(spec: ProbeSpec, *, network: Network, source: Process | None, caller: str,
                    ip: str, container: Obj) -> tuple[bool, str]:
    """One probe: (success, output). The whole probe is bounded by ``timeoutSeconds``."""
    for key, fn in _HANDLERS.items():
        handler = spec.handler.get(key)
        if isinstance(handler, dict):
            try:
                result: tuple[bool, str] = await wait_for(
                    fn(handler, network=network, source=source, caller=caller, ip=ip,
                       container=container, timeout=spec.timeout), spec.timeout + 1e-6)
                return result
            except TimeoutError:
                if key == "exec":
                    return False, (f'command "{" ".join(str(c) for c in handler.get("command") or [])}"'
                                   f" timed out")
                return False, "context deadline exceeded"
    return True, ""


def unhealthy_message(kind: str, output: str) -> str:
    """The ``Unhealthy`` Event's text: ``Readiness probe failed: HTTP probe failed ...``."""
    return f"{_TITLE[kind]} probe failed: {output}"


def killing_message(container: str, kind: str) -> str:
    """The ``Killing`` Event's text after a liveness or startup failure."""
    return f"Container {container} failed {kind} probe, will be restarted"
