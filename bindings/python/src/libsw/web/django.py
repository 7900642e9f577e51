# SPDX-License-Identifier: Apache-2.0
"""Django: ``libsw.web.django.RateLimitMiddleware`` in ``MIDDLEWARE`` and the
view decorators :func:`ratelimit` and :func:`exempt`, configured from
``settings.LIBSW_RATELIMIT``, a dict of :class:`libsw.web.Limiter`'s
arguments (``segment``, ``key``, ``trusted_proxies``, ``default``,
``application``, ``headers``, ...) plus ``exempt`` (path patterns never
limited) and ``response`` (a hook, or the dotted path of one, returning an
HttpResponse)."""
from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from django.conf import settings
from django.http import HttpResponse
from django.urls import get_resolver

from ._core import Limiter, Outcome, Rule, refused_response, validate
from ._keys import Request
from ._routes import compile_pattern

__all__ = ["RateLimitMiddleware", "exempt", "limiter", "ratelimit"]

_lock = threading.Lock()
_limiter: Optional[Limiter] = None


def limiter() -> Limiter:
    """The process's Limiter, made from settings.LIBSW_RATELIMIT at first use."""
    global _limiter
    with _lock:
        if _limiter is None:
            conf = {k: v for k, v in _conf().items() if k not in ("exempt", "response")}
            conf.setdefault("app_name", str(getattr(settings, "ROOT_URLCONF", "django")).split(".")[0])
            _limiter = Limiter(**conf)
        return _limiter


def _conf() -> Dict[str, Any]:
    conf = getattr(settings, "LIBSW_RATELIMIT", {})
    if not isinstance(conf, dict):
        raise TypeError("settings.LIBSW_RATELIMIT must be a dict, not %s" % type(conf).__name__)
    return conf


def ratelimit(rates: Any, *, key: Any = None, **options: Any) -> Callable[[Any], Any]:
    """A view's own rates (instead of the default), with its key function
    (``"ip"``, ``"user"``, ``"header:X-Api-Key"``, ``"path:org"``, a
    callable) and rule options; checked when the view is imported."""
    validate("a Django view", rates, key, options)

    def decorate(view: Any) -> Any:
        specs = list(getattr(view, "_libsw_limits", ()))
        specs.append((rates, key, options))
        view._libsw_limits = specs
        return view

    return decorate


def exempt(view: Any) -> Any:
    """A view never limited."""
    view._libsw_exempt = True
    return view


def _user(request: Any) -> Optional[str]:
    u = getattr(request, "user", None)
    if u is None or not getattr(u, "is_authenticated", False):
        return None
    return str(u.pk)


class RateLimitMiddleware:
    """Enters every request into its view's rules (from process_view, so
    that path parameters and the view's decorators are known), answers 429
    when refused, adds the rate-limit fields to the response and releases
    the entry when the response is made. Put it after
    AuthenticationMiddleware for the ``user`` key."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        conf = _conf()
        self.core = limiter()
        self.core.application  # its tables opened now, at start-up
        self.exempt = [compile_pattern(p) for p in conf.get("exempt", ())]
        hook = conf.get("response")
        if isinstance(hook, str):
            mod, _, attr = hook.rpartition(".")
            hook = getattr(importlib.import_module(mod), attr)
        self.response = hook
        self._rules: Dict[Any, Tuple[Rule, ...]] = {}
        get_resolver().url_patterns  # imports the views: a bad @ratelimit fails at start-up

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        out: Optional[Outcome] = getattr(request, "_libsw", None)
        if out is not None:
            for k, v in out.headers(self.core.headers):
                if not response.has_header(k):
                    response[k] = v
            out.release(error=response.status_code >= 500)
        return response

    def _view_rules(self, view: Any) -> Tuple[Rule, ...]:
        rules = self._rules.get(view)
        if rules is None:
            scope = "%s.%s" % (getattr(view, "__module__", "?"), getattr(view, "__qualname__", "view"))
            rules = self._rules[view] = self.core.view_rules(scope, getattr(view, "_libsw_limits", None))
        return rules

    def process_view(self, request: Any, view: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        if getattr(view, "_libsw_exempt", False):
            return None
        path = request.path_info
        for m, rx in self.exempt:
            if (m is None or m == request.method) and rx.match(path):
                return None
        core = self.core
        r = Request(request.method, path, request.META.get("REMOTE_ADDR") or None, request.headers.get,
                    kwargs, lambda: _user(request), request)
        out = core.enter(r, core.application, self._view_rules(view))
        request._libsw = out
        return refused_response(self.response, r, out,
                                lambda body, status, headers: HttpResponse(body, status=status, content_type="text/plain"))
