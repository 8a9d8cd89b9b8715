"""What a kube-apiserver user reaches beyond the basic verbs, in-process on virtual time: Pod
logs of the current and the previous container run with ``sinceSeconds``/``limitBytes``, and the
clear 400s of the subresources this emulator does not serve (exec, attach, port-forward, proxy,
ephemeral containers) in place of bare 404s."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from emu.http.transport import BASE_URL, httpx_transport

PODS = "/api/v1/namespaces/default/pods"


def client(sim) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim),
                             headers={"user-agent": "test-client/1.0"})


async def _crasher(ctx) -> int:
    ctx.set_ready()
    ctx.process.log("run")
    await asyncio.sleep(5)
    ctx.process.log("failing")
    return 1


@pytest.mark.emu(cluster=True)
async def test_logs_of_current_and_previous_runs_since_and_limit(sim):
    sim.programs.register("emu-test/crasher", _crasher)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crash"},
           "spec": {"containers": [{"name": "main", "image": "emu-test/crasher:1"}]}}
    log = f"{PODS}/crash/log"
    async with client(sim) as c:
        assert (await c.post(PODS, json=pod)).status_code == 201
        await sim.wait_for("Pod", "crash", lambda p: (p.get("status") or {}).get("phase")
                           == "Running")
        first = await c.get(log, params={"previous": "true"})
        assert first.status_code == 400
        assert first.json()["message"] == \
            'previous terminated container "main" in pod "crash" not found'
        await sim.wait_for("Pod", "crash", lambda p: any(
            s.get("restartCount", 0) >= 1 and "running" in (s.get("state") or {})
            for s in (p.get("status") or {}).get("containerStatuses") or []))
        current = (await c.get(log)).text.splitlines()
        previous = (await c.get(log, params={"previous": "true"})).text.splitlines()
        # each shows one run: it starts with the process's start and has one "run" line
        assert [line.split()[1] for line in current][:2] == ["process_started", "run"]
        assert [line.split()[1] for line in current].count("run") == 1
        assert [line.split()[1] for line in previous][:3] == ["process_started", "run",
                                                              "failing"]
        assert previous != current[:len(previous)]
        await sim.sleep(3)
        recent = (await c.get(log, params={"sinceSeconds": "2"})).text
        assert recent == ""  # the current run wrote its lines more than 2 s ago
        assert (await c.get(log, params={"sinceSeconds": "600"})).text.splitlines() == current
        limited = (await c.get(log, params={"limitBytes": "10"})).text
        assert limited == "\n".join(current)[:10]
        bad = await c.get(log, params={"sinceSeconds": "1", "sinceTime": "2026-01-01T00:00:00Z"})
        assert bad.status_code == 400


@pytest.mark.emu(cluster=True)
async def test_unserved_subresources_say_what_to_use_instead(sim):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    async with client(sim) as c:
        assert (await c.post(PODS, json=pod)).status_code == 201
        for sub, method, words in (("exec", "POST", "kubectl logs"),
                                   ("attach", "POST", "kubectl logs"),
                                   ("portforward", "GET", "--expose"),
                                   ("ephemeralcontainers", "PATCH", "kubectl describe")):
            r = await c.request(method, f"{PODS}/p/{sub}")
            assert r.status_code == 400, (sub, r.text)
            assert r.json()["reason"] == "BadRequest" and words in r.json()["message"]
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}
        assert (await c.post("/api/v1/namespaces/default/serviceaccounts",
                             json=sa)).status_code == 201
        r = await c.post("/api/v1/namespaces/default/serviceaccounts/robot/token", json={})
        assert r.status_code == 201 and r.json()["status"]["token"]  # served now
        r = await c.get("/api/v1/namespaces/default/services/nope/proxy")
        assert r.status_code == 404 and r.json()["message"] == 'services "nope" not found'
        r = await c.get("/api/v1/nodes/node-1/proxy")
        assert r.status_code == 400
        r = await c.get(f"{PODS}/p/nonsense")
        assert r.status_code == 404


SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def ssar(**attrs: str) -> dict:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}


@pytest.mark.emu(rbac=True)
async def test_auth_reviews_answer_from_the_worlds_rbac(sim):
    from test_protobuf import envelope, ld

    from emu.apiserver.rbac import UserInfo

    async with client(sim) as c:
        r = await c.post(SSAR, json=ssar(verb="create", resource="pods", namespace="x"))
        assert r.status_code == 201 and r.json()["status"] == {"allowed": True}
        who = await c.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           json={"apiVersion": "authentication.k8s.io/v1",
                                 "kind": "SelfSubjectReview"})
        assert who.json()["status"]["userInfo"] == {
            "username": "test-client", "groups": ["system:masters", "system:authenticated"]}
        # kubectl posts them in protobuf
        raw = ld(2, ld(1, ld(1, "x") + ld(2, "list") + ld(5, "secrets")))
        r = await c.post(SSAR, content=envelope("authorization.k8s.io/v1",
                                                "SelfSubjectAccessReview", raw),
                         headers={"content-type": "application/vnd.kubernetes.protobuf"})
        assert r.status_code == 201 and r.json()["spec"]["resourceAttributes"] == {
            "namespace": "x", "verb": "list", "resource": "secrets"}
    sim.rbac.assign("robot", UserInfo.service_account("x", "robot"))
    await sim.apply("""
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: x}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read, namespace: x}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: robot, namespace: x}]
""")
    async with httpx.AsyncClient(base_url=BASE_URL,
                                 transport=httpx_transport(sim, identity="robot")) as c:
        ok = await c.post(SSAR, json=ssar(verb="list", resource="pods", namespace="x"))
        no = await c.post(SSAR, json=ssar(verb="delete", resource="pods", namespace="x"))
        assert ok.json()["status"]["allowed"] is True
        assert no.json()["status"]["allowed"] is False
        rules = await c.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                             json={"apiVersion": "authorization.k8s.io/v1",
                                   "kind": "SelfSubjectRulesReview",
                                   "spec": {"namespace": "x"}})
        assert {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]} in \
            rules.json()["status"]["resourceRules"]
        listed = await c.get(SSAR)
        assert listed.status_code == 405 and listed.json()["reason"] == "MethodNotAllowed"
        bad = await c.post(SSAR, json={"apiVersion": "authorization.k8s.io/v1",
                                       "kind": "SelfSubjectAccessReview", "spec": {}})
        assert bad.status_code == 422
        groups = (await c.get("/apis")).json()["groups"]
        assert "authorization.k8s.io" in [g["name"] for g in groups]
        listing = (await c.get("/apis/authorization.k8s.io/v1")).json()["resources"]
        assert [r["name"] for r in listing] == ["selfsubjectaccessreviews",
                                                "selfsubjectrulesreviews"]


async def test_impersonation_is_refused_with_a_reason_and_discovery_still_answers(sim):
    async with client(sim) as c:
        as_bob = {"impersonate-user": "bob"}
        r = await c.get("/api/v1/namespaces/default/configmaps", headers=as_bob)
        assert r.status_code == 400 and "impersonation" in r.json()["message"]
        assert (await c.get("/api/v1", headers=as_bob)).status_code == 200
        assert (await c.get("/apis", headers=as_bob)).status_code == 200


async def test_a_failed_json_patch_test_names_no_python_types(sim):
    async with client(sim) as c:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"},
              "data": {"a": "1"}}
        assert (await c.post("/api/v1/namespaces/default/configmaps", json=cm)).status_code \
            == 201
        r = await c.patch("/api/v1/namespaces/default/configmaps/t",
                          content=b'[{"op":"test","path":"/data/a","value":"9"}]',
                          headers={"content-type": "application/json-patch+json"})
        assert r.status_code == 422 and r.json()["reason"] == "Invalid"
        assert "class" not in r.json()["message"]
        assert r.json()["message"].endswith("testing value failed: 1 is not equal to tested "
                                            "value 9")


async def test_an_applied_crd_is_established_for_kubectl_wait(sim):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    async with client(sim) as c:
        r = await c.post(path, json=crd)
        assert r.status_code == 201, r.text
        status = (await c.get(f"{path}/widgets.example.com")).json()["status"]
        assert {c["type"]: c["status"] for c in status["conditions"]} == {
            "NamesAccepted": "True", "Established": "True"}
        assert status["acceptedNames"] == {"plural": "widgets", "singular": "widget",
                                           "kind": "Widget", "listKind": "WidgetList",
                                           "shortNames": ["wd"]}
        assert status["storedVersions"] == ["v1"]
        # a later spec update keeps them and records a new storage version
        got = (await c.get(f"{path}/widgets.example.com")).json()
        got["spec"]["versions"][0]["storage"] = False
        got["spec"]["versions"].append({**got["spec"]["versions"][0], "name": "v2",
                                        "storage": True})
        r = await c.put(f"{path}/widgets.example.com", json=got)
        assert r.status_code == 200, r.text
        assert r.json()["status"]["storedVersions"] == ["v1", "v2"]
        assert r.json()["status"]["conditions"] == status["conditions"]


async def test_kuberay_crds_of_emu_serve_serve_the_kinds_as_before(sim):
    from emu.apiserver.errors import ApiError
    from emu.http.serve import kuberay_crds

    before = sim.api.kinds.get("ray.io", "RayCluster")
    for crd in kuberay_crds():
        await sim.apply(crd)
    after = sim.api.kinds.get("ray.io", "RayCluster")
    assert after is not before and (after.has_status, after.has_generation) == (True, True)
    async with client(sim) as c:
        crds = (await c.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")).json()
        assert [c["metadata"]["name"] for c in crds["items"]] == [
            "rayclusters.ray.io", "raycronjobs.ray.io", "rayjobs.ray.io", "rayservices.ray.io"]
        assert all(any(cond["type"] == "Established" for cond in c["status"]["conditions"])
                   for c in crds["items"])
        doc = (await c.get("/openapi/v3/apis/ray.io/v1")).json()
        props = doc["components"]["schemas"]["io.ray.v1.RayJob"]["properties"]
        assert props["spec"]["description"] == "The desired state of the RayJob."
    bad = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "bad"},
           "spec": {}}
    with pytest.raises(ApiError) as err:
        await sim.client().create({**bad, "metadata": {"name": "bad", "namespace": "default"}})
    assert err.value.code == 422 and "spec.headGroupSpec" in err.value.message


async def test_event_field_selectors_kubectl_events_for_uses(sim):
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "rc.1"},
          "involvedObject": {"kind": "RayCluster", "name": "rc", "namespace": "default",
                             "apiVersion": "ray.io/v1", "fieldPath": "spec"},
          "reason": "Created", "type": "Normal", "source": {"component": "raycluster-ctl"},
          "message": "m"}
    other = {**ev, "metadata": {"name": "rc.2"}, "source": {},
             "reportingComponent": "kubelet",
             "involvedObject": {**ev["involvedObject"], "apiVersion": "v1"}}
    events = "/api/v1/namespaces/default/events"
    async with client(sim) as c:
        for body in (ev, other):
            assert (await c.post(events, json=body)).status_code == 201
        for selector, names in (
                ("involvedObject.kind=RayCluster,involvedObject.apiVersion=ray.io/v1,"
                 "involvedObject.name=rc", ["rc.1"]),
                ("involvedObject.fieldPath=spec", ["rc.1", "rc.2"]),
                ("source=raycluster-ctl", ["rc.1"]), ("source=kubelet", ["rc.2"]),
                ("reportingComponent=kubelet", ["rc.2"])):
            r = await c.get(events, params={"fieldSelector": selector})
            assert r.status_code == 200, (selector, r.text)
            assert [i["metadata"]["name"] for i in r.json()["items"]] == names, selector


@pytest.mark.emu(cluster=True)
async def test_logs_of_a_pod_not_yet_running_say_why_as_kube_does(sim):
    async with client(sim) as c:
        stuck = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stuck"},
                 "spec": {"nodeSelector": {"no-such": "node"},
                          "containers": [{"name": "main", "image": "busybox"}]}}
        assert (await c.post(PODS, json=stuck)).status_code == 201
        r = await c.get(f"{PODS}/stuck/log")
        assert r.status_code == 400 and r.json()["message"] == \
            "pod stuck does not have a host assigned"
        pod = {**stuck, "metadata": {"name": "young"},
               "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
        assert (await c.post(PODS, json=pod)).status_code == 201
        await sim.wait_for("Pod", "young", lambda p: bool((p.get("spec") or {}).get("nodeName")))
        r = await c.get(f"{PODS}/young/log")
        assert r.status_code == 400 and r.json()["message"] == \
            'container "main" in pod "young" is waiting to start: ContainerCreating'
        await sim.wait_for("Pod", "young", lambda p: (p.get("status") or {}).get("phase")
                           == "Running")
        assert (await c.get(f"{PODS}/young/log")).status_code == 200


def _echo_server(port: int):
    async def program(ctx):
        async def handle(payload, info):
            return {"status": 201, "headers": {"content-type": "application/json; charset=utf-8",
                                               "x-served-by": ctx.pod_name},
                    "body": {"method": payload["method"], "path": payload["path"],
                             "body": payload["body"],
                             "auth": "authorization" in payload["headers"]}}

        ctx.listen(port, handle)
        ctx.set_ready(True)
        await asyncio.Event().wait()
        return 0

    return program


@pytest.mark.emu(cluster=True)
async def test_service_proxy_reaches_the_service_by_port_name_or_number(sim):
    sim.programs.register("emu-test/echo", _echo_server(8080))
    await sim.apply("""
apiVersion: v1
kind: Pod
metadata: {name: echo, labels: {app: echo}}
spec: {containers: [{name: main, image: emu-test/echo:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{name: web, port: 80, targetPort: 8080}]
""")
    await sim.wait_for("Pod", "echo", lambda p: any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (p.get("status") or {}).get("conditions") or []))
    await sim.sleep(2)  # the EndpointSlice and kube-proxy catch up
    base = "/api/v1/namespaces/default/services"
    async with client(sim) as c:
        r = await c.post(f"{base}/echo:web/proxy/api/jobs/", params={"x": "1"}, content=b"hi",
                         headers={"authorization": "Bearer secret"})
        assert r.status_code == 201, r.text
        assert r.headers["content-type"].startswith("application/json")
        assert r.headers["x-served-by"] == "echo"
        assert r.json() == {"method": "POST", "path": "/api/jobs/?x=1", "body": "hi",
                            "auth": False}
        r = await c.get(f"{base}/http:echo:80/proxy")
        assert r.status_code == 201 and r.json()["path"] == "/"
        r = await c.get(f"{base}/echo:81/proxy/")
        assert r.status_code == 503
        assert r.json()["message"] == 'no service port 81 found for service "echo"'
        r = await c.get(f"{base}/echo:other/proxy/x")
        assert r.status_code == 503 and "no endpoints available" in r.json()["message"]
        r = await c.get(f"{base}/nope:80/proxy/x")
        assert r.status_code == 404 and r.json()["message"] == 'services "nope" not found'
        # the Pod proxy: its IP on the port given, or on its first container port
        r = await c.get(f"{PODS}/echo:8080/proxy/p")
        assert r.status_code == 201 and r.json()["path"] == "/p"
        r = await c.get(f"{PODS}/echo:9/proxy/p")
        assert r.status_code == 503 and "connection refused" in r.json()["message"]
        r = await c.get(f"{PODS}/echo/proxy")
        assert r.status_code == 503 and "no IP or port" in r.json()["message"]
    await sim.client().delete("Pod", "echo")
    await sim.sleep(40)
    async with client(sim) as c:
        r = await c.get(f"{base}/echo:web/proxy/x")
        assert r.status_code == 503 and "no endpoints available" in r.json()["message"]


@pytest.mark.emu(cluster=True)
async def test_deployment_revisions_for_rollout_history_and_undo(sim):
    """The Deployment carries its newest ReplicaSet's revision (kubectl rollout undo patches
    ``/metadata/annotations``, which must exist), and going back to an old template makes that
    ReplicaSet the newest revision again."""
    def template(image: str) -> dict:
        return {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": image}]}}

    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                    "template": template("busybox:1")}}
    path = "/apis/apps/v1/namespaces/default/deployments/d"
    merge = {"content-type": "application/merge-patch+json"}

    def revision(obj: dict) -> str | None:
        return (obj["metadata"].get("annotations") or {}).get(
            "deployment.kubernetes.io/revision")

    async with client(sim) as c:
        assert (await c.post("/apis/apps/v1/namespaces/default/deployments",
                             json=dep)).status_code == 201
        await sim.wait_for("Deployment", "d", lambda d: revision(d) == "1")
        first = {rs["metadata"]["name"] for rs in sim.api.list("ReplicaSet")["items"]
                 if rs["metadata"]["name"].startswith("d-")}
        r = await c.patch(path, content=orjson.dumps({"spec": {"template": template("b:2")}}),
                          headers=merge)
        assert r.status_code == 200
        await sim.wait_for("Deployment", "d", lambda d: revision(d) == "2")
        r = await c.patch(path, content=orjson.dumps({"spec": {"template": template(
            "busybox:1")}}), headers=merge)
        assert r.status_code == 200
        await sim.wait_for("Deployment", "d", lambda d: revision(d) == "3")
        rsets = {rs["metadata"]["name"]: revision(rs)
                 for rs in sim.api.list("ReplicaSet")["items"]
                 if rs["metadata"]["name"].startswith("d-")}
        assert len(rsets) == 2 and rsets[first.pop()] == "3"  # the first one, reused
