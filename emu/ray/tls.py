"""Ray's TLS (``RAY_USE_TLS``): which Ray processes speak TLS, and the handshake between them.

Why: with ``RAY_USE_TLS=1`` every gRPC channel of Ray (GCS, raylets, workers, ``ray
health-check``) is TLS with the certificate, key and CA named by ``RAY_TLS_SERVER_CERT``,
``RAY_TLS_SERVER_KEY`` and ``RAY_TLS_CA_CERT`` (Ray's "TLS authentication" page). A cluster
whose Pods disagree, or whose certificates do not name the address a peer dials, does not come
up — which is what KubeRay's mTLS (`emu.kuberay.raycluster_mtls`) and its ``wait-for-tls-ip-san``
init container exist to prevent. HTTP servers (dashboard, agent, Serve) stay plaintext, as in Ray.

`container_tls` reads a container's settings when its Ray program starts (a file in a mounted
Secret or ConfigMap that is missing is fatal, as Ray's start fails on an unreadable file; files
elsewhere — an emptyDir an init script fills — are taken as present) and `register` records them
for the container's process and every process it starts. `check_handshake` is what a
`serve_rpc` server does with each call: a plaintext caller of a TLS server, or a TLS caller of a
plaintext server, gets `ConnectionReset` (gRPC's UNAVAILABLE); a TLS caller that dialled a host
the server's certificate does not list (DNS or IP SAN) likewise. SANs are known only for
certificates in the emulated cert-manager's placeholder form (`emu.kube.certmanager`); for any
other certificate the name check is skipped.
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path
from typing import Any

import attrs

from emu.kernel.network import CallInfo, ConnectionReset
from emu.kernel.programs import ContainerContext

TRUE_VALUES = ("1", "true", "True", "TRUE")
_SAN_LINE = re.compile(r"^X509v3 Subject Alternative Name:(.*)$", re.M)


class TlsSetupError(Exception):
    """The container's TLS files cannot be read (Ray's start fails)."""


@attrs.frozen
class TlsConfig:
    """One Ray process's TLS settings; ``sans`` None when its certificate's names are unknown."""

    cert: str
    key: str
    ca: str
    sans: tuple[str, ...] | None = None


def parse_sans(text: str) -> tuple[str, ...] | None:
    """The DNS and IP SANs of a placeholder certificate (``openssl x509 -text``'s line)."""
    match = _SAN_LINE.search(text)
    if match is None:
        return None
    out = []
    for part in match.group(1).split(","):
        part = part.strip()
        for prefix in ("DNS:", "IP Address:"):
            if part.startswith(prefix):
                out.append(part.removeprefix(prefix))
    return tuple(out)


def _mounted(ctx: ContainerContext, path: str) -> tuple[str | None, Path | None]:
    """(kind of the volume mounted over ``path`` — "secret", "configMap", … — and the file)."""
    volumes = {v.get("name"): v for v in (ctx.pod.get("spec") or {}).get("volumes") or []}
    best: tuple[int, str | None, Path | None] = (-1, None, None)
    for mount in ctx.container.get("volumeMounts") or []:
        mount_path = str(mount.get("mountPath", "")).rstrip("/")
        if not (path == mount_path or path.startswith(mount_path + "/")):
            continue
        if len(mount_path) <= best[0]:
            continue
        volume = volumes.get(mount.get("name")) or {}
        kind = next((k for k in ("secret", "configMap", "emptyDir", "persistentVolumeClaim",
                                 "hostPath", "projected") if k in volume), None)
        base = ctx.volumes.get(str(mount.get("mountPath", "")))
        file = base / path[len(mount_path):].lstrip("/") if base is not None else None
        best = (len(mount_path), kind, file)
    return best[1], best[2]


def container_tls(ctx: ContainerContext) -> TlsConfig | None:
    """The container's TLS settings (None without ``RAY_USE_TLS``); `TlsSetupError` when a file
    the kubelet should have projected from a Secret or ConfigMap is not there."""
    if ctx.env.get("RAY_USE_TLS", "0") not in TRUE_VALUES:
        return None
    paths = {name: ctx.env.get(name, "") for name in
             ("RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")}
    sans: tuple[str, ...] | None = None
    for name, path in paths.items():
        if not path:
            raise TlsSetupError(f"RAY_USE_TLS is set but {name} is not")
        kind, file = _mounted(ctx, path)
        if kind in ("secret", "configMap") and (file is None or not file.is_file()):
            raise TlsSetupError(f"[Errno 2] No such file or directory: '{path}' ({name})")
        if name == "RAY_TLS_SERVER_CERT" and file is not None and file.is_file():
            sans = parse_sans(file.read_text(errors="replace"))
    return TlsConfig(paths["RAY_TLS_SERVER_CERT"], paths["RAY_TLS_SERVER_KEY"],
                     paths["RAY_TLS_CA_CERT"], sans)


#: Per network: process name → its TLS settings (None: plaintext), for every Ray container.
_REGISTRY: weakref.WeakKeyDictionary[Any, dict[str, TlsConfig | None]] = \
    weakref.WeakKeyDictionary()


def register(ctx: ContainerContext, config: TlsConfig | None) -> None:
    """Record the container's settings for its process and its children, until it exits."""
    table = _REGISTRY.setdefault(ctx.network, {})
    name = ctx.process.name
    table[name] = config

    def forget(_p: Any) -> None:
        if table.get(name) is config:  # not a restarted container's newer entry
            table.pop(name, None)

    ctx.process.on_exit(forget)


def peer_tls(network: Any, process_name: str) -> TlsConfig | None:
    """The settings of the Ray container ``process_name`` belongs to (None: plaintext, also for
    callers outside any Ray container)."""
    table = _REGISTRY.get(network) or {}
    name = process_name
    while name:
        if name in table:
            return table[name]
        name = name.rpartition("/")[0]
    return None


def check_handshake(network: Any, server_process: str, info: CallInfo) -> None:
    """The TLS handshake of a call to a `serve_rpc` server (module docstring)."""
    server = peer_tls(network, server_process)
    client = peer_tls(network, info.src)
    if server is None and client is None:
        return
    if server is not None and client is None:
        raise ConnectionReset(f"{info.dst}: Socket closed (the server uses TLS, RAY_USE_TLS; "
                              f"the caller {info.src} does not)", src=info.src, dst=info.dst)
    if server is None:
        raise ConnectionReset(f"{info.dst}: Ssl handshake failed: WRONG_VERSION_NUMBER (the "
                              f"server does not use TLS)", src=info.src, dst=info.dst)
    assert server is not None
    if server.sans is None:
        return
    host = info.dst.rpartition(":")[0] or info.dst
    if host not in server.sans:
        raise ConnectionReset(f"{info.dst}: Peer name {host} is not in peer certificate "
                              f"(SANs: {', '.join(server.sans)})", src=info.src, dst=info.dst)


#: A line of KubeRay's ``wait-for-tls-ip-san`` script (pod.go ``configureTLS``).
WAIT_FOR_TLS_IP_SAN_MARK = "Waiting for TLS cert to include IP SAN"
_CERT_VAR = re.compile(r'CERT="([^"]+)"')


async def wait_for_tls_ip_san(ctx: ContainerContext, script: str) -> int:
    """KubeRay's ``wait-for-tls-ip-san`` init container: every 5 s, until the mounted
    certificate lists ``$POD_IP`` as an IP SAN (``openssl x509 -text | grep``), then exit 0.

    The file is read as the kubelet projects it: a Secret's later changes appear at the
    kubelet's next volume sync (``ctx.services["sync_volumes"]``, about a minute), not at once.
    A certificate this emulator cannot read (not the emulated cert-manager's) counts as listing
    the IP."""
    match = _CERT_VAR.search(script)
    cert = match.group(1) if match else "/etc/ray/tls/tls.crt"
    pod_ip = ctx.env.get("POD_IP") or ctx.ip
    ctx.process.log("tls_san_wait", cert=cert, pod_ip=pod_ip)
    while True:
        sync = ctx.services.get("sync_volumes")
        if sync is not None:
            await sync()
        _kind, file = _mounted(ctx, cert)
        if file is not None and file.is_file():
            sans = parse_sans(file.read_text(errors="replace"))
            if sans is None or pod_ip in sans:
                ctx.process.log("tls_san_present", pod_ip=pod_ip)
                return 0
        await ctx.process.sleep(5.0)
