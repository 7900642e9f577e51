# SPDX-License-Identifier: Apache-2.0
"""libsw.CircuitBreaker: Sentinel's degrade rules around Python calls, with
explicit time (ManualClock), sync and async, which exceptions count, the
state-change events, one breaker across processes, and a real failing HTTP
upstream."""
import asyncio
import http.server
import multiprocessing
import threading
import time
import urllib.error
import urllib.request

import pytest

import libsw
from libsw import CircuitBreaker, CircuitOpenError


def fail():
    raise ValueError("upstream down")


def test_opens_probes_and_closes(clock):
    events = []
    br = CircuitBreaker(error_ratio=0.5, min_requests=4, interval=1, open_for=2, clock=clock,
                        name="api", on_state_change=lambda *e: events.append(e))
    ok = br(lambda: "ok")
    bad = br(fail)
    assert ok() == "ok" and ok() == "ok"
    for _ in range(3):
        with pytest.raises(ValueError):
            bad()
    assert br.state == "open"  # 3 failed of 5
    assert events == [("closed", "open", clock(), 0.6)]
    with pytest.raises(CircuitOpenError) as e:
        ok()
    assert e.value.retry_after == 2.0 and e.value.state == "open" and e.value.name == "api"
    clock.advance(1500)
    with pytest.raises(CircuitOpenError) as e:
        ok()
    assert e.value.retry_after == 0.5
    clock.advance(500)
    with pytest.raises(ValueError):
        bad()  # the probe fails: open again
    assert [ev[:2] for ev in events[1:]] == [("open", "half_open"), ("half_open", "open")]
    clock.advance(2000)
    assert ok() == "ok"  # the probe succeeds
    assert br.state == "closed"
    assert events[-1] == ("half_open", "closed", clock(), 0.0)
    st = br.stats()
    assert (st.opened, st.half_opened, st.reopened, st.closed, st.probes, st.blocked) == (1, 2, 1, 1, 2, 2)


def test_which_exceptions_count(clock):
    br = CircuitBreaker(error_count=1, min_requests=1, exceptions=(ValueError,), clock=clock)

    @br
    def lookup(k):
        return {}[k]

    for _ in range(5):
        with pytest.raises(KeyError):  # propagates, counted as a success
            lookup("x")
    assert br.state == "closed" and br.stats().bad == 0
    for _ in range(2):
        with pytest.raises(ValueError):
            br.call(fail)
    assert br.state == "open"


def test_slow_calls(clock):
    br = CircuitBreaker(slow_ratio=0.5, max_rt=0.05, min_requests=2, clock=clock)

    @br
    def slow(ms):
        clock.advance(ms)

    slow(10)
    slow(60)  # 1 of 2 slow: 50% is not over 50%
    assert br.state == "closed"
    slow(51)
    assert br.state == "open"


def test_async_decorator_and_context(clock):
    br = CircuitBreaker(error_count=0, min_requests=1, open_for=1, clock=clock)

    @br
    async def call(x):
        await asyncio.sleep(0)
        if x:
            raise ValueError(x)
        return "ok"

    async def main():
        assert await call(0) == "ok"
        with pytest.raises(ValueError):
            await call(1)
        with pytest.raises(CircuitOpenError):
            await call(0)
        clock.advance(1000)
        async with br:  # the probe, as a context manager
            pass
        return br.state

    assert asyncio.run(main()) == "closed"


def test_cancelled_probe_gives_its_place_back(clock):
    br = CircuitBreaker(error_count=0, min_requests=1, open_for=1, clock=clock)
    with pytest.raises(ValueError):
        br.call(fail)
    clock.advance(1000)

    async def cancelled():
        async with br:
            raise asyncio.CancelledError()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    assert br.stats().probes_in_flight == 0
    assert br.call(lambda: 1) == 1  # the next call probes at once
    assert br.state == "closed"


def test_bad_arguments():
    with pytest.raises(TypeError):
        CircuitBreaker()
    with pytest.raises(TypeError):
        CircuitBreaker(error_ratio=0.5, error_count=3)
    with pytest.raises(TypeError):
        CircuitBreaker(slow_ratio=0.5)
    with pytest.raises(libsw.ArgumentError, match="error_ratio"):
        CircuitBreaker(error_ratio=1.5)
    with pytest.raises(libsw.ArgumentError, match="half_open_calls"):
        CircuitBreaker(error_ratio=0.5, half_open_calls=0)
    with pytest.raises(libsw.ArgumentError, match="windows"):
        CircuitBreaker(error_ratio=0.5, windows=3)


def _fail_through(name, n, clock):
    br = CircuitBreaker(error_count=2, min_requests=1, open_for=60, segment=name, clock=clock)
    for _ in range(n):
        try:
            br.call(fail)
        except ValueError:
            pass


def test_one_breaker_across_processes(shm_name, clock):
    # the forked processes inherit the clock at its time: all three fail in
    # one stat interval, however slowly they start
    br = CircuitBreaker(error_count=2, min_requests=1, open_for=60, segment=shm_name, reset=True,
                        clock=clock)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_fail_through, args=(shm_name, 1, clock)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    with pytest.raises(CircuitOpenError) as e:
        br.call(lambda: None)
    assert e.value.retry_after == 60
    assert br.stats().opened == 1


class _Upstream(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):
        type(self).hits += 1
        if self.path == "/slow":
            time.sleep(0.3)
        self.send_response(500 if self.path == "/fail" else 200)
        self.end_headers()
        self.wfile.write(b"x")

    def log_message(self, *args):
        pass


def test_real_failing_http_upstream():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    br = CircuitBreaker(error_ratio=0.5, min_requests=5, interval=60, open_for=60,
                        exceptions=(urllib.error.URLError,))

    @br
    def get(path):
        with urllib.request.urlopen(base + path, timeout=5) as r:
            return r.status

    try:
        assert get("/ok") == 200
        for _ in range(4):
            with pytest.raises(urllib.error.HTTPError):
                get("/fail")
        assert br.state == "open"  # 4 of 5 failed
        hits = _Upstream.hits
        for _ in range(10):
            with pytest.raises(CircuitOpenError):
                get("/ok")
        assert _Upstream.hits == hits  # the upstream was spared
    finally:
        server.shutdown()
        server.server_close()


def test_real_slow_http_upstream():
    """Without a ManualClock the response time is libsw's duration clock
    (sw_now_ns): a real upstream answering in 300 ms is slow for max_rt
    0.2 s, one answering at once is not (with 200 ms to spare on a loaded
    machine)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    events = []
    br = CircuitBreaker(slow_ratio=0.5, max_rt=0.2, min_requests=4, interval=60, open_for=60,
                        on_state_change=lambda *e: events.append(e[:2]))

    @br
    def get(path):
        with urllib.request.urlopen(base + path, timeout=5) as r:
            return r.status

    try:
        for _ in range(2):
            assert get("/ok") == 200
        assert br.stats().bad == 0
        for _ in range(2):
            assert get("/slow") == 200
        assert br.state == "closed" and br.stats().bad == 2  # 2 slow of 4: not over 50%
        assert get("/slow") == 200
        assert br.state == "open" and events == [("closed", "open")]  # 3 slow of 5
        with pytest.raises(CircuitOpenError):
            get("/ok")
    finally:
        server.shutdown()
        server.server_close()
