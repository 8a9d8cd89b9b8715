"""A headless Service's name reaches its Pods on any port, declared or not (its DNS A records are
the Pods' IPs); a ClusterIP Service answers only on its declared ports."""

from __future__ import annotations

import asyncio

import pytest
from kube_helpers import is_true, pod

import emu.kube.cluster as kc
from emu.kernel.network import ConnectionRefused


def undeclared_port_server(port: int):
    async def program(ctx):
        async def handle(payload, info):
            return f"{ctx.pod_name}:{port}"

        ctx.listen(port, handle)
        ctx.set_ready(True)
        await asyncio.Event().wait()
        return 0

    return program


def caller(results: dict, address: str):
    async def program(ctx):
        try:
            results["answer"] = await ctx.call(address, {})
        except ConnectionRefused as err:
            results["answer"] = f"refused: {err}"
        ctx.set_ready(True)
        await asyncio.Event().wait()
        return 0

    return program


def service(name: str, *, headless: bool) -> dict:
    spec = {"selector": {"app": "db"}, "ports": [{"name": "http", "port": 80}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize("headless,expected", [(True, "db-0:6379"), (False, "refused")])
async def test_undeclared_port_by_service_name(sim, headless, expected):
    results: dict = {}
    sim.programs.register("example/db", undeclared_port_server(6379))
    sim.programs.register("example/client", caller(results, "db:6379"))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(service("db", headless=headless))
    await sim.apply(pod("db-0", "example/db", labels={"app": "db"}))
    await sim.wait_for("Pod", "db-0", is_true("Ready"))
    await sim.sleep(2)  # the EndpointSlice follows
    await sim.apply(pod("client", "example/client"))
    await sim.wait_for("Pod", "client", is_true("Ready"))
    assert str(results["answer"]).startswith(expected)
