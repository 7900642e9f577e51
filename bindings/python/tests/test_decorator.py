# SPDX-License-Identifier: Apache-2.0
"""The limiter as a decorator of sync and async functions."""
import asyncio
import math

import pytest

import libsw
from conftest import T0


def test_sync_decorator_reject_sequence(clock):
    lim = libsw.RateLimiter(10, name="api", clock=clock)
    calls = []

    @lim
    def handler(x, *, y=0):
        calls.append(x)
        return x + y

    assert [handler(i, y=1) for i in range(10)] == list(range(1, 11))
    clock.advance(200)
    with pytest.raises(libsw.BlockedError) as ei:
        handler(99)
    assert ei.value.retry_after == pytest.approx(0.8)
    assert ei.value.resource == "api"
    assert 99 not in calls  # a blocked call never runs
    clock.set(T0 + 1000)
    assert [handler(i) for i in range(10)] == list(range(10))
    with pytest.raises(libsw.BlockedError):
        handler(0)
    s = lim.stats()
    assert s.pass_qps == 10 and s.block_qps == 1 and s.success_qps == 10


def test_decorator_keeps_metadata():
    lim = libsw.RateLimiter(100)

    @lim
    def documented(a, b=2):
        """doc"""
        return a * b

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "doc"
    assert documented.__wrapped__(3) == 6
    assert documented.limiter is lim
    assert documented(4) == 8


def test_decorator_on_methods(clock):
    lim = libsw.RateLimiter(2, clock=clock)

    class Service:
        @lim
        def call(self, v):
            return v

    s = Service()
    assert s.call(1) == 1 and s.call(2) == 2
    with pytest.raises(libsw.BlockedError):
        s.call(3)


def test_exceptions_are_recorded_and_propagate(clock):
    lim = libsw.RateLimiter(100, clock=clock)

    @lim
    def fails():
        clock.advance(7)
        raise KeyError("boom")

    @lim
    def works():
        clock.advance(30)
        return "ok"

    with pytest.raises(KeyError):
        fails()
    assert works() == "ok"
    s = lim.stats()
    assert s.pass_qps == 2
    assert s.exception_qps == 1
    assert s.success_qps == 2  # Sentinel counts every completion as a success
    assert s.min_rt == 7
    assert s.avg_rt == pytest.approx((7 + 30) / 2)
    assert s.concurrency == 0


def test_idle_min_rt_is_none_and_rts_are_milliseconds():
    """No request completed: no minimum (not libsw's 5000 ms "no sample");
    response times in milliseconds, as in C, Lua and swctl."""
    clock = libsw.ManualClock(1_000_000)
    lim = libsw.RateLimiter(10, clock=clock)
    assert lim.stats().min_rt is None and lim.stats().avg_rt == 0
    p = lim.acquire()
    clock.advance(250)
    p.release()
    s = lim.stats()
    assert (s.min_rt, s.avg_rt) == (250, 250)
    lim.close()


def test_rt_is_measured_with_the_real_clock():
    """Without clock=, the decorator's fast path times the call in C with
    libsw's duration clock (now_ns): the RT, in whole ms, lies between the
    clock readings inside the call and those around it (no assumption about
    how long a sleep takes)."""
    lim = libsw.RateLimiter(100)
    inner = []

    @lim
    def slow():
        t0 = libsw.now_ns()
        while libsw.now_ns() - t0 < 3_000_000:  # until the clock has moved 3 ms
            pass
        inner.append((t0, libsw.now_ns()))

    before = libsw.now_ns()
    slow()
    after = libsw.now_ns()
    s = lim.stats()
    (t0, t1), = inner
    assert (t1 - t0) // 1_000_000 <= s.avg_rt <= (after - before) // 1_000_000
    assert s.min_rt == s.avg_rt and s.success_qps == 1


def test_decorating_a_non_callable():
    with pytest.raises(TypeError):
        libsw.RateLimiter(1)(42)


@pytest.mark.asyncio
async def test_async_decorator(clock):
    lim = libsw.RateLimiter(3, name="async", clock=clock)

    @lim
    async def handler(x):
        await asyncio.sleep(0)
        return x * 2

    assert asyncio.iscoroutinefunction(handler)
    assert [await handler(i) for i in range(3)] == [0, 2, 4]
    with pytest.raises(libsw.BlockedError) as ei:
        await handler(1)
    assert ei.value.resource == "async"
    assert ei.value.retry_after == pytest.approx(1.0)
    clock.advance(1000)
    assert await handler(5) == 10


@pytest.mark.asyncio
async def test_async_exceptions_recorded(clock):
    lim = libsw.RateLimiter(10, clock=clock)

    @lim
    async def fails():
        clock.advance(5)
        raise ValueError("x")

    for _ in range(3):
        with pytest.raises(ValueError):
            await fails()
    s = lim.stats()
    assert s.exception_qps == 3 and s.pass_qps == 3 and s.avg_rt == 5 and s.concurrency == 0


@pytest.mark.asyncio
async def test_async_concurrency_limit_across_tasks():
    lim = libsw.RateLimiter(concurrency=2)
    running = []
    peak = []

    @lim
    async def job():
        running.append(1)
        peak.append(len(running))
        await asyncio.sleep(0.01)
        running.pop()

    results = await asyncio.gather(*(job() for _ in range(5)), return_exceptions=True)
    blocked = [r for r in results if isinstance(r, libsw.BlockedError)]
    assert len(blocked) == 3 and max(peak) == 2
    assert lim.stats().concurrency == 0


def test_concurrency_retry_after_is_finite():
    lim = libsw.RateLimiter(concurrency=1)
    with lim:
        with pytest.raises(libsw.BlockedError) as ei:
            with lim:
                pass
    assert 0 < ei.value.retry_after < math.inf
