# SPDX-License-Identifier: Apache-2.0
"""libsw.web in one process: rates and their windows on a ManualClock (every
rate form, exactly), key functions and trusted proxies, responses and
their fields, logging once per interval, dry run, waits (asyncio.sleep in
ASGI), bad configuration at start-up. Real servers: test_web_servers.py."""
import asyncio
import logging
import os
import subprocess
import sys
import uuid

import pytest

import libsw
from libsw.web import (Limiter, RateLimitMiddleware, Request, WSGIRateLimitMiddleware, header, key_function,
                       parse_rate, parse_rates, path_param, remote_address, retry_after_header, user)

T0 = 86_400_000 * 125  # ms, a multiple of every period below (windows start at T0)


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


def wsgi_get(app, path="/", ip="10.0.0.1", **headers):
    got = []
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "REMOTE_ADDR": ip}
    env.update({"HTTP_" + k.upper(): v for k, v in headers.items()})
    body = app(env, lambda s, h, e=None: got.append((int(s[:3]), dict(h))))
    data = b"".join(body)
    getattr(body, "close", lambda: None)()
    return got[0][0], got[0][1], data


def req(peer="10.0.0.1", headers=None, params=None, who=None):
    h = {k.lower(): v for k, v in (headers or {}).items()}
    return Request("GET", "/", peer, h, params, who)


# ------------------------------------------------------------------ rates


@pytest.mark.parametrize("text,count,period_ms", [
    ("5/second", 5, 1000), ("100/minute", 100, 60_000), ("1000/hour", 1000, 3_600_000),
    ("10 per 2 seconds", 10, 2000), ("10/2s", 10, 2000), ("3 per day", 3, 86_400_000),
    ("7 / 500 ms", 7, 500), ("20 per 1 Minute", 20, 60_000),
])
def test_rate_strings(text, count, period_ms):
    r = parse_rate(text)
    assert (r.count, r.period_ms, r.windows) == (count, period_ms, 10)


@pytest.mark.parametrize("bad", ["0/second", "-5/second", "5/fortnight", "five/second", "5.5/minute",
                                 "10 per 0 seconds", "5", "", "5/second;5/second", "5000000000/second"])
def test_bad_rates_name_the_value(bad):
    with pytest.raises(ValueError) as e:
        parse_rates(bad)
    assert repr(bad) in str(e.value) or (bad and bad.split(";")[0] in str(e.value))


def test_several_rates_sorted_shortest_first():
    rs = parse_rates("1000/hour; 5/second, 100/minute")
    assert [r.period_ms for r in rs] == [1000, 60_000, 3_600_000]
    assert parse_rates(["5/second", "100/minute"]) == parse_rates("5/second;100/minute")


@pytest.mark.parametrize("text", ["5/second", "100/minute", "1000/hour", "10 per 2 seconds"])
def test_exact_passes_per_period(text):
    """N per period, exactly: a burst gets N; one window after the period,
    the first window's passes have slid out; at no time more than N within
    P - P/10."""
    rate = parse_rate(text)
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, key="ip")
    rules = lim.rules("r", text)
    outs = [lim.enter(req(), rules) for _ in range(rate.count + 3)]
    assert [o.allowed for o in outs] == [True] * rate.count + [False] * 3
    refused = outs[-1]
    assert refused.retry_after == pytest.approx(rate.period, rel=1e-3)
    assert refused.headers(None) == [("Retry-After", str(int(rate.period)) if rate.period >= 1 else "1")]
    for o in outs:
        o.release()
    clock.advance(rate.period_ms - rate.period_ms // 10)   # 9 windows later: all still in the interval
    assert not lim.enter(req(), rules).allowed
    clock.advance(rate.period_ms // 10)                     # the first window slid out
    again = [lim.enter(req(), rules).allowed for _ in range(rate.count + 1)]
    assert again == [True] * rate.count + [False]


def test_windows_option():
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, windows=2)
    (rule,) = lim.rules("r", "4/minute")
    assert rule.lim.keyed_stats().windows == 2
    with pytest.raises(ValueError, match="windows=3"):
        Limiter(segment=None, windows=3).rules("r", "4/minute")


def test_retry_after_whole_seconds_rounded_up():
    assert [retry_after_header(s) for s in (0.0004, 0.5, 1.0, 1.001, 59.2, float("inf"))] == \
        ["1", "1", "1", "2", "60", "3600"]


def test_all_rates_must_pass_and_longer_ones_count_only_passes():
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, headers="both")
    rules = lim.rules("r", "3/minute;5/hour")
    got = [lim.enter(req(), rules) for _ in range(5)]
    assert [o.allowed for o in got] == [True, True, True, False, False]
    assert got[3].rule.rate.text == "3/minute"
    minute, hour = rules
    assert hour.lim.keyed_stats().pass_ == 3 and hour.lim.keyed_stats().block == 0
    clock.advance(60_000)
    got = [lim.enter(req(), rules) for _ in range(3)]
    assert [o.allowed for o in got] == [True, True, False]
    h = dict(got[2].headers("both"))
    assert got[2].rule is hour and h["X-RateLimit-Limit"] == "5"
    assert 60 < int(h["Retry-After"]) <= 3600
    assert h["RateLimit-Policy"] == '"3-per-60s";q=3;w=60, "5-per-3600s";q=5;w=3600'
    assert h["RateLimit"] == '"5-per-3600s";r=0;t=%s' % h["Retry-After"]


def test_pass_headers_name_the_rule_nearest_its_limit():
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock)
    rules = lim.rules("r", "10/second;12/minute")
    for _ in range(9):
        lim.enter(req(), rules).release()
    out = lim.enter(req(), rules)
    h = dict(out.headers("x"))
    assert out.allowed and h["X-RateLimit-Limit"] == "10" and h["X-RateLimit-Remaining"] == "0"
    fresh = Limiter(segment=None, clock=clock)   # at T0 a window starts: its passes leave in 60 s
    h = dict(fresh.enter(req(), fresh.rules("t", "3/minute")).headers("ietf"))
    assert h["RateLimit"] == '"3-per-60s";r=2;t=60'


# ------------------------------------------------------------------- keys


def test_remote_address_never_trusts_the_header_by_default():
    k = remote_address()
    assert k(req("10.0.0.1", {"X-Forwarded-For": "1.2.3.4"})) == "10.0.0.1"
    assert k(req("10.0.0.1", {"Forwarded": "for=1.2.3.4"})) == "10.0.0.1"


def test_remote_address_behind_trusted_proxies():
    k = remote_address(trusted_proxies=["10.0.0.0/8", "::1"])
    # the nearest untrusted hop is the client; what a client prepends is ignored
    assert k(req("10.0.0.1", {"X-Forwarded-For": "6.6.6.6, 1.2.3.4, 10.0.0.7"})) == "1.2.3.4"
    assert k(req("::1", {"X-Forwarded-For": "2001:db8::1"})) == "2001:db8::1"
    assert k(req("10.0.0.1")) == "10.0.0.1"                                   # no header: the proxy
    assert k(req("192.0.2.1", {"X-Forwarded-For": "1.2.3.4"})) == "192.0.2.1"  # an untrusted peer
    assert k(req("10.0.0.1", {"X-Forwarded-For": "garbage, 1.2.3.4"})) == "1.2.3.4"
    assert k(req("10.0.0.1", {"X-Forwarded-For": "1.2.3.4, garbage"})) == "10.0.0.1"
    f = remote_address(trusted_proxies="10.0.0.0/8", header="Forwarded")
    assert f(req("10.0.0.1", {"Forwarded": 'for=5.6.7.8;proto=https, for="[2001:db8::2]:4711"'})) == "2001:db8::2"
    assert f(req("10.0.0.1", {"X-Forwarded-For": "1.2.3.4"})) == "10.0.0.1"   # the other header is not read
    with pytest.raises(ValueError, match="'not-a-net'"):
        remote_address(trusted_proxies=["not-a-net"])
    with pytest.raises(ValueError, match="X-Real-IP"):
        remote_address(trusted_proxies=["10.0.0.1"], header="X-Real-IP")


def test_other_key_functions():
    assert header("X-Api-Key")(req(headers={"X-Api-Key": "k1"})) == "k1"
    assert header("X-Api-Key")(req()) is None
    assert header("X-Api-Key", fallback=remote_address())(req()) == "10.0.0.1"
    assert path_param("org")(req(params={"org": "acme"})) == "acme"
    assert user()(req(who="alice")) == "user:alice" and user()(req()) is None
    assert user(fallback=remote_address())(req()) == "10.0.0.1"
    assert key_function("user_or_ip")(req()) == "10.0.0.1"
    assert key_function("global")(req()) == "*"
    assert key_function("header:X-Tenant")(req(headers={"X-Tenant": "t"})) == "t"
    assert key_function("os.getcwd") is os.getcwd
    assert key_function(lambda r: "c")(req()) == "c"


@pytest.mark.parametrize("bad", ["ipp", "header", "nosuchmodule.fn", "os.nosuchfn"])
def test_unknown_key_function_names_it(bad):
    with pytest.raises(ValueError) as e:
        key_function(bad)
    assert repr(bad) in str(e.value)


def test_a_key_function_that_raises_is_logged_once_and_serves(caplog):
    def broken(r):
        raise KeyError("boom")

    lim = Limiter(segment=None, key=broken, default="1/minute")
    app = WSGIRateLimitMiddleware(hello, lim)
    with caplog.at_level(logging.ERROR, logger="libsw"):
        assert [wsgi_get(app)[0] for _ in range(5)] == [200] * 5
    assert len([r for r in caplog.records if "raised" in r.getMessage()]) == 1
    closed = WSGIRateLimitMiddleware(hello, Limiter(segment=None, key=broken, default="1/minute",
                                                    on_error="closed"))
    assert wsgi_get(closed)[0] == 429


# -------------------------------------------------------------- middleware


def test_wsgi_routes_exempt_and_custom_response():
    clock = libsw.ManualClock(T0)

    def mine(request, outcome):
        return 503, {"Content-Type": "application/json", "Retry-After": "7"}, '{"slow": "down"}'

    app = WSGIRateLimitMiddleware(hello, segment=None, clock=clock, default="2/minute", headers="x",
                                  limits={"POST /login": "1/minute", "/orgs/{org}/*": {"rates": "1/minute",
                                                                                       "key": "path:org"}},
                                  exempt=["/health", "/static/*"], response=mine)
    assert [wsgi_get(app, "/health")[0] for _ in range(5)] == [200] * 5
    assert [wsgi_get(app, "/static/a.css")[0] for _ in range(5)] == [200] * 5
    assert [wsgi_get(app, "/x")[0] for _ in range(3)] == [200, 200, 503]
    status, h, body = wsgi_get(app, "/y")
    assert (status, h["Retry-After"], body) == (503, "7", b'{"slow": "down"}')   # the hook's own field wins
    assert h["X-RateLimit-Limit"] == "2"
    assert [wsgi_get(app, "/orgs/a/x")[0], wsgi_get(app, "/orgs/a/y")[0], wsgi_get(app, "/orgs/b/x")[0]] == \
        [200, 503, 200]


def test_wsgi_releases_when_the_response_is_closed():
    lim = Limiter(segment=None, default="100/minute")
    app = WSGIRateLimitMiddleware(hello, lim)
    wsgi_get(app)
    s = lim.default[0].lim.keyed_stats()
    assert s.success == 1 and s.exception == 0

    def broken(environ, start_response):
        raise RuntimeError("app failed")

    app = WSGIRateLimitMiddleware(broken, lim)
    with pytest.raises(RuntimeError):
        wsgi_get(app)
    assert lim.default[0].lim.keyed_stats().exception == 1


def asgi_app(record=None):
    async def app(scope, receive, send):
        if record is not None:
            record.append(scope["state"]["libsw"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"hello"})
    return app


async def asgi_get(app, path="/", client="10.0.0.1", headers=()):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(m):
        sent.append(m)

    scope = {"type": "http", "method": "GET", "path": path, "client": (client, 5555),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}
    await app(scope, receive, send)
    return sent[0]["status"], {k.decode(): v.decode() for k, v in sent[0]["headers"]}


def test_asgi_middleware_and_lifespan_passthrough():
    clock = libsw.ManualClock(T0)
    got = []
    app = RateLimitMiddleware(asgi_app(got), segment=None, clock=clock, default="2/minute", headers="ietf")

    async def main():
        out = [await asgi_get(app) for _ in range(3)]
        passed = []

        async def inner(scope, receive, send):
            passed.append(scope["type"])

        await RateLimitMiddleware(inner, segment=None, default="1/minute")({"type": "lifespan"}, None, None)
        return out, passed

    out, passed = asyncio.run(main())
    assert [s for s, _ in out] == [200, 200, 429]
    assert out[0][1]["ratelimit"] == '"2-per-60s";r=1;t=60' and out[2][1]["retry-after"] == "60"
    assert passed == ["lifespan"] and len(got) == 2 and got[0].allowed


def test_asgi_pacing_waits_with_asyncio_sleep():
    """Pacing waits in ASGI are asyncio.sleep: the loop runs other tasks meanwhile."""
    lim = Limiter(segment=None, default="5/second", behavior="pacing", max_queue=5)
    app = RateLimitMiddleware(asgi_app(), lim)
    ticks = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(1)
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        t = asyncio.ensure_future(ticker(stop))
        got = await asyncio.gather(*[asgi_get(app) for _ in range(4)])
        stop.set()
        await t
        return got

    loop_ticks_before = len(ticks)
    got = asyncio.run(main())
    assert [s for s, _ in got] == [200] * 4
    assert len(ticks) - loop_ticks_before > 3  # 600 ms of pacing: the loop ran the ticker meanwhile


def test_wsgi_wait_instead_of_429_sleeps_with_the_rules_clock():
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, default="2/minute", wait=120)
    app = WSGIRateLimitMiddleware(hello, lim)
    assert [wsgi_get(app)[0] for _ in range(3)] == [200] * 3
    assert sum(clock.sleeps) == pytest.approx(60.0, abs=0.1)   # the third waited for the first window to leave


def test_dry_run_serves_counts_and_logs_once(caplog):
    lim = Limiter(segment=None, default="2/minute", dry_run=True, log_interval=3600)
    app = WSGIRateLimitMiddleware(hello, lim)
    with caplog.at_level(logging.WARNING, logger="libsw"):
        assert [wsgi_get(app)[0] for _ in range(6)] == [200] * 6
        lim.audit()
        lim.audit()
        assert [wsgi_get(app)[0] for _ in range(3)] == [200] * 3
        lim.audit()
    assert lim.stats()[0]["would_block"] == 7
    lines = [r.getMessage() for r in caplog.records if "dry run" in r.getMessage()]
    assert len(lines) == 1 and "would have refused 4" in lines[0], lines
    lim.set_dry_run(False)
    assert wsgi_get(app)[0] == 429


def test_full_key_table_logged_once_per_interval(caplog):
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, default="5/minute", capacity=4, on_full="closed", log_interval=3600)
    app = WSGIRateLimitMiddleware(hello, lim)
    with caplog.at_level(logging.WARNING, logger="libsw"):
        got = [wsgi_get(app, ip="10.0.%d.%d" % (i // 250, i % 250))[0] for i in range(200)]
        lim.audit()
    assert 429 in got
    lines = [r.getMessage() for r in caplog.records if "full" in r.getMessage()]
    assert len(lines) == 1 and "on_full='closed'" in lines[0] and "capacity=4" in lines[0], lines


def test_throttle_counts_what_it_held(caplog):
    from libsw.web._log import Throttle

    now = [0.0]
    t = Throttle(60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="libsw"):
        assert [t.emit(logging.WARNING, "redis", "down") for _ in range(5)] == [True] + [False] * 4
        assert t.emit(logging.WARNING, "other", "kind")
        now[0] = 61
        assert t.emit(logging.WARNING, "redis", "down")
    assert [r.getMessage() for r in caplog.records] == ["libsw: down", "libsw: kind",
                                                        "libsw: down (and 4 more since the last such line)"]


def test_stats_and_top_keys():
    lim = Limiter(segment=None, default="3/minute")
    app = WSGIRateLimitMiddleware(hello, lim)
    for ip in ["1.1.1.1"] * 4 + ["2.2.2.2"]:
        wsgi_get(app, ip=ip)
    (s,) = lim.stats(top=2)
    assert (s["pass"], s["block"], s["keys"], s["rate"], s["key"]) == (4, 1, 2, "3/minute", "remote_address")
    assert s["top_keys"][0] == ("1.1.1.1", 3, 1)


# -------------------------------------------------- segments, configuration


def test_segment_shared_between_limiters_of_two_processes(tmp_path):
    seg = "lswt-seg-%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
    code = ("import libsw.web as w, sys\n"
            "lim = w.Limiter(segment=%r, key='global')\n"
            "r = lim.rules('shared', '5/minute')\n"
            "print(sum(lim.enter(w.Request('GET', '/', None, {}), r).allowed for _ in range(4)))\n" % seg)
    try:
        outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
                for _ in range(2)]
        assert [o.stdout.strip() for o in outs] == ["4", "1"], [o.stderr for o in outs]
    finally:
        libsw.unlink_segment(seg)


def test_rules_of_other_windows_share_a_segment_name():
    seg = "lswt-w-%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
    try:
        lim = Limiter(segment=seg)
        a, = lim.rules("a", "5/minute")
        b, = lim.rules("b", "5/minute", windows=2)   # another geometry: in "<segment>-w2"
        assert a.lim.segment_name == seg and b.lim.segment_name == seg + "-w2"
        assert b.lim.keyed_stats().windows == 2
    finally:
        libsw.unlink_segment(seg)
        libsw.unlink_segment(seg + "-w2")


def test_default_segment_name():
    assert libsw.web.default_segment("my app/v2!", "/srv/a").startswith("libsw-web-%d-myappv2-" % os.getuid())
    assert Limiter(app_name="x", app_path="/srv/a", segment="default").segment == \
        libsw.web.default_segment("x", "/srv/a")


def test_segment_name_too_long_for_its_keys():
    with pytest.raises(ValueError, match="too long"):
        Limiter(segment="s" * 60).rules("r", "1/second")


@pytest.mark.parametrize("kwargs,needle", [
    (dict(default="0/second"), "'0/second'"),
    (dict(default="-1/minute"), "'-1/minute'"),
    (dict(default="5/fortnight"), "'fortnight'"),
    (dict(key="ipp"), "'ipp'"),
    (dict(headers="yes"), "'yes'"),
    (dict(behavior="slow"), "'slow'"),
    (dict(on_error="maybe"), "'maybe'"),
])
def test_bad_configuration_fails_at_construction(kwargs, needle):
    with pytest.raises(ValueError) as e:
        Limiter(segment=None, **kwargs)
    assert needle in str(e.value)


def test_a_refused_rule_is_logged(caplog):
    with caplog.at_level(logging.ERROR, logger="libsw"), pytest.raises(ValueError):
        Limiter(segment=None, default="0/second")
    assert any("rule refused for default: rate '0/second'" in r.getMessage() for r in caplog.records)


FRAMEWORK_BAD = {
    "flask": ("import flask\nfrom libsw.web.flask import Limiter\napp = flask.Flask('x')\n"
              "lim = Limiter(app, segment=None)\n@app.route('/')\n@lim.limit('0/second')\ndef v(): pass\n",
              "'0/second'", "flask"),
    "flask-config": ("import flask\nfrom libsw.web.flask import Limiter\napp = flask.Flask('x')\n"
                     "app.config['LIBSW_RATELIMIT'] = {'segment': None, 'key': 'ipp'}\nLimiter(app)\n",
                     "'ipp'", "flask"),
    "django": ("from django.conf import settings\n"
               "settings.configure(ROOT_URLCONF='__main__', SECRET_KEY='x', "
               "MIDDLEWARE=['libsw.web.django.RateLimitMiddleware'], "
               "LIBSW_RATELIMIT={'segment': None, 'default': '5/fortnight'})\nurlpatterns = []\n"
               "from django.core.wsgi import get_wsgi_application\nget_wsgi_application()\n",
               "'fortnight'", "django"),
    "django-view": ("from django.conf import settings\n"
                    "settings.configure(ROOT_URLCONF='__main__', SECRET_KEY='x', "
                    "MIDDLEWARE=['libsw.web.django.RateLimitMiddleware'], LIBSW_RATELIMIT={'segment': None})\n"
                    "from libsw.web.django import ratelimit\n"
                    "@ratelimit('-3/minute')\ndef v(request): pass\n", "'-3/minute'", "django"),
    "starlette": ("from starlette.applications import Starlette\nfrom libsw.web import RateLimitMiddleware\n"
                  "RateLimitMiddleware(Starlette(), segment=None, limits={'/a': {'rates': '5/second', "
                  "'key': 'header'}})\n", "'header'", "starlette"),
    "fastapi": ("from libsw.web import Limiter\nfrom libsw.web.fastapi import RateLimit\n"
                "RateLimit('5 per -2 seconds', limiter=Limiter(segment=None))\n", "'5 per -2 seconds'",
                "fastapi"),
}


@pytest.mark.parametrize("case", sorted(FRAMEWORK_BAD))
def test_bad_configuration_fails_at_start_up(case):
    code, needle, package = FRAMEWORK_BAD[case]
    pytest.importorskip(package)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "ValueError" in p.stderr and needle in p.stderr, p.stderr[-2000:]


def test_asgi_entry_ends_when_the_application_returns_raises_or_is_cancelled():
    lim = Limiter(segment=None, default="100/minute")
    assert asyncio.iscoroutinefunction(RateLimitMiddleware(asgi_app(), lim).__call__)   # uvicorn: ASGI 3

    async def broken(scope, receive, send):
        raise RuntimeError("app failed")

    async def slow(scope, receive, send):
        await asyncio.sleep(10)

    async def main():
        await asgi_get(RateLimitMiddleware(asgi_app(), lim))
        with pytest.raises(RuntimeError):
            await asgi_get(RateLimitMiddleware(broken, lim))
        task = asyncio.ensure_future(asgi_get(RateLimitMiddleware(slow, lim)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    s = lim.default[0].lim.keyed_stats()
    assert (s.pass_, s.success, s.exception) == (3, 3, 2)   # every entry ended; the failed and the cancelled one as errors


class _PyPathMiddleware(RateLimitMiddleware):
    """A subclass: its calls go to the Python __call__ (the class's own go to C)."""


def _python_calls_of_call(fn):
    """fn()'s result and how many times a Python __call__ of libsw.web's ASGI middleware ran."""
    n = []

    def prof(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_name == "__call__" and code.co_filename.endswith("_asgi.py"):
            n.append(1)

    sys.setprofile(prof)
    try:
        return fn(), len(n)
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("cls", [RateLimitMiddleware, _PyPathMiddleware])
def test_asgi_fields_added_to_a_copy_of_list_or_tuple_headers(cls):
    """The C path (the class) and the Python one (a subclass) alike: the
    response's start gets the fields whether its headers are a list or a
    tuple, the application's own fields kept, its message and header list
    never changed (a Response object sent again keeps no field of an
    earlier request); a field the application sets is not added."""
    own_list = [(b"content-type", b"text/plain")]
    own_tuple = ((b"content-type", b"text/plain"), (b"X-RateLimit-Limit", b"mine"))
    messages = []

    def app_with(headers):
        async def app(scope, receive, send):
            m = {"type": "http.response.start", "status": 200, "headers": headers}
            messages.append(m)
            await send(m)
            await send({"type": "http.response.body", "body": b"x"})
        return app

    lim = Limiter(segment=None, default="5/minute", headers="both")
    got, calls = _python_calls_of_call(lambda: asyncio.run(_gets([
        (cls(app_with(own_list), lim), {}), (cls(app_with(own_tuple), lim), {}), (cls(app_with(own_list), lim), {})])))
    assert calls == (0 if cls is RateLimitMiddleware else 3)
    (s1, h1), (s2, h2), (s3, h3) = got
    assert s1 == s2 == s3 == 200
    assert h1["content-type"] == "text/plain" and h1["x-ratelimit-limit"] == "5"
    assert h1["x-ratelimit-remaining"] == "4" and h3["x-ratelimit-remaining"] == "2"
    assert h1["ratelimit-policy"] == '"5-per-60s";q=5;w=60' and h1["ratelimit"].startswith('"5-per-60s";r=4;t=')
    assert h2["x-ratelimit-limit"] == "mine" and h2["x-ratelimit-remaining"] == "3"   # the application's own kept
    assert own_list == [(b"content-type", b"text/plain")] and len(own_tuple) == 2
    assert all(m["headers"] is own_list or m["headers"] is own_tuple for m in messages) and len(messages) == 3
    assert all(set(m) == {"type", "status", "headers"} for m in messages)


async def _gets(apps_and_scopes):
    """(status, headers) of one request of each (app, scope items) in turn;
    headers: the response's start's, by lower-case name (each name once)."""
    out = []
    for app, extra in apps_and_scopes:
        sent = []

        async def receive():
            return {"type": "http.request", "body": b""}

        async def send(m, sent=sent):
            sent.append(m)

        scope = {"type": "http", "method": "GET", "path": "/", "client": ("10.0.0.1", 5555), "headers": []}
        scope.update(extra)
        scope = {k: v for k, v in scope.items() if v is not _ABSENT}
        await app(scope, receive, send)
        fields = {k.decode().lower(): v.decode() for k, v in sent[0]["headers"]}
        assert len(fields) == len(sent[0]["headers"])
        out.append((sent[0]["status"], fields))
    return out


_ABSENT = object()


@pytest.mark.parametrize("cls", [RateLimitMiddleware, _PyPathMiddleware])
def test_asgi_client_address_key_of_every_scope_form(cls):
    """The client address as the key, read in C or in Python alike: a tuple
    or a list, no client (None or absent: "-"); a state of None replaced;
    the outcome in scope["state"]["libsw"]."""
    lim = Limiter(segment=None, default="100/minute")
    app = cls(asgi_app(), lim)
    forms = [{"client": ("10.0.0.2", 1)}, {"client": ["10.0.0.3", 1]}, {"client": None}, {"client": _ABSENT},
             {"client": ("10.0.0.2", 2), "state": None}]
    got = asyncio.run(_gets([(app, f) for f in forms]))
    assert [s for s, _ in got] == [200] * 5
    (s,) = lim.stats(top=5)
    assert sorted(k[:2] for k in s["top_keys"]) == [("-", 2), ("10.0.0.2", 2), ("10.0.0.3", 1)]
    state = {}
    rec = []
    asyncio.run(_gets([(cls(asgi_app(rec), lim), {"state": state})]))
    assert state["libsw"] is rec[0] and rec[0].allowed


def test_wsgi_start_response_of_the_fast_path_takes_exc_info_and_keeps_the_apps_fields():
    def app(environ, start_response):
        start_response("200 OK", [("X-RateLimit-Limit", "mine")], exc_info=None)
        return iter([b"a", b"b"])

    lim = Limiter(segment=None, default="5/minute", headers="x")
    status, headers, body = wsgi_get(WSGIRateLimitMiddleware(app, lim))
    assert (status, body) == (200, b"ab") and headers["X-RateLimit-Limit"] == "mine"
    assert headers["X-RateLimit-Remaining"] == "4"
