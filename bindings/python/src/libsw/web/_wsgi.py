# SPDX-License-Identifier: Apache-2.0
"""WSGI middleware (Flask, Django, any WSGI application)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Tuple

from ._core import custom_response
from ._keys import Request
from ._outcome import (Outcome, ResponseInfo, _web_enter, _web_fields, _web_install_wsgi,  # type: ignore[attr-defined]
                       _web_start, merge_headers, pass_fields, refusal)
from ._routes import Middleware, Plan

_partial = functools.partial

_REASONS = {429: "Too Many Requests", 503: "Service Unavailable", 200: "OK", 403: "Forbidden"}


def wsgi_request(environ: Mapping[str, Any], params: Optional[Mapping[str, str]] = None) -> Request:
    """A Request of a WSGI environ (REMOTE_ADDR, HTTP_* headers, REMOTE_USER)."""
    return Request(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO") or "/",
                   environ.get("REMOTE_ADDR") or None,
                   lambda name: environ.get("HTTP_" + name.upper().replace("-", "_")),
                   params, lambda: environ.get("REMOTE_USER") or None, environ)


class _Released:
    """The application's response; its close() (the server's, once the
    response is sent) ends the request's entry (environ["libsw.outcome"]):
    its response time, an error for a 5xx; a limit's deduct_when sees the
    status and headers (ResponseInfo) that _web_start kept in the environ.
    Made without __init__: the WSGI middleware and the Flask extension set
    its slots."""

    __slots__ = ("result", "environ")

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.result)

    def close(self) -> None:
        try:
            close = getattr(self.result, "close", None)
            if close is not None:
                close()
        finally:
            end_request(self.environ)


def released(environ: Any, result: Iterable[bytes]) -> _Released:
    r = _Released()
    r.result = result
    r.environ = environ
    return r


def end_request(environ: Mapping[str, Any]) -> None:
    """End the entry of the request of environ (its "libsw.outcome"; once):
    its response time, an error for a 5xx; a limit's deduct_when sees the
    status and headers _web_start kept ("libsw.status")."""
    out = environ.get("libsw.outcome")
    if out is None:
        return
    st = environ.get("libsw.status")
    code = int(st[0][:3]) if st else 500
    plan = environ.get("libsw.plan")
    out.release(error=code >= 500, response=ResponseInfo(code, list(st[1]) if st else [])
                if plan is not None and plan.needs_response else None)


class WSGIRateLimitMiddleware(Middleware):
    """Rate limits in front of a WSGI application.

    ``limits``: route patterns (``"POST /login"``, ``"/orgs/{org}/*"``) to
    rates, see :class:`Routes`; ``exempt``: patterns never limited;
    ``response(request, outcome)``: a hook for one's own refusal, returning
    a WSGI application or ``(status, headers, body)``; the other arguments
    make the :class:`Limiter` (or pass ``limiter=``). Pacing and ``wait``
    sleep with time.sleep. The outcome is in ``environ["libsw.outcome"]``.
    """

    def __init__(self, app: Any, limiter: Any = None, **kwargs: Any) -> None:
        super().__init__(app, limiter, **kwargs)
        # every request enters one plan (no route or exempt pattern): __call__'s path in C
        # reads (plan, limiter, application) from here
        self._plain = (self.routes.other[0], self.limiter, self.app) if self.routes.plain else None

    def __call__(self, environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        """A request (a C method replaces this one, swpy_web.c: the same,
        with the entry of a plain plan's one rule in C)."""
        return self._call(environ, start_response)

    def _call(self, environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        m = self.routes.match(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO") or "/")
        if m is None or not self.limiter.enabled:
            return self.app(environ, start_response)
        return self._call_plan(environ, start_response, m[0], m[1])

    def _call_plan(self, environ: Any, start_response: Callable[..., Any], plan: Plan,
                   params: Optional[Mapping[str, str]] = None) -> Iterable[bytes]:
        lim = self.limiter
        lim.tick -= 1
        if lim.tick <= 0:
            lim.audit_due()
        rule = plan.single
        get = rule.wsgi if rule is not None else None
        if get is not None:  # one rule, one entry, in C
            key = get(environ)
            if rule.prefix and key.__class__ is str:
                key = rule.prefix + key
            out = _web_enter(rule, key, plan.rules)
            if out.__class__ is int:
                out = lim.finish_one(rule, key, out, lambda: wsgi_request(environ), plan.rules)
        else:
            out = lim.enter(wsgi_request(environ, params), plan.rules)
        return self._respond(environ, start_response, plan, out)

    def _call_rc(self, environ: Any, start_response: Callable[..., Any], plan: Plan, key: Any,
                 rc: int) -> Iterable[bytes]:
        """After the C path's entry of plan's rule returned rc (not a pass)."""
        out = self.limiter.finish_one(plan.single, key, rc, lambda: wsgi_request(environ), plan.rules)
        return self._respond(environ, start_response, plan, out)

    def _respond(self, environ: Any, start_response: Callable[..., Any], plan: Plan, out: Outcome) -> Iterable[bytes]:
        environ["libsw.outcome"] = out
        environ["libsw.plan"] = plan
        if not out.allowed:
            return self._refused(environ, start_response, out)
        lim = self.limiter
        style = lim.style
        if style and out.rule is not None:  # the fields, added by _web_start as the response starts
            extra = _web_fields(out.rule, style, out.remaining, plan.policy_field)
            if extra is None:  # a custom clock
                extra = pass_fields(out.rule, lim.headers, max(0, out.remaining or 0), plan.policy)
            environ["libsw.fields"] = extra
        try:
            result = self.app(environ, _partial(_web_start, start_response, environ))
        except BaseException:
            out.release(error=True)
            raise
        return released(environ, result)

    def _refused(self, environ: Any, start_response: Callable[..., Any], out: Outcome) -> Iterable[bytes]:
        extra = out.headers(self.limiter.headers)
        r = custom_response(self.response, wsgi_request(environ), out)
        if callable(r):  # a WSGI application
            def start(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
                return start_response(status, merge_headers(headers, extra), exc_info)

            return r(environ, start)
        status, headers, body = refusal(r, extra)
        start_response("%d %s" % (status, _REASONS.get(status, "Error")), headers)
        return [body]


_web_install_wsgi(WSGIRateLimitMiddleware, Plan)  # __call__ in C (swpy_web.c)
