"""E2 of docs/findings.md: a reconcile hot loop moves virtual time instead of freezing it.

The operator's RayCluster watch lags (`InformerLag`) when the RayCluster is deleted: its cache
still holds the cluster, so each reconcile creates the head Service again (owned by a cluster
that is gone), the garbage collector deletes it, and that deletion triggers the next reconcile
— as a real operator would, until the lagging watch delivers the deletion. Every step of it is
instant in virtual time, so the loop used to spin at one instant for ever (the explorer found it
as a livelock in kube-proxy, which sees every one of those Services). Now each pass of a hot loop
costs `HOT_LOOP_COST`, and the loop ends when the deletion reaches the cache, as on a cluster.
"""

from __future__ import annotations

import emu
from emu.faults import InformerLag
from emu.kube.config import KubeConfig
from emu.kuberay.operator import Configuration, operator_config
from emu.kuberay.utils.features import parse_feature_gates
from emu.runtime import start_operator
from emu.runtime.controller import HOT_LOOP_COST, HOT_LOOP_RECONCILES

NS = "default"
LAG = 3.0


def raycluster() -> dict[str, object]:
    container = {"name": "ray", "image": "rayproject/ray:2.46.0"}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": NS},
            "spec": {"rayVersion": "2.46.0",
                     "headGroupSpec": {"rayStartParams": {},
                                       "template": {"spec": {"containers": [container]}}}}}


def test_a_stale_cache_against_the_garbage_collector_loops_until_the_watch_catches_up() -> None:
    async def main(sim: emu.Simulation) -> None:
        config = Configuration(enable_leader_election=False)
        start_operator(sim, "kuberay-operator",
                       operator_config(config, parse_feature_gates(""), env={}, pod_namespace=NS))
        await sim.apply(raycluster())
        await sim.wait_for("Service", "rc-head-svc", namespace=NS)
        await sim.sleep(5)
        sim.faults.do(InformerLag(process="kuberay-operator", kind="RayCluster", seconds=LAG))
        deleted_at = sim.now
        await sim.client().delete("RayCluster", "rc", NS)
        await sim.sleep(LAG + 5)  # returned at all: virtual time moved on
        creates = [e.t for e in sim.trace.select(event="write")
                   if e.fields.get("kind") == "Service" and e.fields.get("verb") == "create"
                   and e.t >= deleted_at]
        # the loop ran (each pass recreated the Service) ...
        assert len(creates) > HOT_LOOP_RECONCILES
        # ... for as long as the watch lagged, a pass per HOT_LOOP_COST once hot ...
        assert deleted_at + LAG - 0.1 <= creates[-1] <= deleted_at + LAG + 2 * HOT_LOOP_COST
        # ... and stopped there: nothing is left behind
        assert await sim.client().list("Service", NS, label_selector="ray.io/cluster=rc") == []

    emu.run(main, seed=1, cluster=KubeConfig(nodes=1))


def test_the_streak_map_forgets_old_keys_and_prunes_rarely_when_many_are_recent() -> None:
    import asyncio

    from emu.kernel.loop import VirtualTimeLoop
    from emu.runtime.controller import Controller

    async def reconcile(_req: object) -> None:
        return None

    loop = VirtualTimeLoop()
    controller = Controller("c", reconcile)  # type: ignore[arg-type]

    async def main() -> tuple[int, int, int]:
        for i in range(5000):  # all at one instant: none can be forgotten
            await controller._charge_hot_loop(f"k{i}")
        at_once, bound = len(controller._streaks), controller._streaks_bound
        await asyncio.sleep(1.0)
        for i in range(bound - at_once + 1):  # crossing the bound a second later prunes the rest
            await controller._charge_hot_loop(f"late{i}")
        return at_once, bound, len(controller._streaks)

    try:
        at_once, bound, after = loop.run_until_complete(main())
    finally:
        loop.close()
    assert at_once == 5000 and bound >= 2 * 4097  # pruned once at 4,097, then the bound doubled
    assert after <= bound - at_once + 1  # the 5,000 old keys are gone
