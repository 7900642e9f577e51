# SPDX-License-Identifier: Apache-2.0
"""Cluster rules on Redis: RateLimiter(..., cluster="host:port")."""
import logging
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import textwrap
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


class RedisServer:
    """A redis-server of a test's own on a free port; stop() and start()
    again on the same port (an empty server: no persistence)."""

    def __init__(self, *args):
        self.exe = shutil.which("redis-server")
        self.port = _free_port()
        self.args = list(args)
        self.proc = None
        self.address = "127.0.0.1:%d" % self.port

    def start(self):
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no"] + self.args,
                                     stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise AssertionError("redis-server did not start on port %d" % self.port)

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), "--no-auth-warning"] + list(args),
                              capture_output=True, text=True, timeout=10).stdout.strip()


def _need_redis():
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server not installed")


@pytest.fixture
def redis():
    _need_redis()
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def redis_server(redis):
    return redis.address


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
    with pytest.raises(ValueError, match="cluster_database"):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", cluster_database=-1)
    with pytest.raises(TypeError, match="cluster_database"):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", cluster_database="1")
    with pytest.raises(ValueError, match="cluster_username"):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", cluster_username="u")
    with pytest.raises(ValueError, match="cluster_password"):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", cluster_password="a\0b")
    with pytest.raises(TypeError, match="need cluster="):
        libsw.RateLimiter(qps=1, cluster_password="p")
    with pytest.raises(ValueError, match="cluster_retry"):
        libsw.RateLimiter(qps=1, cluster="127.0.0.1:1", cluster_retry=0)


# ------------------------------------------------------------- issue 14


@pytest.mark.parametrize("address, named", [
    ("nohostport", "nohostport"),
    ("host:0", "host:0"),
    ("host:65536", "host:65536"),
    ("host:6379x", "host:6379x"),
    ("a:1,,b:2", "a:1,,b:2"),
    ("a:1,", "a:1,"),
    (":6379", ":6379"),
    ("", "empty"),
])
def test_bad_address_is_refused_at_construction(address, named, shm_name):
    with pytest.raises(libsw.ArgumentError, match="cluster") as ei:
        libsw.RateLimiter(qps=10, name="bad-address", cluster=address)
    assert named in str(ei.value)
    assert ei.value.code_name == "SW_EINVAL"
    # checked before the segment is opened: no file is left behind
    with pytest.raises(ValueError):
        libsw.RateLimiter(qps=10, name="bad-address", cluster=address, segment=shm_name, capacity=4)
    assert not os.path.exists("/dev/shm/" + shm_name)


def test_names_with_nul_are_refused(shm_name):
    for kwargs in ({}, {"cluster": "127.0.0.1:1"}, {"segment": shm_name, "capacity": 4}):
        with pytest.raises(ValueError, match="name"):
            libsw.RateLimiter(qps=10, name="n\0one", **kwargs)
    assert not os.path.exists("/dev/shm/" + shm_name)


def test_failed_constructor_leaves_no_segment(shm_name):
    cases = [
        dict(name="x" * 100),                              # the case: a name too long
        dict(name="ok", cluster="nohostport"),             # a bad Redis address
        dict(name="ok", behavior="warm_up", warm_up=10**9),  # a rule the C library refuses
        dict(name="ok", windows=3, interval=1.0),          # a geometry that does not divide
        dict(name="ok", cluster="127.0.0.1:1", cluster_database=-5),
    ]
    for kw in cases:
        with pytest.raises(ValueError):
            libsw.RateLimiter(10, segment=shm_name, capacity=4, **kw)
        assert not os.path.exists("/dev/shm/" + shm_name), kw



def test_segment_max_mb(shm_name):
    # 60,000 names of 37 KiB: 2,142 MiB, over the default 2,048: refused,
    # nothing left behind, until segment_max_mb says so (the file is sparse)
    with pytest.raises(libsw.ArgumentError) as ei:
        libsw.RateLimiter(10, segment=shm_name, names=60000)
    assert "larger than segment_max_mb=2048" in str(ei.value)
    assert not os.path.exists("/dev/shm/" + shm_name)
    lim = libsw.RateLimiter(10, segment=shm_name, names=60000, segment_max_mb=4096)
    assert lim.try_acquire()
    lim.close()
    with pytest.raises(TypeError):
        libsw.RateLimiter(10, segment_max_mb=4096)
    with pytest.raises(ValueError):
        libsw.RateLimiter(10, segment=shm_name, segment_max_mb=0)

_EXIT_SCRIPT = textwrap.dedent("""
    import os, sys
    import libsw
    address = sys.argv[1]
    # many limiters: the refiller walks them every millisecond
    lims = [libsw.RateLimiter(qps=100, name="exit-%d" % i, cluster=address, cluster_timeout=0.05)
            for i in range(100)]
    keyed = lims[0].for_key("k")
    for lim in lims:
        for _ in range(3):
            lim.try_acquire()
    keyed.try_acquire()
    lims[1].close()
    if len(sys.argv) > 2:  # a forked child uses the limiters and exits normally (atexit)
        pid = os.fork()
        if pid == 0:
            for lim in lims[2:]:
                lim.try_acquire()
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        sys.exit(0 if status == 0 else 3)
""")


def _run_exits(address, runs, fork=False):
    """Run the script fed on stdin `runs` times, 5 at a time: their exit statuses."""
    codes = []
    args = [sys.executable, "-", address] + (["fork"] if fork else [])
    for start in range(0, runs, 5):
        procs = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE) for _ in range(min(5, runs - start))]
        for p in procs:
            _, err = p.communicate(_EXIT_SCRIPT.encode(), timeout=60)
            codes.append((p.returncode, err.decode(errors="replace")[-300:]))
    return codes


@pytest.mark.parametrize("alive", [True, False], ids=["redis-alive", "redis-dead"])
def test_interpreter_exit_is_clean(alive, request):
    """Issue 14, item 11: the refiller thread read limiters the interpreter had
    freed at exit (SIGSEGV, 20 of 20 runs with Redis dead)."""
    address = request.getfixturevalue("redis_server") if alive else "127.0.0.1:1"
    codes = _run_exits(address, 20)
    bad = [c for c in codes if c[0] != 0]
    assert not bad, "%d of 20 runs failed: %r" % (len(bad), bad[:3])


def test_forked_child_exit_is_clean(redis_server):
    codes = _run_exits(redis_server, 5, fork=True)
    bad = [c for c in codes if c[0] != 0]
    assert not bad, bad[:3]


def test_forked_child_gets_its_own_refiller(redis_server):
    lim = libsw.RateLimiter(qps=1000, name="py-fork-%d" % os.getpid(), cluster=redis_server, lease=5)
    _wait_up(lim)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = 0
        try:
            calls = lim.lease_stats()["calls"]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and lim.lease_stats()["calls"] <= calls:
                lim.try_acquire()  # uses up the lease: the child's refiller refills it
                time.sleep(0.002)
            ok = lim.lease_stats()["calls"] > calls and lim.lease_stats()["up"]
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"1"
    lim.close()


def _records(caplog, word):
    return [r for r in caplog.records if r.name == "libsw" and word in r.getMessage()]


def _drive(lim, seconds, until=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lim.try_acquire()
        if until is not None and until():
            return True
        time.sleep(0.005)
    return False


def test_redis_down_and_up_are_logged_once(redis, caplog):
    caplog.set_level(logging.INFO, logger="libsw")
    lim = libsw.RateLimiter(qps=1000, name="py-log-%d" % os.getpid(), cluster=redis.address,
                            lease=5, cluster_timeout=0.05, cluster_retry=0.01)
    _wait_up(lim)
    assert _records(caplog, "down") == []
    redis.stop()
    _drive(lim, 0.5)  # about 50 failed tries
    down = _records(caplog, "down")
    assert len(down) == 1, [r.getMessage() for r in down]
    assert redis.address in down[0].getMessage()
    assert down[0].levelno == logging.WARNING
    assert not lim.lease_stats()["up"]
    redis.start()
    assert _drive(lim, 5, until=lambda: lim.lease_stats()["up"])
    _drive(lim, 0.2)
    up = _records(caplog, "back up")
    assert len(up) == 1, [r.getMessage() for r in up]
    assert len(_records(caplog, "down")) == 1
    lim.close()


def test_password_and_database(caplog):
    _need_redis()
    server = RedisServer("--requirepass", "s3cret").start()
    try:
        caplog.set_level(logging.INFO, logger="libsw")
        name = "py-auth-%d" % os.getpid()
        lim = libsw.RateLimiter(qps=1000, name=name, cluster=server.address, lease=5,
                                cluster_password="s3cret", cluster_database=3)
        _wait_up(lim)
        assert server.cli("-a", "s3cret", "-n", "3", "EXISTS", "sw:{%s}" % name) == "1"
        assert server.cli("-a", "s3cret", "-n", "0", "EXISTS", "sw:{%s}" % name) == "0"
        lim.close()
        wrong = libsw.RateLimiter(qps=1000, name=name + "-w", cluster=server.address,
                                  cluster_password="wrong", cluster_timeout=0.05)
        _drive(wrong, 0.3)
        assert not wrong.lease_stats()["up"]
        msgs = [r.getMessage() for r in _records(caplog, "down")]
        assert any("WRONGPASS" in m or "invalid" in m for m in msgs), msgs
        wrong.close()
        # a Redis 6 ACL user: the default one, with the password
        user = libsw.RateLimiter(qps=1000, name=name + "-u", cluster=server.address,
                                 cluster_username="default", cluster_password="s3cret")
        _wait_up(user)
        user.close()
    finally:
        server.stop()
