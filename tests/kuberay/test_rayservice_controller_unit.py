"""Ports of ``rayservice_controller_unit_test.go``: the RayService controller's functions, one at a
time, on the emulated API server with a plain client (Go uses controller-runtime's fake client)
and a fake dashboard transport (Go's ``FakeRayDashboardClient``). Incremental-upgrade tests
(Gateway, HTTPRoute, target capacity, rollback) are not ported: that strategy is not."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import attrs
import pytest
from test_rayservice_support import NS, condition

from emu.kuberay.dashboard_client import RayDashboardClient
from emu.kuberay.raycluster import EventRecorder, rfc3339
from emu.kuberay.rayservice import (
    RAY_CLUSTER_DELETION_DELAY_DURATION,
    RayServicePanic,
    RayServiceReconciler,
    RayServiceReconcilerOptions,
    calculate_conditions,
    check_if_need_submit_serve_applications,
    construct_ray_cluster_for_ray_service,
    get_and_check_serve_status,
    is_cluster_spec_hash_equal,
    is_initializing_timeout,
    is_zero_downtime_upgrade_enabled,
    mark_failed_on_initializing_timeout,
    reconcile_promotion_and_serving_status,
)
from emu.kuberay.utils import constant as C
from emu.kuberay.utils import util
from emu.runtime import Request

WORKER = {"groupName": "worker-group-1", "replicas": 1, "minReplicas": 0, "maxReplicas": 5,
          "rayStartParams": {},
          "template": {"spec": {"containers": [{"name": "ray-worker",
                                                "image": "rayproject/ray:2.46.0"}]}}}


def cluster_spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}},
        "workerGroupSpecs": [copy.deepcopy(WORKER)],
    }
    spec.update(extra)
    return spec


def rs_obj(name: str = "test-service", *, status: dict[str, Any] | None = None,
           annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"rayClusterConfig": cluster_spec()}
    body.update(spec)
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": "rs-uid", "generation": 1}
    if annotations:
        meta["annotations"] = annotations
    out = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta, "spec": body}
    if status is not None:
        out["status"] = status
    return out


def cluster_for(rs: dict[str, Any], name: str) -> dict[str, Any]:
    """The cluster `construct_ray_cluster_for_ray_service` builds, as the API server stores it."""
    return construct_ray_cluster_for_ray_service(rs, name)


class FakeProxy:
    def __init__(self, healthy: bool) -> None:
        self.healthy = healthy
        self.calls: list[tuple[str, str, str, int]] = []

    async def __call__(self, ip: str, ns: str, pod: str, port: int) -> None:
        self.calls.append((ip, ns, pod, port))
        if not self.healthy:
            raise RuntimeError("CheckProxyActorHealth fails. status code: 503")


def fake_dashboard(apps: dict[str, tuple[str, str]] | None = None, *,
                   puts: list[Any] | None = None) -> RayDashboardClient:
    """``FakeRayDashboardClient`` with ``app → (app status, deployment status)``."""
    async def send(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "PUT":
            if puts is not None:
                puts.append(body)
            return 200, ""
        applications = {
            name: {"name": name, "status": app_status, "message": "",
                   "deployments": {"dep": {"name": "dep", "status": dep_status, "message": ""}}}
            for name, (app_status, dep_status) in (apps or {}).items()}
        return 200, {"applications": applications}

    return RayDashboardClient(send)


def reconciler(sim: Any, *, healthy: bool = True, apps: dict[str, tuple[str, str]] | None = None,
               env: dict[str, str] | None = None) -> RayServiceReconciler:
    """A reconciler in its own process, so its event writer dies with the simulation."""
    proc = sim.processes.find("rayservice-controller")
    if proc is None or not proc.alive:
        proc = sim.start_process("rayservice-controller", _idle)
    client = sim.client(process=proc)
    return RayServiceReconciler(
        client, dashboard_client_func=lambda _c, _u: fake_dashboard(apps),
        http_proxy_client_func=FakeProxy(healthy),
        options=RayServiceReconcilerOptions(env=env or {}),
        recorder=EventRecorder(client, "rayservice-controller", spawn=proc.spawn))


async def _idle(_process: Any) -> None:
    await asyncio.Event().wait()


# -- pure functions --------------------------------------------------------------------------


@pytest.mark.parametrize(("apps", "ready"), [
    ({"serve-app-1": ("DEPLOYING", "UPDATING")}, False),
    ({"serve-app-1": ("RUNNING", "HEALTHY")}, True),
    ({"serve-app-1": ("UNHEALTHY", "UNHEALTHY")}, False),
    ({"serve-app-1": ("DEPLOY_FAILED", "UPDATING")}, False),
    ({}, False),
], ids=["deploying", "running", "unhealthy", "deploy_failed", "no_application"])
async def test_get_and_check_serve_status_is_ready_only_when_every_app_runs(sim, apps, ready):
    """TestGetAndCheckServeStatus."""
    is_ready, statuses = await get_and_check_serve_status(fake_dashboard(apps))
    assert is_ready is ready
    assert sorted(statuses) == sorted(apps)


async def test_get_and_check_serve_status_names_an_unnamed_app_default(sim):
    is_ready, statuses = await get_and_check_serve_status(fake_dashboard({"": ("RUNNING", "HEALTHY")}))
    assert is_ready
    assert statuses == {"default": {"status": "RUNNING",
                                    "serveDeploymentStatuses": {"dep": {"status": "HEALTHY"}}}}


async def test_get_and_check_serve_status_error_wraps_the_dashboard_error(sim):
    async def send(method: str, path: str, body: Any) -> tuple[int, Any]:
        return 503, "The GCS may be down"

    with pytest.raises(RuntimeError) as info:
        await get_and_check_serve_status(RayDashboardClient(send))
    assert str(info.value) == (
        "failed to get Serve application statuses from the dashboard. If you observe this error "
        "consistently, please check https://docs.ray.io/en/latest/cluster/kubernetes/"
        "troubleshooting/rayservice-troubleshooting.html for more details. err: failed to get "
        "serve details: GetServeDetails fail: 503 Service Unavailable The GCS may be down")


def test_check_if_need_submit_serve_applications_cases():
    """TestCheckIfNeedSubmitServeApplications."""
    running = {"myapp": {"status": "RUNNING"}}
    assert check_if_need_submit_serve_applications("", "serve-config-1", {})[0]
    assert not check_if_need_submit_serve_applications("serve-config-1", "serve-config-1",
                                                       running)[0]
    assert check_if_need_submit_serve_applications("serve-config-1", "serve-config-2", running)[0]
    assert check_if_need_submit_serve_applications("serve-config-1", "serve-config-1", {}) == (
        True, "No Serve application found in the RayCluster. A possible reason is that the head "
              "Pod crashed and GCS FT was not enabled.")
    assert check_if_need_submit_serve_applications("", "serve-config-1", running) == (
        True, "Nothing has been cached for the cluster.")


@pytest.mark.parametrize(("partial", "diff_replicas", "add_group", "update_spec", "expected"), [
    (False, True, False, False, True),
    (False, False, False, False, True),
    (False, False, False, True, False),
    (True, False, True, False, True),
    (True, True, True, False, True),
    (True, True, False, False, True),
    (True, False, False, True, False),
], ids=["full_diff_replicas", "full_identical", "full_update_spec", "partial_new_group",
        "partial_replicas_and_new_group", "partial_diff_replicas", "partial_update_spec"])
def test_is_cluster_spec_hash_equal(partial, diff_replicas, add_group, update_spec, expected):
    """TestIsClusterSpecHashEqual."""
    rs = rs_obj()
    cluster = cluster_for(rs, "c")
    service = copy.deepcopy(rs)
    groups = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    if diff_replicas:
        groups[0]["replicas"] += 1
    if add_group:
        groups.append({**copy.deepcopy(WORKER), "groupName": "worker-group-2"})
    if update_spec:
        service["spec"]["rayClusterConfig"]["rayVersion"] = "new-version"
    assert is_cluster_spec_hash_equal(service, cluster, partial) is expected


def test_suspend_in_the_cluster_spec_never_changes_the_hash():
    rs = rs_obj()
    cluster = cluster_for(rs, "c")
    rs["spec"]["rayClusterConfig"]["suspend"] = True
    assert is_cluster_spec_hash_equal(rs, cluster, False)


async def test_should_prepare_new_cluster_without_any_cluster(sim):
    """TestShouldPrepareNewCluster_PrepareNewCluster."""
    assert reconciler(sim).should_prepare_new_cluster(rs_obj(), None, None, False)


async def test_should_prepare_new_cluster_on_a_changed_spec_for_zero_downtime_upgrade(sim):
    """TestShouldPrepareNewCluster_ZeroDowntimeUpgrade."""
    rs = rs_obj()
    active = cluster_for(rs, "active-cluster")
    rs["spec"]["rayClusterConfig"]["rayVersion"] = "new-version"
    assert reconciler(sim).should_prepare_new_cluster(rs, active, None, False)
    assert not reconciler(sim, env={"ENABLE_ZERO_DOWNTIME": "false"}).should_prepare_new_cluster(
        rs, active, None, False)


async def test_should_prepare_new_cluster_overrides_pending_only_when_it_is_not_serving(sim):
    """TestShouldPrepareNewCluster_PendingCluster."""
    rs = rs_obj()
    pending = cluster_for(rs, "pending-cluster")
    rs["spec"]["rayClusterConfig"]["rayVersion"] = "new-version"
    r = reconciler(sim)
    assert r.should_prepare_new_cluster(rs, None, pending, False)
    assert not r.should_prepare_new_cluster(rs, None, pending, True)


async def test_replica_changes_and_appended_groups_never_prepare_a_new_cluster(sim):
    rs = rs_obj()
    active = cluster_for(rs, "active-cluster")
    rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 7
    r = reconciler(sim)
    assert not r.should_prepare_new_cluster(rs, active, None, False)
    rs["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(
        {**copy.deepcopy(WORKER), "groupName": "extra"})
    assert not r.should_prepare_new_cluster(rs, active, None, False)


@pytest.mark.parametrize(("strategy", "env", "expected"), [
    (None, None, True), (None, "true", True), (None, "false", False),
    ("NewCluster", "true", True), ("NewCluster", None, True), ("NewCluster", "false", True),
    ("None", None, False), ("None", "true", False), ("None", "false", False),
], ids=["neither", "env_true", "env_false", "newcluster_env_true", "newcluster", "newcluster_env_false",
        "none", "none_env_true", "none_env_false"])
def test_is_zero_downtime_upgrade_enabled(strategy, env, expected):
    """TestIsZeroDowntimeUpgradeEnabled: the strategy type wins over ENABLE_ZERO_DOWNTIME."""
    upgrade = {"type": strategy} if strategy is not None else None
    environ = {"ENABLE_ZERO_DOWNTIME": env} if env is not None else {}
    assert is_zero_downtime_upgrade_enabled(upgrade, environ) is expected


def test_construct_ray_cluster_for_ray_service_labels_annotations_and_owner():
    """TestConstructRayClusterForRayService."""
    rs = rs_obj()
    rs["metadata"]["labels"] = {"team": "a"}
    rs["metadata"]["annotations"] = {"foo": "bar"}
    rs["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(
        {**copy.deepcopy(WORKER), "groupName": "g2"})
    cluster = construct_ray_cluster_for_ray_service(rs, "test-service-abcde")
    meta = cluster["metadata"]
    assert meta["name"] == "test-service-abcde"
    assert meta["labels"] == {"team": "a", "ray.io/originated-from-cr-name": "test-service",
                              "ray.io/originated-from-crd": "RayService"}
    assert meta["annotations"]["foo"] == "bar"
    assert meta["annotations"]["ray.io/num-worker-groups"] == "2"
    assert meta["annotations"]["ray.io/kuberay-version"] == C.KUBERAY_VERSION
    assert meta["annotations"]["ray.io/hash-without-replicas-and-workers-to-delete"] == \
        util.generate_hash_without_replicas_and_workers_to_delete(rs["spec"]["rayClusterConfig"])
    assert meta["ownerReferences"] == [{"apiVersion": "ray.io/v1", "kind": "RayService",
                                        "name": "test-service", "uid": "rs-uid",
                                        "controller": True, "blockOwnerDeletion": True}]
    assert cluster["spec"] == rs["spec"]["rayClusterConfig"]


def test_services_pointing_at_different_clusters_panic():
    head = {"spec": {"selector": {"ray.io/cluster": "a"}}}
    serve = {"spec": {"selector": {"ray.io/cluster": "b"}}}
    rs = rs_obj(status={"activeServiceStatus": {"rayClusterName": "a"}})
    with pytest.raises(RayServicePanic, match="^headSvc and serveSvc are not pointing to the "
                                              "same cluster$"):
        reconcile_promotion_and_serving_status(head, serve, rs)
    serve["spec"]["selector"]["ray.io/cluster"] = "a"
    head["spec"]["selector"]["ray.io/cluster"] = serve["spec"]["selector"]["ray.io/cluster"] = "z"
    with pytest.raises(RayServicePanic, match="^clusterName from services is not equal to "
                                              "pendingCluster or activeCluster$"):
        reconcile_promotion_and_serving_status(head, serve, rs)


def test_promotion_moves_the_whole_pending_status_to_active():
    svc = {"spec": {"selector": {"ray.io/cluster": "new"}}}
    pending = {"rayClusterName": "new", "applicationStatuses": {"app": {"status": "RUNNING"}}}
    rs = rs_obj(status={"activeServiceStatus": {"rayClusterName": "old"},
                        "pendingServiceStatus": copy.deepcopy(pending)})
    assert reconcile_promotion_and_serving_status(svc, svc, rs) is True
    assert rs["status"]["activeServiceStatus"] == pending
    assert rs["status"]["pendingServiceStatus"] == {}
    # Already promoted: pointing at active is not "pending serving" and changes nothing.
    assert reconcile_promotion_and_serving_status(svc, svc, rs) is False
    assert rs["status"]["activeServiceStatus"] == pending


# -- conditions and the initializing timeout ---------------------------------------------------


def _conds(rs: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in rs["status"]["conditions"]}


@pytest.mark.parametrize(("endpoints", "start", "active", "pending", "expected"), [
    (0, None, "", "", {"Ready": ("False", "Initializing"),
                       "UpgradeInProgress": ("False", "Initializing")}),
    (0, ("False", "Initializing"), "", "", {"Ready": ("False", "Initializing")}),
    (1, ("True", "NonZeroServeEndpoints"), "a", "", {"Ready": ("True", "NonZeroServeEndpoints")}),
    (1, ("False", "Initializing"), "a", "", {"Ready": ("True", "NonZeroServeEndpoints")}),
    (0, ("True", "NonZeroServeEndpoints"), "a", "", {"Ready": ("False", "ZeroServeEndpoints")}),
    (1, ("True", "NonZeroServeEndpoints"), "a", "b",
     {"UpgradeInProgress": ("True", "BothActivePendingClustersExist")}),
    (1, ("True", "NonZeroServeEndpoints"), "a", "",
     {"UpgradeInProgress": ("False", "NoPendingCluster")}),
    (0, ("False", "ZeroServeEndpoints"), "", "",
     {"UpgradeInProgress": ("Unknown", "NoActiveCluster")}),
], ids=["initial", "remains_false", "remains_true", "becomes_true", "becomes_false",
        "upgrade_both_clusters", "upgrade_only_active", "upgrade_unknown_no_active"])
async def test_calculate_conditions(sim, endpoints, start, active, pending, expected):
    """TestCalculateConditions."""
    status: dict[str, Any] = {"numServeEndpoints": endpoints,
                              "activeServiceStatus": {"rayClusterName": active},
                              "pendingServiceStatus": {"rayClusterName": pending},
                              "conditions": []}
    if start is not None:
        status["conditions"] = [
            {"type": "Ready", "status": start[0], "reason": start[1], "message": "",
             "lastTransitionTime": rfc3339(0)},
            {"type": "UpgradeInProgress", "status": "False",
             "reason": "NoPendingCluster" if start[1] != "Initializing" else "Initializing",
             "message": "", "lastTransitionTime": rfc3339(0)}]
    rs = rs_obj(status=status)
    calculate_conditions(reconciler(sim), rs)
    got = _conds(rs)
    for ctype, want in expected.items():
        assert got[ctype] == want


async def test_upgrade_condition_is_not_overridden_in_initializing_timeout(sim):
    rs = rs_obj(status={"conditions": [
        {"type": "Ready", "status": "False", "reason": "InitializingTimeout", "message": "",
         "lastTransitionTime": rfc3339(0)},
        {"type": "UpgradeInProgress", "status": "False", "reason": "InitializingTimeout",
         "message": "", "lastTransitionTime": rfc3339(0)}]})
    calculate_conditions(reconciler(sim), rs)
    assert _conds(rs)["UpgradeInProgress"] == ("False", "InitializingTimeout")


@pytest.mark.parametrize(("status", "reason", "expected"), [
    (None, None, False), ("False", "InitializingTimeout", True),
    ("False", "Initializing", False), ("True", "NonZeroServeEndpoints", False)],
    ids=["no_conditions", "timed_out", "other_reason", "ready"])
def test_is_initializing_timeout(status, reason, expected):
    """TestIsInitializingTimeout."""
    conds = [] if status is None else [{"type": "Ready", "status": status, "reason": reason}]
    assert is_initializing_timeout(rs_obj(status={"conditions": conds})) is expected


@pytest.mark.parametrize(("annotation", "reason", "age", "times_out"), [
    (None, "Initializing", 3600, False),
    ("30m", "Initializing", 600, False),
    ("30m", "Initializing", 2100, True),
    ("30m", "InitializingTimeout", 2100, False),
    ("30m", "NonZeroServeEndpoints", 2100, False),
], ids=["no_annotation", "within_timeout", "exceeded", "already_failed", "not_initializing"])
async def test_mark_failed_if_initializing_timed_out(sim, annotation, reason, age, times_out):
    """TestMarkFailedIfInitializingTimedOut."""
    await sim.sleep(age)
    status = "True" if reason == "NonZeroServeEndpoints" else "False"
    rs = rs_obj(annotations={C.RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION: annotation}
                if annotation else None,
                status={"activeServiceStatus": {"rayClusterName": "a"},
                        "pendingServiceStatus": {"rayClusterName": "b"},
                        "conditions": [{"type": "Ready", "status": status, "reason": reason,
                                        "message": "", "lastTransitionTime": rfc3339(0)}]})
    r = reconciler(sim)
    mark_failed_on_initializing_timeout(r, rs)
    ready = condition(rs, "Ready")
    if times_out:
        assert ready["reason"] == "InitializingTimeout"
        assert ready["message"] == ("RayService failed to become ready within the configured "
                                    "timeout of 30m0s. Time spent initializing: 35m0s")
        assert rs["status"]["activeServiceStatus"]["rayClusterName"] == ""
        assert rs["status"]["pendingServiceStatus"]["rayClusterName"] == ""
        await r.recorder.flush()
        events = await sim.client().list("Event", NS)
        assert [(e["reason"], e["message"]) for e in events] == [
            ("RayServiceInitializingTimeout",
             "RayService initializing timeout exceeded after 35m0s (configured timeout: 30m0s)")]
    else:
        assert ready["reason"] == reason
        assert rs["status"]["activeServiceStatus"]["rayClusterName"] == "a"


# -- functions that talk to the API server ------------------------------------------------------


async def test_reconcile_ray_cluster_creates_the_recorded_pending_cluster(sim):
    """TestReconcileRayCluster_CreatePendingCluster."""
    rs = await sim.client().create(rs_obj())
    rs["status"] = {"pendingServiceStatus": {"rayClusterName": "pending-cluster"}}
    active, pending = await reconciler(sim).reconcile_ray_cluster(rs)
    assert active is None
    assert pending is not None and pending["metadata"]["name"] == "pending-cluster"
    stored = await sim.client().get("RayCluster", "pending-cluster", NS)
    assert stored["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]


@pytest.mark.parametrize("change", ["kuberay_version", "new_worker_group"])
async def test_reconcile_ray_cluster_updates_the_active_cluster_in_place(sim, change):
    """TestReconcileRayCluster_UpdateActiveCluster."""
    rs = await sim.client().create(rs_obj())
    cluster = cluster_for(rs, "active-cluster")
    if change == "kuberay_version":
        cluster["metadata"]["annotations"]["ray.io/kuberay-version"] = "new-version"
    else:
        rs["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(
            {**copy.deepcopy(WORKER), "groupName": "new-worker-group"})
    await sim.client().create(cluster)
    rs["status"] = {"activeServiceStatus": {"rayClusterName": "active-cluster"}}
    _active, pending = await reconciler(sim).reconcile_ray_cluster(rs)
    assert pending is None
    stored = await sim.client().get("RayCluster", "active-cluster", NS)
    assert stored["metadata"]["annotations"]["ray.io/kuberay-version"] == C.KUBERAY_VERSION
    assert len(stored["spec"]["workerGroupSpecs"]) == \
        len(rs["spec"]["rayClusterConfig"]["workerGroupSpecs"])


async def test_reconcile_ray_cluster_updates_the_pending_cluster_with_an_appended_group(sim):
    """TestReconcileRayCluster_UpdatePendingCluster."""
    rs = await sim.client().create(rs_obj())
    await sim.client().create(cluster_for(rs, "pending-cluster"))
    rs["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(
        {**copy.deepcopy(WORKER), "groupName": "new-worker-group"})
    rs["status"] = {"pendingServiceStatus": {"rayClusterName": "pending-cluster"}}
    active, _pending = await reconciler(sim).reconcile_ray_cluster(rs)
    assert active is None
    stored = await sim.client().get("RayCluster", "pending-cluster", NS)
    assert [g["groupName"] for g in stored["spec"]["workerGroupSpecs"]] == \
        ["worker-group-1", "new-worker-group"]
    assert stored["metadata"]["annotations"]["ray.io/num-worker-groups"] == "2"


async def _head_pod(sim: Any, cluster: str = "test-cluster") -> dict[str, Any]:
    return await sim.client().create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "head-pod", "namespace": NS,
                     "labels": {"ray.io/cluster": cluster, "ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "test-container", "image": "busybox"}]}})


@pytest.mark.parametrize(("exclude", "healthy", "label"), [
    (True, True, "false"), (False, True, "true"), (True, False, "false"), (False, False, "false")],
    ids=["running_excluded", "running", "unhealthy_excluded", "unhealthy"])
async def test_label_head_pod_for_serve_status(sim, exclude, healthy, label):
    """TestLabelHeadPodForServeStatus."""
    await _head_pod(sim)
    r = reconciler(sim, healthy=healthy)
    cluster = {"metadata": {"name": "test-cluster", "namespace": NS}}
    await r.update_head_pod_serve_label(rs_obj(), cluster, exclude)
    pod = await sim.client().get("Pod", "head-pod", NS)
    assert pod["metadata"]["labels"]["ray.io/serve"] == label
    assert isinstance(r.http_proxy_client_func, FakeProxy)
    assert len(r.http_proxy_client_func.calls) == (0 if exclude else 1)


async def test_a_referenced_cluster_without_head_pod_is_an_error(sim):
    cluster = {"metadata": {"name": "test-cluster", "namespace": NS}}
    with pytest.raises(RuntimeError, match="^found 0 head. cluster name test-cluster, "
                                           "namespace default$"):
        await reconciler(sim).update_head_pod_serve_label(rs_obj(), cluster, False)


async def test_reconcile_services_updates_the_selector_only_when_the_cluster_changes(sim):
    """TestReconcileServices_UpdateService: same cluster → no write; another cluster → the
    whole spec replaced, clusterIP kept."""
    rs = await sim.client().create(rs_obj())
    r = reconciler(sim)
    c1 = cluster_for(rs, "cluster-1")
    svc = await r.reconcile_services(rs, c1, C.SERVING_SERVICE)
    assert svc["spec"]["selector"] == {"ray.io/cluster": "cluster-1", "ray.io/serve": "true"}
    stored = await sim.client().get("Service", "test-service-serve-svc", NS)
    ip, rv = stored["spec"].get("clusterIP"), stored["metadata"]["resourceVersion"]
    again = await r.reconcile_services(rs, c1, C.SERVING_SERVICE)
    assert again["metadata"]["resourceVersion"] == rv
    moved = await r.reconcile_services(rs, cluster_for(rs, "cluster-2"), C.SERVING_SERVICE)
    assert moved["spec"]["selector"]["ray.io/cluster"] == "cluster-2"
    assert moved["spec"].get("clusterIP") == ip
    head = await r.reconcile_services(rs, c1, C.HEAD_SERVICE)
    assert head["metadata"]["name"] == "test-service-head-svc"
    assert head["spec"]["selector"]["ray.io/cluster"] == "cluster-1"
    assert head["metadata"]["ownerReferences"][0]["kind"] == "RayService"


@pytest.mark.parametrize(("delay", "expected"), [
    (None, RAY_CLUSTER_DELETION_DELAY_DURATION), (0, 0.0), (5, 5.0)],
    ids=["default", "zero", "positive"])
async def test_ray_cluster_deletion_delay_seconds(sim, delay, expected):
    """TestRayClusterDeletionDelaySeconds: a dangling cluster is scheduled now + delay."""
    spec = {} if delay is None else {"rayClusterDeletionDelaySeconds": delay}
    rs = await sim.client().create(rs_obj("test-rayservice", **spec))
    await sim.client().create(cluster_for(rs, "test-cluster"))
    await sim.sleep(10)
    r = reconciler(sim)
    assert await r.clean_up_ray_cluster_instance(rs) is True
    assert r.ray_cluster_deletion_timestamps == {"test-cluster": 10 + expected}


async def test_dangling_cluster_is_deleted_only_after_its_deadline_passed(sim):
    rs = await sim.client().create(rs_obj("test-rayservice", rayClusterDeletionDelaySeconds=5))
    await sim.client().create(cluster_for(rs, "test-cluster"))
    r = reconciler(sim)
    await r.clean_up_ray_cluster_instance(rs)
    await sim.sleep(5)
    await r.clean_up_ray_cluster_instance(rs)  # not *after* the deadline yet
    assert await sim.get("RayCluster", "test-cluster") is not None
    await sim.sleep(0.5)
    await r.clean_up_ray_cluster_instance(rs)
    assert await sim.get("RayCluster", "test-cluster") is None


async def test_ray_service_finalizer_is_added_then_kept_while_clusters_remain(sim):
    """TestRayServiceFinalizer: add; deleting with a cluster requeues and deletes it; the
    finalizer goes once no cluster remains."""
    rs = await sim.client().create(rs_obj())
    r = reconciler(sim)
    result = await r.reconcile(Request(NS, "test-service"))
    assert result.requeue_after == 2.0
    stored = await sim.client().get("RayService", "test-service", NS)
    assert stored["metadata"]["finalizers"] == ["ray.io/rayservice-finalizer"]
    await sim.client().create(cluster_for(rs, "test-service-abcde"))
    await sim.client().delete("RayService", "test-service", NS)
    result = await r.reconcile(Request(NS, "test-service"))
    assert result.requeue_after == 2.0
    assert await sim.get("RayCluster", "test-service-abcde") is None
    result = await r.reconcile(Request(NS, "test-service"))
    assert result.requeue_after == 0
    assert await sim.get("RayService", "test-service") is None


async def test_managed_by_an_external_controller_is_skipped(sim):
    """Test_RayServiceReconcileManagedBy: no finalizer, nothing written."""
    await sim.client().create(rs_obj(managedBy="kueue.x-k8s.io/multikueue"))
    result = await reconciler(sim).reconcile(Request(NS, "test-service"))
    assert result.is_zero()
    stored = await sim.client().get("RayService", "test-service", NS)
    assert not stored["metadata"].get("finalizers")


async def test_validation_failure_sets_ready_false_and_warns(sim):
    # Go's test stores the object through a fake client; the real CRD's schema (minimum: 0)
    # would refuse it, so it is served here without schema validation
    info = sim.api.kinds.resolve("RayService", "ray.io/v1")
    sim.api.kinds.register(attrs.evolve(info, validator=None))
    await sim.client().create(rs_obj(rayClusterDeletionDelaySeconds=-1))
    r = reconciler(sim)
    await r.reconcile(Request(NS, "test-service"))  # finalizer
    result = await r.reconcile(Request(NS, "test-service"))
    assert result.is_zero()
    stored = await sim.client().get("RayService", "test-service", NS)
    ready = condition(stored, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ValidationFailed")
    await r.recorder.flush()
    events = [e for e in await sim.client().list("Event", NS) if e["type"] == "Warning"]
    assert [e["reason"] for e in events] == ["InvalidRayServiceSpec"]
    assert events[0]["message"] == f"default/test-service: {ready['message']}"


async def test_handle_suspend_resume_resets_ready_to_initializing(sim):
    """TestHandleSuspendResumeResetsReadyToInitializing and TestHandleSuspendObservedGeneration."""
    await sim.sleep(100)
    rs = rs_obj(status={"conditions": [
        {"type": "Suspended", "status": "True", "reason": "SuspendComplete", "message": "",
         "lastTransitionTime": rfc3339(0)},
        {"type": "Ready", "status": "False", "reason": "SuspendComplete", "message": "",
         "lastTransitionTime": rfc3339(0)}]})
    rs["metadata"]["generation"] = 3
    r = reconciler(sim)
    result, err = await r.handle_suspend(rs)
    assert err is None and result.is_zero()
    ready = condition(rs, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Initializing")
    assert ready["lastTransitionTime"] == rfc3339(100)
    assert ready["observedGeneration"] == 3
    assert condition(rs, "Suspended")["reason"] == "RayServiceResumed"
    # Idle while suspended: nothing changes.
    idle = rs_obj(suspend=True, status={"observedGeneration": 1, "conditions": [
        {"type": "Suspended", "status": "True", "reason": "SuspendComplete", "message": "",
         "lastTransitionTime": rfc3339(0), "observedGeneration": 1}]})
    idle["metadata"]["generation"] = 5
    before = copy.deepcopy(idle)
    await r.handle_suspend(idle)
    assert idle == before
