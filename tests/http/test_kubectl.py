"""Real kubectl against ``emu serve --kuberay``: apply, get with printer columns, wait, logs,
patch, label, delete with each cascade mode, server-side apply with a conflict; and the server's
own guards (400 on malformed JSON, 413, bearer token, clean Ctrl-C)."""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from serving import MANIFESTS, Served, env, require, start_serve

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]


def namespace(srv: Served, name: str) -> str:
    srv.kubectl("apply", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    return name


def deployment(name: str) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})


def test_raycluster_apply_get_columns_yaml_label_patch(served: Served):
    ns = namespace(served, "kc-cluster")
    out = served.kubectl("apply", "-n", ns, "-f", str(MANIFESTS / "raycluster.yaml")).stdout
    assert "raycluster.ray.io/sample-cluster created" in out
    served.kubectl("wait", "-n", ns, "raycluster/sample-cluster",
                   "--for=jsonpath={.status.state}=ready", "--timeout=60s")
    table = served.kubectl("get", "-n", ns, "rayclusters").stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "DESIRED", "WORKERS", "AVAILABLE", "WORKERS"]
    assert table[1].split()[0] == "sample-cluster" and "ready" in table[1].split()
    wide = served.kubectl("get", "-n", ns, "raycluster", "sample-cluster", "-o", "wide").stdout
    assert "HEAD POD IP" in wide
    obj = json.loads(served.kubectl("get", "-n", ns, "raycluster", "sample-cluster",
                                    "-o", "json").stdout)
    assert obj["kind"] == "RayCluster" and obj["metadata"]["labels"] == {"team": "emu"}
    yaml_out = served.kubectl("get", "-n", ns, "raycluster", "sample-cluster", "-o",
                              "yaml").stdout
    assert "kind: RayCluster" in yaml_out
    served.kubectl("label", "-n", ns, "raycluster", "sample-cluster", "tier=gold")
    served.kubectl("patch", "-n", ns, "raycluster", "sample-cluster", "--type=merge",
                   "-p", '{"metadata":{"annotations":{"owner":"me"}}}')
    served.kubectl("patch", "-n", ns, "raycluster", "sample-cluster", "--type=json",
                   "-p", '[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas",'
                         '"value":2}]')
    got = json.loads(served.kubectl("get", "-n", ns, "raycluster", "sample-cluster",
                                    "-o", "json").stdout)
    assert got["metadata"]["labels"]["tier"] == "gold"
    assert got["metadata"]["annotations"]["owner"] == "me"
    assert got["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    by_label = served.kubectl("get", "-n", ns, "rayclusters", "-l", "tier=gold",
                              "-o", "name").stdout.split()
    assert by_label == ["raycluster.ray.io/sample-cluster"]
    pods = served.kubectl("get", "-n", ns, "pods", "-l", "ray.io/node-type=head",
                          "-o", "name").stdout.split()
    assert len(pods) == 1
    served.kubectl("wait", "-n", ns, pods[0], "--for=condition=Ready", "--timeout=60s")
    logs = served.kubectl("logs", "-n", ns, pods[0]).stdout
    assert "ray_container_started" in logs
    explain = served.kubectl("explain", "rayclusters").stdout
    assert "KIND:" in explain and "RayCluster" in explain
    events = served.kubectl("get", "events", "-n", ns).stdout
    assert "CreatedHeadPod" in events


def test_rayjob_runs_to_completion(served: Served):
    ns = namespace(served, "kc-job")
    served.kubectl("apply", "-n", ns, "-f", str(MANIFESTS / "rayjob.yaml"))
    served.kubectl("wait", "-n", ns, "rayjob/sample-job",
                   "--for=jsonpath={.status.jobDeploymentStatus}=Complete", "--timeout=90s")
    row = served.kubectl("get", "-n", ns, "rayjob", "sample-job").stdout.splitlines()
    assert row[0].split()[:3] == ["NAME", "JOB", "STATUS"]
    assert "SUCCEEDED" in row[1].split()
    served.kubectl("wait", "-n", ns, "job/sample-job", "--for=condition=Complete",
                   "--timeout=30s")


def test_delete_with_each_cascade_mode(served: Served):
    ns = namespace(served, "kc-cascade")
    for mode in ("orphan", "foreground", "background"):
        served.kubectl("apply", "-n", ns, "-f", "-", stdin=deployment(f"d-{mode}"))
        served.kubectl("wait", "-n", ns, f"deployment/d-{mode}",
                       "--for=jsonpath={.status.replicas}=1", "--timeout=60s")
    served.kubectl("delete", "-n", ns, "deployment", "d-orphan", "--cascade=orphan")
    served.kubectl("delete", "-n", ns, "deployment", "d-foreground", "--cascade=foreground")
    served.kubectl("delete", "-n", ns, "deployment", "d-background", "--cascade=background")
    for mode in ("foreground", "background"):
        served.kubectl("wait", "-n", ns, "replicaset", "-l", f"app=d-{mode}", "--for=delete",
                       "--timeout=60s")
        left = served.kubectl("get", "-n", ns, "replicasets", "-l", f"app=d-{mode}",
                              "-o", "name").stdout.split()
        assert left == []
    orphans = served.kubectl("get", "-n", ns, "replicasets", "-l", "app=d-orphan",
                             "-o", "json").stdout
    items = json.loads(orphans)["items"]
    assert len(items) == 1 and not items[0]["metadata"].get("ownerReferences")


def test_server_side_apply_twice_with_a_conflict(served: Served):
    ns = namespace(served, "kc-ssa")
    first = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "shared"}, "data": {"k": "1"}})
    second = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "shared"}, "data": {"k": "2"}})
    out = served.kubectl("apply", "-n", ns, "--server-side", "--field-manager=alice", "-f",
                         "-", stdin=first).stdout
    assert "serverside-applied" in out
    served.kubectl("apply", "-n", ns, "--server-side", "--field-manager=alice", "-f", "-",
                   stdin=first)
    clash = served.kubectl("apply", "-n", ns, "--server-side", "--field-manager=bob", "-f",
                           "-", stdin=second, check=False)
    assert clash.returncode != 0
    assert 'conflict with "alice"' in clash.stderr and ".data.k" in clash.stderr
    served.kubectl("apply", "-n", ns, "--server-side", "--field-manager=bob",
                   "--force-conflicts", "-f", "-", stdin=second)
    got = json.loads(served.kubectl("get", "-n", ns, "cm", "shared", "-o", "json",
                                    "--show-managed-fields").stdout)
    assert got["data"] == {"k": "2"}
    assert [m["manager"] for m in got["metadata"]["managedFields"]] == ["bob"]


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"content-type": "application/json",
                                          **(headers or {})})
    # the token server's certificate is self-signed; kubectl checks it, this helper need not
    context = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_malformed_json_and_large_bodies(served: Served):
    url = f"{served.url}/api/v1/namespaces/default/configmaps"
    code, status = _post(url, b'{"apiVersion": "v1", "kind": ')
    assert code == 400 and status["kind"] == "Status" and status["reason"] == "BadRequest"
    huge = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
                       "data": {"k": "x" * (4 * 1024 * 1024)}}).encode()
    code, status = _post(url, huge)
    assert code == 413 and status["reason"] == "RequestEntityTooLarge"
    assert served.kubectl("get", "cm", "huge", check=False).returncode != 0


def test_bearer_token_and_ctrl_c(tmp_path):
    srv = start_serve(tmp_path, "--token", "t0ken", "--speed", "10")
    try:
        assert srv.url.startswith("https://127.0.0.1:")  # a token is only sent over TLS
        assert srv.ready_line.startswith("emu serve: ready at ")
        assert "default" in srv.kubectl("get", "namespaces").stdout  # the kubeconfig has it
        code, status = _post(f"{srv.url}/api/v1/namespaces/default/configmaps", b"{}")
        assert code == 401 and status["reason"] == "Unauthorized"
        code, _ = _post(f"{srv.url}/api/v1/namespaces/default/configmaps", json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).encode(),
            {"authorization": "Bearer t0ken"})
        assert code == 201
    finally:
        assert srv.stop() == 0


def test_ray_job_submit_through_expose(tmp_path):
    ray = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    require(Path(ray).exists(), "the ray CLI")
    srv = start_serve(tmp_path, "--kuberay", "--speed", "20", "-f",
                      str(MANIFESTS / "raycluster.yaml"), "--expose",
                      "svc/sample-cluster-head-svc:8265")
    try:
        dashboard = re.search(r"8265=(\S+)", srv.ready_line).group(1)
        srv.kubectl("wait", "raycluster/sample-cluster", "--for=jsonpath={.status.state}=ready",
                    "--timeout=60s")
        done = subprocess.run([ray, "job", "submit", "--address", dashboard, "--no-wait",
                               "--submission-id", "via-expose", "--", "python", "-c",
                               "'print(1)'"], capture_output=True, text=True, timeout=120,
                              env=env())
        assert done.returncode == 0, done.stderr
        with urllib.request.urlopen(f"{dashboard}/api/jobs/via-expose", timeout=30) as resp:
            job = json.loads(resp.read())
        assert job["submission_id"] == "via-expose"
        assert "print(1)" in job["entrypoint"]
    finally:
        assert srv.stop() == 0


def test_typed_generators_send_protobuf(served: Served):
    served.kubectl("create", "namespace", "kc-typed")
    served.kubectl("create", "configmap", "cfg", "-n", "kc-typed", "--from-literal=a=1",
                   "--from-literal=b=two")
    served.kubectl("create", "secret", "generic", "s", "-n", "kc-typed",
                   "--from-literal=pw=hunter2")
    served.kubectl("create", "serviceaccount", "robot", "-n", "kc-typed")
    cm = json.loads(served.kubectl("get", "cm", "cfg", "-n", "kc-typed", "-o", "json").stdout)
    assert cm["data"] == {"a": "1", "b": "two"}
    secret = json.loads(served.kubectl("get", "secret", "s", "-n", "kc-typed", "-o",
                                       "json").stdout)
    assert secret["data"] == {"pw": "aHVudGVyMg=="} and secret["type"] == "Opaque"
    assert served.kubectl("get", "sa", "robot", "-n", "kc-typed", "-o", "name").stdout.strip() \
        == "serviceaccount/robot"
    # the typed generators of the kinds a Go client of KubeRay writes, in protobuf
    served.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=0", "--port=80",
                   "-n", "kc-typed")
    dep = json.loads(served.kubectl("get", "deploy", "web", "-n", "kc-typed", "-o",
                                    "json").stdout)
    assert dep["spec"]["replicas"] == 0  # a pointer's zero survives the protobuf reading
    assert dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx" and container["ports"][0]["containerPort"] == 80
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%",
                                                        "maxUnavailable": "25%"}
    served.kubectl("create", "job", "once", "--image=busybox", "-n", "kc-typed", "--", "echo",
                   "hi")
    job = json.loads(served.kubectl("get", "job", "once", "-n", "kc-typed", "-o",
                                    "json").stdout)
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    served.kubectl("create", "service", "clusterip", "front", "--tcp=80:8080", "-n", "kc-typed")
    svc = json.loads(served.kubectl("get", "svc", "front", "-n", "kc-typed", "-o",
                                    "json").stdout)
    assert svc["spec"]["ports"][0]["port"] == 80 and svc["spec"]["ports"][0]["targetPort"] \
        == 8080
    served.kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods", "-n",
                   "kc-typed")
    served.kubectl("create", "rolebinding", "read", "--role=reader", "--user=alice",
                   "--serviceaccount=kc-typed:robot", "-n", "kc-typed")
    rb = json.loads(served.kubectl("get", "rolebinding", "read", "-n", "kc-typed", "-o",
                                   "json").stdout)
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": "reader"}
    assert [s["kind"] for s in rb["subjects"]] == ["User", "ServiceAccount"]
    served.kubectl("create", "clusterrole", "node-reader", "--verb=get", "--resource=nodes")
    served.kubectl("create", "clusterrolebinding", "node-readers", "--clusterrole=node-reader",
                   "--group=devs")
    crb = json.loads(served.kubectl("get", "clusterrolebinding", "node-readers", "-o",
                                    "json").stdout)
    assert crb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                "name": "devs"}]
    served.kubectl("create", "ingress", "in", "--rule=foo.com/bar=front:80", "-n", "kc-typed")
    ing = json.loads(served.kubectl("get", "ingress", "in", "-n", "kc-typed", "-o",
                                    "json").stdout)
    (path,) = ing["spec"]["rules"][0]["http"]["paths"]
    assert path["backend"]["service"] == {"name": "front", "port": {"number": 80}}


def test_kubectl_scale_a_deployment(served: Served):
    ns = namespace(served, "kc-scale")
    served.kubectl("apply", "-n", ns, "-f", "-", stdin=deployment("web"))
    served.kubectl("scale", "-n", ns, "deployment/web", "--replicas=3")
    served.kubectl("wait", "-n", ns, "deployment/web", "--for=jsonpath={.status.readyReplicas}=3",
                   "--timeout=60s")


def test_server_side_apply_after_an_empty_map_keeps_the_data(served: Served):
    """Issue 21's tour step: ``data: {}`` then ``data: {k: v}`` with ``--server-side``."""
    ns = namespace(served, "kc-ssa-empty")
    for data in ({}, {"k": "v"}):
        served.kubectl("apply", "-n", ns, "--server-side", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}))
    got = json.loads(served.kubectl("get", "-n", ns, "cm", "c", "-o", "json").stdout)
    assert got["data"] == {"k": "v"}


def test_a_pdb_and_hpa_chart_applies_and_lists(served: Served):
    """Issue 21's tour step: a chart's PodDisruptionBudget and HorizontalPodAutoscaler."""
    ns = namespace(served, "kc-pdb-hpa")
    chart = [
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
         "metadata": {"name": "web"},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "web"}, "minReplicas": 1, "maxReplicas": 3}}]
    # as `helm template` writes a chart: one YAML document per object
    out = served.kubectl("apply", "-n", ns, "-f", "-",
                         stdin="\n---\n".join(json.dumps(o) for o in chart)).stdout
    assert "poddisruptionbudget.policy/web created" in out
    assert "horizontalpodautoscaler.autoscaling/web created" in out
    listed = served.kubectl("get", "-n", ns, "pdb,hpa").stdout
    assert re.search(r"poddisruptionbudget.policy/web\s+1\s+N/A\s+0", listed), listed
    assert re.search(r"horizontalpodautoscaler.autoscaling/web\s+Deployment/web\s+"
                     r"cpu: <unknown>/80%\s+1\s+3\s+0", listed), listed


def test_kubectl_certificate_approve(served: Served):
    served.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "kc-csr"},
        "spec": {"request": "LS0t", "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["client auth"]}}))
    out = served.kubectl("certificate", "approve", "kc-csr").stdout
    assert "certificatesigningrequest.certificates.k8s.io/kc-csr approved" in out
    listed = served.kubectl("get", "csr", "kc-csr").stdout
    assert re.search(r"kc-csr\s+\S+\s+kubernetes.io/kube-apiserver-client\s+.*Approved", listed)


def test_kubectl_prints_the_servers_warnings_for_unknown_fields(served: Served):
    """``--validate=warn``: kubectl sends ``fieldValidation=Warn`` and prints each ``Warning``
    header the server answers with; ``--validate=strict`` (its default) gets the 400."""
    ns = namespace(served, "kc-warn")
    cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "w", "colour": "red"}, "data": {"k": "v"}, "dat": {}})
    out = served.kubectl("create", "-n", ns, "--validate=warn", "-f", "-", stdin=cm)
    assert 'Warning: unknown field "metadata.colour"' in out.stderr, out.stderr
    assert 'Warning: unknown field "dat"' in out.stderr, out.stderr
    refused = served.kubectl("create", "-n", ns, "-f", "-", stdin=cm.replace('"w"', '"s"'),
                             check=False)
    assert refused.returncode != 0
    assert 'strict decoding error: unknown field "dat", unknown field "metadata.colour"' \
        in refused.stderr, refused.stderr
