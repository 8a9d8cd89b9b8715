"""The Gateway API implementation (`emu.kube.gateway`): classes, Gateways and HTTPRoutes accepted
as Istio would, and requests to a Gateway split by the route's backend weights."""

from __future__ import annotations

from kube_helpers import is_true, pod, ready_after

import emu.kube.cluster as kc

GW = "gw-istio.default.svc.cluster.local:80"


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80,
                                                           "targetPort": 8080}]}}


def gateway(cls: str = "istio") -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {"gatewayClassName": cls,
                     "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}


def route(weights: dict[str, int], prefix: str = "/") -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "default"}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                                "backendRefs": [{"name": n, "port": 80, "weight": w}
                                                for n, w in weights.items()]}]}}


def condition(obj: dict, ctype: str) -> str:
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == ctype), "")


async def world(sim, classes=("istio",)):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, gateway_classes=classes)
    await cluster.wait_ready()
    for name in ("blue", "green"):
        await sim.apply(service(name))
        await sim.apply(pod(name, labels={"app": name}))
        await sim.wait_for("Pod", name, is_true("Ready"))
    return cluster


async def send(sim, n: int, path: str = "/") -> list:
    out = []
    for _ in range(n):
        out.append(await sim.network.call(None, GW, {"method": "GET", "path": path,
                                                      "headers": {}, "body": None},
                                          caller="test"))
    return out


async def test_classes_gateways_and_routes_are_accepted(sim):
    await world(sim)
    cls = await sim.wait_for("GatewayClass", "istio", lambda o: condition(o, "Accepted") == "True",
                             namespace=None)
    assert cls["spec"]["controllerName"] == "istio.io/gateway-controller"
    await sim.apply(gateway())
    gw = await sim.wait_for("Gateway", "gw", lambda o: condition(o, "Programmed") == "True")
    assert condition(gw, "Accepted") == "True"
    assert gw["status"]["addresses"] == [{"type": "Hostname",
                                          "value": "gw-istio.default.svc.cluster.local"}]
    await sim.apply(route({"blue": 1, "missing": 1}))
    r = await sim.wait_for("HTTPRoute", "r", lambda o: bool((o.get("status") or {}).get("parents")))
    [parent] = r["status"]["parents"]
    conds = {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}
    assert conds == {"Accepted": ("True", "Accepted"),
                     "ResolvedRefs": ("False", "BackendNotFound")}


async def test_a_gateway_of_an_unmanaged_class_is_left_alone(sim):
    await world(sim)
    await sim.apply(gateway("other"))
    await sim.sleep(5)
    gw = await sim.get("Gateway", "gw")
    assert condition(gw, "Accepted") == ""


async def test_requests_split_by_weight_and_follow_weight_changes(sim):
    cluster = await world(sim)
    await sim.apply(gateway())
    await sim.apply(route({"blue": 75, "green": 25}))
    await sim.wait_for("Gateway", "gw", lambda o: condition(o, "Programmed") == "True")
    await sim.sleep(1)
    replies = await send(sim, 400)
    blue = replies.count("blue")
    assert blue + replies.count("green") == 400
    assert 260 <= blue <= 340  # 75% of 400, seeded
    assert cluster.gateway.forwarded[("default/gw", "blue")] == blue
    r = await sim.get("HTTPRoute", "r")
    r["spec"]["rules"][0]["backendRefs"][0]["weight"] = 0
    await sim.client().update(r)
    await sim.sleep(1)
    assert set(await send(sim, 20)) == {"green"}


async def test_no_match_is_404_zero_weights_500_and_an_endpointless_backend_503(sim):
    await world(sim)
    await sim.apply(gateway())
    await sim.apply(route({"blue": 0, "green": 0}, prefix="/api"))
    await sim.sleep(2)
    [miss] = await send(sim, 1, "/other")
    assert miss["status"] == 404
    [zero] = await send(sim, 1, "/api/x")
    assert zero["status"] == 500
    await sim.apply({**service("empty"), "spec": {**service("empty")["spec"],
                                                  "selector": {"app": "nobody"}}})
    r = await sim.get("HTTPRoute", "r")
    r["spec"]["rules"][0]["backendRefs"] = [{"name": "empty", "port": 80, "weight": 1}]
    await sim.client().update(r)
    await sim.sleep(2)
    [down] = await send(sim, 1, "/api")
    assert down["status"] == 503 and "upstream connect error" in down["body"]
