"""The search: a re-introduced KubeRay bug is found; findings are the same with -j 1, -j 2 and
Ray; the store resumes."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import reintroduced
from explore_worlds import Untouched, budget_to_reach, one_replica_raycluster, reachable, unreachable

from emu.explore.runner import RunSpec
from emu.explore.search import Executor, ProcessExecutor, RayExecutor, _contains, _family, explore
from emu.explore.shrink import shape
from emu.explore.store import Store
from emu.faults import InformerLag
from emu.invariants import OneLiveHead


def _summary(result):
    return [(f.invariant, repr(f.plan), sorted(f.knobs.items())) for f in result.findings]


def test_explore_finds_the_duplicate_head_of_kuberay_715_only_when_expectations_are_removed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # KubeRay #715: reconcilePods trusted the informer cache alone, so a lagging Pod watch made
    # it create a second head Pod; #2150 added the scale expectations the port keeps. Put the
    # old behaviour back (expectations always satisfied) and the explorer must see two heads.
    wl = one_replica_raycluster()
    # the first candidate that lags the (only) leader's Pod watch, found by what it is
    budget = budget_to_reach(wl, 1, lambda spec, _: any(
        isinstance(f, InformerLag) and f.kind == "Pod" for f in spec.plan.faults))
    port = explore(wl, budget=budget, seed=1, shrink_budget=0, export=False,
                   invariants=[OneLiveHead()])
    assert "one-live-head" not in {f.invariant for f in port.findings}

    reintroduced.put_back_715(monkeypatch)
    buggy = explore(wl, budget=budget, seed=1, shrink_budget=0, export=False,
                    invariants=[OneLiveHead()])
    [finding] = [f for f in buggy.findings if f.invariant == "one-live-head"]
    assert "RayCluster default/raycluster had 2 live head Pods" in finding.message
    assert "InformerLag(" in repr(finding.plan) and "kind='Pod'" in repr(finding.plan)


def test_the_same_seed_and_budget_give_the_same_findings_with_j1_j2_and_ray() -> None:
    wl = unreachable()
    runs = {}
    for name, executor in (("j1", Executor()), ("j2", ProcessExecutor(2)),
                           ("ray", RayExecutor(num_cpus=2))):
        try:
            result = explore(wl, budget=4, seed=4, executor=executor, shrink_budget=2,
                             export=False, batch=2, per_invariant=2)
        finally:
            executor.close()
        runs[name] = result
    assert runs["j1"].runs == 4 and runs["j1"].findings
    assert _summary(runs["j2"]) == _summary(runs["j1"])
    assert _summary(runs["ray"]) == _summary(runs["j1"])
    import ray

    assert not ray.is_initialized()


def test_a_second_search_with_the_same_out_resumes_from_the_store(tmp_path) -> None:
    wl = unreachable()
    first = explore(wl, budget=3, seed=2, out=tmp_path, shrink_budget=0, export=False)
    again = explore(wl, budget=5, seed=2, out=tmp_path, shrink_budget=0, export=False)
    assert (first.runs, first.reused) == (3, 0)
    assert (again.runs, again.reused) == (5, 3)
    assert _summary(again)[:1] == _summary(first)[:1]


def test_a_failing_shape_that_contains_a_finding_is_listed_as_explained_not_shrunk() -> None:
    result = explore(reachable(), budget=30, seed=3, shrink_budget=20, export=False,
                     invariants=[Untouched()])
    found = [shape(RunSpec({}, f.plan)) for f in result.findings]
    assert len(found) == len(set(found)) >= 2
    explained = [u for u in result.unshrunk if u.explained]
    assert explained, "multi-fault runs should be explained by a single-fault finding"
    for u in explained:
        assert 1 <= u.explained <= len(found)
        assert _contains(shape(RunSpec({}, u.plan)), found[u.explained - 1])
        assert len(u.plan) > len(result.findings[u.explained - 1].plan)


def test_past_per_invariant_shrinks_the_rest_are_listed_not_dropped(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # A shrinker that always lands on the first run it was given. With per_invariant=2 two runs
    # are shrunk (one finding: the second lands on the same shape) and every other failing
    # shape is listed, explained by the finding or with explained=0, never silently dropped.
    import emu.explore.search as search

    shrunk: list[Any] = []

    def same_every_time(workload, run, invariant, run_specs, budget):
        shrunk.append(run)
        other = {"invariant": "one-live-head", "message": "two heads", "at": 1.0}
        return attrs.evolve(shrunk[0], violations=(*shrunk[0].violations, other)), 0

    monkeypatch.setattr(search, "shrink", same_every_time)
    result = explore(reachable(), budget=30, seed=3, shrink_budget=20, export=False,
                     per_invariant=2, out=tmp_path, invariants=[Untouched()])
    assert len(result.findings) == 1 and len(shrunk) == 2
    # a new fault family first: the two shrunk runs use different kinds of fault
    assert _family(shrunk[0].spec) != _family(shrunk[1].spec)
    assert result.findings[0].also == ("one-live-head",)
    capped = [u for u in result.unshrunk if not u.explained]
    assert capped and all(u.invariant == "untouched" for u in capped)
    # every failing shape is accounted for: shrunk, or listed
    store = Store(tmp_path, workload="reachable", seed=3)
    failing = {shape(r.spec) for r in store.results.values() if r.violations}
    seen = [shape(r.spec) for r in shrunk] + [shape(RunSpec({}, u.plan))
                                             for u in result.unshrunk]
    assert sorted(seen, key=repr) == sorted(failing, key=repr)


def test_a_fault_family_is_the_kinds_of_fault_without_targets_or_times() -> None:
    from emu.explore.faults import AtCall, CrashLeader, LoseRayPod
    from emu.faults import Pause

    a = RunSpec({}, [AtCall(at=0.0, n=1, then=Pause(at=0.0, process="", duration=30.0),
                            verb="create", kind="Service"),
                     LoseRayPod(at=3.0, owner="x", node_type="head", how="kill")])
    b = RunSpec({}, [LoseRayPod(at=9.0, owner="y", node_type="worker", how="delete"),
                     AtCall(at=0.0, n=4, then=Pause(at=0.0, process="", duration=5.0),
                            verb="update_status", kind="RayJob")])
    assert _family(a) == _family(b) == ("LoseRayPod", "Pause")
    assert _family(RunSpec({}, [CrashLeader(at=0.0)])) == ("CrashLeader",)


class _FlakyRay:
    """Stands in for the ``ray`` module: ``init`` fails as Ray's own 30 s raylet window does
    the first ``misses`` times, or with ``other`` (another error) if given."""

    def __init__(self, misses: int, other: Exception | None = None) -> None:
        self.misses, self.other = misses, other
        self.inits = self.shutdowns = 0

    def init(self, **_kwargs: object) -> None:
        self.inits += 1
        if self.other is not None:
            raise self.other
        if self.inits <= self.misses:
            raise Exception("The current node timed out during startup. This could happen "
                            "because some of the raylet failed to startup or the GCS has "
                            "become overloaded.")

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_a_local_ray_start_that_misses_rays_fixed_startup_window_is_tried_again() -> None:
    from emu.explore.search import LOCAL_RAY_STARTS, _ray_init

    ray = _FlakyRay(misses=LOCAL_RAY_STARTS - 1)
    _ray_init(ray, {}, local=True)
    assert (ray.inits, ray.shutdowns) == (LOCAL_RAY_STARTS, LOCAL_RAY_STARTS - 1)
    ray = _FlakyRay(misses=LOCAL_RAY_STARTS)
    with pytest.raises(Exception, match="timed out during startup"):
        _ray_init(ray, {}, local=True)
    assert ray.inits == LOCAL_RAY_STARTS
    joining = _FlakyRay(misses=1)  # joining a cluster: its failure is the user's to see
    with pytest.raises(Exception, match="timed out during startup"):
        _ray_init(joining, {"address": "ray://x:10001"}, local=False)
    other = _FlakyRay(misses=0, other=ValueError("bad runtime_env"))
    with pytest.raises(ValueError, match="bad runtime_env"):
        _ray_init(other, {}, local=True)
    assert (joining.inits, other.inits) == (1, 1)
