# SPDX-License-Identifier: Apache-2.0
"""Runs the per-client 429 example of docs/python.md (the block marked
<!-- test: per-client -->), as a WSGI middleware and as a dict handler."""
import os
import re

import pytest

import libsw
from conftest import REPO

DOC = os.path.join(REPO, "docs", "python.md")


def example_code():
    if not os.path.exists(DOC):
        pytest.skip("docs/python.md is not in this tree")
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- test: per-client -->\s*```python\n(.*?)```", text, re.S)
    assert m, "the per-client example is missing from docs/python.md"
    return m.group(1)


@pytest.fixture
def example():
    ns = {"__name__": "docs_example"}
    exec(compile(example_code(), DOC, "exec"), ns)
    return ns


def call_wsgi(app, client):
    status = []

    def start_response(s, headers):
        status.append((s, dict(headers)))

    body = b"".join(app({"REMOTE_ADDR": client, "PATH_INFO": "/"}, start_response))
    return status[0][0], status[0][1], body


def hello_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


def test_wsgi_middleware(example):
    app = example["rate_limited"](hello_app)
    results = [call_wsgi(app, "10.0.0.1") for _ in range(7)]
    assert [r[0] for r in results] == ["200 OK"] * 5 + ["429 Too Many Requests"] * 2
    assert results[5][1]["Retry-After"] == "1"
    assert results[5][2] == b"too many requests\n"
    assert call_wsgi(app, "10.0.0.2")[0] == "200 OK"  # another client has its own limit


def test_wsgi_middleware_records_app_errors(example):
    lim = libsw.RateLimiter(5, capacity=4)

    def broken(environ, start_response):
        raise RuntimeError("app failed")

    app = example["rate_limited"](broken, limiter=lim)
    with pytest.raises(RuntimeError):
        call_wsgi(app, "c")
    assert lim.keyed_stats().exception == 1  # a keyed table counts exceptions in its totals


def test_dict_handler(example):
    clock = libsw.ManualClock(5_000_000)
    lim = libsw.RateLimiter(2, capacity=4, clock=clock)
    handle = example["handle"]
    out = [handle({"client": "alice"}, limiter=lim) for _ in range(3)]
    assert [o["status"] for o in out] == [200, 200, 429]
    assert out[0]["body"] == "hello alice"
    assert out[2]["headers"] == {"Retry-After": "1"}
    clock.advance(1000)
    assert handle({"client": "alice"}, limiter=lim)["status"] == 200


def test_retry_after_header(example):
    h = example["retry_after_header"]
    assert h(0.2) == "1" and h(1.0) == "1" and h(1.01) == "2" and h(float("inf")) == "60"
