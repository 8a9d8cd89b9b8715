"""``emu serve``: an emulated cluster behind a real HTTP port, for kubectl and any client.

Virtual time is paced by the wall clock times ``--speed`` (`emu.kernel.paced.PacedLoop`): at
speed 10 a Lease's 15 s take 1.5 s of real time. Virtual time starts at the real current instant,
so timestamps and ages look like a real cluster's. The Kubernetes built-ins always run (Pods
start, Jobs finish, the garbage collector collects), KubeRay with ``--kuberay`` (its CRDs
applied first, as the chart does: `kuberay_crds`), or a real KubeRay operator binary with
``--kuberay-binary`` (`emu.http.real_operator`, docs/real-operator.md); ``-f`` applies
manifests first (a directory: its manifest files), ``--scenario`` runs a named scenario in the
served world. The world looks like a fresh kind cluster (`emu.kube.standard`) unless
``--no-standard-cluster`` asks for a minimal one. ``--bare`` serves the API server alone, as
envtest's control plane is (CRDs, RBAC, admission; nothing runs Pods or reconciles), for Go
controller suites with ``USE_EXISTING_CLUSTER=true``. A kubeconfig is
written, one line ``emu serve: ready at URL (KUBECONFIG=PATH)`` is printed, and Ctrl-C (or
SIGTERM) stops it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import yaml

from ..apiserver.errors import ApiError
from ..kernel.paced import PacedLoop, real_now_as_virtual
from .wire import DEFAULT_MAX_BODY


@attrs.frozen
class ServeOptions:
    kuberay: bool = False
    #: The API server alone (`Simulation` without ``cluster``), RBAC enforced: envtest's
    #: control plane.
    bare: bool = False
    files: tuple[str, ...] = ()
    scenario: str | None = None
    speed: float = 1.0
    host: str = "127.0.0.1"
    port: int = 0
    kubeconfig: str | None = None
    token: str | None = None
    #: HTTPS with x509 client-certificate login, and a kubeconfig with kind's admin
    #: certificate (`emu.http.tls`); ``token`` implies HTTPS too.
    tls: bool = False
    seed: int = 0
    max_body: int = DEFAULT_MAX_BODY
    expose: tuple[str, ...] = ()
    #: Changes watches can resume from (None: the Simulation's default).
    history_window: int | None = None
    #: Run this KubeRay operator binary as the world's operator (`emu.http.real_operator`).
    kuberay_binary: str | None = None
    #: A world like a fresh kind cluster (`emu.kube.config.KubeConfig.standard_cluster`):
    #: True or False sets it, None keeps the world's own choice (a scenario's, or the default,
    #: which is a standard cluster).
    standard_cluster: bool | None = None


def kubeconfig_text(url: str, token: str | None, namespace: str = "default",
                    ca_pem: bytes | None = None,
                    client_cert: tuple[bytes, bytes] | None = None) -> str:
    """A kubeconfig for ``url``: the ``token``, and/or the client certificate and key PEMs
    ``client_cert`` (kind's admin user), trusting ``ca_pem``."""
    user: dict[str, Any] = {"token": token} if token else {}
    if client_cert is not None:
        user["client-certificate-data"] = base64.b64encode(client_cert[0]).decode()
        user["client-key-data"] = base64.b64encode(client_cert[1]).decode()
    cluster: dict[str, Any] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "emu", "cluster": cluster}],
           "users": [{"name": "emu", "user": user}],
           "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "emu",
                                                    "namespace": namespace}}],
           "current-context": "emu", "preferences": {}}
    return yaml.safe_dump(doc, sort_keys=False)


async def serve_main(opts: ServeOptions, *, stop: asyncio.Event | None = None,
                     out: Any = None, ready: asyncio.Event | None = None,
                     scenario_done: asyncio.Event | None = None) -> int:
    """Build the world, serve it until ``stop`` is set (or a signal arrives); 0 on a clean stop.
    ``ready`` is set once the ready line is printed, ``scenario_done`` when ``--scenario``'s
    scenario has finished (or failed)."""
    from ..simulation import Simulation
    from .expose import parse_expose
    from .server import HttpServer

    out = out or sys.stdout
    exposes = [parse_expose(e) for e in opts.expose]
    from .command import manifest_files

    files = [name for f in opts.files for name in (manifest_files(f) if f != "-" else ["-"])]
    texts = [Path(f).read_text() if f != "-" else sys.stdin.read() for f in files]
    sc = None
    if opts.scenario:
        from .. import scenarios

        sc = scenarios.get(opts.scenario)
    sim_options: dict[str, Any] = {"cluster": True}
    if opts.kuberay_binary:
        from .real_operator import kube_config

        sim_options["cluster"] = kube_config()
    if opts.bare:
        # envtest's kube-apiserver: RBAC on (its clients are system:masters, as ours are), no
        # Pod ever runs, so no Ray images either.
        sim_options = {"cluster": False, "ray": False, "rbac": True}
    if sc is not None:
        sim_options.update(sc.options)
        sim_options.setdefault("cluster", True)
        if opts.kuberay_binary:  # the scenario's install_kuberay runs the binary
            from .real_replicas import real_operator_options

            sim_options = {k: v for k, v in real_operator_options(
                opts.kuberay_binary, sim_options).items() if k != "paced"}
    if opts.standard_cluster is not None and sim_options.get("cluster"):
        from ..kube.config import KubeConfig

        base = sim_options["cluster"]
        sim_options["cluster"] = attrs.evolve(
            base if isinstance(base, KubeConfig) else KubeConfig(),
            standard_cluster=opts.standard_cluster)
    if opts.history_window is not None:
        sim_options["history_window"] = opts.history_window
    sim = Simulation(seed=opts.seed, **sim_options)
    # A served world runs for hours and nothing here draws its Perfetto view: keeping a span
    # per request would only grow the heap (and every full garbage collection with it).
    sim.network.spans = None
    ssl_context, ca_pem, tls_dir = None, None, None
    admin_cert: tuple[bytes, bytes] | None = None
    if opts.token or opts.tls:
        # client-go sends credentials only over TLS: a token or a certificate needs HTTPS.
        from .tls import serving_tls

        certs = serving_tls(opts.host, opts.seed)
        tls_dir = tempfile.TemporaryDirectory(prefix="emu-serve-tls-")
        ssl_context, ca_pem = certs.server_context(Path(tls_dir.name)), certs.ca_pem
        if opts.tls:
            admin_cert = (certs.admin_cert_pem, certs.admin_key_pem)
    server = HttpServer(sim, host=opts.host, port=opts.port, token=opts.token,
                        max_body=opts.max_body, ssl_context=ssl_context)
    forwards: list[Any] = []
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    background: list[asyncio.Task[Any]] = []
    written: Path | None = None
    real: Any = None
    try:
        if opts.kuberay:
            for crd in kuberay_crds():  # as the chart does, before the operator
                await sim.apply(crd)
            await sim.install_kuberay()
        elif opts.kuberay_binary and sc is None:
            from .real_operator import binary_version, prepare_world

            await prepare_world(sim, version=binary_version(opts.kuberay_binary))
        for fname, text in zip(files, texts, strict=True):
            try:
                await sim.apply(text)
            except (ApiError, yaml.YAMLError, ValueError, TypeError) as err:
                raise ServeError(f"-f {fname}: {err}") from None
        if sc is not None:
            from ..scenarios import Report

            report = Report(sim)
            began = sim.now
            if opts.kuberay_binary:
                _tell_real_operator(sim)

            async def scenario() -> None:
                try:
                    await sc.fn(sim, report)
                except Exception as exc:  # the world keeps serving; say what happened
                    print(f"emu serve: scenario {sc.name} failed: {type(exc).__name__}: {exc}",
                          file=sys.stderr, flush=True)
                    return
                else:
                    verdict = "ok" if report.ok else "expectations failed"
                    print(f"emu serve: scenario {sc.name} finished ({verdict}) after "
                          f"{sim.now - began:.1f} virtual seconds", file=sys.stderr, flush=True)
                finally:
                    if scenario_done is not None:
                        scenario_done.set()

            background.append(loop.create_task(scenario(), name="scenario"))
        try:
            url = await server.start()
        except OSError as err:
            raise ServeError(f"cannot listen on {opts.host}:{opts.port}: {err.strerror or err}"
                             ) from None
        for spec in exposes:
            from .expose import Expose

            fwd = Expose(sim, spec, host=opts.host)
            try:
                await fwd.start()
            except OSError as err:
                raise ServeError(f"--expose {fwd.describe()}: cannot listen: "
                                 f"{err.strerror or err}") from None
            forwards.append(fwd)
        path = Path(opts.kubeconfig) if opts.kubeconfig else \
            Path(tempfile.gettempdir()) / f"emu-kubeconfig-{server.port}"
        if not opts.kubeconfig:
            written = path  # ours to remove at the end; a --kubeconfig file stays
        path.write_text(kubeconfig_text(url, opts.token, ca_pem=ca_pem, client_cert=admin_cert))
        os.chmod(path, 0o600)
        if opts.kuberay_binary and sc is None:
            real = await _start_real_operator(sim, opts, path)
        extra = "".join(f" {f.describe()}" for f in forwards)
        print(f"emu serve: ready at {url} (KUBECONFIG={path}){extra}", file=out, flush=True)
        if ready is not None:
            ready.set()
        await stop.wait()
        return 0
    finally:
        if real is not None:
            await real.stop()  # first: the operator still reaches the API while it stops
        if getattr(sim, "real_kuberay", None) is not None:  # a scenario's install of the binary
            await sim.real_kuberay.stop()
        for task in background:
            task.cancel()
        for fwd in forwards:
            await fwd.stop()
        await server.stop()
        sim.close()
        if tls_dir is not None:
            tls_dir.cleanup()
        if written is not None:
            written.unlink(missing_ok=True)
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _start_real_operator(sim: Any, opts: ServeOptions, kubeconfig: Path) -> Any:
    """``--kuberay-binary``: the forward proxy and the operator process; a `RealOperatorRun`
    (its line, with the pid and the log's path, printed on stderr)."""
    from .real_operator import RealOperatorError, RealOperatorRun

    assert opts.kuberay_binary is not None
    real = RealOperatorRun(sim, opts.kuberay_binary)  # its proxy on loopback, whatever --host
    try:
        await real.start(str(kubeconfig))
    except RealOperatorError as err:
        await real.stop()
        raise ServeError(str(err)) from None
    except BaseException:
        await real.stop()
        raise
    print(f"emu serve: {real.describe()}", file=sys.stderr, flush=True)
    return real


def _tell_real_operator(sim: Any) -> None:
    """With ``--scenario``, the scenario installs the binary (`emu.http.real_replicas`): print
    its replicas' pids and logs on stderr once every one of them has started."""
    told: list[bool] = []

    def on_event(ev: Any) -> None:
        real = sim.real_kuberay
        if told or ev.event != "real_operator_started" or real is None:
            return
        if all(r.pid is not None for r in real.replicas):
            told.append(True)
            print(f"emu serve: {real.describe()}", file=sys.stderr, flush=True)

    sim.trace.subscribe(on_event)


def kuberay_crds() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions ``helm install kuberay-operator`` applies, built from what
    the API server already serves the ray.io kinds with (their derived schemas,
    `emu.apiserver.rayschemas`, and KubeRay's printer columns): so ``kubectl get crd`` lists them
    and ``kubectl wait --for condition=established crd/rayclusters.ray.io``, a usual CI step
    after installing the operator, succeeds. Applying them serves the kinds exactly as before
    (`emu.apiserver.kinds.crd_kind_info` of the same schema)."""
    from ..apiserver.kinds import KindInfo
    from ..apiserver.rayschemas import RAY_SCHEMAS
    from .openapi import ray_schema
    from .tables import KUBERAY_COLUMNS

    plurals = {"RayCluster": "rayclusters", "RayJob": "rayjobs", "RayService": "rayservices",
               "RayCronJob": "raycronjobs"}
    out = []
    for kind in RAY_SCHEMAS:
        plural = plurals[kind]
        schema = ray_schema(KindInfo("ray.io", "v1", kind, plural, has_status=True))
        version: dict[str, Any] = {
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": schema},
            "subresources": {"status": {}}}
        columns = KUBERAY_COLUMNS.get(kind)
        if columns:
            version["additionalPrinterColumns"] = [
                {"name": name, "type": typ, "jsonPath": path, "priority": prio}
                for name, typ, path, prio in columns]
        names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                                 "singular": kind.lower()}
        if kind != "RayCronJob":
            names["categories"] = ["all"]
        out.append({"apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": f"{plural}.ray.io",
                                 "annotations": {"controller-gen.kubebuilder.io/version":
                                                 "v0.16.4"}},
                    "spec": {"group": "ray.io", "names": names, "scope": "Namespaced",
                             "versions": [version]}})
    return out


class ServeError(Exception):
    """Something the person running ``emu serve`` can fix (a bad manifest, a port in use)."""


def run_serve(opts: ServeOptions) -> int:
    """``emu serve``: run `serve_main` on a `PacedLoop` until Ctrl-C; 2 with a message on an
    error the user can fix."""
    loop = PacedLoop(speed=opts.speed, start=real_now_as_virtual())
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        try:
            return runner.run(serve_main(opts))
        except KeyboardInterrupt:
            return 0
        except ServeError as err:
            print(f"emu serve: {err}", file=sys.stderr)
            return 2
