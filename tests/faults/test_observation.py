"""Observation faults on a small controller: what one process's informers see is perturbed,
while the API server and every other process stay current."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import emu
from emu.client.informer import FuncHandler, Informer
from emu.faults import CoalesceEvents, FaultPlan, InformerLag, ShuffleLists, StaleList
from emu.kernel.process import Process

Obj = dict[str, Any]


def cm(name: str, value: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": value}}


class Watcher:
    """A process with one ConfigMap informer and one Secret informer, recording what its
    handlers see as (time, kind, name, value)."""

    def __init__(self, sim: emu.Simulation, name: str) -> None:
        self.seen: list[tuple[float, str, str, str]] = []
        self.informers: dict[str, Informer] = {}
        self.sim = sim
        self.process = sim.start_process(name, self._main)

    async def _main(self, proc: Process) -> None:
        client = self.sim.client(process=proc)
        for kind in ("ConfigMap", "Secret"):
            inf = Informer(client, kind, namespace="default")
            inf.add_event_handler(FuncHandler(
                on_add=lambda o, k=kind: self._see(k, o),
                on_update=lambda _old, o, k=kind: self._see(k, o),
                on_delete=lambda o, k=kind: self._see(k, o, deleted=True)))
            self.informers[kind] = inf
            proc.spawn(inf.run(), name=f"informer:{kind}")
        await asyncio.Event().wait()

    def _see(self, kind: str, obj: Obj, deleted: bool = False) -> None:
        value = "<deleted>" if deleted else str((obj.get("data") or {}).get("v"))
        self.seen.append((round(self.sim.now, 3), kind, obj["metadata"]["name"], value))

    def values(self, kind: str, name: str) -> list[str]:
        return [v for _t, k, n, v in self.seen if k == kind and n == name]


async def test_informer_lag_delays_one_kind_of_one_process(sim: emu.Simulation) -> None:
    lagging, current = Watcher(sim, "ctl-a"), Watcher(sim, "ctl-b")
    await sim.sleep(1)
    sim.faults.do(InformerLag(process="ctl-a", kind="ConfigMap", seconds=30, duration=60))
    await sim.apply(cm("one", "1"))
    await sim.apply({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "s", "namespace": "default"}, "data": {}})
    await sim.sleep(1)
    assert lagging.values("ConfigMap", "one") == []          # 30 s behind
    assert current.values("ConfigMap", "one") == ["1"]       # another process is current
    assert lagging.informers["Secret"].get("s", "default") is not None  # another kind too
    await sim.sleep(30)
    assert lagging.values("ConfigMap", "one") == ["1"]
    assert sim.faults.unperformed() == []
    assert sim.faults.performed() == [InformerLag(at=1.0, process="ctl-a", kind="ConfigMap",
                                                  seconds=30, duration=60)]


async def test_informer_lag_keeps_event_order_when_it_ends(sim: emu.Simulation) -> None:
    w = Watcher(sim, "ctl")
    await sim.sleep(1)
    sim.faults.informer_lag("ctl", "ConfigMap", seconds=10, duration=5)
    await sim.apply(cm("one", "1"))
    await sim.sleep(6)  # the lag ended; "1" is still in flight
    await sim.apply(cm("one", "2"))
    await sim.sleep(0.1)
    assert w.values("ConfigMap", "one") == []  # "2" does not overtake "1"
    await sim.sleep(10)
    assert w.values("ConfigMap", "one") == ["1", "2"]


async def test_coalesce_events_skips_intermediate_states(sim: emu.Simulation) -> None:
    w, other = Watcher(sim, "ctl"), Watcher(sim, "other")
    await sim.apply(cm("gone", "0"))
    await sim.sleep(1)
    sim.faults.coalesce_events("ctl", "ConfigMap", duration=10)
    for value in ("1", "2", "3"):
        await sim.apply(cm("one", value))
        await sim.sleep(1)
    await sim.client().delete("ConfigMap", "gone", "default")
    await sim.apply(cm("brief", "x"))
    await sim.client().delete("ConfigMap", "brief", "default")
    await sim.sleep(1)
    assert w.values("ConfigMap", "one") == []
    assert other.values("ConfigMap", "one") == ["1", "2", "3"]
    await sim.sleep(10)
    assert w.values("ConfigMap", "one") == ["3"]          # only the latest state
    assert w.values("ConfigMap", "gone") == ["0", "<deleted>"]
    assert w.values("ConfigMap", "brief") == []           # created and deleted unseen
    await sim.apply(cm("one", "4"))
    await sim.sleep(1)
    assert w.values("ConfigMap", "one") == ["3", "4"]     # the window is over


async def test_stale_list_starts_the_cache_at_an_older_revision(sim: emu.Simulation) -> None:
    await sim.apply(cm("one", "1"))
    await sim.apply(cm("one", "2"))
    await sim.apply(cm("two", "x"))
    sim.faults.do(StaleList(process="late", kind="ConfigMap", revisions_back=2, hold=5))
    w = Watcher(sim, "late")
    fresh = Watcher(sim, "fresh")
    await sim.sleep(1)
    assert w.values("ConfigMap", "one") == ["1"]        # listed two revisions back
    assert w.values("ConfigMap", "two") == []
    assert fresh.values("ConfigMap", "one") == ["2"]
    await sim.sleep(5)                                   # then it watches from there
    assert w.values("ConfigMap", "one") == ["1", "2"]
    assert w.values("ConfigMap", "two") == ["x"]
    assert w.values("Secret", "s") == []
    [event] = sim.trace.select(event="stale_list")
    assert event.fields["kind"] == "ConfigMap"


async def test_stale_list_undoes_deletions(sim: emu.Simulation) -> None:
    await sim.apply(cm("one", "1"))
    await sim.client().delete("ConfigMap", "one", "default")
    sim.faults.stale_list("late", revisions_back=1)
    w = Watcher(sim, "late")
    await sim.sleep(1)
    assert w.values("ConfigMap", "one") == ["1", "<deleted>"]


@pytest.mark.emu(history_window=3)
async def test_stale_list_is_clamped_to_the_history_window(sim: emu.Simulation) -> None:
    for value in "123456":
        await sim.apply(cm("one", value))
    sim.faults.do(StaleList(process="late", kind="ConfigMap", revisions_back=100))
    w = Watcher(sim, "late")
    await sim.sleep(1)
    assert w.values("ConfigMap", "one") == ["3", "4", "5", "6"]  # from the oldest kept
    assert w.informers["ConfigMap"].relists == 1                  # no 410 Gone


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffle_lists_is_seeded(seed: int) -> None:
    async def main(sim: emu.Simulation) -> list[list[str]]:
        for i in range(8):
            await sim.apply(cm(f"cm-{i}", str(i)))
        sim.faults.shuffle_lists("ctl", "ConfigMap")
        w = Watcher(sim, "ctl")
        plain = Watcher(sim, "plain")
        await sim.sleep(1)
        inf = w.informers["ConfigMap"]
        first_adds = [n for _t, k, n, _v in w.seen if k == "ConfigMap"]
        assert [n for _t, k, n, _v in plain.seen if k == "ConfigMap"] == sorted(first_adds)
        assert [o["metadata"]["name"] for o in plain.informers["ConfigMap"].list()] \
            == sorted(first_adds)
        return [first_adds] + [[o["metadata"]["name"] for o in inf.list()] for _ in range(3)]

    orders = emu.run(main, seed=seed)
    assert orders == emu.run(main, seed=seed)              # the same seed, the same orders
    assert any(order != sorted(order) for order in orders)
    assert all(sorted(order) == [f"cm-{i}" for i in range(8)] for order in orders)


def test_observation_faults_print_and_round_trip() -> None:
    plan = FaultPlan([InformerLag(at=3.0, process="op", kind="Pod", seconds=30.0, duration=60.0),
                      StaleList(at=4.0, process="op", revisions_back=20),
                      CoalesceEvents(at=5.0, process="op", kind="Pod", duration=10.0),
                      ShuffleLists(at=0.0, optional=True)])
    assert FaultPlan.from_json(plan.to_json()) == plan
    assert FaultPlan(eval(repr(plan), vars(emu.faults))) == plan


def test_observation_fault_values_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        StaleList(process="op")
    with pytest.raises(ValueError, match="non-negative int"):
        StaleList(process="op", revisions_back=-1)
    with pytest.raises(ValueError, match="seconds"):
        InformerLag(process="op", seconds=float("inf"))
    with pytest.raises(ValueError, match="duration"):
        CoalesceEvents(process="op", duration=float("nan"))


def test_an_observation_fault_that_changed_nothing_fails_the_run() -> None:
    async def main(sim: emu.Simulation) -> None:
        Watcher(sim, "ctl")
        await sim.sleep(1)
        sim.faults.informer_lag("ctl", "Secret", seconds=5, duration=10)  # no Secret changes
        sim.faults.do(ShuffleLists(process="nobody", optional=True))
        await sim.apply(cm("one", "1"))
        await sim.sleep(20)

    with pytest.raises(emu.UnperformedFaults) as err:
        emu.run(main)
    [(fault, why)] = err.value.items
    assert isinstance(fault, InformerLag)
    assert why == ("no Secret informer of process 'ctl' received a watch event while it was "
                   "active")


class ValueRecorder:
    """A small controller on emu.runtime: each reconcile reads its ConfigMap from the cache and
    records the value it saw."""

    def __init__(self, mgr: Any, seen: list[str]) -> None:
        self.client = mgr.get_client()
        self.seen = seen

    async def reconcile(self, request: Any) -> Any:
        from emu.runtime.reconcile import Result

        obj = await self.client.get("ConfigMap", request.name, request.namespace)
        self.seen.append(obj["data"]["v"])
        return Result()


@pytest.mark.parametrize("coalesce", [False, True])
def test_a_controller_under_coalesced_events_reconciles_only_the_final_state(
        coalesce: bool) -> None:
    from emu.runtime.operator_process import OperatorConfig, setup_reconciler, start_operator

    async def main(sim: emu.Simulation) -> list[str]:
        seen: list[str] = []
        config = OperatorConfig(setup=setup_reconciler("ConfigMap",
                                                       lambda m: ValueRecorder(m, seen)),
                                leader_election=False)
        start_operator(sim, "ctl", config)
        await sim.apply(cm("one", "0"))
        await sim.sleep(1)
        if coalesce:
            sim.faults.coalesce_events("ctl", "ConfigMap", duration=10)
        for value in "123":
            await sim.apply(cm("one", value))
            await sim.sleep(1)
        await sim.sleep(10)
        return seen

    assert emu.run(main) == (["0", "3"] if coalesce else ["0", "1", "2", "3"])
