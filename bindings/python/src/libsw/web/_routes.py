# SPDX-License-Identifier: Apache-2.0
"""Which rules a request of the ASGI / WSGI middleware enters: patterns
``"[METHOD ]PATH"`` where PATH may hold ``{name}`` (one path segment, a
path parameter for :func:`path_param`) and ``*`` (anything)."""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Pattern, Tuple

from ._core import Limiter, Rule

_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
Match = Tuple[Tuple[Tuple[Rule, ...], ...], Dict[str, str]]


def compile_pattern(pattern: str) -> Tuple[Optional[str], Pattern[str]]:
    """(method or None, regex) of "[METHOD ]PATH"."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError("route pattern %r: '[METHOD ]/path' with {name} and * (e.g. 'POST /login')" % (pattern,))
    method, _, path = pattern.strip().rpartition(" ")
    method = method.strip().upper() or None
    if method is not None and method not in _METHODS:
        raise ValueError("route pattern %r: method %r is not one of %s" % (pattern, method, sorted(_METHODS)))
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
    ``rates`` and rule options (``key``, ``behavior``, ``wait``, ...);
    ``exempt``: patterns never limited. The first pattern that matches a
    request wins; a request matching none gets the limiter's ``default``.
    Every request not exempt also enters ``application``."""

    def __init__(self, limiter: Limiter, limits: Optional[Mapping[str, Any]] = None,
                 exempt: Iterable[str] = ()) -> None:
        self.limiter = limiter
        self.default = limiter.default  # their tables opened now, at start-up
        self.application = limiter.application
        self.exempt = [compile_pattern(p) for p in ([exempt] if isinstance(exempt, str) else exempt)]
        self.routes: List[Tuple[Optional[str], Pattern[str], Tuple[Rule, ...]]] = []
        for pattern, spec in (limits or {}).items():
            method, rx = compile_pattern(pattern)
            if isinstance(spec, Mapping):
                spec = dict(spec)
                if "rates" not in spec:
                    raise ValueError("route %r: a dict of options needs 'rates'" % (pattern,))
                rules = limiter.rules(pattern, spec.pop("rates"), **spec)
            else:
                rules = limiter.rules(pattern, spec)
            self.routes.append((method, rx, rules))

    def match(self, method: str, path: str) -> Optional[Match]:
        """(groups of rules, path parameters), or None: exempt."""
        for m, rx in self.exempt:
            if (m is None or m == method) and rx.match(path):
                return None
        for m, rx, rules in self.routes:
            if m is None or m == method:
                hit = rx.match(path)
                if hit:
                    return (self.application, rules), hit.groupdict()
        return (self.application, self.default), {}


class Middleware:
    """What the ASGI and WSGI middleware share: the application, the
    Limiter (``limiter=``, or made from the other keyword arguments), the
    routes and the response hook."""

    def __init__(self, app: Any, limiter: Optional[Limiter] = None, *, limits: Optional[Mapping[str, Any]] = None,
                 exempt: Iterable[str] = (), response: Optional[Any] = None, **options: Any) -> None:
        if limiter is not None and options:
            raise TypeError("give limiter= or the Limiter's options (%s), not both" % ", ".join(sorted(options)))
        self.app = app
        self.limiter = limiter if limiter is not None else Limiter(**options)
        self.routes = Routes(self.limiter, limits, exempt)
        self.response = response
