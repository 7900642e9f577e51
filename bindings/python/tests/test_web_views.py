# SPDX-License-Identifier: Apache-2.0
"""Each view its own name, and so its own count: Flask's class-based views
(``as_view``, a limit in ``decorators`` or on a method), views made by a
factory, Django's class-based views and the method-decorator form
(``@method_decorator(ratelimit(...), name="get")``)."""
import subprocess
import sys
import textwrap

import pytest


def test_flask_class_based_views_each_their_own_count():
    flask = pytest.importorskip("flask")
    from flask.views import MethodView

    from libsw.web.flask import Limiter

    app = flask.Flask("views_app")
    limiter = Limiter(app, segment=None, default="3/minute")

    class Limited(MethodView):
        decorators = [limiter.limit("2/minute")]

        def get(self):
            return "limited"

    class PerMethod(MethodView):
        @limiter.limit("1/minute")
        def post(self):
            return "post"

        def get(self):
            return "get"

    class Plain(MethodView):
        def get(self):
            return "plain"

    app.add_url_rule("/a", view_func=Limited.as_view("a"))
    app.add_url_rule("/b", view_func=Limited.as_view("b"))
    app.add_url_rule("/p", view_func=PerMethod.as_view("p"))
    app.add_url_rule("/x", view_func=Plain.as_view("x"))
    app.add_url_rule("/y", view_func=Plain.as_view("y"))
    c = app.test_client()
    assert [c.get("/a").status_code for _ in range(3)] == [200, 200, 429]
    assert [c.get("/b").status_code for _ in range(3)] == [200, 200, 429]   # not /a's count
    assert [c.post("/p").status_code for _ in range(2)] == [200, 429]       # the method's own limit
    assert [c.get("/p").status_code for _ in range(4)] == [200] * 3 + [429]  # GET: the default
    assert [c.get("/x").status_code for _ in range(4)] == [200] * 3 + [429]
    assert [c.get("/y").status_code for _ in range(4)] == [200] * 3 + [429]  # not /x's count


def test_flask_views_made_by_a_factory_each_their_own_count():
    flask = pytest.importorskip("flask")
    from libsw.web.flask import Limiter

    app = flask.Flask("factory_app")
    limiter = Limiter(app, segment=None)

    def make(text):
        @limiter.limit("1/minute")
        def view():
            return text
        return view

    app.add_url_rule("/one", "one", make("one"))
    app.add_url_rule("/two", "two", make("two"))
    c = app.test_client()
    assert [c.get("/one").status_code, c.get("/two").status_code, c.get("/one").status_code] == [200, 200, 429]


DJANGO = """
from django.conf import settings
settings.configure(ROOT_URLCONF=__name__, SECRET_KEY="x", ALLOWED_HOSTS=["*"],
                   MIDDLEWARE=["libsw.web.django.RateLimitMiddleware"],
                   LIBSW_RATELIMIT={"segment": None, "default": "3/minute"})
import django
django.setup()
from django.http import HttpResponse
from django.test import Client
from django.urls import path
from django.utils.decorators import method_decorator
from django.views import View
from libsw.web.django import ratelimit

@method_decorator(ratelimit("2/minute"), name="get")
class Limited(View):
    def get(self, request):
        return HttpResponse("get")
    def post(self, request):
        return HttpResponse("post")

@method_decorator(ratelimit("1/minute"), name="dispatch")
class Everything(View):
    def get(self, request):
        return HttpResponse("e")

class A(View):
    def get(self, request):
        return HttpResponse("a")

class B(View):
    def get(self, request):
        return HttpResponse("b")

urlpatterns = [path("limited", Limited.as_view()), path("all", Everything.as_view()),
               path("a", A.as_view()), path("b", B.as_view()),
               path("wrapped", ratelimit("1/minute")(A.as_view()))]
c = Client()
print([c.get("/limited").status_code for _ in range(3)])
print([c.post("/limited").status_code for _ in range(4)])
print([c.get("/all").status_code for _ in range(2)])
print([c.get("/a").status_code for _ in range(4)])
print([c.get("/b").status_code for _ in range(4)])
print([c.get("/wrapped").status_code for _ in range(2)])
"""


def test_django_class_based_views_and_the_method_decorator_form():
    pytest.importorskip("django")
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(DJANGO)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines() == [
        "[200, 200, 429]",            # GET: the method decorator's 2/minute
        "[200, 200, 200, 429]",       # POST: the default, 3/minute
        "[200, 429]",                 # dispatch decorated: every method
        "[200, 200, 200, 429]",       # A: the default
        "[200, 200, 200, 429]",       # B: the default, not A's count
        "[200, 429]",                 # as_view() decorated in the URLconf
    ], p.stdout
