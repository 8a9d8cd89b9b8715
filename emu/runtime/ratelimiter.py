"""Work-queue rate limiters: how long a failed key waits before it is retried.

Port of client-go ``util/workqueue/default_rate_limiters.go``. Durations are virtual seconds. The
bucket limiter reads the simulation clock (``emu.kernel.clock.now`` unless given another), so a
burst of failures is spread over virtual time exactly as golang.org/x/time/rate would spread it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

from ..kernel import clock as sim_clock


class RateLimiter(Protocol):
    """client-go ``TypedRateLimiter``."""

    def when(self, item: Hashable) -> float:
        """How long ``item`` should wait (and count one more failure)."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item``: it succeeded, or it is being given up."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many failures ``item`` has had."""
        ...


class ItemExponentialFailureRateLimiter:
    """Port of ``ItemExponentialFailureRateLimiter`` (default_rate_limiters.go):
    ``base_delay * 2**failures``, capped at ``max_delay``, per item."""

    def __init__(self, base_delay: float, max_delay: float) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 1024:  # 2**exp would overflow a float; Go caps on overflow too
            return self.max_delay
        return min(self.base_delay * 2.0**exp, self.max_delay)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)


class BucketRateLimiter:
    """Port of ``BucketRateLimiter`` over golang.org/x/time/rate's ``Limiter.Reserve().Delay()``:
    a token bucket of ``burst`` tokens refilled at ``qps``; one token per `when`, shared by all
    items, so it limits the overall retry rate rather than any one key."""

    def __init__(self, qps: float, burst: int,
                 clock: Callable[[], float] | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock or sim_clock.now
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: Hashable) -> float:
        now = self._clock()
        if self._last is not None and now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        if self._last is None or now > self._last:
            self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def num_requeues(self, item: Hashable) -> int:
        return 0

    def forget(self, item: Hashable) -> None:
        pass


class MaxOfRateLimiter:
    """Port of ``MaxOfRateLimiter``: the longest wait of several limiters (each is told)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)


def default_controller_rate_limiter(clock: Callable[[], float] | None = None) -> MaxOfRateLimiter:
    """Port of ``DefaultTypedControllerRateLimiter`` (default_rate_limiters.go): per item
    5 ms * 2^failures capped at 1000 s, max'ed with an overall 10 qps / burst 100 bucket."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock),
    )


def default_item_rate_limiter() -> ItemExponentialFailureRateLimiter:
    """What controller-runtime v0.24.1 uses when the priority queue is on (its default):
    ``NewTypedItemExponentialFailureRateLimiter(5ms, 1000s)`` alone (pkg/controller/controller.go)."""
    return ItemExponentialFailureRateLimiter(0.005, 1000.0)
