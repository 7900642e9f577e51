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
from ._core import Limiter, Outcome, Rule, validate

__all__ = ["RateLimit", "RateLimitExceeded"]


class RateLimitExceeded(HTTPException):
    """429 with the outcome (``.outcome``) and its header fields."""

    def __init__(self, outcome: "Outcome", headers: Dict[str, str]) -> None:
        super().__init__(status_code=429, detail="Too Many Requests", headers=headers)
        self.outcome = outcome


class RateLimit:
    """A dependency limiting its route with rates (``"5/second;100/minute"``)
    by ``key`` (default: the limiter's). Each route it is used on gets its
    own count, unless ``scope`` names one shared by them. Pacing and
    ``wait`` sleep with asyncio.sleep."""

    def __init__(self, rates: Any, *, limiter: Limiter, key: Any = None, scope: Optional[str] = None,
                 **options: Any) -> None:
        validate(scope or "a FastAPI route", rates, key, options, limiter.trusted_proxies, limiter.log)
        self.rates = rates
        self.limiter = limiter
        self.key = key
        self.scope = scope
        self.options = options
        self._rules: Dict[str, Tuple[Rule, ...]] = {}
        if scope is not None:
            self._rules[scope] = limiter.rules(scope, rates, key, **options)

    def _rules_for(self, request: Request) -> Tuple["Rule", ...]:
        route = request.scope.get("route")
        scope = self.scope or "%s %s" % (",".join(sorted(getattr(route, "methods", None) or ())),
                                         getattr(route, "path", request.url.path))
        rules = self._rules.get(scope)
        if rules is None:
            rules = self._rules[scope] = self.limiter.rules(scope, self.rates, self.key, **self.options)
        return rules

    async def __call__(self, request: Request, response: Response) -> AsyncIterator[Outcome]:
        lim = self.limiter
        out = await lim.enter_async(asgi_request(request.scope), self._rules_for(request))
        fields = out.headers(lim.headers)
        if not out.allowed:
            raise RateLimitExceeded(out, dict(fields))
        for k, v in fields:
            response.headers[k] = v
        try:
            yield out
        except BaseException:
            out.release(error=True)
            raise
        out.release()
