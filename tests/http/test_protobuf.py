"""Protobuf request bodies (what Go clients send for built-in kinds), encoded here by hand from
field numbers, read by emu.http.protobuf; and the Accept negotiation (406, YAML)."""

from __future__ import annotations

import httpx
import pytest
import yaml

from emu.http import protobuf
from emu.http.transport import BASE_URL, httpx_transport

PROTO = {"content-type": "application/vnd.kubernetes.protobuf"}


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def ld(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field."""
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | 2) + varint(len(data)) + data


def num(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return ld(number, ld(1, key) + ld(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)


def meta(name: str, **labels: str) -> bytes:
    # as Go writes it: the empty non-pointer fields too (selfLink, generation, a zero time)
    out = ld(1, name) + ld(2, "") + ld(4, "") + num(7, 0) + ld(8, b"")
    for k, v in labels.items():
        out += entry(11, k, v)
    return out


def container() -> bytes:
    env_from_field = ld(3, ld(1, ld(1, "v1") + ld(2, "metadata.name")))  # EnvVarSource.fieldRef
    secret_ref = ld(3, ld(4, ld(1, ld(1, "creds")) + ld(2, "token") + num(3, 0)))
    probe = ld(1, ld(2, ld(1, "/healthz") + ld(2, num(1, 0) + num(2, 8080)) + ld(4, "HTTP"))) \
        + num(2, 0) + num(3, 1) + num(4, 5) + num(5, 1) + num(6, 3)
    tcp_probe = ld(1, ld(3, ld(1, num(1, 1) + ld(3, "gcs")))) + num(4, 2)
    resources = entry(1, "cpu", ld(1, "500m")) + entry(2, "memory", ld(1, "1Gi"))
    return (ld(1, "ray-head") + ld(2, "rayproject/ray:2.9.0") + ld(3, "ray") + ld(3, "start")
            + ld(4, "--head") + ld(5, "")
            + ld(6, ld(1, "gcs") + num(2, 0) + num(3, 6379) + ld(4, "TCP") + ld(5, ""))
            + ld(7, ld(1, "POD") + ld(2, "") + env_from_field)
            + ld(7, ld(1, "TOKEN") + secret_ref) + ld(7, ld(1, "PLAIN") + ld(2, "x"))
            + ld(8, resources) + ld(9, ld(1, "logs") + num(2, 0) + ld(3, "/tmp/ray"))
            + ld(10, probe) + ld(11, tcp_probe) + ld(14, "IfNotPresent")
            + num(16, 0) + num(17, 0) + num(18, 0))


def pod_spec() -> bytes:
    return (ld(1, ld(1, "logs") + ld(2, ld(2, ld(1, ""))))  # emptyDir: {} (medium "")
            + ld(1, ld(1, "cfg") + ld(2, ld(19, ld(1, ld(1, "settings")) + num(3, 420))))
            + ld(2, container()) + ld(3, "Always") + num(4, 0) + entry(7, "pool", "cpu")
            + ld(8, "ray") + num(11, 0)
            + ld(22, ld(1, "gpu") + ld(2, "Exists") + ld(4, "NoSchedule"))
            + num(30, 0))


def deployment() -> bytes:
    selector = entry(1, "app", "ray") + ld(2, ld(1, "tier") + ld(2, "In") + ld(3, "a")
                                           + ld(3, "b"))
    template = ld(1, meta("", app="ray")) + ld(2, pod_spec())
    strategy = ld(1, "RollingUpdate") + ld(2, ld(1, num(1, 1) + ld(3, "25%"))
                                           + ld(2, num(1, 0) + num(2, 1)))
    spec = (num(1, 0) + ld(2, selector) + ld(3, template) + ld(4, strategy) + num(5, 0)
            + num(6, 10))
    status = ld(1, b"") + num(2, 0)  # Go always writes status; the main resource ignores it
    return envelope("apps/v1", "Deployment", ld(1, meta("ray-head", app="ray")) + ld(2, spec)
                    + ld(3, status))


def test_a_deployment_with_a_full_pod_template_reads_as_its_json():
    obj = protobuf.decode(deployment())
    assert obj["apiVersion"] == "apps/v1" and obj["kind"] == "Deployment"
    assert obj["metadata"] == {"name": "ray-head", "labels": {"app": "ray"}}
    spec = obj["spec"]
    assert spec["replicas"] == 0 and spec["revisionHistoryLimit"] == 10
    assert "minReadySeconds" not in spec  # a non-pointer zero is what Go always writes
    assert spec["selector"] == {"matchLabels": {"app": "ray"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "25%", "maxSurge": 1}}
    pod = spec["template"]["spec"]
    assert pod["volumes"] == [{"name": "logs", "emptyDir": {}},
                              {"name": "cfg", "configMap": {"name": "settings",
                                                            "defaultMode": 420}}]
    assert pod["terminationGracePeriodSeconds"] == 0 and pod["enableServiceLinks"] is False
    assert "hostNetwork" not in pod and pod["nodeSelector"] == {"pool": "cpu"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (c,) = pod["containers"]
    assert c["command"] == ["ray", "start"] and c["args"] == ["--head"]
    assert c["ports"] == [{"name": "gcs", "containerPort": 6379, "protocol": "TCP"}]
    assert c["env"] == [
        {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                   "fieldPath": "metadata.name"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token",
                                                         "optional": False}}},
        {"name": "PLAIN", "value": "x"}]
    assert c["resources"] == {"limits": {"cpu": "500m"}, "requests": {"memory": "1Gi"}}
    assert c["volumeMounts"] == [{"name": "logs", "mountPath": "/tmp/ray"}]
    assert c["livenessProbe"] == {"httpGet": {"path": "/healthz", "port": 8080,
                                              "scheme": "HTTP"},
                                  "timeoutSeconds": 1, "periodSeconds": 5,
                                  "successThreshold": 1, "failureThreshold": 3}
    assert c["readinessProbe"] == {"tcpSocket": {"port": "gcs"}, "periodSeconds": 2}
    assert c["imagePullPolicy"] == "IfNotPresent" and "stdin" not in c


def test_lease_times_and_negative_numbers():
    renew = num(1, 1_700_000_000) + num(2, 123_456_000)  # a MicroTime: seconds, nanos
    spec = ld(1, "") + num(2, 15) + ld(4, renew) + num(5, 0)
    obj = protobuf.decode(envelope("coordination.k8s.io/v1", "Lease",
                                   ld(1, meta("leader")) + ld(2, spec)))
    # a pointer's empty string and zero are kept: they were set (a released lease)
    assert obj["spec"] == {"holderIdentity": "", "leaseDurationSeconds": 15,
                           "renewTime": "2023-11-14T22:13:20.123456Z", "leaseTransitions": 0}
    grace = protobuf.decode(envelope("v1", "Pod", ld(1, meta("p")) + ld(2, num(5, -1))))
    assert grace["spec"] == {"activeDeadlineSeconds": -1}


def test_unread_fields_and_kinds_are_refused_by_name():
    ephemeral = ld(2, ld(2, ld(1, "c")) + ld(34, ld(1, ld(1, "debug"))))
    with pytest.raises(Exception, match="field 34 of the protobuf message PodSpec"):
        protobuf.decode(envelope("v1", "Pod", ld(1, meta("p")) + ephemeral))
    with pytest.raises(Exception, match="must be sent as JSON"):
        protobuf.decode(envelope("apps/v1", "StatefulSet", ld(1, meta("s"))))
    with pytest.raises(Exception, match="magic"):
        protobuf.decode(b"{}")


@pytest.mark.parametrize("kind", sorted(protobuf.KINDS))
def test_every_kind_read_decodes_its_metadata(kind):
    api_version, name = kind
    obj = protobuf.decode(envelope(api_version, name, ld(1, meta("x", team="a"))))
    assert obj == {"apiVersion": api_version, "kind": name,
                   "metadata": {"name": "x", "labels": {"team": "a"}}}


def test_scheduling_and_volume_fields_of_a_pod():
    term = ld(1, ld(1, "zone") + ld(2, "In") + ld(3, "a"))  # NodeSelectorTerm.matchExpressions
    node_affinity = ld(1, ld(1, term)) + ld(2, num(1, 50) + ld(2, term))
    anti = ld(2, num(1, 100) + ld(2, ld(1, entry(1, "app", "ray")) + ld(3, "kubernetes.io/host")))
    affinity = ld(1, node_affinity) + ld(3, anti)
    spread = num(1, 1) + ld(2, "zone") + ld(3, "DoNotSchedule") + ld(4, entry(1, "app", "ray"))
    projected = ld(1, ld(1, ld(1, ld(1, "creds")) + ld(2, ld(1, "a") + ld(2, "b"))))  # secret
    projected += ld(1, ld(4, ld(1, "vault") + num(2, 3600) + ld(3, "token")))
    seccomp = ld(11, ld(1, "RuntimeDefault"))
    spec = (ld(1, ld(1, "p") + ld(2, ld(26, projected)))
            + ld(2, ld(1, "c") + ld(15, seccomp + num(5, 1)))
            + ld(18, affinity) + ld(33, spread) + ld(36, ld(1, "linux")))
    pod = protobuf.decode(envelope("v1", "Pod", ld(1, meta("p")) + ld(2, spec)))["spec"]
    expr = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert pod["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [expr]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
                                                                 "preference": expr}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "ray"}},
                                                "topologyKey": "kubernetes.io/host"}}]}}
    assert pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "ray"}}}]
    assert pod["volumes"] == [{"name": "p", "projected": {"sources": [
        {"secret": {"name": "creds", "items": [{"key": "a", "path": "b"}]}},
        {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600,
                                 "path": "token"}}]}}]
    assert pod["containers"][0]["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True}
    assert pod["os"] == {"name": "linux"}


def test_nodes_and_events_of_both_groups():
    taint = ld(5, ld(1, "gpu") + ld(3, "NoSchedule") + ld(4, b""))
    node = protobuf.decode(envelope("v1", "Node", ld(1, meta("n1"))
                                    + ld(2, ld(1, "10.0.0.0/24") + num(4, 1) + taint)))
    assert node["spec"] == {"podCIDR": "10.0.0.0/24", "unschedulable": True,
                            "taints": [{"key": "gpu", "effect": "NoSchedule"}]}
    ref = ld(1, "Pod") + ld(2, "default") + ld(3, "p")
    when = num(1, 1_700_000_000) + num(2, 5_000)
    new = protobuf.decode(envelope("events.k8s.io/v1", "Event", ld(1, meta("e")) + ld(2, when)
                                   + ld(4, "kuberay-operator") + ld(5, "op-1") + ld(6, "Create")
                                   + ld(7, "Created") + ld(8, ref) + ld(10, "made it")
                                   + ld(11, "Normal") + ld(12, b"") + ld(13, b"")
                                   + num(15, 0)))
    assert new["eventTime"] == "2023-11-14T22:13:20.000005Z"
    assert new["regarding"] == {"kind": "Pod", "namespace": "default", "name": "p"}
    assert {k: new[k] for k in ("reportingController", "reason", "note", "type")} == {
        "reportingController": "kuberay-operator", "reason": "Created", "note": "made it",
        "type": "Normal"}
    assert "deprecatedCount" not in new and "deprecatedSource" not in new


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim, identity="go"),
                             headers={"accept": "application/vnd.kubernetes.protobuf, */*"})


async def test_a_go_client_creates_a_deployment_in_protobuf(sim):
    async with client(sim) as c:
        r = await c.post("/apis/apps/v1/namespaces/default/deployments", content=deployment(),
                         headers=PROTO)
        assert r.status_code == 201, r.text
        assert r.headers["content-type"] == "application/json"  # Go's Accept allows JSON
        stored = r.json()
        assert stored["spec"]["replicas"] == 0
        assert stored["spec"]["template"]["spec"]["containers"][0]["name"] == "ray-head"
        # a Deployment's status is not read from protobuf: its status write is refused, not
        # dropped
        r = await c.put("/apis/apps/v1/namespaces/default/deployments/ray-head/status",
                        content=deployment(), headers=PROTO)
        assert r.status_code == 415
        assert r.json()["message"] == (
            "protobuf bodies are read on the status subresource of Job and Pod only; send the "
            "status of apps/v1 Deployment as JSON (Go clients: ContentType application/json on "
            "the rest.Config)")


async def test_a_go_client_writes_pod_and_job_status_in_protobuf(sim):
    """What KubeRay's envtest suite does with controller-runtime's client: mark a Pod Running
    and Ready, and a Job Complete, through ``/status`` with protobuf bodies."""
    time = num(1, 1_700_000_000)  # a Time message: seconds
    running = ld(2, ld(1, time))  # ContainerState.running.startedAt
    container_status = (ld(1, "ray-head") + ld(2, running) + ld(3, b"") + num(4, 1) + num(5, 2)
                        + ld(6, "rayproject/ray:2.9.0") + ld(7, "") + ld(8, "") + num(9, 0))
    status = (ld(1, "Running") + ld(2, ld(1, "Ready") + ld(2, "True") + ld(3, b"") + ld(4, time))
              + ld(5, "10.0.0.1") + ld(6, "10.0.0.7") + ld(12, ld(1, "10.0.0.7"))
              + ld(7, time) + ld(8, container_status) + ld(9, "Burstable"))
    async with client(sim) as c:
        r = await c.post("/api/v1/namespaces/default/pods", content=envelope(
            "v1", "Pod", ld(1, meta("head")) + ld(2, pod_spec())), headers=PROTO)
        assert r.status_code == 201, r.text
        rv = r.json()["metadata"]["resourceVersion"]
        back = ld(1, "head") + ld(3, "default") + ld(6, rv)
        r = await c.put("/api/v1/namespaces/default/pods/head/status", content=envelope(
            "v1", "Pod", ld(1, back) + ld(2, pod_spec()) + ld(3, status)), headers=PROTO)
        assert r.status_code == 200, r.text
        got = r.json()["status"]
        assert got["phase"] == "Running" and got["podIP"] == "10.0.0.7"
        assert got["conditions"] == [{"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2023-11-14T22:13:20Z"}]
        # started: false is a *bool and kept; ready: true; restartCount read as a number
        assert got["containerStatuses"] == [{
            "name": "ray-head", "state": {"running": {"startedAt": "2023-11-14T22:13:20Z"}},
            "ready": True, "restartCount": 2, "image": "rayproject/ray:2.9.0",
            "started": False}]
        job_spec = ld(6, ld(2, ld(2, container()) + ld(3, "Never"))) + num(7, 0)
        r = await c.post("/apis/batch/v1/namespaces/default/jobs", content=envelope(
            "batch/v1", "Job", ld(1, meta("submit")) + ld(2, job_spec)), headers=PROTO)
        assert r.status_code == 201, r.text
        created = r.json()
        back = ld(1, "submit") + ld(3, "default") + ld(6, created["metadata"]["resourceVersion"])
        condition = ld(1, "Complete") + ld(2, "True") + ld(4, time)
        job_status = ld(1, condition) + ld(2, time) + ld(3, time) + num(4, 0) + num(5, 1)
        spec = ld(4, ld(1, b"".join(entry(1, k, v) for k, v in
                                    created["spec"]["selector"]["matchLabels"].items())))
        r = await c.put("/apis/batch/v1/namespaces/default/jobs/submit/status", content=envelope(
            "batch/v1", "Job", ld(1, back) + ld(2, spec + job_spec) + ld(3, job_status)),
            headers=PROTO)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == {
            "conditions": [{"type": "Complete", "status": "True",
                            "lastTransitionTime": "2023-11-14T22:13:20Z"}],
            "startTime": "2023-11-14T22:13:20Z", "completionTime": "2023-11-14T22:13:20Z",
            "succeeded": 1}


async def test_a_go_client_deletes_and_scales_in_protobuf(sim):
    async with client(sim) as c:
        r = await c.post("/apis/apps/v1/namespaces/default/deployments", content=deployment(),
                         headers=PROTO)
        assert r.status_code == 201, r.text
        uid = r.json()["metadata"]["uid"]
        # a typed client's UpdateScale: an autoscaling/v1 Scale; replicas 0 is always written
        scale = ld(1, meta("ray-head")) + ld(2, num(1, 0))
        r = await c.put("/apis/apps/v1/namespaces/default/deployments/ray-head/scale",
                        content=envelope("autoscaling/v1", "Scale", scale), headers=PROTO)
        assert r.status_code == 200, r.text
        scale = ld(1, meta("ray-head")) + ld(2, num(1, 3))
        r = await c.put("/apis/apps/v1/namespaces/default/deployments/ray-head/scale",
                        content=envelope("autoscaling/v1", "Scale", scale), headers=PROTO)
        assert r.json()["spec"]["replicas"] == 3
        assert sim.api.get("Deployment", "ray-head", "default",
                           api_version="apps/v1")["spec"]["replicas"] == 3
        # a typed client's Delete: DeleteOptions in the client's own group version
        stale = envelope("apps/v1", "DeleteOptions", ld(2, ld(1, "not-the-uid")) + ld(4, "Orphan"))
        r = await c.request("DELETE", "/apis/apps/v1/namespaces/default/deployments/ray-head",
                            content=stale, headers=PROTO)
        assert r.status_code == 409, r.text  # the uid precondition was read
        options = envelope("apps/v1", "DeleteOptions", num(1, 0) + ld(2, ld(1, uid))
                           + ld(4, "Orphan") + ld(5, "All"))
        r = await c.request("DELETE", "/apis/apps/v1/namespaces/default/deployments/ray-head",
                            content=options, headers=PROTO)
        assert r.status_code == 200, r.text
        # dryRun=All was read too: the Deployment is still there
        assert sim.api.get("Deployment", "ray-head", "default", api_version="apps/v1")
    assert protobuf.decode(options) == {
        "apiVersion": "apps/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
        "preconditions": {"uid": uid}, "propagationPolicy": "Orphan", "dryRun": ["All"]}


async def test_a_go_client_updates_with_the_metadata_it_read(sim):
    async with client(sim) as c:
        r = await c.post("/api/v1/namespaces/default/configmaps", content=envelope(
            "v1", "ConfigMap", ld(1, meta("cfg")) + entry(2, "k", "1")), headers=PROTO)
        assert r.status_code == 201, r.text
        got = r.json()["metadata"]
        # what a Go client writes back: every field of the ObjectMeta it read, managedFields too
        fields_v1 = ld(1, b'{"f:data":{"f:k":{}}}')
        managed = ld(1, "my-operator") + ld(2, "Update") + ld(3, "v1") \
            + ld(4, num(1, 1_700_000_000)) + ld(6, "FieldsV1") + ld(7, fields_v1)
        back = (ld(1, "cfg") + ld(3, "default") + ld(4, "") + ld(5, got["uid"])
                + ld(6, got["resourceVersion"]) + num(7, 0) + ld(8, num(1, 1_700_000_000))
                + ld(17, managed))
        r = await c.put("/api/v1/namespaces/default/configmaps/cfg", content=envelope(
            "v1", "ConfigMap", ld(1, back) + entry(2, "k", "2")), headers=PROTO)
        assert r.status_code == 200, r.text
        assert r.json()["data"] == {"k": "2"}
        # and a stale one is a conflict, as in JSON
        r = await c.put("/api/v1/namespaces/default/configmaps/cfg", content=envelope(
            "v1", "ConfigMap", ld(1, back) + entry(2, "k", "3")), headers=PROTO)
        assert r.status_code == 409
    decoded = protobuf.message("ObjectMeta", back)
    assert decoded["managedFields"] == [{
        "manager": "my-operator", "operation": "Update", "apiVersion": "v1",
        "time": "2023-11-14T22:13:20Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:k": {}}}}]
    assert decoded["creationTimestamp"] == "2023-11-14T22:13:20Z"


async def test_a_go_event_recorder_and_leader_election_in_protobuf(sim):
    """What client-go's EventRecorder and its Lease lock send, accepted by the API server."""
    ref = ld(1, "RayCluster") + ld(2, "default") + ld(3, "rc") + ld(4, "u-1") + ld(5, "ray.io/v1")
    stamp = num(1, 1_700_000_000)
    event = (ld(1, meta("rc.17a")) + ld(2, ref) + ld(3, "CreatedService")
             + ld(4, "Created service default/rc-head-svc")
             + ld(5, ld(1, "raycluster-controller") + ld(2, "")) + ld(6, stamp) + ld(7, stamp)
             + num(8, 1) + ld(9, "Normal") + ld(10, b"") + ld(12, "") + ld(14, "")
             + ld(15, ""))
    lease = ld(1, meta("kuberay-operator")) + ld(2, ld(1, "op-7f9") + num(2, 15)
                                                 + ld(3, num(1, 1_700_000_000))
                                                 + ld(4, num(1, 1_700_000_002)) + num(5, 0))
    async with client(sim) as c:
        r = await c.post("/api/v1/namespaces/default/events", headers=PROTO,
                         content=envelope("v1", "Event", event))
        assert r.status_code == 201, r.text
        got = r.json()
        assert got["involvedObject"]["kind"] == "RayCluster" and got["count"] == 1
        assert got["source"] == {"component": "raycluster-controller"}
        assert got["firstTimestamp"] == "2023-11-14T22:13:20Z" and "eventTime" not in got
        r = await c.post("/apis/coordination.k8s.io/v1/namespaces/default/leases",
                         headers=PROTO, content=envelope("coordination.k8s.io/v1", "Lease",
                                                         lease))
        assert r.status_code == 201, r.text
        assert r.json()["spec"] == {"holderIdentity": "op-7f9", "leaseDurationSeconds": 15,
                                    "acquireTime": "2023-11-14T22:13:20.000000Z",
                                    "renewTime": "2023-11-14T22:13:22.000000Z",
                                    "leaseTransitions": 0}


async def test_accept_negotiation(sim):
    async with httpx.AsyncClient(base_url=BASE_URL,
                                 transport=httpx_transport(sim, identity="curl")) as c:
        r = await c.post("/api/v1/namespaces/default/configmaps",
                         json={"metadata": {"name": "a"}, "data": {"k": "v"}})
        assert r.status_code == 201
        only_proto = {"accept": "application/vnd.kubernetes.protobuf"}
        r = await c.get("/api/v1/namespaces/default/configmaps/a", headers=only_proto)
        assert r.status_code == 406 and r.json()["reason"] == "NotAcceptable"
        r = await c.get("/apis/ray.io/v1/namespaces/default/rayclusters", headers=only_proto)
        assert r.status_code == 406  # a custom resource: JSON only, as on a real server
        r = await c.get("/api/v1/namespaces/default/configmaps/a",
                        headers={"accept": "application/yaml"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/yaml"
        assert yaml.safe_load(r.text)["data"] == {"k": "v"}
        listed = await c.get("/api/v1/namespaces/default/configmaps",
                             headers={"accept": "application/yaml, application/json"})
        assert yaml.safe_load(listed.text)["items"][0]["metadata"]["name"] == "a"
        r = await c.get("/api/v1/namespaces/default/configmaps",
                        params={"watch": "1"}, headers={"accept": "application/yaml"})
        assert r.status_code == 406  # kube has no YAML watch stream either
