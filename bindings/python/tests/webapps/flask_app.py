# SPDX-License-Identifier: Apache-2.0
"""The Flask application of test_web_servers (served by gunicorn, 2+ workers)."""
import json
import os

import flask
from flask.views import MethodView

from libsw.web import remote_address
from libsw.web.flask import Limiter

app = flask.Flask(__name__)
limiter = Limiter(app, segment=os.environ["LIBSW_WEB_SEGMENT"], key="ip", headers="both",
                  default=os.environ.get("LIBSW_WEB_DEFAULT", "5/minute"),
                  reset=os.environ.get("LIBSW_WEB_RESET") == "1")


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


# path -> (rates, key): each view answers its path
LIMITED = {
    "/key": ("4/minute", "header:X-Api-Key"),
    "/multi": ("3/minute;10/hour", "header:X-Api-Key"),
    "/multi-hour": ("10/minute;4/hour", "header:X-Api-Key"),
    "/proxied": ("2/minute", remote_address(trusted_proxies=["127.0.0.1"])),
}
for path, (rates, key) in LIMITED.items():
    def view(path=path):
        return path

    view.__name__ = view.__qualname__ = path.strip("/").replace("-", "_")
    app.add_url_rule(path, view_func=limiter.limit(rates, key=key)(view))


@app.route("/int-key")
@limiter.limit("2/minute", key=lambda req: 7)   # a user id: an int
def int_key():
    return "int"


def broken(req):
    raise KeyError("no such key")


@app.route("/broken-key")
@limiter.limit("1/minute", key=broken)
def broken_key():
    return "served"


class Limited(MethodView):
    decorators = [limiter.limit("2/minute")]

    def get(self):
        return "cbv"


app.add_url_rule("/cbv-a", view_func=Limited.as_view("cbv_a"))
app.add_url_rule("/cbv-b", view_func=Limited.as_view("cbv_b"))


@app.route("/orgs/<org>")
@limiter.limit("2/minute", key="path:org")
def org(org):
    return org


@app.route("/stats")
@limiter.exempt
def stats():
    return flask.Response(json.dumps(limiter.stats(top=5), default=str), mimetype="application/json")
