from __future__ import annotations

import asyncio

import pytest

from emu.runtime.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from emu.runtime.workqueue import RateLimitingQueue


def test_a_key_added_twice_while_queued_is_handed_out_once(run):
    async def main():
        q = RateLimitingQueue(name="t")
        q.add("a")
        q.add("b")
        q.add("a")
        first = await q.get()
        second = await q.get()
        return first, second, len(q)

    assert run(main) == ("a", "b", 0)


def test_a_key_added_while_processing_is_handed_out_again_only_after_done(run):
    async def main():
        q = RateLimitingQueue(name="t")
        q.add("a")
        item = await q.get()
        q.add("a")
        assert len(q) == 0, "a key being processed must not be queued again"
        waiter = asyncio.ensure_future(q.get())
        await asyncio.sleep(1)
        assert not waiter.done()
        q.done(item)
        return await waiter

    assert run(main) == "a"


def test_items_are_handed_out_in_fifo_order(run):
    async def main():
        q = RateLimitingQueue(name="t")
        for k in ["c", "a", "b"]:
            q.add(k)
        return [await q.get() for _ in range(3)]

    assert run(main) == ["c", "a", "b"]


def test_exponential_backoff_is_5ms_doubling_per_failure():
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k") for _ in range(6)]
    assert delays == [0.005, 0.010, 0.020, 0.040, 0.080, 0.160]
    assert limiter.num_requeues("k") == 6


def test_exponential_backoff_caps_at_1000_seconds():
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k") for _ in range(30)]
    # 5ms * 2^17 = 655.36s is the last uncapped delay; 2^18 would be 1310.72s
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0] * 12
    assert limiter.when("k") == 1000.0


def test_forget_resets_the_backoff_of_that_key_only():
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    for _ in range(3):
        limiter.when("a")
        limiter.when("b")
    limiter.forget("a")
    assert limiter.when("a") == 0.005
    assert limiter.when("b") == 0.040


def test_bucket_limiter_allows_a_burst_of_100_then_10_per_second(run):
    async def main():
        bucket = BucketRateLimiter(10.0, 100)
        burst = [bucket.when(i) for i in range(100)]
        after = [bucket.when(100), bucket.when(101)]
        await asyncio.sleep(1.0)
        later = bucket.when(102)
        return burst, after, later

    burst, after, later = run(main)
    assert burst == [0.0] * 100
    assert after == [pytest.approx(0.1), pytest.approx(0.2)]
    # one second refilled 10 tokens; two were borrowed ahead, so 7 remain after this one
    assert later == 0.0


def test_default_controller_rate_limiter_is_the_max_of_item_backoff_and_bucket(run):
    async def main():
        limiter = default_controller_rate_limiter()
        assert isinstance(limiter, MaxOfRateLimiter)
        first = [limiter.when(f"k{i}") for i in range(100)]
        crowded = limiter.when("k-new")
        return first, crowded

    first, crowded = run(main)
    assert first == [0.005] * 100
    assert crowded == pytest.approx(0.1)


def test_rate_limited_adds_arrive_at_5_10_20_ms_and_forget_restarts_at_5ms(run):
    async def main():
        loop = asyncio.get_running_loop()
        q = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.005, 1000.0), name="t")
        times = []
        for _ in range(4):
            start = loop.time()
            q.add_rate_limited("k")
            item = await q.get()
            times.append(round(loop.time() - start, 9))
            q.done(item)
        q.forget("k")
        start = loop.time()
        q.add_rate_limited("k")
        await q.get()
        times.append(round(loop.time() - start, 9))
        return times, q.num_requeues("k")

    times, requeues = run(main)
    assert times == [0.005, 0.010, 0.020, 0.040, 0.005]
    assert requeues == 1


def test_add_after_keeps_the_earlier_of_two_ready_times(run):
    async def main():
        loop = asyncio.get_running_loop()
        q = RateLimitingQueue(name="t")
        q.add_after("k", 10)
        q.add_after("k", 3)
        q.add_after("k", 7)
        assert q.waiting() == {"k": 3.0}
        await q.get()
        return loop.time(), q.waiting()

    assert run(main) == (3.0, {})


def test_an_event_add_does_not_wait_for_a_parked_requeue(run):
    async def main():
        loop = asyncio.get_running_loop()
        q = RateLimitingQueue(name="t")
        q.add_after("k", 30)
        q.add("k")
        await q.get()
        return loop.time()

    assert run(main) == 0.0


def test_shut_down_hands_out_what_is_queued_then_none_and_refuses_adds(run):
    async def main():
        q = RateLimitingQueue(name="t")
        q.add("a")
        q.add_after("b", 5)
        q.shut_down()
        q.add("c")
        got = [await q.get(), await q.get()]
        await asyncio.sleep(10)
        return got, len(q), q.shutting_down(), q.waiting()

    got, length, down, parked = run(main)
    assert got == ["a", None]
    assert length == 0
    assert down is True
    assert parked == {}


def test_a_cancelled_getter_does_not_swallow_a_wakeup(run):
    async def main():
        q = RateLimitingQueue(name="t")
        g1 = asyncio.ensure_future(q.get())
        g2 = asyncio.ensure_future(q.get())
        await asyncio.sleep(0)
        q.add("a")
        g1.cancel()
        await asyncio.sleep(0)
        return await g2

    assert run(main) == "a"
