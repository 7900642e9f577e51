# SPDX-License-Identifier: Apache-2.0
"""Per-key limits on a keyed table (sw_keyed): one rule, any number of keys.

A RateLimiter whose rule a keyed table takes keeps its keys in one table,
on the heap or in a shared segment of its own. Nothing per key lives in
Python: an entry passes the key's bytes to C, which finds the key without a
lock, or inserts it (reclaiming an idle key's place, or applying on_full);
:meth:`RateLimiter.for_key` returns a :class:`KeyLimiter`, a view of three
references made on each call, never cached.
"""
from __future__ import annotations

import contextvars
import functools
import inspect
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar, Union, cast

from ._errors import ArgumentError, BlockedError, ClosedError, check, error_from_code
from ._libsw import ffi, lib
from ._permit import Permit, _ClockPermit, _Outcome, admitted, refused
from ._util import new_options, pop_entered, want_int
from ._wait import new_info, run, run_async, steps

if TYPE_CHECKING:
    from ._limiter import RateLimiter

    # The keyed fast paths (swpy_py.c, set by swpy_install): swpy_kacquire
    # of a key object, the release of a token, with the GIL held.
    def _kenter(site: int, key: object, n: int) -> int: ...
    def _kenter_at(site: int, t: int, key: object, n: int) -> int: ...
    def _release(token: int) -> int: ...
    def _release_err(token: int) -> int: ...
    def _remaining() -> int: ...

F = TypeVar("F", bound=Callable[..., Any])
Key = Union[str, bytes]

KEY_MAX = 65535  # bytes of a key (sw_keyed_entry)
_ESTATE: int = lib.SW_ESTATE
_ERANGE: int = lib.SW_ERANGE
_EXIT_ERROR: int = lib.SW_EXIT_ERROR

# on_full of a keyed table; "allow" is the registry's name for "open".
ON_FULL = {"evict": lib.SW_FULL_EVICT, "open": lib.SW_FULL_OPEN, "allow": lib.SW_FULL_OPEN,
           "closed": lib.SW_FULL_CLOSED}
_BY = {"pass": lib.SW_KEYED_BY_PASS, "block": lib.SW_KEYED_BY_BLOCK}
_SCAN_BATCH = 256  # keys read per sw_keyed_scan_at call
_N_MAX = 2**31 - 1  # units of one entry
_SLOW: int = lib.SWPY_SLOW
_STALE: int = lib.SWPY_STALE
_ENOTSUP: int = lib.SW_ENOTSUP

# `with key_limiter:` keeps (view, permit, previous) per thread and task.
_active: "contextvars.ContextVar[Optional[tuple]]" = contextvars.ContextVar("libsw_key_active", default=None)


# ------------------------------------------------------------------ keys


class KeyDigest(bytes):
    """A key longer than the table's ``key_bytes``, which the table keeps
    only as its 128-bit digest: listed by keys() and top_keys(), it cannot
    be entered or looked up (pass the key itself)."""

    def __repr__(self) -> str:
        return "KeyDigest(%r)" % self.hex()


def encode_key(key: object) -> bytes:
    """A key's bytes: a str is UTF-8 (lone surrogates as surrogateescape
    bytes, so that keys() round-trips), bytes are used as they are (binary
    IPv4 / IPv6 addresses; NUL bytes are part of the key)."""
    t = key.__class__
    if t is bytes:
        return cast(bytes, key)
    if t is str:
        try:
            return cast(str, key).encode()
        except UnicodeEncodeError:
            pass
    return _encode_slow(key)


def _encode_slow(key: object) -> bytes:
    if isinstance(key, KeyDigest):
        raise TypeError("key=%r is the digest of a longer key, not a key: use the key itself" % (key,))
    if isinstance(key, bytes):
        return bytes(key)
    if isinstance(key, str):
        try:
            return str.encode(key, "utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise ArgumentError("key=%r is not encodable as UTF-8" % (key,), _ERANGE) from None
    raise TypeError("key must be str or bytes, not %s" % type(key).__name__)


def key_error(key: object, kb: bytes, rc: int) -> Exception:
    """The error of a C call on key, in the binding's terms."""
    if rc == _ERANGE and not 1 <= len(kb) <= KEY_MAX:
        return ArgumentError("key=%r is %d bytes: a key is 1..%d bytes" % (_short(key), len(kb), KEY_MAX), rc)
    return error_from_code(rc, "key %r" % (_short(key),))


def _short(key: object) -> object:
    return key[:40] + (b"..." if isinstance(key, bytes) else "...") if len(key) > 43 else key  # type: ignore


def _decode(k: Any, raw: bool) -> Union[str, bytes, KeyDigest]:
    if k.len == 0:
        return KeyDigest(ffi.buffer(k.key, 16)[:])
    b = ffi.buffer(k.key, k.len)[:]
    return b if raw else b.decode("utf-8", "surrogateescape")


def keys_segment_name(segment: bytes, name: str) -> bytes:
    """The segment of the keys of limiter `name` in `segment`:
    "<segment>.keys.<name>", the name's bytes other than letters, digits,
    '_', '-' and '.' written %XX (a name may hold '/' or spaces)."""
    safe = b"".join(bytes([c]) if chr(c).isalnum() and c < 128 or c in b"_-." else b"%%%02X" % c
                    for c in name.encode("utf-8"))
    return segment + b".keys." + safe


def keys_segments(segment: bytes) -> List[bytes]:
    """The keys' segments derived from segment that exist (POSIX shared
    memory objects are the files of /dev/shm on Linux)."""
    if b"/" in segment:
        folder, base = os.path.split(segment)
        folder = folder or b"/"
    else:
        folder, base = b"/dev/shm", segment
    try:
        found = os.listdir(folder)
    except OSError:
        return []
    prefix = base + b".keys."
    return [segment + f[len(base):] for f in sorted(found) if f.startswith(prefix)]


# ----------------------------------------------------------------- stats


@dataclass(frozen=True)
class KeyStats:
    """One key as its table sees it at ``time_ms``: ``pass_`` (passes in the
    interval), ``block`` (blocks of its latest window that blocked, if in the
    interval), ``in_flight`` (concurrency grade), ``last_ms`` (start of its
    latest window with a pass; -1: none)."""

    key: Union[str, bytes, KeyDigest]
    pass_: int
    block: int
    in_flight: int
    last_ms: int
    time_ms: int
    interval_ms: int

    @property
    def pass_qps(self) -> float:
        """Passes per second over the interval."""
        return self.pass_ * 1000.0 / self.interval_ms

    @property
    def block_qps(self) -> float:
        """Blocks of the latest window that blocked, per second of the interval."""
        return self.block * 1000.0 / self.interval_ms

    @property
    def concurrency(self) -> int:
        return self.in_flight

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KeyedStats:
    """A keyed table as a whole: its geometry and memory (``bytes`` in all,
    ``bytes_per_key`` one key's place), the keys present, and totals since
    creation (keys inserted, reclaimed from idle keys, evicted, refused; the
    units of every entry and exit; ``rt`` the sum of response times, ms)."""

    capacity: int
    slots: int
    key_bytes: int
    windows: int
    interval_ms: int
    bytes: int
    bytes_per_key: int
    keys: int
    inserted: int
    reclaimed: int
    evicted: int
    refused: int
    pass_: int
    block: int
    would_block: int
    success: int
    exception: int
    rt: int

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


_INFO_FIELDS = [f for f in KeyedStats.__dataclass_fields__ if f != "pass_"]


# ----------------------------------------------------------------- table


class _KSite:
    """A keyed table's site (swpy.h): its handle and clock in C, named by a
    small integer n; it holds the handle until it is freed itself (tokens
    in flight exit safely after a close())."""

    __slots__ = ("n", "h")

    def __init__(self, h: Any, period_ms: int, epoch: int) -> None:
        self.h = h
        self.n = check(lib.swpy_ksite_new(h, period_ms, epoch), "keyed site")

    def __del__(self, _free: Any = lib.swpy_site_free) -> None:  # (no global lookups at exit)
        _free(self.n)


class KeyedTable:
    """One sw_keyed handle, the entries and the reads of its keys. close()
    swaps the handle for NULL: later calls fail with SW_ENULL (turned into
    ClosedError); tokens in flight hold the handle (through the site), so
    its memory goes with the last of them.

    Entries go through the table's site (:meth:`make_site`): one C call
    enters a key and returns a token (an integer naming the entry, with the
    key kept in C for its exit), which a permit holds and release() ends."""

    __slots__ = ("h", "interval_ms", "created", "site", "custom", "_site")

    def __init__(self, h: Any) -> None:
        self.h = h
        self.created = lib.sw_keyed_created(h) == 1
        self.interval_ms = self.stats().interval_ms
        self.site = 0  #: the site's number, 0 until make_site()
        self.custom = False  #: the site runs on a custom clock (its time passed by Python)
        self._site: Optional[_KSite] = None

    def make_site(self, custom: bool, period_ms: int = 1000, epoch: int = 0) -> None:
        """The site of entries: on a custom clock (custom: Python passes its
        time), on libsw's (period 1000, epoch 0), or on a clock whose 1000 ms
        are period_ms of libsw's, from epoch (libsw.web's rules)."""
        self._site = _KSite(self.h, 0 if custom else period_ms, 0 if custom else epoch)
        self.site = self._site.n
        self.custom = custom

    @staticmethod
    def options(opts: Any, on_full: str, key_bytes: int) -> Any:
        """A copy of a limiter's options with the keyed table's own."""
        kopts = ffi.gc(lib.sw_options_clone(opts), lib.sw_options_free)
        if kopts == ffi.NULL:
            raise MemoryError("libsw: no memory for options")
        check(lib.sw_options_set(kopts, lib.SW_OPT_KEYED_ON_FULL, ON_FULL[on_full]), "on_full")
        rc = lib.sw_options_set(kopts, lib.SW_OPT_KEY_BYTES, want_int(key_bytes, "key_bytes", 0, 2**31 - 1))
        check(rc, "key_bytes")
        return kopts

    @staticmethod
    def takes(kopts: Any) -> bool:
        """Whether a keyed table takes this rule (warm-up, cluster rules and
        reject rules that could count over 4,294,967,295 in a window it does not)."""
        p = ffi.new("sw_keyed **")
        if lib.sw_keyed_create(p, 1, kopts) < 0:
            return False
        lib.sw_keyed_free(p[0])
        return True

    @classmethod
    def create(cls, capacity: int, kopts: Any) -> "KeyedTable":
        """A table on the heap: reserved, touched as keys arrive."""
        p = ffi.new("sw_keyed **")
        check(lib.sw_keyed_create(p, capacity, kopts), "capacity")
        return cls(ffi.gc(p[0], lib.sw_keyed_free))

    @classmethod
    def open(cls, name: bytes, capacity: int, kopts: Any, flags: int) -> "KeyedTable":
        """The table in segment `name`, created if needed; an existing one
        takes this rule (as a limiter in a segment does)."""
        p = ffi.new("sw_keyed **")
        check(lib.sw_keyed_open(p, name, capacity, kopts, flags), "keys' segment %r" % name.decode("utf-8", "replace"))
        t = cls(ffi.gc(p[0], lib.sw_keyed_free))
        if not t.created:
            check(lib.sw_keyed_set_rule(t.h, kopts), "keys' segment rule")
        return t

    def close(self) -> None:
        self.h = ffi.NULL
        if self._site is not None:
            lib.swpy_site_clear(self.site)

    def handle(self) -> Any:
        h = self.h
        if h == ffi.NULL:
            raise ClosedError("keyed table is closed")
        return h

    # ---------------------------------------------------------- entries

    def enter(self, lim: "RateLimiter", key: object, n: int) -> int:
        """Enter key with n units: a token on a plain pass, else
        SWPY_NOT_PASS (the decision in swpy_decision()) or an error code.
        A key that is not str or bytes raises TypeError; one of over 65,535
        bytes, ArgumentError."""
        site = self.site
        t = lim._clock() if self.custom else 0  # type: ignore[misc]
        rc = _kenter_at(site, t, key, n) if self.custom else _kenter(site, key, n)
        if rc == _SLOW:  # another type, or a long key: encoded here
            kb = encode_key(key)
            if len(kb) > KEY_MAX:
                raise key_error(key, kb, _ERANGE)
            rc = _kenter_at(site, t, kb, n) if self.custom else _kenter(site, kb, n)
        return rc

    def permit(self, lim: "RateLimiter", key: Key, n: int, tok: int) -> Permit:
        """The permit of token tok of an entry admitted at once."""
        if self.custom:
            return KeyOutcome._new(self, lim, key, n, tok, _remaining(), 0.0, False, False)
        p = KeyPermit()
        p._lim = lim
        p.n = n
        p._tok = tok
        p._key = key
        return p

    def acquire(self, lim: "RateLimiter", key: Key, n: object, block: Optional[bool], timeout: Optional[float],
                kb: Optional[bytes] = None) -> Permit:
        """Enter key with n units: an admitted permit, or BlockedError (or
        waits: block, a pacing WAIT)."""
        if n.__class__ is not int or not 0 <= n <= _N_MAX:  # type: ignore[operator]
            n = lim._check_n(n)
        rc = self.enter(lim, key, n)  # type: ignore[arg-type]
        if rc > 0:
            return self.permit(lim, key, n, rc)  # type: ignore[arg-type]
        return self.finish(lim, key, n, rc, block, timeout)  # type: ignore[arg-type]

    def finish(self, lim: "RateLimiter", key: Key, n: int, rc: int, block: Optional[bool],
               timeout: Optional[float]) -> Permit:
        """An entry whose first try returned rc (not a token): waited for
        (time.sleep), retried (block), or refused (BlockedError)."""
        info = new_info()
        kb = encode_key(key)
        t0 = run(self._steps(lim, key, kb, n, rc, block, timeout, info), lim._sleep)
        return self._admitted(lim, key, kb, n, t0, info)

    async def acquire_async(self, lim: "RateLimiter", key: Key, n: object, block: Optional[bool],
                            timeout: Optional[float], kb: Optional[bytes] = None) -> Permit:
        if n.__class__ is not int or not 0 <= n <= _N_MAX:  # type: ignore[operator]
            n = lim._check_n(n)
        rc = self.enter(lim, key, n)  # type: ignore[arg-type]
        if rc > 0:
            return self.permit(lim, key, n, rc)  # type: ignore[arg-type]
        return await self.finish_async(lim, key, n, rc, block, timeout)  # type: ignore[arg-type]

    async def finish_async(self, lim: "RateLimiter", key: Key, n: int, rc: int, block: Optional[bool],
                           timeout: Optional[float]) -> Permit:
        """:meth:`finish` for coroutines: waits with the limiter's async sleep."""
        info = new_info()
        kb = encode_key(key)
        t0 = await run_async(self._steps(lim, key, kb, n, rc, block, timeout, info), lim._async_sleep)
        return self._admitted(lim, key, kb, n, t0, info)

    def try_acquire(self, lim: "RateLimiter", key: Key, n: object, kb: Optional[bytes] = None) -> Permit:
        try:
            return self.acquire(lim, key, n, False, None)
        except BlockedError as e:
            return KeyOutcome._refused(lim, key, n, e)

    def try_finish(self, lim: "RateLimiter", key: Key, n: int, rc: int) -> Permit:
        """try_acquire() after a first try that returned rc (not a token)."""
        try:
            return self.finish(lim, key, n, rc, False, None)
        except BlockedError as e:
            return KeyOutcome._refused(lim, key, n, e)

    async def try_acquire_async(self, lim: "RateLimiter", key: Key, n: object,
                                kb: Optional[bytes] = None) -> Permit:
        try:
            return await self.acquire_async(lim, key, n, False, None)
        except BlockedError as e:
            return KeyOutcome._refused(lim, key, n, e)

    def t0_now(self, lim: "RateLimiter") -> int:
        """An entry's start as its token keeps it: the custom clock's ms, or ns."""
        return lim._clock() if self.custom else lib.sw_now_ns()  # type: ignore[misc]

    def _steps(self, lim: "RateLimiter", key: Key, kb: bytes, n: int, rc: int, block: Optional[bool],
               timeout: Optional[float], info: List[Any]) -> Any:
        def fail(rc: int) -> Exception:
            if self.h == ffi.NULL:
                return ClosedError("limiter of key %r is closed" % (_short(key),))
            return key_error(key, kb, rc)

        def end() -> None:  # of an entry whose wait was interrupted: counted as failed
            h = self.h
            if self.custom:
                lib.sw_keyed_exit_at(h, lim._clock(), kb, len(kb), 0, n, _EXIT_ERROR)  # type: ignore[misc]
            else:
                lib.sw_keyed_exit(h, kb, len(kb), 0, n, _EXIT_ERROR)

        return steps(rc, lambda: self.enter(lim, kb, n), end, fail, lambda: self.t0_now(lim), key,
                     lim._blocking if block is None else bool(block), lim._timeout if timeout is None else timeout,
                     info)

    def _admitted(self, lim: "RateLimiter", key: Key, kb: bytes, n: int, t0: int, info: List[Any]) -> "KeyOutcome":
        """The permit of an entry a slow path admitted at t0 (a wait, a
        retry, a dry run's would-block, a new key let through uncounted)."""
        d = info[4]  # the admitting decision, None: a retry passed at once (t0 is its token)
        if d is None:
            return KeyOutcome._new(self, lim, key, n, t0, _remaining(), info[0], False, False)
        # a new key let through uncounted (on_full "open") has nothing to end: no token
        tok = 0 if d.full else check(lib.swpy_ktoken(self.site, kb, len(kb), t0, n, d.remaining, d), "token")
        return KeyOutcome._new(self, lim, key, n, tok, d.remaining if info[1] is None else info[1], info[0],
                               bool(d.would_block), bool(d.full))

    # ------------------------------------------------------------ reads

    def stats(self) -> KeyedStats:
        info = ffi.new("sw_keyed_info *")
        check(lib.sw_keyed_stats(self.handle(), info), "keyed_stats")
        return KeyedStats(pass_=getattr(info, "pass"), **{f: getattr(info, f) for f in _INFO_FIELDS})

    def _key_stats(self, k: Any, key: Any, t: int) -> KeyStats:
        return KeyStats(key, getattr(k, "pass"), k.block, k.in_flight, k.last_ms, t, self.interval_ms)

    def lookup(self, key: Key, t: int) -> Optional[KeyStats]:
        kb = encode_key(key)
        k = ffi.new("sw_keyed_key *")
        rc = lib.sw_keyed_lookup_at(self.handle(), t, kb, len(kb), k)
        if rc < 0:
            raise key_error(key, kb, rc)
        return self._key_stats(k, key, t) if rc == 1 else None

    def scan(self, t: int, raw: bool) -> Iterator[Union[str, bytes, KeyDigest]]:
        """The keys present (idle ones too), in place order, read in batches."""
        h = self.handle()
        cursor = ffi.new("uint64_t *")
        buf = ffi.new("sw_keyed_key[]", _SCAN_BATCH)

        def gen() -> Iterator[Union[str, bytes, KeyDigest]]:
            while True:
                got = check(lib.sw_keyed_scan_at(h, t, cursor, buf, _SCAN_BATCH), "keys")
                if got == 0:
                    return
                for i in range(got):
                    yield _decode(buf[i], raw)

        return gen()

    def top(self, t: int, n: int, by: str, raw: bool) -> Tuple[List[KeyStats], int]:
        if by not in _BY:
            raise ValueError("by=%r is not one of 'pass', 'block'" % (by,))
        n = want_int(n, "n", 0, 100000)
        out = ffi.new("sw_keyed_key[]", max(n, 1))
        active = ffi.new("int64_t *")
        got = check(lib.sw_keyed_top_at(self.handle(), t, _BY[by], out, n, active), "top_keys")
        return [self._key_stats(out[i], _decode(out[i], raw), t) for i in range(got)], active[0]

    def rule_options(self) -> Any:
        o = new_options()
        check(lib.sw_keyed_get_rule(self.handle(), o))
        return o

    def set_rule(self, opts: Any, what: str) -> None:
        check(lib.sw_keyed_set_rule(self.handle(), opts), what)

    def set_dry_run(self, on: bool) -> None:
        check(lib.sw_keyed_set_dry_run(self.handle(), 1 if on else 0), "set_dry_run")


class _KeyPermitMixin:
    """What the permits of a key add to a limiter's: ``limiter`` is the
    key's :class:`KeyLimiter`, made when asked for."""

    __slots__ = ()
    _lim: "RateLimiter"
    _key: Key

    @property
    def limiter(self) -> "KeyLimiter":
        return KeyLimiter(self._lim, self._key, encode_key(self._key))


class KeyPermit(_KeyPermitMixin, Permit):
    """A key's permit admitted at once: a token (released by Permit's C
    release), the limiter and the key. swpy_py.c makes it in try_acquire."""

    __slots__ = ("_key",)
    full = False  #: the key found no place (never, for a permit admitted at once)


class KeyOutcome(_KeyPermitMixin, _Outcome):
    """A key's permit that waited, would have blocked, found no place
    (``full``: ``on_full="open"`` let it through uncounted, ``"closed"``
    refused it), or was refused; or one of a table on a custom clock
    (then released at that clock's time)."""

    __slots__ = ("_key", "full")

    @staticmethod
    def _new(kt: "KeyedTable", lim: "RateLimiter", key: Key, n: int, tok: int, remaining: int, waited: float,
             would_block: bool, full: bool) -> "KeyOutcome":
        p = admitted(ClockKeyOutcome if kt.custom else KeyOutcome, lim, n, tok, remaining, waited, False,
                     would_block)
        p._key = key
        p.full = full
        return p

    @staticmethod
    def _refused(lim: "RateLimiter", key: Key, n: object, e: BlockedError) -> "KeyOutcome":
        p = refused(KeyOutcome, lim, cast(int, n), e.retry_after, e.remaining)
        p._key = key
        p.full = e.full
        return p


class ClockKeyOutcome(KeyOutcome):
    """A KeyOutcome of a table on a custom clock: released at its time."""

    __slots__ = ()
    release = _ClockPermit.release


# ------------------------------------------------------------------ view


class KeyLimiter:
    """The limit of one key of a keyed table, as :meth:`RateLimiter.for_key`
    returns it: a decorator (sync or ``async def``), a context manager, and
    acquire / try_acquire / their async forms, like a RateLimiter. A view:
    made on each call, holding nothing but the limiter and the key; two
    views of one key are equal and share the key's state in the table."""

    __slots__ = ("_lim", "key", "_kb", "_closed")

    def __init__(self, lim: "RateLimiter", key: Key, kb: bytes) -> None:
        self._lim = lim
        self.key = key
        self._kb = kb
        self._closed = False

    @property
    def name(self) -> Optional[str]:
        return self._lim.name

    @property
    def resource(self) -> Key:
        """The name reported in BlockedError: the key."""
        return self.key

    @property
    def closed(self) -> bool:
        return self._closed or self._lim._kt.h == ffi.NULL

    def close(self) -> None:
        """Close this view only (the key's state stays in the table)."""
        self._closed = True

    def _closed_msg(self) -> str:
        return "limiter of key %r is closed" % (_short(self.key),)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyLimiter) and other._lim._kt is self._lim._kt and other._kb == self._kb

    def __hash__(self) -> int:
        return hash((id(self._lim._kt), self._kb))

    def __repr__(self) -> str:
        return "<libsw.KeyLimiter %r of %s %s>" % (_short(self.key), self._lim.name or "",
                                                    "closed" if self.closed else "open")

    def for_key(self, key: Key) -> "KeyLimiter":
        raise TypeError("for_key() of a key's limiter: call it on the limiter that made it")

    # ------------------------------------------------------------ entries

    def _table(self) -> KeyedTable:
        if self._closed:
            raise ClosedError(self._closed_msg())
        return self._lim._kt  # type: ignore[return-value]

    def acquire(self, n: int = 1, *, block: Optional[bool] = None, timeout: Optional[float] = None) -> Permit:
        """As :meth:`RateLimiter.acquire`, for this key."""
        return self._table().acquire(self._lim, self.key, n, block, timeout, self._kb)

    async def acquire_async(self, n: int = 1, *, block: Optional[bool] = None,
                            timeout: Optional[float] = None) -> Permit:
        return await self._table().acquire_async(self._lim, self.key, n, block, timeout, self._kb)

    def try_acquire(self, n: int = 1) -> Permit:
        """As :meth:`RateLimiter.try_acquire`: a false permit when refused."""
        return self._table().try_acquire(self._lim, self.key, n, self._kb)

    async def try_acquire_async(self, n: int = 1) -> Permit:
        return await self._table().try_acquire_async(self._lim, self.key, n, self._kb)

    def __call__(self, fn: F) -> F:
        """Decorate a function or ``async def`` function with this key's limit."""
        if not callable(fn):
            raise TypeError("a KeyLimiter decorates a callable, not %s" % type(fn).__name__)
        view = self
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def limited_async(*args: Any, **kwargs: Any) -> Any:
                async with await view.acquire_async():
                    return await fn(*args, **kwargs)

            limited_async.limiter = view  # type: ignore[attr-defined]
            return cast(F, limited_async)

        @functools.wraps(fn)
        def limited(*args: Any, **kwargs: Any) -> Any:
            with view.acquire():
                return fn(*args, **kwargs)

        limited.limiter = view  # type: ignore[attr-defined]
        return cast(F, limited)

    def __enter__(self) -> "KeyLimiter":
        _active.set((self, self.acquire(), _active.get()))
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        pop_entered(_active, self, "KeyLimiter")[1].release(error=et is not None)

    async def __aenter__(self) -> "KeyLimiter":
        _active.set((self, await self.acquire_async(), _active.get()))
        return self

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        self.__exit__(et, ev, tb)

    # -------------------------------------------------------------- reads

    def stats(self, now: Optional[int] = None) -> KeyStats:
        """This key in the table at now (ms; default: the limiter's clock);
        zeros when the table holds nothing of it (never seen, or reclaimed)."""
        t = self._lim._time(now)
        s = self._lim._kt.lookup(self.key, t)
        return s if s is not None else KeyStats(self.key, 0, 0, 0, -1, t, self._lim._kt.interval_ms)

    def rule(self) -> Dict[str, Any]:
        """The rule of every key of the table."""
        return self._lim._rule_dict(self._lim._kt.rule_options())

    def __reduce__(self) -> Tuple[Any, ...]:
        lim_reduce = self._lim.__reduce__()  # TypeError for a heap limiter
        return (lim_reduce[0], (lim_reduce[1][0], self.key))
