# SPDX-License-Identifier: Apache-2.0
"""What Flask-Limiter, slowapi and django-ratelimit users reach for, with
their names: ``methods``, ``cost``, ``exempt_when``, ``deduct_when``,
``shared_limit`` (Django: ``scope=``), callable rates, ``enabled``; and all
or nothing across a request's rates (a request one rate refuses is
counted by none). The tests of cancel (all or nothing, deduct_when) skip
while the C library's sw_keyed_cancel reports SW_ENOTSUP."""
import asyncio
import subprocess
import sys
import textwrap

import pytest

import libsw
from libsw.web import Limiter, RateLimitMiddleware, Request, WSGIRateLimitMiddleware

T0 = 86_400_000 * 125


def cancel_supported():
    lim = libsw.RateLimiter(5, capacity=4)
    p = lim.try_acquire(key="k")
    try:
        p.cancel()
    except libsw.NotSupportedError:
        return False
    return True


needs_cancel = pytest.mark.skipif(not cancel_supported(), reason="sw_keyed_cancel: SW_ENOTSUP (not built yet)")


def hello(environ, start_response):
    start_response("200 OK", [])
    return [b"ok"]


def login(environ, start_response):
    """401 unless the password is right."""
    ok = environ.get("HTTP_X_PASSWORD") == "right"
    start_response("200 OK" if ok else "401 Unauthorized", [])
    return [b"in" if ok else b"no"]


def wsgi(app, method="GET", path="/", **headers):
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "REMOTE_ADDR": "10.0.0.1"}
    env.update({"HTTP_" + k.upper(): v for k, v in headers.items()})
    got = []
    body = app(env, lambda s, h, e=None: got.append(int(s[:3])))
    b"".join(body)
    getattr(body, "close", lambda: None)()
    return got[0]


def req(method="GET"):
    return Request(method, "/", "10.0.0.1", {})


# -------------------------------------------------------------- methods


def test_methods_limit_only_those_methods():
    app = WSGIRateLimitMiddleware(hello, segment=None, limits={"/login": {"rates": "1/minute", "methods": ["post"]}})
    assert [wsgi(app, "GET", "/login") for _ in range(3)] == [200] * 3
    assert [wsgi(app, "POST", "/login") for _ in range(2)] == [200, 429]
    with pytest.raises(ValueError, match="FETCH"):
        Limiter(segment=None).rules("r", "1/minute", methods=["FETCH"])


# ----------------------------------------------------------------- cost


def test_cost_counts_several_units_per_request():
    lim = Limiter(segment=None)
    heavy = lim.rules("heavy", "5/minute", cost=2)
    assert [lim.enter(req(), heavy).allowed for _ in range(3)] == [True, True, False]
    by_size = lim.rules("size", "10/minute", cost=lambda r: int(r.header("x-size") or 1))
    big = Request("GET", "/", "10.0.0.2", {"x-size": "6"})
    assert [lim.enter(big, by_size).allowed for _ in range(2)] == [True, False]
    free = lim.rules("free", "1/minute", cost=0)
    assert all(lim.enter(req(), free).allowed for _ in range(5))
    with pytest.raises(ValueError, match="cost=-1"):
        lim.rules("bad", "1/minute", cost=-1)


# ---------------------------------------------------------- exempt_when


def test_exempt_when_with_or_without_the_request():
    lim = Limiter(segment=None)
    on = [False]
    flag = lim.rules("flag", "1/minute", exempt_when=lambda: on[0])            # Flask-Limiter's form
    admin = lim.rules("admin", "1/minute", exempt_when=lambda r: r.header("x-admin") == "yes")
    assert [lim.enter(req(), flag).allowed for _ in range(2)] == [True, False]
    on[0] = True
    assert lim.enter(req(), flag).allowed
    a = Request("GET", "/", "10.0.0.1", {"x-admin": "yes"})
    assert all(lim.enter(a, admin).allowed for _ in range(3))
    assert [lim.enter(req(), admin).allowed for _ in range(2)] == [True, False]


# ---------------------------------------------------------- deduct_when


@needs_cancel
def test_deduct_when_counts_only_failed_logins_wsgi_and_asgi():
    app = WSGIRateLimitMiddleware(login, segment=None, limits={
        "/login": {"rates": "2/minute", "deduct_when": lambda resp: resp.status_code == 401}})
    assert [wsgi(app, "POST", "/login", x_password="right") for _ in range(5)] == [200] * 5  # never counted
    assert [wsgi(app, "POST", "/login", x_password="wrong") for _ in range(3)] == [401, 401, 429]

    async def asgi_login(scope, receive, send):
        ok = (b"x-password", b"right") in scope["headers"]
        await send({"type": "http.response.start", "status": 200 if ok else 401, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    mw = RateLimitMiddleware(asgi_login, segment=None, limits={
        "/login": {"rates": "2/minute", "deduct_when": lambda resp: resp.status_code == 401}})

    async def call(password):
        sent = []

        async def send(m):
            sent.append(m)

        await mw({"type": "http", "method": "POST", "path": "/login", "client": ("10.0.0.1", 1),
                  "headers": [(b"x-password", password)]}, None, send)
        return sent[0]["status"]

    async def main():
        return [await call(b"right") for _ in range(4)] + [await call(b"wrong") for _ in range(3)]

    assert asyncio.run(main()) == [200] * 4 + [401, 401, 429]


@needs_cancel
def test_all_or_nothing_a_request_one_rate_refuses_counts_in_none():
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, key="global")
    minute, hour = lim.rules("r", "10/minute;4/hour")
    got = [lim.enter(req(), (minute, hour)).allowed for _ in range(6)]
    assert got == [True] * 4 + [False] * 2
    assert minute.lim.keyed_stats().pass_ - minute.lim.keyed_stats().block <= 4
    assert minute.lim.key_stats("*").pass_ == 4   # the hour refused the 5th and 6th: the minute gave them back


def test_a_refusal_of_the_first_rate_never_reaches_the_others():
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, key="global")
    minute, hour = lim.rules("r", "3/minute;10/hour")
    assert [lim.enter(req(), (minute, hour)).allowed for _ in range(5)] == [True] * 3 + [False] * 2
    assert hour.lim.key_stats("*").pass_ == 3


# ---------------------------------------------- shared limits, callables


def test_flask_shared_limit_callable_rates_and_enabled():
    flask = pytest.importorskip("flask")
    from libsw.web.flask import Limiter as FlaskLimiter

    app = flask.Flask("features_app")
    limiter = FlaskLimiter(app, segment=None)
    shared = limiter.shared_limit("3/minute", scope="reports")
    plan = {"value": "2/minute"}

    @app.route("/r1")
    @shared
    def r1():
        return "1"

    @app.route("/r2")
    @shared
    def r2():
        return "2"

    @app.route("/dyn")
    @limiter.limit(lambda: plan["value"])
    def dyn():
        return "d"

    @app.route("/post", methods=["GET", "POST"])
    @limiter.limit("1/minute", methods=["POST"], cost=1)
    def post():
        return "p"

    c = app.test_client()
    assert [c.get(p).status_code for p in ("/r1", "/r2", "/r1", "/r2")] == [200, 200, 200, 429]
    assert [c.get("/dyn").status_code for _ in range(3)] == [200, 200, 429]
    plan["value"] = "3/minute"     # another rate: its own table, made at its first use
    assert [c.get("/dyn").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert [c.get("/post").status_code for _ in range(2)] == [200, 200]
    assert [c.post("/post").status_code for _ in range(2)] == [200, 429]
    limiter.enabled = False
    assert [c.get("/r1").status_code for _ in range(3)] == [200] * 3
    limiter.enabled = True
    assert c.get("/r1").status_code == 429


def test_a_callable_rate_that_fails_follows_on_error():
    lim = Limiter(segment=None, on_error="closed")
    rules = lim.rules("dyn", lambda r: "nonsense")
    out = lim.enter(req(), rules)
    assert not out.allowed and isinstance(out.error, ValueError)
    many = lim.rules("many", lambda r: "%d/minute" % int(r.header("x-n")))
    for n in range(1, 33):
        assert lim.enter(Request("GET", "/", "x", {"x-n": str(n)}), many).allowed
    out = lim.enter(Request("GET", "/", "x", {"x-n": "33"}), many)   # a 33rd rate: refused, not a new table
    assert not out.allowed and "33" not in str([t.rate for t in lim.tables])


def test_enabled_false_serves_everything_and_counts_nothing():
    app = WSGIRateLimitMiddleware(hello, segment=None, default="1/minute", enabled=False)
    assert [wsgi(app) for _ in range(3)] == [200] * 3
    assert app.limiter.stats()[0]["pass"] == 0
    app.limiter.enabled = True
    assert [wsgi(app) for _ in range(2)] == [200, 429]


def test_django_scope_shares_a_limit_between_views():
    pytest.importorskip("django")
    code = """
        from django.conf import settings
        settings.configure(ROOT_URLCONF=__name__, SECRET_KEY="x", ALLOWED_HOSTS=["*"],
                           MIDDLEWARE=["libsw.web.django.RateLimitMiddleware"], LIBSW_RATELIMIT={"segment": None})
        import django
        django.setup()
        from django.http import HttpResponse
        from django.test import Client
        from django.urls import path
        from libsw.web.django import ratelimit

        @ratelimit("3/minute", scope="reports")
        def a(request):
            return HttpResponse("a")

        @ratelimit("3/minute", scope="reports")
        def b(request):
            return HttpResponse("b")

        @ratelimit("1/minute", methods=["POST"], cost=1)
        def p(request):
            return HttpResponse("p")

        urlpatterns = [path("a", a), path("b", b), path("p", p)]
        c = Client()
        print([c.get(x).status_code for x in ("/a", "/b", "/a", "/b")])
        print([c.get("/p").status_code for _ in range(2)] + [c.post("/p").status_code for _ in range(2)])
    """
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines() == ["[200, 200, 200, 429]", "[200, 200, 200, 429]"]


@needs_cancel
def test_flask_entries_end_as_errors_through_either_path_and_a_requests_own_endpoint():
    """The extension's paths in C and in Python end a request's entry alike:
    an exception raised through Flask (testing: propagated) and a 5xx are
    errors, on a one-rule view (the C path) and a two-rate one (the
    general path); a request class with its own ``endpoint`` is obeyed."""
    flask = pytest.importorskip("flask")
    from libsw.web.flask import Limiter as FlaskLimiter

    app = flask.Flask("errors_app")
    app.testing = True
    limiter = FlaskLimiter(app, segment=None, default="100/minute", headers="both")

    @app.route("/boom")
    def boom():
        raise RuntimeError("view failed")

    @app.route("/unavailable")
    def unavailable():
        return "later", 503

    @app.route("/two")
    @limiter.limit("50/second;100/minute")
    def two():
        raise RuntimeError("view failed")

    c = app.test_client()
    for path in ("/boom", "/two"):
        with pytest.raises(RuntimeError):
            c.get(path)
    r = c.get("/unavailable")
    assert r.status_code == 503 and r.headers["X-RateLimit-Remaining"] == "99"  # (each view its own count)
    default = [t for t in limiter.core.tables if t.scope == "default"][0].lim.keyed_stats()
    assert (default.pass_, default.success, default.exception) == (2, 2, 2)  # (success: every end)
    for t in limiter.core.tables:
        if t.scope != "default":
            s = t.lim.keyed_stats()
            assert (s.pass_, s.success, s.exception) == (1, 1, 1), t.rate

    class NoEndpoint(flask.Request):
        endpoint = None  # (what Flask's would be had no route matched)

    app.request_class = NoEndpoint
    r = c.get("/unavailable")
    assert r.status_code == 503 and "X-RateLimit-Remaining" not in r.headers
    assert [t for t in limiter.core.tables if t.scope == "default"][0].lim.keyed_stats().pass_ == 2


def test_flask_deduct_when_and_the_entry_ended_when_flask_is_done():
    flask = pytest.importorskip("flask")
    from libsw.web.flask import Limiter as FlaskLimiter

    app = flask.Flask("deduct_app")
    limiter = FlaskLimiter(app, segment=None, default="100/minute")

    @app.route("/login", methods=["POST"])
    @limiter.limit("2/minute", deduct_when=lambda response: response.status_code == 401)
    def login():
        return ("in", 200) if flask.request.headers.get("X-Password") == "right" else ("no", 401)

    @app.route("/")
    def index():
        return "hello"

    c = app.test_client()
    assert [c.post("/login", headers={"X-Password": "right"}).status_code for _ in range(4)] == [200] * 4
    assert [c.post("/login", headers={"X-Password": "wrong"}).status_code for _ in range(3)] == [401, 401, 429]
    c.get("/")   # the response never read nor closed: the entry ends when Flask is done with the request
    (default,) = [t for t in limiter.core.tables if t.scope == "default"]
    assert default.lim.keyed_stats().success == 1
