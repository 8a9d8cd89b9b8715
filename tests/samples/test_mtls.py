"""KubeRay's mTLS (gate RayClusterMTLS) end to end with the emulated cert-manager, and its parts:
the Pod builders' TLS injection, the cert-manager controller, Ray's TLS handshake and the kubelet's
refresh of Secret volumes that the ``wait-for-tls-ip-san`` init container depends on."""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace

import pytest

from emu.kernel.network import CallInfo, ConnectionReset
from emu.kube.certmanager import install_cert_manager
from emu.kuberay.common.pod import configure_tls
from emu.kuberay.utils.features import FeatureGates
from emu.ray import tls

MTLS_CLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: secure
spec:
  rayVersion: '2.55.1'
  tlsOptions:
    enabled: true
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.55.1
          resources: {limits: {cpu: "1", memory: 4Gi}}
  workerGroupSpecs:
  - replicas: 1
    minReplicas: 1
    maxReplicas: 1
    groupName: small
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.55.1
          resources: {limits: {cpu: "1", memory: 1Gi}}
"""
GATES = {"RayClusterMTLS": True}


def _ready(rc: dict) -> bool:
    return (rc.get("status") or {}).get("state") == "ready"


def _secret_text(secret: dict, key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


@pytest.mark.emu(cluster=True)
async def test_mtls_cluster_becomes_ready_once_certificates_list_its_pod_ips(sim):
    await install_cert_manager(sim)
    kuberay = await sim.install_kuberay(feature_gates=GATES)
    await kuberay.wait_for_leader(timeout=300)
    await sim.apply(MTLS_CLUSTER)
    await sim.wait_for("RayCluster", "secure", _ready, timeout=900)
    client = sim.client()
    pods = {p["metadata"]["labels"]["ray.io/node-type"]: p
            for p in await client.list("Pod", "default", label_selector="ray.io/cluster=secure")}
    for node_type, cert_name, secret_name in (
            ("head", "ray-head-cert-secure", "ray-head-secret-secure"),
            ("worker", "ray-worker-cert-secure", "ray-worker-secret-secure")):
        pod = pods[node_type]
        ip = pod["status"]["podIP"]
        cert = await client.get("Certificate", cert_name, "default")
        assert cert["spec"]["ipAddresses"] == sorted([ip, "127.0.0.1"])
        secret = await client.get("Secret", secret_name, "default")
        assert f"IP Address:{ip}" in _secret_text(secret, "tls.crt")
        assert [r["kind"] for r in secret["metadata"]["ownerReferences"]] == ["Certificate"]
        assert pod["spec"]["initContainers"][0]["name"] == "wait-for-tls-ip-san"
        assert {"name": "ray-tls", "secret": {"secretName": secret_name}} in \
            pod["spec"]["volumes"]
    head_cert = await client.get("Certificate", "ray-head-cert-secure", "default")
    assert head_cert["spec"]["dnsNames"] == ["localhost",
                                             "secure-head-svc.default.svc.cluster.local"]
    # The Pods were created before their IPs were in the certificates: the init containers
    # waited for cert-manager's reissue and the kubelet's next Secret-volume sync (60 s).
    assert sim.now > 60


@pytest.mark.emu(cluster=True)
async def test_without_cert_manager_a_tls_cluster_gets_a_warning_and_no_pods(sim):
    kuberay = await sim.install_kuberay(feature_gates=GATES)
    await kuberay.wait_for_leader(timeout=300)
    await sim.apply(MTLS_CLUSTER)
    await sim.sleep(30)
    client = sim.client()
    assert await client.list("Pod", "default", label_selector="ray.io/cluster=secure") == []
    messages = [e["message"] for e in await client.list("Event", "default")
                if e["involvedObject"]["kind"] == "RayCluster"]
    assert "The RayCluster spec is invalid default/secure: tlsOptions requires cert-manager, " \
           "but cert-manager is not installed" in messages


@pytest.mark.emu(cluster=True)
async def test_cert_manager_reissues_a_certificate_whose_sans_change(sim):
    await install_cert_manager(sim, issue_delay=2.0)
    client = sim.client()
    await client.create({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                         "metadata": {"name": "self", "namespace": "default"},
                         "spec": {"selfSigned": {}}})
    await client.create({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                         "metadata": {"name": "c", "namespace": "default"},
                         "spec": {"secretName": "c-tls", "dnsNames": ["a.example"],
                                  "issuerRef": {"name": "self", "kind": "Issuer"}}})

    def ready_at_generation(cert: dict) -> bool:
        conds = (cert.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" and
                   c["observedGeneration"] == cert["metadata"]["generation"] for c in conds)

    cert = await sim.wait_for("Certificate", "c", ready_at_generation, timeout=30)
    first = sim.now
    assert first >= 2.0
    secret = await client.get("Secret", "c-tls", "default")
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    assert "DNS:a.example" in _secret_text(secret, "tls.crt")
    cert["spec"]["ipAddresses"] = ["10.0.0.9"]
    cert = await client.update(cert)
    assert not ready_at_generation(await client.get("Certificate", "c", "default"))
    await sim.wait_for("Certificate", "c", ready_at_generation, timeout=30)
    secret = await client.get("Secret", "c-tls", "default")
    assert "IP Address:10.0.0.9" in _secret_text(secret, "tls.crt")
    assert (await client.get("Certificate", "c", "default"))["status"]["revision"] == 2


@pytest.mark.emu(cluster=True)
async def test_a_ca_issuer_is_not_ready_until_its_secret_exists(sim):
    await install_cert_manager(sim)
    client = sim.client()
    await client.create({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                         "metadata": {"name": "ca", "namespace": "default"},
                         "spec": {"ca": {"secretName": "root"}}})

    def condition(issuer: dict) -> tuple[str, str] | None:
        for c in (issuer.get("status") or {}).get("conditions") or []:
            if c["type"] == "Ready":
                return c["status"], c["reason"]
        return None

    issuer = await sim.wait_for("Issuer", "ca", condition, timeout=10)
    assert condition(issuer) == ("False", "ErrGetKeyPair")
    await client.create({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                         "metadata": {"name": "root", "namespace": "default"},
                         "stringData": {"tls.crt": "crt", "tls.key": "key"}})
    issuer = await sim.wait_for("Issuer", "ca", lambda i: condition(i) == ("True",
                                                                          "KeyPairVerified"),
                                timeout=10)


@pytest.mark.emu(cluster=True)
async def test_a_certificate_without_secret_name_is_refused_by_its_crd_schema(sim):
    await install_cert_manager(sim)
    from emu.apiserver.errors import ApiError

    with pytest.raises(ApiError) as err:
        await sim.client().create({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                                   "metadata": {"name": "c", "namespace": "default"},
                                   "spec": {"issuerRef": {"name": "x"}}})
    assert err.value.code == 422
    assert "spec.secretName: Required value" in str(err.value)


def _template() -> dict:
    return {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.55.1"}],
                     "initContainers": [{"name": "wait-gcs-ready", "image": "x"},
                                        {"name": "user-init", "image": "y"}]}}


def test_configure_tls_injects_env_volume_and_san_wait_once_and_only_with_the_gate():
    instance = {"metadata": {"name": "secure"}, "spec": {"tlsOptions": {"enabled": True}}}
    template = _template()
    configure_tls(template, instance, "worker", FeatureGates())
    assert template == _template()  # gate off: nothing
    gates = FeatureGates({"RayClusterMTLS": True})
    configure_tls(template, instance, "worker", gates)
    configure_tls(template, instance, "worker", gates)  # idempotent
    spec = template["spec"]
    assert spec["volumes"] == [{"name": "ray-tls",
                                "secret": {"secretName": "ray-worker-secret-secure"}}]
    assert [c["name"] for c in spec["initContainers"]] == [
        "wait-for-tls-ip-san", "wait-gcs-ready", "user-init"]
    env = [(e["name"], e["value"]) for e in spec["containers"][0]["env"]]
    assert env == [("RAY_USE_TLS", "1"), ("RAY_TLS_SERVER_CERT", "/etc/ray/tls/tls.crt"),
                   ("RAY_TLS_SERVER_KEY", "/etc/ray/tls/tls.key"),
                   ("RAY_TLS_CA_CERT", "/etc/ray/tls/ca.crt")]
    assert spec["initContainers"][1]["env"] == spec["containers"][0]["env"]
    assert "env" not in spec["initContainers"][2]


def _ctx(network: object, name: str, env: dict[str, str], volumes: dict | None = None,
         pod_volumes: list | None = None, mounts: list | None = None) -> SimpleNamespace:
    process = SimpleNamespace(name=name, on_exit=lambda _cb: None)
    return SimpleNamespace(network=network, process=process, env=env, volumes=volumes or {},
                           pod={"spec": {"volumes": pod_volumes or []}},
                           container={"volumeMounts": mounts or []})


TLS_ENV = {"RAY_USE_TLS": "1", "RAY_TLS_SERVER_CERT": "/etc/ray/tls/tls.crt",
           "RAY_TLS_SERVER_KEY": "/etc/ray/tls/tls.key", "RAY_TLS_CA_CERT": "/etc/ray/tls/ca.crt"}


class _Network:
    """A stand-in network (the registry keys on it weakly)."""


def test_tls_handshake_refuses_mixed_peers_and_names_outside_the_certificate():
    network = _Network()
    tls.register(_ctx(network, "default/head/ray-head", TLS_ENV),
                 tls.TlsConfig("c", "k", "ca", ("localhost", "head-svc.default.svc", "10.0.0.1")))
    tls.register(_ctx(network, "default/plain/ray-worker", {}), None)

    def call(src: str, dst: str) -> None:
        tls.check_handshake(network, "default/head/ray-head/gcs_server",
                            CallInfo(src=src, src_host="n", dst=dst))

    call("default/head/ray-head/raylet", "10.0.0.1:6379")  # a child of a TLS container
    with pytest.raises(ConnectionReset, match="the server uses TLS"):
        call("default/plain/ray-worker/raylet", "10.0.0.1:6379")
    tls.register(_ctx(network, "default/w/ray-worker", TLS_ENV), tls.TlsConfig("c", "k", "ca"))
    call("default/w/ray-worker", "head-svc.default.svc:6379")
    with pytest.raises(ConnectionReset, match="Peer name 10.0.0.7 is not in peer certificate"):
        call("default/w/ray-worker", "10.0.0.7:6379")
    with pytest.raises(ConnectionReset, match="WRONG_VERSION_NUMBER"):
        tls.check_handshake(network, "default/plain/ray-worker/raylet",
                            CallInfo(src="default/w/ray-worker", src_host="n", dst="x:1"))


def test_a_tls_file_missing_from_its_secret_volume_fails_the_ray_start(tmp_path: Path):
    mounts = [{"name": "ray-tls", "mountPath": "/etc/ray/tls"}]
    volumes = [{"name": "ray-tls", "secret": {"secretName": "s"}}]
    (tmp_path / "tls.crt").write_text("-----BEGIN CERTIFICATE-----\nX509v3 Subject Alternative "
                                      "Name: DNS:localhost, IP Address:10.0.0.2\n")
    (tmp_path / "tls.key").write_text("k")
    ctx = _ctx(None, "p", TLS_ENV, {"/etc/ray/tls": tmp_path}, volumes, mounts)
    with pytest.raises(tls.TlsSetupError,
                       match=r"No such file or directory: '/etc/ray/tls/ca.crt'"):
        tls.container_tls(ctx)
    (tmp_path / "ca.crt").write_text("ca")
    assert tls.container_tls(ctx) == tls.TlsConfig(
        "/etc/ray/tls/tls.crt", "/etc/ray/tls/tls.key", "/etc/ray/tls/ca.crt",
        ("localhost", "10.0.0.2"))
    # an emptyDir an init script fills: taken as present
    ctx = _ctx(None, "p", TLS_ENV, {"/etc/ray/tls": tmp_path / "empty"},
               [{"name": "ray-tls", "emptyDir": {}}], mounts)
    assert tls.container_tls(ctx) is not None
    assert tls.container_tls(_ctx(None, "p", {})) is None


@pytest.mark.emu(cluster=True)
async def test_a_secret_volume_shows_a_change_at_the_kubelets_next_sync(sim):
    seen: list[tuple[float, str]] = []

    async def reader(ctx):
        while True:
            await ctx.services["sync_volumes"]()
            text = (ctx.volumes["/etc/s"] / "k").read_text()
            if not seen or seen[-1][1] != text:
                seen.append((ctx.process.table.loop.time(), text))
            await ctx.process.sleep(5.0)

    sim.programs.register("example/reader", reader)
    client = sim.client()
    await client.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "s", "namespace": "default"},
                         "stringData": {"k": "one"}})
    await client.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "default"},
                         "spec": {"containers": [{"name": "c", "image": "example/reader",
                                                  "volumeMounts": [{"name": "s",
                                                                    "mountPath": "/etc/s"}]}],
                                  "volumes": [{"name": "s", "secret": {"secretName": "s"}}]}})
    await sim.wait_for("Pod", "p", lambda p: (p.get("status") or {}).get("phase") == "Running",
                       timeout=60)
    await sim.sleep(10)
    secret = await client.get("Secret", "s", "default")
    await client.update({**secret, "data": {"k": base64.b64encode(b"two").decode()}})
    await sim.sleep(120)
    (t0, first), (t1, second) = seen
    assert (first, second) == ("one", "two")
    assert 60 <= t1 - t0 <= 65  # the sync after the change (60 s), not the change itself


TLS_HEAD_ONLY = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: half
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
          env:
          - {name: RAY_USE_TLS, value: "1"}
          - {name: RAY_TLS_SERVER_CERT, value: /etc/ray/tls/tls.crt}
          - {name: RAY_TLS_SERVER_KEY, value: /etc/ray/tls/tls.key}
          - {name: RAY_TLS_CA_CERT, value: /etc/ray/tls/ca.crt}
          volumeMounts: [{name: tls, mountPath: /etc/ray/tls}]
        volumes: [{name: tls, emptyDir: {}}]
  workerGroupSpecs:
  - groupName: plain
    replicas: 1
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.52.0
"""


@pytest.mark.emu(cluster=True)
async def test_a_plaintext_worker_never_joins_a_tls_head(sim):
    kuberay = await sim.install_kuberay()
    await kuberay.wait_for_leader(timeout=300)
    await sim.apply(TLS_HEAD_ONLY)
    await sim.sleep(300)
    pods = await sim.client().list("Pod", "default", label_selector="ray.io/cluster=half")
    worker = next(p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker")
    head = next(p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    assert head["status"]["phase"] == "Running"
    # the worker's wait-gcs-ready (plaintext `ray health-check`) is refused by the TLS GCS
    assert worker["status"]["initContainerStatuses"][0]["state"] == {
        "running": worker["status"]["initContainerStatuses"][0]["state"]["running"]}
    assert (await sim.get("RayCluster", "half"))["status"].get("state") != "ready"


def test_configure_tls_autoscaler_container_and_head_pod():
    """Go's TestConfigureTLS_AutoGenerate_HeadPod and TestConfigureTLS_AutoscalerContainer."""
    from emu.kuberay.common.pod import PodBuildOptions, build_head_pod

    instance = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "secure", "namespace": "default", "uid": "u"},
                "spec": {"enableInTreeAutoscaling": True, "tlsOptions": {"enabled": True},
                         "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                             "containers": [{"name": "ray-head",
                                             "image": "rayproject/ray:2.55.1"}]}}}}}
    pod = build_head_pod(instance, PodBuildOptions(gates=FeatureGates({"RayClusterMTLS": True})))
    spec = pod["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["wait-for-tls-ip-san"]
    assert {"name": "ray-tls", "secret": {"secretName": "ray-head-secret-secure"}} in \
        spec["volumes"]
    for container in spec["containers"]:  # the Ray container and the autoscaler sidecar
        names = [e["name"] for e in container["env"]]
        assert {"RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY",
                "RAY_TLS_CA_CERT"} <= set(names), container["name"]
        assert {"name": "ray-tls", "mountPath": "/etc/ray/tls", "readOnly": True} in \
            container["volumeMounts"]
    assert len(spec["containers"]) == 2


@pytest.mark.emu(cluster=True)
async def test_deleting_an_mtls_cluster_collects_its_pki(sim):
    await install_cert_manager(sim)
    kuberay = await sim.install_kuberay(feature_gates=GATES)
    await kuberay.wait_for_leader(timeout=300)
    await sim.apply(MTLS_CLUSTER)
    await sim.wait_for("RayCluster", "secure", _ready, timeout=900)
    client = sim.client()
    await client.delete("RayCluster", "secure", "default")
    await sim.sleep(120)
    assert await client.list("Certificate", "default") == []
    assert await client.list("Issuer", "default") == []
    assert [s["metadata"]["name"] for s in await client.list("Secret", "default")
            if "secure" in s["metadata"]["name"]] == []
