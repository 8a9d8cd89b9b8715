"""The controller's reconcile_handler semantics (SPEC §1.7), through a real manager and cache."""

from __future__ import annotations

import itertools

import pytest
from runtime_helpers import configmap, events

from emu.apiserver.errors import Conflict
from emu.runtime.controller import ControllerOptions
from emu.runtime.manager import Manager
from emu.runtime.operator_process import OperatorConfig, start_operator
from emu.runtime.predicate import GenerationChangedPredicate, LabelChangedPredicate, or_
from emu.runtime.ratelimiter import MaxOfRateLimiter
from emu.runtime.reconcile import Request, Result, TerminalError


class Scripted:
    """A reconciler whose outcomes are scripted per call; records (time, key)."""

    def __init__(self, mgr: Manager, outcomes: list, calls: list) -> None:
        self.mgr = mgr
        self.outcomes = outcomes
        self.calls = calls

    async def reconcile(self, request: Request) -> Result:
        self.calls.append((round(self.mgr.process.table.loop.time(), 9), request.key))
        outcome = self.outcomes.pop(0) if self.outcomes else Result()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _start(sim, kind, reconciler_for, *, options=None, owns=(), watches=(), predicates=(),
           **config):
    mgrs: dict[str, Manager] = {}

    def setup(mgr, cfg):
        b = mgr.new_controller().for_(kind, predicates=tuple(predicates))
        for k in owns:
            b = b.owns(k)
        for k, fn in watches:
            b = b.watches(k, fn)
        b.with_options(options or ControllerOptions()).complete(reconciler_for(mgr))

    start_operator(sim, "op-0", OperatorConfig(setup=setup, leader_election=False, **config),
                   on_manager=lambda m: mgrs.__setitem__("op-0", m))
    return mgrs


async def test_errors_back_off_5_10_20_40_ms_then_success_forgets(sim):
    calls: list = []
    err = Conflict("configmaps", "a")
    _start(sim, "ConfigMap", lambda m: Scripted(m, [err, err, err, err, Result()], calls))
    await sim.client().create(configmap("a"))
    await sim.sleep(1)
    times = [t for t, _ in calls]
    gaps = [round(b - a, 9) for a, b in itertools.pairwise(times)]
    assert gaps == [0.005, 0.010, 0.020, 0.040]
    finished = events(sim, "reconcile_finished")
    assert [e.fields["outcome"] for e in finished] == ["error"] * 4 + ["success"]


@pytest.mark.emu(fail_on_panic=False)  # the panic is the subject here, not a failure
async def test_a_panic_is_recovered_as_an_error_and_backs_off(sim):
    calls: list = []
    _start(sim, "ConfigMap", lambda m: Scripted(m, [KeyError("boom"), Result()], calls))
    await sim.client().create(configmap("a"))
    await sim.sleep(1)
    assert [round(t, 9) for t, _ in calls] == [calls[0][0], round(calls[0][0] + 0.005, 9)]
    panic = events(sim, "reconcile_panic")
    assert len(panic) == 1
    assert panic[0].fields["error"] == "KeyError: 'boom'"
    assert events(sim, "reconcile_finished")[0].fields["error"] == (
        "RuntimeError: panic: KeyError: 'boom' [recovered]")
    assert sim.processes.get("op-0").alive


async def test_requeue_after_forgets_the_backoff_and_readds_after_the_delay(sim):
    calls: list = []
    err = Conflict("configmaps", "a")
    _start(sim, "ConfigMap",
           lambda m: Scripted(m, [err, err, Result(requeue_after=30), err, Result()], calls))
    await sim.client().create(configmap("a"))
    await sim.sleep(60)
    times = [t for t, _ in calls]
    gaps = [round(b - a, 9) for a, b in itertools.pairwise(times)]
    # two failures (5 ms, 10 ms), a 30 s requeue, then the backoff starts again at 5 ms
    assert gaps == [0.005, 0.010, 30.0, 0.005]


async def test_an_error_ignores_requeue_after_and_a_terminal_error_is_not_requeued(sim):
    calls: list = []
    _start(sim, "ConfigMap",
           lambda m: Scripted(m, [TerminalError("bad spec")], calls))
    await sim.client().create(configmap("a"))
    await sim.sleep(2000)
    assert len(calls) == 1
    assert events(sim, "reconcile_finished")[0].fields == {
        "controller": "configmap", "key": "default/a", "outcome": "terminal_error",
        "error": "terminal error: bad spec"}


async def test_requeue_true_is_rate_limited_without_forgetting(sim):
    calls: list = []
    _start(sim, "ConfigMap",
           lambda m: Scripted(m, [Result(requeue=True), Result(requeue=True), Result()], calls))
    await sim.client().create(configmap("a"))
    await sim.sleep(1)
    times = [t for t, _ in calls]
    assert [round(b - a, 9) for a, b in itertools.pairwise(times)] == [0.005, 0.010]


class Slow:
    """Takes 1 s per reconcile; tracks how many keys, and which, are in flight."""

    def __init__(self, mgr: Manager, stats: dict) -> None:
        self.mgr = mgr
        self.stats = stats

    async def reconcile(self, request: Request) -> Result:
        s = self.stats
        assert request.key not in s["active"], f"{request.key} reconciled twice at once"
        s["active"].add(request.key)
        s["max"] = max(s["max"], len(s["active"]))
        s["count"][request.key] = s["count"].get(request.key, 0) + 1
        await self.mgr.process.sleep(1)
        s["active"].discard(request.key)
        return Result()


async def test_at_most_max_concurrent_reconciles_and_one_key_never_in_two_workers(sim):
    stats = {"active": set(), "max": 0, "count": {}}
    _start(sim, "ConfigMap", lambda m: Slow(m, stats),
           options=ControllerOptions(max_concurrent_reconciles=3))
    c = sim.client()
    for i in range(10):
        await c.create(configmap(f"cm{i}"))
    await sim.sleep(0.5)
    for _ in range(5):  # events for a key that is being reconciled
        await c.patch("ConfigMap", "cm0", {"data": {"n": str(sim.now)}}, "default")
        await sim.sleep(0.1)
    await sim.sleep(30)
    assert stats["max"] == 3
    assert stats["active"] == set()
    # five updates while cm0 was in flight collapse into one more reconcile
    assert stats["count"]["default/cm0"] == 2
    assert all(stats["count"][f"default/cm{i}"] == 1 for i in range(1, 10))


async def test_generation_changed_predicate_drops_status_only_updates(sim):
    calls: list = []
    _start(sim, "Deployment", lambda m: Scripted(m, [], calls),
           predicates=[GenerationChangedPredicate()])
    c = sim.client()
    dep = await c.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    await sim.sleep(1)
    dep["status"] = {"replicas": 1}
    dep = await c.update_status(dep)
    await sim.sleep(1)
    assert len(calls) == 1, "a status-only write must not trigger a reconcile"
    dep["spec"]["replicas"] = 2
    await c.update(dep)
    await sim.sleep(1)
    assert len(calls) == 2


async def test_or_of_predicates_passes_a_label_change(sim):
    calls: list = []
    _start(sim, "ConfigMap", lambda m: Scripted(m, [], calls),
           predicates=[or_(GenerationChangedPredicate(), LabelChangedPredicate())])
    c = sim.client()
    await c.create(configmap("a"))
    await sim.sleep(1)
    await c.patch("ConfigMap", "a", {"data": {"k": "2"}}, "default")
    await sim.sleep(1)
    assert len(calls) == 1
    await c.patch("ConfigMap", "a", {"metadata": {"labels": {"x": "y"}}}, "default")
    await sim.sleep(1)
    assert len(calls) == 2


async def test_owns_reconciles_the_controller_owner_and_watches_uses_the_map_function(sim):
    calls: list = []
    _start(sim, "ConfigMap", lambda m: Scripted(m, [], calls), owns=["Secret"],
           watches=[("Service", lambda obj: [Request("default", "mapped")])])
    c = sim.client()
    owner = await c.create(configmap("owner"))
    await sim.sleep(1)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    await c.create({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "child", "namespace": "default",
                                 "ownerReferences": [dict(ref, controller=True)]}})
    await c.create({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "not-controlled", "namespace": "default",
                                 "ownerReferences": [dict(ref, name="other")]}})
    await sim.sleep(1)
    await c.create({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "svc", "namespace": "default"},
                    "spec": {"ports": [{"port": 80}]}})
    await sim.sleep(1)
    assert [k for _, k in calls] == ["default/owner", "default/owner", "default/mapped"]


async def test_cache_selectors_and_watch_namespaces_hide_objects_from_cached_reads(sim):
    seen: dict = {}

    class Reader:
        def __init__(self, mgr):
            self.client = mgr.get_client()

        async def reconcile(self, request):
            listed = await self.client.list("ConfigMap")
            seen["list"] = sorted(o["metadata"]["namespace"] + "/" + o["metadata"]["name"]
                                  for o in listed)
            try:
                await self.client.get("ConfigMap", "unlabelled", "default")
            except Exception as err:
                seen["get"] = str(err)
            return Result()

    c = sim.client()
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    await c.create(configmap("unlabelled"))
    await c.create(configmap("b", "other", app="ray"))
    await c.create(configmap("a", "default", app="ray"))
    _start(sim, "ConfigMap", Reader, watch_namespaces="default",
           cache_selectors={"ConfigMap": "app=ray"})
    await sim.sleep(1)
    assert seen["list"] == ["default/a"]
    assert seen["get"] == 'configmaps "unlabelled" not found'


def test_the_default_rate_limiter_is_item_exponential_and_bucket_when_asked():
    default = ControllerOptions().new_rate_limiter()
    assert [default.when("k") for _ in range(3)] == [0.005, 0.010, 0.020]
    legacy = ControllerOptions(use_priority_queue=False).new_rate_limiter()
    assert isinstance(legacy, MaxOfRateLimiter)
