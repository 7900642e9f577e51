"""with lim: / async with lim: and the Permit API."""
import asyncio

import pytest

import libsw


def test_with_statement(clock):
    lim = libsw.RateLimiter(2, clock=clock)
    with lim:
        clock.advance(10)
    with lim as same:
        assert same is lim
    with pytest.raises(libsw.BlockedError):
        with lim:
            pytest.fail("entered a blocked limiter")
    s = lim.stats()
    assert s.pass_qps == 2 and s.block_qps == 1 and s.concurrency == 0


def test_with_records_exception(clock):
    lim = libsw.RateLimiter(5, clock=clock)
    with pytest.raises(RuntimeError):
        with lim:
            raise RuntimeError
    assert lim.stats().exception_qps == 1


def test_nested_with_of_one_and_two_limiters():
    a = libsw.RateLimiter(concurrency=3)
    b = libsw.RateLimiter(concurrency=3)
    with a:
        with b:
            with a:
                assert a.stats().concurrency == 2 and b.stats().concurrency == 1
            assert a.stats().concurrency == 1
        assert b.stats().concurrency == 0
    assert a.stats().concurrency == 0


def test_exit_without_enter():
    lim = libsw.RateLimiter(1)
    with pytest.raises(RuntimeError):
        lim.__exit__(None, None, None)


@pytest.mark.asyncio
async def test_async_with_interleaved_tasks():
    a = libsw.RateLimiter(concurrency=10)
    b = libsw.RateLimiter(concurrency=10)

    async def task(first, second):
        async with first:
            await asyncio.sleep(0.001)
            async with second:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.001)

    await asyncio.gather(*(task(a, b) if i % 2 else task(b, a) for i in range(8)))
    assert a.stats().concurrency == 0 and b.stats().concurrency == 0
    assert a.stats().pass_qps == 8 and b.stats().pass_qps == 8


@pytest.mark.asyncio
async def test_async_with_blocked():
    lim = libsw.RateLimiter(concurrency=1)
    async with lim:
        with pytest.raises(libsw.BlockedError):
            async with lim:
                pass
    async with lim:
        pass


def test_acquire_returns_permit(clock):
    lim = libsw.RateLimiter(5, clock=clock)
    p = lim.acquire(2)
    assert p and p.admitted and p.n == 2 and p.remaining == 3
    clock.advance(12)
    p.release()
    p.release()  # a second release does nothing
    assert not p.active
    with lim.acquire(3) as p2:
        assert p2.remaining == 0
    with pytest.raises(libsw.BlockedError):
        lim.acquire()
    s = lim.stats()
    assert s.pass_qps == 5 and s.success_qps == 5 and s.concurrency == 0


def test_try_acquire(clock):
    lim = libsw.RateLimiter(1, clock=clock)
    p = lim.try_acquire()
    assert p
    q = lim.try_acquire()
    assert not q and q.retry_after == pytest.approx(1.0)
    q.release()  # harmless on a refused permit
    p.release(error=True)
    assert lim.stats().exception_qps == 1
    if lim.try_acquire():  # usable as a plain bool
        pytest.fail("admitted twice")


def test_try_acquire_more_than_threshold_never_passes(clock):
    lim = libsw.RateLimiter(3, clock=clock)
    p = lim.try_acquire(4)
    assert not p and p.retry_after == float("inf")
    with pytest.raises(libsw.BlockedError) as ei:
        lim.acquire(4, block=True, timeout=10)
    assert ei.value.retry_after == float("inf")


@pytest.mark.asyncio
async def test_acquire_async(clock):
    lim = libsw.RateLimiter(1, clock=clock)
    p = await lim.acquire_async()
    async with p:
        pass
    q = await lim.try_acquire_async()
    assert not q
    with pytest.raises(libsw.BlockedError):
        await lim.acquire_async()
