# SPDX-License-Identifier: Apache-2.0
"""Shared segments: several processes update one limiter exactly."""
import multiprocessing as mp
import os
import pickle

import pytest

import libsw
from conftest import T0
import _workers

K = 4
N = 2000


def run(ctx_name, target, args_per_child, together=False):
    """Run target(*args, [go,] q) in one process per args; their results."""
    ctx = mp.get_context(ctx_name)
    q = ctx.Queue()
    go = ctx.Barrier(len(args_per_child))  # the children start together
    extra = (go, q) if together else (q,)
    ps = [ctx.Process(target=target, args=args + extra) for args in args_per_child]
    for p in ps:
        p.start()
    results = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    return results


@pytest.mark.parametrize("ctx_name", ["fork", "spawn"])
def test_exact_shared_counts(ctx_name, shm_name):
    clock = libsw.ManualClock(T0)  # pickled: every child has the same time
    lim = libsw.RateLimiter(1e9, segment=shm_name, name="api", capacity=8, clock=clock)
    results = run(ctx_name, _workers.decorated, [(lim, N)] * K, together=True)
    assert results == [N] * K
    assert lim.second_metric().window_pass(now=T0) == K * N
    s = lim.stats()
    assert s.pass_qps == K * N and s.success_qps == K * N and s.concurrency == 0


@pytest.mark.parametrize("ctx_name", ["fork", "spawn"])
def test_strict_across_processes(ctx_name, tmp_path):
    threshold = 300
    path = str(tmp_path / "segment")  # a file path works as well as a shm name
    clock = libsw.ManualClock(T0)
    lim = libsw.RateLimiter(threshold, segment=path, capacity=4, clock=clock, strict=True)
    results = run(ctx_name, _workers.hammer, [(lim, threshold)] * K, together=True)
    assert sum(results) == threshold
    assert lim.stats().pass_qps == threshold


def test_segment_opened_twice_in_one_process(shm_name, clock):
    a = libsw.RateLimiter(5, segment=shm_name, capacity=4, clock=clock)
    b = libsw.RateLimiter(5, segment=shm_name, capacity=4, clock=clock)
    for _ in range(3):
        a.acquire().release()
    for _ in range(2):
        b.acquire().release()
    assert not a.try_acquire() and not b.try_acquire()
    assert a.segment_name == shm_name
    a.close()
    assert b.stats().pass_qps == 5


def test_segment_rule_follows_the_limiter(shm_name, clock):
    a = libsw.RateLimiter(5, segment=shm_name, name="x", capacity=4, clock=clock)
    b = libsw.RateLimiter(2, segment=shm_name, name="y", capacity=4, clock=clock)
    assert a.rule()["threshold"] == 5 and b.rule()["threshold"] == 2
    assert sum(bool(b.try_acquire()) for _ in range(5)) == 2


def test_use_after_fork(shm_name, clock):
    heap = libsw.RateLimiter(100, clock=clock)
    heap.acquire().release()
    seg = libsw.RateLimiter(100, segment=shm_name, capacity=4, clock=clock)
    [(out, child_pass, ok)] = run("fork", _workers.use_after_fork, [(heap, seg)])
    assert out == [1, 1, 1] and ok
    assert child_pass == 4  # the child's copy: 1 from before the fork + 3
    assert heap.stats().pass_qps == 1  # the parent's heap limiter is its own
    assert seg.stats().pass_qps == 5  # the segment is shared


def in_os_fork_child(check):
    """Whether check() is true in a child made by os.fork()."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.write(w, b"1" if check() else b"0")
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 8)
    os.waitpid(pid, 0)
    os.close(r)
    return out == b"1"


def test_use_after_os_fork(clock):
    lim = libsw.RateLimiter(3, clock=clock)
    lim.acquire().release()
    assert in_os_fork_child(lambda: [bool(lim.try_acquire()) for _ in range(3)] == [True, True, False])
    assert lim.stats().pass_qps == 1


def test_entries_in_flight_across_os_fork():
    """A `with` entry and a permit made before fork() end in the parent and,
    as copies, in the child; the child makes and ends its own."""
    lim = libsw.RateLimiter(concurrency=10)
    p = lim.try_acquire()

    def child():
        with lim:
            p.release()
            lim.try_acquire().release()
        return lim.stats().concurrency == 1  # the with entered before the fork

    with lim:
        assert in_os_fork_child(child)
    assert lim.stats().concurrency == 1
    p.release()
    assert lim.stats().concurrency == 0


def test_heap_limiter_is_not_picklable():
    with pytest.raises(TypeError, match="segment"):
        pickle.dumps(libsw.RateLimiter(1))


def test_segment_limiter_pickles(shm_name, clock):
    lim = libsw.RateLimiter(10, segment=shm_name, name="api", capacity=4, clock=clock)
    lim.acquire().release()
    again = pickle.loads(pickle.dumps(lim))
    assert again.stats().pass_qps == 1
    key = lim.for_key("k")
    key.acquire().release()
    key2 = pickle.loads(pickle.dumps(key))
    assert key2.key == "k" and key2.stats().pass_qps == 1


@pytest.mark.parametrize("ctx_name", ["fork", "spawn"])
def test_keyed_segment_shared_exactly(ctx_name, shm_name):
    """K processes on one keyed segment: each key's passes are exact, and
    strict (no key passes more than its threshold, whatever the process)."""
    threshold, rounds = 300, 100  # K x rounds = 400 tries per key
    clock = libsw.ManualClock(T0)
    lim = libsw.RateLimiter(threshold, segment=shm_name, name="per-client", capacity=1000, clock=clock)
    exact = libsw.RateLimiter(1e6, segment=shm_name, name="counts", capacity=1000, clock=clock)
    keys = ["10.0.0.%d" % i for i in range(50)] + [bytes([10, 0, 1, i]) for i in range(50)]
    strict = run(ctx_name, _workers.keyed_hammer, [(lim, keys, rounds)] * K, together=True)
    counted = run(ctx_name, _workers.keyed_hammer, [(exact, keys, rounds)] * K, together=True)
    for k in keys:
        assert sum(r[k] for r in strict) == threshold
        assert lim.key_stats(k).pass_ == threshold and lim.key_stats(k).block == K * rounds - threshold
        assert sum(r[k] for r in counted) == K * rounds == exact.key_stats(k).pass_
    s = lim.keyed_stats()
    assert (s.keys, s.inserted, s.pass_, s.success) == (100, 100, 100 * threshold, 100 * threshold)
    assert exact.keyed_stats().success == 100 * K * rounds


def test_default_names_open_a_segment_made_with_other_names(shm_name):
    """A keyed limiter without names= makes a segment of 64 names (2.3 MiB
    reserved, not 1024's 36.5 MiB) and opens one made with another number
    with that number; names= given must match, and so must the windows."""
    libsw.RateLimiter(5, segment=shm_name, names=8)
    lim = libsw.RateLimiter(5, segment=shm_name)
    assert lim.try_acquire(key="a")
    with pytest.raises(ValueError, match="names"):
        libsw.RateLimiter(5, segment=shm_name, names=16)
    with pytest.raises(ValueError, match="geometry"):
        libsw.RateLimiter(5, segment=shm_name, windows=4)
    libsw.unlink_segment(shm_name)
    libsw.RateLimiter(5, segment=shm_name)
    assert os.path.getsize("/dev/shm/" + shm_name) == 2394880
