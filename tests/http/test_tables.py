"""Table responses as kube-apiserver's printers build them, for what ``kubectl get`` and ``kubectl
get -o wide`` print: the wide columns (priority 1) of the built-ins, Events' own layout (no
leading Name column), Pod status reasons and restarts, and the OpenAPI schemas ``kubectl
explain`` reads for KubeRay's kinds."""

from __future__ import annotations

import httpx
import orjson

from emu.apiserver.kinds import KindInfo
from emu.http import tables
from emu.http.transport import BASE_URL, httpx_transport
from emu.http.wire import HttpRequest

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
NOW = 1_000_000.0


def stamp(seconds_ago: float) -> str:
    from emu.kernel.clock import rfc3339

    return rfc3339(NOW - seconds_ago)


def cells(kind: str, obj: dict, group: str = "") -> tuple[list[str], list[object]]:
    """The column names and the one row's cells of ``obj``'s Table."""
    class FakeSim:
        now = NOW

    info = KindInfo(group=group, version="v1", kind=kind, plural=kind.lower() + "s",
                    namespaced=True)
    table = tables.to_table(FakeSim(), info, obj, HttpRequest("GET", "/"))  # type: ignore[arg-type]
    return [c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"]


def test_deployment_wide_columns_name_containers_images_selector():
    dep = {"metadata": {"name": "web", "creationTimestamp": stamp(90)},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
               {"key": "tier", "operator": "In", "values": ["a", "b"]}]},
               "template": {"spec": {"containers": [{"name": "c1", "image": "nginx"},
                                                    {"name": "c2", "image": "busybox:1"}]}}},
           "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    names, row = cells("Deployment", dep, "apps")
    assert names == ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images",
                     "Selector"]
    assert row == ["web", "2/3", 3, 2, "90s", "c1,c2", "nginx,busybox:1", "app=web,tier in (a,b)"]


def test_node_wide_columns_and_roles():
    node = {"metadata": {"name": "n1", "creationTimestamp": stamp(30), "labels": {
        "node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "gpu"}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "False"}],
                   "addresses": [{"type": "Hostname", "address": "n1"},
                                 {"type": "InternalIP", "address": "10.0.0.9"}],
                   "nodeInfo": {"kubeletVersion": "v1.33.0",
                                "containerRuntimeVersion": "containerd://1.7.0"}}}
    names, row = cells("Node", node)
    assert names[5:] == ["Internal-IP", "External-IP", "OS-Image", "Kernel-Version",
                         "Container-Runtime"]
    assert row == ["n1", "NotReady,SchedulingDisabled", "control-plane,gpu", "30s", "v1.33.0",
                   "10.0.0.9", "<none>", "<unknown>", "<unknown>", "containerd://1.7.0"]


def test_events_have_no_leading_name_and_read_both_event_apis():
    core = {"metadata": {"name": "rc.1"}, "type": "Normal", "reason": "Created",
            "involvedObject": {"kind": "RayCluster", "name": "rc", "fieldPath": "spec"},
            "source": {"component": "raycluster-controller"}, "message": " made it \n",
            "firstTimestamp": stamp(300), "lastTimestamp": stamp(60), "count": 4}
    names, row = cells("Event", core)
    assert names == ["Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message",
                     "First Seen", "Count", "Name"]
    assert row == ["60s", "Normal", "Created", "raycluster/rc", "spec", "raycluster-controller",
                   "made it", "5m", 4, "rc.1"]
    new = {"metadata": {"name": "p.2"}, "type": "Warning", "reason": "BackOff",
           "regarding": {"kind": "Pod", "name": "p"}, "note": "back-off",
           "eventTime": stamp(10), "reportingController": "kubelet",
           "reportingInstance": "node-1"}
    _, row = cells("Event", new, "events.k8s.io")
    assert row == ["10s", "Warning", "BackOff", "pod/p", "", "kubelet, node-1", "back-off",
                   "10s", 1, "p.2"]


def test_pod_status_reasons_and_restarts_with_last_restart_age():
    pod = {"metadata": {"name": "p", "creationTimestamp": stamp(600)},
           "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "node-1"},
           "status": {"phase": "Running", "podIPs": [{"ip": "10.244.1.5"}],
                      "containerStatuses": [
                          {"name": "a", "ready": True, "restartCount": 2,
                           "state": {"running": {}},
                           "lastState": {"terminated": {"finishedAt": stamp(120)}}},
                          {"name": "b", "ready": False, "restartCount": 1,
                           "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    names, row = cells("Pod", pod)
    assert names[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert row == ["p", "1/2", "CrashLoopBackOff", "3 (2m ago)", "10m", "10.244.1.5", "node-1",
                   "<none>", "<none>"]
    pod["spec"]["initContainers"] = [{"name": "init"}]
    pod["status"]["initContainerStatuses"] = [{"name": "init", "state": {"running": {}}}]
    pod["status"]["conditions"] = [{"type": "Initialized", "status": "False"}]
    assert cells("Pod", pod)[1][2] == "Init:0/1"
    pod["metadata"]["deletionTimestamp"] = stamp(1)
    assert cells("Pod", pod)[1][2] == "Terminating"


def test_service_job_endpoints_and_bindings():
    svc = {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.7",
                                               "selector": {"b": "2", "a": "1"},
                                               "ports": [{"port": 80, "nodePort": 30080,
                                                          "protocol": "TCP"}]}}
    _, row = cells("Service", svc)
    assert row[1:5] == ["LoadBalancer", "10.96.0.7", "<pending>", "80:30080/TCP"]
    assert row[6] == "a=1,b=2"
    job = {"metadata": {"name": "j"}, "spec": {"parallelism": 2, "template": {"spec": {
        "containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {"succeeded": 0, "startTime": stamp(30)}}
    names, row = cells("Job", job, "batch")
    assert names[-3:] == ["Containers", "Images", "Selector"]
    assert row[1:4] == ["Running", "0/1 of 2", "30s"] and row[-1] == "<none>"
    ep = {"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": f"10.0.0.{i}"}
                                                                for i in range(5)],
                                                  "ports": [{"port": 8080}]}]}
    assert cells("Endpoints", ep)[1][1] == \
        "10.0.0.0:8080,10.0.0.1:8080,10.0.0.2:8080 + 2 more..."
    rb = {"metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "reader"},
          "subjects": [{"kind": "User", "name": "alice"},
                       {"kind": "ServiceAccount", "name": "robot", "namespace": "ns"}]}
    _, row = cells("RoleBinding", rb, "rbac.authorization.k8s.io")
    assert row[1] == "Role/reader" and row[3:] == ["alice", "", "ns/robot"]


async def test_events_table_over_http_and_ray_schemas_in_openapi(sim):
    transport = httpx_transport(sim)
    async with httpx.AsyncClient(base_url=BASE_URL, transport=transport) as c:
        ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x.1"},
              "involvedObject": {"kind": "Pod", "name": "x", "namespace": "default"},
              "reason": "Started", "message": "started", "type": "Normal"}
        assert (await c.post("/api/v1/namespaces/default/events", json=ev)).status_code == 201
        table = (await c.get("/api/v1/namespaces/default/events",
                             headers={"accept": TABLE})).json()
        assert table["columnDefinitions"][0]["name"] == "Last Seen"
        assert [d["name"] for d in table["columnDefinitions"] if d["priority"] == 0] == [
            "Last Seen", "Type", "Reason", "Object", "Message"]
        assert table["rows"][0]["cells"][9] == "x.1"
        doc = (await c.get("/openapi/v3/apis/ray.io/v1")).json()
        spec = doc["components"]["schemas"]["io.ray.v1.RayCluster"]["properties"]["spec"]
        assert {"headGroupSpec", "workerGroupSpecs", "rayVersion"} <= set(spec["properties"])
        assert doc["components"]["schemas"]["io.ray.v1.RayCluster"]["properties"]["kind"][
            "description"].startswith("Kind is")


async def test_scale_subresource_as_a_table(sim):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    async with httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim)) as c:
        assert (await c.post("/apis/apps/v1/namespaces/default/deployments",
                             json=dep)).status_code == 201
        table = (await c.get("/apis/apps/v1/namespaces/default/deployments/d/scale",
                             headers={"accept": TABLE})).json()
        assert [d["name"] for d in table["columnDefinitions"]] == ["Name", "Desired",
                                                                   "Available"]
        assert table["rows"][0]["cells"] == ["d", 2, 0]


async def test_metadata_only_lists_gets_and_watches(sim):
    """client-go's metadata client (controller-runtime's metadata-only watches) asks for
    ``PartialObjectMetadata(List)``, protobuf first."""
    meta_list = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;"
                 "g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;"
                 "g=meta.k8s.io;v=v1,application/json")
    meta_one = meta_list.replace("PartialObjectMetadataList", "PartialObjectMetadata")
    cms = "/api/v1/namespaces/default/configmaps"
    async with httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim)) as c:
        for name in ("a", "b"):
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": name, "labels": {"x": name}}, "data": {"k": "v"}}
            assert (await c.post(cms, json=cm)).status_code == 201
        listed = (await c.get(cms, params={"limit": "1"}, headers={"accept": meta_list})).json()
        assert listed["kind"] == "PartialObjectMetadataList" and listed["metadata"]["continue"]
        assert listed["items"] == [{"kind": "PartialObjectMetadata",
                                    "apiVersion": "meta.k8s.io/v1",
                                    "metadata": listed["items"][0]["metadata"]}]
        assert listed["items"][0]["metadata"]["labels"] == {"x": "a"}
        one = (await c.get(f"{cms}/b", headers={"accept": meta_one})).json()
        assert one["kind"] == "PartialObjectMetadata" and "data" not in one
        async with c.stream("GET", cms, params={"watch": "1", "resourceVersion": "0",
                                                "timeoutSeconds": "1"},
                            headers={"accept": meta_one}) as resp:
            events = [orjson.loads(line) async for line in resp.aiter_lines() if line]
        assert [e["object"]["kind"] for e in events] == ["PartialObjectMetadata"] * 2


def test_stored_only_kinds_have_kubes_columns():
    cj = {"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {
        "spec": {"template": {"spec": {"containers": [{"name": "x", "image": "busybox"}]}}}}}}
    names, row = cells("CronJob", cj, "batch")
    assert names[:7] == ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule",
                         "Age"]
    assert row[1:5] == ["*/5 * * * *", "<none>", False, 0] and row[7:9] == ["x", "busybox"]
    ds = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                                              "template": {"spec": {
                                                  "nodeSelector": {"disk": "ssd"},
                                                  "containers": [{"name": "x", "image": "i"}]}}},
          "status": {"desiredNumberScheduled": 3, "numberReady": 2}}
    names, row = cells("DaemonSet", ds, "apps")
    assert row[1:7] == [3, 0, 2, 0, 0, "disk=ssd"] and row[-1] == "a=b"
    rc = {"metadata": {"name": "r"}, "spec": {"replicas": 2, "selector": {"a": "b"}}}
    assert cells("ReplicationController", rc)[1][1:4] == [2, 0, 0]
