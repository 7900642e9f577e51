# SPDX-License-Identifier: Apache-2.0
"""The Django project of test_web_servers in one module (gunicorn, 2+ workers)."""
import json
import os

from django.conf import settings

settings.configure(
    DEBUG=False, SECRET_KEY="libsw-test", ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"],
    MIDDLEWARE=["libsw.web.django.RateLimitMiddleware"],
    LIBSW_RATELIMIT={"segment": os.environ["LIBSW_WEB_SEGMENT"], "key": "ip", "headers": "both",
                     "default": "5/minute", "exempt": ["/health"]},
)

from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.utils.decorators import method_decorator  # noqa: E402
from django.views import View  # noqa: E402

from libsw.web import remote_address  # noqa: E402
from libsw.web.django import exempt, limiter, ratelimit  # noqa: E402


def reply(text):
    r = HttpResponse(text)
    r["X-Worker"] = str(os.getpid())
    return r


def health(request):
    return reply("ok")


def default(request):
    return reply("default")


def limited(rates, text):
    """A view answering text, limited by rates per X-Api-Key."""
    def view(request):
        return reply(text)

    view.__qualname__ = text
    return ratelimit(rates, key="header:X-Api-Key")(view)


@ratelimit("2/minute", key="path:org")
def org(request, org):
    return reply(org)


@ratelimit("2/minute", key=remote_address(trusted_proxies=["127.0.0.1"]))
def proxied(request):
    return reply("proxied")


@ratelimit("2/minute", key=lambda req: 7)   # a user id: an int
def int_key(request):
    return reply("int")


def broken(req):
    raise KeyError("no such key")


@ratelimit("1/minute", key=broken)
def broken_key(request):
    return reply("served")


@method_decorator(ratelimit("2/minute"), name="get")
class LimitedA(View):
    def get(self, request):
        return reply("cbv")


@method_decorator(ratelimit("2/minute"), name="get")
class LimitedB(View):
    def get(self, request):
        return reply("cbv")


@exempt
def stats(request):
    return HttpResponse(json.dumps(limiter().stats(top=5), default=str), content_type="application/json")


urlpatterns = [
    path("health", health), path("default", default), path("orgs/<org>", org), path("stats", stats),
    path("key", limited("4/minute", "key")), path("multi", limited("3/minute;10/hour", "multi")),
    path("multi-hour", limited("10/minute;4/hour", "multi-hour")),
    path("proxied", proxied), path("int-key", int_key), path("broken-key", broken_key),
    path("cbv-a", LimitedA.as_view()), path("cbv-b", LimitedB.as_view()),
]

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
