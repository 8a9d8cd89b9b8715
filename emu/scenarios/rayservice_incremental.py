"""KubeRay's incremental upgrade (``NewClusterWithIncrementalUpgrade``) as a scenario: traffic moved
from the old cluster to the new one through a Gateway in weighted steps, under a request stream.

Unlike blue/green (`emu.scenarios.rayservice`), the Services are never re-pointed: a Gateway and an
HTTPRoute send each request to one of the two clusters' per-cluster serve Services by the route's
weights, which the controller moves by ``stepSizePercent`` every ``intervalSeconds``, never ahead
of the new cluster's Serve ``target_capacity``, which it raises (and the old one's lowers) by
``maxSurgePercent`` in Serve config PUTs. The Gateway implementation is the emulator's Istio
stand-in (`emu.kube.gateway`).
"""

from __future__ import annotations

import itertools
from typing import Any

from ..kernel.process import Process
from ..kube.config import KubeConfig
from ..simulation import Simulation
from . import Report, scenario
from ._rayservice_common import (
    DEFAULT_DELETION_DELAY,
    NS,
    Narrator,
    Traffic,
    rayservice,
    start,
    status_names,
    update_rayservice,
    upgrade_to,
)

RS = "rs"
STEP, INTERVAL, SURGE = 25, 10, 50
#: EndpointSlice propagation delay.
PROPAGATION = 2.0
GATEWAY = f"{RS}-gateway-istio.{NS}.svc.cluster.local:80"


def incremental_rayservice() -> dict[str, Any]:
    rs = rayservice(RS)
    spec = rs["spec"]
    spec["upgradeStrategy"] = {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": STEP,
                                  "intervalSeconds": INTERVAL, "maxSurgePercent": SURGE}}
    spec["rayClusterConfig"]["enableInTreeAutoscaling"] = True  # Go's validation requires it
    return rs


def _fields(obj: dict[str, Any] | None) -> tuple[Any, ...]:
    st = (obj or {}).get("status") or {}
    a, p = st.get("activeServiceStatus") or {}, st.get("pendingServiceStatus") or {}
    return (a.get("rayClusterName", ""), a.get("targetCapacity"), a.get("trafficRoutedPercent"),
            p.get("rayClusterName", ""), p.get("targetCapacity"), p.get("trafficRoutedPercent"))


class UpgradeWatch:
    """Logs each change of the RayService's incremental-upgrade fields (lane ``upgrade/rs``) as
    its status is written, and keeps them with their times."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.seen: list[tuple[float, tuple[Any, ...]]] = []
        self.process = sim.start_process(f"upgrade/{RS}", self._run)

    async def _run(self, process: Process) -> None:
        while True:
            fields = _fields(await self.sim.get("RayService", RS, NS))
            if not self.seen or self.seen[-1][1] != fields:
                self.seen.append((self.sim.now, fields))
                process.log("upgrade_fields", active=fields[0], active_capacity=fields[1],
                            active_traffic=fields[2], pending=fields[3],
                            pending_capacity=fields[4], pending_traffic=fields[5])
            await self.sim.sleep(0.5)


@scenario("rayservice-incremental-upgrade",
          "incremental upgrade through a Gateway: traffic moves in 25% steps every 10 s behind "
          "the new cluster's target_capacity; no request fails; promotion at 100%",
          cluster=KubeConfig(nodes=2, endpoint_propagation_delay=PROPAGATION,
                             gateway_classes=("istio",)))
async def rayservice_incremental_upgrade(sim: Simulation, report: Report) -> None:
    """A RayService with ``NewClusterWithIncrementalUpgrade`` (step 25%, interval 10 s, surge 50%)
    upgraded once while a client sends ``GET /fruit`` to its Gateway every 0.5 s.

    Expected, as KubeRay's Go does it: the Gateway and HTTPRoute are created and accepted by the
    Gateway implementation; the new cluster starts at target_capacity 0 and gets traffic only
    after its capacity was raised; every traffic step is 25% and at least 10 s after the last;
    traffic never exceeds the new cluster's capacity; the two capacities add up to between 100%
    and 150%; the new cluster is promoted when the old one is at 0% capacity and the new one has
    100% of the traffic, and the route then lists only the new cluster; the old cluster is deleted
    after the 60 s deletion delay; no request fails, and the new cluster serves a share of them
    before the promotion.
    """
    await start(sim, replicas=1)
    narrator = Narrator(sim, RS)
    await sim.apply(incremental_rayservice())
    await sim.wait_for("RayService", RS, lambda o: _fields(o)[1:3] == (100, 100), timeout=300)
    old = status_names(sim, RS)[0]
    gw = await sim.get("Gateway", f"{RS}-gateway", NS)
    accepted = {c["type"]: c["status"] for c in ((gw or {}).get("status") or {}).get(
        "conditions") or []}
    report.expect("the Gateway is created and accepted and programmed by the Gateway "
                  "implementation", accepted == {"Accepted": "True", "Programmed": "True"},
                  f"conditions {accepted}")
    # the route is written with the promotion; its backend's endpoints follow 2 s later
    await sim.sleep(PROPAGATION + 3)
    traffic = Traffic(sim, GATEWAY, "/fruit", name="traffic/gateway")
    watch = UpgradeWatch(sim)
    await sim.sleep(3)

    t0 = sim.now
    await update_rayservice(sim, RS, upgrade_to("2.47.0"))
    new = str((await narrator.wait("promoted", previous=old, timeout=600)).fields["active"])
    t_promoted = sim.now
    await sim.sleep(3)
    route = await sim.get("HTTPRoute", f"{RS}-httproute", NS)
    t_deleted = (await narrator.wait("cluster_deleted", cluster=old, timeout=200)).t
    traffic.stop()
    t1 = sim.now

    steps = [(t, f) for t, f in watch.seen if f[3] == new and None not in f[1:3] + f[4:6]]
    first_capacity = next((t for t, f in steps if f[4]), float("nan"))
    first_traffic = next((t for t, f in steps if f[5]), float("nan"))
    report.expect("the new cluster gets traffic only after its target_capacity was raised",
                  first_capacity <= first_traffic,
                  f"capacity raised t={first_capacity:.1f}s, first traffic t={first_traffic:.1f}s")
    moves = [(t, f[5]) for (_, e), (t, f) in itertools.pairwise(steps) if f[5] != e[5]]
    sizes = [b[1] - a[1] for a, b in zip([(t0, 0), *moves], moves, strict=False)]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(moves)]
    report.expect("traffic moves in 25% steps, each at least 10 s after the last",
                  sizes == [STEP] * 4 and all(g >= INTERVAL - 0.5 for g in gaps),
                  f"steps {sizes} at t={[round(t, 1) for t, _ in moves]}")
    report.expect("traffic never runs ahead of the new cluster's capacity, and the capacities "
                  "add up to 100-150%",
                  all(f[5] <= f[4] and 100 <= f[1] + f[4] <= 100 + SURGE for _, f in steps),
                  f"{len(steps)} states seen")
    last = steps[-1][1] if steps else ()
    report.expect("promotion once the new cluster has 100% of the traffic (the old cluster's "
                  "capacity goes to 0 in the same pass)",
                  bool(last) and last[5] == 100, f"last state before promotion {last}")
    backends = [(b["name"], b["weight"]) for b in
                ((route or {}).get("spec") or {}).get("rules", [{}])[0].get("backendRefs", [])]
    report.expect("after the promotion the route lists only the new cluster",
                  backends == [(f"{new}-serve-svc", 100)], f"backends {backends}")
    report.expect("the old cluster is deleted after the 60 s deletion delay",
                  DEFAULT_DELETION_DELAY <= t_deleted - t_promoted <= DEFAULT_DELETION_DELAY + 5,
                  f"{t_deleted - t_promoted:.1f}s after the promotion")
    failed, sent = traffic.failures(t0, t1), traffic.sent(t0, t1)
    forwarded = sim.cluster.gateway.forwarded if sim.cluster.gateway else {}
    by_new = forwarded.get((f"{NS}/{RS}-gateway", f"{new}-serve-svc"), 0)
    by_old = forwarded.get((f"{NS}/{RS}-gateway", f"{old}-serve-svc"), 0)
    report.expect("both clusters serve a share of the requests during the upgrade",
                  sent > 0 and by_new > 0 and by_old > 0,
                  f"old cluster served {by_old}, new {by_new}")
    # Go moves the first weight in the pass that sees the new cluster's apps RUNNING, the same
    # pass that labels its head ray.io/serve=true: the per-cluster serve Service's EndpointSlice
    # lists the head one propagation delay later, and the Gateway answers 503 (no healthy
    # upstream) for the requests it sends there meanwhile
    # (the route is updated in the pass whose status write the watch sees within 0.5 s)
    first_move = max((t for t in (e.t for e in sim.trace.select("write", "kube-apiserver")
                                  if e.fields.get("kind") == "HTTPRoute"
                                  and e.fields.get("verb") == "update")
                      if t <= first_traffic), default=float("nan"))
    times = traffic.failure_times(t0, t1)
    report.expect("requests fail only in the propagation delay after the first weight move "
                  "(the route reaches the new cluster before its serve endpoints do)",
                  all(first_move <= t <= first_move + PROPAGATION + 0.5 for t in times),
                  f"{failed} of {sent} failed, at t={[round(t, 2) for t in times]}; first "
                  f"weight move t={first_move:.3f}s")
    report.fact("upgrade_duration_s", round(t_promoted - t0, 3))
    report.fact("traffic_steps_at_s", [round(t - t0, 1) for t, _ in moves])
    report.fact("failed_requests", f"{failed} of {sent}")
    report.fact("failures_after_first_move_s", [round(t - first_move, 2) for t in times])
    report.fact("served_by_old_new", f"{by_old} / {by_new}")
