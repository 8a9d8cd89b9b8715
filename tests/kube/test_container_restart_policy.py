"""Container-level ``restartPolicy``: native sidecars and regular containers' own policy.

Native sidecars are init containers with ``restartPolicy: Always`` (Kubernetes 1.29+).
As the kubelet runs them (``computePodActions``, ``getPhase``, ``status/generate.go``): started
in order among the init containers, the next one starting once the sidecar runs; kept running
beside the main containers and restarted (with back-off) whenever they exit, whatever the Pod's
``restartPolicy``; their readiness counts for the Pod's; they do not hold the Pod: once its main
containers are done for good the sidecars are stopped and the phase comes from the main
containers alone. A regular container's own ``restartPolicy`` and ``restartPolicyRules``
(ContainerRestartRules, beta in 1.35: KubeRay's SidecarSubmitterRestart relies on it) override
the Pod's for that container.
"""

from __future__ import annotations

import asyncio

from kube_helpers import condition, exits, is_true, phase_is, pod, ready_after

from emu.kernel.programs import ContainerContext
from emu.kube import cluster as kc


def with_sidecar(manifest: dict, *, image: str = "example/sidecar",
                 before: list[dict] | None = None, after: list[dict] | None = None) -> dict:
    manifest["spec"]["initContainers"] = [*(before or []),
                                          {"name": "proxy", "image": image,
                                           "restartPolicy": "Always"}, *(after or [])]
    return manifest


def status_of(obj: dict, name: str) -> dict:
    statuses = (obj.get("status") or {}).get("initContainerStatuses") or []
    return next((s for s in statuses if s["name"] == name), {})


async def test_a_sidecar_starts_before_the_next_init_container_and_keeps_running(sim):
    order: list[tuple[str, float]] = []

    def step(name: str):
        async def program(ctx: ContainerContext) -> int:
            order.append((name, asyncio.get_running_loop().time()))
            return 0
        return program

    async def sidecar(ctx: ContainerContext) -> int:
        order.append(("proxy", asyncio.get_running_loop().time()))
        ctx.set_ready(True)
        await asyncio.Event().wait()
        return 0

    sim.programs.register("example/sidecar", sidecar)
    sim.programs.register("example/init-a", step("a"))
    sim.programs.register("example/init-b", step("b"))
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(with_sidecar(pod("p"), before=[{"name": "a", "image": "example/init-a"}],
                                 after=[{"name": "b", "image": "example/init-b"}]))
    ready = await sim.wait_for("Pod", "p", is_true("Ready"))
    assert [name for name, _ in order] == ["a", "proxy", "b"]
    assert order[1][1] < order[2][1]  # b waited for the sidecar to run
    proxy = status_of(ready, "proxy")
    assert "running" in proxy["state"] and proxy["started"] and proxy["ready"]
    assert ready["status"]["phase"] == "Running"
    assert is_true("Initialized")(ready)


async def test_an_unready_sidecar_keeps_the_pod_unready(sim):
    async def unready(ctx: ContainerContext) -> int:
        await asyncio.Event().wait()
        return 0

    sim.programs.register("example/sidecar", unready)
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(with_sidecar(pod("p")))
    await sim.wait_for("Pod", "p", lambda p: "running" in (
        (p.get("status") or {}).get("containerStatuses") or [{}])[0].get("state", {}))
    await sim.sleep(5)
    running = await sim.wait_for("Pod", "p")
    assert running["status"]["phase"] == "Running"
    assert is_true("Initialized")(running)
    ready = condition(running, "Ready")
    assert ready is not None and ready["status"] == "False"
    assert ready["message"] == "containers with unready status: [proxy]"


async def test_an_exiting_sidecar_is_restarted_with_back_off_even_under_restart_never(sim):
    starts: list[float] = []
    sim.programs.register("example/sidecar", exits(1, after=1.0, starts=starts))
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(with_sidecar(pod("p", restart_policy="Never")))
    await sim.wait_for("Pod", "p", lambda p: status_of(p, "proxy").get("restartCount", 0) >= 2,
                       timeout=120)
    await sim.sleep(2)  # the third run has started
    p = await sim.wait_for("Pod", "p")
    assert p["status"]["phase"] == "Running"  # the main container runs on, never restarted
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    # each run lasts 1 s and a start 1.5 s (pull, create); the first restart at once, the
    # next after the 10 s back-off
    assert starts[1] - starts[0] < 5
    assert starts[2] - starts[1] > 10


async def test_sidecars_do_not_hold_a_completed_pod(sim):
    stopped: list[str] = []

    async def sidecar(ctx: ContainerContext) -> int:
        ctx.set_ready(True)
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append("proxy")
        return 0

    sim.programs.register("example/sidecar", sidecar)
    sim.programs.register("example/job", exits(0, after=5.0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(with_sidecar(pod("p", image="example/job", restart_policy="Never")))
    done = await sim.wait_for("Pod", "p", phase_is("Succeeded"), timeout=60)
    assert stopped == ["proxy"]
    assert "terminated" in status_of(done, "proxy")["state"]
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


async def test_a_failed_main_container_fails_the_pod_beside_a_running_sidecar(sim):
    sim.programs.register("example/sidecar", ready_after(0))
    sim.programs.register("example/job", exits(3, after=2.0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    await sim.apply(with_sidecar(pod("p", image="example/job", restart_policy="Never")))
    done = await sim.wait_for("Pod", "p", phase_is("Failed"), timeout=60)
    assert "terminated" in status_of(done, "proxy")["state"]


# -- container-level restartPolicy of regular containers (ContainerRestartRules, K8s 1.35) ------


def flaky(codes: list[int], starts: list[float]):
    """Exits with the next of ``codes`` each run (the last one for good)."""

    async def program(ctx: ContainerContext) -> int:
        starts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(1.0)
        return codes[min(len(starts), len(codes)) - 1]

    return program


async def test_a_containers_own_on_failure_policy_overrides_the_pods_never(sim):
    starts: list[float] = []
    sim.programs.register("example/job", flaky([1, 0], starts))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p", image="example/job", restart_policy="Never")
    manifest["spec"]["containers"][0]["restartPolicy"] = "OnFailure"
    await sim.apply(manifest)
    done = await sim.wait_for("Pod", "p", phase_is("Succeeded"), timeout=60)
    assert len(starts) == 2
    # (a Pod never leaves a terminal phase: Succeeded means it was never Failed meanwhile)
    assert done["status"]["containerStatuses"][0]["restartCount"] == 1


async def test_restart_rules_restart_on_the_listed_exit_codes_only(sim):
    starts: list[float] = []
    sim.programs.register("example/job", flaky([42, 42, 3], starts))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p", image="example/job", restart_policy="Never")
    manifest["spec"]["containers"][0].update(
        restartPolicy="Never",
        restartPolicyRules=[{"action": "Restart",
                             "exitCodes": {"operator": "In", "values": [42]}}])
    await sim.apply(manifest)
    done = await sim.wait_for("Pod", "p", phase_is("Failed"), timeout=120)
    assert len(starts) == 3
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3


async def test_a_submitter_that_restarts_on_failure_beside_a_head_never_fails_it(sim):
    """KubeRay's SidecarSubmitterRestart shape: a head Pod with ``restartPolicy: Never`` and a
    submitter container with ``restartPolicy: OnFailure``; the submitter's failure restarts it,
    the Pod stays Running."""
    starts: list[float] = []
    sim.programs.register("example/submitter", flaky([1, 1, 0], starts))
    sim.programs.register("example/app", ready_after(0))
    cluster = kc.install(sim)
    await cluster.wait_ready()
    manifest = pod("p", restart_policy="Never")
    manifest["spec"]["containers"].append({"name": "submitter", "image": "example/submitter",
                                           "restartPolicy": "OnFailure"})
    await sim.apply(manifest)
    await sim.sleep(40)
    p = await sim.wait_for("Pod", "p")
    assert p["status"]["phase"] == "Running"
    submitter = next(s for s in p["status"]["containerStatuses"] if s["name"] == "submitter")
    assert submitter["restartCount"] == 2
    assert submitter["state"]["terminated"]["exitCode"] == 0
