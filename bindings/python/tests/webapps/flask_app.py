"""The Flask application of test_web_servers (served by gunicorn, 2+ workers)."""
import json
import os

import flask

from libsw.web import remote_address
from libsw.web.flask import Limiter

app = flask.Flask(__name__)
limiter = Limiter(app, segment=os.environ["LIBSW_WEB_SEGMENT"], key="ip", headers="both",
                  default=os.environ.get("LIBSW_WEB_DEFAULT", "5/minute"))


@app.after_request
def worker(response):
    response.headers["X-Worker"] = str(os.getpid())
    return response


@app.route("/health")
@limiter.exempt
def health():
    return "ok"


@app.route("/default")
def default():
    return "default"


@app.route("/key")
@limiter.limit("4/minute", key="header:X-Api-Key")
def key():
    return "key"


@app.route("/multi")
@limiter.limit("3/minute;10/hour", key="header:X-Api-Key")
def multi():
    return "multi"


@app.route("/multi-hour")
@limiter.limit("10/minute;4/hour", key="header:X-Api-Key")
def multi_hour():
    return "multi-hour"


@app.route("/orgs/<org>")
@limiter.limit("2/minute", key="path:org")
def org(org):
    return org


@app.route("/proxied")
@limiter.limit("2/minute", key=remote_address(trusted_proxies=["127.0.0.1"]))
def proxied():
    return "proxied"


@app.route("/stats")
@limiter.exempt
def stats():
    return flask.Response(json.dumps(limiter.stats(top=5), default=str), mimetype="application/json")
