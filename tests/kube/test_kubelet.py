"""The kubelet: Pod phases, conditions and container statuses in virtual time."""

from __future__ import annotations

import itertools

from kube_helpers import condition, exits, is_true, phase_is, pod, ready_after

import emu.kube.cluster as kc
from emu.apiserver.errors import NotFound


async def test_pod_is_scheduled_then_running_after_pull_and_start_then_ready_when_program_says(sim):
    sim.programs.register("example/app", ready_after(2.0))
    cluster = kc.install(sim, image_pull_delay=1.0, container_start_delay=0.5)
    await cluster.wait_ready()
    t0 = sim.now
    await sim.apply(pod("p"))
    running = await sim.wait_for("Pod", "p", phase_is("Running"))
    assert sim.now - t0 == 1.5
    assert condition(running, "PodScheduled")["status"] == "True"
    assert condition(running, "Initialized")["status"] == "True"
    assert condition(running, "ContainersReady") == {
        "type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
        "message": "containers with unready status: [app]",
        "lastTransitionTime": condition(running, "ContainersReady")["lastTransitionTime"]}
    [cs] = running["status"]["containerStatuses"]
    assert cs["started"] is True and cs["ready"] is False and cs["restartCount"] == 0
    assert "running" in cs["state"]
    ready = await sim.wait_for("Pod", "p", is_true("Ready"))
    assert sim.now - t0 == 3.5
    assert condition(ready, "ContainersReady")["status"] == "True"
    assert ready["status"]["podIP"].startswith("10.244.")
    assert ready["status"]["hostIP"].startswith("10.0.")


async def test_pod_status_is_pending_with_container_creating_before_the_container_starts(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, image_pull_delay=10.0)
    await cluster.wait_ready()
    await sim.apply(pod("p"))
    pending = await sim.wait_for("Pod", "p", lambda p: bool(p["status"].get("containerStatuses")))
    assert pending["status"]["phase"] == "Pending"
    [cs] = pending["status"]["containerStatuses"]
    assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}}


async def test_restart_policy_always_restarts_at_once_then_backs_off_10s_doubling(sim):
    starts: list[float] = []
    sim.programs.register("example/app", exits(1, starts=starts))
    cluster = kc.install(sim, image_pull_delay=1.0, container_start_delay=0.5)
    await cluster.wait_ready()
    await sim.apply(pod("p"))
    await sim.wait_until(lambda: len(starts) == 5, timeout=200, every=0.1)
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(starts)]
    assert gaps == [0.5, 10.5, 20.5, 40.5]
    waiting = await sim.wait_for(
        "Pod", "p", lambda p: "waiting" in p["status"]["containerStatuses"][0]["state"])
    [cs] = waiting["status"]["containerStatuses"]
    uid = waiting["metadata"]["uid"]
    assert cs["state"]["waiting"] == {
        "reason": "CrashLoopBackOff",
        "message": f"back-off 1m20s restarting failed container=app pod=p_default({uid})"}
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    assert waiting["status"]["phase"] == "Running"


async def test_restart_policy_on_failure_restarts_failures_and_succeeds_on_exit_zero(sim):
    codes = iter([2, 2, 0])
    starts: list[float] = []

    async def program(ctx):
        starts.append(sim.now)
        return next(codes)

    sim.programs.register("example/app", program)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(pod("p", restart_policy="OnFailure"))
    done = await sim.wait_for("Pod", "p", phase_is("Succeeded"), timeout=100)
    [cs] = done["status"]["containerStatuses"]
    assert cs["restartCount"] == 2
    assert cs["state"]["terminated"]["exitCode"] == 0
    assert cs["state"]["terminated"]["reason"] == "Completed"
    assert len(starts) == 3
    assert condition(done, "Ready")["reason"] == "PodCompleted"


async def test_restart_policy_never_leaves_the_container_terminated_and_the_pod_failed(sim):
    sim.programs.register("example/app", exits(3, after=1.0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(pod("p", restart_policy="Never"))
    failed = await sim.wait_for("Pod", "p", phase_is("Failed"))
    [cs] = failed["status"]["containerStatuses"]
    assert cs["restartCount"] == 0
    assert cs["state"]["terminated"]["exitCode"] == 3
    assert cs["state"]["terminated"]["reason"] == "Error"
    await sim.sleep(60)
    assert (await sim.get("Pod", "p"))["status"]["containerStatuses"][0]["restartCount"] == 0


async def test_init_containers_run_in_order_before_the_containers(sim):
    order: list[str] = []

    def step(name: str, code: int = 0):
        async def program(ctx):
            order.append(name)
            return code
        return program

    sim.programs.register("example/init-a", step("a"))
    sim.programs.register("example/init-b", step("b"))
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["initContainers"] = [{"name": "a", "image": "example/init-a"},
                                          {"name": "b", "image": "example/init-b"}]
    await sim.apply(manifest)
    ready = await sim.wait_for("Pod", "p", is_true("Ready"))
    assert order == ["a", "b"]
    assert [s["state"]["terminated"]["reason"] for s in ready["status"]["initContainerStatuses"]] \
        == ["Completed", "Completed"]


async def test_failing_init_container_with_restart_never_fails_the_pod_and_skips_containers(sim):
    started: list[str] = []

    async def app(ctx):
        started.append("app")
        return 0

    sim.programs.register("example/init", exits(1))
    sim.programs.register("example/app", app)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p", restart_policy="Never")
    manifest["spec"]["initContainers"] = [{"name": "init", "image": "example/init"}]
    await sim.apply(manifest)
    failed = await sim.wait_for("Pod", "p", phase_is("Failed"))
    assert started == []
    assert condition(failed, "Initialized")["message"] == \
        "containers with incomplete status: [init]"
    assert failed["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "PodInitializing"}}


async def test_graceful_deletion_keeps_the_pod_terminating_until_its_containers_stop(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, container_stop_delay=5.0)
    await cluster.wait_ready()
    await sim.apply(pod("p"))
    await sim.wait_for("Pod", "p", is_true("Ready"))
    proc = cluster.container_process("default", "p", "app")
    client = sim.client()
    t0 = sim.now
    deleted = await client.delete("Pod", "p", "default")
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    await sim.sleep(4.9)
    assert proc.alive
    assert (await sim.get("Pod", "p"))["metadata"]["deletionTimestamp"]
    await sim.wait_until(lambda: not proc.alive, every=0.01, timeout=1)
    assert round(sim.now - t0, 2) == 5.0
    await sim.sleep(0.1)
    assert await sim.get("Pod", "p") is None
    try:
        await client.get("Pod", "p", "default")
    except NotFound as err:
        assert str(err) == 'pods "p" not found'
    else:
        raise AssertionError("the Pod should be gone")


async def test_container_env_resolves_field_and_config_map_refs(sim):
    seen: dict[str, str] = {}

    async def program(ctx):
        seen.update(ctx.env)
        ctx.set_ready(True)
        return 0

    sim.programs.register("example/app", program)
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "cfg", "namespace": "default"}, "data": {"k": "v"}})
    manifest = pod("p", restart_policy="Never")
    manifest["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "a"},
        {"name": "B", "value": "$(A)-b"},
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}]
    await sim.apply(manifest)
    done = await sim.wait_for("Pod", "p", phase_is("Succeeded"))
    assert seen == {"A": "a", "B": "a-b", "NAME": "p", "IP": done["status"]["podIP"], "K": "v"}


async def test_missing_config_map_is_create_container_config_error(sim):
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["env"] = [
        {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]
    await sim.apply(manifest)
    stuck = await sim.wait_for("Pod", "p", lambda p: "waiting" in (
        p["status"].get("containerStatuses") or [{"state": {}}])[0]["state"])
    assert stuck["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "CreateContainerConfigError",
                    "message": 'configmap "nope" not found'}}
    assert stuck["status"]["phase"] == "Pending"


async def test_readiness_probe_samples_the_program_after_its_initial_delay_and_period(sim):
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim, image_pull_delay=0.0, container_start_delay=1.0)
    await cluster.wait_ready()
    manifest = pod("p")
    manifest["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["true"]}, "initialDelaySeconds": 10, "periodSeconds": 5}
    t0 = sim.now
    await sim.apply(manifest)
    await sim.wait_for("Pod", "p", is_true("Ready"))
    assert round(sim.now - t0, 6) == 11.0


async def test_unschedulable_pod_stays_pending_with_pod_scheduled_false(sim):
    cluster = kc.install(sim, nodes=3, node_cpu="4", standard_cluster=False)
    await cluster.wait_ready()
    manifest = pod("big")
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "8"}}
    await sim.apply(manifest)
    p = await sim.wait_for("Pod", "big", lambda p: condition(p, "PodScheduled") is not None)
    cond = condition(p, "PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")
    await sim.sleep(30)
    p = await sim.get("Pod", "big")
    assert p["status"]["phase"] == "Pending" and not p["spec"].get("nodeName")


async def test_node_selector_places_the_pod_on_a_matching_node(sim):
    cluster = kc.install(sim, nodes=3)
    await cluster.wait_ready()
    await sim.apply(pod("p", nodeSelector={"kubernetes.io/hostname": "node-3"}))
    p = await sim.wait_for("Pod", "p", phase_is("Running"))
    assert p["spec"]["nodeName"] == "node-3"


def test_go_duration_string_prints_durations_as_go_does():
    from emu.kube.kubelet import go_duration_string

    assert [go_duration_string(s) for s in (0, 0.5, 0.25, 1, 1.5, 90.25, 3600, 0.0000015)] == [
        "0s", "500ms", "250ms", "1s", "1.5s", "1m30.25s", "1h0m0s", "1.5µs"]
