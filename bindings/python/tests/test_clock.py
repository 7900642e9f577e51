# SPDX-License-Identifier: Apache-2.0
"""libsw's clocks from Python: the window clock (coarse by default), the
duration clock that times responses and pacing, and the choice of either."""
import asyncio
import time

import pytest

import libsw


def _busy(ms):
    """Spin for at least ms milliseconds of the duration clock."""
    t0 = libsw.now_ns()
    while libsw.now_ns() - t0 < ms * 1_000_000:
        pass


COARSE = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)  # (Linux's number; Python names it not)


def _tick():
    return max(time.clock_getres(COARSE), 0.001)


@pytest.fixture
def default_clock():
    yield
    libsw.use_clock("default")


def test_now_ns_is_clock_monotonic():
    a = libsw.now_ns()
    m = time.monotonic_ns()
    b = libsw.now_ns()
    assert 0 < a <= b
    assert abs(m - a) < 1_000_000_000  # both CLOCK_MONOTONIC


def test_the_default_window_clock_is_coarse_and_never_ahead():
    ms = libsw.now_ms()
    ns = libsw.now_ns()
    assert 0 <= ns // 1_000_000 - ms < 100  # behind by a tick and the kernel's delay
    assert libsw.clock_resolution() == pytest.approx(_tick())


def test_use_clock(default_clock):
    libsw.use_clock("monotonic")
    assert libsw.clock_resolution() == 0.001
    a = libsw.now_ms()
    assert abs(libsw.now_ns() // 1_000_000 - a) <= 1
    libsw.use_coarse_clock()
    assert libsw.clock_resolution() == pytest.approx(_tick())
    libsw.use_coarse_clock(False)
    assert libsw.clock_resolution() == 0.001
    libsw.use_clock()
    assert libsw.clock_resolution() >= 0.001
    with pytest.raises(ValueError, match="'precise' is not one of coarse, default, monotonic"):
        libsw.use_clock("precise")


# Response times: every form times its call with the duration clock. Each
# call below spins 1.2 ms: its RT (whole ms, what it adds to the RT sum) is
# at least 1, and at most what the clock read around the call. Differences
# of the coarse window clock would give 0 for most calls and 4 for the rest.

def _check_rts(rt_sum, call, n=10):
    """n calls of call(): each adds 1..(its time) ms to rt_sum()."""
    for _ in range(n):
        rt0 = rt_sum()
        before = libsw.now_ns()
        call()
        most = (libsw.now_ns() - before) // 1_000_000
        assert 1 <= rt_sum() - rt0 <= most


def test_rt_of_the_decorator_with_and_permits():
    lim = libsw.RateLimiter(1000)
    _check_rts(lim.minute_metric().rt, lim(lambda: _busy(1.2)))

    def with_form():
        with lim:
            _busy(1.2)

    _check_rts(lim.minute_metric().rt, with_form)

    for n in (1, 2):
        def permit_form():
            p = lim.try_acquire(n)
            _busy(1.2)
            p.release()

        _check_rts(lim.minute_metric().rt, permit_form)


def test_rt_of_a_keyed_permit():
    lim = libsw.RateLimiter(1000, capacity=16)

    def keyed_form():
        p = lim.try_acquire(key="k")
        _busy(1.2)
        p.release()

    _check_rts(lambda: lim.keyed_stats().rt, keyed_form)


@pytest.mark.asyncio
async def test_rt_of_async_forms():
    lim = libsw.RateLimiter(1000)
    rt_sum = lim.minute_metric().rt

    @lim
    async def spin():
        _busy(1.2)

    async def async_with():
        async with lim:
            await asyncio.sleep(0)
            _busy(1.2)

    for call in (spin, async_with):
        for _ in range(10):
            rt0 = rt_sum()
            before = libsw.now_ns()
            await call()
            assert 1 <= rt_sum() - rt0 <= (libsw.now_ns() - before) // 1_000_000


def test_pacing_waits_on_the_duration_clock():
    """A pacer of 250/s spaces entries 4 ms apart on the duration clock: the
    second entry, 1.5 ms after the first, waits the 2.5 ms left (2 or 3 ms,
    to the nearest ms). Paced on the coarse window clock it would wait 4 ms
    (the clock has not moved) or 0 (a tick has passed)."""
    waits = []
    for _ in range(5):
        lim = libsw.RateLimiter(250, behavior="pacing", sleep=lambda s: None)
        lim.acquire().release()
        t = libsw.now_ns()
        _busy(1.5)
        p = lim.acquire()
        elapsed_ms = (libsw.now_ns() - t) / 1e6
        p.release()
        if elapsed_ms < 2:  # not preempted
            waits.append(round(p.waited * 1000))
    assert any(w in (2, 3) for w in waits), waits
