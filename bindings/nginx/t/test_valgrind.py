# SPDX-License-Identifier: Apache-2.0
"""The module under valgrind memcheck: nginx with master_process off (one
process, in the foreground), every path of the handler taken (pass,
refusal, delay, dry run, no key, a breaker opening and probing), then
stopped by its PID (SIGQUIT): no error, nothing definitely lost."""
import os
import re
import time

from conftest import free_port


def test_module_under_memcheck(nginx):
    n = nginx(master=False, workers=1)
    vlog = os.path.join(n.dir, "valgrind.log")
    n.conf("""
  libsw_zone $http_x_client zone=p:1m rate=1r/m burst=1 segment=SEG_p;
  libsw_zone $http_x_client zone=w rate=2r/s window=10s windows=1 mode=window dry_run segment=SEG_w;
  libsw_zone zone=site rate=100r/s mode=window segment=SEG_site;
  libsw_zone $http_x_client zone=slow rate=10r/s burst=5 segment=SEG_slow;
  libsw_breaker_zone be error_count=1 min_requests=2 interval=10s windows=10 open_for=200ms segment=SEG_be;
  server {
    listen 127.0.0.1:PORT;
    root DIR/html;
    access_log DIR/access.log libsw;
    libsw_ratelimit_headers on;
    location /a { libsw_limit zone=site; libsw_limit zone=p nodelay; libsw_limit zone=w; }
    location /b { libsw_limit zone=slow; }
    location /api { libsw_limit zone=site; libsw_breaker be; proxy_pass http://127.0.0.1:%d; }
  }""" % free_port())
    n.start(wrapper=["valgrind", "--tool=memcheck", "--leak-check=full",
                     "--errors-for-leak-kinds=none", "--trace-children=no",
                     "--log-file=" + vlog], timeout=120)
    try:
        statuses = [n.get("/a", {"X-Client": "x"})[0] for _ in range(4)]
        assert statuses == [200, 200, 429, 429]
        assert n.get("/a")[0] == 200                       # no key
        assert [n.get("/b", {"X-Client": "y"})[0] for _ in range(3)] == [200] * 3  # delayed
        got = [n.get("/api")[0] for _ in range(3)]
        assert got == [502, 502, 503]
        time.sleep(0.3)
        assert n.get("/api")[0] == 502                     # the probe
        assert "DELAYED" in n.access_log() and "REJECTED" in n.access_log()
    finally:
        n.stop()
    assert n.proc.returncode == 0, n.error_log()
    with open(vlog) as f:
        text = f.read()
    summary = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    assert summary and summary.group(1) == "0", text[-4000:]
    # nginx itself leaks a little at exit (ngx_set_environment): only a loss
    # record with a frame of the module or of libsw counts
    records = re.split(r"==\d+== \n", text)
    ours = [r for r in records if "definitely lost" in r and ("libsw" in r or " sw_" in r)]
    assert not ours, "\n".join(ours)
