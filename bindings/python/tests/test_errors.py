# SPDX-License-Identifier: Apache-2.0
"""Misuse never crashes: clear ValueError / TypeError with the C message."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import libsw


def test_exactly_one_of_qps_and_concurrency():
    with pytest.raises(TypeError):
        libsw.RateLimiter()
    with pytest.raises(TypeError):
        libsw.RateLimiter(1, concurrency=1)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(qps=1e300), ValueError, "SW_OPT_THRESHOLD=1.*outside"),
        (dict(qps=-1), ValueError, "SW_OPT_THRESHOLD=-1 is outside"),
        (dict(qps=math.nan), ValueError, "not a number"),
        (dict(qps=10**400), ValueError, "too large"),
        (dict(qps="10"), TypeError, "number"),
        (dict(qps=True), TypeError, "number"),
        (dict(qps=10, behavior="fast"), ValueError, "behavior"),
        (dict(qps=10, behavior=2), TypeError, "behavior"),
        (dict(concurrency=3, behavior="pacing"), ValueError, "needs SW_OPT_GRADE"),
        (dict(qps=10, windows=3), ValueError, "sample_count=3 does not divide"),
        (dict(qps=10, windows=0), ValueError, "windows"),
        (dict(qps=10, windows=1.5), TypeError, "windows"),
        (dict(qps=10, interval=-1), ValueError, "interval"),
        (dict(qps=10, cold_factor=1, behavior="warm_up"), ValueError, "SW_OPT_COLD_FACTOR=1"),
        (dict(qps=10, warm_up=0, behavior="warm_up"), ValueError, "SW_OPT_WARM_UP_SEC=0"),
        (dict(qps=0.1, warm_up=1, behavior="warm_up"), ValueError, "no warm-up range"),
        (dict(qps=10, max_queue=1e300), ValueError, "SW_OPT_MAX_QUEUE_MS"),
        (dict(qps=10, max_queue=math.inf), ValueError, "SW_OPT_MAX_QUEUE_MS"),
        (dict(qps=10, capacity=0), ValueError, "capacity"),
        (dict(qps=10, capacity=2**40), ValueError, "capacity"),
        (dict(qps=10, stripes=3), ValueError, "stripes|SW_OPT_STRIPES"),
        (dict(qps=10, strict="yes"), TypeError, "strict"),
        (dict(qps=10, name=5), TypeError, "name"),
        (dict(qps=10, on_full="drop"), ValueError, "on_full"),
        (dict(qps=10, on_full="shared"), ValueError, "on_full='shared' is for keys in a registry"),
        (dict(qps=10, behavior="warm_up", on_full="evict"), ValueError, "on_full='evict' needs a keyed"),
        (dict(qps=10, key_bytes=8), ValueError, "key_bytes"),
        (dict(qps=10, names=-1, segment="x"), ValueError, "names"),
        (dict(qps=10, behavior="warm_up", names=0, segment="x"), ValueError, "names=0"),
        (dict(qps=10, names=8), TypeError, "names= .* needs segment="),
        (dict(qps=10, timeout=-1), ValueError, "timeout"),
    ],
)
def test_bad_construction(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        libsw.RateLimiter(**kwargs)


def test_c_errors_carry_code_and_message():
    with pytest.raises(libsw.ArgumentError) as ei:
        libsw.RateLimiter(1e300)
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, libsw.Error)
    assert e.code == libsw.lib.SW_ERANGE and e.code_name == "SW_ERANGE"
    assert "SW_OPT_THRESHOLD" in str(e)


@pytest.mark.parametrize("n, exc", [(2**40, ValueError), (2**70, ValueError), (-1, ValueError),
                                    ("1", TypeError), (1.0, TypeError), (None, TypeError), (True, TypeError)])
def test_bad_units(n, exc):
    lim = libsw.RateLimiter(10)
    with pytest.raises(exc):
        lim.acquire(n)
    with pytest.raises(exc):
        lim.try_acquire(n)


def test_huge_n_message():
    with pytest.raises(ValueError, match="n=1099511627776 is outside"):
        libsw.RateLimiter(10).acquire(2**40)


def test_use_after_close():
    lim = libsw.RateLimiter(10)

    @lim
    def f():
        return 1

    assert f() == 1
    p = lim.acquire()
    lim.close()
    lim.close()  # idempotent
    assert lim.closed
    p.release()  # an entry admitted before close ends safely
    for call in (f, lim.acquire, lim.try_acquire, lim.stats, lim.rule, lambda: lim.for_key("a"),
                 lim.second_metric, lim.__enter__):
        with pytest.raises(libsw.ClosedError, match="closed"):
            call()
    assert isinstance(libsw.ClosedError("x"), ValueError)


@pytest.mark.asyncio
async def test_use_after_close_async():
    lim = libsw.RateLimiter(10)

    @lim
    async def f():
        return 1

    lim.close()
    with pytest.raises(libsw.ClosedError):
        await f()
    with pytest.raises(libsw.ClosedError):
        async with lim:
            pass


def test_close_while_inside():
    lim = libsw.RateLimiter(10)

    @lim
    def f():
        lim.close()  # the running call keeps its handle alive
        return 2

    assert f() == 2
    with pytest.raises(libsw.ClosedError):
        f()


def test_segment_errors(tmp_path, shm_name):
    junk = tmp_path / "junk"
    junk.write_bytes(b"x" * 4096)
    with pytest.raises(libsw.SegmentError, match="not a libsw segment"):
        libsw.RateLimiter(1, segment=str(junk), capacity=2)
    libsw.RateLimiter(1, segment=shm_name, capacity=2)
    with pytest.raises(ValueError, match="holds 2 keys"):  # SW_EGEOMETRY of the keyed table
        libsw.RateLimiter(1, segment=shm_name, capacity=3)
    with pytest.raises(ValueError, match="names"):  # ... and of the segment of names
        libsw.RateLimiter(1, segment=shm_name, capacity=2, names=3)
    with pytest.raises(ValueError, match="geometry"):
        libsw.RateLimiter(1, segment=shm_name, capacity=2, windows=4)
    # reset=True replaces it with a new segment of the new geometry
    libsw.RateLimiter(1, segment=shm_name, capacity=3, reset=True)
    with pytest.raises(TypeError):
        libsw.RateLimiter(1, segment=42)
    with pytest.raises(ValueError, match="name"):
        libsw.RateLimiter(1, segment=shm_name, capacity=3, name="n" * 80)
    with pytest.raises(ValueError):
        libsw.RateLimiter(1, segment="a\0b")


def test_stats_now_checked():
    lim = libsw.RateLimiter(1)
    with pytest.raises(ValueError):
        lim.stats(now=-5)
    with pytest.raises(TypeError):
        lim.stats(now="0")


def _valid_threshold(v):
    return not (isinstance(v, float) and math.isnan(v)) and 0 <= v <= 10**15


@settings(max_examples=200, deadline=None)
@given(
    qps=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70)),
    n=st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=2)),
    behavior=st.sampled_from(["reject", "pacing", "warm_up", "warm_up_pacing"]),
)
def test_fuzz_construction_and_first_entry(qps, n, behavior):
    """Any qps and n: the limiter is made exactly when the threshold is in
    0..1e15 (a warm-up may also refuse a threshold it cannot ramp), and the
    first entry of n units passes or is refused exactly as the rule says,
    with the statistics to match; bad values raise naming themselves."""
    try:
        lim = libsw.RateLimiter(qps, behavior=behavior, clock=lambda: 5_000_000)
    except libsw.ArgumentError as e:
        assert not _valid_threshold(qps) or behavior.startswith("warm_up"), (qps, behavior, str(e))
        assert "qps" in str(e) or "WARM" in str(e) or "COLD" in str(e), str(e)
        return
    assert _valid_threshold(qps), qps
    assert lim.rule()["threshold"] == float(qps)
    if isinstance(n, bool) or not isinstance(n, int):
        with pytest.raises(TypeError, match="n must be an int"):
            lim.try_acquire(n)
        return
    if not 0 <= n <= 2**31 - 1:
        with pytest.raises(ValueError, match="n=%d" % n):
            lim.try_acquire(n)
        assert lim.stats().total_qps == 0
        return
    p = lim.try_acquire(n)
    s = lim.stats()
    if p:
        assert s.pass_qps == n and s.block_qps == 0 and s.concurrency == 1
        p.release()
        assert lim.stats().concurrency == 0 and lim.stats().success_qps == n
    else:
        assert s.pass_qps == 0 and s.block_qps == n and p.retry_after > 0
    if behavior == "reject":  # Sentinel's check: pass + n <= threshold
        assert bool(p) == (n <= qps), (qps, n)


def test_decorated_before_close_then_closed():
    lim = libsw.RateLimiter(10)

    @lim
    def f():
        return 1

    @lim
    async def g():
        return 2

    f()
    lim.close()
    with pytest.raises(libsw.ClosedError):
        f()
    with pytest.raises(libsw.ClosedError):
        lim(lambda: 3)  # decorating a closed limiter
    import asyncio

    with pytest.raises(libsw.ClosedError):
        asyncio.run(g())


@settings(max_examples=150, deadline=None)
@given(
    sample_count=st.integers(-5, 70),
    interval_ms=st.one_of(st.integers(-10, 10**6), st.integers(-(2**63), 2**63 - 1)),
    now=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 10**7), min_size=1, max_size=5),
    n=st.integers(-(2**40), 2**40),
)
def test_fuzz_windows(sample_count, interval_ms, now, n):
    """Any geometry, times and counts: a metric is made exactly for a valid
    geometry; a bad time or count raises naming it; at a time that does not
    go backwards, what was added is counted, and every view agrees."""
    valid = sample_count > 0 and interval_ms > 0 and interval_ms % sample_count == 0
    try:
        m = libsw.Metric(sample_count, interval_ms)
    except libsw.ArgumentError as e:
        assert not valid, (sample_count, interval_ms, str(e))
        assert "sample_count" in str(e) or "interval" in str(e), str(e)
        return
    assert valid
    la = m.leap_array
    n_ok = 0 <= n <= 2**31 - 1
    for t in sorted(now):  # time never goes backwards here
        if t < 0:
            for call in (lambda: m.add_pass(1, now=t), lambda: m.pass_(now=t),
                         lambda: la.windows(now=t), lambda: m.try_pass(1, 1, now=t)):
                with pytest.raises(ValueError, match="time|now"):
                    call()
            continue
        before = m.pass_(now=t)
        if not n_ok:
            with pytest.raises(ValueError, match="n="):
                m.add_pass(n, now=t)
            with pytest.raises(ValueError, match="n="):
                m.try_pass(n, n, now=t)
            assert m.pass_(now=t) == before
            continue
        m.add_pass(n, now=t)
        total = m.pass_(now=t)
        assert total == min(before + n, 2**63 - 1)
        assert la.sum("pass", now=t) == total
        assert sum(r.pass_ for r in m.details(now=t)) == total
        assert m.window_pass(now=t) >= n
        passed, seen = m.try_pass(1, total, now=t)  # the window already holds total
        assert (passed, seen) == (False, total)
        assert m.min_rt(now=t) >= 0
