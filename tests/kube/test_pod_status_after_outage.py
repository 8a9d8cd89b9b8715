"""A Pod status change the API server refused during an outage is posted once it is back.

The bug (docs/findings.md E4): the pod worker retries a failed status write every
`STATUS_RETRY` seconds through a timer, and took a timer that had already fired for a pending
one when its ``when()`` was still ahead of ``time()`` — which happens because the loop runs every
timer due within its clock resolution (1 ns) together with the earliest. Its retry was dropped,
nothing else woke the worker, and the Pod's Ready condition was never posted: the explorer's
RayCluster with GCS fault tolerance stayed "0/1 workers Ready" after a 30 s outage. A real
kubelet's status manager keeps retrying until the API server takes the status.
"""

from __future__ import annotations

import asyncio

from kube_helpers import condition, is_true, pod, ready_after

import emu.kube.cluster as kc
from emu.faults import Outage
from emu.kernel.trace import TraceEvent
from emu.kube.kubelet import STATUS_RETRY


async def test_readiness_gained_during_an_outage_is_posted_after_it(sim):
    sim.programs.register("example/app", ready_after(20))
    cluster = kc.install(sim, nodes=1)
    await cluster.wait_ready()
    await sim.apply(pod("p"))
    p = await sim.wait_for("Pod", "p", lambda p: p["status"].get("phase") == "Running")
    assert condition(p, "Ready")["status"] == "False"

    # Another timer just under a clock tick before each retry (here a no-op; in the explorer's
    # run, another kubelet's): the loop fires the retry with it, a hair early.
    loop = asyncio.get_running_loop()
    failures: list[float] = []

    def neighbour(event: TraceEvent) -> None:
        if event.event == "pod_sync_error" and event.fields.get("pod") == "default/p":
            failures.append(event.t)
            loop.call_at(event.t + STATUS_RETRY - 5e-10, lambda: None)

    sim.trace.subscribe(neighbour)
    sim.faults.do(Outage(duration=30))
    await sim.sleep(30)
    # the program became ready during the outage; the kubelet could not say so
    assert failures and condition(await sim.get("Pod", "p"), "Ready")["status"] == "False"
    # it kept retrying through the outage, and the next retry posts Ready
    assert len(failures) >= 5
    await sim.wait_for("Pod", "p", is_true("Ready"), timeout=2 * STATUS_RETRY)
