"""Serve honours the first config's ``http_options.port`` (the different-port sample)."""

from __future__ import annotations

import pytest
from raytestworld import HEAD_SVC

from emu.kernel.network import ConnectionRefused

DASH = f"{HEAD_SVC}:8265"
CONFIG = {
    "http_options": {"port": 9000},
    "applications": [{
        "name": "fruit", "import_path": "fruit.deployment_graph", "route_prefix": "/fruit",
        "deployments": [{"name": "FruitMarket", "num_replicas": 1,
                         "ray_actor_options": {"num_cpus": 0.5}}],
    }],
}


async def test_proxies_listen_on_the_configured_port(ray_world):
    rw = ray_world
    head = rw.head("raycluster-head-0")
    await head.wait_ready()
    put = await rw.http(DASH, "PUT", "/api/serve/applications/", CONFIG)
    assert put.status == 200, put.body
    await rw.sleep(8)
    health = await rw.http(f"{head.ip}:9000", "GET", "/-/healthz")
    assert (health.status, health.body) == (200, "success")
    with pytest.raises(ConnectionRefused):
        await rw.http(f"{head.ip}:8000", "GET", "/-/healthz")
    details = (await rw.http(DASH, "GET", "/api/serve/applications/")).json()
    assert details["http_options"]["port"] == 9000
    # a later config can't move running proxies
    moved = {**CONFIG, "http_options": {"port": 9100}}
    await rw.http(DASH, "PUT", "/api/serve/applications/", moved)
    await rw.sleep(3)
    health = await rw.http(f"{head.ip}:9000", "GET", "/-/healthz")
    assert health.status == 200
