# SPDX-License-Identifier: Apache-2.0
"""A request's entry into its rules (:class:`Outcome`) and the response
fields it adds: Retry-After, X-RateLimit-*, the IETF RateLimit fields."""
from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any, Iterable, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ._rules import Rule

HEADER_STYLES = ("ietf", "x", "both")


def retry_after_header(seconds: float) -> str:
    """Retry-After in whole seconds, rounded up (at least 1; a refusal that
    can never pass says 3600)."""
    if math.isinf(seconds):
        return "3600"
    return str(max(1, math.ceil(seconds - 1e-9)))


def policy_header(rules: Sequence[Any]) -> str:
    """RateLimit-Policy: every rate of the request."""
    return ", ".join(r.policy for r in rules if hasattr(r, "policy"))


def pass_fields(rule: "Rule", style: str, remaining: int, policy: str) -> List[Tuple[str, str]]:
    """The fields of an admitted request whose nearest rule is rule (policy:
    the request's RateLimit-Policy)."""
    reset = rule.reset_after()
    reset_s = max(0, math.ceil(reset - 1e-9))
    out: List[Tuple[str, str]] = []
    if style != "ietf":
        out += [("X-RateLimit-Limit", rule.limit_s), ("X-RateLimit-Remaining", str(remaining)),
                ("X-RateLimit-Reset", str(math.ceil(time.time() + reset_s)))]
    if style != "x":
        out += [("RateLimit-Policy", policy), ("RateLimit", "%s;r=%d;t=%d" % (rule.policy_id, remaining, reset_s))]
    return out


class Outcome:
    """A request's entry into its rules: ``allowed``, or refused by ``rule``
    (then ``retry_after`` seconds); ``remaining`` of the rule nearest its
    limit (``rule``); ``waited`` seconds of pacing; ``would_block``: a
    dry-run rule would have refused it; ``error``: a key function or a
    table failed (``on_error`` decided). Release it once when the response
    is done (``with outcome:`` does); a limit with ``deduct_when`` then
    keeps the request counted only if its response matches."""

    # A request admitted by one rule at once (the adapters' fast path) sets
    # these slots and takes the other attributes from the class.
    __slots__ = ("rule", "remaining", "rules", "_tok", "_held")
    allowed = True
    retry_after = 0.0
    waited = 0.0
    would_block = False
    error: Optional[BaseException] = None
    #: a paced request: its turn, on time.monotonic()'s clock (the decision's time + its wait)
    admitted_at: Optional[float] = None

    def release(self, error: bool = False, response: Any = None) -> None:
        """End the request's entries (once; later calls do nothing):
        response times and successes, an exception with error=True.
        response: what ``deduct_when`` of a limit decides on."""
        tok = self._tok  # (a C method replaces this one: swpy_web.c)
        if tok:
            self._tok = 0
            self.rule.end(tok, error, response)

    def _release_failed(self, rc: int) -> None:
        """The end of the entry failed (rc): logged, never raised."""
        from .._errors import error_from_code

        rule = self.rule
        rule.log.emit(logging.ERROR, "end:" + rule.name, "%s (%s): the end of a request failed: %r", rule.scope, rule.rate,
                      error_from_code(rc, "release"))

    def __enter__(self) -> "Outcome":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        self.release(error=et is not None)

    def headers(self, style: Optional[str]) -> List[Tuple[str, str]]:
        """Retry-After when refused, and the rate-limit fields of style
        (None, "ietf", "x" or "both") of the rule nearest its limit."""
        out: List[Tuple[str, str]] = []
        if not self.allowed:
            out.append(("Retry-After", retry_after_header(self.retry_after)))
        rule = self.rule
        if style is None or rule is None:
            return out
        if self.allowed:
            return out + pass_fields(rule, style, max(0, self.remaining or 0), policy_header(self.rules))
        reset_s = retry_after_header(self.retry_after)
        if style != "ietf":
            out += [("X-RateLimit-Limit", rule.limit_s), ("X-RateLimit-Remaining", "0"),
                    ("X-RateLimit-Reset", str(math.ceil(time.time() + float(reset_s))))]
        if style != "x":
            out += [("RateLimit-Policy", policy_header(self.rules)),
                    ("RateLimit", "%s;r=0;t=%s" % (rule.policy_id, reset_s))]
        return out

    def __repr__(self) -> str:
        if self.allowed:
            return "<Outcome allowed remaining=%r>" % (self.remaining,)
        return "<Outcome refused by %r retry_after=%g>" % (self.rule, self.retry_after)


class FullOutcome(Outcome):
    """An Outcome of the general path: every attribute its own."""

    __slots__ = ("allowed", "retry_after", "waited", "would_block", "error", "admitted_at")

    def release(self, error: bool = False, response: Any = None) -> None:
        """End the request's entries (once; later calls do nothing):
        response times and successes, an exception with error=True.
        response: what ``deduct_when`` of a limit decides on."""
        held = self._held
        if held:
            self._held = None
            for rule, tok in held:
                rule.end(tok, error, response)

    def __init__(self, rules: Sequence["Rule"]) -> None:
        self.allowed = True
        self.retry_after = 0.0
        self.waited = 0.0
        self.would_block = False
        self.error = None
        self.admitted_at = None
        self.rule: Optional["Rule"] = None
        self.remaining: Optional[int] = None
        self.rules = rules
        self._tok = 0
        self._held: Optional[List[Tuple["Rule", int]]] = None

    def hold(self, rule: "Rule", tok: int, remaining: int) -> None:
        """An admitted entry of rule (tok 0: nothing to end)."""
        if tok:
            if self._held is None:
                self._held = []
            self._held.append((rule, tok))
        if self.remaining is None or remaining < self.remaining:
            self.remaining = remaining
            self.rule = rule

    def cancel(self) -> None:
        """Give back what the entries held so far counted (all or nothing:
        a request one limit refuses is counted by none)."""
        held, self._held = self._held, None
        for rule, tok in held or ():
            rule.cancel(tok)


def refusal(r: Any, extra: List[Tuple[str, str]]) -> Tuple[int, List[Tuple[str, str]], bytes]:
    """(status, headers, body) of a refusal: a hook's tuple (headers a dict
    or pairs, body str or bytes), or None for the default 429; extra (the
    outcome's fields) added where the hook did not set them."""
    status, headers, body = r if r is not None else (429, [("Content-Type", "text/plain")],
                                                     b"Too Many Requests\n")
    if isinstance(body, str):
        body = body.encode()
    hl = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    return status, merge_headers(hl + [("Content-Length", str(len(body)))], extra), body


def merge_headers(have: Iterable[Tuple[str, str]], extra: Iterable[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """have + the fields of extra that have does not set already (a custom
    response's own Retry-After wins)."""
    have = list(have)
    names = {k.lower() for k, _ in have}
    return have + [(k, v) for k, v in extra if k.lower() not in names]


class ResponseInfo:
    """What ``deduct_when`` sees of a response of the ASGI and WSGI
    middleware: ``status_code`` (int) and ``headers`` (pairs of str)."""

    __slots__ = ("status_code", "headers")

    def __init__(self, status_code: int, headers: Sequence[Tuple[str, str]]) -> None:
        self.status_code = status_code
        self.headers = headers

    def __repr__(self) -> str:
        return "<ResponseInfo %d>" % self.status_code


# The fast path in C (swpy_web.c) reads Rule's and Outcome's slots, and sets
# _web_enter, _web_fields and _web_start here, and Outcome.release.
from . import _rules  # noqa: E402,F401
from .._errors import check  # noqa: E402
from .._libsw import lib  # noqa: E402

check(lib.swpy_web_install(), "libsw.web's fast path (swpy_web.c)")
