# SPDX-License-Identifier: Apache-2.0
"""Raw windows: LeapArray and Metric (ArrayMetric), with explicit times."""
import pytest

import libsw

T = 1_000_000


def test_leap_array_metric_type():
    la = libsw.LeapArray("sw.metric", 2, 1000)
    assert la.type_name == "sw.metric"
    assert la.fields == ("pass", "block", "exception", "success", "rt", "occupied_pass",
                         "would_block", "min_rt")
    assert (la.sample_count, la.interval_ms, la.window_length_ms) == (2, 1000, 500)
    assert la.time_index(T + 700) == 1 and la.window_start(T + 700) == T + 500
    la.add("pass", 3, now=T)
    la.add("pass", 2, now=T + 600)
    la.add("block", 1, now=T + 600)
    la.add("rt", 40, now=T + 600)
    la.add("min_rt", 40, now=T + 600)
    assert la.sum("pass", now=T + 600) == 5
    assert la.sum("pass", now=T + 1100) == 2  # the first window left the interval
    ws = la.windows(now=T + 600)
    assert [w.start_ms for w in ws] == [T, T + 500]
    assert ws[1].values["pass"] == 2 and ws[1].values["block"] == 1 and ws[1].values["min_rt"] == 40
    w = la.current_window(now=T + 600)
    assert w.start_ms == T + 500 and w.length_ms == 500 and not w.detached
    assert la.previous_window(now=T + 600).start_ms == T
    assert la.window_value(T + 10).values["pass"] == 3
    assert la.is_window_deprecated(T + 1001, T) and not la.is_window_deprecated(T + 1000, T)
    assert len(la.all_windows()) == 2


def test_leap_array_clock_behind_gives_detached_window():
    la = libsw.LeapArray("sw.metric", 2, 1000)
    la.add("pass", 1, now=T + 2000)
    w = la.current_window(now=T)  # same slot, older time
    assert w.detached
    assert la.detached_count >= 1


def test_leap_array_errors():
    with pytest.raises(ValueError, match="sample_count=3"):
        libsw.LeapArray("sw.metric", 3, 1000)
    with pytest.raises(LookupError):
        libsw.LeapArray("no.such.type", 2, 1000)
    with pytest.raises(TypeError):
        libsw.LeapArray(b"sw.metric", 2, 1000)
    la = libsw.LeapArray("sw.metric", 2, 1000)
    with pytest.raises(ValueError, match="no field"):
        la.add("nope")
    with pytest.raises(ValueError):
        la.add("pass", 2**40, now=T)
    with pytest.raises(ValueError):
        la.add("pass", 1, now=-1)
    with pytest.raises(TypeError):
        la.add("pass", "1")


def test_leap_array_real_clock():
    la = libsw.LeapArray("sw.metric", 10, 1000)
    la.add("pass")
    assert la.sum("pass") in (0, 1)  # 1 unless a window boundary passed
    assert la.current_window().length_ms == 100


def test_metric_methods():
    m = libsw.Metric(2, 1000)
    m.add_pass(3, now=T)
    m.add_block(2, now=T)
    m.add_exception(1, now=T)
    m.add_success(4, now=T)
    m.add_rt(30, now=T)
    m.add_rt(10, now=T)
    m.add_occupied_pass(1, now=T)
    m.add_pass(5, now=T + 500)
    assert m.pass_(now=T + 500) == 8
    assert m.block(now=T + 500) == 2 and m.exception(now=T + 500) == 1
    assert m.success(now=T + 500) == 4 and m.rt(now=T + 500) == 40
    assert m.occupied_pass(now=T + 500) == 1
    assert m.min_rt(now=T + 500) == 10
    assert m.max_success(now=T + 500) == 4
    assert m.window_pass(now=T) == 3 and m.window_pass(now=T + 500) == 5
    assert m.previous_window_pass(now=T + 500) == 3
    assert m.previous_window_block(now=T + 500) == 2
    assert m.sum("pass", now=T + 500) == 8
    assert m.waiting(now=T) == 0
    recs = m.details(now=T + 500)
    assert [(r.start_ms, r.pass_) for r in recs] == [(T, 3), (T + 500, 5)]
    assert recs[0].as_dict()["min_rt"] == 10
    assert m.sample_count == 2 and m.interval_sec == 1.0
    assert m.leap_array.sum("pass", now=T + 500) == 8
    ok, before = m.try_pass(2, 10, now=T + 500)
    assert ok and before == 8
    ok, before = m.try_pass(1, 10, now=T + 500)
    assert not ok and before == 10


def test_metric_now_defaults_to_the_clock():
    m = libsw.Metric(1, 60000)
    m.add_pass(2)
    m.add_rt(5)
    assert m.pass_() == 2 and m.rt() == 5 and m.min_rt() == 5
    assert m.details()[0].pass_ == 2


def test_occupiable_metric_waiting():
    m = libsw.Metric(2, 1000, occupiable=True)
    m.add_waiting(T + 500, 2)
    assert m.waiting(now=T) == 2
    assert m.pass_(now=T + 500) == 2  # carried into the window when it starts
    with pytest.raises(libsw.NotSupportedError):
        libsw.Metric(2, 1000).add_waiting(T + 500, 1)


def test_sliding_view():
    m = libsw.Metric(20, 10000)
    for i in range(10):
        m.add_pass(i + 1, now=T + i * 500)
    v = m.view(2, 1000)
    assert v.sum("pass", now=T + 4500) == 9 + 10
    assert v.qps("pass", now=T + 4500) == 19.0
    assert v.max_of_single_bucket("pass", now=T + 4500) == 10
    with pytest.raises(ValueError):
        m.view(3, 1000)


def test_metric_errors():
    with pytest.raises(ValueError, match="interval"):
        libsw.Metric(2, 0)
    with pytest.raises(TypeError):
        libsw.Metric("2", 1000)
    m = libsw.Metric(2, 1000)
    with pytest.raises(ValueError):
        m.add_pass(-1, now=T)
    with pytest.raises(ValueError):
        m.add_pass(1, now=2**64)
    m.close()
    with pytest.raises(libsw.ClosedError):
        m.pass_()


def test_limiter_metrics_are_live_views(clock):
    lim = libsw.RateLimiter(100, clock=clock)
    sec = lim.second_metric()
    lim.acquire(3).release()
    assert sec.pass_(now=clock()) == 3
    assert lim.minute_metric().pass_(now=clock()) == 3
    del lim  # the view keeps the limiter's memory alive
    assert sec.pass_(now=clock()) == 3
