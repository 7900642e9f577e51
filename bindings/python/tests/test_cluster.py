"""Cluster rules on Redis: RateLimiter(..., cluster="host:port")."""
import multiprocessing
import os
import shutil
import socket
import subprocess
import time

import pytest

import libsw
from libsw._libsw import ffi, lib


def _cluster_built() -> bool:
    p = ffi.new("sw_cluster **")
    rc = lib.sw_cluster_create(p, b"127.0.0.1:1", ffi.NULL)
    if rc == 0:
        lib.sw_cluster_free(p[0])
    return rc != lib.SW_ENOTSUP


pytestmark = pytest.mark.skipif(not _cluster_built(), reason="built without hiredis")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_server():
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server not installed")
    port = _free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.02)
    yield "127.0.0.1:%d" % port
    proc.kill()
    proc.wait(timeout=10)


def _wait_up(lim, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if lim.lease_stats()["up"]:
            return
        lim.try_acquire()  # an entry asks for a lease
        time.sleep(0.01)
    raise AssertionError("the lease never came up: %r" % (lim.lease_stats(),))


def _hammer(lim, seconds):
    passed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        p = lim.try_acquire()
        if p:
            passed += 1
            p.release()
        time.sleep(0.0005)
    return passed


def test_lease_admits_within_the_fleet_budget(redis_server):
    lim = libsw.RateLimiter(qps=20, name="py-one", cluster=redis_server, lease=5)
    _wait_up(lim)
    passed = _hammer(lim, 1.2)
    stats = lim.lease_stats()
    # a sliding window of 2 x 500 ms: at most 20 in any second, so at most 60
    # in 1.2 s plus the warm-up, and certainly some
    assert 5 <= passed <= 60, passed
    assert stats["calls"] >= 1 and stats["granted"] >= passed
    lim.close()


def _worker(servers, seconds, out):
    lim = libsw.RateLimiter(qps=20, name="py-shared", cluster=servers, lease=4)
    _wait_up(lim)
    out.put(_hammer(lim, seconds))
    lim.close()


def test_two_processes_share_one_budget(redis_server):
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(redis_server, 1.0, out)) for _ in range(2)]
    for p in procs:
        p.start()
    counts = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    # each alone would take ~20-40 in a second; together they share 20 per second
    assert sum(counts) <= 60, counts
    assert all(c > 0 for c in counts), counts


@pytest.mark.parametrize("policy,expect_pass", [("open", 10), ("closed", 0), ("local", 5)])
def test_failure_policy_when_redis_is_down(policy, expect_pass):
    clock = libsw.ManualClock(start_ms=1_000_000)
    lim = libsw.RateLimiter(qps=10, name="py-down", cluster="127.0.0.1:1", cluster_failure=policy,
                            cluster_nodes=2, cluster_timeout=0.05, clock=clock)
    passed = 0
    for _ in range(10):
        p = lim.try_acquire()
        if p:
            passed += 1
            p.release()
    assert passed == expect_pass
    lim.close()


def test_cluster_arguments():
    with pytest.raises(ValueError):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", cluster_failure="maybe")
    with pytest.raises(TypeError):
        libsw.RateLimiter(qps=1, cluster=6379)
    with pytest.raises(ValueError):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", lease=0)
    with pytest.raises(ValueError):
        libsw.RateLimiter(qps=1, cluster="nohostport:")
    with pytest.raises(ValueError):
        libsw.RateLimiter(concurrency=1, cluster="127.0.0.1:1")
