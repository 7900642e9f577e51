# SPDX-License-Identifier: Apache-2.0
"""libsw.web under real servers: Flask and Django on gunicorn (4 workers),
Starlette (the ASGI middleware) and FastAPI (the dependency) on uvicorn (2
workers), on 127.0.0.1, the workers of each sharing one segment. Rates are
per minute or hour (a burst ends long before a window slides out, however
loaded the machine); nothing is timed: pacing is checked on the turns the
library gives."""
import concurrent.futures
import http.client
import importlib.util
import os
import signal
import subprocess
import time

import pytest
import requests

import libsw
from _webserver import Server

FRAMEWORKS = {
    "flask": ("gunicorn", "flask_app:app", "flask"),
    "django": ("gunicorn", "django_app:application", "django"),
    "starlette": ("uvicorn", "starlette_app:app", "starlette"),
    "fastapi": ("uvicorn", "fastapi_app:app", "fastapi"),
}
for needed in ("requests", "gunicorn", "uvicorn"):
    if importlib.util.find_spec(needed) is None:
        pytestmark = pytest.mark.skip(reason="%s is not installed (bindings/python/run-tests.sh installs it)" % needed)


@pytest.fixture(scope="module", params=sorted(FRAMEWORKS))
def server(request, tmp_path_factory):
    kind, module, package = FRAMEWORKS[request.param]
    if importlib.util.find_spec(package) is None:
        pytest.skip("%s is not installed" % package)
    s = Server(kind, module, tmp_path_factory.mktemp(request.param), workers=4 if kind == "gunicorn" else 2)
    s.name = request.param
    yield s
    s.stop()
    libsw.unlink_segment(s.segment)


def statuses(responses):
    return [r.status_code for r in responses]


def test_exact_passes_per_key_across_workers(server):
    # The kernel decides which worker accepts a connection: bursts on fresh
    # keys go on (up to 5) until two workers have served passes.
    workers = set()
    for attempt in range(5):
        keys = ["key-%d-%d" % (attempt, i) for i in range(4)]
        got = server.burst("/key", keys, 8)   # 4/minute per X-Api-Key
        for k in keys:
            ok = [r for r in got[k] if r.status_code == 200]
            refused = [r for r in got[k] if r.status_code == 429]
            assert len(ok) == 4 and len(refused) == 4, (k, statuses(got[k]))
            workers.update(r.headers["X-Worker"] for r in ok)
            for r in refused:
                ra = int(r.headers["Retry-After"])
                assert 1 <= ra <= 60
                assert r.headers["X-RateLimit-Limit"] == "4"
                assert r.headers["X-RateLimit-Remaining"] == "0"
                assert int(r.headers["X-RateLimit-Reset"]) >= int(time.time())
                assert r.headers["RateLimit-Policy"] == '"4-per-60s";q=4;w=60'
                assert r.headers["RateLimit"].startswith('"4-per-60s";r=0;t=')
            remaining = sorted(int(r.headers["X-RateLimit-Remaining"]) for r in ok)
            assert remaining == [0, 1, 2, 3]
        if len(workers) >= 2:
            break
    # the passes of one key came from several workers: one table, shared exactly
    assert len(workers) >= 2, "one worker served every request: %s" % workers


def test_default_limit_per_client_address(server):
    got = server.burst("/default", ["-"], 8, header=None)["-"]
    assert sorted(statuses(got)) == [200] * 5 + [429] * 3


def test_spoofed_forwarded_for_is_ignored(server):
    # the peer (127.0.0.1) is not a trusted proxy: X-Forwarded-For is never read
    got = [server.get("/default", {"X-Forwarded-For": "203.0.113.%d" % i}) for i in range(4)]
    assert statuses(got) == [429] * 4, "a spoofed X-Forwarded-For bought a new key"
    keys = {k for rule in server.get("/stats").json() for k, _, _ in rule.get("top_keys", [])}
    assert not any(k.startswith("203.0.113.") for k in keys), keys


def test_exempt_route_untouched(server):
    got = [server.get("/health") for _ in range(12)]
    assert statuses(got) == [200] * 12
    for r in got:
        assert "Retry-After" not in r.headers and "RateLimit" not in r.headers


def test_several_rates_all_must_pass(server):
    # 3/minute;10/hour: the minute refuses; the hour counted only the 3 passes
    got = server.burst("/multi", ["m-a", "m-b"], 6)
    for k, rs in got.items():
        assert sorted(statuses(rs)) == [200] * 3 + [429] * 3, (k, statuses(rs))
        for r in rs:
            assert r.headers["RateLimit-Policy"] == '"3-per-60s";q=3;w=60, "10-per-3600s";q=10;w=3600'
        assert all(r.headers["X-RateLimit-Limit"] == "3" and int(r.headers["Retry-After"]) <= 60
                   for r in rs if r.status_code == 429)
    # 10/minute;4/hour: the hour refuses, with a Retry-After beyond the minute
    got = server.burst("/multi-hour", ["h-a"], 6)["h-a"]
    assert sorted(statuses(got)) == [200] * 4 + [429] * 2
    for r in got:
        if r.status_code == 429:
            assert r.headers["X-RateLimit-Limit"] == "4"
            assert 60 < int(r.headers["Retry-After"]) <= 3600
    hour = [s for s in server.get("/stats").json() if s["rate"] == "10/hour"]
    assert sum(s["pass"] for s in hour) == 6 and sum(s["block"] for s in hour) == 0


def test_path_parameter_key(server):
    got = {org: [server.get("/orgs/%s" % org) for _ in range(3)] for org in ("acme", "globex")}
    for org, rs in got.items():
        assert statuses(rs) == [200, 200, 429], org
        assert rs[0].text.strip('"').endswith(org)


def test_statistics_count_every_worker(server):
    stats = {s["rate"] + " " + s["key"]: s for s in server.get("/stats").json()}
    s = stats["4/minute header:X-Api-Key"]
    # the bursts of test_exact_passes_per_key_across_workers: 4 keys each,
    # 4 passes and 4 blocks a key
    assert s["keys"] >= 4 and s["keys"] % 4 == 0, s
    assert s["pass"] == 4 * s["keys"] and s["block"] == 4 * s["keys"], s


def raw_get(server, path, lines):
    """A request with header lines as given (several of one name: what a
    proxy that adds its own line sends)."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        c.putrequest("GET", path)
        for k, v in lines + [("Connection", "close")]:
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def test_trusted_proxy_forwarded_for(server):
    got = [server.get("/proxied", {"X-Forwarded-For": "198.51.100.7, 127.0.0.1"}) for _ in range(3)]
    assert statuses(got) == [200, 200, 429]
    other = server.get("/proxied", {"X-Forwarded-For": "198.51.100.8"})
    assert other.status_code == 200   # the peer is trusted: the client is the header's


def test_a_proxys_own_line_is_believed_not_the_clients(server):
    # the client sends its own X-Forwarded-For line first; the proxy (127.0.0.1, trusted) adds its line
    got = [raw_get(server, "/proxied", [("X-Forwarded-For", "6.6.6.%d" % i), ("X-Forwarded-For", "203.0.113.9")])
           for i in range(3)]
    assert got == [200, 200, 429], "the client's line chose the key"
    # one client, its address in two forms
    v6 = [raw_get(server, "/proxied", [("X-Forwarded-For", a)]) for a in ("[2001:DB8::5]:443", "2001:db8::5",
                                                                            "2001:db8:0::5")]
    assert v6 == [200, 200, 429]


def test_keys_of_any_type_and_failing_key_functions_never_500(server):
    assert statuses(server.get("/int-key") for _ in range(3)) == [200, 200, 429]   # a key function's int
    assert statuses(server.get("/broken-key") for _ in range(3)) == [200] * 3      # raises: served (on_error)


def _past_h11(server, path, headers):
    """A request that uvicorn's h11 parser took whole: h11 refuses a header
    that arrives in pieces over 16 KiB (a 400 and a closed connection,
    often a reset) before the application sees it, so nothing was counted
    and the request is sent again."""
    for _ in range(20):
        try:
            r = server.get(path, headers)
        except requests.ConnectionError:
            continue
        if r.status_code != 400:
            return r
    pytest.fail("uvicorn refused a 100 KB header 20 times")


@pytest.mark.parametrize("server", ["starlette"], indirect=True)  # uvicorn takes a 100 KB header
def test_a_100_kb_key_is_digested_not_a_500(server):
    big = "k" * 100_000
    got = [_past_h11(server, "/key", {"X-Api-Key": big}) for _ in range(5)]
    assert statuses(got) == [200] * 4 + [429]


@pytest.mark.parametrize("server", ["flask", "django"], indirect=True)  # their routes are in those apps
def test_class_based_views_each_their_own_count(server):
    a = [server.get("/cbv-a") for _ in range(3)]
    b = [server.get("/cbv-b") for _ in range(3)]
    assert statuses(a) == [200, 200, 429] and statuses(b) == [200, 200, 429]


@pytest.mark.parametrize("server", ["starlette"], indirect=True)  # its route is in that app
def test_user_key(server):
    alice = [server.get("/me", {"Authorization": "Bearer alice"}) for _ in range(4)]
    bob = server.get("/me", {"Authorization": "Bearer bob"})
    assert statuses(alice) == [200, 200, 200, 429] and bob.status_code == 200
    anonymous = [server.get("/me") for _ in range(5)]  # no user: the rule does not apply
    assert statuses(anonymous) == [200] * 5


@pytest.mark.parametrize("server", ["fastapi"], indirect=True)  # its route is in that app
def test_pacing_waits_under_uvicorn(server):
    n = 5  # 2/second, paced: admissions 500 ms apart, whatever the worker
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        got = list(pool.map(lambda _: server.get("/paced", {"X-Api-Key": "pace"}), range(n)))
    assert statuses(got) == [200] * n
    waits = sorted(float(r.headers["X-Waited"]) for r in got)
    turns = sorted(float(r.headers["X-Admitted-At"]) for r in got)  # each decision's time + the wait it was told
    print("pacing: waited %s s, turns %s" % (waits, [round(t - turns[0], 3) for t in turns]))
    # one pacing state for both workers: the turns the library gave are 500 ms apart (its clock's ms)
    assert all(abs((b - a) - 0.5) <= 0.005 for a, b in zip(turns, turns[1:])), turns
    assert waits[0] <= 0.5 and all(0 <= w <= 30 for w in waits)
    assert len({r.headers["X-Worker"] for r in got}) >= 1


def test_gunicorn_refuses_to_start_with_a_bad_rate(tmp_path):
    """A bad rate stops the workers at boot: gunicorn exits, its log names the value."""
    import subprocess

    from _webserver import command, free_port, segment_name

    log = tmp_path / "bad.log"
    env = dict(os.environ, LIBSW_WEB_SEGMENT=segment_name("bad"), LIBSW_WEB_DEFAULT="0/second")
    with open(log, "wb") as out:
        p = subprocess.Popen(command("gunicorn", "flask_app:app", free_port(), 2), env=env, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise AssertionError("gunicorn still runs with a bad rate:\n" + log.read_text())
    text = log.read_text()
    assert rc != 0 and "rate '0/second'" in text, text[-3000:]


def start_and_wait(args, env, log, timeout=120):
    """Run a server that must refuse to start: its exit code and output."""
    with open(log, "wb") as out:
        p = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise AssertionError("the server still runs:\n" + log.read_text()[-3000:])
    return rc, log.read_text()


def test_django_under_gunicorn_stops_at_start_up_on_a_segment_it_cannot_make(tmp_path):
    from _webserver import command, free_port

    env = dict(os.environ, LIBSW_WEB_SEGMENT="/nonexistent-lswt/dir/seg")
    rc, text = start_and_wait(command("gunicorn", "django_app:application", free_port(), 2), env,
                              tmp_path / "bad.log")
    assert rc != 0 and "nonexistent-lswt" in text, text[-3000:]


def test_reset_once_under_four_gunicorn_workers(tmp_path):
    s = Server("gunicorn", "flask_app:app", tmp_path, workers=4, env={"LIBSW_WEB_RESET": "1"})
    try:
        got = s.burst("/default", ["-"], 20, header=None, threads=8)["-"]
        # every worker booted with reset=True: one reset for the deployment, one table for all
        assert sorted(statuses(got)) == [200] * 5 + [429] * 15
    finally:
        s.stop()
        libsw.unlink_segment(s.segment)   # (its reset mark too)


TINY_APP = """
import os
import flask
from libsw.web.flask import Limiter

app = flask.Flask(__name__)
limiter = Limiter(app, key="global", default="2/minute")   # the default segment


@app.route("/health")
@limiter.exempt
def health():
    return flask.Response("ok", headers={"X-Worker": str(os.getpid())})


@app.route("/")
def index():
    return "hello"


@app.route("/segment")
@limiter.exempt
def segment():
    return limiter.core.segment
"""


def test_two_applications_of_one_name_have_their_own_default_segment(tmp_path):
    servers = []
    for sub in ("one", "two"):
        d = tmp_path / sub
        d.mkdir()
        (d / "app.py").write_text(TINY_APP)
        servers.append(Server("gunicorn", "app:app", d, workers=2, env={"PYTHONPATH": str(d)}, chdir=str(d)))
    try:
        got = [statuses(s.get("/") for _ in range(3)) for s in servers]
        segs = [s.get("/segment").text for s in servers]
        assert got == [[200, 200, 429]] * 2 and segs[0] != segs[1], (got, segs)
    finally:
        for s in servers:
            s.stop()
        for seg in segs if "segs" in dir() else []:
            libsw.unlink_segment(seg)
