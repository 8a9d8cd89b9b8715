"""RayCluster behaviour pinned against raycluster_controller.go, found unpinned by a mutation
sample (scripts/mutation.py). Each test states the Go behaviour it holds."""

from __future__ import annotations

from typing import Any

import pytest
from test_raycluster_support import NS, raycluster, reconciler

from controllers.common import association as assoc


class ListOnly:
    """A client whose ``list`` answers fixed Services (states the API server never stores, such
    as a Service without a clusterIP), for functions that only list."""

    def __init__(self, services: list[dict[str, Any]]) -> None:
        self.services = services

    async def list(self, kind: str, namespace: str | None = None, **_kw: Any) -> list[Any]:
        assert kind == "Service"
        return list(self.services)


def _svc(name: str, cluster_ip: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {} if cluster_ip is None else {"clusterIP": cluster_ip}
    return {"metadata": {"name": name, "namespace": NS}, "spec": spec}


@pytest.mark.parametrize(("services", "error"), [
    ([], "unable to find head service"),
    ([_svc("a", "10.0.0.1"), _svc("b", "10.0.0.2")], "found multiple head services"),
    ([_svc("a", "")], "head service IP is empty"),
    ([_svc("a", None)], "head service IP is empty"),
])
async def test_get_head_service_ip_and_name_errors(sim: Any, services: list[dict[str, Any]],
                                                   error: str) -> None:
    """TestGetHeadServiceIPAndName: no Service, several, or one without an IP are errors naming
    the cluster and the label filter."""
    r = reconciler(sim)
    r.client = ListOnly(services)  # type: ignore[assignment]
    rc = raycluster()
    rc["metadata"]["namespace"] = NS
    opts = assoc.ray_cluster_head_service_list_options(rc)
    with pytest.raises(RuntimeError) as err:
        await r.get_head_service_ip_and_name(rc)
    assert str(err.value) == (
        f"{error}. cluster name raycluster-sample, filter labels "
        f"[InNamespace({NS}) MatchingLabels({opts.selector()})]")


async def test_get_head_service_ip_and_name_returns_the_cluster_ip(sim: Any) -> None:
    r = reconciler(sim)
    r.client = ListOnly([_svc("head-svc", "10.0.0.9")])  # type: ignore[assignment]
    rc = raycluster()
    rc["metadata"]["namespace"] = NS
    assert await r.get_head_service_ip_and_name(rc) == ("10.0.0.9", "head-svc")
