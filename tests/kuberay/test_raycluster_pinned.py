"""RayCluster behaviour pinned against raycluster_controller.go, found unpinned by a mutation
sample (scripts/mutation.py). Each test states the Go behaviour it holds."""

from __future__ import annotations

from typing import Any

import pytest
from test_raycluster_support import NS, raycluster, reconciler

from emu.kuberay.common import association as assoc
from emu.kuberay.utils import util


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


async def test_update_endpoints_prefers_node_port_then_a_nonzero_target_port(sim: Any) -> None:
    """updateEndpoints: per named port of the head Service, nodePort if set, else targetPort
    when it is a non-zero int or a non-empty name; unnamed ports are skipped."""
    svc = _svc("head-svc", "10.0.0.9")
    svc["spec"]["ports"] = [
        {"name": "gcs", "port": 6379, "targetPort": 6379, "nodePort": 30001},
        {"name": "dashboard", "port": 8265, "targetPort": 8265},
        {"name": "client", "port": 10001, "targetPort": "client-port"},
        {"name": "zero", "port": 1, "targetPort": 0},
        {"name": "empty", "port": 2, "targetPort": ""},
        {"port": 3, "targetPort": 3},
    ]
    r = reconciler(sim)
    r.client = ListOnly([svc])  # type: ignore[assignment]
    rc = raycluster()
    rc["status"] = {}
    await r.update_endpoints(rc)
    assert rc["status"]["endpoints"] == {"gcs": "30001", "dashboard": "8265",
                                         "client": "client-port"}
    none = raycluster()
    none["status"] = {}
    r.client = ListOnly([])  # type: ignore[assignment]
    await r.update_endpoints(none)
    assert "endpoints" not in none["status"]


async def test_the_autoscaler_service_account_is_owned_by_its_cluster(sim: Any) -> None:
    """reconcileAutoscalerServiceAccount: with in-tree autoscaling, a ServiceAccount named after
    the cluster, controlled by it (so it goes with the cluster)."""
    r = reconciler(sim)
    rc = await sim.client().create(raycluster(enableInTreeAutoscaling=True))
    await r.reconcile_autoscaler_service_account(rc)
    sa = await sim.client().get("ServiceAccount", "raycluster-sample", NS)
    [ref] = sa["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "RayCluster", "raycluster-sample", rc["metadata"]["uid"], True)
    assert sa["metadata"]["labels"]["ray.io/cluster"] == "raycluster-sample"
    await r.reconcile_autoscaler_service_account(rc)  # exists: nothing to do, no error


def test_requeue_durations_are_kuberays() -> None:
    """DefaultRequeueDuration is 2 s; a cluster being deleted whose head Pod is still there
    (GCS FT Redis cleanup) is requeued after 10 s."""
    from emu.kuberay.raycluster import DEFAULT_REQUEUE_DURATION, HEAD_POD_TERMINATION_REQUEUE

    assert (DEFAULT_REQUEUE_DURATION, HEAD_POD_TERMINATION_REQUEUE) == (2.0, 10.0)


def test_format_quantity_picks_the_largest_exact_binary_suffix() -> None:
    from fractions import Fraction

    from emu.kuberay.raycluster import format_quantity

    assert format_quantity(Fraction(3 * 2**40), binary=True) == "3Ti"
    assert format_quantity(Fraction(2**50), binary=True) == "1Pi"
    assert format_quantity(Fraction(2**60), binary=True) == "1Ei"
    assert format_quantity(Fraction(512 * 2**20), binary=True) == "512Mi"
    assert format_quantity(Fraction(3, 2)) == "1500m"
    assert format_quantity(Fraction(2)) == "2"


async def test_reconcile_returns_other_errors_of_the_cluster_get(sim: Any) -> None:
    """Reconcile: NotFound ends quietly; any other error of the Get is returned (requeued with
    backoff by controller-runtime)."""
    from emu.apiserver.errors import ApiError
    from emu.faults import FailRequests
    from emu.runtime.reconcile import Request

    r = reconciler(sim)
    result = await r.reconcile(Request(NS, "missing"))
    assert not result.requeue and not result.requeue_after
    sim.faults.do(FailRequests(verb="get", kind="RayCluster", caller="raycluster-controller",
                               code=500, duration=5))
    with pytest.raises(ApiError) as err:
        await r.reconcile(Request(NS, "missing"))
    assert err.value.code == 500


async def test_the_serve_service_is_created_only_with_the_annotation(sim: Any) -> None:
    """reconcileServeService: annotation ray.io/enable-serve-service=true creates
    <cluster>-serve-svc when it is missing, and leaves an existing one alone."""
    r = reconciler(sim)
    plain = await sim.client().create(raycluster("plain"))
    await r.reconcile_serve_service(plain)
    annotated = await sim.client().create(
        raycluster("served", annotations={"ray.io/enable-serve-service": "true"}))
    await r.reconcile_serve_service(annotated)
    names = sorted(s["metadata"]["name"] for s in await sim.client().list("Service", NS))
    assert names == ["served-serve-svc"]
    await r.reconcile_serve_service(annotated)  # exists: no AlreadyExists error


async def test_a_gcs_storage_pvc_created_meanwhile_is_adopted_not_an_error(sim: Any) -> None:
    """reconcileGCSStoragePVC: the Get says NotFound but the Create says AlreadyExists (another
    writer won the race): the live claim is adopted (owner reference set), no error, no
    FailedToCreatePVC event."""
    from test_raycluster_support import events

    from emu.faults import FailRequests

    r = reconciler(sim)
    rc = await sim.client().create(raycluster(gcsFaultToleranceOptions={"backend": "rocksdb"}))
    name = util.get_gcs_storage_pvc_name(rc)
    await sim.client().create({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    sim.faults.do(FailRequests(verb="get", kind="PersistentVolumeClaim",
                               caller="raycluster-controller", code=404, count=1))
    await r.reconcile_gcs_storage_pvc(rc)
    pvc = await sim.client().get("PersistentVolumeClaim", name, NS)
    [ref] = pvc["metadata"]["ownerReferences"]
    assert (ref["uid"], ref["controller"]) == (rc["metadata"]["uid"], True)
    await r.recorder.flush()
    assert not [e for e in await events(sim) if e["reason"] == "FailedToCreatePVC"]


async def test_a_failed_recreate_upgrade_delete_is_an_event_and_an_error(sim: Any) -> None:
    """reconcilePods with upgradeStrategy Recreate: the head's recreate hash differs from the
    spec's, deleting all Pods fails → Warning FailedToDeletePodCollection and the error."""
    from test_raycluster_support import events

    from emu.faults import FailRequests

    r = reconciler(sim)
    rc = await sim.client().create(raycluster(upgradeStrategy={"type": "Recreate"}))
    from emu.kuberay.utils import constant as C

    head = r.build_head_pod(rc)
    head["metadata"].setdefault("annotations", {})[C.UPGRADE_STRATEGY_RECREATE_HASH_KEY] = \
        util.generate_hash_without_replicas_and_workers_to_delete(rc["spec"])
    await sim.client().create(head)
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "ray:other"
    assert await r.should_recreate_pods_for_upgrade(rc)
    sim.faults.do(FailRequests(kind="Pod", verb="delete_collection",
                               caller="raycluster-controller", code=500))
    with pytest.raises(Exception, match="FailedDeleteAllPods"):
        await r.reconcile_pods(rc)
    await r.recorder.flush()
    [event] = [e for e in await events(sim) if e["reason"] == "FailedToDeletePodCollection"]
    assert event["type"] == "Warning"
    assert event["message"].startswith(
        "Failed deleting Pods due to spec change with Recreate upgradeStrategy for RayCluster "
        f"{NS}/raycluster-sample, ")


async def test_token_auth_creates_a_secret_named_after_the_cluster_once(sim: Any) -> None:
    """reconcileAuthSecret: authOptions mode token without secretName → Secret <cluster> with a
    32-byte auth_token, controlled by the cluster; an existing one is kept."""
    r = reconciler(sim)
    rc = await sim.client().create(raycluster(authOptions={"mode": "token"}))
    await r.reconcile_auth_secret(rc)
    secret = await sim.client().get("Secret", "raycluster-sample", NS)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == rc["metadata"]["uid"]
    token = secret["data"]["auth_token"]
    await r.reconcile_auth_secret(rc)
    assert (await sim.client().get("Secret", "raycluster-sample", NS))["data"]["auth_token"] == token
    off = await sim.client().create(raycluster("off", authOptions={"mode": "disabled"}))
    await r.reconcile_auth_secret(off)
    names = [s["metadata"]["name"] for s in await sim.client().list("Secret", NS)]
    assert "off" not in names


async def test_a_failed_gcs_storage_pvc_create_is_a_warning_event(sim: Any) -> None:
    from test_raycluster_support import events

    from emu.apiserver.errors import ApiError
    from emu.faults import FailRequests

    r = reconciler(sim)
    rc = await sim.client().create(raycluster(gcsFaultToleranceOptions={"backend": "rocksdb"}))
    sim.faults.do(FailRequests(verb="create", kind="PersistentVolumeClaim",
                               caller="raycluster-controller", code=500, count=1))
    with pytest.raises(ApiError):
        await r.reconcile_gcs_storage_pvc(rc)
    await r.recorder.flush()
    [event] = [e for e in await events(sim) if e["reason"] == "FailedToCreatePVC"]
    assert event["type"] == "Warning" and event["message"].startswith(
        f"Failed to create GCS storage PVC {NS}/{util.get_gcs_storage_pvc_name(rc)}, ")


async def test_create_head_pod_stamps_the_recreate_hash_only_when_given(sim: Any) -> None:
    from emu.kuberay.utils import constant as C

    r = reconciler(sim)
    rc = await sim.client().create(raycluster())
    await r.create_head_pod(rc, "")
    await r.create_head_pod(rc, "abc")
    pods = sorted(await sim.client().list("Pod", NS),
                  key=lambda p: int(p["metadata"]["resourceVersion"]))
    first, second = (p["metadata"].get("annotations") or {} for p in pods)
    assert C.UPGRADE_STRATEGY_RECREATE_HASH_KEY not in first
    assert second[C.UPGRADE_STRATEGY_RECREATE_HASH_KEY] == "abc"
    assert second[C.KUBE_RAY_VERSION] == C.KUBERAY_VERSION


async def test_autoscaler_v1_warns_about_worker_groups_that_restart(sim: Any) -> None:
    """rayClusterReconcile: autoscaler V1 with a worker group whose restartPolicy is neither
    Never nor unset → a Warning naming the groups (the cluster is still reconciled)."""
    from test_raycluster_support import events, start_kuberay

    start_kuberay(sim)
    rc = raycluster(enableInTreeAutoscaling=True, autoscalerOptions={"version": "v1"})
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["restartPolicy"] = "Always"
    await sim.client().create(rc)
    await sim.sleep(2)
    warnings = [e["message"] for e in await events(sim) if e["reason"] == "InvalidRayClusterSpec"]
    assert warnings and set(warnings) == {
        f"RayCluster spec warning {NS}/raycluster-sample: restartPolicy for worker groups "
        "[small-group] should be Never or unset when using autoscaler V1"}


async def test_an_invalid_status_is_a_warning_and_an_error(sim: Any) -> None:
    """rayClusterReconcile: Suspending and Suspended both True → Warning InvalidRayClusterStatus,
    requeue after 2 s with the error."""
    from test_raycluster_support import events

    r = reconciler(sim)
    rc = await sim.client().create(raycluster())
    rc["status"] = {"conditions": [
        {"type": "RayClusterSuspending", "status": "True", "reason": "x", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "RayClusterSuspended", "status": "True", "reason": "x", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    result, err = await r.ray_cluster_reconcile(rc)
    assert result.requeue_after == 2.0 and err is not None
    await r.recorder.flush()
    [event] = [e for e in await events(sim) if e["reason"] == "InvalidRayClusterStatus"]
    assert event["type"] == "Warning" and event["message"].startswith(
        f"The RayCluster status is invalid {NS}/raycluster-sample, invalid RayCluster State: ")


async def test_reconcile_pods_creates_nothing_while_suspend_is_asked_or_in_force(sim: Any) -> None:
    """reconcilePods with RayClusterStatusConditions on: spec.suspend set (before the status says
    Suspending) or status Suspended (before a resume is seen) → no Pod is created."""
    from test_raycluster_support import pods

    r = reconciler(sim)
    asked = await sim.client().create(raycluster("asked", suspend=True))
    await r.reconcile_pods(asked)
    suspended = await sim.client().create(raycluster("held"))
    suspended["status"] = {"conditions": [
        {"type": "RayClusterSuspended", "status": "True", "reason": "x", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    await r.reconcile_pods(suspended)
    assert await pods(sim) == []
    running = await sim.client().create(raycluster("running"))
    await r.reconcile_pods(running)
    assert await pods(sim)  # the same call creates Pods when neither holds
