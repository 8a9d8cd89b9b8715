"""Manager start order, cold caches, health probes, zombie leaders (SPEC §1.5)."""

from __future__ import annotations

from runtime_helpers import configmap, events, start_replicas

from emu.invariants import LeadershipTenures, TwoLeaderChecker, TwoLeaderWindows
from emu.runtime.manager import Manager
from emu.runtime.operator_process import OperatorConfig, start_operator
from emu.runtime.reconcile import Request, Result

LOCK = "ray-operator-leader"


async def test_groups_start_in_order_caches_others_then_leader_election_after_winning(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(1)
    order = [(e.event, e.fields.get("group")) for e in sim.trace
             if e.process == "op-0" and e.event in ("runnables_started", "leader_acquired")]
    assert order == [("runnables_started", "caches"), ("runnables_started", "others"),
                     ("leader_acquired", None), ("runnables_started", "leader_election")]


async def test_a_standby_has_no_informers_and_a_new_leader_reconciles_only_after_listing(sim):
    log, mgrs = [], {}
    await sim.client().create(configmap("a"))
    start_replicas(sim, ["op-0", "op-1"], log, mgrs)
    await sim.sleep(5)
    assert mgrs["op-1"].get_cache().kinds() == []
    assert mgrs["op-0"].get_cache().kinds() == ["ConfigMap"]
    sim.faults.latency(0.5, caller="op-1")  # a list now takes a 1 s round trip
    sim.faults.crash("op-0")
    await sim.wait_for("Lease", LOCK, lambda lease: lease["spec"]["holderIdentity"].startswith(
        "op-1"), timeout=60)
    await sim.sleep(5)
    acquired = events(sim, "leader_acquired", "op-1")[0].t
    created = events(sim, "informer_created", "op-1")[0].t
    synced = events(sim, "caches_synced", "op-1")[0].t
    first = next(t for t, p, _ in log if p == "op-1")
    assert acquired <= created < synced <= first
    assert synced - created >= 1.0


async def test_healthz_and_readyz_answer_a_ping_on_leader_and_standby_alike(sim):
    log, mgrs = [], {}
    start_replicas(sim, ["op-0", "op-1"], log, mgrs)
    await sim.sleep(3)
    answers = []
    for host in ("op-0", "op-1"):
        for path in ("/healthz", "/readyz"):
            answers.append(await sim.network.call(None, f"{host}:8081", {"path": path},
                                                  caller="kubelet"))
    assert answers == [{"code": 200, "body": "ok"}] * 4
    assert mgrs["op-0"].is_leader and not mgrs["op-1"].is_leader


async def test_with_election_disabled_every_replica_reconciles_at_once(sim):
    log, mgrs = [], {}
    await sim.client().create(configmap("a"))
    start_replicas(sim, ["op-0", "op-1"], log, mgrs, leader_election=False)
    await sim.sleep(1)
    assert sorted((t, p) for t, p, _ in log) == [(0.0, "op-0"), (0.0, "op-1")]
    assert events(sim, "leader_acquired") == []
    assert await sim.get("Lease", LOCK, "default") is None


async def test_a_missing_lock_namespace_fails_the_replica_with_exit_1(sim):
    proc = start_operator(sim, "op-0", OperatorConfig(leader_election_namespace=""))
    assert await proc.wait_exited() == 1
    assert events(sim, "operator_exit", "op-0")[0].fields["error"] == (
        "ValueError: unable to find leader election namespace: not running in-cluster, "
        "please specify LeaderElectionNamespace")


class SlowWriter:
    """Reads the ConfigMap from the cache, waits 3 s, then writes it back (update, with the
    resourceVersion it read) or patches it (no precondition)."""

    def __init__(self, mgr: Manager, mode: str, outcomes: list) -> None:
        self.mgr = mgr
        self.mode = mode
        self.outcomes = outcomes

    async def reconcile(self, request: Request) -> Result:
        client = self.mgr.get_client()
        cm = await client.get("ConfigMap", request.name, request.namespace)
        me = self.mgr.process.name
        if me == "op-0":
            await self.mgr.process.sleep(3)
        try:
            if self.mode == "update":
                cm["data"]["writer"] = me
                await client.update(cm)
            else:
                await client.patch("ConfigMap", request.name, {"data": {me: "wrote"}},
                                   request.namespace)
            self.outcomes.append((self.mgr.process.table.loop.time(), me, "ok"))
        except Exception as err:
            self.outcomes.append((self.mgr.process.table.loop.time(), me, type(err).__name__))
            raise
        return Result()


def _start_zombie_pair(sim, mode, outcomes):
    def setup(mgr, cfg):
        mgr.new_controller().for_("ConfigMap").complete(SlowWriter(mgr, mode, outcomes))

    cfg = OperatorConfig(setup=setup)
    start_operator(sim, "op-0", cfg)
    start_operator(sim, "op-1", cfg)


async def test_a_paused_leader_resumed_after_takeover_finishes_its_write_and_two_leaders_show(sim):
    two = TwoLeaderChecker(sim.trace)
    tenures = LeadershipTenures(sim.trace)
    outcomes: list = []
    await sim.client().create(configmap("a"))
    _start_zombie_pair(sim, "patch", outcomes)
    await sim.sleep(1)
    sim.faults.pause("op-0")  # in the middle of its 3 s reconcile
    await sim.wait_for("Lease", LOCK, lambda lease: lease["spec"]["holderIdentity"].startswith(
        "op-1"), timeout=60)
    await sim.sleep(5)
    sim.faults.resume("op-0")
    op0 = sim.processes.get("op-0")
    assert await op0.wait_exited() == 1
    resumed_at = events(sim, "process_resumed", "op-0")[0].t
    assert (resumed_at, "op-0", "ok") in outcomes, "the zombie's in-flight write must land"
    cm = await sim.get("ConfigMap", "a")
    assert cm["data"]["op-0"] == "wrote"
    assert len(two.windows) == 1
    window = two.windows[0]
    assert window.start == events(sim, "leader_acquired", "op-1")[0].t
    assert window.end == events(sim, "leader_lost", "op-0")[0].t
    assert window.processes == ["op-0", "op-1"]
    assert window.both_worked and two.violations == [window]
    assert [(t.process, t.ended_by) for t in tenures.all()] == [("op-0", "lost"),
                                                               ("op-1", "leading")]


async def test_a_zombie_leaders_late_update_is_stopped_by_a_resource_version_conflict(sim):
    outcomes: list = []
    await sim.client().create(configmap("a"))
    _start_zombie_pair(sim, "update", outcomes)
    await sim.sleep(1)
    sim.faults.pause("op-0")
    await sim.wait_for("ConfigMap", "a", lambda cm: cm["data"].get("writer") == "op-1",
                       timeout=60)
    sim.faults.resume("op-0")
    await sim.sleep(0.1)
    assert [o[2] for o in outcomes if o[1] == "op-0"] == ["Conflict"]
    assert {o[2] for o in outcomes if o[1] == "op-1"} == {"ok"}
    cm = await sim.get("ConfigMap", "a")
    assert cm["data"]["writer"] == "op-1"


def _start_two_operators(sim):
    """KubeRay's Lease and a user's own operator's Lease, one leader each, both reconciling."""
    def setup(mgr, cfg):
        mgr.new_controller().for_("ConfigMap").complete(SlowWriter(mgr, "patch", []))

    start_operator(sim, "op-0", OperatorConfig(setup=setup))
    start_operator(sim, "mine-0", OperatorConfig(setup=setup, leader_election_id="my-operator",
                                                 leader_election_namespace="team"))


async def test_two_leader_checker_scoped_to_one_lease_ignores_another_operators_leader(sim):
    everything = TwoLeaderChecker(sim.trace)
    by_name = TwoLeaderChecker(sim.trace, lease=LOCK)
    by_full_name = TwoLeaderChecker(sim.trace, lease=f"default/{LOCK}")
    other_namespace = TwoLeaderChecker(sim.trace, lease=f"team/{LOCK}")
    mine = TwoLeaderChecker(sim.trace, lease="team/my-operator")
    windows = TwoLeaderWindows().attach(sim)
    scoped_windows = TwoLeaderWindows(lease=LOCK).attach(sim)
    await sim.client().create(configmap("a"))
    await sim.client().create({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "team"}})
    _start_two_operators(sim)
    await sim.sleep(10)
    assert [w.processes for w in everything.windows] == [["op-0", "mine-0"]]
    assert everything.violations  # unscoped, the two operators' leaders look like a window
    assert by_name.windows == by_full_name.windows == other_namespace.windows == []
    assert mine.windows == []
    assert [v.objects for v in windows.info()] == [("Process/op-0", "Process/mine-0")]
    assert scoped_windows.info() == []


def test_two_leader_checker_refuses_a_lease_that_is_not_a_name():
    import pytest

    for bad in ("", "/", "a/b/c", "/name", 3):
        with pytest.raises(ValueError, match="lease= is a Lease's name"):
            TwoLeaderChecker(None, lease=bad)  # type: ignore[arg-type]
