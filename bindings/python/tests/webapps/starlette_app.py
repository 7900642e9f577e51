# SPDX-License-Identifier: Apache-2.0
"""The Starlette application of test_web_servers, behind libsw's ASGI
middleware (uvicorn, 2+ workers); a bearer token is the user."""
import json
import os

from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from libsw.web import Limiter, RateLimitMiddleware, remote_address

limiter = Limiter(segment=os.environ["LIBSW_WEB_SEGMENT"], key="ip", headers="both", default="5/minute")


def broken(req):
    raise KeyError("no such key")


class Bearer(AuthenticationBackend):
    async def authenticate(self, conn):
        auth = conn.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            return AuthCredentials(["authenticated"]), SimpleUser(auth[7:])
        return None


def text(request):
    return PlainTextResponse(request.url.path, headers={"X-Worker": str(os.getpid())})


def stats(request):
    return JSONResponse(json.loads(json.dumps(limiter.stats(top=5), default=str)))


app = Starlette(
    routes=[Route(p, text) for p in ("/health", "/default", "/key", "/multi", "/multi-hour", "/me", "/proxied",
                                      "/int-key", "/broken-key")] +
           [Route("/orgs/{org}", text), Route("/stats", stats)],
    middleware=[
        Middleware(AuthenticationMiddleware, backend=Bearer()),
        Middleware(RateLimitMiddleware, limiter=limiter, exempt=["/health", "/stats"], limits={
            "/key": {"rates": "4/minute", "key": "header:X-Api-Key"},
            "/multi": {"rates": "3/minute;10/hour", "key": "header:X-Api-Key"},
            "/multi-hour": {"rates": "10/minute;4/hour", "key": "header:X-Api-Key"},
            "/orgs/{org}": {"rates": "2/minute", "key": "path:org"},
            "/me": {"rates": "3/minute", "key": "user"},
            "/proxied": {"rates": "2/minute", "key": remote_address(trusted_proxies=["127.0.0.1"])},
            "/int-key": {"rates": "2/minute", "key": lambda req: 7},
            "/broken-key": {"rates": "1/minute", "key": broken},
        }),
    ],
)
