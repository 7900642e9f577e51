# SPDX-License-Identifier: Apache-2.0
"""A Flask extension: ``Limiter(app)`` or ``init_app``, ``@limiter.limit(...)``
and ``@limiter.shared_limit(...)`` per view (class-based views included:
their ``decorators`` or a method), ``@limiter.exempt``; settings from the
arguments, overridden by ``app.config["LIBSW_RATELIMIT"]`` (a dict of the
same names). Every table is made at start-up (``init_app``, or the
decorator after it): a bad setting stops the application then."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import flask

from ._core import Limiter as _Core
from ._core import refused_response, validate
from ._keys import Request, key_function
from ._outcome import _flask_before, _flask_wsgi, _web_enter, _web_fields, pass_fields  # type: ignore[attr-defined]
from ._routes import Plan
from ._segment import app_path
from ._wsgi import end_request

__all__ = ["Limiter"]

# The request context's variable (Flask >= 2.2; flask.request reads it): the
# hook's request without the proxy's lookup.
_cv_request = getattr(flask.globals, "_cv_request", None)

Spec = Tuple[str, Any, Any, Dict[str, Any]]  # (scope, rates, key, options)


def _user() -> Optional[str]:
    """flask.g.user (its id, username or itself), else the HTTP authorization's username."""
    u = getattr(flask.g, "user", None)
    if u is not None:
        return str(getattr(u, "id", None) or getattr(u, "username", None) or u)
    auth = flask.request.authorization
    return auth.username if auth is not None and auth.username else None


class Limiter:
    """Rate limits for a Flask application. ``default``: rates of every view
    without its own (each view its own count); ``application``: rates all
    views share; ``enabled=False`` serves everything (tests); the other
    arguments are :class:`libsw.web.Limiter`'s (``segment``, ``key``,
    ``trusted_proxies``, ``headers``, ...). ``response(request,
    outcome)``: one's own refusal (any view return value). Views with a
    limit of their own do not get ``default``."""

    def __init__(self, app: Optional[flask.Flask] = None, *, response: Optional[Callable[..., Any]] = None,
                 **options: Any) -> None:
        self.options = options
        self.response = response
        self.core: Optional[_Core] = None
        self._decorated: List[Any] = []  # views and methods with limits, in decoration order
        self._names: Dict[str, int] = {}  # a view name given: how many times (a second gets "#2")
        # endpoint -> method -> the plan of its requests (None: exempt); read in C (swpy_flask.c)
        self._plans: Dict[str, Dict[str, Optional[Plan]]] = {}
        if "key" in options:
            key_function(options["key"], options.get("trusted_proxies"))
        if app is not None:
            self.init_app(app)

    @property
    def enabled(self) -> bool:
        return self.core is not None and self.core.enabled

    @enabled.setter
    def enabled(self, on: bool) -> None:
        self.options["enabled"] = bool(on)
        if self.core is not None:
            self.core.enabled = bool(on)

    def init_app(self, app: flask.Flask) -> None:
        """Make the limits — every table, now: a bad setting raises here —
        and hook the app."""
        options = dict(self.options)
        options.update(app.config.get("LIBSW_RATELIMIT", {}))
        options.setdefault("app_name", app.import_name)
        options.setdefault("app_path", app_path(app))
        self.response = options.pop("response", self.response)
        self.core = _Core(**options)
        for fn in self._decorated:
            self._make(fn)
        # the hook: a plain function (Flask's ensure_sync looks at it each request), the request's
        # entry in C (swpy_flask.c), the rest in _before
        cv = _cv_request
        ext = self
        plans = self._plans
        if cv is not None:
            def before() -> Any:
                return _flask_before(ext, cv.get().request, plans)
        else:
            def before() -> Any:
                return _flask_before(ext, flask.request._get_current_object(), plans)
        app.before_request(before)
        app.extensions["libsw"] = self
        # The application, its response's start adding the request's fields (in C: none of werkzeug's
        # Headers); the request's entry ended when Flask is done with it, as its teardown would (its
        # response time, a 5xx as an error): swpy_flask.c
        app.wsgi_app = _flask_wsgi(app.wsgi_app, end_request)

    # -------------------------------------------------------- decorators

    def limit(self, rates: Any, *, key: Any = None, **options: Any) -> Callable[[Any], Any]:
        """A view's own rates (several: ``"5/second;100/minute"``, a list, a
        callable giving them per request; or stack the decorator), with its
        key function and options: ``methods``, ``cost`` (units per request,
        or a callable of the request), ``exempt_when``, ``deduct_when`` (a
        callable of the response: count it or not), and the rule's
        (``behavior``, ``wait``, ``capacity``, ...). On a class-based view:
        in its ``decorators``, or on one of its methods."""
        return self._decorator(None, rates, key, options)

    def shared_limit(self, rates: Any, scope: str, *, key: Any = None, **options: Any) -> Callable[[Any], Any]:
        """Rates that every view decorated with the same scope shares (one
        count per key for all of them)."""
        if not isinstance(scope, str) or not scope:
            raise ValueError("shared_limit(scope=%r): a name" % (scope,))
        return self._decorator("shared:" + scope, rates, key, options)

    def _decorator(self, scope: Optional[str], rates: Any, key: Any, options: Dict[str, Any]) -> Callable[[Any], Any]:
        validate(scope or "a Flask view", rates, key, options, self.options.get("trusted_proxies"))

        def decorate(fn: Any) -> Any:
            limits = list(getattr(fn, "_libsw_limits", ()))
            limits.append((scope or self._view_name(fn), rates, key, options))
            fn._libsw_limits = limits
            self._decorated.append(fn)
            if self.core is not None:
                self._make(fn)
            self._plans.clear()
            return fn

        return decorate

    def _view_name(self, fn: Any) -> str:
        """A view's own scope: its module and qualified name (a function made
        in another — a class-based view's as_view — with its name too), and
        "#2", "#3" for later functions of the same name: each view its own
        count, the same name in every worker."""
        qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "view")
        name = "%s.%s" % (getattr(fn, "__module__", "?"), qual)
        if "<locals>" in qual:
            name += ":" + getattr(fn, "__name__", "")
        seen = getattr(fn, "_libsw_view_name", None)
        if seen is not None:
            return seen
        n = self._names[name] = self._names.get(name, 0) + 1
        if n > 1:
            name += "#%d" % n
        try:
            fn._libsw_view_name = name
        except AttributeError:
            pass
        return name

    def exempt(self, fn: Any) -> Any:
        """A view never limited (not even by ``application``)."""
        fn._libsw_exempt = True
        self._plans.clear()
        return fn

    def _make(self, fn: Any) -> Tuple[Any, ...]:
        """The rules of a function's limits (their tables made now)."""
        core = self.core
        assert core is not None
        return tuple(r for scope, rates, key, o in getattr(fn, "_libsw_limits", ())
                     for r in core.rules(scope, rates, key, **o))

    # ------------------------------------------------------------- hooks

    def _plan(self, endpoint: str, method: str) -> Optional[Plan]:
        """The rules of a request of endpoint and method (None: exempt)."""
        core = self.core
        assert core is not None
        view = flask.current_app.view_functions.get(endpoint)
        if view is None or getattr(view, "_libsw_exempt", False):
            return None
        rules = self._make(view)
        cls = getattr(view, "view_class", None)
        if cls is not None:  # a class-based view: its method's limits too
            handler = getattr(cls, method.lower(), None)
            if handler is None and method == "HEAD":
                handler = getattr(cls, "get", None)
            if getattr(handler, "_libsw_exempt", False):
                return None
            rules += self._make(handler) if handler is not None else ()
        if not rules:
            rules = core.view_rules(endpoint, None)
        return Plan(core.application + rules)

    def _before(self, req: Any) -> Any:
        """The hook's Python path (swpy_flask.c's _flask_before leaves it
        here): the request's entry into its view's plan, refused or not."""
        core = self.core
        endpoint = req.endpoint
        if core is None or endpoint is None or not core.enabled:
            return None
        method = req.method
        plans = self._plans.get(endpoint)
        if plans is None:
            plans = self._plans[endpoint] = {}
        try:
            plan = plans[method]
        except KeyError:
            plan = plans[method] = self._plan(endpoint, method)
        if plan is None:
            return None
        environ = req.environ
        rule = plan.single
        get = rule.wsgi if rule is not None else None
        if get is not None:  # one rule, one entry, in C
            key = get(environ)
            if rule.prefix and key.__class__ is str:
                key = rule.prefix + key
            out = _web_enter(rule, key, plan.rules)
            if out.__class__ is int:
                return self._before_rc(req, plan, key, out)
        else:
            out = core.enter(self._request(req), plan.rules)
        return self._entered(req, plan, out)

    def _before_rc(self, req: Any, plan: Plan, key: Any, rc: int) -> Any:
        """After the entry of plan's one rule with key returned rc (not a pass)."""
        core = self.core
        assert core is not None
        out = core.finish_one(plan.single, key, rc, lambda: self._request(req), plan.rules)
        return self._entered(req, plan, out)

    def _entered(self, req: Any, plan: Plan, out: Any) -> Any:
        core = self.core
        assert core is not None
        environ = req.environ
        environ["libsw.outcome"] = out  # (the request's environ: cheaper than flask.g)
        environ["libsw.plan"] = plan
        if out.allowed:
            if core.style and out.rule is not None:  # the fields, added by wsgi_app's start_response
                fields = _web_fields(out.rule, core.style, out.remaining, plan.policy_field)
                environ["libsw.fields"] = fields if fields is not None else self._pass_fields(out, plan)
            return None
        environ["libsw.fields"] = out.headers(core.headers)
        return refused_response(self.response, self._request(req), out, flask.Response)

    def _pass_fields(self, out: Any, plan: Plan) -> Any:
        """The fields of an admitted request on a custom clock."""
        core = self.core
        assert core is not None
        return pass_fields(out.rule, core.headers, max(0, out.remaining or 0), plan.policy)

    @staticmethod
    def _request(req: Any) -> Request:
        return Request(req.method, req.path, req.remote_addr, req.headers.get, req.view_args, _user, req)

    def stats(self, top: int = 0) -> List[Dict[str, Any]]:
        """Every rule's table (see :meth:`libsw.web.Limiter.stats`)."""
        return self.core.stats(top) if self.core is not None else []
