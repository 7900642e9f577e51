# SPDX-License-Identifier: Apache-2.0
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
    # The real clock's path really sleeps (time.sleep): no upper bound on
    # durations, which a loaded machine stretches; a sleep never ends early.
    lim = libsw.RateLimiter(1, windows=10, block=True, timeout=0.05)
    lim.acquire().release()
    with pytest.raises(libsw.BlockedError):
        lim.acquire()
    t = time.monotonic()
    p = lim.acquire(timeout=3)  # waits for the window of the first pass to leave
    waited = time.monotonic() - t
    p.release()
    assert p.waited > 0 and waited >= p.waited * 0.9


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
async def test_async_blocking_uses_asyncio_sleep(monkeypatch):
    """A coroutine waits with asyncio.sleep (the default), never time.sleep:
    the loop runs other tasks meanwhile. Time is explicit: the patched
    asyncio.sleep advances a manual clock and yields to the loop."""
    mc = libsw.ManualClock(10_000_000)
    waits = []
    real_sleep = asyncio.sleep

    async def fake_asyncio_sleep(seconds, *args):
        await real_sleep(0)  # the loop runs the other task, then the time passes
        if seconds:
            waits.append(seconds)
            mc.advance(int(round(seconds * 1000)))

    def no_time_sleep(seconds):
        raise AssertionError("time.sleep(%r) in a coroutine" % (seconds,))

    monkeypatch.setattr(asyncio, "sleep", fake_asyncio_sleep)
    monkeypatch.setattr(time, "sleep", no_time_sleep)
    # a plain callable clock: no sleep methods, so the defaults are used
    lim = libsw.RateLimiter(1, windows=10, block=True, timeout=3, clock=lambda: mc())
    ran = []

    async def other():
        for _ in range(5):
            ran.append(mc())
            await real_sleep(0)

    @lim
    async def job():
        return mc()

    first = await job()
    task = asyncio.ensure_future(other())
    second = await job()  # refused: retried after retry_after, with asyncio.sleep
    await task
    assert second - first == 1000  # the first pass leaves the 1 s window
    assert sum(waits) == pytest.approx(1.0) and all(w > 0 for w in waits)
    assert len(ran) == 5 and min(ran) < second  # the other task ran during the wait


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
async def test_cancelled_wait_ends_the_entry(clock):
    """An admitted entry that must wait (pacing) and is cancelled while
    waiting is ended, as an exception: nothing stays in flight for it."""
    started = asyncio.Event()

    async def wait_forever(seconds):
        started.set()
        await asyncio.Event().wait()

    lim = libsw.RateLimiter(10, behavior="pacing", clock=clock, async_sleep=wait_forever)
    await lim.acquire_async()  # passes at once; never released: one in flight
    task = asyncio.ensure_future(lim.acquire_async())  # 100 ms after it: waits
    await started.wait()
    assert lim.stats().concurrency == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    s = lim.stats()
    assert s.concurrency == 1 and s.exception_qps == 1  # the cancelled one was ended
    assert s.pass_qps == 2


def test_closed_while_waiting(clock):
    lim = libsw.RateLimiter(1, clock=clock, block=True)

    def sleep_and_close(seconds):
        clock.sleep(seconds)
        lim.close()

    lim._sleep = sleep_and_close
    lim.acquire().release()
    with pytest.raises(libsw.ClosedError):
        lim.acquire()
