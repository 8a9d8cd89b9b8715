"""EndpointSlices and Service routing (the kube-proxy analog)."""

from __future__ import annotations

import asyncio

from kube_helpers import is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.kernel.network import ConnectionRefused
from emu.kube.faults import DelayEndpoints


def service(name: str, selector: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector, "ports": [{"name": "http", "port": 80,
                                                       "targetPort": 8080}]}}


async def slices(sim, name: str) -> list[dict]:
    return list(await sim.client().list("EndpointSlice", "default",
                                        label_selector=f"kubernetes.io/service-name={name}"))


async def test_endpoint_slice_lists_selected_pods_with_ready_flags_after_the_delay(sim):
    sim.programs.register("example/app", ready_after(0))
    sim.programs.register("example/slow", ready_after(1000))
    cluster = kc.install(sim, endpoint_propagation_delay=2.0, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(service("web", {"app": "web"}))
    await sim.apply(pod("a", labels={"app": "web"}))
    await sim.apply(pod("b", "example/slow", labels={"app": "web"}))
    await sim.apply(pod("other", labels={"app": "db"}))
    a = await sim.wait_for("Pod", "a", is_true("Ready"))
    t_ready = sim.now
    await sim.wait_until(lambda: _ready_ips(sim) == [a["status"]["podIP"]], every=0.01,
                         timeout=10)
    assert 2.0 <= sim.now - t_ready <= 2.01 + 1e-9  # (checked every 0.01 s)
    [sl] = await slices(sim, "web")
    assert sl["addressType"] == "IPv4"
    assert sl["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert sl["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == \
        "endpointslice-controller.k8s.io"
    assert sl["metadata"]["ownerReferences"][0]["kind"] == "Service"
    by_pod = {e["targetRef"]["name"]: e["conditions"] for e in sl["endpoints"]}
    assert by_pod == {"a": {"ready": True, "serving": True, "terminating": False},
                      "b": {"ready": False, "serving": False, "terminating": False}}


def _ready_ips(sim) -> list[str]:
    out = []
    for sl in sim.api.list("EndpointSlice", "default")["items"]:
        for e in sl.get("endpoints") or []:
            if e["conditions"]["ready"]:
                out.extend(e["addresses"])
    return sorted(out)


async def send_requests(sim, address: str, until: float, log: list[tuple[float, str]]) -> None:
    """A client process calling the Service every 0.1 s, noting each answer or failure."""

    async def main(proc):
        while sim.now < until:
            try:
                answer = await sim.network.call(proc, address, "GET /")
            except ConnectionRefused:
                answer = "refused"
            log.append((round(sim.now, 6), answer))
            await asyncio.sleep(0.1)

    proc = sim.start_process("client", main)
    await proc.wait_exited()


async def test_requests_during_a_selector_switch_move_after_the_delay_without_failures(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, endpoint_propagation_delay=1.0)
    await cluster.wait_ready()
    await sim.apply(service("web", {"color": "blue"}))
    await sim.apply(pod("blue", labels={"color": "blue"}))
    await sim.apply(pod("green", labels={"color": "green"}))
    await sim.wait_for("Pod", "green", is_true("Ready"))
    await sim.sleep(2)
    log: list[tuple[float, str]] = []
    t_switch = sim.now + 1.0

    async def switch():
        await sim.sleep(1.0)
        await sim.client().patch("Service", "web", {"spec": {"selector": {"color": "green"}}},
                                 "default")

    task = asyncio.ensure_future(switch())
    await send_requests(sim, "web.default.svc.cluster.local:80", sim.now + 4.0, log)
    await task
    answers = [a for _, a in log]
    assert "refused" not in answers
    first_green = next(t for t, a in log if a == "green")
    assert set(answers[: answers.index("green")]) == {"blue"}
    assert set(answers[answers.index("green"):]) == {"green"}
    assert 1.0 <= first_green - t_switch <= 1.1 + 1e-9


async def test_requests_fail_while_no_endpoint_is_ready_and_delayed_endpoints_lag_longer(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, endpoint_propagation_delay=1.0)
    await cluster.wait_ready()
    await sim.apply(service("web", {"color": "blue"}))
    await sim.apply(pod("blue", labels={"color": "blue"}))
    await sim.apply(pod("green", labels={"color": "green"}))
    await sim.wait_for("Pod", "green", is_true("Ready"))
    await sim.sleep(2)
    sim.faults.do(DelayEndpoints(seconds=3.0))
    await sim.client().patch("Service", "web", {"spec": {"selector": {"color": "none"}}},
                             "default")
    t0 = sim.now
    log: list[tuple[float, str]] = []
    await send_requests(sim, "web.default:80", sim.now + 5.0, log)
    first_refused = next(t for t, a in log if a == "refused")
    assert 3.0 <= first_refused - t0 <= 3.1
    assert all(a == "blue" for t, a in log if t < first_refused)
    assert all(a == "refused" for t, a in log if t >= first_refused)
    assert cluster.process("kube-proxy").alive
