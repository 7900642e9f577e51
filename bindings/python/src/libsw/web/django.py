# SPDX-License-Identifier: Apache-2.0
"""Django: ``libsw.web.django.RateLimitMiddleware`` in ``MIDDLEWARE`` and the
view decorators :func:`ratelimit` and :func:`exempt`, configured from
``settings.LIBSW_RATELIMIT``, a dict of :class:`libsw.web.Limiter`'s
arguments (``segment``, ``key``, ``trusted_proxies``, ``default``,
``application``, ``headers``, ``enabled``, ...) plus ``exempt`` (path
patterns never limited) and ``response`` (a hook, or the dotted path of
one, returning an HttpResponse).

The middleware walks the URLconf when it is made (gunicorn: when a worker
boots): every view's tables are made then, class-based views' methods
included (``@method_decorator(ratelimit(...), name="get")``), so a bad
setting stops the server at start-up."""
from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from django.conf import settings
from django.http import HttpResponse
from django.urls import URLPattern, URLResolver, get_resolver

from ._core import Limiter, refused_response, validate
from ._keys import Request
from ._outcome import _web_enter, _web_fields, pass_fields  # type: ignore[attr-defined]
from ._routes import Plan, compile_pattern
from ._segment import module_path

__all__ = ["RateLimitMiddleware", "exempt", "limiter", "ratelimit"]

_lock = threading.Lock()
_limiter: Optional[Limiter] = None


def limiter() -> Limiter:
    """The process's Limiter, made from settings.LIBSW_RATELIMIT at first use."""
    global _limiter
    with _lock:
        if _limiter is None:
            conf = {k: v for k, v in _conf().items() if k not in ("exempt", "response")}
            urlconf = str(getattr(settings, "ROOT_URLCONF", "django"))
            conf.setdefault("app_name", urlconf.split(".")[0])
            conf.setdefault("app_path", module_path(urlconf) or str(getattr(settings, "BASE_DIR", "")) or None)
            _limiter = Limiter(**conf)
        return _limiter


def _conf() -> Dict[str, Any]:
    conf = getattr(settings, "LIBSW_RATELIMIT", {})
    if not isinstance(conf, dict):
        raise TypeError("settings.LIBSW_RATELIMIT must be a dict, not %s" % type(conf).__name__)
    return conf


def ratelimit(rates: Any, *, key: Any = None, scope: Optional[str] = None, **options: Any) -> Callable[[Any], Any]:
    """A view's own rates (instead of the default): a rate string, several,
    a list, or a callable giving them per request; with its key function
    (``"ip"``, ``"user"``, ``"header:X-Api-Key"``, ``"path:org"``, a
    callable), ``methods``, ``cost``, ``exempt_when``, ``deduct_when`` (a
    callable of the response) and the rule's options; ``scope="name"``: a
    limit shared by every view decorated with that scope. Checked when the
    view is imported; works on function views, on a class-based view's
    ``as_view()``, and with ``@method_decorator(ratelimit(...), name=...)``."""
    validate(scope or "a Django view", rates, key, options)

    def decorate(view: Any) -> Any:
        specs = list(getattr(view, "_libsw_limits", ()))
        specs.append((None if scope is None else "shared:" + scope, rates, key, options))
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


def _views(patterns: Any) -> Iterator[Any]:
    """Every view of a URLconf's patterns, included ones too."""
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _views(p.url_patterns)
        elif isinstance(p, URLPattern):
            yield p.callback


def _name(obj: Any) -> str:
    return "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", None) or
                      getattr(obj, "__name__", "view"))


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
        self.exempt = [compile_pattern(p) for p in conf.get("exempt", ())]
        hook = conf.get("response")
        if isinstance(hook, str):
            mod, _, attr = hook.rpartition(".")
            hook = getattr(importlib.import_module(mod), attr)
        self.response = hook
        self._plans: Dict[Tuple[Any, str], Optional[Plan]] = {}
        for view in _views(get_resolver().url_patterns):  # imports the views: every table made now
            self._rules(view, None)
            cls = getattr(view, "view_class", None)
            for method in getattr(cls, "http_method_names", ()) if cls is not None else ():
                self._rules(view, method.upper())

    def _own(self, obj: Any, scope: str) -> Tuple[Any, ...]:
        core = self.core
        return tuple(r for sc, rates, key, o in getattr(obj, "_libsw_limits", ())
                     for r in core.rules(sc or scope, rates, key, **o))

    def _rules(self, view: Any, method: Optional[str]) -> Optional[Tuple[Any, ...]]:
        """The rules of a request of view (and method, for a class-based
        view's handler): its own limits, else default for the view alone;
        None: exempt."""
        if getattr(view, "_libsw_exempt", False):
            return None
        cls = getattr(view, "view_class", None)
        scope = _name(cls if cls is not None else view)
        rules = self._own(view, scope)
        if cls is not None:
            if getattr(cls, "_libsw_exempt", False):
                return None
            rules += self._own(getattr(cls, "dispatch", None), scope)
            handler = getattr(cls, method.lower(), None) if method else None
            if handler is not None:
                if getattr(handler, "_libsw_exempt", False):
                    return None
                rules += self._own(handler, "%s.%s" % (scope, method.lower()))
        rules = tuple(dict.fromkeys(rules))  # (as_view copies dispatch's attributes to the view: once each)
        if not rules:
            rules = self.core.view_rules(scope, None)
        return rules

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        got = getattr(request, "_libsw", None)
        if got is not None:
            out, plan = got
            style = self.core.style
            fields = None
            if not out.allowed:
                fields = out.headers(self.core.headers)
            elif style and out.rule is not None:
                fields = _web_fields(out.rule, style, out.remaining, plan.policy_field)
                if fields is None:  # a custom clock
                    fields = pass_fields(out.rule, self.core.headers, max(0, out.remaining or 0), plan.policy)
            for k, v in fields or ():
                if not response.has_header(k):
                    response[k] = v
            out.release(error=response.status_code >= 500, response=response)
        return response

    def process_view(self, request: Any, view: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        core = self.core
        if not core.enabled:
            return None
        method = request.method
        try:
            plan = self._plans[view, method]
        except KeyError:
            rules = self._rules(view, method)
            plan = self._plans[view, method] = None if rules is None else Plan(core.application + rules)
        if plan is None:
            return None
        path = request.path_info
        for m, rx in self.exempt:
            if (m is None or m == method) and rx.match(path):
                return None
        rule = plan.single
        get = rule.wsgi if rule is not None else None
        if get is not None:  # one rule, one entry, in C
            key = get(request.META)
            if rule.prefix and key.__class__ is str:
                key = rule.prefix + key
            out = _web_enter(rule, key, plan.rules)
            if out.__class__ is int:
                out = core.finish_one(rule, key, out, lambda: self._request(request, kwargs), plan.rules)
        else:
            out = core.enter(self._request(request, kwargs), plan.rules)
        request._libsw = (out, plan)
        if out.allowed:
            return None
        return refused_response(self.response, self._request(request, kwargs), out,
                                lambda body, status, headers: HttpResponse(body, status=status,
                                                                           content_type="text/plain"))

    @staticmethod
    def _request(request: Any, kwargs: Dict[str, Any]) -> Request:
        return Request(request.method, request.path_info, request.META.get("REMOTE_ADDR") or None,
                       request.headers.get, kwargs, lambda: _user(request), request)
