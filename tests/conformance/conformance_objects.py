"""Object makers and helpers shared by the conformance tests (imported as a plain module)."""

from __future__ import annotations

import asyncio
from typing import Any

from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom


def loop_server(**kwargs: Any) -> APIServer:
    """A server whose clock is the running loop's (call inside ``run``)."""
    loop = asyncio.get_running_loop()
    return APIServer(clock=loop.time, rng=SimRandom(1), **kwargs)


# -- object makers ---------------------------------------------------------------------------------


def pod(name: str = "p", ns: str = "default", *, labels: dict[str, str] | None = None,
        node: str | None = None, image: str = "busybox:1.36", **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": image}]}
    if node:
        spec["nodeName"] = node
    md: dict[str, Any] = {"name": name, "namespace": ns, **meta}
    if labels is not None:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def cm(name: str = "c", ns: str = "default", *, labels: dict[str, str] | None = None,
       data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": ns, **meta}
    if labels is not None:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data or {"k": "v"}}


def raycluster(name: str = "rc", ns: str = "default", *, replicas: int = 1,
               **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"rayVersion": "2.9.0",
                     "headGroupSpec": {"template": {"spec": {"containers": [
                         {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}},
                     "workerGroupSpecs": [{"groupName": "small", "replicas": replicas,
                                           "template": {"spec": {"containers": [
                                               {"name": "ray-worker",
                                                "image": "rayproject/ray:2.9.0"}]}}}]}}


def job(name: str = "j", ns: str = "default", *, restart: str | None = "Never") -> dict[str, Any]:
    tspec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    if restart is not None:
        tspec["restartPolicy"] = restart
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": tspec}}}


def service(name: str = "s", ns: str = "default", *, ports: list[dict[str, Any]] | None = None,
            **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"port": 80}] if ports is None else ports,
                     "selector": {"app": name}, **spec}}


def deployment(name: str = "d", ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main",
                                                           "image": "nginx:1.25"}]}}}}
