# SPDX-License-Identifier: Apache-2.0
"""The engine every adapter shares: the configuration, the tables (made at
start-up), the entry of a request into its rules, the handling of
failures, logging and statistics.

A request enters its rules from the shortest period to the longest and
stops at the first refusal; the entries it made before are then
cancelled (all or nothing: a request one limit refuses is counted by
none). Every failure of a key function or a table follows ``on_error``
(served, or refused), is logged once per kind per interval and counted in
:meth:`Limiter.stats`: no client input makes a 500.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

from .._clock import now_ms
from .._errors import BlockedError
from .._keyed import _remaining  # type: ignore[attr-defined]
from .._limiter import RateLimiter
from .._libsw import lib
from ._keys import KeyFunc, Request, key_function, key_name, normalize_key
from ._log import Throttle, counters_grown
from ._outcome import HEADER_STYLES, FullOutcome, Outcome
from ._options import Dynamic, _by_period, _hashable, _methods, check_options, validate
from ._rates import DEFAULT_WINDOWS, Rate
from ._rules import EPOCH, Rule, Table
from ._segment import app_path as caller_path
from ._segment import default_segment, reset_once

DEFAULT = "default"  # segment=DEFAULT: the documented default name (default_segment)
# Keys a rule's table holds at once: 6 rules of it fit a 64 MB /dev/shm (Docker's
# default) with room to spare (docs/web.md, "How much /dev/shm").
DEFAULT_CAPACITY = 15_000
_ON_ERROR = ("open", "closed")
_LOGGED_FIELDS = ["evicted", "refused", "would_block"]
_SLOW: int = lib.SWPY_SLOW
_DYNAMIC_MAX = 32  # distinct rates one callable may give (each a table)

class Limiter:
    """Rate limits for a web application, shared by its worker processes.

    ``segment``: where the limits live: a shared-memory name or a file path
    (every process opening it shares the limits exactly), ``"default"`` for
    :func:`default_segment` of ``app_name`` and ``app_path``, or ``None`` for
    this process's memory alone. ``key``: the key function of rules that
    name none (see :func:`key_function`); ``trusted_proxies`` applies to
    ``"ip"``. ``default``: rates every limited route gets (each route its
    own count); ``application``: rates all routes share. ``headers``:
    None, ``"ietf"``, ``"x"`` or ``"both"``. ``behavior``: ``"reject"``
    (429) or ``"pacing"`` (admissions spaced evenly, queueing up to
    ``max_queue`` seconds); ``wait``: with reject, wait up to this many
    seconds for a refused request to pass instead of answering 429.
    ``capacity``: keys at once per rule; ``on_full``: ``"evict"``,
    ``"open"`` or ``"closed"`` (what a new key gets when the table is full
    of active keys). ``dry_run``: count and log would-be refusals, serve
    everything. ``on_error``: a key function or a table that fails serves
    the request (``"open"``) or refuses it (``"closed"``). ``enabled``:
    False serves every request and counts nothing (tests). ``reset``: True
    (once per deployment) or a deployment id: start the counts from zero.
    Logging: ``logging.getLogger("libsw")``, once per event kind per
    ``log_interval`` seconds. ``clock``: milliseconds (tests).

    Every table of the configuration is made when it is given (here, a
    middleware's constructor, ``init_app``): a bad setting, a segment that
    cannot be made, a full /dev/shm raise then, at start-up.
    """

    def __init__(self, *, segment: Optional[Union[str, "os.PathLike[str]"]] = DEFAULT, app_name: str = "app",
                 app_path: Optional[str] = None, key: Any = "ip", trusted_proxies: Optional[Sequence[str]] = None,
                 default: Any = None, application: Any = None, headers: Optional[Union[str, bool]] = None,
                 behavior: str = "reject", max_queue: float = 1.0, wait: Optional[float] = None,
                 capacity: int = DEFAULT_CAPACITY, on_full: str = "evict", windows: Optional[int] = None,
                 dry_run: bool = False, on_error: str = "open", enabled: bool = True, log_interval: float = 60.0,
                 key_bytes: int = 16, reset: Union[bool, str] = False,
                 clock: Optional[Callable[[], int]] = None) -> None:
        if headers is True:
            headers = "both"
        if headers is not None and headers is not False and headers not in HEADER_STYLES:
            raise ValueError("headers=%r is not one of None, 'ietf', 'x', 'both'" % (headers,))
        if on_error not in _ON_ERROR:
            raise ValueError("on_error=%r is not one of 'open', 'closed'" % (on_error,))
        check_options({"behavior": behavior, "max_queue": max_queue, "wait": wait, "capacity": capacity,
                       "on_full": on_full})
        if key_bytes.__class__ is not int or not 16 <= key_bytes <= 128:
            raise ValueError("key_bytes=%r must be 16..128" % (key_bytes,))
        if not isinstance(reset, (bool, str)) or reset == "":
            raise ValueError("reset=%r must be True, False or a deployment id (a non-empty str)" % (reset,))
        if segment is not None and not isinstance(segment, (str, os.PathLike)):
            raise TypeError("segment=%r must be a name, a path, 'default' or None" % (segment,))
        self.segment: Optional[str] = None
        if segment is not None:
            seg = default_segment(app_name, app_path or caller_path()) if segment == DEFAULT else os.fspath(segment)
            if "/" not in seg and len(seg.encode()) > 40:
                raise ValueError("segment=%r is too long: its keys' segments \"<segment>.keys.<rule>\" must fit "
                                 "63 bytes (a segment name of at most 40 bytes leaves room)" % (seg,))
            self.segment = seg
        self.app_name = app_name
        self.trusted_proxies = trusted_proxies
        self.key = key_function(key, trusted_proxies)
        self.headers: Optional[str] = headers or None  # type: ignore[assignment]
        self.style = {None: 0, "x": 1, "ietf": 2, "both": 3}[self.headers]  # (for swpy_web.c)
        self.behavior, self.max_queue, self.wait = behavior, max_queue, wait
        self.capacity, self.on_full, self.windows = capacity, on_full, windows
        self.dry_run, self.on_error, self.enabled = bool(dry_run), on_error, bool(enabled)
        self.key_bytes, self.reset, self.clock = key_bytes, reset, clock
        self.log = Throttle(log_interval)
        self._lock = threading.RLock()
        self._tables: Dict[Tuple[Any, ...], Table] = {}
        self._rules: Dict[Tuple[Any, ...], Tuple[Any, ...]] = {}
        self._counters: Dict[str, Dict[str, int]] = {}
        self._errors: Dict[str, Dict[str, int]] = {}
        self._next_audit = 0.0
        self.tick = 0  # requests until the next look at the audit's clock
        self.default_rates = default
        self.application_rates = application
        for scope, rates in (("default", default), ("application", application)):
            if rates is not None:
                validate(scope, rates, None, {"windows": windows}, trusted_proxies, self.log)
        if reset and self.segment is not None:
            reset_once(self.segment, reset)
        # the tables of default and application, made now: a bad segment fails at start-up
        self.default: Tuple[Any, ...] = self.rules("default", default) if default is not None else ()
        self.application: Tuple[Any, ...] = self.rules("application", application) if application is not None else ()

    # ------------------------------------------------------------ rules

    def rules(self, scope: str, rates: Any, key: Any = None, prefix: str = "", **options: Any) -> Tuple[Any, ...]:
        """The rules of rates (a rate string, several separated by ";", a
        list, or a callable giving them per request) for scope, with their
        key function and options; their tables are made now (a bad rate,
        key, option or segment raises here, at start-up). prefix: keys
        start with it (views sharing one table)."""
        opts = dict(options)
        opts.setdefault("windows", self.windows)
        parsed = validate(scope, rates, key, opts, self.trusted_proxies, self.log)
        keyfn = self.key if key is None else key_function(key, self.trusted_proxies)
        if callable(rates):
            return (Dynamic(rates, scope, keyfn, options, prefix),)
        ident = (scope, parsed, key if isinstance(key, str) else id(keyfn), prefix,
                 tuple(sorted((k, _hashable(v)) for k, v in opts.items())))
        with self._lock:
            got = self._rules.get(ident)
            if got is None:
                methods = _methods(opts.get("methods"))
                got = self._rules[ident] = tuple(
                    Rule(self._table(r, scope, keyfn, opts), keyfn, self.log, methods, opts.get("cost", 1),
                         opts.get("exempt_when"), opts.get("deduct_when"), prefix) for r in parsed)
            return got

    def _table(self, rate: Rate, scope: str, keyfn: KeyFunc, o: Dict[str, Any]) -> Table:
        behavior = o.get("behavior", self.behavior)
        wait = o.get("wait", self.wait)
        capacity = o.get("capacity", self.capacity)
        on_full = o.get("on_full", self.on_full)
        max_queue = o.get("max_queue", self.max_queue)
        dry_run = bool(o.get("dry_run", self.dry_run))
        ident = (scope, rate.count, rate.period_ms, rate.windows, behavior, capacity, self.key_bytes,
                 key_name(keyfn)) + ((max_queue,) if behavior == "pacing" else ())
        got = self._tables.get(ident + (wait, on_full, dry_run))
        if got is not None:
            return got
        name = self._name(scope, rate, ident)
        scale = rate.scale
        base = self.clock if self.clock is not None else now_ms
        p = rate.period_ms
        if self.clock is None and p == 1000:
            clock, lim_clock = now_ms, None  # the rule's clock is libsw's
        else:
            clock = lim_clock = (lambda base=base, p=p: base() * 1000 // p + EPOCH)
        sleeper = getattr(self.clock, "sleep", None) or time.sleep
        asleeper = getattr(self.clock, "async_sleep", None)
        if asleeper is None:
            import asyncio

            asleeper = asyncio.sleep
        seg = self._segment_for(rate)
        try:
            lim = RateLimiter(
                rate.count, name=name, windows=rate.windows, interval=1.0, capacity=capacity,
                on_full=on_full, key_bytes=self.key_bytes, segment=seg, names=None if seg is None else 0, stripes=1,
                behavior=behavior, max_queue=max_queue / scale, dry_run=dry_run, clock=lim_clock,
                block=wait is not None, timeout=None if wait is None else wait / scale,
                sleep=lambda s, f=sleeper: f(s * scale), async_sleep=lambda s, f=asleeper: f(s * scale))
        except MemoryError as e:  # a /dev/shm too small: say how much the table needs, and what to change
            need = self._bytes(rate, capacity, o)
            msg = ("libsw.web: the table of %s (%s) needs %d bytes of shared memory (capacity=%d keys, %d bytes "
                   "a key) in segment %s: %s. Give /dev/shm more room (docker run --shm-size=..., a Kubernetes "
                   "emptyDir with medium: Memory) or lower capacity=" % (scope, rate, need, capacity,
                                                                        need // max(1, capacity), seg, e))
            self.log.emit(logging.ERROR, "refused", "%s", msg)
            code = getattr(e, "code", None)
            raise (type(e)(msg, code) if code is not None else MemoryError(msg)) from e
        except Exception as e:
            self.log.emit(logging.ERROR, "refused", "rule refused for %s (%s): %s", scope, rate, e)
            raise
        if not lim.keyed:  # the table takes every rule made here; say so if it ever does not
            lim.close()
            raise ValueError("rule %s for %s: a keyed table does not take it" % (rate, scope))
        if self.clock is None and p != 1000:
            lim._scale_clock(p, EPOCH)  # entries read the scaled clock in C
        table = self._tables[ident + (wait, on_full, dry_run)] = Table(rate, scope, name, lim, clock)
        s = lim.keyed_stats()  # the audit's baseline: what the table counted before this process
        self._counters[name] = {"evicted": s.evicted, "refused": s.refused, "would_block": s.would_block}
        return table

    def _bytes(self, rate: Rate, capacity: int, o: Dict[str, Any]) -> int:
        """The bytes of a table of rate and capacity (a heap table's, reserved, not touched)."""
        lim = RateLimiter(rate.count, windows=rate.windows, interval=1.0, capacity=capacity,
                          key_bytes=self.key_bytes, behavior=o.get("behavior", self.behavior))
        try:
            return lim.keyed_stats().bytes
        finally:
            lim.close()

    def _segment_for(self, rate: Rate) -> Any:
        """The segment of a rule: a segment's limiters share one window
        geometry, so rules of other than the default 10 windows live in
        "<segment>-w<windows>"."""
        seg = self.segment
        if seg is None or rate.windows == DEFAULT_WINDOWS:
            return seg
        return "%s-w%d" % (seg, rate.windows)

    def _name(self, scope: str, rate: Rate, ident: Tuple[Any, ...]) -> str:
        """The rule's name in the segment: the same in every worker, new
        when the rule's rate, geometry or key changes (a new table). Its
        keys' segment "<segment>.keys.<name>" must fit a POSIX name (63
        bytes): the readable part is cut to fit."""
        digest = hashlib.blake2b(repr(ident).encode(), digest_size=4).hexdigest()
        p = rate.period_ms
        readable = "%s.%d-%s" % (re.sub(r"[^A-Za-z0-9_.-]", "", scope), rate.count,
                                 "%ds" % (p // 1000) if p % 1000 == 0 else "%dms" % p)
        seg = self._segment_for(rate) or ""
        budget = 63 if (not seg or "/" in seg) else 63 - len(seg) - len(".keys.")
        return (digest + "." + readable)[:budget].rstrip(".")

    @property
    def tables(self) -> List[Table]:
        with self._lock:
            return list(self._tables.values())

    @property
    def all_rules(self) -> List[Table]:
        """Every table (one rate of one scope); ``.lim`` is its RateLimiter."""
        return self.tables

    def view_rules(self, scope: str, specs: Optional[Sequence[Tuple[Any, Any, Dict[str, Any]]]]) -> Tuple[Any, ...]:
        """A view's rules: its own (rates, key, options) specs, else the
        ``default`` rates, counted for this view alone (one table for every
        view, its keys starting with the view's name)."""
        if specs:
            return tuple(r for rates, key, o in specs for r in self.rules(scope, rates, key, **o))
        if self.default_rates is None:
            return ()
        return self.rules("default", self.default_rates, prefix=scope + " ")

    # ---------------------------------------------------------- entries

    def enter(self, req: Request, *groups: Sequence[Any]) -> Outcome:
        """Enter a request into the rules of groups (waits with time.sleep
        for pacing or ``wait``)."""
        run = self._enter(req, self._merge(groups), True)
        try:
            run.send(None)
        except StopIteration as done:
            return cast(Outcome, done.value)
        run.close()
        raise RuntimeError("libsw.web: a synchronous entry suspended")

    async def enter_async(self, req: Request, *groups: Sequence[Any]) -> Outcome:
        """:meth:`enter` for ASGI: waits with asyncio.sleep."""
        return await self._enter(req, self._merge(groups), False)

    @staticmethod
    def _merge(groups: Sequence[Sequence[Any]]) -> Sequence[Any]:
        if len(groups) == 1:
            return groups[0]
        rules = [r for g in groups for r in g]
        rules.sort(key=_by_period)
        return rules

    async def _enter(self, req: Request, rules: Sequence[Any], sync: bool) -> Outcome:
        """The entry of a request, for both callers: with sync=True it never
        suspends (waits are time.sleep), so enter() runs it to the end in
        one step; enter_async() awaits it (waits are asyncio.sleep)."""
        out = FullOutcome(rules)
        if not self.enabled:
            return out
        self.tick -= 1
        if self.tick <= 0:
            self.audit_due()
        todo = list(rules)
        i = 0
        while i < len(todo):
            rule = todo[i]
            i += 1
            if rule.__class__ is Dynamic:
                made = self._dynamic(rule, req, out)
                if made is None:
                    return out  # refused (on_error="closed")
                todo[i:i] = sorted(made, key=_by_period)
                continue
            if rule.methods is not None and req.method not in rule.methods:
                continue
            stage = "exempt_when"
            try:
                if rule.exempt_when is not None and (rule.exempt_when(req) if rule.exempt_args
                                                     else rule.exempt_when()):
                    continue
                stage = "key"
                k = normalize_key(rule.key(req))
                if k is None:
                    continue  # the rule does not apply (no such header, an anonymous user, ...)
                if rule.prefix:
                    k = (rule.prefix.encode() + k) if k.__class__ is bytes else rule.prefix + k
                stage = "cost"
                n = rule.cost if rule.cost.__class__ is int else int(rule.cost(req))
                stage = "table"
                tok = rule.enter(k, n)
                if tok > 0:
                    out.hold(rule, tok, _remaining())
                    if rule.paced:
                        out.admitted_at = time.monotonic()
                else:
                    await self._finish(out, rule, k, n, tok, sync)
            except BlockedError as e:
                return self._refuse(out, rule, e)
            except Exception as e:  # a key function's or a table's failure must not take the site down
                if self._failed(out, rule, req, stage, e):
                    return out
        return out

    async def _finish(self, out: FullOutcome, rule: Rule, k: Any, n: int, rc: int, sync: bool) -> None:
        """An entry whose first try returned rc (not a token): waited for
        (pacing, wait=), or BlockedError; an error raises."""
        if rc == _SLOW:  # a key of another type: made a str (or digested), entered again
            k = normalize_key(k)
            if k is None:
                return
            rc = rule.enter(k, n)
            if rc > 0:
                return out.hold(rule, rc, _remaining())
        lim = rule.lim
        kt = lim._kt
        decided = time.monotonic()
        p = kt.finish(lim, k, n, rc, None, None) if sync else await kt.finish_async(lim, k, n, rc, None, None)
        tok, p._tok = p._tok, 0  # the outcome holds the token now
        out.hold(rule, tok, p._rem)
        if p.waited:
            out.waited += p.waited * rule.rate.scale
            out.admitted_at = decided + p.waited * rule.rate.scale
        out.would_block = out.would_block or p.would_block
        if p.full:
            self.log.emit(logging.WARNING, "full:" + rule.name, "key table of %s (%s) is full of active keys: a "
                          "new key let through uncounted (on_full='open'); capacity=%d", rule.scope, rule.rate,
                          lim.capacity)

    def finish_one(self, rule: Rule, key: Any, rc: int, req: Callable[[], Request], rules: Sequence[Any]) -> Outcome:
        """The adapters' fast path, after the one entry of rule with key
        returned rc (not a token): its Outcome (req() makes the Request for
        a failure's log line)."""
        run = self._finish_one(rule, key, rc, req, rules, True)
        try:
            run.send(None)
        except StopIteration as done:
            return cast(Outcome, done.value)
        run.close()
        raise RuntimeError("libsw.web: a synchronous entry suspended")

    async def finish_one_async(self, rule: Rule, key: Any, rc: int, req: Callable[[], Request],
                               rules: Sequence[Any]) -> Outcome:
        return await self._finish_one(rule, key, rc, req, rules, False)

    async def _finish_one(self, rule: Rule, key: Any, rc: int, req: Callable[[], Request], rules: Sequence[Any],
                          sync: bool) -> Outcome:
        out = FullOutcome(rules)
        try:
            await self._finish(out, rule, key, 1, rc, sync)
        except BlockedError as e:
            return self._refuse(out, rule, e)
        except Exception as e:
            self._failed(out, rule, req(), "table", e)
        return out

    def _refuse(self, out: FullOutcome, rule: Rule, e: BlockedError) -> FullOutcome:
        out.cancel()  # all or nothing: the limits it passed count it no more
        out.allowed = False
        out.rule = rule
        out.retry_after = e.retry_after * rule.rate.scale
        out.remaining = 0
        if e.full:
            self.log.emit(logging.WARNING, "full:" + rule.name, "key table of %s (%s) is full of active keys: "
                          "a new key refused (on_full='closed'); capacity=%d", rule.scope, rule.rate,
                          rule.lim.capacity)
        return out

    def _failed(self, out: FullOutcome, rule: Any, req: Request, kind: str, e: BaseException) -> bool:
        """A failure of a rule's key function, callable or table (kind):
        logged once per kind per interval, counted; True when the request is
        refused (on_error="closed"), which cancels what it entered."""
        name = rule.name if isinstance(rule, Rule) else rule.scope
        with self._lock:
            counts = self._errors.setdefault(name, {})
            counts[kind] = counts.get(kind, 0) + 1
        closed = self.on_error == "closed"
        self.log.emit(logging.ERROR, "%s:%s" % (kind, name), "%s of %s (%s) raised %r on %s %s: request %s", kind,
                      rule.scope, getattr(rule, "rate", "rates"), e, req.method, req.path,
                      "refused (on_error='closed')" if closed else "served (on_error='open')")
        out.error = e
        if closed:
            out.cancel()
            out.allowed = False
            out.rule = rule if isinstance(rule, Rule) else None
            out.retry_after = 1.0
            out.remaining = 0
        return closed

    def _dynamic(self, dyn: Dynamic, req: Request, out: FullOutcome) -> Optional[Tuple[Rule, ...]]:
        """The rules of a callable's rates for this request (made at their
        first use); None when refused (a failure, on_error="closed")."""
        try:
            text = dyn.fn(req) if dyn.args else dyn.fn()
            made = dyn.made.get(text)
            if made is None:
                if len(dyn.made) >= _DYNAMIC_MAX:
                    raise RuntimeError("rates of %s: over %d distinct values" % (dyn.fn, _DYNAMIC_MAX))
                made = self.rules(dyn.scope, text, dyn.key, dyn.prefix, **dyn.options)
                dyn.made[text] = made
            return made
        except Exception as e:
            return None if self._failed(out, dyn, req, "rates", e) else ()

    # ------------------------------------------------- logging, statistics

    def audit_due(self) -> None:
        """Audit if the log interval has passed (looked at every 32 requests)."""
        self.tick = 32
        if time.monotonic() >= self._next_audit:
            self.audit()

    def audit(self) -> None:
        """Log what the tables counted since the last audit (evictions of a
        full table, keys refused or let through, dry-run would-be
        refusals): once per log interval, from a request, never per request."""
        self._next_audit = time.monotonic() + max(self.log.interval, 1.0)
        for t in self.tables:
            try:
                s = t.lim.keyed_stats()
            except Exception:  # closed meanwhile
                continue
            prev = self._counters.setdefault(t.name, {})
            grown = counters_grown(prev, {"evicted": s.evicted, "refused": s.refused,
                                          "would_block": s.would_block}, _LOGGED_FIELDS)
            if grown.get("evicted") or grown.get("refused"):
                self.log.emit(logging.WARNING, "full:" + t.name,
                              "key table of %s (%s) is full of active keys: %d evicted, %d refused or let "
                              "through since the last check (on_full=%r, capacity=%d)", t.scope, t.rate,
                              grown.get("evicted", 0), grown.get("refused", 0), self.on_full, s.capacity)
            if grown.get("would_block"):
                self.log.emit(logging.WARNING, "dry_run:" + t.name,
                              "dry run: %s (%s) would have refused %d requests since the last check",
                              t.scope, t.rate, grown["would_block"])

    def stats(self, top: int = 0) -> List[Dict[str, Any]]:
        """Every table: keys, passes, blocks, would-be blocks (dry run),
        evictions, its memory, this process's failures (``errors``, by
        kind), and with top=N its N busiest keys. A shared segment's tables
        count every worker's requests."""
        names: Dict[str, str] = {}
        with self._lock:
            for rules in self._rules.values():
                for r in rules:
                    if isinstance(r, Rule):
                        names.setdefault(r.name, r.key_name)
        out = []
        for t in self.tables:
            s = t.lim.keyed_stats()
            d = {"rule": t.name, "scope": t.scope, "rate": str(t.rate), "key": names.get(t.name, ""),
                 "keys": s.keys, "pass": s.pass_, "block": s.block, "would_block": s.would_block,
                 "inserted": s.inserted, "reclaimed": s.reclaimed, "evicted": s.evicted, "refused": s.refused,
                 "capacity": s.capacity, "bytes": s.bytes, "active_keys": t.lim.active_keys(),
                 "errors": dict(self._errors.get(t.name, {}))}
            if top:
                d["top_keys"] = [(k.key, k.pass_, k.block) for k in t.lim.top_keys(top)]
            out.append(d)
        return out

    def errors(self) -> Dict[str, Dict[str, int]]:
        """This process's failures since start, by scope or table and kind."""
        with self._lock:
            return {k: dict(v) for k, v in self._errors.items()}

    def set_dry_run(self, on: bool) -> None:
        """Switch dry run on or off for every rule (in every worker, for a
        shared segment)."""
        self.dry_run = bool(on)
        for t in self.tables:
            t.lim.set_dry_run(on)

    def close(self) -> None:
        for t in self.tables:
            t.lim.close()
        with self._lock:
            self._tables.clear()
            self._rules.clear()


def custom_response(hook: Any, req: Request, out: Outcome) -> Any:
    """What a response hook returned for a refused request, or None for the
    default 429."""
    return None if hook is None else hook(req, out)


def refused_response(hook: Any, req: Request, out: Outcome, make: Callable[[bytes, int, Any], Any]) -> Any:
    """A framework's answer to a request: None when admitted; when refused,
    the hook's response, else make(body, status, headers) of the default
    429 (the outcome's fields are added to either afterwards)."""
    from ._outcome import refusal

    if out.allowed:
        return None
    r = custom_response(hook, req, out)
    if r is not None:
        return r
    status, headers, body = refusal(None, [])
    return make(body, status, headers)
