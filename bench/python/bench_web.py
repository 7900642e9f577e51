#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""libsw.web's cost per request, and what sharing limits across workers
changes. Prints numbers; asserts nothing (tests live in bindings/python/tests).

  bench_web.py inproc   [--calls N] [--runs R] [--mode M]   per-request time in one process:
      a bare WSGI app and ASGI app with and without libsw's middleware;
      Flask through its test client with no limiter, libsw.web.flask and
      Flask-Limiter (memory://); Starlette called as an ASGI app with and
      without RateLimitMiddleware. Every request passes (a limit never reached),
      from one client address; best of R runs of N requests, us per request.
  bench_web.py server   [--requests N]          a real server: gunicorn (2 sync
      workers) serving Flask with each limiter, the three at once, N
      sequential requests to each in turn from one client (a new connection
      each), median us per request (client included: the differences are
      what to read).
  bench_web.py sharing  [--workers W]           gunicorn with W workers, a
      5/minute limit per client: passes in a burst of 60 requests, with
      libsw (one segment) and Flask-Limiter (memory://); then 5/second for
      3 s of requests as fast as one client sends, passes per second.

slowapi (Starlette / FastAPI) is not packaged in Debian 12: not measured.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))


def app_module(limiter, rate="1000000/minute", asgi=False, segment=None):
    """webbench_app loaded afresh with its environment."""
    os.environ.update(LIMITER=limiter, RATE=rate, SEGMENT=segment or "lswb-%s" % uuid.uuid4().hex[:8])
    os.environ.pop("ASGI", None)
    if asgi:
        os.environ["ASGI"] = "1"
    sys.path.insert(0, HERE)
    sys.modules.pop("webbench_app", None)
    return importlib.import_module("webbench_app")


def best(fn, calls, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn(calls)
        out.append((time.perf_counter_ns() - t) / calls / 1000.0)
    return min(out)


ENV = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "10.0.0.1", "SERVER_NAME": "x",
       "SERVER_PORT": "80", "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1"}


def wsgi_loop(app):
    def start(status, headers, exc_info=None):
        return None

    def run(n):
        for _ in range(n):
            r = app(dict(ENV), start)
            for _ in r:
                pass
            close = getattr(r, "close", None)
            if close:
                close()
    return run


def asgi_loop(app):
    scope = {"type": "http", "method": "GET", "path": "/", "client": ("10.0.0.1", 1), "headers": [],
             "query_string": b"", "root_path": "", "scheme": "http", "server": ("x", 80), "http_version": "1.1",
             "asgi": {"version": "3.0"}}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(m):
        return None

    async def many(n):
        for _ in range(n):
            await app(dict(scope), receive, send)

    loop = asyncio.new_event_loop()
    return lambda n: loop.run_until_complete(many(n))


def bare_wsgi(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


async def bare_asgi(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def flask_client(limiter, seg):
    app = app_module(limiter, RATE, segment=seg).flask_app
    if limiter == "libsw-middleware":  # the middleware around the Flask application
        app.wsgi_app = __import__("libsw.web").web.WSGIRateLimitMiddleware(app.wsgi_app, segment=seg, default=RATE,
                                                                           headers="both")
    c = app.test_client()
    return lambda n: [c.get("/", environ_base={"REMOTE_ADDR": "10.0.0.1"}) for _ in range(n)]


RATE = "1000000/minute"
# mode -> (label, factory(segment) -> run(n))
MODES = {
    "wsgi": ("WSGI app, no limiter", lambda seg: wsgi_loop(bare_wsgi)),
    "wsgi-libsw": ("WSGI app + WSGIRateLimitMiddleware", lambda seg: wsgi_loop(
        __import__("libsw.web").web.WSGIRateLimitMiddleware(bare_wsgi, segment=seg, default=RATE))),
    "wsgi-libsw-h": ("WSGI app + WSGIRateLimitMiddleware, headers='both'", lambda seg: wsgi_loop(
        __import__("libsw.web").web.WSGIRateLimitMiddleware(bare_wsgi, segment=seg, default=RATE, headers="both"))),
    "wsgi-libsw-2": ("WSGI app + WSGIRateLimitMiddleware, two rates", lambda seg: wsgi_loop(
        __import__("libsw.web").web.WSGIRateLimitMiddleware(bare_wsgi, segment=seg,
                                                           default="1000000/second;1000000/minute"))),
    "asgi": ("ASGI app, no limiter", lambda seg: asgi_loop(bare_asgi)),
    "asgi-libsw": ("ASGI app + RateLimitMiddleware", lambda seg: asgi_loop(
        __import__("libsw.web").web.RateLimitMiddleware(bare_asgi, segment=seg, default=RATE))),
    "asgi-libsw-h": ("ASGI app + RateLimitMiddleware, headers='both'", lambda seg: asgi_loop(
        __import__("libsw.web").web.RateLimitMiddleware(bare_asgi, segment=seg, default=RATE, headers="both"))),
    "flask": ("Flask test client, no limiter", lambda seg: flask_client("none", seg)),
    "flask-libsw": ("Flask test client, libsw.web.flask", lambda seg: flask_client("libsw", seg)),
    "flask-libsw-h": ("Flask test client, libsw.web.flask, headers='both'",
                      lambda seg: flask_client("libsw-headers", seg)),
    "flask-wsgi-h": ("Flask test client, WSGIRateLimitMiddleware, headers='both'",
                     lambda seg: flask_client("libsw-middleware", seg)),
    "flask-limiter": ("Flask test client, Flask-Limiter memory://", lambda seg: flask_client("flask-limiter", seg)),
    "flask-limiter-h": ("Flask test client, Flask-Limiter memory://, headers_enabled",
                        lambda seg: flask_client("flask-limiter-headers", seg)),
    "starlette": ("Starlette (ASGI call), no limiter",
                  lambda seg: asgi_loop(app_module("none", RATE, asgi=True, segment=seg).asgi_app)),
    "starlette-libsw": ("Starlette (ASGI call), RateLimitMiddleware",
                        lambda seg: asgi_loop(app_module("libsw", RATE, asgi=True, segment=seg).asgi_app)),
}


def inproc(args):
    """Each mode's best us per request; the runs go round the modes, so that
    a busy spell of a shared machine spoils one run of each, never all runs
    of one."""
    import libsw

    seg = "lswb-%s" % uuid.uuid4().hex[:8]
    modes = [args.mode] if args.mode else (args.modes.split(",") if args.modes else list(MODES))
    try:
        fns = {}
        for mode in modes:
            fns[mode] = MODES[mode][1](seg)
            fns[mode](200)  # warm up: tables made, keys inserted
            if args.mode:  # exactly --calls requests (for callgrind: run with N and 0, subtract)
                fns[mode](args.calls)
                return
        us = {m: float("inf") for m in modes}
        for _ in range(args.runs):
            for m in modes:
                us[m] = min(us[m], best(fns[m], args.calls, 1))
    finally:
        libsw.unlink_segment(seg)
    print("%-60s %10s" % ("in one process (best of %d x %d requests)" % (args.runs, args.calls), "us/request"))
    for m in modes:
        print("%-60s %10.2f" % (MODES[m][0], us[m]))
    if args.us_out:
        with open(args.us_out, "w", encoding="utf-8") as f:
            f.writelines("%s %.3f\n" % (m, us[m]) for m in modes)


# ------------------------------------------------------------------ servers


def free_port():
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


class Gunicorn:
    def __init__(self, limiter, rate, workers):
        self.port = free_port()
        self.segment = "lswb-%s" % uuid.uuid4().hex[:8]
        env = dict(os.environ, LIMITER=limiter, RATE=rate, SEGMENT=self.segment)
        self.proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", str(workers), "-b",
                                      "127.0.0.1:%d" % self.port, "--chdir", HERE, "webbench_app:flask_app"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.url = "http://127.0.0.1:%d/" % self.port
        import requests

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                requests.get(self.url + "nothing", timeout=2)
                break
            except requests.RequestException:
                time.sleep(0.2)
        time.sleep(1.0)  # every worker booted

    def stop(self):
        import libsw

        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        libsw.unlink_segment(self.segment)


def server(args):
    """The three servers run at once; requests go to each in turn, so that
    the machine's load falls on all of them alike."""
    import requests

    names = ("none", "libsw", "flask-limiter")
    servers = [Gunicorn(limiter, "1000000/minute", 2) for limiter in names]
    times = {n: [] for n in names}
    try:
        for _ in range(args.requests):
            for n, g in zip(names, servers):
                t = time.perf_counter_ns()
                requests.get(g.url, headers={"Connection": "close"}, timeout=30)
                times[n].append((time.perf_counter_ns() - t) / 1000.0)
    finally:
        for g in servers:
            g.stop()
    print("%-40s %12s %12s" % ("gunicorn, 2 workers, %d requests each" % args.requests, "median us", "over none"))
    base = statistics.median(times["none"])
    for n in names:
        m = statistics.median(times[n])
        print("%-40s %12.0f %12.0f" % ("Flask, " + n, m, m - base))


def sharing(args):
    import requests

    def get(url):
        return requests.get(url, headers={"Connection": "close"}, timeout=30).status_code

    print("gunicorn, %d workers, one client address" % args.workers)
    for limiter in ("libsw", "flask-limiter"):
        g = Gunicorn(limiter, "5/minute", args.workers)
        try:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(lambda _: get(g.url), range(60)))
            print("  %-14s 5/minute, burst of 60 requests: %d passed" % (limiter, codes.count(200)))
        finally:
            g.stop()
        g = Gunicorn(limiter, "5/second", args.workers)
        try:
            passes = []
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                for _ in range(3):
                    end = time.monotonic() + 1.0
                    n = 0
                    while time.monotonic() < end:
                        n += list(pool.map(lambda _: get(g.url), range(8))).count(200)
                    passes.append(n)
            print("  %-14s 5/second, 3 s of requests: %s passed per second" % (limiter, passes))
        finally:
            g.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["inproc", "server", "sharing"])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--mode", choices=sorted(MODES), help="inproc: run one mode exactly --calls times")
    ap.add_argument("--modes", help="inproc: the modes to time, comma-separated (default: all)")
    ap.add_argument("--us-out", help="inproc: also write 'mode us' lines to this file")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    {"inproc": inproc, "server": server, "sharing": sharing}[args.what](args)


if __name__ == "__main__":
    main()
