"""The kubelet never fails silently: each failure to start a container is a waiting reason, a
Warning Event and a trace event; ConfigMap keys mount with ``subPath``; an init container whose
command nothing emulates exits 0."""

from __future__ import annotations

from kube_helpers import exits, phase_is, pod

from emu.kube import cluster as kc


def events_for(sim, name):
    items = sim.api.list("Event", "default")["items"]
    return [e for e in items if e["involvedObject"]["name"] == name]


async def test_config_map_key_mounted_with_sub_path_is_a_file(sim):
    seen = {}

    async def reads(ctx):
        host = ctx.volumes["/etc/app/app.conf"]
        seen["text"] = host.read_text()
        return 0

    sim.programs.register("example/app", reads)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "cfg", "namespace": "default"},
                     "data": {"app.conf": "port 6379\n"}})
    manifest = pod("p", restart_policy="Never",
                   volumes=[{"name": "config", "configMap": {"name": "cfg"}}])
    manifest["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/app/app.conf", "subPath": "app.conf"}]
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", phase_is("Succeeded"))
    assert seen == {"text": "port 6379\n"}


async def test_missing_secret_is_a_warning_event_and_a_trace_event(sim):
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["env"] = [
        {"name": "K", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", lambda p: "waiting" in (
        p["status"].get("containerStatuses") or [{"state": {}}])[0]["state"])
    await sim.sleep(30)
    events = events_for(sim, "p")
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [
        ("Warning", "Failed", 'Error: secret "nope" not found')]
    assert events[0]["count"] > 1  # retried, aggregated into one Event
    assert events[0]["source"]["component"] == "kubelet"
    traced = [e for e in sim.trace.events if e.event == "k8s_event"]
    assert traced and traced[0].fields["reason"] == "Failed"


async def test_a_volume_the_runtime_cannot_lay_out_is_create_container_error(sim):
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "cfg", "namespace": "default"},
                     "data": {"a": "1"}})
    manifest = pod("p", volumes=[{"name": "config", "configMap": {"name": "cfg"}}])
    # a directory under a file: the runtime can't create the mount point
    manifest["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "config", "mountPath": "/x", "subPath": "a/b"}]
    await sim.apply(manifest)
    stuck = await sim.wait_for("Pod", "p", lambda p: "waiting" in (
        p["status"].get("containerStatuses") or [{"state": {}}])[0]["state"])
    state = stuck["status"]["containerStatuses"][0]["state"]["waiting"]
    assert state["reason"] == "CreateContainerError"
    assert stuck["status"]["phase"] == "Pending"
    await sim.sleep(1)
    assert [e["reason"] for e in events_for(sim, "p")] == ["Failed"]


async def test_crash_loop_back_off_is_a_back_off_event(sim):
    sim.programs.register("example/app", exits(1))
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pod("p"))
    await sim.wait_for("Pod", "p", lambda p: (p["status"].get("containerStatuses") or [{}])[0]
                       .get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff")
    await sim.sleep(1)
    events = events_for(sim, "p")
    assert [e["reason"] for e in events] == ["BackOff"]
    assert events[0]["message"].startswith("Back-off restarting failed container app in pod p_")


async def test_init_container_with_an_unknown_command_exits_zero(sim):
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p", initContainers=[
        {"name": "setup", "image": "busybox:1.36", "command": ["sh", "-c", "make-certs.sh"]}])
    await sim.apply(manifest)
    running = await sim.wait_for("Pod", "p", phase_is("Running"))
    init = running["status"]["initContainerStatuses"][0]["state"]
    assert init["terminated"]["exitCode"] == 0


async def test_a_missing_config_map_volume_is_failed_mount(sim):
    cluster = kc.install(sim, standard_cluster=False)
    await cluster.wait_ready()
    await sim.apply(pod("p", volumes=[{"name": "config", "configMap": {"name": "absent"}}]))
    stuck = await sim.wait_for("Pod", "p", lambda p: "waiting" in (
        p["status"].get("containerStatuses") or [{"state": {}}])[0]["state"])
    waiting = stuck["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ContainerCreating"
    await sim.sleep(1)
    assert [(e["reason"], e["message"]) for e in events_for(sim, "p")] == [
        ("FailedMount", 'MountVolume.SetUp failed for volume "config" : '
                        'configmap "absent" not found')]
    await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "absent", "namespace": "default"}, "data": {}})
    await sim.wait_for("Pod", "p", lambda p: p["status"].get("phase") == "Running", timeout=60)
