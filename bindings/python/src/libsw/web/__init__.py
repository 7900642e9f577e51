# SPDX-License-Identifier: Apache-2.0
"""libsw for web applications: ASGI and WSGI middleware, a Flask extension
(:mod:`libsw.web.flask`), a Django middleware and decorator
(:mod:`libsw.web.django`), a FastAPI dependency (:mod:`libsw.web.fastapi`).

Rates as users write them (``"5/second;100/minute"``), per client keys
(remote address with trusted proxies, a header, a path parameter, the
user, any callable) on libsw's keyed tables, 429 with Retry-After and
optional RateLimit / X-RateLimit fields, and one shared segment that makes
every worker of the application count in the same tables, exactly. No web
framework is a dependency of libsw: each adapter imports its framework
only when it is imported. See docs/web.md.
"""
from ._asgi import RateLimitMiddleware, asgi_request
from ._core import DEFAULT, DEFAULT_CAPACITY, Limiter
from ._keys import Request, global_key, header, key_function, normalize_key, path_param, remote_address, user
from ._outcome import Outcome, ResponseInfo, retry_after_header
from ._rates import Rate, parse_rate, parse_rates
from ._routes import Plan, Routes
from ._rules import Rule, Table
from ._segment import default_segment
from ._wsgi import WSGIRateLimitMiddleware, wsgi_request

__all__ = [
    "DEFAULT", "DEFAULT_CAPACITY", "Limiter", "Outcome", "Plan", "Rate", "RateLimitMiddleware", "Request",
    "ResponseInfo", "Routes", "Rule", "Table", "WSGIRateLimitMiddleware", "asgi_request", "default_segment",
    "global_key", "header", "key_function", "normalize_key", "parse_rate", "parse_rates", "path_param",
    "remote_address", "retry_after_header", "user", "wsgi_request",
]
