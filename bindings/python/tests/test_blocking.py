"""Opt-in waiting: block=True retries a refusal after retry_after until the timeout."""
import asyncio
import time

import pytest

import libsw


def test_block_retries_with_manual_clock(clock):
    lim = libsw.RateLimiter(2, clock=clock, block=True)

    @lim
    def f():
        return clock()

    t = [f() for _ in range(5)]
    # 2 pass at once; the third waits for the interval to move on (1 s) ...
    assert t[0] == t[1] and t[2] - t[0] == 1000
    assert clock.sleeps[0] == pytest.approx(1.0)


def test_block_timeout_manual_clock(clock):
    lim = libsw.RateLimiter(1, clock=clock, block=True, timeout=0.5)
    lim.acquire().release()
    with pytest.raises(libsw.BlockedError) as ei:
        lim.acquire()
    assert ei.value.retry_after == pytest.approx(1.0)
    assert clock.sleeps == []  # the retry would exceed the timeout: no sleep
    p = lim.acquire(timeout=2)  # a per-call timeout
    assert p.waited == pytest.approx(1.0)


def test_block_timeout_real_clock():
    lim = libsw.RateLimiter(1, windows=10, block=True, timeout=0.05)
    lim.acquire().release()
    t = time.monotonic()
    with pytest.raises(libsw.BlockedError):
        lim.acquire()
    assert time.monotonic() - t < 0.5
    t = time.monotonic()
    p = lim.acquire(timeout=3)  # waits for the window of the first pass to leave
    waited = time.monotonic() - t
    p.release()
    assert 0.05 < waited < 2.0 and p.waited > 0


def test_per_call_block_override(clock):
    lim = libsw.RateLimiter(1, clock=clock)  # raises by default
    lim.acquire().release()
    with pytest.raises(libsw.BlockedError):
        lim.acquire()
    assert lim.acquire(block=True).waited == pytest.approx(1.0)


def test_block_false_on_blocking_limiter(clock):
    lim = libsw.RateLimiter(1, clock=clock, block=True)
    lim.acquire().release()
    with pytest.raises(libsw.BlockedError):
        lim.acquire(block=False)
    assert not lim.try_acquire()  # try_acquire never waits for a refusal


@pytest.mark.asyncio
async def test_async_blocking_uses_asyncio_sleep():
    lim = libsw.RateLimiter(1, windows=10, block=True, timeout=3)
    ticks = []

    async def ticker():
        for _ in range(20):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    @lim
    async def job():
        return time.monotonic()

    await job()
    t = time.monotonic()
    task = asyncio.ensure_future(ticker())
    done = await job()  # waits about 1 s, without blocking the loop
    await task
    assert done - t > 0.05
    assert len([x for x in ticks if t <= x <= done]) >= 3


@pytest.mark.asyncio
async def test_async_block_with_manual_clock(clock):
    lim = libsw.RateLimiter(1, clock=clock, block=True, timeout=5)

    @lim
    async def job():
        return clock()

    a = await job()
    b = await job()
    assert b - a == 1000


@pytest.mark.asyncio
async def test_cancelled_wait_ends_the_entry():
    lim = libsw.RateLimiter(10, behavior="pacing")  # the 2nd entry waits 100 ms
    await lim.acquire_async()  # never released: one in flight
    task = asyncio.ensure_future(lim.acquire_async())
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    s = lim.stats()
    assert s.concurrency == 1 and s.exception_qps == 1  # the cancelled one was ended


def test_closed_while_waiting(clock):
    lim = libsw.RateLimiter(1, clock=clock, block=True)

    def sleep_and_close(seconds):
        clock.sleep(seconds)
        lim.close()

    lim._sleep = sleep_and_close
    lim.acquire().release()
    with pytest.raises(libsw.ClosedError):
        lim.acquire()
