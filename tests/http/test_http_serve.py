"""``emu serve`` and the aiohttp server without external tools: argument errors, the paced
loop's scaling, 50 clients with open watches on real sockets, dropped connections under faults,
``--expose`` to an emulated Service."""

from __future__ import annotations

import asyncio
import selectors

import aiohttp
import orjson
import pytest

from emu.cli import main
from emu.http.expose import ExposeSpec, parse_expose
from emu.http.serve import ServeOptions, kubeconfig_text, serve_main
from emu.kernel.paced import PacedLoop
from emu.kernel.paced import ScaledSelector as _ScaledSelector


def test_bad_arguments_exit_2_with_a_message(capsys):
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port must be 0..65535" in capsys.readouterr().err
    assert main(["serve", "-f", "/nonexistent/manifest.yaml"]) == 2
    assert "cannot read -f /nonexistent/manifest.yaml" in capsys.readouterr().err
    assert main(["serve", "--scenario", "no-such-scenario"]) == 2
    assert "no scenario named" in capsys.readouterr().err
    assert main(["serve", "--expose", "deploy/x:80"]) == 2
    assert "expected svc/NAME:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--speed", "0"])
    assert "--speed must be positive" in capsys.readouterr().err


def test_expose_specs():
    assert parse_expose("svc/web:80") == ExposeSpec("default", "web", 80, 0)
    assert parse_expose("svc/ray/head-svc:8265:18265") == ExposeSpec("ray", "head-svc", 8265,
                                                                     18265)
    with pytest.raises(ValueError):
        parse_expose("svc/web")


class _Recorder:
    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def select(self, timeout: float | None = None) -> list:
        self.timeouts.append(timeout)
        return []


def test_paced_selector_divides_virtual_waits_by_speed():
    rec = _Recorder()
    scaled = _ScaledSelector(rec, 10.0)  # type: ignore[arg-type]
    scaled.select(15.0)
    scaled.select(0)
    scaled.select(None)
    assert rec.timeouts == [1.5, 0, None]
    with pytest.raises(ValueError):
        PacedLoop(speed=0)
    loop = PacedLoop(speed=5.0, start=1000.0)
    try:
        assert loop.time() >= 1000.0 and isinstance(loop._selector._real, _ScaledSelector)
        assert isinstance(loop._selector._real._real, selectors.BaseSelector)
    finally:
        loop.close()


def test_kubeconfig_names_the_server_and_token():
    text = kubeconfig_text("https://127.0.0.1:1234", "tok", ca_pem=b"PEM")
    assert "server: https://127.0.0.1:1234" in text and "token: tok" in text
    assert "certificate-authority-data: UEVN" in text


def _run_paced(coro_fn, speed: float = 1.0):
    loop = PacedLoop(speed=speed)
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(coro_fn())


def test_fifty_clients_with_open_watches_and_clean_stop(tmp_path):
    async def body() -> list[str]:
        stop = asyncio.Event()
        lines: list[str] = []

        class Out:
            def write(self, text: str) -> None:
                lines.append(text)

            def flush(self) -> None:
                pass

        opts = ServeOptions(port=0, kubeconfig=str(tmp_path / "kubeconfig"), speed=1.0)
        ready = asyncio.Event()
        server = asyncio.get_running_loop().create_task(
            serve_main(opts, stop=stop, out=Out(), ready=ready))
        await asyncio.wait_for(ready.wait(), 60)
        url = lines[0].split("ready at ")[1].split()[0]
        seen: list[str] = []
        opened = asyncio.Event()
        count = 0

        async def watcher(session: aiohttp.ClientSession) -> None:
            nonlocal count
            # (the field selector leaves out the namespace's kube-root-ca.crt, which a watch
            # from resourceVersion 0 would replay first)
            path = (f"{url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0"
                    "&fieldSelector=metadata.name%3Dping")
            async with session.get(path) as resp:
                assert resp.status == 200
                count += 1
                if count == 50:
                    opened.set()
                async for line in resp.content:
                    event = orjson.loads(line)
                    seen.append(event["object"]["metadata"]["name"])
                    return

        async with aiohttp.ClientSession() as session:
            tasks = [asyncio.ensure_future(watcher(session)) for _ in range(50)]
            await asyncio.wait_for(opened.wait(), 30)
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ping"}}
            async with session.post(f"{url}/api/v1/namespaces/default/configmaps",
                                    json=body) as resp:
                assert resp.status == 201
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
        stop.set()
        assert await asyncio.wait_for(server, 30) == 0
        return seen

    assert _run_paced(body) == ["ping"] * 50


def test_faults_drop_real_connections():
    async def body() -> None:
        from emu.http.server import HttpServer
        from emu.simulation import Simulation

        sim = Simulation(seed=0)
        srv = HttpServer(sim)
        url = await srv.start()
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{url}/api/v1/namespaces") as resp:
                    assert resp.status == 200
                sim.faults.outage("apiserver")
                with pytest.raises(aiohttp.ClientError):
                    async with session.get(f"{url}/api/v1/namespaces") as resp:
                        await resp.read()
                sim.faults.restore("apiserver")
                async with session.get(f"{url}/api/v1/namespaces") as resp:
                    assert resp.status == 200
        finally:
            await srv.stop()
            sim.close()

    _run_paced(body)


def test_expose_forwards_to_an_emulated_service():
    async def body() -> None:
        from emu.http.expose import Expose
        from emu.simulation import Simulation

        sim = Simulation(seed=0)

        async def answer(payload, info):
            return {"status": 200, "headers": {"content-type": "application/json"},
                    "body": orjson.dumps({"path": payload["path"],
                                          "method": payload["method"]}).decode()}

        sim.network.register("web.default.svc.cluster.local:80", answer)
        fwd = Expose(sim, parse_expose("svc/web:80"))
        await fwd.start()
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(f"http://127.0.0.1:{fwd.port}/api/jobs/?x=1",
                                        json={}) as resp:
                    assert resp.status == 200
                    assert await resp.json() == {"path": "/api/jobs/?x=1", "method": "POST"}
                sim.network.unregister("web.default.svc.cluster.local:80")
                async with session.get(f"http://127.0.0.1:{fwd.port}/") as resp:
                    assert resp.status == 502
        finally:
            await fwd.stop()
            sim.close()

    _run_paced(body)


def test_user_errors_while_starting_exit_2_with_a_message(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n")
    assert main(["serve", "-f", str(bad), "--kubeconfig", str(tmp_path / "kc")]) == 2
    err = capsys.readouterr().err
    assert f"emu serve: -f {bad}:" in err and "Widget" in err
    assert not (tmp_path / "kc").exists()  # nothing was served
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--kubeconfig", str(tmp_path / "kc")]) == 2
    assert f"emu serve: cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_a_client_that_goes_away_closes_its_watch():
    async def body() -> None:
        from emu.http.server import HttpServer
        from emu.simulation import Simulation

        sim = Simulation(seed=0)
        srv = HttpServer(sim)
        url = await srv.start()
        try:
            async with aiohttp.ClientSession() as session:
                resp = await session.get(f"{url}/api/v1/namespaces/default/configmaps?watch=1")
                assert resp.status == 200
                assert sim.api.watches.count() == 1
                resp.close()  # the client hangs up on a quiet watch
            await asyncio.wait_for(srv.watch_ended.wait(), 30)
            assert sim.api.watches.count() == 0, "the watch outlived its client"
        finally:
            await srv.stop()
            sim.close()

    _run_paced(body)


def test_serve_runs_a_scenario_in_the_served_world(tmp_path, capsys):
    async def body() -> None:
        stop, ready, done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        opts = ServeOptions(scenario="apiserver-churn", speed=5000.0,
                            kubeconfig=str(tmp_path / "kubeconfig"))
        server = asyncio.get_running_loop().create_task(
            serve_main(opts, stop=stop, ready=ready, scenario_done=done))
        await asyncio.wait_for(ready.wait(), 60)
        await asyncio.wait_for(done.wait(), 120)
        stop.set()
        assert await asyncio.wait_for(server, 30) == 0

    _run_paced(body)
    err = capsys.readouterr().err
    assert "emu serve: scenario apiserver-churn finished (ok)" in err


def test_a_large_body_arriving_in_pieces_is_read_whole():
    """A body the socket delivers in several reads (a CRD manifest is hundreds of KiB) is read
    to its end, and one over the limit is a 413 Status."""
    async def body() -> None:
        from emu.http.server import HttpServer
        from emu.simulation import Simulation

        sim = Simulation(seed=0)
        srv = HttpServer(sim, max_body=2_000_000)
        url = await srv.start()
        payload = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                   "data": {f"k{i}": "v" * 1000 for i in range(900)}}

        async def pieces(data: bytes):
            for start in range(0, len(data), 50_000):
                yield data[start:start + 50_000]
                await asyncio.sleep(0)  # the server reads what has arrived meanwhile

        try:
            async with aiohttp.ClientSession() as session:
                data = orjson.dumps(payload)
                async with session.post(f"{url}/api/v1/namespaces/default/configmaps",
                                        data=pieces(data),
                                        headers={"content-type": "application/json"}) as resp:
                    assert resp.status == 201, await resp.text()
                    assert resp.headers.getall("Content-Type") == ["application/json"]
                    assert int(resp.headers["Content-Length"]) == len(await resp.read())
                async with session.get(f"{url}/healthz") as resp:
                    assert resp.headers.getall("Content-Type") == ["text/plain"]
                    assert await resp.read() == b"ok"
                assert len(sim.api.get("ConfigMap", "big", "default")["data"]) == 900
                huge = b'{"x": "' + b"y" * 2_100_000 + b'"}'
                async with session.post(f"{url}/api/v1/namespaces/default/configmaps",
                                        data=pieces(huge),
                                        headers={"content-type": "application/json"}) as resp:
                    assert resp.status == 413
                    assert (await resp.json())["reason"] == "RequestEntityTooLarge"
        finally:
            await srv.stop()
            sim.close()

    _run_paced(body)


def test_bare_refuses_flags_that_need_the_cluster(capsys):
    assert main(["serve", "--bare", "--kuberay"]) == 2
    assert capsys.readouterr().err == (
        "emu serve: --bare serves the API server alone; --kuberay needs the cluster's built-ins "
        "(drop --bare)\n")
    assert main(["serve", "--bare", "--scenario", "apiserver-churn", "--expose", "svc/a:80"]) == 2
    assert "; --scenario, --expose needs" in capsys.readouterr().err
    assert main(["serve", "--bare", "--standard-cluster"]) == 2
    assert capsys.readouterr().err == (
        "emu serve: --bare serves the API server alone; --standard-cluster needs the cluster's "
        "built-ins (drop --bare)\n")
    assert main(["serve", "--bare", "--no-standard-cluster"]) == 2
    assert "; --no-standard-cluster needs the cluster's built-ins" in capsys.readouterr().err


def test_f_with_a_directory_without_manifests_exits_2(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a manifest")
    assert main(["serve", "-f", str(tmp_path)]) == 2
    assert (f"cannot read -f {tmp_path}: the directory holds no .yaml, .yml or .json file"
            in capsys.readouterr().err)


def test_bare_serves_the_api_server_alone_with_a_directory_of_manifests(tmp_path):
    """``--bare`` is envtest's control plane: CRDs applied from ``-f DIR`` are served, RBAC is
    enforced, and nothing runs Pods (no Nodes, so a Pod stays unscheduled)."""
    crds = tmp_path / "crds"
    crds.mkdir()
    (crds / "a-crd.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: widgets.example.com}\n"
        "spec:\n  group: example.com\n  scope: Namespaced\n"
        "  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}\n"
        "  versions:\n  - name: v1\n    served: true\n    storage: true\n"
        "    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n")
    (crds / "b-widget.json").write_text(orjson.dumps(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}).decode())
    (crds / "README.md").write_text("ignored: not a manifest file")

    async def body() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        lines: list[str] = []

        class Out:
            def write(self, text: str) -> None:
                lines.append(text)

            def flush(self) -> None:
                pass

        opts = ServeOptions(bare=True, files=(str(crds),), kubeconfig=str(tmp_path / "kc"))
        server = asyncio.get_running_loop().create_task(
            serve_main(opts, stop=stop, out=Out(), ready=ready))
        await asyncio.wait_for(ready.wait(), 60)
        url = lines[0].split("ready at ")[1].split()[0]
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{url}/readyz") as resp:
                    assert resp.status == 200
                async with session.get(
                        f"{url}/apis/example.com/v1/namespaces/default/widgets/w") as resp:
                    assert resp.status == 200
                async with session.get(f"{url}/api/v1/nodes") as resp:
                    assert (await resp.json())["items"] == []
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
                async with session.post(f"{url}/api/v1/namespaces/default/pods",
                                        json=pod) as resp:
                    assert resp.status == 201
                review = {"apiVersion": "authorization.k8s.io/v1",
                          "kind": "SelfSubjectAccessReview",
                          "spec": {"resourceAttributes": {"verb": "delete",
                                                          "resource": "nodes"}}}
                async with session.post(
                        f"{url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                        json=review) as resp:
                    status = (await resp.json())["status"]
                # Allowed as a member of system:masters, not because RBAC is off.
                assert status["allowed"] is True
                assert "not enforced" not in status.get("reason", "")
        finally:
            stop.set()
            assert await asyncio.wait_for(server, 30) == 0

    _run_paced(body)
