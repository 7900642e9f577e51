# SPDX-License-Identifier: Apache-2.0
"""ngx_http_libsw_module's limits in a real nginx with 2 workers."""
import http.client
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import ENV, swctl

# 1 request a minute, 4 more queued (nodelay: admitted at once): exactly 5
# per client for the next minute, whichever worker serves each request.
FIVE = "rate=1r/m burst=4"


def clients_burst(n, clients, per_client, path="/a", threads=4):
    """Send per_client requests for each of `clients` keys (X-Client
    header) over keep-alive connections in `threads` threads: {key: [statuses]}."""
    out = {}
    keys = ["c%05d" % i for i in range(clients)]
    lock = threading.Lock()

    def run(part):
        c = http.client.HTTPConnection("127.0.0.1", n.port, timeout=10)
        mine = {}
        for k in part:
            got = []
            for _ in range(per_client):
                c.request("GET", path, headers={"X-Client": k})
                r = c.getresponse()
                r.read()
                got.append(r.status)
                if r.getheader("Connection", "").lower() == "close":
                    c.close()
                    c = http.client.HTTPConnection("127.0.0.1", n.port, timeout=10)
            mine[k] = got
        c.close()
        with lock:
            out.update(mine)
    ts = [threading.Thread(target=run, args=(keys[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return out


def test_exact_counts_per_client_across_workers(nginx):
    n = nginx()
    n.conf("""
  libsw_zone $http_x_client zone=per_client %s capacity=5000 segment=SEG_pc;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    access_log DIR/access.log libsw;
    location /a { libsw_limit zone=per_client nodelay; }
  }""" % FIVE)
    n.start()
    got = clients_burst(n, 1500, 7)
    assert len(got) == 1500
    for k, statuses in got.items():
        assert statuses.count(200) == 5 and statuses.count(429) == 2, (k, statuses)
    # both workers served: the counts are exact across processes
    log = n.access_log().splitlines()
    assert len(log) == 1500 * 7
    assert sum(1 for l in log if l.endswith(" 200 PASSED")) == 1500 * 5
    assert sum(1 for l in log if l.endswith(" 429 REJECTED")) == 1500 * 2
    workers = {l.split("#")[1].split(":")[0] for l in n.error_log().splitlines()
               if "limiting requests by zone \"per_client\"" in l}
    assert len(workers) == 2, "one worker served every refusal: %s" % workers
    rc, out = swctl("list", n.seg("pc"))
    assert rc == 0, out


def test_retry_after_log_line_variable(nginx):
    n = nginx()
    n.conf("""
  libsw_zone $http_x_client zone=w:1m rate=2r/s window=10s windows=1 mode=window segment=SEG_w;
  libsw_zone $http_x_client zone=p rate=1r/m segment=SEG_p;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    access_log DIR/access.log libsw;
    libsw_log_level warn;
    location /a { libsw_limit zone=w; libsw_ratelimit_headers on; }
    location /b { libsw_limit zone=p; libsw_status 503; libsw_retry_after off; }
    location /api { libsw_limit zone=p; }
  }""")
    n.start()
    # 20 per fixed 10 s window: a refusal comes within 41 requests
    got = []
    for _ in range(41):
        got.append(n.get("/a", {"X-Client": "k"}))
        if got[-1][0] == 429:
            break
    s, h, _ = got[-1]
    assert s == 429
    assert 1 <= int(h["Retry-After"]) <= 10
    assert h["RateLimit-Remaining"] == "0" and h["RateLimit-Limit"] == "20"
    # a window zone's remaining: what is left of its 20 in the window
    lefts = [int(h["RateLimit-Remaining"]) for s, h, _ in got if s == 200]
    assert lefts[-1] == 0 and lefts[-2] == 1 and lefts[-3] == 2, lefts
    # pacing, 1 a minute: the second is refused, Retry-After about 60 s
    assert n.get("/api", {"X-Client": "m"})[0] == 200
    s, h, _ = n.get("/api", {"X-Client": "m"})
    assert s == 429 and 58 <= int(h["Retry-After"]) <= 60, h
    assert n.get("/b", {"X-Client": "q"})[0] == 200
    s, h, _ = n.get("/b", {"X-Client": "q"})
    assert s == 503 and "Retry-After" not in h
    assert n.get("/b", {"X-Client": ""})[0] == 200  # no key: not limited (as limit_req)
    assert n.get("/b", {"X-Client": ""})[0] == 200
    log = n.access_log().splitlines()
    assert "k 429 REJECTED" in log and "k 200 PASSED" in log and "q 503 REJECTED" in log
    assert log.count(" 200 -") == 2  # no key: no decision
    err = [l for l in n.error_log().splitlines() if "limiting requests" in l]
    assert len(err) == 3 and all("[warn]" in l for l in err)
    assert 'by zone "w"' in err[0] and 'request: "GET /a HTTP/1.1"' in err[0]


def test_dry_run(nginx):
    n = nginx()
    n.conf("""
  libsw_zone $http_x_client zone=d rate=1r/m segment=SEG_d;
  libsw_zone $http_x_client zone=dz rate=1r/m dry_run segment=SEG_dz;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    access_log DIR/access.log libsw;
    location /a { libsw_limit zone=d; libsw_dry_run on; }
    location /b { libsw_limit zone=dz; }
  }""")
    n.start()
    assert [n.get("/a", {"X-Client": "x"})[0] for _ in range(3)] == [200, 200, 200]
    assert [n.get("/b", {"X-Client": "y"})[0] for _ in range(3)] == [200, 200, 200]
    log = n.access_log().splitlines()
    assert log.count("x 200 REJECTED_DRY_RUN") == 2 and log.count("y 200 REJECTED_DRY_RUN") == 2
    assert "limiting requests, dry run, by zone \"d\"" in n.error_log()
    rc, out = swctl("list", "--json", n.seg("dz"))
    assert rc == 0 and '"would_block":2' in out.replace(" ", ""), out


def test_reload_keeps_state_and_applies_a_new_rate(nginx):
    n = nginx()
    conf = """
  libsw_zone $http_x_client zone=r rate=1r/m burst=%d segment=SEG_r;
  libsw_zone zone=site rate=1r/m burst=%d segment=SEG_site;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    location /a { libsw_limit zone=r nodelay; }
    location /b { libsw_limit zone=site nodelay; }
  }"""
    n.conf(conf % (2, 1))
    n.start()
    assert [n.get("/a", {"X-Client": "x"})[0] for _ in range(4)] == [200, 200, 200, 429]
    assert [n.get("/b")[0] for _ in range(3)] == [200, 200, 429]
    n.reload()
    assert n.get("/a", {"X-Client": "x"})[0] == 429, "a reload must not reset budgets"
    assert n.get("/b")[0] == 429
    n.conf(conf % (5, 3))  # 3 and 2 more places in the queues
    assert n.test()[0] == 0
    n.reload()
    assert [n.get("/a", {"X-Client": "x"})[0] for _ in range(4)] == [200, 200, 200, 429]
    assert [n.get("/b")[0] for _ in range(3)] == [200, 200, 429]


def test_swctl_rules_apply_changes_a_rate_live(nginx, tmp_path):
    n = nginx()
    n.conf("""
  libsw_zone $http_x_client zone=live rate=1r/m segment=SEG_live;
  libsw_zone zone=site rate=1r/m segment=SEG_site;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    location /a { libsw_limit zone=live nodelay; }
    location /b { libsw_limit zone=site nodelay; }
  }""")
    n.start()
    assert [n.get("/a", {"X-Client": "x"})[0] for _ in range(2)] == [200, 429]
    assert [n.get("/b")[0] for _ in range(2)] == [200, 429]
    # the keyed table: its one rule, named as its segment; 2 more queued
    f = tmp_path / "keyed.json"
    f.write_text(json.dumps([{"resource": n.seg("live"), "count": 1 / 60, "controlBehavior": 2,
                              "maxQueueingTimeMs": 120000}]))
    rc, out = swctl("rules", "apply", n.seg("live"), str(f))
    assert rc == 0, out
    assert [n.get("/a", {"X-Client": "x"})[0] for _ in range(3)] == [200, 200, 429]
    # the zone without a key: its limiter, named as the zone ("site")
    f = tmp_path / "site.json"
    f.write_text(json.dumps([{"resource": "site", "count": 1 / 60, "controlBehavior": 2,
                              "maxQueueingTimeMs": 60000}]))
    rc, out = swctl("rules", "apply", n.seg("site"), str(f))
    assert rc == 0, out
    assert [n.get("/b")[0] for _ in range(2)] == [200, 429]
    # another name does not fit the zone's segment: swctl says what it holds
    f.write_text(json.dumps([{"resource": "sites", "count": 1}]))
    rc, out = swctl("rules", "apply", n.seg("site"), str(f))
    assert rc == 3 and 'holds 1 of 1 names ("site")' in out, out


def cancel_supported(n):
    return "cancel not supported" not in n.error_log()


def test_all_or_nothing_flooding_client(nginx):
    """docs' flooding case: a site-wide limit before a per-client one; one
    client's refused requests must not use up the site's budget."""
    n = nginx()
    n.conf("""
  libsw_zone zone=site rate=20r/s window=10s windows=1 mode=window segment=SEG_site;
  libsw_zone $http_x_client zone=per_ip rate=1r/m burst=4 segment=SEG_ip;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    location /a { libsw_limit zone=site; libsw_limit zone=per_ip nodelay; }
  }""")
    n.start()
    flood = [n.get("/a", {"X-Client": "flooder"})[0] for _ in range(300)]
    if not cancel_supported(n):
        pytest.skip("sw_keyed_cancel / sw_limiter_cancel return SW_ENOTSUP in this libsw")
    assert flood.count(200) == 5
    # the site admits 200 per 10 s: 195 left for everyone else
    others = [n.get("/a", {"X-Client": "c%d" % i})[0] for i in range(20)]
    assert others == [200] * 20


def test_bad_configurations_refused_by_nginx_t(nginx):
    n = nginx()
    bad = {
        "rate=10r/h": ("libsw_zone $x zone=a rate=10r/h;", "invalid rate"),
        "no rate": ("libsw_zone $x zone=a;", "must have the \"rate\" parameter"),
        "no zone": ("libsw_zone $x rate=1r/s;", "must have the \"zone\" parameter"),
        "unknown zone": ("server { location / { libsw_limit zone=nope; } }",
                         "unknown libsw_zone \"nope\""),
        "burst on window": ("libsw_zone $x zone=a rate=1r/s mode=window burst=3;",
                            "burst is for mode=pacing"),
        "fractional window": ("libsw_zone $x zone=a rate=100r/m mode=window;",
                              "not a whole number per second"),
        "bad mode": ("libsw_zone $x zone=a rate=1r/s mode=fast;", "invalid mode \"mode=fast\""),
        "two bursts": ("libsw_zone $x zone=a rate=1r/s; server { location /a { libsw_limit "
                       "zone=a burst=2; } location /b { libsw_limit zone=a burst=3; } }",
                       "has burst=2 elsewhere"),
        "nodelay and delay": ("libsw_zone $x zone=a rate=1r/s; server { location / { "
                              "libsw_limit zone=a nodelay delay=2; } }", "exclude each other"),
        "capacity no key": ("libsw_zone zone=a rate=1r/s capacity=10;", "has no key"),
        "libsw's range": ("libsw_zone $x zone=a rate=10000000r/s mode=window window=1h;",
                          "SW_OPT_THRESHOLD"),
        "breaker strategy": ("libsw_breaker_zone be min_requests=3;", "needs one of"),
        "breaker ratio": ("libsw_breaker_zone be error_ratio=3;", "SW_ERANGE"),
        "unknown breaker": ("server { location / { libsw_breaker be; } }",
                            "unknown libsw_breaker_zone \"be\""),
    }
    for what, (conf, message) in bad.items():
        n.conf(conf)
        rc, out = n.test()
        assert rc != 0 and message in out, (what, out)


def test_geometry_change_refused_by_nginx_t_and_reload(nginx):
    n = nginx()
    conf = """
  libsw_zone $http_x_client zone=g rate=10r/s capacity=%d segment=SEG_g;
  server { listen 127.0.0.1:PORT; root DIR/html; location /a { libsw_limit zone=g; } }"""
    n.conf(conf % 1000)
    n.start()
    assert n.get("/a", {"X-Client": "x"})[0] == 200
    n.conf(conf % 2000)
    rc, out = n.test()
    assert rc != 0 and "a reload cannot change a segment's geometry" in out, out
    assert "libsw_zone \"g\"" in out and n.seg("g") in out
    # the reload: the master refuses it, the old configuration goes on
    old = n.workers_now()
    p = subprocess.run(n.cmd("-s", "reload"), env=ENV, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr  # nginx -s signals whatever the segments hold
    deadline = time.time() + 10
    while "a reload cannot change" not in n.error_log() and time.time() < deadline:
        time.sleep(0.05)
    assert "SW_EGEOMETRY" in n.error_log() and "a reload cannot change" in n.error_log()
    assert n.workers_now() == old
    assert n.get("/a", {"X-Client": "y"})[0] == 200


def test_limits_at_http_server_and_location_levels(nginx):
    """A level inherits its parent's libsw_limit lines only when it has none."""
    n = nginx()
    n.conf("""
  libsw_zone $http_x_client zone=h rate=1r/m segment=SEG_h;
  libsw_zone $http_x_client zone=s rate=1r/m burst=1 segment=SEG_s;
  libsw_zone $http_x_client zone=l rate=1r/m burst=2 segment=SEG_l;
  libsw_limit zone=h;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    location /a { }
    location /b { libsw_limit zone=s nodelay; }
    location /api { libsw_limit zone=l nodelay; libsw_limit zone=s nodelay; }
  }""")
    n.start()
    def run(path, k):
        return [n.get(path, {"X-Client": k})[0] for _ in range(4)]
    assert run("/a", "x") == [200, 429, 429, 429]      # http level: h
    assert run("/b", "y") == [200, 200, 429, 429]      # its own: s (burst 1), not h
    # two limits: s refuses the third (its burst), l's counts are given
    # back when cancel is there; either way the request is refused
    assert run("/api", "z") == [200, 200, 429, 429]


def test_binary_remote_addr_keys_ipv4_and_ipv6(nginx):
    """$binary_remote_addr (read from the connection, after realip): each
    IPv4 and IPv6 client its own exact count, its key the address's 4 or
    16 bytes, as other processes sharing the segment spell it."""
    n = nginx()
    n.conf("""
  libsw_zone $binary_remote_addr zone=addr %s capacity=1000 segment=SEG_addr;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Real-IP;
    location /a { libsw_limit zone=addr nodelay; }
  }""" % FIVE)
    n.start()
    clients = ["10.0.%d.%d" % (i // 200, i % 200 + 1) for i in range(60)] + \
        ["2001:db8::%x" % (i + 1) for i in range(60)]
    for ip in clients:
        statuses = [n.get("/a", {"X-Real-IP": ip})[0] for _ in range(7)]
        assert statuses == [200] * 5 + [429] * 2, (ip, statuses)
    assert n.get("/a")[0] == 200  # 127.0.0.1 itself: a client of its own
    rc, out = swctl("list", "--json", "--top", "200", n.seg("addr"))
    assert rc == 0, out
    keys = {e["key"]: (e["kind"], e["pass"], e["block"]) for e in json.loads(out)[0]["top_pass"]}
    want = {ip: ("ipv6" if ":" in ip else "ipv4", 5, 2) for ip in clients}
    want["127.0.0.1"] = ("ipv4", 1, 0)
    assert keys == want
