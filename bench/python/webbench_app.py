# SPDX-License-Identifier: Apache-2.0
"""The trivial endpoint bench_web.py measures, with the limiter named by
$LIMITER: none, libsw (libsw.web on a shared segment), flask-limiter
(Flask-Limiter, memory:// storage: each process its own counts), and
libsw-headers (libsw.web with headers="both"); libsw-middleware: none
here (bench_web.py wraps the app in WSGIRateLimitMiddleware). Flask
(WSGI) as `flask_app`, Starlette (ASGI) as `asgi_app`. $RATE is the
default limit of every request."""
import os

LIMITER = os.environ.get("LIMITER", "none")
RATE = os.environ.get("RATE", "1000000/minute")
SEGMENT = os.environ.get("SEGMENT", "libsw-bench-web")


def make_flask():
    import flask

    app = flask.Flask(__name__)

    @app.route("/")
    def index():
        return "ok"

    if LIMITER in ("libsw", "libsw-headers"):
        from libsw.web.flask import Limiter

        Limiter(app, segment=SEGMENT, default=RATE, key="ip", headers="both" if LIMITER == "libsw-headers" else None)
    elif LIMITER in ("flask-limiter", "flask-limiter-headers"):
        from flask_limiter import Limiter
        from flask_limiter.util import get_remote_address

        Limiter(get_remote_address, app=app, default_limits=[RATE.replace("/", " per ")], storage_uri="memory://",
                headers_enabled=LIMITER == "flask-limiter-headers")
    return app


def make_asgi():
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    def index(request):
        return PlainTextResponse("ok")

    middleware = []
    if LIMITER == "libsw":
        from libsw.web import RateLimitMiddleware

        middleware = [Middleware(RateLimitMiddleware, segment=SEGMENT, default=RATE, key="ip")]
    return Starlette(routes=[Route("/", index)], middleware=middleware)


flask_app = make_flask()
asgi_app = make_asgi() if os.environ.get("ASGI") else None
