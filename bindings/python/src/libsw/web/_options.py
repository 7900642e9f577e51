# SPDX-License-Identifier: Apache-2.0
"""A limit's options, checked at start-up (a decorator, a middleware's
constructor), and a limit whose rates a callable gives per request."""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, FrozenSet, Optional, Sequence, Tuple

from ._keys import key_function
from ._log import Throttle
from ._rates import Rate, parse_rates
from ._rules import METHODS, Rule, _arity

_BEHAVIORS = ("reject", "pacing")
_ON_FULL = ("evict", "open", "closed")

_startup_log = Throttle(60.0)  # rules checked before any Limiter exists (decorators at import)
TABLE_OPTIONS = {"behavior", "max_queue", "wait", "capacity", "on_full", "windows", "dry_run"}
LIMIT_OPTIONS = {"methods", "cost", "exempt_when", "deduct_when"}
_RULE_OPTIONS = TABLE_OPTIONS | LIMIT_OPTIONS


def _by_period(rule: Any) -> int:
    return rule.rate.period_ms


def _methods(methods: Any) -> Optional[FrozenSet[str]]:
    if methods is None:
        return None
    if isinstance(methods, str):
        methods = [methods]
    out = frozenset(str(m).upper() for m in methods)
    bad = sorted(out - METHODS)
    if bad or not out:
        raise ValueError("methods=%r: %s not an HTTP method" % (methods, bad or "none is"))
    return out


def _hashable(v: Any) -> Any:
    """An option's value as part of a rule's identity."""
    if callable(v):
        return id(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return tuple(sorted(map(str, v)))
    return v


def check_options(options: Dict[str, Any]) -> None:
    """A rule's options, checked at start-up (ValueError / TypeError naming the value)."""
    unknown = set(options) - _RULE_OPTIONS
    if unknown:
        raise TypeError("unknown rule option(s): %s" % ", ".join(sorted(unknown)))
    if options.get("behavior", "reject") not in _BEHAVIORS:
        raise ValueError("behavior=%r is not one of %s" % (options["behavior"], ", ".join(_BEHAVIORS)))
    if options.get("on_full", "evict") not in _ON_FULL:
        raise ValueError("on_full=%r is not one of %s" % (options["on_full"], ", ".join(_ON_FULL)))
    cap = options.get("capacity", 1)
    if cap.__class__ is not int or not 1 <= cap <= 1 << 28:
        raise ValueError("capacity=%r must be a whole number of keys, 1..%d" % (cap, 1 << 28))
    wait = options.get("wait")
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0):
        raise ValueError("wait=%r must be seconds >= 0 (or None)" % (wait,))
    mq = options.get("max_queue", 1.0)
    if isinstance(mq, bool) or not isinstance(mq, (int, float)) or not mq >= 0:
        raise ValueError("max_queue=%r must be seconds >= 0" % (mq,))
    cost = options.get("cost", 1)
    if not callable(cost) and (cost.__class__ is not int or not 0 <= cost <= 2**31 - 1):
        raise ValueError("cost=%r must be a whole number of units 0..2147483647, or a callable" % (cost,))
    for fn in ("exempt_when", "deduct_when"):
        if options.get(fn) is not None and not callable(options[fn]):
            raise TypeError("%s=%r must be a callable" % (fn, options[fn]))
    _methods(options.get("methods"))


def validate(scope: str, rates: Any, key: Any = None, options: Optional[Dict[str, Any]] = None,
             trusted_proxies: Optional[Sequence[str]] = None, log: Optional[Throttle] = None) -> Tuple[Rate, ...]:
    """The rates of a rule, its key function and options checked (at start-up:
    a decorator, a middleware's constructor); a refusal is logged ("rule
    refused") and raised, naming the value. A callable gives its rates per
    request: () is returned for it."""
    options = options or {}
    try:
        check_options(options)
        parsed = () if callable(rates) else parse_rates(rates, options.get("windows"))
        if key is not None:
            key_function(key, trusted_proxies)
        return parsed
    except (ValueError, TypeError) as e:
        (log or _startup_log).emit(logging.ERROR, "refused", "rule refused for %s: %s", scope, e)
        raise


class Dynamic:
    """A limit whose rates a callable gives per request (Flask-Limiter's
    callable limits): each distinct rate string's rules are made when it is
    first given (at most 32), then kept."""

    __slots__ = ("fn", "args", "scope", "key", "options", "made", "prefix")
    rate = Rate(0, 0)  # sorts first among a request's rules

    def __init__(self, fn: Callable[..., Any], scope: str, key: Any, options: Dict[str, Any], prefix: str) -> None:
        self.fn = fn
        self.args = _arity(fn)
        self.scope = scope
        self.key = key
        self.options = options
        self.prefix = prefix
        self.made: Dict[str, Tuple[Rule, ...]] = {}

    def __repr__(self) -> str:
        return "<Dynamic rates %s of %s>" % (getattr(self.fn, "__qualname__", self.fn), self.scope)
