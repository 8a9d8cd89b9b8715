"""StorageClass dynamic provisioning (`emu.kube.volumes`, the scheduler's volume binding): the
default class filled in at admission, WaitForFirstConsumer, the class's provisioner and reclaim
policy, and kube's Events, with kind's ``standard`` class installed in one call."""

from __future__ import annotations

from kube_helpers import phase_is, pod

import emu
import emu.kube.cluster as kc


def pvc(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "2Gi"}}, **spec}}


def pod_with_claim(name: str, claim: str) -> dict:
    manifest = pod(name, "example/store", restart_policy="Never")
    manifest["spec"]["volumes"] = [{"name": "data",
                                    "persistentVolumeClaim": {"claimName": claim}}]
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "data",
                                                          "mountPath": "/data"}]
    return manifest


async def store(ctx) -> int:
    (ctx.volumes["/data"] / "log").write_text(ctx.pod_name + "\n")
    return 0


async def events_of(sim, name: str) -> list[tuple[str, str, str, str]]:
    items = (await sim.client().list("Event", namespace="default"))
    return sorted((e["reason"], e["type"], e["source"]["component"], e["message"])
                  for e in items if e["involvedObject"]["name"] == name)


async def test_wait_for_first_consumer_provisions_on_the_pods_node(sim):
    sim.programs.register("example/store", store)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    standard = await emu.install_standard_storage_class(sim)
    assert (standard["provisioner"], standard["volumeBindingMode"],
            standard["reclaimPolicy"]) == ("rancher.io/local-path", "WaitForFirstConsumer",
                                           "Delete")
    await sim.apply(pvc("data"))
    await sim.sleep(5)
    claim = await sim.get("PersistentVolumeClaim", "data")
    assert claim["spec"]["storageClassName"] == "standard"  # DefaultStorageClass admission
    assert claim["status"].get("phase", "Pending") == "Pending"
    assert await sim.client().list("PersistentVolume") == []
    assert await events_of(sim, "data") == [
        ("WaitForFirstConsumer", "Normal", "persistentvolume-controller",
         "waiting for first consumer to be created before binding")]

    await sim.apply(pod_with_claim("writer", "data"))
    done = await sim.wait_for("Pod", "writer", phase_is("Succeeded"))
    claim = await sim.get("PersistentVolumeClaim", "data")
    node = done["spec"]["nodeName"]
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == \
        "rancher.io/local-path"
    assert claim["status"]["phase"] == "Bound"
    assert claim["status"]["capacity"] == {"storage": "2Gi"}
    volume = claim["spec"]["volumeName"]
    assert volume == f"pvc-{claim['metadata']['uid']}"
    pv = await sim.get("PersistentVolume", volume, namespace=None)
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == \
        "rancher.io/local-path"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["spec"]["storageClassName"] == "standard"
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["status"]["phase"] == "Bound"
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
        "matchExpressions"][0]["values"] == [node]
    reasons = {(r, t, c) for r, t, c, _ in await events_of(sim, "data")}
    assert {("ExternalProvisioning", "Normal", "persistentvolume-controller"),
            ("Provisioning", "Normal", "rancher.io/local-path"),
            ("ProvisioningSucceeded", "Normal", "rancher.io/local-path")} <= reasons
    assert ("ProvisioningSucceeded", "Normal", "rancher.io/local-path",
            f"Successfully provisioned volume {volume}") in await events_of(sim, "data")

    # the next Pod of a node-local claim goes to the same Node
    await sim.apply(pod_with_claim("reader", "data"))
    again = await sim.wait_for("Pod", "reader", phase_is("Succeeded"))
    assert again["spec"]["nodeName"] == node

    # reclaimPolicy Delete: the claim's deletion deletes the volume
    for name in ("writer", "reader"):
        await sim.client().delete("Pod", name, "default")
    await sim.client().delete("PersistentVolumeClaim", "data", "default")
    await sim.sleep(2)
    assert await sim.get("PersistentVolume", volume, namespace=None) is None


async def test_a_missing_class_leaves_the_claim_pending_until_the_class_appears(sim):
    sim.programs.register("example/store", store)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(pvc("fast-data", storageClassName="fast"))
    await sim.apply(pod_with_claim("p", "fast-data"))
    p = await sim.wait_for("Pod", "p", lambda p: any(
        c["type"] == "PodScheduled" for c in p["status"].get("conditions") or []))
    [cond] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (cond["reason"], cond["message"]) == (
        "SchedulerError",
        'running PreFilter plugin "VolumeBinding": storageclass.storage.k8s.io "fast" not found')
    assert ("ProvisioningFailed", "Warning", "persistentvolume-controller",
            'storageclass.storage.k8s.io "fast" not found') in await events_of(sim, "fast-data")
    assert (await sim.get("PersistentVolumeClaim", "fast-data"))["status"].get(
        "phase", "Pending") == "Pending"

    await sim.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                     "metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com",
                     "reclaimPolicy": "Retain"})  # Immediate binding by default
    bound = await sim.wait_for("PersistentVolumeClaim", "fast-data", phase_is("Bound"))
    await sim.wait_for("Pod", "p", phase_is("Succeeded"))
    pv = await sim.get("PersistentVolume", bound["spec"]["volumeName"], namespace=None)
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "ebs.csi.aws.com"
    assert "nodeAffinity" not in pv["spec"]  # no consumer chose a Node
    await sim.client().delete("Pod", "p", "default")
    await sim.client().delete("PersistentVolumeClaim", "fast-data", "default")
    released = await sim.wait_for("PersistentVolume", pv["metadata"]["name"],
                                  phase_is("Released"), namespace=None)
    assert released["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


async def test_the_newest_default_class_is_filled_in_and_an_explicit_one_is_kept(sim):
    for name, default in (("older", "true"), ("other", "false")):
        await sim.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                         "metadata": {"name": name, "annotations": {
                             "storageclass.kubernetes.io/is-default-class": default}},
                         "provisioner": "x"})
    await sim.sleep(2)
    await sim.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                     "metadata": {"name": "newer", "annotations": {
                         "storageclass.kubernetes.io/is-default-class": "true"}},
                     "provisioner": "x"})
    await sim.apply(pvc("a"))
    await sim.apply(pvc("b", storageClassName="other"))
    await sim.apply(pvc("c", storageClassName=""))
    got = [(await sim.get("PersistentVolumeClaim", n))["spec"]["storageClassName"]
           for n in "abc"]
    assert got == ["newer", "other", ""]


async def test_without_storage_classes_a_claim_without_a_class_is_provisioned_as_before(sim):
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pvc("plain"))
    bound = await sim.wait_for("PersistentVolumeClaim", "plain", phase_is("Bound"))
    assert "storageClassName" not in bound["spec"]
    pv = await sim.get("PersistentVolume", bound["spec"]["volumeName"], namespace=None)
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == \
        "emu.kube/hostpath"
    assert pv["spec"]["storageClassName"] == "standard"


async def provisioning_world(sim) -> str:
    sim.programs.register("example/store", store)
    cluster = kc.install(sim, nodes=3)
    await cluster.wait_ready()
    await emu.install_standard_storage_class(sim)
    await sim.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "bot", "namespace": "default"}})
    for i in range(3):
        await sim.apply(pvc(f"d{i}"))
        await sim.apply(pod_with_claim(f"w{i}", f"d{i}"))
    for i in range(3):
        await sim.wait_for("Pod", f"w{i}", phase_is("Succeeded"))
    token = sim.api.create_token("bot", "default")["status"]["token"]
    await sim.apply({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "tok", "namespace": "default"},
                     "stringData": {"token": token}})
    await sim.sleep(5)
    return str(sim.trace.digest())


def test_provisioning_and_issued_tokens_are_deterministic():
    first = emu.run(provisioning_world, seed=5)
    assert first == emu.run(provisioning_world, seed=5)
    assert first != emu.run(provisioning_world, seed=6)
