# SPDX-License-Identifier: Apache-2.0
"""WSGI middleware (Flask, Django, any WSGI application)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Tuple

from ._core import Outcome, custom_response, merge_headers, refusal
from ._keys import Request
from ._routes import Middleware

_REASONS = {429: "Too Many Requests", 503: "Service Unavailable", 200: "OK", 403: "Forbidden"}


def wsgi_request(environ: Mapping[str, Any], params: Optional[Mapping[str, str]] = None) -> Request:
    """A Request of a WSGI environ (REMOTE_ADDR, HTTP_* headers, REMOTE_USER)."""
    return Request(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO") or "/",
                   environ.get("REMOTE_ADDR") or None,
                   lambda name: environ.get("HTTP_" + name.upper().replace("-", "_")),
                   params, lambda: environ.get("REMOTE_USER") or None, environ)


class _Released:
    """The application's response iterable; the entry is released when the
    server closes it (the response is sent), recording its response time."""

    def __init__(self, result: Iterable[bytes], out: Outcome) -> None:
        self.result = result
        self.out = out

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.result)

    def close(self) -> None:
        try:
            close = getattr(self.result, "close", None)
            if close is not None:
                close()
        finally:
            self.out.release()


class WSGIRateLimitMiddleware(Middleware):
    """Rate limits in front of a WSGI application.

    ``limits``: route patterns (``"POST /login"``, ``"/orgs/{org}/*"``) to
    rates, see :class:`Routes`; ``exempt``: patterns never limited;
    ``response(request, outcome)``: a hook for one's own refusal, returning
    a WSGI application or ``(status, headers, body)``; the other arguments
    make the :class:`Limiter` (or pass ``limiter=``). Pacing and ``wait``
    sleep with time.sleep. The outcome is in ``environ["libsw.outcome"]``.
    """

    def __call__(self, environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        m = self.routes.match(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO") or "/")
        if m is None:
            return self.app(environ, start_response)
        req = wsgi_request(environ, m[1])
        out = self.limiter.enter(req, *m[0])
        environ["libsw.outcome"] = out
        extra = out.headers(self.limiter.headers)
        if not out.allowed:
            return self._refused(environ, start_response, req, out, extra)

        def start(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, merge_headers(headers, extra), exc_info)

        try:
            result = self.app(environ, start if extra else start_response)
        except BaseException:
            out.release(error=True)
            raise
        return _Released(result, out)

    def _refused(self, environ: Any, start_response: Callable[..., Any], req: Request, out: Outcome,
                 extra: List[Tuple[str, str]]) -> Iterable[bytes]:
        r = custom_response(self.response, req, out)
        if callable(r):  # a WSGI application
            def start(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
                return start_response(status, merge_headers(headers, extra), exc_info)

            return r(environ, start)
        status, headers, body = refusal(r, extra)
        start_response("%d %s" % (status, _REASONS.get(status, "Error")), headers)
        return [body]
