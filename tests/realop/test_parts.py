"""The parts of ``emu serve --kuberay-binary`` that need no Go: the forward proxy into the world,
the operator's arguments and environment, its process lifecycle (with a stand-in script), the
world's preparation and the command line's checks."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from emu.cli import main
from emu.http.forward_proxy import ForwardProxy, resolve_address
from emu.http.real_operator import (
    HTTP_IDENTITIES,
    RealOperator,
    RealOperatorError,
    binary_version,
    chart_feature_gates,
    operator_args,
    operator_env,
    prepare_world,
    release_rules,
)
from emu.kernel.paced import PacedLoop


def _run_paced(coro_fn):
    loop = PacedLoop(speed=1.0)
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(coro_fn())


def _echo_server(name: str):
    async def answer(payload, info):
        return {"status": 201, "headers": {"content-type": "application/json",
                                           "x-served-by": name},
                "body": orjson.dumps({"path": payload["path"], "method": payload["method"],
                                      "caller": info.src, "body": payload["body"],
                                      "proxy": payload["headers"].get("proxy-connection")}
                                     ).decode()}

    return answer


# -- the forward proxy ------------------------------------------------------------------------


def test_forward_proxy_sends_absolute_form_requests_into_the_world():
    async def body() -> None:
        from emu.simulation import Simulation

        sim = Simulation(seed=0)
        sim.network.register("head-svc.default.svc.cluster.local:8265", _echo_server("svc"))
        sim.network.register("10.1.0.7:8000", _echo_server("pod"))
        proxy = ForwardProxy(sim, identity="kuberay-operator")
        url = await proxy.start()
        try:
            async with httpx.AsyncClient(proxy=url, timeout=10) as client:
                resp = await client.post(
                    "http://head-svc.default.svc.cluster.local:8265/api/jobs/?x=1",
                    json={"entrypoint": "python"})
                assert resp.status_code == 201
                assert resp.headers["x-served-by"] == "svc"
                got = resp.json()
                assert got["path"] == "/api/jobs/?x=1" and got["method"] == "POST"
                assert got["caller"] == "kuberay-operator"  # the identity faults apply to
                assert orjson.loads(got["body"]) == {"entrypoint": "python"}
                assert got["proxy"] is None  # hop-by-hop headers stay with the proxy
                resp = await client.get("http://10.1.0.7:8000/-/healthz")  # a Pod IP
                assert resp.headers["x-served-by"] == "pod"
                # nothing listens there: the connection ends without an answer, as a failed
                # dial would, not with a page the client would take for the server's
                with pytest.raises(httpx.TransportError):
                    await client.get("http://nothing.default.svc.cluster.local:8265/")
                sim.faults.outage("head-svc.default.svc.cluster.local:8265")
                with pytest.raises(httpx.TransportError):
                    await client.get("http://head-svc.default.svc.cluster.local:8265/")
            assert (proxy.forwarded, proxy.dropped) == (2, 2)
        finally:
            await proxy.stop()
            sim.close()

    _run_paced(body)


def test_forward_proxy_refuses_connect_and_unparsable_requests_quietly(caplog):
    async def body() -> None:
        from emu.simulation import Simulation

        sim = Simulation(seed=0)
        proxy = ForwardProxy(sim, identity="kuberay-operator")
        await proxy.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"CONNECT head-svc.default.svc.cluster.local:443 HTTP/1.1\r\n"
                         b"Host: head-svc.default.svc.cluster.local:443\r\n\r\n")
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), 10)
            assert status.split()[1] == b"405"
            writer.close()
            # a head Pod without an IP yet: KubeRay asks for http://:8000/-/healthz
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"GET http://:8000/-/healthz HTTP/1.1\r\nHost: :8000\r\n\r\n")
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), 10)
            assert status.split()[1] == b"400"
            writer.close()
        finally:
            await proxy.stop()
            sim.close()

    _run_paced(body)
    assert not [r for r in caplog.records if r.name == "emu.http.forward_proxy"]


def test_resolve_address_uses_a_headless_services_pod_ips():
    import emu

    async def body(sim: emu.Simulation) -> None:
        sim.network.register("head-svc.default.svc.cluster.local:8265", _echo_server("svc"))
        sim.network.hostnames["head-svc.default.svc.cluster.local"] = lambda: ["10.1.0.9"]
        assert resolve_address(sim.network, "head-svc.default.svc.cluster.local", 8265) == \
            "head-svc.default.svc.cluster.local:8265"  # a declared port: through kube-proxy
        assert resolve_address(sim.network, "head-svc.default.svc.cluster.local", 8000) == \
            "10.1.0.9:8000"  # another port: the A record
        assert resolve_address(sim.network, "gone.default.svc", 80) == "gone.default.svc:80"

    emu.run(body, seed=0)


# -- arguments, environment, version ----------------------------------------------------------


def test_operator_args_are_the_charts_plus_what_a_process_outside_a_pod_needs():
    args = operator_args("v1.5.0", namespace="default", metrics_port=4001, probe_port=4002)
    assert "--enable-leader-election=true" in args
    assert "--enable-metrics=true" in args
    assert "--reconcile-concurrency=1" in args
    assert "--log-stdout-encoder" in args
    assert args[-3:] == ["--leader-election-namespace=default",
                         "--metrics-addr=127.0.0.1:4001",
                         "--health-probe-bind-address=127.0.0.1:4002"]
    gates = next(a for a in args if a.startswith("--feature-gates="))
    assert gates == ("--feature-gates=RayClusterStatusConditions=true,"
                     "RayJobDeletionPolicy=false,RayMultiHostIndexing=false,"
                     "RayServiceIncrementalUpgrade=false")
    assert "--qps=100" in args and "--burst=200" in args
    # a gate or flag a v1.4 binary does not know would make it exit at once
    assert [g["name"] for g in chart_feature_gates("v1.4.0")] == [
        "RayClusterStatusConditions", "RayJobDeletionPolicy"]
    old = operator_args("v1.4.2", namespace="default", metrics_port=1, probe_port=2)
    assert not [a for a in old if a.startswith(("--qps", "--burst"))]
    assert "--feature-gates=RayClusterStatusConditions=true,RayJobDeletionPolicy=false" in old
    # an unknown version (a commit's build): the ported chart's list
    assert "RayCronJob" in [g["name"] for g in chart_feature_gates(None)]
    assert "RayCronJob" in [g["name"] for g in chart_feature_gates("v1.9.0")]


def test_operator_env_keeps_the_callers_proxies_and_kubeconfig_out():
    env = operator_env(kubeconfig="/tmp/kc", proxy_url="http://127.0.0.1:9",
                       base={"PATH": "/bin", "HOME": "/root", "HTTPS_PROXY": "http://corp:3128",
                             "KUBECONFIG": "/home/me/.kube/config", "NO_PROXY": "*"})
    assert env == {"PATH": "/bin", "HOME": "/root", "KUBECONFIG": "/tmp/kc",
                   "HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
                   "NO_PROXY": "", "no_proxy": ""}


def test_binary_version_reads_the_go_build_info(tmp_path):
    built = tmp_path / "ray-operator"
    built.write_bytes(b"\x7fELF" + b"\0" * 1000 + b"\xff Go buildinf:...path\t"
                      b"github.com/ray-project/kuberay/ray-operator\nmod\t"
                      b"github.com/ray-project/kuberay/ray-operator\tv1.5.0\th1:abc=\n"
                      b"dep\tk8s.io/api\tv0.34.1\n")
    assert binary_version(built) == "v1.5.0"
    other = tmp_path / "other"
    other.write_bytes(b"\x7fELF\nmod\tgithub.com/example/thing\tv2.0.0\th1:x\n")
    assert binary_version(other) is None
    assert binary_version(tmp_path / "missing") is None
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert binary_version(empty) is None


# -- the process ------------------------------------------------------------------------------


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fake-operator"
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_an_operator_that_exits_at_start_is_reported_with_its_log(tmp_path):
    script = _script(tmp_path, 'echo "unrecognized feature gate: $1" >&2\nexit 1\n')

    async def body() -> None:
        op = RealOperator(script, kubeconfig="/tmp/kc", proxy_url="http://127.0.0.1:9",
                          log_path=tmp_path / "op.log")
        await op.start()
        with pytest.raises(RealOperatorError) as err:
            await op.wait_started(timeout=30)
        assert "exited with status 1" in str(err.value)
        assert "unrecognized feature gate" in str(err.value)
        assert await op.stop() == 1

    _run_paced(body)


def _stubborn_operator(tmp_path: Path) -> Path:
    """A stand-in for the binary: records its arguments, ignores SIGTERM, opens the probe port
    it is given, then waits to be killed."""
    path = tmp_path / "stubborn-operator"
    path.write_text(f"""#!{sys.executable}
import signal, socket, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open({str(tmp_path / "args")!r}, "w").write(" ".join(sys.argv[1:]))
probe = next(a for a in sys.argv if a.startswith("--health-probe-bind-address="))
host, port = probe.split("=", 1)[1].rsplit(":", 1)
s = socket.socket()
s.bind((host, int(port)))
s.listen()
signal.pause()
""")
    path.chmod(0o755)
    return path


def test_stop_ends_the_process_by_pid_with_sigkill_after_the_grace(tmp_path):
    script = _stubborn_operator(tmp_path)

    async def body() -> None:
        op = RealOperator(script, kubeconfig="/tmp/kc", proxy_url="http://127.0.0.1:9",
                          log_path=tmp_path / "op.log")
        await op.start()
        try:
            await op.wait_started(timeout=60)  # its probe port answers
            pid = op.pid
            assert pid is not None and op.returncode is None
            code = await op.stop(grace=0.3)
            assert code == -signal.SIGKILL  # SIGTERM was ignored
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            args = (tmp_path / "args").read_text().split()
            assert args == op.args
            assert f"--health-probe-bind-address=127.0.0.1:{op.probe_port}" in args
        finally:
            op.kill_now()  # whatever failed above, nothing is left running

    _run_paced(body)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_operator_dies_with_a_killed_serve(tmp_path):
    import select
    import subprocess

    script = _stubborn_operator(tmp_path)
    parent = subprocess.Popen(
        [sys.executable, "-c", f"""
import asyncio
from emu.http.real_operator import RealOperator
async def main():
    op = RealOperator({str(script)!r}, kubeconfig="k", proxy_url="http://127.0.0.1:9",
                      log_path={str(tmp_path / "op.log")!r})
    await op.start()
    await op.wait_started(timeout=60)
    print(op.pid, flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        watch = os.pidfd_open(pid)  # readable once the process has ended
        try:
            parent.kill()  # no cleanup runs in it: only the parent-death signal ends the child
            parent.wait(timeout=30)
            ended, _, _ = select.select([watch], [], [], 30)
            assert ended, "the operator outlived its killed parent"
        finally:
            os.close(watch)
    finally:
        parent.kill()
        parent.wait(timeout=30)


def test_a_missing_or_unexecutable_binary_is_refused(tmp_path):
    async def body() -> None:
        missing = RealOperator(tmp_path / "nope", kubeconfig="k", proxy_url="p")
        with pytest.raises(RealOperatorError, match="no such file"):
            await missing.start()
        plain = tmp_path / "plain"
        plain.write_text("")
        with pytest.raises(RealOperatorError, match="not executable"):
            await RealOperator(plain, kubeconfig="k", proxy_url="p").start()

    _run_paced(body)


# -- the world and the command line -----------------------------------------------------------


def test_prepare_world_installs_crds_and_rbac_but_no_operator():
    import emu

    async def body(sim: emu.Simulation) -> None:
        applied = await prepare_world(sim)
        kinds = [m["kind"] for m in applied]
        assert kinds.count("CustomResourceDefinition") == 4
        assert "ServiceAccount" in kinds and "ClusterRole" in kinds
        assert "Deployment" not in kinds
        assert sim.api.list("Deployment", "default")["items"] == []
        assert sim.rbac.enabled
        for identity in HTTP_IDENTITIES:
            user = sim.rbac.identify(identity)
            assert user.name == "system:serviceaccount:default:kuberay-operator"
        # the chart's rules are what the operator may do
        user = sim.rbac.identify("kuberay-operator")
        assert sim.rbac.can(user, "create", "rayclusters", group="ray.io", namespace="default")
        assert not sim.rbac.can(user, "create", "deployments", group="apps",
                                namespace="default")

    emu.run(body, seed=0, cluster=True)


def test_a_releases_own_rbac_rules_come_from_its_source_in_the_module_cache(tmp_path,
                                                                           monkeypatch):
    import emu

    source = tmp_path / "github.com/ray-project/kuberay/ray-operator@v1.5.0/config/rbac"
    source.mkdir(parents=True)
    (source / "role.yaml").write_text(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata: {name: kuberay-operator}\nrules:\n"
        "- apiGroups: ['']\n  resources: [endpoints]\n  verbs: [get, list, watch]\n")
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    assert release_rules("v1.5.0") == [
        {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get", "list", "watch"]}]
    assert release_rules("v1.4.0") is None  # not in this cache: the ported chart's rules

    async def body(sim: emu.Simulation) -> None:
        await prepare_world(sim, version="v1.5.0")
        user = sim.rbac.identify("manager")
        assert sim.rbac.can(user, "list", "endpoints", namespace="default")
        assert not sim.rbac.can(user, "create", "rayclusters", group="ray.io",
                                namespace="default")  # only what that role.yaml grants

    emu.run(body, seed=0, cluster=True)


def test_command_line_checks(tmp_path, capsys):
    binary = tmp_path / "op"
    binary.write_text("#!/bin/sh\n")
    assert main(["serve", "--kuberay-binary", str(tmp_path / "none")]) == 2
    assert "--kuberay-binary" in capsys.readouterr().err
    assert main(["serve", "--kuberay-binary", str(binary)]) == 2
    assert "not executable" in capsys.readouterr().err
    binary.chmod(0o755)
    assert main(["serve", "--kuberay", "--kuberay-binary", str(binary)]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main(["serve", "--speed", "10", "--kuberay-binary", str(binary)]) == 2
    assert "needs --speed 1" in capsys.readouterr().err


def test_serve_fails_with_the_operators_log_when_it_exits_at_start(tmp_path, capsys):
    script = _script(tmp_path, 'echo "unable to start manager: boom"\nexit 3\n')
    kubeconfig = tmp_path / "kc"
    assert main(["serve", "--kuberay-binary", str(script), "--kubeconfig",
                 str(kubeconfig)]) == 2
    err = capsys.readouterr().err
    assert "exited with status 3" in err and "unable to start manager: boom" in err


def test_serve_runs_a_scenario_with_the_binary_as_its_operator(tmp_path, capsys):
    """``--scenario`` with ``--kuberay-binary``: the scenario's install_kuberay starts the binary
    (as the scenario's replicas), the ported operator never runs, and stopping emu serve stops
    the binary by its pid."""
    from emu.http.serve import ServeOptions, serve_main

    script = _stubborn_operator(tmp_path)
    opts = ServeOptions(scenario="worker-loss", kuberay_binary=str(script),
                        kubeconfig=str(tmp_path / "kc"))

    async def body() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        served = asyncio.ensure_future(serve_main(opts, stop=stop, ready=ready))
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 120
            told = ""
            while "emu serve: KubeRay operator" not in told:
                assert not served.done(), served.result()
                assert loop.time() < deadline, f"the binary was not started: {told}"
                await asyncio.sleep(0.1)
                told += capsys.readouterr().err
            assert ready.is_set()
            # the scenario's replica (emu.http.real_replicas), not one started beside it
            assert "kuberay-operator-0 pid " in told, told
            pid = int(told.split("kuberay-operator-0 pid ", 1)[1].split()[0])
            os.kill(pid, 0)  # running
            while not (tmp_path / "args").exists():  # written by the binary as it starts
                assert loop.time() < deadline, "the binary wrote no arguments"
                await asyncio.sleep(0.1)
            args = (tmp_path / "args").read_text().split()
            assert "--enable-leader-election=true" in args
        finally:
            stop.set()
            assert await served == 0
        # killed by pid: gone, or a zombie its parent has not reaped yet
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        assert state in ("gone", "Z"), state

    _run_paced(body)
