"""Container probes (`emu.kube.probes`): startup, liveness and readiness, as the kubelet runs
them, against the programs over the emulated network."""

from __future__ import annotations

import asyncio
from typing import Any

from kube_helpers import condition, is_true, pod

from emu.kernel.programs import ContainerContext
from emu.kube import cluster as kc


def events_for(sim, name: str, reason: str) -> list[dict]:
    items = sim.api.list("Event", "default")["items"]
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


def healthz(healthy: dict[str, Any]):
    """A server on 8080 whose ``/healthz`` answers ``healthy["status"]`` (and ``success`` in its
    body when 200); it never calls ``set_ready``."""

    async def program(ctx: ContainerContext) -> int:
        async def handle(payload: Any, info: Any) -> dict[str, Any]:
            status = healthy["status"] if payload.get("path") == "/healthz" else 404
            return {"status": status, "headers": {}, "body": "success" if status == 200 else ""}

        ctx.listen(8080, handle)
        healthy.setdefault("starts", []).append(asyncio.get_running_loop().time())
        await asyncio.Event().wait()
        return 0

    return program


def restarts(p: dict) -> int:
    statuses = (p.get("status") or {}).get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount") or 0)


def http_probe(**timing: Any) -> dict[str, Any]:
    return {"httpGet": {"path": "/healthz", "port": 8080}, **timing}


async def test_readiness_follows_an_http_probe_with_its_delay_period_and_thresholds(sim):
    state = {"status": 503}
    sim.programs.register("example/app", healthz(state))
    cluster = kc.install(sim, image_pull_delay=0.0, container_start_delay=1.0)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["readinessProbe"] = http_probe(
        initialDelaySeconds=10, periodSeconds=5, failureThreshold=2)
    t0 = sim.now
    await sim.apply(manifest)
    await sim.sleep(20)
    p = await sim.wait_for("Pod", "p")
    assert not is_true("Ready")(p)
    [unhealthy] = events_for(sim, "p", "Unhealthy")
    assert unhealthy["type"] == "Warning"
    assert unhealthy["message"] == "Readiness probe failed: HTTP probe failed with statuscode: 503"
    assert unhealthy["count"] >= 2
    state["status"] = 200
    await sim.wait_for("Pod", "p", is_true("Ready"))
    # started at t0 + 1; probes at +10, +15, +20 after the start: the first 200 is at +20
    assert round(sim.now - t0, 6) == 21.0
    state["status"] = 500
    await sim.sleep(7)
    assert is_true("Ready")(await sim.wait_for("Pod", "p"))  # one failure is not enough
    await sim.wait_for("Pod", "p", lambda p: not is_true("Ready")(p))
    assert round(sim.now - t0, 6) == 31.0


async def test_a_failing_liveness_probe_restarts_the_container(sim):
    state = {"status": 200}
    sim.programs.register("example/app", healthz(state))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["livenessProbe"] = http_probe(periodSeconds=5)
    await sim.apply(manifest)
    await sim.sleep(20)
    assert len(state["starts"]) == 1
    state["status"] = 500
    p = await sim.wait_for("Pod", "p", lambda p: restarts(p) == 1, timeout=60)
    last = p["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["exitCode"] == 137
    [killing] = events_for(sim, "p", "Killing")
    assert killing["type"] == "Normal"
    assert killing["message"] == "Container app failed liveness probe, will be restarted"
    [unhealthy] = events_for(sim, "p", "Unhealthy")
    assert unhealthy["message"] == "Liveness probe failed: HTTP probe failed with statuscode: 500"
    assert unhealthy["count"] == 3  # the failureThreshold
    # still failing: killed again three probes after its restart, then back-off (10 s) first
    await sim.wait_for("Pod", "p", lambda p: restarts(p) == 2, timeout=300)
    await sim.sleep(3)
    first, second, third = state["starts"]
    assert second - first > 20 and third - second > 20


async def test_a_startup_probe_holds_liveness_and_readiness_until_it_succeeds(sim):
    state = {"status": 503}
    sim.programs.register("example/app", healthz(state))
    cluster = kc.install(sim, image_pull_delay=0.0, container_start_delay=1.0)
    await cluster.wait_ready()
    manifest = pod("p")
    c = manifest["spec"]["containers"][0]
    c["startupProbe"] = http_probe(periodSeconds=2, failureThreshold=30)
    c["livenessProbe"] = http_probe(periodSeconds=1, failureThreshold=1)
    c["readinessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    await sim.apply(manifest)
    await sim.sleep(30)
    p = await sim.wait_for("Pod", "p")
    status = p["status"]["containerStatuses"][0]
    assert (status["started"], status["ready"], status["restartCount"]) == (False, False, 0)
    assert not events_for(sim, "p", "Killing")  # liveness did not run
    [unhealthy] = events_for(sim, "p", "Unhealthy")
    assert unhealthy["message"].startswith("Startup probe failed: ")
    state["status"] = 200
    p = await sim.wait_for("Pod", "p", is_true("Ready"))
    assert p["status"]["containerStatuses"][0]["started"] is True


async def test_a_startup_probe_that_never_succeeds_kills_the_container(sim):
    state = {"status": 503}
    sim.programs.register("example/app", healthz(state))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["startupProbe"] = http_probe(periodSeconds=2,
                                                                   failureThreshold=3)
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", lambda p: restarts(p) >= 1, timeout=60)
    [killing] = events_for(sim, "p", "Killing")
    assert killing["message"] == "Container app failed startup probe, will be restarted"


async def test_kuberays_wget_exec_probe_asks_the_container_itself(sim):
    state = {"status": 200}

    async def agent(ctx: ContainerContext) -> int:
        async def handle(payload: Any, info: Any) -> dict[str, Any]:
            ok = payload.get("path") == "/api/local_raylet_healthz" and state["status"] == 200
            return {"status": state["status"], "headers": {}, "body": "success" if ok else ""}

        ctx.listen(52365, handle)
        await asyncio.Event().wait()
        return 0

    sim.programs.register("example/app", agent)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": [
        "bash", "-c", "wget --tries 1 -T 2 -q -O- "
                      "http://localhost:52365/api/local_raylet_healthz | grep success"]},
        "periodSeconds": 5, "failureThreshold": 1}
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", is_true("Ready"))
    state["status"] = 503
    await sim.wait_for("Pod", "p", lambda p: not is_true("Ready")(p))
    [unhealthy] = events_for(sim, "p", "Unhealthy")
    assert unhealthy["message"] == "Readiness probe failed: "  # wget -q | grep print nothing


async def test_an_exec_probe_the_emulator_cannot_read_succeeds(sim):
    async def never_ready(ctx: ContainerContext) -> int:
        await asyncio.Event().wait()
        return 0

    sim.programs.register("example/app", never_ready)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["/bin/check-my-app"]}, "periodSeconds": 5}
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", is_true("Ready"), timeout=30)


async def test_a_tcp_probe_of_a_closed_port_is_refused(sim):
    sim.programs.register("example/app", healthz({"status": 200}))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["readinessProbe"] = {
        "tcpSocket": {"port": 9999}, "periodSeconds": 5, "failureThreshold": 1}
    await sim.apply(manifest)
    await sim.sleep(20)
    p = await sim.wait_for("Pod", "p")
    ready = condition(p, "Ready")
    assert ready is not None and ready["status"] == "False"
    [unhealthy] = events_for(sim, "p", "Unhealthy")
    ip = p["status"]["podIP"]
    assert unhealthy["message"] == (f"Readiness probe failed: dial tcp {ip}:9999: connect: "
                                    "connection refused")


async def test_with_probes_off_readiness_is_the_programs_and_nothing_is_killed(sim):
    state = {"status": 500}
    sim.programs.register("example/app", healthz(state))
    cluster = kc.install(sim, probes=False)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["livenessProbe"] = http_probe(periodSeconds=1)
    await sim.apply(manifest)
    await sim.sleep(60)
    p = await sim.wait_for("Pod", "p")
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    assert not events_for(sim, "p", "Unhealthy")


RAY_CLUSTER = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "default"},
    "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}},
}


async def test_kuberays_readiness_probe_turns_a_head_unready_while_its_gcs_is_unreachable(sim):
    """KubeRay's head probes ask the dashboard for ``/api/gcs_healthz``: while the GCS cannot be
    reached the head turns unready after 10 failures 5 s apart (before, the program's own
    readiness kept it Ready); the head's raylet gives up on the GCS after Ray's 60 s and ends the
    container, which restarts."""
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=120)
    await sim.apply(RAY_CLUSTER)
    await sim.wait_for("RayCluster", "rc",
                       lambda c: (c.get("status") or {}).get("state") == "ready", timeout=300)
    [head] = sim.api.list("Pod", "default", label_selector="ray.io/node-type=head")["items"]
    name, ip = head["metadata"]["name"], head["status"]["podIP"]
    lost_at = sim.now
    sim.network.outage(f"{ip}:6379")
    await sim.wait_for("Pod", name, lambda p: not is_true("Ready")(p), timeout=120)
    unready_after = sim.now - lost_at
    assert 45 <= unready_after <= 55, unready_after
    unhealthy = events_for(sim, name, "Unhealthy")
    assert {e["message"] for e in unhealthy} == {"Readiness probe failed: ",
                                                 "Liveness probe failed: "}
    p = await sim.wait_for("Pod", name, lambda p: restarts(p) >= 1, timeout=120)
    assert 60 <= sim.now - lost_at <= 65
    assert not events_for(sim, name, "Killing")  # Ray ended it, not the liveness probe
    assert p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1
