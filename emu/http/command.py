"""The ``emu serve`` subcommand's arguments (kept here so emu/cli.py only wires it in)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--speed wants a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--speed must be positive, got {text!r}")
    return value


def add_serve_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve an emulated cluster over the Kubernetes HTTP API "
                                     "(for kubectl and any client)")
    p.add_argument("--kuberay", action="store_true", help="run the KubeRay operator too")
    p.add_argument("--bare", action="store_true",
                   help="the API server alone (CRDs, RBAC, admission), as envtest's control "
                        "plane is: no kubelets, scheduler, controllers or operator")
    p.add_argument("-f", "--filename", action="append", default=[], metavar="FILE",
                   help="apply this manifest file, or every .yaml/.yml/.json file of this "
                        "directory, before serving (repeatable; - is stdin)")
    p.add_argument("--standard-cluster", action=argparse.BooleanOptionalAction, default=None,
                   help="a world like a fresh kind cluster (the default): a tainted "
                        "control-plane Node with the control plane's Pods, CoreDNS, kube-proxy, "
                        "default/kubernetes, a default ServiceAccount and kube-root-ca.crt per "
                        "namespace; --no-standard-cluster serves a minimal world (worker Nodes "
                        "and the built-in controllers only)")
    p.add_argument("--scenario", metavar="NAME", help="run a named scenario in the served world")
    p.add_argument("--speed", type=_speed, default=1.0,
                   help="virtual seconds per wall-clock second (default 1)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="where to write the kubeconfig (default: a file in the temp dir)")
    p.add_argument("--token", help="require this bearer token (serves HTTPS)")
    p.add_argument("--tls", action="store_true",
                   help="serve HTTPS with x509 client-certificate login, as a kind cluster: "
                        "the kubeconfig carries kind's admin certificate (kubernetes-admin in "
                        "system:masters), and certificates the world's CSRs got log in too")
    p.add_argument("--seed", type=int, default=0, help="the world's seed (default 0)")
    p.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                   help="largest accepted request body (default 3 MiB; larger gets 413)")
    p.add_argument("--history-window", type=int, default=None, metavar="CHANGES",
                   help="how many changes watches and continue tokens can resume from "
                        "(default 10000); older ones get 410 Gone, so a small window tests a "
                        "client's relist-and-rewatch recovery")
    p.add_argument("--expose", action="append", default=[], metavar="svc/NAME:PORT[:LOCAL]",
                   help="forward a local port to an emulated Service port, like kubectl "
                        "port-forward (repeatable; NAME may be NAMESPACE/NAME)")
    p.add_argument("--kuberay-binary", metavar="PATH",
                   help="run this real KubeRay operator binary (scripts/build-kuberay.sh builds "
                        "one) as the world's operator, with the chart's CRDs, RBAC and flags; "
                        "needs --speed 1 (docs/real-operator.md)")
    p.set_defaults(fn=cmd_serve)


def real_operator_error(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--kuberay-binary`` and the flags beside it (None: nothing)."""
    import os

    binary = getattr(args, "kuberay_binary", None)
    if not binary:
        return None
    if args.kuberay:
        return "--kuberay and --kuberay-binary exclude each other (the ported operator or the " \
               "real one)"
    if args.speed != 1.0:
        return (f"--kuberay-binary needs --speed 1 (got {args.speed:g}): the real operator's "
                "clock is the wall clock")
    if not os.path.isfile(binary):
        return f"--kuberay-binary {binary}: no such file"
    if not os.access(binary, os.X_OK):
        return f"--kuberay-binary {binary}: not executable"
    return None
def manifest_files(path: str) -> list[str]:
    """What ``-f PATH`` applies: the file itself, or a directory's ``.yaml``, ``.yml`` and
    ``.json`` files in name order (as ``kubectl apply -f DIR``; not recursive). Raises OSError
    when a file cannot be read, ValueError for a directory without manifests."""
    from pathlib import Path

    p = Path(path)
    if not p.is_dir():
        open(p).close()
        return [path]
    found = sorted(str(f) for f in p.iterdir()
                   if f.suffix in (".yaml", ".yml", ".json") and f.is_file())
    if not found:
        raise ValueError("the directory holds no .yaml, .yml or .json file")
    for f in found:
        open(f).close()
    return found


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import ServeOptions, run_serve
    from .wire import DEFAULT_MAX_BODY

    if not 0 <= args.port < 65536:
        print(f"emu serve: --port must be 0..65535, got {args.port}", file=sys.stderr)
        return 2
    if args.bare and (args.kuberay or args.scenario or args.expose or args.kuberay_binary
                      or args.standard_cluster is not None):
        given = [flag for flag, on in (("--kuberay", args.kuberay),
                                       ("--kuberay-binary", args.kuberay_binary),
                                       ("--standard-cluster" if args.standard_cluster
                                        else "--no-standard-cluster",
                                        args.standard_cluster is not None),
                                       ("--scenario", args.scenario),
                                       ("--expose", args.expose)) if on]
        print(f"emu serve: --bare serves the API server alone; {', '.join(given)} needs the "
              f"cluster's built-ins (drop --bare)", file=sys.stderr)
        return 2
    for f in args.filename:
        if f != "-":
            try:
                manifest_files(f)
            except (OSError, ValueError) as exc:
                print(f"emu serve: cannot read -f {f}: {getattr(exc, 'strerror', None) or exc}",
                      file=sys.stderr)
                return 2
    if args.history_window is not None and args.history_window < 1:
        print(f"emu serve: --history-window must be at least 1, got {args.history_window}",
              file=sys.stderr)
        return 2
    error = real_operator_error(args)
    if error is not None:
        print(f"emu serve: {error}", file=sys.stderr)
        return 2
    if args.scenario:
        from .. import scenarios

        try:
            scenarios.get(args.scenario)
        except KeyError as err:
            print(f"emu serve: {err.args[0]}", file=sys.stderr)
            return 2
    if args.expose:
        from .expose import parse_expose

        for spec in args.expose:
            try:
                parse_expose(spec)
            except ValueError as err:
                print(f"emu serve: {err}", file=sys.stderr)
                return 2
    opts = ServeOptions(kuberay=args.kuberay, bare=args.bare, files=tuple(args.filename),
                        scenario=args.scenario,
                        speed=args.speed, host=args.host, port=args.port,
                        kubeconfig=args.kubeconfig, token=args.token, tls=args.tls, seed=args.seed,
                        max_body=args.max_body or DEFAULT_MAX_BODY, expose=tuple(args.expose),
                        history_window=args.history_window,
                        kuberay_binary=args.kuberay_binary,
                        standard_cluster=args.standard_cluster)
    return run_serve(opts)
