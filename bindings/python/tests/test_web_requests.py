# SPDX-License-Identifier: Apache-2.0
"""What clients send, through libsw.web's WSGI and ASGI paths: forwarding
headers of several lines read the same way on both (the right-most
untrusted address), addresses in any of their forms one key, and no input
— a key of any type or length, a key function or a table that fails —
ever a 500: on_error decides, logged once, counted in stats(). The same on
real servers: test_web_servers.py."""
import asyncio
import logging
import uuid

import pytest

import libsw
from libsw.web import Limiter, RateLimitMiddleware, Request, WSGIRateLimitMiddleware, remote_address
from libsw.web._asgi import asgi_request
from libsw.web._wsgi import wsgi_request

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PROXY = "10.0.0.5"  # the peer of every request here: the proxy


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


async def asgi_hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def environ_of(lines, peer=PROXY, path="/"):
    """A WSGI environ as gunicorn and wsgiref make it: the lines of one
    header joined with "," in order."""
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "REMOTE_ADDR": peer}
    for name, value in lines:
        k = "HTTP_" + name.upper().replace("-", "_")
        env[k] = env[k] + "," + value if k in env else value
    return env


def scope_of(lines, peer=PROXY, path="/"):
    return {"type": "http", "method": "GET", "path": path, "client": (peer, 4000),
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in lines]}


def wsgi_call(app, env):
    got = []
    body = app(env, lambda s, h, e=None: got.append((int(s[:3]), dict(h))))
    b"".join(body)
    getattr(body, "close", lambda: None)()
    return got[0][0]


def asgi_call(app, scope):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(m):
        sent.append(m)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"]


def keys_of(lim):
    """The keys of lim's tables (a key longer than key_bytes is kept as a
    digest, seeded per table: "<digest>")."""
    return sorted("<digest>" if isinstance(k, libsw.KeyDigest) else k
                  for s in lim.stats(top=50) for k, _, _ in s.get("top_keys", []))


# -------------------------------------------------------- forwarding headers


XFF = remote_address(trusted_proxies=["10.0.0.0/8", "fd00::/8"])
FWD = remote_address(trusted_proxies=["10.0.0.0/8", "fd00::/8"], header="Forwarded")


@pytest.mark.parametrize("fn,lines,client", [
    # a proxy that adds its own line: the client's line comes first, and is not believed
    (XFF, [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "198.51.100.7")], "198.51.100.7"),
    (XFF, [("X-Forwarded-For", "6.6.6.6, 7.7.7.7"), ("X-Forwarded-For", "198.51.100.7, 10.1.1.1")],
     "198.51.100.7"),
    (XFF, [("X-Forwarded-For", "198.51.100.7"), ("X-Forwarded-For", "garbage")], PROXY),
    (XFF, [("X-Forwarded-For", "[2001:DB8::1]:443")], "2001:db8::1"),
    (XFF, [("X-Forwarded-For", "2001:db8:0:0:0:0:0:1")], "2001:db8::1"),
    (XFF, [("X-Forwarded-For", "::ffff:198.51.100.7")], "198.51.100.7"),
    (XFF, [("X-Forwarded-For", "198.51.100.7:5555")], "198.51.100.7"),
    (XFF, [("X-Forwarded-For", "fe80::1%eth0")], "fe80::1"),
    (FWD, [("Forwarded", 'for="6.6.6.6, for=7.7.7.7"'), ("Forwarded", "for=198.51.100.7;proto=https")],
     "198.51.100.7"),
    (FWD, [("Forwarded", 'for="[2001:db8::2]:4711"'), ("Forwarded", "for=10.2.2.2")], "2001:db8::2"),
    (FWD, [("Forwarded", "for=_hidden")], PROXY),
])
def test_forwarding_headers_of_several_lines_read_alike_on_wsgi_and_asgi(fn, lines, client):
    assert fn(wsgi_request(environ_of(lines))) == client
    assert fn(asgi_request(scope_of(lines))) == client


def test_a_spoofed_first_line_does_not_buy_a_new_key_through_either_middleware():
    for make, call, native in ((WSGIRateLimitMiddleware, wsgi_call, environ_of),
                               (RateLimitMiddleware, asgi_call, scope_of)):
        lim = Limiter(segment=None, key=XFF, default="2/minute")
        app = make(hello if make is WSGIRateLimitMiddleware else asgi_hello, lim)
        got = [call(app, native([("X-Forwarded-For", "6.6.6.%d" % i), ("X-Forwarded-For", "198.51.100.7")]))
               for i in range(4)]
        assert got == [200, 200, 429, 429], make
        assert keys_of(lim) == ["198.51.100.7"]


def test_an_untrusted_peer_is_its_own_key_whatever_the_headers_say():
    lim = Limiter(segment=None, key=XFF, default="1/minute")
    app = WSGIRateLimitMiddleware(hello, lim)
    got = [wsgi_call(app, environ_of([("X-Forwarded-For", "198.51.100.%d" % i)], peer="192.0.2.9"))
           for i in range(3)]
    assert got == [200, 429, 429] and keys_of(lim) == ["192.0.2.9"]


# ------------------------------------------------------- keys of any kind

class Boom(Exception):
    pass


@pytest.mark.parametrize("value,key", [
    (42, "42"), (uuid.UUID(int=7), str(uuid.UUID(int=7))), (b"\x00\x01bin", "\x00\x01bin"), ("", "-"),
    pytest.param("x" * 100_000, None, id="100KB"),  # over 65,535 bytes: digested
], ids=["int", "uuid", "bytes", "empty", "100KB"])
def test_keys_of_any_type_and_length_are_counted(value, key):
    for make, call, native in ((WSGIRateLimitMiddleware, wsgi_call, environ_of),
                               (RateLimitMiddleware, asgi_call, scope_of)):
        lim = Limiter(segment=None, key=lambda r: value, default="2/minute", key_bytes=64)
        app = make(hello if make is WSGIRateLimitMiddleware else asgi_hello, lim)
        assert [call(app, native([])) for _ in range(3)] == [200, 200, 429], (make, value)
        (k,) = keys_of(lim)
        if key is None:
            assert isinstance(k, str) and k.startswith("digest:") and len(k) < 100
        else:
            assert k == key
        assert lim.stats()[0]["errors"] == {}


@pytest.mark.parametrize("on_error,status", [("open", 200), ("closed", 429)])
def test_a_key_function_that_fails_follows_on_error_logged_once_counted(on_error, status, caplog):
    def broken(req):
        raise Boom("no key")

    lim = Limiter(segment=None, key=broken, default="1/minute", on_error=on_error, log_interval=3600)
    wsgi = WSGIRateLimitMiddleware(hello, lim)
    asgi = RateLimitMiddleware(asgi_hello, lim)
    with caplog.at_level(logging.ERROR, logger="libsw"):
        got = [wsgi_call(wsgi, environ_of([])) for _ in range(3)] + [asgi_call(asgi, scope_of([])) for _ in range(3)]
    assert got == [status] * 6
    lines = [r.getMessage() for r in caplog.records if "Boom" in r.getMessage()]
    assert len(lines) == 1 and ("served" if on_error == "open" else "refused") in lines[0], lines
    assert lim.stats()[0]["errors"] == {"key": 6}


@pytest.mark.parametrize("on_error,status", [("open", 200), ("closed", 429)])
def test_a_table_that_fails_follows_on_error(on_error, status, caplog, monkeypatch):
    lim = Limiter(segment=None, default="5/minute", on_error=on_error, log_interval=3600)
    (rule,) = lim.default
    app = WSGIRateLimitMiddleware(hello, lim)
    assert wsgi_call(app, environ_of([])) == 200
    busy = libsw.lib.SW_EBUSY
    monkeypatch.setattr(type(rule), "enter", lambda self, k, n: busy)   # the general path
    import libsw.web._wsgi as w

    monkeypatch.setattr(w, "_web_enter", lambda rule, key, rules: busy)   # the Python fast path
    app = WSGIRateLimitMiddleware(hello, lim, limits={"/x": "5/minute"})  # (a route: not the C path)
    with caplog.at_level(logging.ERROR, logger="libsw"):
        got = [wsgi_call(app, environ_of([], path=p)) for p in ("/", "/x", "/", "/x")]
    assert got == [status] * 4
    errors = {s["scope"]: s["errors"] for s in lim.stats()}
    assert errors == {"default": {"table": 2}, "/x": {"table": 2}}, errors
    assert len([r for r in caplog.records if "table of" in r.getMessage()]) == 2  # one per rule


# ------------------------------------------------------------- hypothesis

HEADER_NAMES = st.sampled_from(["X-Forwarded-For", "Forwarded", "X-Api-Key", "X-Other"])
HOPS = st.one_of(st.ip_addresses().map(str), st.ip_addresses(v=6).map(lambda a: "[%s]:%d" % (a, 443)),
                 st.sampled_from(["unknown", "_hidden", "garbage", "", " ", "for=1.2.3.4", '"', ";", ","]))
VALUES = st.one_of(st.lists(HOPS, min_size=1, max_size=4).map(", ".join),
                   st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=40))
LINES = st.lists(st.tuples(HEADER_NAMES, VALUES), max_size=6)
KEY_VALUES = st.one_of(st.none(), st.integers(), st.uuids(), st.binary(max_size=40), st.text(max_size=40),
                       st.just("k" * 70_000), st.just("raise"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=LINES, value=KEY_VALUES, which=st.sampled_from(["xff", "fwd", "header", "fn"]))
def test_random_requests_never_500_and_get_the_same_key_on_wsgi_and_asgi(lines, value, which):
    def fn(req):
        if value == "raise":
            raise Boom("random failure")
        return value

    key = {"xff": XFF, "fwd": FWD, "header": "header:X-Api-Key", "fn": fn}[which]
    seen = []
    for make, call, native in ((WSGIRateLimitMiddleware, wsgi_call, environ_of),
                               (RateLimitMiddleware, asgi_call, scope_of)):
        lim = Limiter(segment=None, key=key, default="1/minute", log_interval=3600, key_bytes=128)
        app = make(hello if make is WSGIRateLimitMiddleware else asgi_hello, lim)
        statuses = [call(app, native(lines)) for _ in range(2)]
        assert set(statuses) <= {200, 429}
        seen.append((statuses, keys_of(lim)))
    assert seen[0] == seen[1]


def test_the_request_of_both_paths_reads_headers_alike():
    lines = [("X-Api-Key", "a"), ("x-api-key", "b"), ("Other", "c")]
    for req in (wsgi_request(environ_of(lines)), asgi_request(scope_of(lines))):
        assert isinstance(req, Request)
        assert req.header("X-API-KEY") == "a,b" and req.header("other") == "c" and req.header("none") is None
