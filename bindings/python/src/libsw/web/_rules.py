# SPDX-License-Identifier: Apache-2.0
"""Rules: one rate of one limit, on a keyed table.

A :class:`Table` is one rate of one scope (a view, a route pattern,
``default``, ``application``, a shared limit) on one
:class:`libsw.RateLimiter` whose keys live in a keyed table, in the shared
segment when there is one: every worker opening the segment counts in the
same table, exactly. A :class:`Rule` is a limit's use of a table: its key
function, which requests it counts (``methods``, ``exempt_when``), how
much (``cost``), and which responses keep the count (``deduct_when``).

Entries are C calls of one integer (the table's site) and the key, which
return a token: the entry in flight, ended once by :meth:`Rule.end`
(release, or cancel for all or nothing and ``deduct_when``).
"""
from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Optional

from .._errors import error_from_code
from .._keyed import _kenter, _kenter_at, _release, _release_err  # type: ignore[attr-defined]
from .._libsw import lib
from ._keys import KeyFunc, key_name
from ._rates import Rate

if TYPE_CHECKING:
    from .._limiter import RateLimiter
    from ._log import Throttle

# Added to a scaled clock (a multiple of 1000: windows keep their places):
# a keyed table's first interval after 0 is never reached (an entry at a
# time under half the interval did not return, with 10 windows).
EPOCH = 1_000_000_000
_EXIT_ERROR: int = lib.SW_EXIT_ERROR
_ENOTSUP: int = lib.SW_ENOTSUP
_STALE: int = lib.SWPY_STALE
_exit_at = lib.swpy_exit_token_at
_cancel = lib.swpy_cancel
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})


class Table:
    """One rate of one scope on one keyed table (its RateLimiter), made by
    :meth:`libsw.web.Limiter` at start-up."""

    __slots__ = ("rate", "scope", "name", "lim", "clock", "site", "custom")

    def __init__(self, rate: Rate, scope: str, name: str, lim: "RateLimiter", clock: Callable[[], int]) -> None:
        self.rate = rate
        self.scope = scope
        self.name = name
        self.lim = lim
        self.clock = clock  # the rule's clock, ms (scaled: 1000 of them are the period)
        kt = lim._kt
        self.site = kt.site  # type: ignore[union-attr]
        self.custom = kt.custom  # type: ignore[union-attr]


def _arity(fn: Callable[..., Any]) -> int:
    """1 when fn takes a positional argument (libsw.web gives it the request,
    or the response), else 0 (Flask-Limiter's callables take none)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
             inspect.Parameter.VAR_POSITIONAL)
    return 1 if any(p.kind in kinds for p in params) else 0


class Rule:
    """A limit's use of a table (see the module's docstring). ``prefix``:
    keys of a table shared by views (``default`` in Flask and Django, a
    FastAPI dependency) start with the view's name: the adapters' fast path
    adds it to what ``wsgi`` / ``asgi`` read."""

    __slots__ = ("table", "rate", "scope", "name", "lim", "site", "custom", "key", "key_name", "methods",
                 "cost", "exempt_when", "exempt_args", "deduct_when", "deduct_args", "prefix", "wsgi", "asgi",
                 "simple", "paced", "limit_s", "limit_field", "limit_raw", "policy_id", "policy", "log", "wl", "period_ms", "wsgi_env",
                 "wsgi_missing", "asgi_client")

    def __init__(self, table: Table, key: KeyFunc, log: "Throttle", methods: Optional[FrozenSet[str]] = None,
                 cost: Any = 1, exempt_when: Optional[Callable[..., Any]] = None,
                 deduct_when: Optional[Callable[..., Any]] = None, prefix: str = "") -> None:
        self.table = table
        self.rate = table.rate
        self.scope = table.scope
        self.name = table.name
        self.lim = table.lim
        self.site = table.site
        self.custom = table.custom
        self.key = key
        self.key_name = key_name(key)
        self.methods = methods
        self.cost = cost
        self.exempt_when = exempt_when
        self.exempt_args = _arity(exempt_when) if exempt_when is not None else 0
        self.deduct_when = deduct_when
        self.deduct_args = _arity(deduct_when) if deduct_when is not None else 0
        self.prefix = prefix
        self.log = log
        self.paced = table.lim.rule()["behavior"] == "pacing"
        # the adapters' fast path: one unit, every request, a key read from the native request (and
        # prefixed, for a view's share of a table)
        self.simple = (methods is None and cost == 1 and exempt_when is None and deduct_when is None
                       and not table.custom)
        self.wsgi = getattr(key, "wsgi", None) if self.simple else None
        self.asgi = getattr(key, "asgi", None) if self.simple else None
        # the paths in C (the WSGI middleware, the Flask extension): the key is environ[wsgi_env] (a
        # constant: ""), else wsgi_missing, after the prefix
        self.wsgi_env = getattr(key, "wsgi_env", None) if self.wsgi is not None else None
        self.wsgi_missing = getattr(key, "wsgi_missing", None)
        # the ASGI middleware's path in C: the key is scope["client"][0], else wsgi_missing
        self.asgi_client = bool(getattr(key, "asgi_client", False)) and self.asgi is not None and not prefix
        r = table.rate
        p = r.period_ms
        self.wl = 1000 // r.windows  # a window, in ms of the rule's clock (whose 1000 ms are the period)
        self.period_ms = p
        self.limit_s = str(r.count)
        self.limit_field = ("X-RateLimit-Limit", self.limit_s)
        self.limit_raw = (b"x-ratelimit-limit", self.limit_s.encode())  # (as an ASGI server takes it)
        self.policy_id = '"%d-per-%s"' % (r.count, "%ds" % (p // 1000) if p % 1000 == 0 else "%dms" % p)
        self.policy = "%s;q=%d;w=%d" % (self.policy_id, r.count, max(1, round(r.period)))

    # ---------------------------------------------------------- entries

    def enter(self, key: Any, n: int) -> int:
        """Enter key with n units: a token on a plain pass, else
        SWPY_NOT_PASS (the decision in swpy_decision()), SWPY_SLOW or an
        error code (see libsw._keyed)."""
        if self.custom:
            return _kenter_at(self.site, self.table.clock(), key, n)
        return _kenter(self.site, key, n)

    def end(self, tok: int, error: bool, response: Any) -> None:
        """End the entry of token tok: released (its response time, success
        or error), or, when ``deduct_when`` says this response does not
        count, cancelled. A failure is logged, never raised: the response
        is made."""
        try:
            if self.deduct_when is not None and not self._deducts(response):
                return self.cancel(tok)
            if self.custom:
                rc = _exit_at(tok, self.table.clock(), _EXIT_ERROR if error else 0)
            else:
                rc = _release_err(tok) if error else _release(tok)
            if rc < 0 and rc != _STALE:
                raise error_from_code(rc, "release")
        except Exception as e:
            self.log.emit(logging.ERROR, "end:" + self.name, "%s (%s): the end of a request failed: %r",
                          self.scope, self.rate, e)

    def _deducts(self, response: Any) -> bool:
        fn = self.deduct_when
        return bool(fn(response) if self.deduct_args else fn())  # type: ignore[misc]

    def cancel(self, tok: int) -> None:
        """Give back what the entry of tok counted (it ends it)."""
        rc = _cancel(tok, self.table.clock() if self.custom else -1)
        if rc == _ENOTSUP:
            self.log.emit(logging.WARNING, "nocancel", "this libsw cannot cancel an entry (sw_keyed_cancel: "
                          "SW_ENOTSUP): a request one limit refused, or that deduct_when did not keep, stays "
                          "counted by %s (%s)", self.scope, self.rate)
        elif rc < 0 and rc != _STALE:
            raise error_from_code(rc, "cancel")

    # ------------------------------------------------------------ reads

    def reset_after(self) -> float:
        """Seconds until everything counted now has slid out of the interval."""
        t = self.table.clock()
        wl = self.wl
        return ((t - t % wl) + 1000 - t) * self.rate.scale / 1000.0

    def __repr__(self) -> str:
        return "<Rule %s %s by %s>" % (self.scope, self.rate, self.key_name)

