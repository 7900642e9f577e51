# SPDX-License-Identifier: Apache-2.0
"""C calls release the GIL; counts stay exact and strict mode never overshoots."""
import threading

import pytest

import libsw
from conftest import T0
import _workers

N_THREADS = 8
M = 5000


def run_threads(n, target):
    barrier = threading.Barrier(n)
    errors = []

    def body(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("strict", [True, False])
def test_exact_counts_with_threads(clock, strict):
    lim = libsw.RateLimiter(1e12, clock=clock, strict=strict)  # all in one window

    @lim
    def work():
        pass

    run_threads(N_THREADS, lambda i: [work() for _ in range(M)])
    s = lim.stats()
    assert s.pass_qps == N_THREADS * M
    assert s.success_qps == N_THREADS * M
    assert s.concurrency == 0
    assert lim.second_metric().pass_(now=T0) == N_THREADS * M
    assert lim.minute_metric().pass_(now=T0) == N_THREADS * M


def test_exact_counts_real_clock():
    lim = libsw.RateLimiter(1e12)
    run_threads(4, lambda i: [lim.acquire().release() for _ in range(M)])
    assert lim.minute_metric().pass_() == 4 * M


def test_strict_never_overshoots_qps(clock):
    threshold = 1000
    lim = libsw.RateLimiter(threshold, clock=clock, strict=True)
    passed = [0] * N_THREADS

    def body(i):
        for _ in range(threshold):
            p = lim.try_acquire()
            if p:
                passed[i] += 1
                p.release()

    run_threads(N_THREADS, body)
    assert sum(passed) == threshold
    assert lim.stats().pass_qps == threshold
    assert lim.stats().block_qps == N_THREADS * threshold - threshold


def test_strict_never_overshoots_concurrency():
    limit = 3
    lim = libsw.RateLimiter(concurrency=limit, strict=True)
    inside = [0]
    peak = [0]
    lock = threading.Lock()

    def body(i):
        for _ in range(2000):
            p = lim.try_acquire()
            if not p:
                continue
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            with lock:
                inside[0] -= 1
            p.release()

    run_threads(N_THREADS, body)
    assert 1 <= peak[0] <= limit
    assert lim.stats().concurrency == 0


def test_other_threads_run_during_c_calls():
    # A smoke test: a thread calling C in a loop and a pure-Python thread
    # both make progress (the proof that calls release the GIL is
    # swpy_gil_held(), which runs PyGILState_Check() inside a C call).
    lim = libsw.RateLimiter(1e12)
    stop = threading.Event()
    progress = [0]

    def spinner():
        while not stop.is_set():
            progress[0] += 1

    t = threading.Thread(target=spinner)
    t.start()
    try:
        for _ in range(20000):
            lim.acquire().release()
    finally:
        stop.set()
        t.join()
    assert progress[0] > 0
    assert libsw.lib.swpy_gil_held() == 0


def test_keyed_exact_and_strict_with_threads(clock):
    threshold, rounds = 1000, 500  # N_THREADS x rounds = 4000 tries per key
    strict = libsw.RateLimiter(threshold, capacity=1000, clock=clock)
    counts = libsw.RateLimiter(1e6, capacity=1000, clock=clock)
    keys = ["k%d" % i for i in range(10)]
    passed = [None] * N_THREADS
    counted = [None] * N_THREADS

    def body(i):
        passed[i] = _workers.enter_keys(strict, keys, rounds)
        counted[i] = _workers.enter_keys(counts, keys, rounds)

    run_threads(N_THREADS, body)
    for k in keys:
        assert sum(p[k] for p in passed) == threshold == strict.key_stats(k).pass_
        assert sum(c[k] for c in counted) == N_THREADS * rounds == counts.key_stats(k).pass_
    assert counts.keyed_stats().success == N_THREADS * rounds * len(keys)


def test_keyed_new_keys_from_threads(clock):
    """Threads inserting distinct and shared new keys at once: each key once."""
    lim = libsw.RateLimiter(1, capacity=100_000, clock=clock)
    results = [[] for _ in range(N_THREADS)]
    run_threads(N_THREADS, lambda i: results[i].extend(bool(lim.try_acquire(key=b"%d" % j))
                                                       for j in range(5000)))
    assert [sum(r[j] for r in results) for j in range(5000)] == [1] * 5000
    assert lim.keyed_stats().inserted == 5000


def test_every_form_from_threads_with_permits_released_elsewhere():
    """Decorator, with (nested), permits ended by another thread, over one
    limiter from 8 threads: every entry exits once, in its own thread's
    records or by its token."""
    import queue

    lim = libsw.RateLimiter(concurrency=1e9)
    handoff: "queue.Queue" = queue.Queue()
    m = 2000

    @lim
    def call():
        with lim:
            pass

    def body(i):
        if i % 2:  # releases what the others hand off
            for _ in range(m):
                handoff.get().release()
            return
        for _ in range(m):
            call()
            handoff.put(lim.try_acquire())

    run_threads(N_THREADS, body)
    half = N_THREADS // 2
    assert lim.stats().concurrency == 0
    assert lim.minute_metric().success() == half * m * 3
