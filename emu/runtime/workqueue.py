"""The controller work queue: client-go's queue, delaying queue and rate-limiting queue in one.

Port of client-go ``util/workqueue`` (``queue.go`` ``Typed``, ``delaying_queue.go``,
``rate_limiting_queue.go``). The guarantees a controller builds on:

- **dedup**: an item added while it waits is not added twice (the ``dirty`` set);
- **one worker per item**: an item added while a worker holds it (the ``processing`` set) is not
  handed out again until that worker calls `done`; it is then re-queued once;
- **FIFO** among waiting items;
- `add_after` parks an item on a virtual-time timer; adding it again later keeps the earlier time;
- `add_rate_limited` asks the rate limiter how long; `forget` resets the item's backoff;
- `shut_down`: `get` keeps handing out what is queued, then returns None.

Items must be hashable and not None (None is what `get` returns once the queue is shut down).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from .ratelimiter import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(Generic[T]):
    """client-go ``TypedRateLimitingInterface``: ``Add``/``Get``/``Done`` plus delays and backoff."""

    def __init__(self, rate_limiter: RateLimiter | None = None, *, name: str = "") -> None:
        self.name = name
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter()
        self._queue: deque[T] = deque()
        self._dirty: dict[T, None] = {}
        self._processing: dict[T, None] = {}
        self._waiting: dict[T, tuple[float, asyncio.TimerHandle]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        #: Counters (client-go's queue metrics, reduced): adds, retries (add_after/rate limited).
        self.adds = 0
        self.retries = 0

    def __len__(self) -> int:
        """Items waiting to be handed out (not those parked on a timer or being processed)."""
        return len(self._queue)

    def __repr__(self) -> str:
        return (f"<RateLimitingQueue {self.name} queued={len(self._queue)} "
                f"processing={len(self._processing)} waiting={len(self._waiting)}>")

    # -- queue.go --------------------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Port of ``Typed.Add`` (queue.go): mark the item dirty; queue it unless it is being
        processed (then `done` re-queues it) or already queued."""
        if self._shutting_down:
            return
        if item in self._dirty:
            return
        self.adds += 1
        self._dirty[item] = None
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake_one()

    async def get(self) -> T | None:
        """Port of ``Typed.Get`` (queue.go): wait for an item and mark it processing; None once
        the queue is shut down and empty."""
        while not self._queue and not self._shutting_down:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut in self._getters:
                    self._getters.remove(fut)
                elif fut.done() and not fut.cancelled():
                    self._wake_one()  # pass the wake-up on; this getter is going away
                raise
        if not self._queue:
            return None
        item = self._queue.popleft()
        self._processing[item] = None
        self._dirty.pop(item, None)
        return item

    def done(self, item: T) -> None:
        """Port of ``Typed.Done`` (queue.go): the worker finished; if the item was added
        meanwhile, queue it again."""
        self._processing.pop(item, None)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one()

    def shut_down(self) -> None:
        """Port of ``Typed.ShutDown``: refuse new adds, drop parked timers, release idle getters."""
        self._shutting_down = True
        for _when, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    def shutting_down(self) -> bool:
        return self._shutting_down

    def processing(self) -> list[T]:
        """Items a worker holds now, in the order they were handed out."""
        return list(self._processing)

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    # -- delaying_queue.go -----------------------------------------------------------------------

    def add_after(self, item: T, delay: float) -> None:
        """Port of ``delayingType.AddAfter``: add after ``delay`` virtual seconds. If the item is
        already parked, the earlier of the two times wins."""
        if self._shutting_down:
            return
        self.retries += 1
        if delay <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        parked = self._waiting.get(item)
        if parked is not None:
            if parked[0] <= ready_at:
                return
            parked[1].cancel()
        handle = loop.call_at(ready_at, self._fire, item)
        self._waiting[item] = (ready_at, handle)

    def _fire(self, item: T) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    def waiting(self) -> dict[T, float]:
        """Parked items and the virtual time each becomes ready."""
        return {item: when for item, (when, _h) in self._waiting.items()}

    # -- rate_limiting_queue.go ------------------------------------------------------------------

    def add_rate_limited(self, item: T) -> None:
        """Port of ``rateLimitingType.AddRateLimited``: add after the rate limiter's delay."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Port of ``rateLimitingType.Forget``: reset the item's backoff."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
