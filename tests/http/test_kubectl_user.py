"""A kube-apiserver user's everyday kubectl against ``emu serve --kuberay``, beyond apply and
get: ``-o wide`` columns, Events' layout, ``explain --recursive`` of KubeRay's kinds, ``auth
can-i``/``whoami``, ``logs --previous``/``--since``, the Ray dashboard through the Service
proxy, and the commands this emulator does not
serve (exec, cp, port-forward, debug, top, ``--as``) failing at once with a message that says
why, never hanging."""

from __future__ import annotations

import json

import pytest
from serving import Served
from test_kubectl import deployment, namespace

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]


def failure(srv: Served, *args: str) -> str:
    """Run kubectl expecting it to fail promptly; its stderr."""
    done = srv.kubectl(*args, check=False, timeout=30)
    assert done.returncode != 0, f"{' '.join(args)} succeeded:\n{done.stdout}"
    assert "panic" not in done.stderr and "goroutine" not in done.stderr, done.stderr
    return done.stderr


def test_wide_columns_events_explain_and_auth(served: Served):
    ns = namespace(served, "kc-user")
    served.kubectl("apply", "-n", ns, "-f", "-", stdin=deployment("web"))
    served.kubectl("wait", "-n", ns, "deployment/web", "--for=condition=Available",
                   "--timeout=60s")
    nodes = served.kubectl("get", "nodes", "-o", "wide").stdout.splitlines()
    assert nodes[0].split()[:7] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP",
                                    "EXTERNAL-IP"]
    deploy = served.kubectl("get", "-n", ns, "deployment", "web", "-o", "wide").stdout
    assert deploy.splitlines()[0].split()[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert deploy.splitlines()[1].split()[-3:] == ["c", "busybox", "app=web"]
    served.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": ns,
                           "apiVersion": "apps/v1"},
        "reason": "Checked", "message": "looked at it", "type": "Normal",
        "source": {"component": "me"}}))
    events = served.kubectl("get", "events", "-n", ns).stdout.splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    # beside the controllers' and the scheduler's own Events of the rollout
    assert any("deployment/web" in line and "looked at it" in line for line in events[1:])
    assert "looked at it" in served.kubectl("events", "-n", ns, "--for",
                                            "deployment/web").stdout
    wide = served.kubectl("get", "events", "-n", ns, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-4:] == ["FIRST", "SEEN", "COUNT", "NAME"]
    crds = served.kubectl("get", "crd", "-o", "name").stdout.split()
    assert "customresourcedefinition.apiextensions.k8s.io/rayjobs.ray.io" in crds
    served.kubectl("wait", "--for", "condition=established", "crd/rayclusters.ray.io",
                   "--timeout=10s")
    explain = served.kubectl("explain", "raycluster.spec", "--recursive").stdout
    assert "headGroupSpec" in explain and "workerGroupSpecs" in explain
    assert served.kubectl("auth", "can-i", "create", "pods", "-n", ns).stdout.strip() == "yes"
    who = served.kubectl("auth", "whoami").stdout
    assert "kubectl" in who and "system:masters" in who
    assert "selfsubjectaccessreviews" in served.kubectl("api-resources").stdout
    assert "impersonation" in failure(served, "get", "pods", "-n", ns, "--as=bob")


def test_logs_previous_and_since(served: Served):
    ns = namespace(served, "kc-logs")
    served.kubectl("apply", "-n", ns, "-f", "-", stdin=deployment("logged"))
    served.kubectl("wait", "-n", ns, "pod", "-l", "app=logged", "--for=condition=Ready",
                   "--timeout=60s")
    pod = served.kubectl("get", "-n", ns, "pods", "-l", "app=logged", "-o",
                         "name").stdout.split()[0]
    assert "process_started" in served.kubectl("logs", "-n", ns, pod).stdout
    assert 'previous terminated container "c"' in failure(served, "logs", "-n", ns, pod,
                                                           "--previous")
    # three kubectl calls since the Pod was Ready: several virtual seconds at --speed 20, so
    # the container's start is older than --since=1s (virtual, as the server counts it)
    recent = served.kubectl("logs", "-n", ns, pod, "--since=1s").stdout
    assert "process_started" not in recent


def test_unserved_commands_fail_at_once_with_a_reason(served: Served):
    ns = namespace(served, "kc-exec")
    served.kubectl("apply", "-n", ns, "-f", "-", stdin=deployment("target"))
    served.kubectl("wait", "-n", ns, "pod", "-l", "app=target", "--for=condition=Ready",
                   "--timeout=60s")
    pod = served.kubectl("get", "-n", ns, "pods", "-l", "app=target", "-o",
                         "name").stdout.split()[0]
    assert "not container processes" in failure(served, "exec", "-n", ns, pod, "--", "ls")
    assert "not container processes" in failure(served, "cp", "-n", ns,
                                                f"{pod.split('/')[1]}:/etc/hosts", "/tmp/x")
    assert "--expose" in failure(served, "port-forward", "-n", ns, pod, "18000:80")
    assert "ephemeral containers" in failure(served, "debug", "-n", ns, pod,
                                             "--image=busybox", "--profile=general")
    assert "Metrics API not available" in failure(served, "top", "pods", "-n", ns)


def test_the_ray_dashboard_through_the_service_proxy(served: Served):
    """What ``kubectl proxy`` users (and ``ray job submit --address
    http://127.0.0.1:8001/api/v1/namespaces/NS/services/HEAD-SVC:dashboard/proxy``) reach."""
    from serving import MANIFESTS

    ns = namespace(served, "kc-proxy")
    served.kubectl("apply", "-n", ns, "-f", str(MANIFESTS / "raycluster.yaml"))
    served.kubectl("wait", "-n", ns, "raycluster/sample-cluster",
                   "--for=jsonpath={.status.state}=ready", "--timeout=60s")
    base = f"/api/v1/namespaces/{ns}/services/sample-cluster-head-svc"
    version = json.loads(served.kubectl("get", "--raw",
                                        f"{base}:dashboard/proxy/api/version").stdout)
    assert version["ray_version"]
    assert json.loads(served.kubectl("get", "--raw", f"{base}:8265/proxy/api/jobs/").stdout) \
        == []
    assert "no service port 9999" in failure(served, "get", "--raw", f"{base}:9999/proxy/")


def test_rollout_history_and_undo(served: Served):
    ns = namespace(served, "kc-rollout")
    served.kubectl("apply", "-n", ns, "-f", "-", stdin=deployment("roll"))
    served.kubectl("rollout", "status", "-n", ns, "deployment/roll", "--timeout=60s")
    served.kubectl("set", "image", "-n", ns, "deployment/roll", "c=busybox:2")
    served.kubectl("rollout", "status", "-n", ns, "deployment/roll", "--timeout=60s")
    history = served.kubectl("rollout", "history", "-n", ns, "deployment/roll").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    served.kubectl("rollout", "undo", "-n", ns, "deployment/roll")
    served.kubectl("rollout", "status", "-n", ns, "deployment/roll", "--timeout=60s")
    image = served.kubectl("get", "-n", ns, "deployment/roll", "-o",
                           "jsonpath={.spec.template.spec.containers[0].image}").stdout
    assert image == "busybox"


def test_apply_prune_and_cluster_info_dump(served: Served, tmp_path):
    """Both ask for every kind of a default list (ReplicationControllers, DaemonSets,
    CronJobs among them) and stop at the first the server does not serve."""
    ns = namespace(served, "kc-prune")
    two = "".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}, labels: "
                  f"{{set: a}}}}\n" for n in ("p1", "p2"))
    served.kubectl("apply", "-n", ns, "--prune", "-l", "set=a", "-f", "-", stdin=two)
    one = two.split("---\n")[1]
    out = served.kubectl("apply", "-n", ns, "--prune", "-l", "set=a", "-f", "-",
                         stdin=one).stdout
    assert "configmap/p2 pruned" in out
    assert served.kubectl("get", "-n", ns, "cm", "-l", "set=a", "-o",
                          "name").stdout.split() == ["configmap/p1"]
    # kubectl's typed generator sends a CronJob in protobuf
    served.kubectl("create", "cronjob", "tick", "-n", ns, "--image=busybox",
                   "--schedule=*/5 * * * *", "--", "echo", "hi")
    row = served.kubectl("get", "cronjob", "tick", "-n", ns, "-o", "wide").stdout.splitlines()
    assert row[1].split()[:4] == ["tick", "*/5", "*", "*"]
    served.kubectl("cluster-info", "dump", "--namespaces", ns, "--output-directory",
                   str(tmp_path / "dump"))
    assert (tmp_path / "dump" / ns / "replication-controllers.json").exists()
