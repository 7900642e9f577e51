# SPDX-License-Identifier: Apache-2.0
"""A Flask extension: ``Limiter(app)`` or ``init_app``, ``@limiter.limit(...)``
per view, ``@limiter.exempt``; settings from the arguments, overridden by
``app.config["LIBSW_RATELIMIT"]`` (a dict of the same names)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import flask

from ._core import Limiter as _Core
from ._core import Outcome, Rule, refused_response, validate
from ._keys import Request, key_function

__all__ = ["Limiter"]


def _qualname(fn: Any) -> str:
    return "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", getattr(fn, "__name__", "?")))


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
    views share; the other arguments are :class:`libsw.web.Limiter`'s
    (``segment``, ``key``, ``trusted_proxies``, ``headers``, ...).
    ``response(request, outcome)``: one's own refusal (any view return
    value). Views with a ``@limit`` do not get ``default``."""

    def __init__(self, app: Optional[flask.Flask] = None, *, response: Optional[Callable[..., Any]] = None,
                 **options: Any) -> None:
        self.options = options
        self.response = response
        self.core: Optional[_Core] = None
        self._specs: Dict[str, List[Tuple[Any, Any, Dict[str, Any]]]] = {}
        self._exempt: set = set()
        self._rules: Dict[str, Tuple[Rule, ...]] = {}
        self._names: Dict[str, str] = {}  # endpoint -> its view's qualified name
        if "key" in options:
            key_function(options["key"], options.get("trusted_proxies"))
        if app is not None:
            self.init_app(app)

    def init_app(self, app: flask.Flask) -> None:
        """Make the limits (a bad setting raises here) and hook the app."""
        options = dict(self.options)
        options.update(app.config.get("LIBSW_RATELIMIT", {}))
        options.setdefault("app_name", app.import_name)
        self.response = options.pop("response", self.response)
        self.core = _Core(**options)
        self.core.application  # its tables opened now, at start-up
        for name in list(self._specs):
            self._view_rules(name, name)
        app.before_request(self._before)
        app.after_request(self._after)
        app.teardown_request(self._teardown)
        app.extensions["libsw"] = self

    def limit(self, rates: Any, *, key: Any = None, **options: Any) -> Callable[[Any], Any]:
        """A view's own rates (several: ``"5/second;100/minute"``, or stack
        the decorator), with its key function and rule options."""
        validate("a Flask view", rates, key, options, self.options.get("trusted_proxies"))

        def decorate(fn: Any) -> Any:
            name = _qualname(fn)
            self._specs.setdefault(name, []).append((rates, key, options))
            self._rules.pop(name, None)
            if self.core is not None:
                self._view_rules(name, name)
            return fn

        return decorate

    def exempt(self, fn: Any) -> Any:
        """A view never limited (not even by ``application``)."""
        self._exempt.add(_qualname(fn))
        return fn

    def _view_rules(self, name: str, scope: str) -> Tuple[Rule, ...]:
        rules = self._rules.get(name)
        if rules is None:
            assert self.core is not None
            rules = self._rules[name] = self.core.view_rules(scope, self._specs.get(name))
        return rules

    def _before(self) -> Any:
        core = self.core
        req = flask.request._get_current_object()  # the request itself: one proxy lookup
        endpoint = req.endpoint
        if core is None or endpoint is None:
            return None
        name = self._names.get(endpoint)
        if name is None:
            name = self._names[endpoint] = _qualname(flask.current_app.view_functions.get(endpoint))
        if name in self._exempt:
            return None
        rules = self._rules.get(name) or self._view_rules(name, endpoint if name not in self._specs else name)
        r = Request(req.method, req.path, req.remote_addr, req.headers.get, req.view_args, _user, req)
        out = core.enter(r, core.application, rules)
        flask.g._libsw = out
        return refused_response(self.response, r, out, flask.Response)

    def _after(self, response: flask.Response) -> flask.Response:
        out: Optional[Outcome] = getattr(flask.g, "_libsw", None)
        if out is not None and self.core is not None:
            style = self.core.headers
            if style is not None or not out.allowed:
                have = response.headers
                for k, v in out.headers(style):
                    if k not in have:
                        have[k] = v
        return response

    def _teardown(self, exc: Optional[BaseException]) -> None:
        out: Optional[Outcome] = flask.g.pop("_libsw", None)
        if out is not None:
            out.release(error=exc is not None)

    def stats(self, top: int = 0) -> List[Dict[str, Any]]:
        """Every rule's table (see :meth:`libsw.web.Limiter.stats`)."""
        return self.core.stats(top) if self.core is not None else []
