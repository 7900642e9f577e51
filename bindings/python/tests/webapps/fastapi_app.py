# SPDX-License-Identifier: Apache-2.0
"""The FastAPI application of test_web_servers: dependencies per route
(uvicorn, 2+ workers), a paced route."""
import json
import os
import time

from fastapi import Depends, FastAPI, Response

from libsw.web import Limiter, remote_address
from libsw.web.fastapi import RateLimit

limiter = Limiter(segment=os.environ["LIBSW_WEB_SEGMENT"], key="ip", headers="both")
app = FastAPI()


@app.middleware("http")
async def worker(request, call_next):
    response = await call_next(request)
    response.headers["X-Worker"] = str(os.getpid())
    return response


@app.get("/health")
def health():
    return "ok"


@app.get("/default", dependencies=[Depends(RateLimit("5/minute", limiter=limiter))])
def default():
    return "default"


@app.get("/key", dependencies=[Depends(RateLimit("4/minute", limiter=limiter, key="header:X-Api-Key"))])
def key():
    return "key"


@app.get("/multi", dependencies=[Depends(RateLimit("3/minute;10/hour", limiter=limiter, key="header:X-Api-Key"))])
def multi():
    return "multi"


@app.get("/multi-hour",
         dependencies=[Depends(RateLimit("10/minute;4/hour", limiter=limiter, key="header:X-Api-Key"))])
def multi_hour():
    return "multi-hour"


@app.get("/orgs/{org}", dependencies=[Depends(RateLimit("2/minute", limiter=limiter, key="path:org"))])
def org(org: str):
    return org


@app.get("/proxied",
         dependencies=[Depends(RateLimit("2/minute", limiter=limiter, key=remote_address(trusted_proxies=["127.0.0.1"])))])
def proxied():
    return "proxied"


@app.get("/int-key", dependencies=[Depends(RateLimit("2/minute", limiter=limiter, key=lambda req: 7))])
def int_key():
    return "int"


def broken(req):
    raise KeyError("no such key")


@app.get("/broken-key", dependencies=[Depends(RateLimit("1/minute", limiter=limiter, key=broken))])
def broken_key():
    return "served"


paced = RateLimit("2/second", limiter=limiter, key="header:X-Api-Key", behavior="pacing", max_queue=30)


@app.get("/paced")
async def paced_route(response: Response, outcome=Depends(paced)):
    response.headers["X-Waited"] = "%.3f" % outcome.waited
    response.headers["X-Admitted-At"] = "%.6f" % (outcome.admitted_at or time.monotonic())
    response.headers["X-Admitted"] = "%.3f" % time.monotonic()
    return "paced"


@app.get("/stats")
def stats():
    return json.loads(json.dumps(limiter.stats(top=5), default=str))
