# SPDX-License-Identifier: Apache-2.0
"""libsw_breaker in front of an upstream, nginx with 2 workers: opens on
errors (a 500, a closed port), answers 503 + Retry-After while open, lets
one probe through across workers, closes after a good probe."""
import http.server
import threading
import time

from conftest import free_port

BREAKER = ("libsw_breaker_zone be error_ratio=0.5 min_requests=4 interval=10s open_for=1s "
           "probe_timeout=10s segment=SEG_be;")


class Upstream:
    """An HTTP server on 127.0.0.1 answering `status` after `delay` s."""

    def __init__(self):
        self.status, self.delay, self.hits = 500, 0.0, 0
        up = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                up.hits += 1
                time.sleep(up.delay)
                self.send_response(up.status)
                self.send_header("Content-Length", "3")
                self.end_headers()
                self.wfile.write(b"up\n")

            def log_message(self, *a):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_breaker_opens_probes_once_and_closes(nginx):
    up = Upstream()
    try:
        n = nginx()
        n.conf("""
  %s
  server {
    listen 127.0.0.1:PORT;
    access_log DIR/access.log libsw;
    location /api { libsw_breaker be; proxy_pass http://127.0.0.1:%d; }
  }""" % (BREAKER, up.port))
        n.start()
        assert [n.get("/api")[0] for _ in range(4)] == [500] * 4  # 4 of 4 failed: open
        s, h, _ = n.get("/api")
        assert s == 503 and h["Retry-After"] == "1"
        hits = up.hits
        assert [n.get("/api")[0] for _ in range(10)] == [503] * 10
        assert up.hits == hits, "an open breaker lets nothing through"
        time.sleep(1.1)
        # half-open: one slow probe; every request meanwhile, on either worker, is refused
        up.status, up.delay = 200, 1.0
        probe = []
        t = threading.Thread(target=lambda: probe.append(n.get("/api")[0]))
        t.start()
        time.sleep(0.3)
        during = [n.get("/api")[0] for _ in range(20)]
        t.join(10)
        assert probe == [200] and during == [503] * 20 and up.hits == hits + 1
        up.delay = 0
        assert [n.get("/api")[0] for _ in range(5)] == [200] * 5  # closed again
        log = n.error_log()
        assert 'libsw breaker "be": closed -> open' in log
        assert 'libsw breaker "be": half_open -> closed' in log
        assert 'libsw breaker "be": half-open, probing the upstream' in log
        assert n.access_log().count(" 503 BREAKER_OPEN") == 31
    finally:
        up.close()


def test_breaker_on_a_closed_port(nginx):
    n = nginx()
    # open 10 s (not BREAKER's 1 s: on a loaded machine the next request
    # could come after it, as the probe)
    n.conf("""
  %s
  server {
    listen 127.0.0.1:PORT;
    location /api { libsw_breaker be; proxy_pass http://127.0.0.1:%d; }
  }""" % (BREAKER.replace("open_for=1s", "open_for=10s"), free_port()))
    n.start()
    assert [n.get("/api")[0] for _ in range(4)] == [502] * 4
    s, h, _ = n.get("/api")
    assert s == 503 and 1 <= int(h["Retry-After"]) <= 10, (s, h)


def test_breaker_new_thresholds_at_reload(nginx):
    up = Upstream()
    try:
        n = nginx()
        conf = """
  libsw_breaker_zone be error_ratio=0.5 min_requests=%d interval=10s open_for=10s segment=SEG_be;
  server {
    listen 127.0.0.1:PORT;
    location /api { libsw_breaker be; proxy_pass http://127.0.0.1:%d; }
  }"""
        n.conf(conf % (4, up.port))
        n.start()
        assert [n.get("/api")[0] for _ in range(5)] == [500] * 4 + [503]
        n.reload()  # the same thresholds: the state is kept
        assert n.get("/api")[0] == 503
        n.conf(conf % (8, up.port))
        rc, out = n.test()
        assert rc == 0 and "new thresholds" in out, out
        n.reload()  # new thresholds: the breaker starts anew, with them
        assert "new thresholds: the breaker in" in n.error_log()
        assert [n.get("/api")[0] for _ in range(9)] == [500] * 8 + [503]
    finally:
        up.close()
