# SPDX-License-Identifier: Apache-2.0
"""Which rules a request of the ASGI / WSGI middleware enters: patterns
``"[METHOD ]PATH"`` where PATH may hold ``{name}`` (one path segment, a
path parameter for :func:`path_param`) and ``*`` (anything); and the
:class:`Plan` of each route, made at start-up."""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Pattern, Sequence, Tuple

from ._core import Limiter
from ._outcome import policy_header
from ._rules import METHODS


class Plan:
    """The rules a request of one route enters, shortest period first, and
    what the adapters' fast path needs: ``single``, the one rule when it is
    simple (one unit, every request, a key read from the native request);
    ``policy``, the RateLimit-Policy field."""

    __slots__ = ("rules", "single", "policy", "policy_field", "policy_raw", "needs_response")

    def __init__(self, rules: Sequence[Any]) -> None:
        self.rules = tuple(sorted(rules, key=lambda r: r.rate.period_ms))
        one = self.rules[0] if len(self.rules) == 1 else None
        self.single = one if one is not None and getattr(one, "simple", False) else None
        self.policy = policy_header(self.rules)
        self.policy_field = ("RateLimit-Policy", self.policy)
        self.policy_raw = (b"ratelimit-policy", self.policy.encode("latin-1"))
        self.needs_response = any(getattr(r, "deduct_when", None) is not None for r in self.rules)


Match = Tuple[Plan, Dict[str, str]]


def compile_pattern(pattern: str) -> Tuple[Optional[str], Pattern[str]]:
    """(method or None, regex) of "[METHOD ]PATH"."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError("route pattern %r: '[METHOD ]/path' with {name} and * (e.g. 'POST /login')" % (pattern,))
    method, _, path = pattern.strip().rpartition(" ")
    method = method.strip().upper() or None
    if method is not None and method not in METHODS:
        raise ValueError("route pattern %r: method %r is not one of %s" % (pattern, method, sorted(METHODS)))
    if not path.startswith("/") and path != "*":
        raise ValueError("route pattern %r: the path must start with '/'" % (pattern,))
    out = []
    for part in re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\}|\*)", path):
        if part == "*":
            out.append(".*")
        elif part.startswith("{") and part.endswith("}"):
            out.append("(?P<%s>[^/]+)" % part[1:-1])
        else:
            out.append(re.escape(part))
    return method, re.compile("^" + "".join(out) + "$")


class Routes:
    """``limits``: pattern -> rates (``"5/minute"``), or a dict with
    ``rates`` and rule options (``key``, ``behavior``, ``wait``,
    ``methods``, ``cost``, ...); ``exempt``: patterns never limited. The
    first pattern that matches a request wins; a request matching none gets
    the limiter's ``default``. Every request not exempt also enters
    ``application``."""

    def __init__(self, limiter: Limiter, limits: Optional[Mapping[str, Any]] = None,
                 exempt: Iterable[str] = ()) -> None:
        self.limiter = limiter
        app = limiter.application
        self.exempt = [compile_pattern(p) for p in ([exempt] if isinstance(exempt, str) else exempt)]
        self.routes: List[Tuple[Optional[str], Pattern[str], Plan]] = []
        for pattern, spec in (limits or {}).items():
            method, rx = compile_pattern(pattern)
            if isinstance(spec, Mapping):
                spec = dict(spec)
                if "rates" not in spec:
                    raise ValueError("route %r: a dict of options needs 'rates'" % (pattern,))
                rules = limiter.rules(pattern, spec.pop("rates"), **spec)
            else:
                rules = limiter.rules(pattern, spec)
            self.routes.append((method, rx, Plan(app + rules)))
        self.other: Match = (Plan(app + limiter.default), {})
        self.plain = not self.exempt and not self.routes  # every request: self.other

    def match(self, method: str, path: str) -> Optional[Match]:
        """(the route's plan, path parameters), or None: exempt."""
        if self.plain:
            return self.other
        for m, rx in self.exempt:
            if (m is None or m == method) and rx.match(path):
                return None
        for m, rx, plan in self.routes:
            if m is None or m == method:
                hit = rx.match(path)
                if hit:
                    return plan, hit.groupdict()
        return self.other


class Middleware:
    """What the ASGI and WSGI middleware share: the application, the
    Limiter (``limiter=``, or made from the other keyword arguments), the
    routes and the response hook."""

    def __init__(self, app: Any, limiter: Optional[Limiter] = None, *, limits: Optional[Mapping[str, Any]] = None,
                 exempt: Iterable[str] = (), response: Optional[Any] = None, **options: Any) -> None:
        if limiter is not None and options:
            raise TypeError("give limiter= or the Limiter's options (%s), not both" % ", ".join(sorted(options)))
        self.app = app
        if limiter is None:
            from ._segment import app_path

            options.setdefault("app_path", app_path(app))
            limiter = Limiter(**options)
        self.limiter = limiter
        self.routes = Routes(self.limiter, limits, exempt)
        self.response = response
