# SPDX-License-Identifier: Apache-2.0
"""The engine every adapter shares: rules on keyed tables, the entry of a
request into its rules, the response headers, logging and statistics.

One :class:`Rule` is one rate of one scope (a route, or the application)
on one :class:`libsw.RateLimiter` whose keys live in a keyed table, in the
shared segment when there is one: every worker opening the segment counts
in the same table, exactly. A request enters its rules from the shortest
period to the longest and stops at the first refusal.
"""
from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

from .._clock import now_ms
from .._errors import BlockedError
from .._limiter import RateLimiter
from ._keys import KeyFunc, Request, key_function, key_name
from ._log import Throttle, counters_grown
from ._rates import DEFAULT_WINDOWS, Rate, parse_rates

DEFAULT = "default"  # segment=DEFAULT: the documented default name (default_segment)
HEADER_STYLES = ("ietf", "x", "both")
_BEHAVIORS = ("reject", "pacing")
_ON_ERROR = ("open", "closed")
_LOGGED_FIELDS = ["evicted", "refused", "would_block"]
# Added to a scaled clock (a multiple of 1000: windows keep their places):
# a keyed table's first interval after 0 is never reached (an entry at a
# time under half the interval did not return, with 10 windows).
_EPOCH = 1_000_000_000


_startup_log = Throttle(60.0)  # rules checked before any Limiter exists (decorators at import)
_RULE_OPTIONS = {"behavior", "max_queue", "wait", "capacity", "on_full", "windows", "dry_run"}


def _by_period(rule: "Rule") -> int:
    return rule.rate.period_ms


def validate(scope: str, rates: Any, key: Any = None, options: Optional[Dict[str, Any]] = None,
             trusted_proxies: Optional[Sequence[str]] = None, log: Optional[Throttle] = None) -> Tuple[Rate, ...]:
    """The rates of a rule, its key function and options checked (at start-up:
    a decorator, a middleware's constructor); a refusal is logged ("rule
    refused") and raised, naming the value."""
    options = options or {}
    try:
        unknown = set(options) - _RULE_OPTIONS
        if unknown:
            raise TypeError("unknown rule option(s): %s" % ", ".join(sorted(unknown)))
        if options.get("behavior", "reject") not in _BEHAVIORS:
            raise ValueError("behavior=%r is not one of %s" % (options["behavior"], ", ".join(_BEHAVIORS)))
        parsed = parse_rates(rates, options.get("windows"))
        if key is not None:
            key_function(key, trusted_proxies)
        return parsed
    except (ValueError, TypeError) as e:
        (log or _startup_log).emit(logging.ERROR, "refused", "rule refused for %s: %s", scope, e)
        raise


def default_segment(app_name: str = "app") -> str:
    """The segment the limits live in unless ``segment=`` says otherwise:
    ``"libsw-web-<uid>-<app>"``, where <app> is app_name with characters
    other than letters, digits, '_', '-' and '.' dropped (at most 16): the
    workers of one application run by one user share it."""
    slug = re.sub(r"[^A-Za-z0-9_.-]", "", app_name or "app")[:16] or "app"
    return "libsw-web-%d-%s" % (os.getuid(), slug)


def retry_after_header(seconds: float) -> str:
    """Retry-After in whole seconds, rounded up (at least 1; a refusal that
    can never pass says 3600)."""
    if math.isinf(seconds):
        return "3600"
    return str(max(1, math.ceil(seconds - 1e-9)))


class Rule:
    """One rate of one scope on one keyed table."""

    __slots__ = ("rate", "scope", "key", "key_name", "name", "lim", "scale", "_clock", "_last")

    def __init__(self, rate: Rate, scope: str, key: KeyFunc, lim: RateLimiter, name: str,
                 clock: Callable[[], int]) -> None:
        self.rate = rate
        self.scope = scope
        self.key = key
        self.key_name = key_name(key)
        self.name = name
        self.lim = lim
        self.scale = rate.scale  # real seconds per second of the rule's clock
        self._clock = clock  # the rule's clock, ms (scaled: 1000 of them are the period)
        self._last: Dict[str, int] = {}

    def reset_after(self) -> float:
        """Seconds until everything counted now has slid out of the interval."""
        t = self._clock()
        wl = 1000 // self.rate.windows
        return ((t - t % wl) + 1000 - t) * self.rate.scale / 1000.0

    def policy_id(self) -> str:
        p = self.rate.period_ms
        return '"%d-per-%s"' % (self.rate.count, "%ds" % (p // 1000) if p % 1000 == 0 else "%dms" % p)

    def stats(self, top: int = 0) -> Dict[str, Any]:
        """This rule's keyed table (its totals are every worker's)."""
        s = self.lim.keyed_stats()
        out = {"rule": self.name, "scope": self.scope, "rate": str(self.rate), "key": self.key_name,
               "keys": s.keys, "pass": s.pass_, "block": s.block, "would_block": s.would_block,
               "inserted": s.inserted, "reclaimed": s.reclaimed, "evicted": s.evicted, "refused": s.refused,
               "capacity": s.capacity, "active_keys": self.lim.active_keys()}
        if top:
            out["top_keys"] = [(k.key, k.pass_, k.block) for k in self.lim.top_keys(top)]
        return out

    def __repr__(self) -> str:
        return "<Rule %s %s by %s>" % (self.scope, self.rate, self.key_name)


class Outcome:
    """A request's entry into its rules: ``allowed`` or refused by
    ``rule`` (then ``retry_after`` seconds); ``waited`` seconds of pacing;
    ``would_block``: a dry-run rule would have refused it. Release it
    once when the response is done (``with outcome:`` does)."""

    __slots__ = ("allowed", "rule", "retry_after", "remaining", "waited", "would_block", "rules", "_permits",
                 "error")

    def __init__(self) -> None:
        self.allowed, self.would_block, self.retry_after, self.waited = True, False, 0.0, 0.0
        self.rule: Optional[Rule] = None
        self.remaining: Optional[int] = None
        self.rules: List[Rule] = []
        self._permits: List[Any] = []
        self.error: Optional[BaseException] = None

    def release(self, error: bool = False) -> None:
        permits, self._permits = self._permits, []
        for p in permits:
            p.release(error=error)

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
        remaining = 0 if not self.allowed else max(0, self.remaining or 0)
        reset = self.retry_after if not self.allowed else rule.reset_after()
        reset_s = retry_after_header(reset) if not self.allowed else str(max(0, math.ceil(reset - 1e-9)))
        if style in ("x", "both"):
            out += [("X-RateLimit-Limit", str(rule.rate.count)), ("X-RateLimit-Remaining", str(remaining)),
                    ("X-RateLimit-Reset", str(math.ceil(time.time() + float(reset_s))))]
        if style in ("ietf", "both"):
            out += [("RateLimit-Policy", ", ".join("%s;q=%d;w=%d" % (r.policy_id(), r.rate.count,
                                                                     max(1, round(r.rate.period)))
                                                   for r in self.rules)),
                    ("RateLimit", "%s;r=%d;t=%s" % (rule.policy_id(), remaining, reset_s))]
        return out


class Limiter:
    """Rate limits for a web application, shared by its worker processes.

    ``segment``: where the limits live: a shared-memory name or a file path
    (every process opening it shares the limits exactly), ``"default"`` for
    :func:`default_segment` of ``app_name``, or ``None`` for this process's
    memory alone. ``key``: the key function of rules that name none (see
    :func:`key_function`); ``trusted_proxies`` applies to ``"ip"``.
    ``default``: rates every limited route gets (each route its own count);
    ``application``: rates all routes share. ``headers``: None, ``"ietf"``,
    ``"x"`` or ``"both"``. ``behavior``: ``"reject"`` (429) or ``"pacing"``
    (admissions spaced evenly, queueing up to ``max_queue`` seconds);
    ``wait``: with reject, wait up to this many seconds for a refused
    request to pass instead of answering 429. ``capacity``: keys at once
    per rule; ``on_full``: ``"evict"``, ``"open"`` or ``"closed"`` (what a
    new key gets when the table is full of active keys). ``dry_run``: count
    and log would-be refusals, serve everything. ``on_error``: a key
    function that raises serves the request (``"open"``) or refuses it
    (``"closed"``). Logging: ``logging.getLogger("libsw")``, once per event
    kind per ``log_interval`` seconds. ``clock``: milliseconds (tests).
    """

    def __init__(self, *, segment: Optional[Union[str, "os.PathLike[str]"]] = DEFAULT, app_name: str = "app",
                 key: Any = "ip", trusted_proxies: Optional[Sequence[str]] = None,
                 default: Any = None, application: Any = None, headers: Optional[str] = None,
                 behavior: str = "reject", max_queue: float = 1.0, wait: Optional[float] = None,
                 capacity: int = 100_000, on_full: str = "evict", windows: Optional[int] = None,
                 dry_run: bool = False, on_error: str = "open", log_interval: float = 60.0,
                 key_bytes: int = 16, reset: bool = False, clock: Optional[Callable[[], int]] = None) -> None:
        if headers is True:
            headers = "both"
        if headers is not None and headers is not False and headers not in HEADER_STYLES:
            raise ValueError("headers=%r is not one of None, 'ietf', 'x', 'both'" % (headers,))
        if behavior not in _BEHAVIORS:
            raise ValueError("behavior=%r is not one of %s" % (behavior, ", ".join(_BEHAVIORS)))
        if on_error not in _ON_ERROR:
            raise ValueError("on_error=%r is not one of 'open', 'closed'" % (on_error,))
        if wait is not None and (not isinstance(wait, (int, float)) or wait < 0):
            raise ValueError("wait=%r must be seconds >= 0 (or None)" % (wait,))
        self.segment = default_segment(app_name) if segment == DEFAULT else segment
        self.app_name = app_name
        self.trusted_proxies = trusted_proxies
        self.key = key_function(key, trusted_proxies)
        self.headers = headers or None
        self.behavior, self.max_queue, self.wait = behavior, max_queue, wait
        self.capacity, self.on_full, self.windows = capacity, on_full, windows
        self.dry_run, self.on_error = bool(dry_run), on_error
        self.key_bytes, self.reset, self.clock = key_bytes, reset, clock
        self.log = Throttle(log_interval)
        self._lock = threading.Lock()
        self._rules: Dict[Tuple[Any, ...], Rule] = {}
        self._counters: Dict[str, Dict[str, int]] = {}
        self._next_audit = 0.0
        self.default_rates = default
        self.application_rates = application
        for scope, rates in (("default", default), ("application", application)):
            if rates is not None:
                validate(scope, rates, None, {"windows": windows}, trusted_proxies, self.log)
        self._default: Optional[Tuple[Rule, ...]] = None
        self._application: Optional[Tuple[Rule, ...]] = None

    @property
    def default(self) -> Tuple[Rule, ...]:
        """The rules of ``default`` shared by every request that has no
        rules of its own (the middleware's); the framework adapters make
        ``default`` per view instead."""
        if self._default is None:
            rates = self.default_rates
            self._default = self.rules("default", rates) if rates is not None else ()
        return self._default

    @property
    def application(self) -> Tuple[Rule, ...]:
        """The rules of ``application``: every limited request enters them."""
        if self._application is None:
            rates = self.application_rates
            self._application = self.rules("application", rates) if rates is not None else ()
        return self._application

    # ------------------------------------------------------------ rules

    def rules(self, scope: str, rates: Any, key: Any = None, **options: Any) -> Tuple[Rule, ...]:
        """The rules of rates (a rate string, several separated by ";", or
        a list) for scope, made once (their tables are opened now: a bad
        rate, key or option raises here, at start-up)."""
        opts = dict(options)
        opts.setdefault("windows", self.windows)
        parsed = validate(scope, rates, key, opts, self.trusted_proxies, self.log)
        keyfn = self.key if key is None else key_function(key, self.trusted_proxies)
        return tuple(self._rule(r, scope, keyfn, options) for r in parsed)

    def _rule(self, rate: Rate, scope: str, keyfn: KeyFunc, o: Dict[str, Any]) -> Rule:
        behavior = o.get("behavior", self.behavior)
        wait = o.get("wait", self.wait)
        capacity = o.get("capacity", self.capacity)
        on_full = o.get("on_full", self.on_full)
        max_queue = o.get("max_queue", self.max_queue)
        dry_run = bool(o.get("dry_run", self.dry_run))
        ident = (scope, rate.count, rate.period_ms, rate.windows, behavior, capacity, self.key_bytes,
                 key_name(keyfn))
        with self._lock:
            rule = self._rules.get(ident + (id(keyfn),))
            if rule is not None:
                return rule
            name = self._name(scope, rate, ident)
            scale = rate.scale
            base = self.clock if self.clock is not None else now_ms
            if self.clock is None and rate.period_ms == 1000:
                clock, lim_clock = now_ms, None  # the rule's clock is libsw's: the fast path
            else:
                p = rate.period_ms
                clock = lim_clock = (lambda base=base, p=p: base() * 1000 // p + _EPOCH)
            sleeper = getattr(self.clock, "sleep", None) or time.sleep
            asleeper = getattr(self.clock, "async_sleep", None)
            if asleeper is None:
                import asyncio

                asleeper = asyncio.sleep
            try:
                lim = RateLimiter(
                    rate.count, name=name, windows=rate.windows, interval=1.0, capacity=capacity,
                    on_full=on_full, key_bytes=self.key_bytes, segment=self._segment_for(rate), stripes=1,
                    reset=self.reset,
                    behavior=behavior, max_queue=max_queue / scale, dry_run=dry_run, clock=lim_clock,
                    block=wait is not None, timeout=None if wait is None else wait / scale,
                    sleep=lambda s, f=sleeper: f(s * scale), async_sleep=lambda s, f=asleeper: f(s * scale))
            except Exception as e:
                self.log.emit(logging.ERROR, "refused", "rule refused for %s (%s): %s", scope, rate, e)
                raise
            if not lim.keyed:  # the table takes every rule made here; say so if it ever does not
                lim.close()
                raise ValueError("rule %s for %s: a keyed table does not take it" % (rate, scope))
            rule = Rule(rate, scope, keyfn, lim, name, clock)
            self._rules[ident + (id(keyfn),)] = rule
            return rule

    def _segment_for(self, rate: Rate) -> Any:
        """The segment of a rule: a segment's limiters share one window
        geometry, so rules of other than the default 10 windows live in
        "<segment>-w<windows>"."""
        seg = self.segment
        if seg is None or rate.windows == DEFAULT_WINDOWS:
            return seg
        return "%s-w%d" % (os.fspath(seg), rate.windows)

    def _name(self, scope: str, rate: Rate, ident: Tuple[Any, ...]) -> str:
        """The rule's name in the segment: the same in every worker, new
        when the rule's rate, geometry or key changes (a new table). Its
        keys' segment "<segment>.keys.<name>" must fit a POSIX name (63
        bytes): the readable part is cut to fit."""
        digest = hashlib.blake2b(repr(ident).encode(), digest_size=4).hexdigest()
        p = rate.period_ms
        readable = "%s.%d-%s" % (re.sub(r"[^A-Za-z0-9_.-]", "", scope), rate.count,
                                 "%ds" % (p // 1000) if p % 1000 == 0 else "%dms" % p)
        seg = os.fspath(self._segment_for(rate) or "")
        budget = 63 if (not seg or "/" in str(seg)) else 63 - len(seg) - len(".keys.")
        if budget < len(digest):
            raise ValueError("segment=%r is too long: its keys' segments \"<segment>.keys.<rule>\" must fit "
                             "63 bytes (a segment name of at most 40 bytes leaves room)" % (seg,))
        return (digest + "." + readable)[:budget].rstrip(".")

    @property
    def all_rules(self) -> List[Rule]:
        with self._lock:
            return list(self._rules.values())

    # ---------------------------------------------------------- entries

    def _key(self, rule: Rule, req: Request, out: Outcome) -> Optional[str]:
        try:
            return rule.key(req)
        except Exception as e:  # a key function's bug must not take the site down
            self.log.emit(logging.ERROR, "key:" + rule.key_name, "key function %s raised %r on %s %s: "
                          "request %s", rule.key_name, e, req.method, req.path,
                          "served (on_error='open')" if self.on_error == "open" else "refused")
            out.error = e
            return None

    def _refuse(self, out: Outcome, rule: Rule, e: BlockedError) -> Outcome:
        out.allowed = False
        out.rule = rule
        out.retry_after = e.retry_after * rule.scale
        out.remaining = 0
        if e.full:
            self.log.emit(logging.WARNING, "full:" + rule.name, "key table of %s (%s) is full of active keys: "
                          "a new key refused (on_full='closed'); capacity=%d", rule.scope, rule.rate,
                          rule.lim.capacity)
        out.release()
        return out

    def _admitted(self, out: Outcome, rule: Rule, p: Any) -> None:
        out._permits.append(p)
        if p.waited:
            out.waited += p.waited * rule.scale
        if p.would_block:
            out.would_block = True
        if p.full:
            self.log.emit(logging.WARNING, "full:" + rule.name, "key table of %s (%s) is full of active keys: "
                          "a new key let through uncounted (on_full='open'); capacity=%d", rule.scope,
                          rule.rate, rule.lim.capacity)
        if out.remaining is None or p.remaining < out.remaining:
            out.remaining = p.remaining
            out.rule = rule

    def _start(self, groups: Sequence[Sequence[Rule]]) -> Tuple[Outcome, List[Rule]]:
        out = Outcome()
        rules = [r for g in groups for r in g] if len(groups) != 1 else list(groups[0])
        if len(rules) > 1:
            rules.sort(key=_by_period)
        out.rules = rules
        if time.monotonic() >= self._next_audit:
            self.audit()
        return out, rules

    def _failed_key(self, out: Outcome) -> bool:
        """A key function raised: with on_error='closed' the request is refused."""
        if out.error is not None and self.on_error == "closed":
            out.allowed = False
            out.retry_after = 1.0
            out.release()
            return True
        return False

    async def _enter(self, req: Request, groups: Tuple[Sequence[Rule], ...], sync: bool) -> Outcome:
        """The entry of a request, for both callers: with sync=True it never
        suspends (waits are time.sleep), so enter() runs it to the end in
        one step; enter_async() awaits it (waits are asyncio.sleep)."""
        out, rules = self._start(groups)
        for rule in rules:
            k = self._key(rule, req, out)
            if k is None:
                if self._failed_key(out):
                    return out
                continue
            try:
                p = rule.lim.acquire(key=k or "-") if sync else await rule.lim.acquire_async(key=k or "-")
            except BlockedError as e:
                return self._refuse(out, rule, e)
            self._admitted(out, rule, p)
        return out

    def enter(self, req: Request, *groups: Sequence[Rule]) -> Outcome:
        """Enter a request into the rules of groups (waits with time.sleep
        for pacing or ``wait``)."""
        run = self._enter(req, groups, True)
        try:
            run.send(None)
        except StopIteration as done:
            return cast(Outcome, done.value)
        run.close()
        raise RuntimeError("libsw.web: a synchronous entry suspended")

    async def enter_async(self, req: Request, *groups: Sequence[Rule]) -> Outcome:
        """:meth:`enter` for ASGI: waits with asyncio.sleep."""
        return await self._enter(req, groups, False)

    def view_rules(self, scope: str, specs: Optional[Sequence[Tuple[Any, Any, Dict[str, Any]]]]) -> Tuple[Rule, ...]:
        """A view's rules: its own (rates, key, options) specs, else the
        ``default`` rates counted for this view alone."""
        if specs:
            return tuple(r for rates, key, o in specs for r in self.rules(scope, rates, key, **o))
        return self.rules(scope, self.default_rates) if self.default_rates is not None else ()

    # ------------------------------------------------- logging, statistics

    def audit(self) -> None:
        """Log what the tables counted since the last audit (evictions of a
        full table, keys refused or let through, dry-run would-be
        refusals): once per log interval, from a request, never per request."""
        self._next_audit = time.monotonic() + max(self.log.interval, 1.0)
        for rule in self.all_rules:
            try:
                s = rule.lim.keyed_stats()
            except Exception:  # closed meanwhile
                continue
            prev = self._counters.setdefault(rule.name, {})
            grown = counters_grown(prev, {"evicted": s.evicted, "refused": s.refused,
                                          "would_block": s.would_block}, _LOGGED_FIELDS)
            if grown.get("evicted") or grown.get("refused"):
                self.log.emit(logging.WARNING, "full:" + rule.name,
                              "key table of %s (%s) is full of active keys: %d evicted, %d refused or let "
                              "through since the last check (on_full=%r, capacity=%d)", rule.scope, rule.rate,
                              grown.get("evicted", 0), grown.get("refused", 0), self.on_full, s.capacity)
            if grown.get("would_block"):
                self.log.emit(logging.WARNING, "dry_run:" + rule.name,
                              "dry run: %s (%s) would have refused %d requests since the last check",
                              rule.scope, rule.rate, grown["would_block"])

    def stats(self, top: int = 0) -> List[Dict[str, Any]]:
        """Every rule's table: keys, passes, blocks, would-be blocks (dry
        run), evictions, and with top=N its N busiest keys. A shared
        segment's tables count every worker's requests."""
        return [r.stats(top) for r in self.all_rules]

    def set_dry_run(self, on: bool) -> None:
        """Switch dry run on or off for every rule (in every worker, for a
        shared segment)."""
        self.dry_run = bool(on)
        for r in self.all_rules:
            r.lim.set_dry_run(on)

    def close(self) -> None:
        for r in self.all_rules:
            r.lim.close()
        with self._lock:
            self._rules.clear()


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


def custom_response(hook: Any, req: Request, out: Outcome) -> Any:
    """What a response hook returned for a refused request, or None for the
    default 429."""
    return None if hook is None else hook(req, out)


def refused_response(hook: Any, req: Request, out: Outcome, make: Callable[[bytes, int, Any], Any]) -> Any:
    """A framework's answer to a request: None when admitted; when refused,
    the hook's response, else make(body, status, headers) of the default
    429 (the outcome's fields are added to either afterwards)."""
    if out.allowed:
        return None
    r = custom_response(hook, req, out)
    if r is not None:
        return r
    status, headers, body = refusal(None, [])
    return make(body, status, headers)
