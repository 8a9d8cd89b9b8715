"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Port of client-go ``tools/leaderelection/leaderelection.go`` (``LeaderElector``) and
``resourcelock/leaselock.go`` (``LeaseLock``), with controller-runtime's identity and client
timeout (``pkg/leaderelection/leader_election.go``). Three facts to keep in mind, in client-go's
own spirit ("This implementation does not guarantee that only one client is acting as a leader"):

1. **Expiry is judged on observed time.** A candidate never trusts ``renewTime``; it remembers
   when *it* last saw the record change and waits a full LeaseDuration (15 s) from then. A fresh
   candidate that finds an old Lease therefore still waits 15 s from its first look.
2. **There is no fencing.** A leader that is paused, or cut off, keeps believing it leads until
   its own renew deadline passes (and a paused process notices nothing until resumed); its
   in-flight writes still land unless a resourceVersion conflict stops them.
3. **A crash never releases the Lease.** ``release_on_cancel`` is off by default, as in KubeRay;
   successors wait out the full duration. A restarted process has a new identity
   (``hostname_uuid``) and waits for its own old Lease like anyone else.

Timing, with the defaults (15 s / 10 s / 2 s): a candidate tries at once, then every
``jitter(2 s, 1.2)`` = 2 to 4.4 s; a leader renews every 2 s, and each renewal may retry every 2 s
within a 10 s window (the window's deadline cancels an in-flight request); when the window ends
without success, leadership is lost (``OnStoppedLeading``). Every request uses a client whose
timeout is max(RenewDeadline/2, 1 s).

Deviations: the elector is cancelled with its process (a crash runs no callbacks; Go's deferred
``OnStoppedLeading`` would run on a context cancel, not on SIGKILL); the Coordinated and
ConfigMap/Endpoints lock variants are not ported.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import orjson

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..kernel import clock
from ..kernel.network import NetworkError
from ..kernel.process import Process
from ..kernel.rng import SimRandom

#: client-go's ``JitterFactor``: an acquire retry waits RetryPeriod * (1 + rand * 1.2).
JITTER_FACTOR = 1.2

Obj = dict[str, Any]


@attrs.frozen
class LeaderElectionRecord:
    """Port of ``resourcelock.LeaderElectionRecord``; times are virtual seconds."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: float | None = None
    renew_time: float | None = None
    leader_transitions: int = 0

    def raw(self) -> bytes:
        """The record as client-go compares it: JSON with *whole-second* times (``metav1.Time``),
        so two renewals within one second look the same to an observer."""
        return orjson.dumps({
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": clock.rfc3339(self.acquire_time) if self.acquire_time is not None
            else None,
            "renewTime": clock.rfc3339(self.renew_time) if self.renew_time is not None else None,
            "leaderTransitions": self.leader_transitions,
        }, option=orjson.OPT_SORT_KEYS)


def lease_spec_to_record(spec: Obj) -> LeaderElectionRecord:
    """Port of ``LeaseSpecToLeaderElectionRecord`` (leaselock.go)."""
    acquire = spec.get("acquireTime")
    renew = spec.get("renewTime")
    return LeaderElectionRecord(
        holder_identity=spec.get("holderIdentity") or "",
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=clock.parse_time(acquire) if acquire else None,
        renew_time=clock.parse_time(renew) if renew else None,
        leader_transitions=int(spec.get("leaseTransitions") or 0),
    )


def record_to_lease_spec(rec: LeaderElectionRecord) -> Obj:
    """Port of ``LeaderElectionRecordToLeaseSpec`` (leaselock.go): MicroTime stamps."""
    spec: Obj = {
        "holderIdentity": rec.holder_identity,
        "leaseDurationSeconds": rec.lease_duration_seconds,
        "leaseTransitions": rec.leader_transitions,
    }
    if rec.acquire_time is not None:
        spec["acquireTime"] = clock.rfc3339_micro(rec.acquire_time)
    if rec.renew_time is not None:
        spec["renewTime"] = clock.rfc3339_micro(rec.renew_time)
    return spec


class LeaseLock:
    """Port of ``resourcelock.LeaseLock``: get, create and resourceVersion-checked update of one
    Lease through the elector's own client."""

    def __init__(self, client: Client, namespace: str, name: str, identity: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self._identity = identity
        self._lease: Obj | None = None

    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> tuple[LeaderElectionRecord, bytes]:
        """The current record and its raw form; `NotFound` when the Lease does not exist."""
        lease = await self.client.get("Lease", self.name, self.namespace)
        self._lease = lease
        rec = lease_spec_to_record(lease.get("spec") or {})
        return rec, rec.raw()

    async def create(self, rec: LeaderElectionRecord) -> None:
        self._lease = await self.client.create({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record_to_lease_spec(rec),
        })

    async def update(self, rec: LeaderElectionRecord) -> None:
        """Replace the spec of the Lease last read (its resourceVersion arbitrates races)."""
        if self._lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        lease = dict(self._lease)
        lease["spec"] = record_to_lease_spec(rec)
        self._lease = await self.client.update(lease)


@attrs.frozen
class LeaderCallbacks:
    """Port of ``LeaderCallbacks``. ``on_started_leading`` runs as a task of the process
    (``go OnStartedLeading(ctx)``); ``on_stopped_leading`` runs when the elector stops after
    leading or failing; ``on_new_leader`` gets each newly observed holder identity."""

    on_started_leading: Callable[[], Awaitable[Any] | None]
    on_stopped_leading: Callable[[], None]
    on_new_leader: Callable[[str], None] | None = None


@attrs.frozen
class LeaderElectionConfig:
    """Port of ``LeaderElectionConfig``; durations in seconds. Defaults are controller-runtime's
    (and so KubeRay's): 15 s / 10 s / 2 s, no release on cancel."""

    lock: LeaseLock
    callbacks: LeaderCallbacks
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = False
    name: str = ""


class LeaderElector:
    """Port of client-go's ``LeaderElector``: `run` acquires, then renews until it cannot."""

    def __init__(self, config: LeaderElectionConfig, *, rng: SimRandom,
                 process: Process | None = None) -> None:
        c = config
        if c.lease_duration <= c.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if c.renew_deadline <= JITTER_FACTOR * c.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if c.lease_duration < 1:
            raise ValueError("leaseDuration must be greater than zero")
        if c.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if not c.lock.identity():
            raise ValueError("Lock identity is empty")
        self.config = config
        self.rng = rng
        self.process = process
        self.observed_record = LeaderElectionRecord()
        self.observed_raw_record = b""
        self.observed_time = -math.inf
        self.reported_leader = ""
        self.leading = False
        self._leading_task: asyncio.Task[Any] | None = None

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _now() -> float:
        return clock.now()

    def _log(self, event: str, **fields: Any) -> None:
        if self.process is not None:
            self.process.log(event, lock=self.config.lock.describe(),
                             identity=self.config.lock.identity(), **fields)

    async def _checkpoint(self) -> None:
        """A paused process acts on nothing until resumed, even when a timer fired meanwhile."""
        if self.process is not None:
            await self.process.checkpoint()

    async def _sleep(self, seconds: float) -> None:
        if self.process is not None:
            await self.process.sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    def get_leader(self) -> str:
        """Port of ``GetLeader``: the last observed holder."""
        return self.observed_record.holder_identity

    def is_leader(self) -> bool:
        """Port of ``IsLeader``: the last observed holder is this candidate."""
        return self.observed_record.holder_identity == self.config.lock.identity()

    def is_lease_valid(self, now: float) -> bool:
        """Port of ``isLeaseValid``: judged on the local time the record was last seen to change."""
        return self.observed_time + self.observed_record.lease_duration_seconds > now

    def set_observed_record(self, rec: LeaderElectionRecord) -> None:
        """Port of ``setObservedRecord``: remember the record and stamp the local time."""
        self.observed_record = rec
        self.observed_time = self._now()

    def maybe_report_transition(self) -> None:
        """Port of ``maybeReportTransition``: tell ``on_new_leader`` about a new holder."""
        holder = self.observed_record.holder_identity
        if holder == self.reported_leader:
            return
        self.reported_leader = holder
        self._log("leader_observed", holder=holder)
        if self.config.callbacks.on_new_leader is not None:
            self.config.callbacks.on_new_leader(holder)

    # -- the algorithm ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Port of ``LeaderElector.Run``: acquire, start leading, renew until that fails; then
        ``on_stopped_leading``. Cancellation (the process ending) runs no callback."""
        acquired = await self.acquire()
        if acquired:
            result = self.config.callbacks.on_started_leading()
            if asyncio.iscoroutine(result):
                self._leading_task = asyncio.ensure_future(result)
            await self.renew()
        self.leading = False
        self.config.callbacks.on_stopped_leading()

    async def acquire(self) -> bool:
        """Port of ``acquire``: try at once, then every jittered RetryPeriod, until it works."""
        self._log("leader_election_started")
        while True:
            succeeded = await self.try_acquire_or_renew()
            self.maybe_report_transition()
            if succeeded:
                self.leading = True
                self._log("leader_acquired",
                          transitions=self.observed_record.leader_transitions)
                return True
            await self._sleep(self.rng.jitter(self.config.retry_period, JITTER_FACTOR))

    async def renew(self) -> None:
        """Port of ``renew``: every RetryPeriod, a window of RenewDeadline in which
        ``try_acquire_or_renew`` is polled every RetryPeriod; a window without success ends it."""
        c = self.config
        while True:
            start = self._now()
            renewed = False
            attempts = 0
            try:
                async with asyncio.timeout_at(start + c.renew_deadline):
                    tick = start + c.retry_period
                    while True:
                        attempts += 1
                        if await self.try_acquire_or_renew():
                            renewed = True
                            break
                        self._log("leader_renew_failed", attempt=attempts)
                        now = self._now()
                        if now < tick:
                            await asyncio.sleep(tick - now)
                            tick += c.retry_period
                        else:  # a slow attempt: the ticker's buffered tick fires at once
                            tick = start + c.retry_period * (
                                math.floor((now - start) / c.retry_period) + 1)
                        await self._checkpoint()
            except TimeoutError:
                renewed = False
            await self._checkpoint()
            self.maybe_report_transition()
            if not renewed:
                self.leading = False
                self._log("leader_lost", reason="failed to renew lease "
                          f"{c.lock.describe()}: timed out waiting for the condition",
                          holder=self.observed_record.holder_identity)
                break
            await self._sleep(c.retry_period)
        if c.release_on_cancel:
            await self.release()

    async def release(self) -> bool:
        """Port of ``release``/``tryRelease``: hand the Lease back (only if still ours)."""
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                rec, _raw = await self.config.lock.get()
                if rec.holder_identity != self.config.lock.identity():
                    return True
                now = self._now()
                empty = LeaderElectionRecord(lease_duration_seconds=1, renew_time=now,
                                             acquire_time=now,
                                             leader_transitions=rec.leader_transitions)
                await self.config.lock.update(empty)
                self.set_observed_record(empty)
                self._log("leader_released")
                return True
        except (ApiError, NetworkError, TimeoutError):
            return False

    async def try_acquire_or_renew(self) -> bool:
        """Port of ``tryAcquireOrRenew``: the optimistic renew, else get (or create), check
        holder and observed expiry, and update with the resourceVersion last read."""
        lock = self.config.lock
        now = self._now()
        rec = LeaderElectionRecord(
            holder_identity=lock.identity(),
            lease_duration_seconds=int(self.config.lease_duration),
            renew_time=now, acquire_time=now,
        )
        # 1. fast path: the leader updates assuming its last observed record is current.
        if self.is_leader() and self.is_lease_valid(now):
            old = self.observed_record
            rec = attrs.evolve(rec, acquire_time=old.acquire_time,
                               leader_transitions=old.leader_transitions)
            try:
                await lock.update(rec)
                self.set_observed_record(rec)
                return True
            except (ApiError, NetworkError) as err:
                self._log("lease_update_failed", path="fast", error=str(err))

        # 2. obtain or create the record.
        try:
            old, raw = await lock.get()
        except ApiError as err:
            if not is_not_found(err):
                self._log("lease_get_failed", error=str(err))
                return False
            try:
                await lock.create(rec)
            except (ApiError, NetworkError) as cerr:
                self._log("lease_create_failed", error=str(cerr))
                return False
            self.set_observed_record(rec)
            return True
        except NetworkError as err:
            self._log("lease_get_failed", error=str(err))
            return False

        # 3. record obtained: check identity and (observed) time.
        if raw != self.observed_raw_record:
            self.set_observed_record(old)
            self.observed_raw_record = raw
        if old.holder_identity and self.is_lease_valid(now) and not self.is_leader():
            return False

        # 4. try to update.
        if self.is_leader():
            rec = attrs.evolve(rec, acquire_time=old.acquire_time,
                               leader_transitions=old.leader_transitions)
        else:
            rec = attrs.evolve(rec, leader_transitions=old.leader_transitions + 1)
        try:
            await lock.update(rec)
        except (ApiError, NetworkError) as err:
            self._log("lease_update_failed", path="slow", error=str(err))
            return False
        self.set_observed_record(rec)
        return True


def new_identity(hostname: str, rng: SimRandom) -> str:
    """Port of controller-runtime's holder identity: ``os.Hostname() + "_" + uuid``."""
    return f"{hostname}_{rng.uid()}"


def election_client_timeout(renew_deadline: float) -> float:
    """controller-runtime's leader-election REST timeout: max(RenewDeadline/2, 1 s)."""
    return max(renew_deadline / 2, 1.0)
