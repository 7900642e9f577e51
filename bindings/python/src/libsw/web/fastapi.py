# SPDX-License-Identifier: Apache-2.0
"""FastAPI: a dependency per route, ``Depends(RateLimit("5/second", limiter=lim))``.

The dependency runs after routing, so path parameters are known; a
refusal raises :class:`RateLimitExceeded` (an HTTPException: 429 with
Retry-After and the limiter's rate-limit fields; register an exception
handler for one's own response). The entry is released when the
response is done. For limits on every route, use
:class:`libsw.web.RateLimitMiddleware` (``app.add_middleware``)."""

# No `from __future__ import annotations`: FastAPI reads __call__'s annotations as objects.
from typing import Any, AsyncIterator, Dict, Optional, Tuple

from fastapi import HTTPException, Request, Response

from ._asgi import asgi_request
from ._core import Limiter, validate
from ._outcome import Outcome, _web_fields, pass_fields  # type: ignore[attr-defined]
from ._routes import Plan

__all__ = ["RateLimit", "RateLimitExceeded"]


class RateLimitExceeded(HTTPException):
    """429 with the outcome (``.outcome``) and its header fields."""

    def __init__(self, outcome: "Outcome", headers: Dict[str, str]) -> None:
        super().__init__(status_code=429, detail="Too Many Requests", headers=headers)
        self.outcome = outcome


class RateLimit:
    """A dependency limiting its route with rates (``"5/second;100/minute"``,
    or a callable giving them per request) by ``key`` (default: the
    limiter's), with ``methods``, ``cost``, ``exempt_when`` and the rule's
    options. Each route it is used on gets its own count (one table for all
    of them, made now), unless ``scope`` names a count shared by them.
    Pacing and ``wait`` sleep with asyncio.sleep. ``deduct_when`` needs the
    response: use RateLimitMiddleware's."""

    def __init__(self, rates: Any, *, limiter: Limiter, key: Any = None, scope: Optional[str] = None,
                 **options: Any) -> None:
        if "deduct_when" in options:
            raise TypeError("RateLimit(deduct_when=...): a dependency does not see the response; give the "
                            "limit to libsw.web.RateLimitMiddleware (limits=...) instead")
        validate(scope or "a FastAPI route", rates, key, options, limiter.trusted_proxies, limiter.log)
        self.rates = rates
        self.limiter = limiter
        self.key = key
        self.scope = scope
        self.options = options
        self._plans: Dict[Any, Plan] = {}
        # the tables, made now (start-up); each route's rules use them with its own prefix
        self._shared = limiter.rules(scope or "fastapi", rates, key, **options)

    def _plan(self, request: Request) -> Plan:
        route = request.scope.get("route")
        plan = self._plans.get(id(route))  # (a route is not hashable; it lives as long as the app)
        if plan is None:
            if self.scope is not None:
                rules: Tuple[Any, ...] = self._shared
            else:
                name = "%s %s" % (",".join(sorted(getattr(route, "methods", None) or ())),
                                  getattr(route, "path", request.url.path))
                rules = self.limiter.rules("fastapi", self.rates, self.key, prefix=name + " ", **self.options)
            plan = self._plans[id(route)] = Plan(rules)
        return plan

    async def __call__(self, request: Request, response: Response) -> AsyncIterator[Outcome]:
        lim = self.limiter
        plan = self._plan(request)
        out = await lim.enter_async(asgi_request(request.scope), plan.rules)
        if not out.allowed:
            raise RateLimitExceeded(out, dict(out.headers(lim.headers)))
        if lim.style and out.rule is not None:
            fields = _web_fields(out.rule, lim.style, out.remaining, plan.policy_field)
            if fields is None:  # a custom clock
                fields = pass_fields(out.rule, lim.headers, max(0, out.remaining or 0), plan.policy)
            for k, v in fields:
                response.headers[k] = v
        try:
            yield out
        except BaseException:
            out.release(error=True)
            raise
        out.release()
