"""The ServiceAccount admission (`emu.apiserver.serviceaccount`) and projected volumes
(`emu.kube.projected`) in a standard cluster: every Pod gets kube's ``kube-api-access-*``
volume, and a program in it reads a bound token that authenticates as the Pod's
ServiceAccount, the cluster CA and its namespace, where a real Pod finds them."""

from __future__ import annotations

import asyncio
import base64
import copy
import json

import pytest
from kube_helpers import phase_is, pod

import emu.kube.cluster as kc
from emu.apiserver.errors import Forbidden
from emu.apiserver.serviceaccount import TOKEN_MOUNT_PATH, token_volume_source


async def standard_world(sim):
    cluster = kc.install(sim, standard_cluster=True)
    await cluster.wait_ready()
    return cluster


def token_volumes(obj: dict) -> list[dict]:
    return [v for v in obj["spec"].get("volumes") or []
            if v["name"].startswith("kube-api-access-")]


async def test_a_pod_gets_kubes_token_volume_mounted_in_every_container(sim):
    await standard_world(sim)
    manifest = pod("p")
    manifest["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    sent = copy.deepcopy(manifest)
    created = await sim.client().create(manifest)
    assert manifest == sent  # the caller's object is left alone
    assert created["spec"]["serviceAccountName"] == "default"
    (volume,) = token_volumes(created)
    assert volume == {"name": volume["name"], "projected": token_volume_source()}
    assert len(volume["name"]) == len("kube-api-access-") + 5
    mount = {"name": volume["name"], "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
    for c in [*created["spec"]["initContainers"], *created["spec"]["containers"]]:
        assert c["volumeMounts"] == [mount]


async def test_automount_off_and_an_own_mount_at_the_path_are_respected(sim):
    await standard_world(sim)
    client = sim.client()
    await client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": "quiet", "namespace": "default"},
                         "automountServiceAccountToken": False})
    quiet = pod("quiet")
    quiet["spec"]["serviceAccountName"] = "quiet"
    assert token_volumes(await client.create(quiet)) == []
    loud = pod("loud")
    loud["spec"].update(serviceAccountName="quiet", automountServiceAccountToken=True)
    assert len(token_volumes(await client.create(loud))) == 1  # the Pod's word wins
    own = pod("own", volumes=[{"name": "mine", "emptyDir": {}}])
    own["spec"]["containers"][0]["volumeMounts"] = [{"name": "mine",
                                                     "mountPath": TOKEN_MOUNT_PATH}]
    created = await client.create(own)
    assert token_volumes(created) == []  # no container needs it
    assert created["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]


async def test_a_missing_service_account_is_kubes_403(sim):
    await standard_world(sim)
    manifest = pod("p")
    manifest["spec"]["serviceAccountName"] = "ghost"
    with pytest.raises(Forbidden) as err:
        await sim.client().create(manifest)
    assert err.value.message == ('pods "p" is forbidden: error looking up service account '
                                 'default/ghost: serviceaccount "ghost" not found')
    generated = pod("")
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "web-"
    generated["spec"]["serviceAccountName"] = "ghost"
    with pytest.raises(Forbidden, match='pods "web-" is forbidden'):
        await sim.client().create(generated)  # admission runs before the name is generated


async def test_a_program_reads_a_token_that_authenticates_as_its_service_account(sim):
    seen: dict[str, str] = {}

    async def reads(ctx):
        base = ctx.volumes[TOKEN_MOUNT_PATH]
        for name in ("token", "ca.crt", "namespace"):
            seen[name] = (base / name).read_text()
        return 0

    sim.programs.register("example/reader", reads)
    await standard_world(sim)
    client = sim.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
    await sim.wait_for("ServiceAccount", "default", namespace="apps", timeout=5)
    manifest = pod("reader", restart_policy="Never", image="example/reader")
    manifest["metadata"]["namespace"] = "apps"
    await client.create(manifest)
    await sim.wait_for("Pod", "reader", phase_is("Succeeded"), namespace="apps", timeout=60)
    assert seen["namespace"] == "apps"
    root = await sim.get("ConfigMap", "kube-root-ca.crt", namespace="apps")
    assert seen["ca.crt"] == root["data"]["ca.crt"]
    review = sim.api.tokens.review({"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "TokenReview", "spec": {"token": seen["token"]}})
    status = review["status"]
    assert status["authenticated"] is True
    assert status["user"]["username"] == "system:serviceaccount:apps:default"
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["reader"]
    # asked for with 3607 s and bound to a Pod: kube-apiserver extends it to a year and
    # records when it would have expired
    part = seen["token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] - claims["iat"] == 3607


async def test_a_token_is_refreshed_at_80_percent_of_its_life_when_the_program_rereads_it(sim):
    tokens: list[str] = []

    async def rereads(ctx):
        path = ctx.volumes["/var/run/vault"] / "vault-token"
        tokens.append(path.read_text())
        for wait in (2000, 1000):  # 80 % of the hour is 2880 s
            await ctx.process.sleep(wait)
            await ctx.services["sync_volumes"]()
            tokens.append(path.read_text())
        return 0

    sim.programs.register("example/rereader", rereads)
    await standard_world(sim)
    manifest = pod("r", restart_policy="Never", image="example/rereader", volumes=[
        {"name": "vault", "projected": {"sources": [{"serviceAccountToken": {
            "audience": "vault", "expirationSeconds": 3600, "path": "vault-token"}}]}}])
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "vault",
                                                          "mountPath": "/var/run/vault"}]
    await sim.client().create(manifest)
    await sim.wait_for("Pod", "r", phase_is("Succeeded"), timeout=4000)
    assert tokens[0] == tokens[1] != tokens[2]
    review = sim.api.tokens.review({"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "TokenReview",
                                    "spec": {"token": tokens[2], "audiences": ["vault"]}})
    assert review["status"]["authenticated"] is True
    assert review["status"]["audiences"] == ["vault"]


async def test_token_files_are_written_only_for_a_program_that_looks_at_its_mounts(sim):
    # every Pod of a standard cluster has the token volume; writing its files for programs that
    # never read them would fill the work directory (and a world with files there cannot be
    # snapshotted), so the kubelet writes them when a program first looks
    looked: dict[str, list] = {}

    async def idle(ctx):
        ctx.set_ready(True)
        await asyncio.Event().wait()

    async def finds(ctx):
        looked["paths"] = ctx.host_paths(TOKEN_MOUNT_PATH + "/token")
        looked["exists"] = [p.exists() for p in looked["paths"]]
        return 0

    sim.programs.register("example/idle", idle)
    sim.programs.register("example/finds", finds)
    cluster = await standard_world(sim)
    client = sim.client()
    await client.create(pod("quiet", image="example/idle"))
    await sim.wait_for("Pod", "quiet", phase_is("Running"), namespace="default", timeout=60)
    files = [p for p in cluster.workdir.rglob("*") if p.is_file()]
    assert files == []
    await client.create(pod("finder", restart_policy="Never", image="example/finds"))
    await sim.wait_for("Pod", "finder", phase_is("Succeeded"), namespace="default", timeout=60)
    [path] = looked["paths"]
    assert looked["exists"] == [True] and path.name == "token"
    written = sorted(p.name for p in cluster.workdir.rglob("*") if p.is_file())
    assert written == ["ca.crt", "namespace", "token"]  # the finder's volume only


def test_mounts_write_a_volume_when_a_program_looks_and_only_the_one_it_looks_at():
    from pathlib import Path

    from emu.kube.projected import Mounts

    class Volume:
        def __init__(self) -> None:
            self.written = 0

        def materialize(self) -> None:
            self.written += 1

    token, other = Volume(), Volume()
    mounts = Mounts({"/var/token": Path("/h/t"), "/etc/other": Path("/h/o")},
                    {"/var/token": token, "/etc/other": other})  # type: ignore[dict-item]
    assert "/var/token" in mounts and sorted(dict.keys(mounts)) == ["/etc/other", "/var/token"]
    assert (token.written, other.written) == (0, 0)  # membership writes nothing
    mounts.look_at("/var/token")
    mounts.look_at("/var/token")
    assert (token.written, other.written) == (1, 0)
    assert mounts.copy() == {"/var/token": Path("/h/t"), "/etc/other": Path("/h/o")}
    assert (token.written, other.written) == (1, 1)  # a copy hands out every host path


def test_host_paths_names_every_covering_mount_deepest_first_a_root_mount_included():
    from pathlib import Path

    from emu.kernel.programs import ContainerContext

    ctx = object.__new__(ContainerContext)
    ctx.volumes = {"/": Path("/h/root"), "/data/": Path("/h/data"), "/database": Path("/h/db")}
    assert ctx.host_paths("/data/x/y") == [Path("/h/data/x/y"), Path("/h/root/data/x/y")]
    assert ctx.host_paths("/data") == [Path("/h/data"), Path("/h/root/data")]
    assert ctx.host_paths("/") == [Path("/h/root")]
