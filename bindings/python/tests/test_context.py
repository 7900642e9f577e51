# SPDX-License-Identifier: Apache-2.0
"""with lim: / async with lim: and the Permit API."""
import asyncio
import gc
import threading

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


# Each exit ends its own entry: `with` entries are matched by the thread's
# current context (an asyncio task's, a greenlet's, the thread's). In the
# timelines below A enters at 0, B at 5, A exits at 7 and B at 20: RTs 7 and
# 15. Ending the latest entry of the limiter instead would give 2 and 20.

@pytest.mark.asyncio
@pytest.mark.parametrize("form", ["async with", "with"])
async def test_interleaved_tasks_each_end_their_own_entry(clock, form):
    lim = libsw.RateLimiter(concurrency=10, clock=clock)
    a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hold(entered, until, ms):
        if form == "with":
            with lim:
                entered.set()
                await until.wait()
                clock.advance(ms)
        else:
            async with lim:
                entered.set()
                await until.wait()
                clock.advance(ms)

    async def a():
        await hold(a_in, b_in, 2)
        a_out.set()

    async def b():
        await a_in.wait()
        clock.advance(5)
        await hold(b_in, a_out, 13)

    await asyncio.gather(a(), b())
    s = lim.stats()
    assert (s.min_rt, s.avg_rt, s.concurrency) == (7, 11, 0)


def test_interleaved_greenlets_each_end_their_own_entry(clock):
    greenlet = pytest.importorskip("greenlet")
    lim = libsw.RateLimiter(concurrency=10, clock=clock)

    def a():
        with lim:
            gb.switch()
            clock.advance(2)

    def b():
        clock.advance(5)
        with lim:
            ga.switch()
            clock.advance(13)

    ga, gb = greenlet.greenlet(a), greenlet.greenlet(b)
    ga.switch()  # a enters, b enters, a exits
    gb.switch()  # b exits
    s = lim.stats()
    assert (s.min_rt, s.avg_rt, s.concurrency) == (7, 11, 0)


def test_with_in_new_threads():
    """A new thread has no context until it uses one: its first `with` makes it."""
    lim = libsw.RateLimiter(concurrency=8)  # 4 threads, 2 nested each: never blocked
    seen = []

    def run():
        with lim:
            with lim:
                seen.append(lim.stats().concurrency >= 2)

        async def co():
            async with lim:
                seen.append(lim.stats().concurrency >= 1)

        asyncio.run(co())

    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == [True] * 8 and lim.stats().concurrency == 0


def test_exit_in_another_thread_finds_no_entry():
    lim = libsw.RateLimiter(concurrency=2)
    lim.__enter__()
    errors = []

    def other():
        try:
            lim.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and lim.stats().concurrency == 1
    lim.__exit__(None, None, None)
    assert lim.stats().concurrency == 0


def test_close_inside_with():
    lim = libsw.RateLimiter(concurrency=1)
    with lim:
        lim.close()  # the exit ends the entry on the handle it entered
    with pytest.raises(libsw.ClosedError):
        with lim:
            pass


def test_with_waits_for_pacing(clock):
    lim = libsw.RateLimiter(10, behavior="pacing", clock=clock)
    for _ in range(3):
        with lim:
            pass
    assert clock.sleeps == [0.1, 0.1]
    real = libsw.RateLimiter(200, behavior="pacing")
    for _ in range(3):
        with real:
            pass
    assert real.stats().pass_qps == 3 and real.stats().concurrency == 0


def test_permit_of_the_fast_path():
    lim = libsw.RateLimiter(5)
    p = lim.try_acquire()
    assert p and p.active and p.admitted and p.n == 1 and p.limiter is lim
    assert (p.waited, p.borrowed, p.would_block, p.retry_after) == (0.0, False, False, 0.0)
    assert p.remaining == 4
    q = lim.try_acquire(1, key=None)
    assert q.remaining == 3
    p.release()
    assert not p.active and p.remaining == 4 and "released" in repr(p)
    q.release(True)
    lim.acquire().release(error=True)
    s = lim.stats()
    assert s.success_qps == 3 and s.exception_qps == 2 and s.concurrency == 0
    with pytest.raises(TypeError):
        p.release(bogus=1)
    with pytest.raises(TypeError):
        lim.try_acquire(True)  # a bool is not a number of units


def test_dry_run_permit_says_would_block():
    lim = libsw.RateLimiter(1, dry_run=True)
    assert not lim.try_acquire().would_block
    p = lim.try_acquire()
    assert p and p.would_block
    p.release()


def test_a_permit_released_by_two_threads_ends_once():
    lim = libsw.RateLimiter(concurrency=1000)
    for _ in range(100):
        p = lim.try_acquire()
        barrier = threading.Barrier(2)

        def release():
            barrier.wait()
            p.release()

        ts = [threading.Thread(target=release) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not p.active and p.remaining == 999
    assert lim.stats().concurrency == 0 and lim.minute_metric().success() == 100


def test_permits_released_in_other_threads_and_after_their_thread_ended():
    lim = libsw.RateLimiter(concurrency=1000)
    permits = []
    t = threading.Thread(target=lambda: permits.extend(lim.try_acquire() for _ in range(300)))
    t.start()
    t.join()
    assert lim.stats().concurrency == 300
    for p in permits:
        p.release()
    assert lim.stats().concurrency == 0
    for _ in range(300):  # the records come back to use
        lim.try_acquire().release()
    assert lim.minute_metric().success() == 600


def test_an_entry_never_exited_does_not_outlive_its_limiter():
    lim = libsw.RateLimiter(concurrency=5)
    lim.__enter__()
    del lim
    gc.collect()  # its site is freed: the next limiter may take its place
    lim2 = libsw.RateLimiter(concurrency=5)
    with pytest.raises(RuntimeError):
        lim2.__exit__(None, None, None)
    with lim2:
        assert lim2.stats().concurrency == 1
    assert lim2.stats().concurrency == 0
