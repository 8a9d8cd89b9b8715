"""The standard cluster (`KubeConfig.standard_cluster`): a fresh world that looks like kind's."""

from __future__ import annotations

from kube_helpers import pod, template

import emu.kube.cluster as kc
from emu.kube import standard
from emu.kube.serviceaccounts import ROOT_CA_DESCRIPTION

CP = "emu-control-plane"
STATIC = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def ready(obj: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


async def standard_world(sim, **overrides):
    cluster = kc.install(sim, standard_cluster=True, image_pull_delay=0.5,
                         container_start_delay=0.25, **overrides)
    await cluster.wait_ready()
    return cluster


async def test_a_fresh_standard_world_has_kinds_system_pods_ready_on_a_tainted_control_plane(sim):
    cluster = await standard_world(sim, nodes=2)
    assert cluster.control_plane == CP and CP not in cluster.node_names
    node = await sim.client().get("Node", CP)
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert node["spec"]["taints"] == [{"key": "node-role.kubernetes.io/control-plane",
                                       "effect": "NoSchedule"}]
    assert node["spec"]["podCIDR"] == "10.244.0.0/24"
    pods = await sim.client().list("Pod", "kube-system")
    names = sorted(p["metadata"]["name"] for p in pods)
    assert [n for n in names if n.endswith(f"-{CP}")] == [f"{s}-{CP}" for s in STATIC]
    assert sum(n.startswith("coredns-") for n in names) == 2
    assert sorted(p["spec"]["nodeName"] for p in pods
                  if p["metadata"]["name"].startswith("kube-proxy-")) == [CP, "node-1", "node-2"]
    assert all(ready(p) and p["status"]["phase"] == "Running" for p in pods)
    for p in pods:
        if p["metadata"]["name"].endswith(f"-{CP}"):
            meta = p["metadata"]
            assert meta["annotations"]["kubernetes.io/config.mirror"] == \
                meta["annotations"]["kubernetes.io/config.hash"]
            assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": CP,
                                                "uid": node["metadata"]["uid"],
                                                "controller": True}]
            assert meta["labels"] == {"component": meta["name"].removesuffix(f"-{CP}"),
                                      "tier": "control-plane"}
            assert p["spec"]["nodeName"] == CP


async def test_coredns_is_a_deployment_behind_kube_dns_and_its_endpoints_are_its_ready_pods(sim):
    await standard_world(sim)
    d = await sim.wait_for("Deployment", "coredns",
                           lambda d: (d.get("status") or {}).get("availableReplicas") == 2,
                           namespace="kube-system")
    assert d["spec"]["template"]["metadata"]["labels"] == {"k8s-app": "kube-dns"}
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in \
        d["spec"]["template"]["spec"]["tolerations"]
    svc = await sim.client().get("Service", "kube-dns", "kube-system")
    assert svc["spec"]["clusterIP"] == "10.96.0.10"
    assert [(p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == \
        [(53, "UDP"), (53, "TCP"), (9153, "TCP")]
    ips = sorted(p["status"]["podIP"] for p in await sim.client().list(
        "Pod", "kube-system", label_selector="k8s-app=kube-dns"))

    def lists_them(slice_: dict) -> bool:
        return sorted(a for e in slice_.get("endpoints") or [] if e["conditions"]["ready"]
                      for a in e["addresses"]) == ips

    await sim.wait_until(lambda: _slice_of(sim, "kube-dns", lists_them), timeout=30, every=0.5)


async def _slice_of(sim, service: str, check) -> bool:
    slices = await sim.client().list("EndpointSlice", "kube-system",
                                     label_selector=f"kubernetes.io/service-name={service}")
    return any(check(s) for s in slices)


async def test_a_deleted_coredns_pod_is_replaced_and_passes_its_readiness_probe(sim):
    await standard_world(sim)
    first = (await sim.client().list("Pod", "kube-system", label_selector="k8s-app=kube-dns"))[0]
    await sim.client().delete("Pod", first["metadata"]["name"], "kube-system")

    async def two_new_ready() -> bool:
        pods = await sim.client().list("Pod", "kube-system", label_selector="k8s-app=kube-dns")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return len(live) == 2 and all(ready(p) for p in live) and \
            first["metadata"]["name"] not in [p["metadata"]["name"] for p in live]

    await sim.wait_until(two_new_ready, timeout=60, every=0.5)
    pods = await sim.client().list("Pod", "kube-system", label_selector="k8s-app=kube-dns")
    assert all(p["spec"]["nodeName"] == CP for p in pods)


async def test_default_kubernetes_service_points_at_6443_and_comes_back_when_deleted(sim):
    await standard_world(sim)
    client = sim.client()
    svc = await client.get("Service", "kubernetes", "default")
    assert svc["spec"]["clusterIP"] == "10.96.0.1"
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP",
                                     "targetPort": 6443}]
    ep = await client.get("Endpoints", "kubernetes", "default")
    assert ep["subsets"] == [{"addresses": [{"ip": standard.CONTROL_PLANE_IP}],
                              "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]
    eps = await client.get("EndpointSlice", "kubernetes", "default")
    assert eps["endpoints"] == [{"addresses": [standard.CONTROL_PLANE_IP],
                                 "conditions": {"ready": True}}]
    assert eps["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"
    for kind in ("Service", "Endpoints", "EndpointSlice"):
        await client.delete(kind, "kubernetes", "default")
    for kind in ("Service", "Endpoints", "EndpointSlice"):
        await sim.wait_for(kind, "kubernetes", lambda o: True, namespace="default", timeout=5)
    assert (await client.get("Service", "kubernetes", "default"))["spec"]["clusterIP"] == \
        "10.96.0.1"
    # a user Service gets an IP the cluster's own Services never take
    other = await client.create({"apiVersion": "v1", "kind": "Service",
                                 "metadata": {"name": "web", "namespace": "default"},
                                 "spec": {"ports": [{"port": 80}]}})
    assert other["spec"]["clusterIP"] not in ("10.96.0.1", "10.96.0.10")


async def test_every_namespace_gets_a_default_service_account_and_the_root_ca(sim):
    await standard_world(sim)
    client = sim.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease", "team"):
        await sim.wait_for("ServiceAccount", "default", lambda o: True, namespace=ns, timeout=5)
        cm = await sim.wait_for("ConfigMap", "kube-root-ca.crt", lambda o: True, namespace=ns,
                                timeout=5)
        assert cm["data"] == {"ca.crt": standard.root_ca_pem(sim.seed)}
        assert cm["metadata"]["annotations"]["kubernetes.io/description"] == ROOT_CA_DESCRIPTION
    await client.delete("ServiceAccount", "default", "team")
    await client.delete("ConfigMap", "kube-root-ca.crt", "team")
    await sim.wait_for("ServiceAccount", "default", lambda o: True, namespace="team", timeout=5)
    await sim.wait_for("ConfigMap", "kube-root-ca.crt", lambda o: True, namespace="team",
                       timeout=5)
    await client.patch("ConfigMap", "kube-root-ca.crt", {"data": {"ca.crt": "forged"}}, "team")
    await sim.wait_for("ConfigMap", "kube-root-ca.crt",
                       lambda cm: cm["data"] == {"ca.crt": standard.root_ca_pem(sim.seed)},
                       namespace="team", timeout=5)


def test_the_root_ca_is_a_self_signed_ca_certificate():
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(standard.root_ca_pem(7).encode())
    assert cert.subject == cert.issuer
    assert cert.subject.rfc4514_string() == "CN=kubernetes"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


async def test_pods_get_default_toleration_seconds_unless_they_tolerate_the_taints(sim):
    await standard_world(sim)
    client = sim.client()
    plain = await client.create(pod("plain"))
    assert plain["spec"]["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]
    own = await client.create(pod("own", tolerations=[
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 5}]))
    assert [t["key"] for t in own["spec"]["tolerations"]] == [
        "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]
    everything = await client.create(pod("all", tolerations=[{"operator": "Exists"}]))
    assert everything["spec"]["tolerations"] == [{"operator": "Exists"}]


async def test_a_minimal_world_adds_no_tolerations_no_control_plane_and_no_normal_events(sim):
    cluster = kc.install(sim, nodes=1, standard_cluster=False)
    await cluster.wait_ready()
    assert cluster.control_plane is None
    created = await sim.client().create(pod("plain"))
    assert "tolerations" not in created["spec"]
    await sim.wait_for("Pod", "plain", ready, namespace="default")
    assert await sim.client().list("Pod", "kube-system") == []
    assert await sim.client().list("Event", "default") == []
    assert await sim.client().list("ServiceAccount") == []


async def test_user_pods_never_land_on_the_control_plane(sim):
    await standard_world(sim, nodes=2)
    await sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "web", "namespace": "default"},
                     "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                              "template": template("example/app:1", {"app": "web"})}})
    await sim.wait_for("Deployment", "web", lambda d: (d.get("status") or {}).get("readyReplicas") == 6,
                       namespace="default")
    nodes = {p["spec"]["nodeName"] for p in await sim.client().list(
        "Pod", "default", label_selector="app=web")}
    assert nodes == {"node-1", "node-2"}


async def test_the_normal_events_of_a_deployment_rollout_carry_kubes_reasons(sim):
    await standard_world(sim, nodes=1)
    await sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "web", "namespace": "default"},
                     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                              "template": template("example/app:1", {"app": "web"})}})
    d = await sim.wait_for("Deployment", "web", lambda d: (d.get("status") or {}).get("readyReplicas") == 1,
                           namespace="default")
    rs = (await sim.client().list("ReplicaSet", "default"))[0]["metadata"]["name"]
    p = (await sim.client().list("Pod", "default"))[0]
    name = p["metadata"]["name"]
    await sim.client().delete("Pod", name, "default")
    await sim.wait_for("Deployment", "web", lambda d: (d.get("status") or {}).get("readyReplicas") == 1 and
                       d["status"].get("replicas") == 1, namespace="default")
    await sim.sleep(2)
    events = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"],
               e["message"], e["source"]["component"])
              for e in sorted(await sim.client().list("Event", "default"), key=_recorded)]
    assert ("Deployment", "web", "ScalingReplicaSet", f"Scaled up replica set {rs} from 0 to 1",
            "deployment-controller") in events
    assert ("ReplicaSet", rs, "SuccessfulCreate", f"Created pod: {name}",
            "replicaset-controller") in events
    assert ("Pod", name, "Scheduled", f"Successfully assigned default/{name} to node-1",
            "default-scheduler") in events
    pod_events = [(r, m) for k, n, r, m, _ in events if k == "Pod" and n == name]
    assert pod_events == [
        ("Scheduled", f"Successfully assigned default/{name} to node-1"),
        ("Pulling", 'Pulling image "example/app:1"'),
        ("Pulled", 'Successfully pulled image "example/app:1" in 500ms (500ms including '
                   'waiting). Image size: 0 bytes.'),
        ("Created", "Created container: app"),
        ("Started", "Started container app"),
        ("Killing", "Stopping container app")]
    assert d["metadata"]["name"] == "web"
    second = [(r, m) for k, n, r, m, _ in events if k == "Pod" and n != name]
    assert ("Pulled", 'Container image "example/app:1" already present on machine') in second


async def test_a_job_records_its_pod_and_its_completion(sim):
    sim.programs.register("example/batch", _exit_zero)
    await standard_world(sim, nodes=1)
    await sim.apply({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": "once", "namespace": "default"},
                     "spec": {"template": template("example/batch:1", {"job": "once"},
                                                   restart_policy="Never")}})
    await sim.wait_for("Job", "once", lambda j: any(
        c["type"] == "Complete" for c in (j.get("status") or {}).get("conditions") or []),
        namespace="default", timeout=60)
    await sim.sleep(1)
    reasons = [(e["reason"], e["message"])
               for e in sorted(await sim.client().list("Event", "default"), key=_recorded)
               if e["involvedObject"]["kind"] == "Job"]
    assert reasons[-1] == ("Completed", "Job completed")
    assert reasons[0][0] == "SuccessfulCreate" and reasons[0][1].startswith("Created pod: once-")


def _recorded(event: dict) -> int:
    """An Event's place in its recorder's order (its name's suffix: time and sequence)."""
    return int(event["metadata"]["name"].rsplit(".", 1)[1], 16)


async def _exit_zero(ctx) -> int:
    return 0


async def test_a_deleted_mirror_pod_is_created_again_by_its_kubelet(sim):
    await standard_world(sim)
    name = f"etcd-{CP}"
    old = await sim.client().get("Pod", name, "kube-system")
    await sim.client().delete("Pod", name, "kube-system")
    back = await sim.wait_for("Pod", name, lambda p: p["metadata"]["uid"] != old["metadata"][
        "uid"] and ready(p), namespace="kube-system", timeout=30)
    assert back["metadata"]["annotations"]["kubernetes.io/config.mirror"]


async def test_the_boot_leaves_the_kubelets_and_controllers_nothing_to_write(sim):
    """The booted objects are what their owners would write: after the boot only the Nodes,
    their Leases and the ``kube-dns`` EndpointSlice (the EndpointSlice controller's, after
    its propagation delay) are written: what keeps a standard world cheap to build."""
    await standard_world(sim, nodes=2)
    booted = sim.api.resource_version
    await sim.sleep(5)
    writes = [(e.fields["kind"], e.fields["name"]) for e in sim.trace.events
              if e.process == "kube-apiserver" and e.event == "write"]
    first_node = next(i for i, (kind, name) in enumerate(writes)
                      if kind == "Node" and name == "node-1")
    later = {kind for kind, name in writes[first_node:]
             if kind not in ("Node", "Lease") and not name.startswith("kube-dns-")}
    assert later == set()
    assert booted > 30


def test_standard_controllers_start_only_in_a_standard_cluster():
    from emu.kube.config import STANDARD_CONTROLLERS, KubeConfig

    minimal = KubeConfig(standard_cluster=False)
    assert minimal.enabled_controllers() == minimal.controllers
    on = KubeConfig().enabled_controllers()  # the default world is a standard cluster
    assert on == KubeConfig(standard_cluster=True).enabled_controllers()
    assert on[-len(STANDARD_CONTROLLERS):] == STANDARD_CONTROLLERS
    assert KubeConfig(controllers=("daemonset",), standard_cluster=False
                      ).enabled_controllers() == ("daemonset",)


async def test_a_standard_world_has_kinds_default_storage_class_and_provisions_a_claim(sim):
    from kube_helpers import phase_is
    from test_storage_classes import pod_with_claim, pvc, store

    sim.programs.register("example/store", store)
    await standard_world(sim)
    [cls] = await sim.client().list("StorageClass")
    assert cls["metadata"]["name"] == "standard"
    assert cls["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    await sim.apply(pvc("data"))
    await sim.apply(pod_with_claim("writer", "data"))
    done = await sim.wait_for("Pod", "writer", phase_is("Succeeded"))
    claim = await sim.get("PersistentVolumeClaim", "data")
    assert claim["spec"]["storageClassName"] == "standard"
    assert claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == \
        done["spec"]["nodeName"] != CP
