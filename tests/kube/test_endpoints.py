"""The opt-in core/v1 Endpoints controller: one Endpoints object per Service with a selector,
mirroring its EndpointSlices (what KubeRay up to v1.5 reads for RayServices)."""

from __future__ import annotations

from kube_helpers import is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.kube.config import KubeConfig
from emu.kube.endpoints import endpoints_subsets


def service(name: str, selector: dict[str, str] | None) -> dict:
    spec: dict = {"ports": [{"name": "serve", "port": 8000, "targetPort": 8000}]}
    if selector:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "labels": {"team": "x"}},
            "spec": spec}


def _addresses(sim, name: str) -> tuple[list[str], list[str]] | None:
    try:
        ep = sim.api.get("Endpoints", name, "default")
    except Exception:
        return None
    ready, not_ready = [], []
    for subset in ep.get("subsets") or []:
        ready += [a["ip"] for a in subset.get("addresses") or []]
        not_ready += [a["ip"] for a in subset.get("notReadyAddresses") or []]
    return ready, not_ready


async def test_endpoints_follow_the_services_ready_pods_and_go_with_it(sim):
    sim.programs.register("example/app", ready_after(0))
    sim.programs.register("example/slow", ready_after(1000))
    base = KubeConfig()
    cluster = kc.install(sim, controllers=(*base.controllers, "endpoints"),
                         endpoint_propagation_delay=1.0)
    await cluster.wait_ready()
    await sim.apply(service("serve-svc", {"app": "serve"}))
    await sim.apply(service("manual", None))  # no selector: nobody writes its Endpoints
    await sim.apply(pod("a", labels={"app": "serve"}))
    await sim.apply(pod("b", "example/slow", labels={"app": "serve"}))
    a = await sim.wait_for("Pod", "a", is_true("Ready"))
    b = await sim.wait_for("Pod", "b", lambda p: bool(p.get("status", {}).get("podIP")))
    await sim.wait_until(lambda: _addresses(sim, "serve-svc") == (
        [a["status"]["podIP"]], [b["status"]["podIP"]]), every=0.1, timeout=10)
    ep = sim.api.get("Endpoints", "serve-svc", "default")
    assert ep["metadata"]["labels"] == {"team": "x"}
    [subset] = ep["subsets"]
    assert subset["ports"] == [{"name": "serve", "port": 8000, "protocol": "TCP"}]
    assert subset["addresses"][0]["targetRef"]["name"] == "a"
    assert subset["addresses"][0]["nodeName"] == a["spec"]["nodeName"]
    assert _addresses(sim, "manual") is None
    await sim.client().delete("Pod", "a", namespace="default")
    await sim.wait_until(lambda: (_addresses(sim, "serve-svc") or ([1], []))[0] == [],
                         every=0.1, timeout=60)
    await sim.client().delete("Service", "serve-svc", namespace="default")
    await sim.wait_until(lambda: _addresses(sim, "serve-svc") is None, every=0.1, timeout=10)


async def test_it_is_not_started_by_default(sim):
    kc.install(sim)
    assert sim.processes.find("endpoint-controller") is None
    assert "endpoints" not in KubeConfig().controllers


def test_subsets_group_by_ports_and_sort_addresses():
    def sl(name, ports, *eps):
        return {"metadata": {"name": name}, "ports": ports,
                "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}
                              for ip, ready in eps]}

    http = [{"name": "http", "port": 80, "protocol": "TCP"}]
    other = [{"name": "http", "port": 81, "protocol": "TCP"}]
    got = endpoints_subsets([sl("s2", http, ("10.0.0.9", True), ("10.0.0.2", False)),
                             sl("s1", http, ("10.0.0.3", True)),
                             sl("s3", other, ("10.0.0.5", False)), sl("s4", http)])
    assert got == [
        {"addresses": [{"ip": "10.0.0.3"}, {"ip": "10.0.0.9"}],
         "notReadyAddresses": [{"ip": "10.0.0.2"}], "ports": http},
        {"notReadyAddresses": [{"ip": "10.0.0.5"}], "ports": other}]
