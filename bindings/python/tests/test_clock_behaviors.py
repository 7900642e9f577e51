# SPDX-License-Identifier: Apache-2.0
"""Injected clock: every behaviour is deterministic (docs/limiters.md timelines)."""
import pytest

import libsw
from conftest import T0


def test_reject_timeline(clock):
    lim = libsw.RateLimiter(10, clock=clock)
    out = []
    for at, count in ((0, 12), (200, 1), (500, 10), (1000, 11), (1499, 1), (1500, 6)):
        clock.set(T0 + at)
        for _ in range(count):
            p = lim.try_acquire()
            out.append((at, bool(p), p.retry_after))
            if p:
                p.release()
    passes = [o for o in out if o[1]]
    blocks = [o for o in out if not o[1]]
    # t=0: 10 pass, 2 block (retry at 1000, when [0,500) leaves the interval);
    # t=200: block; t=500: all 10 blocked (the interval [0,1000) is full);
    # t=1000: 10 pass ([0,500) left); 1 block (retry at 2000, when [1000,1500)
    # leaves); t=1499: block; t=1500: [1000,2000) is full: blocks until 2000
    assert [o[0] for o in passes] == [0] * 10 + [1000] * 10
    assert blocks[0] == (0, False, pytest.approx(1.0))
    assert blocks[2] == (200, False, pytest.approx(0.8))
    assert blocks[3:13] == [(500, False, pytest.approx(0.5))] * 10
    assert blocks[13] == (1000, False, pytest.approx(1.0))
    assert blocks[14] == (1499, False, pytest.approx(0.501))
    assert blocks[15:] == [(1500, False, pytest.approx(0.5))] * 6


def test_same_run_twice_is_identical():
    def run():
        clk = libsw.ManualClock(T0)
        lim = libsw.RateLimiter(7, clock=clk, windows=4)
        seq = []
        for i in range(200):
            clk.advance(37)
            seq.append(bool(lim.try_acquire()))
        return seq

    assert run() == run()


def test_pacing_wait_times(clock):
    waits = []
    lim = libsw.RateLimiter(10, behavior="pacing", clock=clock, sleep=waits.append)
    permits = [lim.try_acquire() for _ in range(7)]
    assert [bool(p) for p in permits] == [True] * 6 + [False]
    assert waits == [0.1, 0.2, 0.3, 0.4, 0.5]  # every WAIT verdict is slept in Python
    assert [p.waited for p in permits[:6]] == [0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert permits[6].retry_after == pytest.approx(0.1)
    clock.advance(1000)
    assert lim.try_acquire().waited == 0


def test_pacing_with_a_sleeping_clock(clock):
    # ManualClock.sleep advances the clock: back-to-back calls are spaced 100 ms.
    lim = libsw.RateLimiter(10, behavior="pacing", clock=clock)

    @lim
    def tick():
        return clock()

    times = [tick() for _ in range(5)]
    assert [b - a for a, b in zip(times, times[1:])] == [100] * 4
    assert clock.sleeps == [0.1] * 4


def test_pacing_max_queue(clock):
    waits = []
    lim = libsw.RateLimiter(10, behavior="pacing", max_queue=0.2, clock=clock, sleep=waits.append)
    assert [bool(lim.try_acquire()) for _ in range(4)] == [True, True, True, False]
    assert waits == [0.1, 0.2]


def test_warm_up_starts_below_threshold(clock):
    lim = libsw.RateLimiter(10, behavior="warm_up", warm_up=10, cold_factor=3, clock=clock)
    per_second = []
    for _ in range(25):
        passed = 0
        for _ in range(20):
            p = lim.try_acquire()
            if p:
                passed += 1
                p.release()
            clock.advance(50)
        per_second.append(passed)
    assert per_second[0] == 3  # threshold / cold factor: 1 / (50 * 0.004 + 0.1) = 3.3
    assert all(a <= b for a, b in zip(per_second, per_second[1:]))
    assert per_second[-1] == 10


def test_warm_up_pacing_spacing(clock):
    waits = []
    lim = libsw.RateLimiter(10, behavior="warm_up_pacing", clock=clock, sleep=waits.append)
    assert [bool(lim.try_acquire()) for _ in range(3)] == [True, True, False]
    assert waits == [0.3]  # 300 ms apart when cold


def test_prioritized_borrows_from_next_window(clock):
    lim = libsw.RateLimiter(10, clock=clock, prioritized=True)
    for _ in range(10):
        lim.acquire().release()
    clock.advance(800)
    p = lim.acquire()
    assert p.borrowed and p.waited == pytest.approx(0.2)
    assert clock() == T0 + 1000  # the wait was slept (the ManualClock advanced)
    p.release()
    assert lim.stats().pass_qps == 1


def test_clock_values_are_checked():
    lim = libsw.RateLimiter(10, clock=lambda: -5)
    with pytest.raises(ValueError, match="negative"):
        lim.acquire()
    lim2 = libsw.RateLimiter(10, clock=lambda: 1.5)
    with pytest.raises(TypeError):
        lim2.acquire()
    with pytest.raises(TypeError):
        libsw.RateLimiter(10, clock=5)


def test_dry_run_lets_everything_through_and_says_so():
    clock = libsw.ManualClock(start_ms=1_000_000)
    lim = libsw.RateLimiter(qps=2, dry_run=True, clock=clock)
    permits = [lim.try_acquire() for _ in range(5)]
    assert all(permits)
    assert [p.would_block for p in permits] == [False, False, True, True, True]
    for p in permits:
        p.release()
    st = lim.stats()
    assert st.would_block_qps == 3 and st.block_qps == 0 and st.pass_qps == 5
    lim.set_dry_run(False)
    assert not lim.try_acquire()
    assert lim.stats().block_qps == 1
