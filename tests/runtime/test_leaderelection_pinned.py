"""Leader-election behaviour pinned against client-go's leaderelection.go, one claim per test.

These run the elector against a scripted in-memory lock on a bare virtual-time loop, so each
request's latency and outcome is chosen by the test and every timing is exact. They exist
because a mutation sample (scripts/mutation.py) showed these behaviours could change with no
test failing: the default 15/10/2 s timings, the expiry boundary, a takeover of an expired Lease
writing it at once, and the renew retry timing after a slow renew.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import Any

import attrs
import pytest
from runtime_helpers import events, start_replicas

from emu.apiserver.errors import Conflict, NotFound
from emu.kernel import clock
from emu.kernel.loop import VirtualTimeLoop
from emu.kernel.network import NetworkError
from emu.kernel.rng import SimRandom
from emu.runtime.leaderelection import (
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    LeaseLock,
    election_client_timeout,
    lease_spec_to_record,
    record_to_lease_spec,
)


def vrun(fn: Any) -> Any:
    """Run ``fn()`` on a fresh virtual-time loop (no API server: the lock is scripted)."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(fn())


class ScriptedLock:
    """A Lease lock whose requests take scripted virtual time and succeed or fail as told."""

    def __init__(self, identity: str, record: LeaderElectionRecord | None = None) -> None:
        self._identity = identity
        self.record = record
        self.update_script: deque[tuple[float, bool]] = deque()  # (latency, succeeds)
        self.get_script: deque[tuple[float, bool]] = deque()
        self.updates: list[tuple[float, LeaderElectionRecord]] = []  # (start time, record)
        self.creates: list[float] = []
        self.gets: list[float] = []

    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return "default/lock"

    async def get(self) -> tuple[LeaderElectionRecord, bytes]:
        self.gets.append(clock.now())
        latency, ok = self.get_script.popleft() if self.get_script else (0.0, True)
        await asyncio.sleep(latency)
        if not ok:
            raise NetworkError("get: scripted failure")
        if self.record is None:
            raise NotFound("leases", "lock", "coordination.k8s.io")
        return self.record, self.record.raw()

    async def create(self, rec: LeaderElectionRecord) -> None:
        self.creates.append(clock.now())
        self.record = rec

    async def update(self, rec: LeaderElectionRecord) -> None:
        self.updates.append((clock.now(), rec))
        latency, ok = self.update_script.popleft() if self.update_script else (0.0, True)
        await asyncio.sleep(latency)
        if not ok:
            raise Conflict("leases", "lock", "coordination.k8s.io", "scripted conflict")
        self.record = rec


def _elector(lock: ScriptedLock, log: list[tuple[str, Any]] | None = None,
             **kw: Any) -> LeaderElector:
    log = log if log is not None else []
    cb = LeaderCallbacks(on_started_leading=lambda: log.append(("started", clock.now())),
                         on_stopped_leading=lambda: log.append(("stopped", clock.now())),
                         on_new_leader=lambda who: log.append(("new_leader", who)))
    return LeaderElector(LeaderElectionConfig(lock=lock, callbacks=cb, **kw),  # type: ignore[arg-type]
                         rng=SimRandom(7))


def test_default_timings_are_controller_runtimes_15_10_2_seconds() -> None:
    cfg = LeaderElectionConfig(lock=ScriptedLock("me"),  # type: ignore[arg-type]
                               callbacks=LeaderCallbacks(lambda: None, lambda: None))
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    assert cfg.release_on_cancel is False
    assert JITTER_FACTOR == 1.2
    # controller-runtime's REST timeout for election requests: max(RenewDeadline/2, 1 s)
    assert election_client_timeout(10.0) == 5.0
    assert election_client_timeout(1.5) == 1.0


@pytest.mark.parametrize(("kw", "message"), [
    ({"lease_duration": 10.0}, "leaseDuration must be greater than renewDeadline"),
    ({"renew_deadline": 2.4}, "renewDeadline must be greater than retryPeriod*JitterFactor"),
    ({"lease_duration": 0.9, "renew_deadline": 0.5, "retry_period": 0.1},
     "leaseDuration must be greater than zero"),
    ({"retry_period": 0.0}, "retryPeriod must be greater than zero"),
])
def test_new_leader_elector_rejects_the_timings_client_go_rejects(kw: dict[str, float],
                                                                   message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _elector(ScriptedLock("me"), None, **kw)


def test_new_leader_elector_accepts_the_boundaries_client_go_accepts() -> None:
    _elector(ScriptedLock("me"), lease_duration=10.5, renew_deadline=10.0)
    _elector(ScriptedLock("me"), lease_duration=1.0, renew_deadline=0.5, retry_period=0.1)


def test_an_empty_identity_is_rejected() -> None:
    with pytest.raises(ValueError, match="^Lock identity is empty$"):
        _elector(ScriptedLock(""))


def test_a_lease_seen_unchanged_for_lease_duration_is_taken_over_by_writing_it_at_once() -> None:
    other = LeaderElectionRecord(holder_identity="other", lease_duration_seconds=15,
                                 acquire_time=0.0, renew_time=0.0, leader_transitions=3)

    async def main() -> None:
        lock = ScriptedLock("me", other)
        el = _elector(lock)
        assert await el.try_acquire_or_renew() is False  # first look at t=0: observed now
        assert el.get_leader() == "other" and not el.is_leader()
        await asyncio.sleep(14.999)
        assert await el.try_acquire_or_renew() is False  # still valid on observed time
        assert lock.updates == []
        await asyncio.sleep(0.001)  # exactly observed + leaseDuration: expired (Go: `>` now)
        assert await el.try_acquire_or_renew() is True
        [(t, rec)] = lock.updates
        assert t == 15.0
        assert rec == LeaderElectionRecord(holder_identity="me", lease_duration_seconds=15,
                                           acquire_time=15.0, renew_time=15.0,
                                           leader_transitions=4)
        assert el.is_leader() and el.observed_time == 15.0

    vrun(main)


def test_a_lease_without_holder_is_taken_at_once_and_a_missing_one_created() -> None:
    async def main() -> None:
        released = LeaderElectionRecord(lease_duration_seconds=1, acquire_time=0.0,
                                        renew_time=0.0, leader_transitions=2)
        lock = ScriptedLock("me", released)
        el = _elector(lock)
        assert await el.try_acquire_or_renew() is True
        assert [t for t, _ in lock.updates] == [0.0]
        assert lock.record is not None and lock.record.leader_transitions == 3
        fresh = ScriptedLock("me")
        el2 = _elector(fresh)
        assert await el2.try_acquire_or_renew() is True
        assert fresh.creates == [0.0] and fresh.updates == []
        assert fresh.record is not None and fresh.record.leader_transitions == 0
        assert el2.is_leader()

    vrun(main)


def test_the_leaders_renewal_keeps_acquire_time_and_transitions() -> None:
    async def main() -> None:
        lock = ScriptedLock("me")
        el = _elector(lock)
        assert await el.try_acquire_or_renew() is True
        await asyncio.sleep(2)
        lock.record = LeaderElectionRecord(holder_identity="me", lease_duration_seconds=15,
                                           acquire_time=0.0, renew_time=0.0,
                                           leader_transitions=0)
        assert await el.try_acquire_or_renew() is True
        assert lock.gets == [0.0]  # the fast path: no get while the observed lease is valid
        [(t, rec)] = lock.updates
        assert (t, rec.acquire_time, rec.renew_time, rec.leader_transitions) == (2.0, 0.0, 2.0, 0)

    vrun(main)


def test_a_failed_fast_renew_falls_back_to_get_and_update() -> None:
    async def main() -> None:
        lock = ScriptedLock("me")
        el = _elector(lock)
        assert await el.try_acquire_or_renew() is True
        lock.update_script.extend([(0.0, False), (0.0, True)])
        await asyncio.sleep(2)
        assert await el.try_acquire_or_renew() is True
        assert [t for t, _ in lock.updates] == [2.0, 2.0]
        assert lock.gets == [0.0, 2.0]
        assert lock.updates[1][1].leader_transitions == 0  # still ours: no new transition

    vrun(main)


def test_renew_retries_at_once_after_a_slow_attempt_then_on_the_retry_ticker() -> None:
    """client-go polls with a ticker: an attempt slower than RetryPeriod finds a tick buffered
    and retries at once; a fast failure waits for the next tick of the window."""
    log: list[tuple[str, Any]] = []

    async def main() -> None:
        lock = ScriptedLock("me")
        el = _elector(lock, log)
        lock.update_script.extend([
            (0.0, True),    # t=0 renewal
            (3.0, False),   # t=2 window: fast update takes 3 s and fails ...
            (0.5, False),   # t=5 retry at once (tick at 4 passed): fails at 5.5
            (0.0, True),    # t=6 the next tick: renewed
        ])
        lock.get_script.extend([(0.0, True), (0.0, False), (0.0, False)])
        task = asyncio.ensure_future(el.run())
        await asyncio.sleep(9)
        task.cancel()
        starts = [t for t, _ in lock.updates]
        assert starts == [0.0, 2.0, 5.0, 6.0, 8.0]
        assert log[:2] == [("new_leader", "me"), ("started", 0.0)]
        assert el.leading

    vrun(main)


def test_renew_gives_up_when_the_renew_deadline_passes_and_stops_leading() -> None:
    log: list[tuple[str, Any]] = []

    async def main() -> None:
        lock = ScriptedLock("me")
        el = _elector(lock, log)
        lock.update_script.extend([(0.0, True)] + [(0.0, False)] * 50)
        lock.get_script.extend([(0.0, True)] + [(0.0, False)] * 50)
        await el.run()
        assert log[-1] == ("stopped", 12.0)  # window opened at t=2, RenewDeadline 10 s
        assert not el.leading
        # attempts every RetryPeriod inside the window: 2, 4, ..., 10 (12 is the deadline)
        assert [t for t, _ in lock.updates] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]

    vrun(main)


def test_acquire_retries_every_jittered_retry_period() -> None:
    other = LeaderElectionRecord(holder_identity="other", lease_duration_seconds=15,
                                 acquire_time=0.0, renew_time=0.0)

    async def main() -> None:
        lock = ScriptedLock("me", other)
        el = _elector(lock)
        task = asyncio.ensure_future(el.acquire())
        await asyncio.sleep(30)
        assert task.done() and task.result() is True
        gaps = [b - a for a, b in zip(lock.gets, lock.gets[1:], strict=False)]
        assert lock.gets[0] == 0.0
        assert gaps and all(2.0 <= g <= 2.0 * (1 + JITTER_FACTOR) for g in gaps)
        assert len(set(gaps)) > 1  # jittered, not fixed
        [(t, _rec)] = lock.updates
        assert t == lock.gets[-1] >= 15.0 and lock.gets[-2] < 15.0

    vrun(main)


def test_release_hands_back_only_its_own_lease() -> None:
    async def main() -> None:
        lock = ScriptedLock("me")
        el = _elector(lock)
        await el.try_acquire_or_renew()
        await asyncio.sleep(3)
        assert await el.release() is True
        assert lock.record == LeaderElectionRecord(lease_duration_seconds=1, acquire_time=3.0,
                                                   renew_time=3.0, leader_transitions=0)
        assert el.get_leader() == ""
        theirs = LeaderElectionRecord(holder_identity="other", lease_duration_seconds=15)
        lock.record = theirs
        assert await el.release() is True
        assert lock.record is theirs

    vrun(main)


def test_release_on_cancel_releases_after_losing_the_renewal() -> None:
    async def main() -> None:
        lock = ScriptedLock("me")
        el = _elector(lock, release_on_cancel=True)
        lock.update_script.extend([(0.0, True)] + [(0.0, False)] * 5 + [(0.0, True)])
        lock.get_script.extend([(0.0, True)] + [(0.0, False)] * 5 + [(0.0, True)])
        await el.run()
        assert lock.record is not None and lock.record.holder_identity == ""
        assert lock.record.lease_duration_seconds == 1

    vrun(main)


def test_on_new_leader_is_told_each_new_holder_once() -> None:
    log: list[tuple[str, Any]] = []

    async def main() -> None:
        lock = ScriptedLock("me", LeaderElectionRecord(holder_identity="a",
                                                       lease_duration_seconds=15))
        el = _elector(lock, log)
        for _ in range(3):
            await el.try_acquire_or_renew()
            el.maybe_report_transition()
        lock.record = LeaderElectionRecord(holder_identity="b", lease_duration_seconds=15)
        await el.try_acquire_or_renew()
        el.maybe_report_transition()
        assert log == [("new_leader", "a"), ("new_leader", "b")]

    vrun(main)


async def test_the_operator_lease_carries_the_default_duration_and_renews_every_2s(sim: Any) -> None:
    log: list[Any] = []
    mgrs: dict[str, Any] = {}
    start_replicas(sim, ["op-0"], log, mgrs)
    await sim.sleep(4.5)
    lease = await sim.get("Lease", "ray-operator-leader", "default")
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["renewTime"] == clock.rfc3339_micro(4.0)
    assert [e.t for e in events(sim, "leader_acquired", "op-0")] == [0.0]


def test_record_raw_compares_whole_seconds_like_metav1_time() -> None:
    a = LeaderElectionRecord(holder_identity="x", lease_duration_seconds=15,
                             acquire_time=1.2, renew_time=3.1)
    b = attrs.evolve(a, renew_time=3.9)
    c = attrs.evolve(a, renew_time=4.0)
    assert a.raw() == b.raw() != c.raw()
    assert b"1970" not in a.raw() and clock.rfc3339(3.1).encode() in a.raw()
    empty = LeaderElectionRecord()
    assert b'"acquireTime":null' in empty.raw() and b'"renewTime":null' in empty.raw()


def test_lease_spec_and_record_round_trip_with_microsecond_stamps() -> None:
    rec = LeaderElectionRecord(holder_identity="x", lease_duration_seconds=15,
                               acquire_time=1.25, renew_time=3.5, leader_transitions=2)
    spec = record_to_lease_spec(rec)
    assert spec == {"holderIdentity": "x", "leaseDurationSeconds": 15, "leaseTransitions": 2,
                    "acquireTime": clock.rfc3339_micro(1.25),
                    "renewTime": clock.rfc3339_micro(3.5)}
    assert lease_spec_to_record(spec) == rec
    assert "acquireTime" not in record_to_lease_spec(LeaderElectionRecord())
    assert lease_spec_to_record({}) == LeaderElectionRecord()


async def test_lease_lock_update_before_get_or_create_is_an_error(sim: Any) -> None:
    lock = LeaseLock(sim.client(), "default", "lk", "me")
    with pytest.raises(RuntimeError, match="^lease not initialized, call get or create first$"):
        await lock.update(LeaderElectionRecord(holder_identity="me"))
    with pytest.raises(NotFound):
        await lock.get()
    await lock.create(LeaderElectionRecord(holder_identity="me", lease_duration_seconds=15))
    await lock.update(LeaderElectionRecord(holder_identity="you", lease_duration_seconds=9))
    rec, raw = await lock.get()
    assert (rec.holder_identity, rec.lease_duration_seconds) == ("you", 9)
    assert raw == rec.raw()
    assert lock.describe() == "default/lk"


class RecordingProcess:
    """The parts of `Process` the elector uses: a log, pause checkpoints and sleeps."""

    def __init__(self) -> None:
        self.logged: list[tuple[float, str]] = []
        self.checkpoints = 0

    def log(self, event: str, **fields: Any) -> None:
        self.logged.append((clock.now(), event))

    async def checkpoint(self) -> None:
        self.checkpoints += 1

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def test_the_elector_logs_its_steps_and_checkpoints_between_renewals() -> None:
    proc = RecordingProcess()

    async def main() -> None:
        lock = ScriptedLock("me")
        cb = LeaderCallbacks(on_started_leading=lambda: None, on_stopped_leading=lambda: None)
        el = LeaderElector(LeaderElectionConfig(lock=lock, callbacks=cb,  # type: ignore[arg-type]
                                                release_on_cancel=True),
                           rng=SimRandom(7), process=proc)  # type: ignore[arg-type]
        lock.update_script.extend([(0.0, True)] + [(0.0, False)] * 5 + [(0.0, True)])
        lock.get_script.extend([(0.0, True)] + [(0.0, False)] * 5 + [(0.0, True)])
        await el.run()

    vrun(main)
    assert [e for _, e in proc.logged if e.startswith("leader_")] == [
        "leader_election_started", "leader_observed", "leader_acquired",
        *["leader_renew_failed"] * 5, "leader_lost", "leader_released"]
    assert proc.checkpoints >= 6


def test_a_new_elector_is_not_leading_and_has_seen_no_leader() -> None:
    el = _elector(ScriptedLock("me"))
    assert el.leading is False and el.get_leader() == "" and not el.is_leader()
    assert not el.is_lease_valid(0.0)
