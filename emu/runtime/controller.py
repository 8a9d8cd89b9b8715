"""The controller: sources feed a work queue; workers reconcile one key at a time.

Port of controller-runtime ``pkg/internal/controller/controller.go`` (``Start``,
``processNextWorkItem``, ``reconcileHandler``, ``Reconcile``) with the defaults of
``pkg/controller/controller.go``. What it guarantees, in virtual time:

- sources start first; workers start only once every source's informer has listed (a cold cache
  means no reconcile until the list is in), or the controller fails after ``cache_sync_timeout``;
- at most ``max_concurrent_reconciles`` keys in flight, never one key twice (the queue's
  processing set);
- the outcome of each reconcile is one queue action (see `Controller.reconcile_handler`);
- an exception that means a bug in the reconciler's own code (`is_panic`: a ``KeyError``,
  ``TypeError``, ``AttributeError``..., as a Go runtime panic) is recovered into an error, traced
  as ``reconcile_panic`` and reported to the process (`Process.report_panic`, with its traceback,
  which the pytest plugin shows and ``sim.fail_on_panic`` fails on); it backs off like any error.
  Any other exception is an error the reconciler returned, as Go's ``return err``.

Every reconcile leaves ``reconcile_started`` and ``reconcile_finished`` in the trace (controller,
key, outcome); the invariant checkers read them as leader-only work.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from typing import Any

import attrs

from ..apiserver.errors import ApiError
from ..kernel.network import NetworkError
from ..kernel.process import Process, ProcessGone
from .ratelimiter import RateLimiter, default_controller_rate_limiter, default_item_rate_limiter
from .reconcile import Reconciler, Request, Result, TerminalError
from .source import Kind
from .workqueue import RateLimitingQueue

#: Reconciles of one key back to back (at most 15 ms apart) after which each further one costs
#: `HOT_LOOP_COST` (`Controller._charge_hot_loop`).
HOT_LOOP_RECONCILES = 100
#: Virtual seconds one pass of a hot reconcile loop takes (a few API round trips).
HOT_LOOP_COST = 0.01


@attrs.frozen
class ControllerOptions:
    """Port of ``controller.TypedOptions`` (the fields that change behaviour here)."""

    #: Workers, i.e. keys reconciled at once. Defaults to 1 (KubeRay passes its
    #: ``--reconcile-concurrency``).
    max_concurrent_reconciles: int = 1
    #: Backoff for failed keys. Defaults to None: 5 ms * 2^n up to 1000 s per key, which is what
    #: v0.24.1 uses with its default priority queue; with ``use_priority_queue=False`` the
    #: default is client-go's ``DefaultControllerRateLimiter`` (that, max'ed with 10 qps/100).
    rate_limiter: RateLimiter | None = None
    #: Defaults to True, as in controller-runtime v0.24.1 (only the rate-limiter default differs:
    #: the queue's ordering is client-go's FIFO either way).
    use_priority_queue: bool = True
    #: Recover exceptions other than API and network errors ("panics") into errors. Defaults to
    #: True; when False such an exception ends the controller and so the manager.
    recover_panic: bool = True
    #: How long the sources may take to sync before `start` fails. Defaults to 120 s.
    cache_sync_timeout: float = 120.0
    #: Run only on the elected leader. Defaults to True.
    need_leader_election: bool = True
    #: Trace ``reconcile_started``/``reconcile_finished`` for every reconcile (the two-leader
    #: checker reads them). Defaults to True; errors and panics are traced either way.
    trace_reconciles: bool = True

    def __attrs_post_init__(self) -> None:
        if self.max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1, not "
                             f"{self.max_concurrent_reconciles}")

    def new_rate_limiter(self) -> RateLimiter:
        if self.rate_limiter is not None:
            return self.rate_limiter
        if self.use_priority_queue:
            return default_item_rate_limiter()
        return default_controller_rate_limiter()


class CacheSyncError(RuntimeError):
    """A controller's sources did not sync within ``cache_sync_timeout``."""


@attrs.define
class ControllerStats:
    """Counters per outcome (controller-runtime's ``controller_runtime_reconcile_total``)."""

    success: int = 0
    requeue_after: int = 0
    requeue: int = 0
    error: int = 0
    terminal: int = 0
    panics: int = 0

    @property
    def total(self) -> int:
        return self.success + self.requeue_after + self.requeue + self.error + self.terminal


def _is_expected_error(exc: BaseException) -> bool:
    return isinstance(exc, (ApiError, NetworkError, TerminalError))


#: Exceptions that mean a bug in the code that raised them, as a Go runtime panic does (a nil map
#: read, an index out of range, a nil dereference, a failed assertion).
PANIC_TYPES: tuple[type[BaseException], ...] = (
    LookupError, TypeError, AttributeError, NameError, ArithmeticError, AssertionError,
    RecursionError)


def is_panic(exc: BaseException) -> bool:
    """Whether a reconciler's exception is a panic rather than an error it returned: one of
    `PANIC_TYPES` (API and network errors excepted), or a type named ``...Panic`` (the port's
    rendering of Go's explicit ``panic(...)``, e.g. ``RayServicePanic``)."""
    if _is_expected_error(exc):
        return False
    return isinstance(exc, PANIC_TYPES) or type(exc).__name__.endswith("Panic")


class Controller:
    """One controller: a name, a reconciler, sources and a queue with workers."""

    def __init__(self, name: str, reconciler: Reconciler, options: ControllerOptions | None = None,
                 *, process: Process | None = None,
                 log: Callable[..., None] | None = None) -> None:
        self.name = name
        self.reconciler = reconciler
        self.options = options or ControllerOptions()
        self.process = process
        self._log = log or (process.log if process is not None else (lambda *_a, **_k: None))
        self.queue: RateLimitingQueue[Request] = RateLimitingQueue(
            self.options.new_rate_limiter(), name=name)
        self._watches: list[Kind] = []
        self.started = False
        self.stats = ControllerStats()
        #: The kind this controller reconciles (``For``), set by the builder; names the subject
        #: of its panics and errors (``RayJob default/demo``).
        self.for_kind: str | None = None
        self.in_flight: dict[Request, int] = {}
        #: Per key: when its last reconcile started and how many ran back to back until then
        #: (`_charge_hot_loop`).
        self._streaks: dict[str, tuple[float, int]] = {}
        self._streaks_bound = 4096

    def __repr__(self) -> str:
        return f"<Controller {self.name} workers={self.options.max_concurrent_reconciles}>"

    @property
    def need_leader_election(self) -> bool:
        """Port of ``Controller.NeedLeaderElection``."""
        return self.options.need_leader_election

    def watch(self, src: Kind) -> None:
        """Port of ``Controller.Watch``: held until `start`, started at once after it."""
        if self.started:
            src.start(self.queue)
        else:
            self._watches.append(src)

    async def start(self) -> None:
        """Port of ``Controller.Start``: sources, wait for sync, then the workers; runs until
        cancelled, and then shuts the queue down."""
        if self.started:
            raise RuntimeError("controller was started more than once. This is likely to be "
                               "caused by being added to a manager multiple times")
        self.started = True
        try:
            await self._start_event_sources()
            self._log("controller_started", controller=self.name,
                      workers=self.options.max_concurrent_reconciles)
            workers = [self._spawn(self._worker(i), f"{self.name}:worker-{i}")
                       for i in range(self.options.max_concurrent_reconciles)]
            await asyncio.gather(*workers)
        finally:
            self.queue.shut_down()

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        if self.process is not None:
            return self.process.spawn(coro, name=name)
        return asyncio.ensure_future(coro)

    async def _start_event_sources(self) -> None:
        """Port of ``startEventSourcesAndQueueLocked``: start each source, wait for its sync."""
        for src in self._watches:
            self._log("source_started", controller=self.name, source=str(src))
            src.start(self.queue)
        for src in self._watches:
            try:
                async with asyncio.timeout(self.options.cache_sync_timeout):
                    await src.wait_for_sync()
            except TimeoutError:
                raise CacheSyncError(
                    f"failed to wait for {self.name} caches to sync {src}: timed out waiting "
                    "for cache to be synced") from None
        self._log("caches_synced", controller=self.name,
                  sources=[str(s) for s in self._watches])
        self._watches = []

    async def _worker(self, index: int) -> None:
        while await self.process_next_work_item(index):
            pass

    async def process_next_work_item(self, worker: int = 0) -> bool:
        """Port of ``processNextWorkItem``: take a key, reconcile it, and always call done."""
        req = await self.queue.get()
        if req is None:
            return False
        try:
            await self.reconcile_handler(req, worker)
        finally:
            self.queue.done(req)
        return True

    async def reconcile(self, req: Request) -> Result:
        """Port of ``Controller.Reconcile``: call the reconciler; recover a panic into an error."""
        try:
            return await self.reconciler.reconcile(req)
        except ProcessGone:
            raise
        except Exception as exc:
            if not is_panic(exc) or not self.options.recover_panic:
                raise
            self.stats.panics += 1
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self._log("reconcile_panic", controller=self.name, key=req.key,
                      error=f"{type(exc).__name__}: {exc}",
                      at=f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}")
            if self.process is not None:
                self.process.report_panic(f"controller {self.name}", self.subject(req), exc)
            raise RuntimeError(f"panic: {type(exc).__name__}: {exc} [recovered]") from exc

    def subject(self, req: Request) -> str:
        """What a reconcile of ``req`` works on: ``RayJob default/demo``."""
        return f"{self.for_kind or self.name} {req.key}"

    async def _charge_hot_loop(self, key: str) -> None:
        """A key reconciled over `HOT_LOOP_RECONCILES` times back to back without virtual time
        moving is in a hot loop (each pass's writes trigger the next, as a controller acting
        on a stale cache against the garbage collector): each further pass costs
        `HOT_LOOP_COST`, the API round trips a real pass takes, so virtual time moves on as wall
        time would and the loop ends when the real one would (a lagging watch catches up)
        instead of spinning forever at one instant. Normal runs never reach the limit."""
        now = asyncio.get_running_loop().time()
        last, streak = self._streaks.get(key, (-1.0, 0))
        streak = streak + 1 if now - last <= HOT_LOOP_COST * 1.5 else 1
        self._streaks[key] = (now, streak)
        if len(self._streaks) > self._streaks_bound:
            # keys seen long ago cannot be in a streak: forget them; the bound then doubles past
            # what is left, so a world reconciling many keys at one instant prunes rarely
            self._streaks = {k: v for k, v in self._streaks.items()
                             if now - v[0] <= HOT_LOOP_COST * 1.5}
            self._streaks_bound = max(4096, 2 * len(self._streaks))
        if streak > HOT_LOOP_RECONCILES:
            await asyncio.sleep(HOT_LOOP_COST)
            self._streaks[key] = (asyncio.get_running_loop().time(), streak)

    async def reconcile_handler(self, req: Request, worker: int = 0) -> None:
        """Port of ``reconcileHandler``: one queue action per outcome.

        - error → re-add rate limited (any ``requeue_after`` is lost with the error);
        - `TerminalError` → nothing: not requeued, backoff not forgotten;
        - ``requeue_after > 0`` → forget the backoff, re-add after that delay;
        - ``requeue`` → re-add rate limited;
        - success → forget the backoff; wait for the next event.
        """
        traced = self.options.trace_reconciles
        key = req.key
        await self._charge_hot_loop(key)
        in_flight = self.in_flight
        in_flight[req] = in_flight.get(req, 0) + 1
        if traced:
            self._log("reconcile_started", controller=self.name, key=key, worker=worker)
        outcome: Result | Exception
        try:
            outcome = await self.reconcile(req)
        except ProcessGone:
            raise
        except Exception as exc:
            outcome = exc
        finally:
            left = in_flight[req] - 1
            if left:
                in_flight[req] = left
            else:
                del in_flight[req]
        queue = self.queue
        stats = self.stats
        match outcome:
            case TerminalError():
                stats.terminal += 1
                self._log("reconcile_finished", controller=self.name, key=key,
                          outcome="terminal_error", error=str(outcome))
            case Exception():
                queue.add_rate_limited(req)
                stats.error += 1
                if self.process is not None:
                    self.process.report_error(f"controller {self.name}", self.subject(req),
                                              f"{type(outcome).__name__}: {outcome}")
                self._log("reconcile_finished", controller=self.name, key=key,
                          outcome="error", error=f"{type(outcome).__name__}: {outcome}",
                          requeues=queue.num_requeues(req))
            case Result(requeue_after=after) if after > 0:
                queue.forget(req)
                queue.add_after(req, after)
                stats.requeue_after += 1
                if traced:
                    self._log("reconcile_finished", controller=self.name, key=key,
                              outcome="requeue_after", after=after)
            case Result(requeue=True):
                queue.add_rate_limited(req)
                stats.requeue += 1
                if traced:
                    self._log("reconcile_finished", controller=self.name, key=key,
                              outcome="requeue")
            case _:
                queue.forget(req)
                stats.success += 1
                if traced:
                    self._log("reconcile_finished", controller=self.name, key=key,
                              outcome="success")
