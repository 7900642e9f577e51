# SPDX-License-Identifier: Apache-2.0
"""RateLimiter: a Sentinel flow rule as a decorator and context manager.

Hot path (decorator): two C calls of one integer, swpy_enter_site and
swpy_exit_ok (swpy.c), which read the clocks, decide, count, and compute the
response time in C; the decision is kept in a C thread-local struct that
Python reads only when the verdict is not PASS. Every CFFI call releases the
GIL (API mode); the fast paths of swpy_py.c (the decorator's calls, with,
try_acquire, release) hold it.

Handles are cdata objects with destructors (ffi.gc): a call in progress
holds its handle, so close() on another thread never frees memory under it;
the memory goes when the last reference does.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from ._cluster import FAILURES as _FAILURES
from ._cluster import Cluster as _Cluster
from ._cluster import Settings as _ClusterSettings
from ._cluster import resource_name as _resource_name
from ._errors import ArgumentError, BlockedError, ClosedError, NotSupportedError, check, error_from_code
from ._keyed import KeyedTable, KeyLimiter, keys_segment_name
from ._libsw import ffi, lib
from ._perkey import PerKey, check_on_full
from ._permit import Permit, _ClockPermit, _Outcome, admitted, refused
from ._util import (
    CLOSED,
    UINT32_MAX,
    get_opt,
    is_int,
    keep_alive,
    new_options,
    seconds_to_ms,
    set_opt,
    to_bytes_name,
    want_int,
    want_now,
    want_real,
)
from ._wait import new_info, run, run_async, steps

if TYPE_CHECKING:
    from ._window import Metric

    # The decorator's entry and exits (swpy_py.c, set by swpy_install below):
    # swpy_enter_site, swpy_exit_ok and swpy_exit_err called with the GIL held.
    def _decorator_enter(site: int) -> int: ...
    def _decorator_exit_ok(token: int) -> int: ...
    def _decorator_exit_err(token: int) -> int: ...

F = TypeVar("F", bound=Callable[..., Any])

_EXIT_ERROR: int = lib.SW_EXIT_ERROR
# With segment= and a keyed table, the segment holds this many limiters by
# name unless names= says otherwise (their keys are in a segment of their own):
# 64 x 36.5 KiB, every page reserved; a segment made with another number is
# opened with that number.
_DEFAULT_NAMES = 64
_PRIORITIZED: int = lib.SW_ENTRY_PRIORITIZED
_CLOSED = CLOSED  # see _util.CLOSED

_BEHAVIORS = {
    "reject": lib.SW_BEHAVIOR_REJECT,
    "pacing": lib.SW_BEHAVIOR_PACING,
    "warm_up": lib.SW_BEHAVIOR_WARM_UP,
    "warm_up_pacing": lib.SW_BEHAVIOR_WARM_UP_PACING,
}
_BEHAVIOR_NAMES = {v: k for k, v in _BEHAVIORS.items()}

# The rule keys (what sw_limiter_set_rule takes), compared when a limiter in a
# shared segment may carry another process's rule.
_RULE_KEYS = (
    lib.SW_OPT_GRADE,
    lib.SW_OPT_BEHAVIOR,
    lib.SW_OPT_THRESHOLD,
    lib.SW_OPT_MAX_QUEUE_MS,
    lib.SW_OPT_WARM_UP_SEC,
    lib.SW_OPT_COLD_FACTOR,
    lib.SW_OPT_STRICT,
)

# The fast paths' C calls (swpy.h), each of one integer.
_with_enter = lib.swpy_with_enter
_acquire = lib.swpy_acquire_site
_NO_CONTEXT: int = lib.SWPY_NO_CONTEXT
_NO_ENTRY: int = lib.SWPY_NO_ENTRY
_CLOCKED: int = lib.SWPY_CLOCKED
_ONE = 1  # try_acquire()'s default n, compared by identity (True == 1 is not an n)
# Set once in a thread that has no contextvars context yet, which makes one:
# `with` entries are matched to their exits by the context current in the
# thread (a task's, a greenlet's, the thread's), read in C.
_context_maker: "contextvars.ContextVar[None]" = contextvars.ContextVar("libsw_context")


@dataclass(frozen=True)
class Stats:
    """A limiter's statistics at one time (the StatisticNode's per-second
    array; rates are per second, RTs in milliseconds)."""

    pass_qps: float
    block_qps: float
    success_qps: float
    exception_qps: float
    total_qps: float
    occupied_pass_qps: float
    avg_rt: float
    #: None when no request completed in the window (libsw's "no sample"
    #: value, SW_OPT_MAX_RT_MS, is not a response time)
    min_rt: Optional[float]
    max_success_qps: float
    concurrency: int
    waiting: int
    time_ms: int
    would_block_qps: float = 0.0  #: dry run: refusals let through, per second

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


class _Site:
    """A limiter's site (swpy.h): its handle and entry flags in C, named by a
    small integer n; it holds the handle until it is freed itself."""

    __slots__ = ("n", "h")

    def __init__(self, h: Any, flags: int, clocked: bool) -> None:
        self.h = h
        self.n = check(lib.swpy_site_new(h, flags, clocked), "limiter site")

    def clear(self) -> None:
        """Entries through the site fail with SW_ENULL from now on."""
        lib.swpy_site_clear(self.n)

    def __del__(self, _free: Any = lib.swpy_site_free) -> None:  # (no global lookups at exit)
        _free(self.n)


class _Root:
    """What a limiter and the limiters of its keys share."""

    __slots__ = ("opts", "registry", "segment", "capacity", "keys", "lock", "overflow", "on_full",
                 "closed", "init_kwargs", "prefix", "members", "segment_name")

    def __init__(self) -> None:
        self.opts: Any = None
        self.registry: Any = None
        self.segment: Any = None
        self.capacity = 0
        self.keys: Dict[str, "RateLimiter"] = {}
        self.lock = threading.Lock()
        self.overflow: Optional["RateLimiter"] = None
        self.on_full = "raise"
        self.closed = False
        self.init_kwargs: Optional[Dict[str, Any]] = None
        self.prefix = ""
        self.members: List["RateLimiter"] = []
        self.segment_name: Optional[str] = None  # names=0: the segment's name (no segment of limiters)


def _clock_sleep(clock: Any, attr: str, default: Any) -> Any:
    fn = getattr(clock, attr, None) if clock is not None else None
    return fn if callable(fn) else default


class RateLimiter(PerKey):
    """A flow rule (Sentinel's flow controllers) on its own statistics.

    Exactly one of ``qps`` (passes per second over a sliding window of
    ``windows`` x ``interval``/``windows`` seconds) or ``concurrency``
    (requests in flight). ``behavior``: ``"reject"`` (default),
    ``"pacing"`` (leaky bucket, queueing up to ``max_queue`` seconds),
    ``"warm_up"`` (starts at qps/``cold_factor``, reaches qps over
    ``warm_up`` seconds), ``"warm_up_pacing"``. ``strict=True`` makes the
    check and the count one atomic step (no overshoot with threads or
    processes); ``False`` is Sentinel's check-then-add.

    Use it as a decorator (sync or ``async def``), as a context manager
    (``with lim:`` / ``async with lim:``), or with :meth:`acquire` /
    :meth:`try_acquire`. A refused request raises :class:`BlockedError`,
    unless ``block=True``: then it is retried after ``retry_after`` until
    ``timeout`` seconds of waiting (``None``: no limit). A pacing or
    prioritized admission that must wait is always waited for, with
    ``time.sleep`` or ``asyncio.sleep`` (never inside C).

    ``segment="name"`` (a POSIX shared memory name) or ``"/path/file"`` puts
    the limiter, under ``name`` (default ``"default"``), in a shared segment
    of ``names`` limiters that every process opening it updates exactly
    (a keyed table's limiter with ``names=0``: its keys' segment alone).

    Per-key limits (``key=`` of the entry methods, :meth:`for_key`) share
    the rule. When a keyed table takes it (QPS or concurrency, reject or
    pacing, not prioritized, no cluster), the keys live in one table of
    ``capacity`` keys at once (on the heap, or with ``segment=`` in the
    segment ``"<segment>.keys.<name>"``): idle keys are reclaimed, and
    ``on_full`` says what a new key gets when every place it may take holds
    an active key: ``"evict"`` (default: the least recently active one is
    evicted), ``"open"`` (let through uncounted), ``"closed"`` (refused).
    Keys longer than ``key_bytes`` (16..128) are kept as a digest. Other
    rules (warm-up, prioritized, cluster) keep each key's limiter in a
    registry of ``capacity`` keys (in the segment, as ``"<name>:<key>"``),
    which evicts nothing: ``on_full`` is then ``"raise"``
    (:class:`RegistryFullError`, default), ``"allow"`` (an unlimited
    limiter) or ``"shared"`` (one limiter shared by the keys that did not
    fit).

    ``clock``: a callable returning milliseconds (int); then every call
    passes its time to the C library (the ``*_at`` functions), which makes
    runs deterministic. If the clock has ``sleep`` / ``async_sleep``
    methods (as :class:`ManualClock` does) they are used for waiting.

    ``cluster="host:port[,host:port...]"`` makes the threshold fleet-wide on
    Redis (or Redis Cluster), for every process that uses the same ``name``:
    admissions come from a lease of ``lease`` tokens refilled by a thread
    (docs/cluster.md). ``cluster_failure`` (``"local"``, ``"open"``,
    ``"closed"``) says what happens while Redis is down; ``cluster_nodes``,
    ``cluster_timeout``, ``cluster_retry`` (seconds), ``cluster_password``,
    ``cluster_username`` (a Redis 6 ACL user) and ``cluster_database`` set up
    the rest. Redis going down and coming back is logged on the ``"libsw"``
    logger. Every argument is checked before anything is made: a bad one
    raises and leaves no segment behind.
    """

    # Read by the C methods (swpy_py.c) at their offsets: the site (swpy.h),
    # and the same for try_acquire's fast path (0 with a custom clock), and
    # for try_acquire(key=)'s: the keyed table's site (0: none, or a custom
    # clock).
    __slots__ = ("_site_addr", "_fast_site", "_kfast_site")

    # --------------------------------------------------------- construction

    def __init__(
        self,
        qps: Optional[float] = None,
        *,
        name: Optional[str] = None,
        concurrency: Optional[float] = None,
        behavior: str = "reject",
        max_queue: float = 0.5,
        warm_up: float = 10,
        cold_factor: int = 3,
        strict: bool = True,
        windows: int = 2,
        interval: float = 1.0,
        segment: Optional[Union[str, "os.PathLike[str]"]] = None,
        capacity: int = 1024,
        names: Optional[int] = None,
        key_bytes: int = 16,
        clock: Optional[Callable[[], int]] = None,
        block: bool = False,
        timeout: Optional[float] = None,
        prioritized: bool = False,
        stripes: Optional[int] = None,
        on_full: Optional[str] = None,
        reset: bool = False,
        segment_max_mb: Optional[int] = None,
        sleep: Optional[Callable[[float], Any]] = None,
        async_sleep: Optional[Callable[[float], Awaitable[Any]]] = None,
        cluster: Optional[str] = None,
        lease: int = 100,
        cluster_failure: str = "local",
        cluster_nodes: int = 1,
        cluster_timeout: float = 0.1,
        cluster_retry: float = 1.0,
        cluster_password: Optional[str] = None,
        cluster_username: Optional[str] = None,
        cluster_database: int = 0,
        dry_run: bool = False,
    ) -> None:
        init_kwargs = dict(
            qps=qps, name=name, concurrency=concurrency, behavior=behavior, max_queue=max_queue,
            warm_up=warm_up, cold_factor=cold_factor, strict=strict, windows=windows,
            interval=interval, segment=segment, capacity=capacity, names=names, key_bytes=key_bytes,
            clock=clock, block=block,
            timeout=timeout, prioritized=prioritized, stripes=stripes, on_full=on_full,
            segment_max_mb=segment_max_mb, sleep=sleep, async_sleep=async_sleep, cluster=cluster, lease=lease,
            cluster_failure=cluster_failure, cluster_nodes=cluster_nodes,
            cluster_timeout=cluster_timeout, cluster_retry=cluster_retry,
            cluster_password=cluster_password,
            cluster_username=cluster_username, cluster_database=cluster_database, dry_run=dry_run,
        )
        self._h: Any = _CLOSED
        root = self._root = _Root()
        if (qps is None) == (concurrency is None):
            raise TypeError("RateLimiter() takes exactly one of qps= or concurrency=")
        threshold = want_real(qps if qps is not None else concurrency, "qps" if qps is not None else "concurrency")
        if not isinstance(behavior, str):
            raise TypeError("behavior must be a str, not %s" % type(behavior).__name__)
        beh = _BEHAVIORS.get(behavior.replace("-", "_"))
        if beh is None:
            raise ValueError("behavior=%r is not one of %s" % (behavior, ", ".join(sorted(_BEHAVIORS))))
        if not isinstance(strict, bool):
            raise TypeError("strict must be a bool")
        if name is not None:
            if not isinstance(name, str):
                raise TypeError("name must be a str, not %s" % type(name).__name__)
            to_bytes_name(name, "name")  # no NUL: "n\0one" and "n\0two" are not one name
        check_on_full(on_full)
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning milliseconds")
        if timeout is not None:
            timeout = want_real(timeout, "timeout")
            if not timeout >= 0:
                raise ValueError("timeout=%r must be >= 0 seconds (or None)" % (timeout,))
        want_int(windows, "windows", 1, 2**31 - 1)
        want_int(capacity, "capacity", 1, UINT32_MAX)
        if names is not None:
            want_int(names, "names", 0, UINT32_MAX)
            if segment is None:
                raise TypeError("names= (the limiters a segment holds) needs segment=")
        self._blocking = bool(block)
        self._timeout = timeout
        self._clock = clock
        # t0 of an entry, for its response time: the duration clock, or clock=
        self._t0_now: Callable[[], int] = lib.sw_now_ns if clock is None else clock
        self._sleep = sleep or _clock_sleep(clock, "sleep", time.sleep)
        self._async_sleep = async_sleep or _clock_sleep(clock, "async_sleep", asyncio.sleep)
        self._flags = _PRIORITIZED if prioritized else 0
        self.name = name
        self._key: Optional[str] = None

        opts = root.opts = new_options()
        set_opt(opts, lib.SW_OPT_GRADE, lib.SW_GRADE_QPS if qps is not None else lib.SW_GRADE_CONCURRENCY)
        set_opt(opts, lib.SW_OPT_BEHAVIOR, beh)
        set_opt(opts, lib.SW_OPT_THRESHOLD, threshold, "qps" if qps is not None else "concurrency")
        set_opt(opts, lib.SW_OPT_MAX_QUEUE_MS, seconds_to_ms(max_queue, "max_queue"), "max_queue")
        set_opt(opts, lib.SW_OPT_WARM_UP_SEC, want_real(warm_up, "warm_up"), "warm_up")
        set_opt(opts, lib.SW_OPT_COLD_FACTOR, want_real(cold_factor, "cold_factor"), "cold_factor")
        set_opt(opts, lib.SW_OPT_STRICT, 1 if strict else 0)
        set_opt(opts, lib.SW_OPT_DRY_RUN, 1 if dry_run else 0)
        set_opt(opts, lib.SW_OPT_SECOND_SAMPLE_COUNT, windows, "windows")
        set_opt(opts, lib.SW_OPT_SECOND_INTERVAL_MS, seconds_to_ms(interval, "interval"), "interval")
        if stripes is not None:
            set_opt(opts, lib.SW_OPT_STRIPES, want_int(stripes, "stripes", 1, 64), "stripes")
        if segment_max_mb is not None:
            if segment is None:
                raise TypeError("segment_max_mb= (the largest segment to create) needs segment=")
            set_opt(opts, lib.SW_OPT_SEGMENT_MAX_MB, want_int(segment_max_mb, "segment_max_mb", 1, 2**24),
                    "segment_max_mb")
        settings = None
        if cluster is not None:
            if cluster_failure not in _FAILURES:
                raise ValueError("cluster_failure=%r is not one of %s"
                                 % (cluster_failure, ", ".join(sorted(_FAILURES))))
            set_opt(opts, lib.SW_OPT_CLUSTER, 1)
            set_opt(opts, lib.SW_OPT_CLUSTER_LEASE, want_int(lease, "lease", 1, 10**9), "lease")
            set_opt(opts, lib.SW_OPT_CLUSTER_FAILURE, _FAILURES[cluster_failure])
            set_opt(opts, lib.SW_OPT_CLUSTER_NODES, want_int(cluster_nodes, "cluster_nodes", 1, 10**6),
                    "cluster_nodes")
            set_opt(opts, lib.SW_OPT_CLUSTER_TIMEOUT_MS, seconds_to_ms(cluster_timeout, "cluster_timeout"),
                    "cluster_timeout")
            set_opt(opts, lib.SW_OPT_CLUSTER_RETRY_MS, seconds_to_ms(cluster_retry, "cluster_retry"),
                    "cluster_retry")
            settings = _ClusterSettings(cluster, cluster_username, cluster_password, cluster_database,
                                        int(get_opt(opts, lib.SW_OPT_CLUSTER_TIMEOUT_MS)))
            resource = _resource_name(name)
        elif cluster_password is not None or cluster_username is not None or cluster_database != 0:
            raise TypeError("cluster_password, cluster_username and cluster_database need cluster=")
        root.capacity = capacity

        # Every argument is checked before anything is made: the rule and the
        # geometry by a limiter on the heap (a failure in sw_segment_open
        # would otherwise come after the segment file exists), the keyed
        # table by one on the heap, the cluster address by sw_cluster_create,
        # the names here.
        p = ffi.new("sw_limiter **")
        check(lib.sw_limiter_create(p, opts), "RateLimiter")
        heap = ffi.gc(p[0], lib.sw_limiter_free)
        kopts = self._keys_path(opts, on_full, key_bytes, prioritized)
        self._kt: Optional[KeyedTable] = None if kopts is None else KeyedTable.create(capacity, kopts)
        if segment is not None:
            self.name = name if name is not None else "default"
            seg_name = to_bytes_name(segment, "segment")
            bname = self.name.encode("utf-8")
            if not 1 <= len(bname) <= lib.SW_NAME_MAX:
                raise ArgumentError("name=%r is %d bytes: a name in a segment is 1..%d"
                                    % (self.name, len(bname), lib.SW_NAME_MAX), lib.SW_ERANGE)
        self._cluster: Optional[_Cluster] = None
        if settings is not None:
            self._cluster = _Cluster.get(settings, opts)

        if segment is None:
            self._h = heap
        else:
            root.prefix = self.name + ":"
            root.init_kwargs = init_kwargs
            attach_any = names is None and kopts is not None
            if names is None:
                names = capacity if kopts is None else _DEFAULT_NAMES
            flags = lib.SW_SEGMENT_CREATE | (lib.SW_SEGMENT_RESET if reset else 0)
            if names == 0:  # the keys' segment alone: no segment of limiters by name
                if kopts is None:
                    raise ValueError("names=0 (no segment of limiters) needs a rule a keyed table takes")
                self._h = heap
                self._open_keys(seg_name, kopts, flags)
                root.segment_name = seg_name.decode("utf-8", "replace")
            else:
                heap = None
                self._open_segments(segment, seg_name, bname, names, flags, kopts, attach_any)
        self._make_site()
        root.members.append(self)
        if self._cluster is not None:
            self._cluster.add(self._h, resource)

    def _open_segments(self, segment: Any, seg_name: bytes, bname: bytes, names: int, flags: int,
                       kopts: Any, attach_any: bool = False) -> None:
        """Open the segment of the limiters by name and, for a keyed table,
        the keys' segment; a failure removes what this call created.
        attach_any: names= was not given, so a segment of limiters made with
        another number of names is opened with that number (its other
        geometry must still match)."""
        root = self._root
        ps = ffi.new("sw_segment **")
        rc = lib.sw_segment_open(ps, seg_name, names, root.opts, flags)
        if rc == lib.SW_EGEOMETRY and attach_any:  # made with another number of names?
            info = ffi.new("sw_segment_info *")
            if (lib.sw_segment_probe(seg_name, info) == lib.SW_OK and info.kind == lib.SW_SEGMENT_KIND_REGISTRY
                    and info.ready and info.capacity not in (0, names)):
                rc = lib.sw_segment_open(ps, seg_name, info.capacity, root.opts, flags)
        check(rc, "segment %r" % (segment,))
        root.segment = ffi.gc(ps[0], lib.sw_segment_close)
        keys: Optional[KeyedTable] = None
        try:
            if kopts is not None:
                kname = keys_segment_name(seg_name, self.name or "")
                checked, self._kt = self._kt, None
                ffi.release(checked.h)  # the check's heap table: the keys are in the segment
                keys = self._kt = KeyedTable.open(kname, root.capacity, kopts, flags)
            root.registry = keep_alive(lib.sw_segment_registry(root.segment), root.segment)
            self._h = self._registry_get(bname, what="name")
        except BaseException:
            self._kt = None
            if keys is not None and keys.created:
                ffi.release(keys.h)
                lib.sw_segment_unlink(kname)
            if lib.sw_segment_created(root.segment) == 1:
                ffi.release(root.segment)
                lib.sw_segment_unlink(seg_name)
            root.registry = root.segment = None
            raise

    def _open_keys(self, seg_name: bytes, kopts: Any, flags: int) -> None:
        """Open the keys' segment "<segment>.keys.<name>" alone (names=0)."""
        checked, self._kt = self._kt, None
        ffi.release(checked.h)  # the check's heap table: the keys are in the segment
        self._kt = KeyedTable.open(keys_segment_name(seg_name, self.name or ""), self._root.capacity, kopts, flags)

    def lease_stats(self) -> Dict[str, int]:
        """The cluster lease of this limiter: calls, granted, tokens, up, ..."""
        info = ffi.new("sw_lease_info *")
        check(lib.sw_lease_stats(self._handle(), self._now(), info), "lease_stats")
        return {k: int(getattr(info, k)) for k in
                ("calls", "granted", "tokens", "offset_ms", "down_since_ms", "up", "need")}

    def _registry_get(self, bname: bytes, what: str) -> Any:
        """The registry's limiter of bname, holding the registry alive, with
        this limiter's rule (a shared segment may hold another process's)."""
        root = self._root
        p = ffi.new("sw_limiter **")
        rc = lib.sw_registry_get(root.registry, bname, p)
        if rc < 0:
            raise error_from_code(rc, "%s %r" % (what, bname.decode("utf-8", "replace")))
        h = keep_alive(p[0], root.registry)
        if root.segment is not None:
            self._ensure_rule(h)
        return h

    def _ensure_rule(self, h: Any) -> None:
        opts = self._root.opts
        have = new_options()
        check(lib.sw_limiter_get_rule(h, have))
        if any(get_opt(have, k) != get_opt(opts, k) for k in _RULE_KEYS):
            check(lib.sw_limiter_set_rule(h, opts), "set rule")

    # ------------------------------------------------------------ properties

    @property
    def closed(self) -> bool:
        return self._h is _CLOSED

    @property
    def key(self) -> Optional[str]:
        """The key of a limiter returned by :meth:`for_key`, else None."""
        return self._key

    @property
    def resource(self) -> Optional[str]:
        """The name reported in BlockedError: the key, or the name."""
        return self._key if self._key is not None else self.name

    @property
    def segment_name(self) -> Optional[str]:
        seg = self._root.segment
        if seg is None:
            return self._root.segment_name
        return ffi.string(lib.sw_segment_name(seg)).decode("utf-8", "replace")

    def _closed_msg(self) -> str:
        r = self.resource
        return "limiter %r is closed" % r if r is not None else "limiter is closed"

    def _handle(self) -> Any:
        h = self._h
        if h is _CLOSED:
            raise ClosedError(self._closed_msg())
        return h

    def _now(self) -> int:
        clock = self._clock
        return lib.sw_now_ms() if clock is None else clock()

    def _time(self, now: Optional[int]) -> int:
        """An explicit time (checked) or the limiter's clock."""
        return self._now() if now is None else want_now(now)

    def __repr__(self) -> str:
        state = "closed" if self._h is _CLOSED else "open"
        return "<libsw.RateLimiter %s %s>" % (self.resource or "", state)

    # ------------------------------------------------------------ entering

    def _enter_raw(self, h: Any, n: int, flags: int) -> int:
        clock = self._clock
        if clock is None:
            return lib.swpy_enter(h, n, flags)
        return lib.swpy_enter_at(h, clock(), n, flags)

    def _fail(self, rc: int) -> Exception:
        if self._h is _CLOSED:
            return ClosedError(self._closed_msg())
        return error_from_code(rc, self.resource or "limiter")

    def _steps(self, h: Any, rc: int, n: int, flags: int, block: bool, timeout: Optional[float],
               info: Optional[list]) -> Any:
        return steps(rc, lambda: self._enter_raw(self._h, n, flags),  # _CLOSED if closed meanwhile
                     lambda: self._exit(h, self._t0_now(), n, True), self._fail, self._t0_now, self.resource,
                     block, timeout, info)

    def _slow(self, h: Any, rc: int, n: int, flags: int, block: bool, timeout: Optional[float],
              info: Optional[list] = None) -> int:
        """Finish an entry whose fast path did not pass: wait a WAIT verdict,
        retry a BLOCK (block=True) or raise BlockedError. Returns t0."""
        return run(self._steps(h, rc, n, flags, block, timeout, info), self._sleep)

    async def _slow_async(self, h: Any, rc: int, n: int, flags: int, block: bool,
                          timeout: Optional[float], info: Optional[list] = None) -> int:
        return await run_async(self._steps(h, rc, n, flags, block, timeout, info), self._async_sleep)

    def _make_site(self) -> None:
        """The site of this limiter's handle: its fast paths' one-integer
        argument (swpy.h), cleared by close(). The site holds the handle, so
        that entries in flight (`with` records, tokens) exit safely after a
        close(): the memory goes with the limiter object."""
        self._site = _Site(self._h, self._flags, self._clock is not None)
        self._site_addr = self._site.n
        self._fast_site = 0 if self._clock is not None else self._site_addr  # try_acquire's
        kt = self._kt if self._key is None else None
        if kt is not None and kt.site == 0:
            kt.make_site(self._clock is not None)
        self._kfast_site = kt.site if kt is not None and not kt.custom else 0

    def _scale_clock(self, period_ms: int, epoch: int) -> None:
        """Entries of keys on a clock whose 1000 ms are period_ms of libsw's,
        from epoch, read in C (libsw.web's rules of other periods; the
        limiter's clock= computes the same for its Python paths)."""
        kt = self._kt
        if kt is None:
            raise NotSupportedError("a scaled clock needs a keyed table", lib.SW_ENOTSUP)
        kt.make_site(False, period_ms, epoch)
        self._kfast_site = kt.site

    def _site_for_wrapper(self) -> Tuple[Any, int]:
        """This limiter's site and its address, for a decorator."""
        self._handle()  # ClosedError when closed
        return self._site, self._site_addr

    @staticmethod
    def _token(h: Any, t0: int, n: int, remaining: int) -> int:
        """A token of an entry of h admitted at t0 by a slow path."""
        tok = lib.swpy_token(h, t0, n, remaining)
        if tok < 0:
            raise MemoryError("libsw: no memory for an entry record")
        return tok

    def _slow_token(self, rc: int, block: bool, timeout: Optional[float]) -> int:
        """The decorator's slow path: a token once admitted."""
        h = self._h
        return self._token(h, self._slow(h, rc, 1, self._flags, block, timeout), 1, 0)

    async def _slow_token_async(self, rc: int, block: bool, timeout: Optional[float]) -> int:
        h = self._h
        return self._token(h, await self._slow_async(h, rc, 1, self._flags, block, timeout), 1, 0)

    def _exit(self, h: Any, t0: int, n: int, error: bool) -> None:
        clock = self._clock
        fl = _EXIT_ERROR if error else 0
        if clock is None:
            rc = lib.swpy_exit(h, t0, n, fl)
        else:
            rc = lib.swpy_exit_at(h, clock(), t0, n, fl)
        if rc < 0:
            raise error_from_code(rc, "exit")

    # ------------------------------------------------------------ decorator

    def __call__(self, fn: F) -> F:
        """Decorate a function or ``async def`` function: each call enters
        the limiter (raising BlockedError, or waiting with block=True) and
        exits it when the call returns or raises (an exception is counted)."""
        if not callable(fn):
            raise TypeError("a RateLimiter decorates a callable, not %s" % type(fn).__name__)
        if inspect.iscoroutinefunction(fn):
            return cast(F, self._wrap_async(fn))
        return cast(F, self._wrap_sync(fn))

    def _wrap_sync(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        lim = self
        flags = self._flags
        slow = self._slow
        block = self._blocking
        timeout = self._timeout
        clock = self._clock
        if clock is None:
            site_obj, site = self._site_for_wrapper()
            enter = _decorator_enter
            exit_ok = _decorator_exit_ok
            exit_err = _decorator_exit_err
            slow_token = self._slow_token

            @functools.wraps(fn)
            def limited(*args: Any, **kwargs: Any) -> Any:
                tok = enter(site)
                if tok < 0:
                    tok = slow_token(tok, block, timeout)
                try:
                    result = fn(*args, **kwargs)
                except BaseException:
                    exit_err(tok)
                    raise
                exit_ok(tok)
                return result

            # The site and the limiter live as long as the function (a call
            # in progress holds it): close() only clears the site.
            limited._libsw_keep = (site_obj, self._h)  # type: ignore[attr-defined]

        else:
            enter_at = lib.swpy_enter_at
            exit_at = lib.swpy_exit_at

            @functools.wraps(fn)
            def limited(*args: Any, **kwargs: Any) -> Any:
                h = lim._h
                t0 = enter_at(h, clock(), 1, flags)
                if t0 < 0:
                    t0 = slow(h, t0, 1, flags, block, timeout)
                try:
                    result = fn(*args, **kwargs)
                except BaseException:
                    exit_at(h, clock(), t0, 1, 1)
                    raise
                exit_at(h, clock(), t0, 1, 0)
                return result

        limited.limiter = self  # type: ignore[attr-defined]
        return limited

    def _wrap_async(self, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        lim = self
        flags = self._flags
        block = self._blocking
        timeout = self._timeout
        if self._clock is None:
            site_obj, site = self._site_for_wrapper()
            enter = _decorator_enter
            exit_ok = _decorator_exit_ok
            exit_err = _decorator_exit_err
            slow_token = self._slow_token_async

            @functools.wraps(fn)
            async def limited(*args: Any, **kwargs: Any) -> Any:
                tok = enter(site)
                if tok < 0:
                    tok = await slow_token(tok, block, timeout)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException:
                    exit_err(tok)
                    raise
                exit_ok(tok)
                return result

            limited._libsw_keep = (site_obj, self._h)  # type: ignore[attr-defined]
        else:
            slow = self._slow_async
            enter_raw = self._enter_raw
            exit_ = self._exit

            @functools.wraps(fn)
            async def limited(*args: Any, **kwargs: Any) -> Any:
                h = lim._h
                t0 = enter_raw(h, 1, flags)
                if t0 < 0:
                    t0 = await slow(h, t0, 1, flags, block, timeout)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException:
                    exit_(h, t0, 1, True)
                    raise
                exit_(h, t0, 1, False)
                return result

        limited.limiter = self  # type: ignore[attr-defined]
        return limited

    # ------------------------------------------------------ context manager
    # `with lim:` and `async with lim:` are C methods (swpy_py.c, installed
    # below the class): an entry is recorded in C with the context current
    # in the thread (a task's, a greenlet's, the thread's), and the exit ends
    # the latest entry of this limiter in that context (swpy.h). What is not
    # a plain pass or a plain exit comes to the methods here.

    if TYPE_CHECKING:

        def __enter__(self) -> "RateLimiter": ...

        def __exit__(self, et: Any, ev: Any, tb: Any) -> None: ...

        async def __aenter__(self) -> "RateLimiter": ...

        async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None: ...

    def _enter_slow(self, rc: int) -> "RateLimiter":
        """__enter__ after an entry that did not pass at once (rc)."""
        rc = self._with_retry(rc)
        if rc:
            h = self._h
            self._with_push(h, self._slow(h, rc, 1, self._flags, self._blocking, self._timeout))
        return self

    async def _aenter_slow(self, rc: int) -> "RateLimiter":
        rc = self._with_retry(rc)
        if rc:
            h = self._h
            self._with_push(h, await self._slow_async(h, rc, 1, self._flags, self._blocking, self._timeout))
        return self

    def _with_retry(self, rc: int) -> int:
        """An entry of `with` that did not pass at once: make the thread's
        context if it has none, enter with the custom clock; 0 once entered,
        else what the slow path starts from."""
        site = self._site_addr
        if rc == _NO_CONTEXT:
            _context_maker.set(None)  # the thread's context, made once
            rc = _with_enter(site)
        if rc == _CLOCKED:
            t = self._clock()  # type: ignore[misc]
            rc = lib.swpy_with_enter_at(site, t)
            if rc == _NO_CONTEXT:
                _context_maker.set(None)
                rc = lib.swpy_with_enter_at(site, t)
        return rc

    def _with_push(self, h: Any, t0: int) -> None:
        """Record an entry of h the slow path admitted at t0."""
        rc = lib.swpy_with_push(self._site_addr, h, t0)
        if rc == _NO_CONTEXT:
            _context_maker.set(None)
            rc = lib.swpy_with_push(self._site_addr, h, t0)
        if rc < 0:
            self._exit(h, t0, 1, False)
            raise MemoryError("libsw: no memory for an entry record")

    def _exit_slow(self, rc: int, error: bool) -> None:
        """__exit__ after an exit that did not end an entry at once (rc)."""
        if rc == _CLOCKED:
            rc = lib.swpy_with_exit_at(self._site_addr, self._clock(), _EXIT_ERROR if error else 0)  # type: ignore[misc]
        if rc == _NO_ENTRY:
            raise RuntimeError("RateLimiter.__exit__ without a matching __enter__ in this thread or task")
        if rc < 0:
            raise error_from_code(rc, "exit")

    # --------------------------------------------------------- acquire API

    def _target(self, key: Optional[Union[str, bytes]]) -> "RateLimiter":
        return self if key is None else self.for_key(key)

    def _check_n(self, n: object) -> int:
        if not is_int(n):
            raise TypeError("n must be an int, not %s" % type(n).__name__)
        if n < 0 or n > 2**63 - 1:  # type: ignore[operator]
            raise ArgumentError("n=%r is outside 0..2147483647" % (n,), lib.SW_ERANGE)
        return cast(int, n)

    def _acquire_first(self, n: object) -> Tuple[Optional[Permit], int, int]:
        """Enter with n units: (the permit, n, 0) when admitted at once (a
        plain PASS), else (None, n, the entry's result: its t0 when it
        passed, a dry run's would-block or a custom clock's pass)."""
        if n is not _ONE:
            n = self._check_n(n)
        site = self._fast_site
        if not site:
            return None, cast(int, n), self._enter_raw(self._h, n, self._flags)
        tok = _acquire(site) if n is _ONE else lib.swpy_acquire_site_n(site, n)
        if tok <= 0:
            return None, cast(int, n), tok
        p = Permit()
        p._lim = self
        p.n = cast(int, n)
        p._tok = tok
        return p, p.n, 0

    def _waits(self, block: Optional[bool], timeout: Optional[float]) -> Tuple[int, bool, Optional[float]]:
        """The entry flags, block and timeout of a call (its own, else the limiter's)."""
        return self._flags, self._blocking if block is None else bool(block), \
            self._timeout if timeout is None else timeout

    def _permit(self, h: Any, n: int, t0: int, info: list) -> Permit:
        """The permit of an entry of h admitted at t0 (by a slow path, or
        with a custom clock)."""
        d = lib.swpy_decision()  # this thread's last entry: this one
        remaining = info[1] if info[1] is not None else d.remaining
        return admitted(_ClockPermit if self._clock is not None else _Outcome, self, n,
                        self._token(h, t0, n, remaining), remaining, info[0], info[2], bool(d.would_block))

    def acquire(self, n: int = 1, *, key: Optional[Union[str, bytes]] = None, block: Optional[bool] = None,
                timeout: Optional[float] = None) -> Permit:
        """Enter with n units; returns an admitted :class:`Permit` (release it,
        or use it in a ``with``). Raises BlockedError when refused, unless
        blocking (this call's ``block``, else the limiter's): then retries
        until ``timeout`` seconds (this call's, else the limiter's)."""
        if key is not None:
            if self._kt is not None:
                return self._kt.acquire(self, key, n, block, timeout)
            return self.for_key(key).acquire(n, block=block, timeout=timeout)  # type: ignore[union-attr]
        p, n, rc = self._acquire_first(n)
        if p is not None:
            return p
        h, info = self._h, new_info()
        if rc < 0:
            rc = self._slow(h, rc, n, *self._waits(block, timeout), info)
        return self._permit(h, n, rc, info)

    async def acquire_async(self, n: int = 1, *, key: Optional[Union[str, bytes]] = None,
                            block: Optional[bool] = None, timeout: Optional[float] = None) -> Permit:
        """:meth:`acquire` for coroutines: waits with ``asyncio.sleep``."""
        if key is not None:
            if self._kt is not None:
                return await self._kt.acquire_async(self, key, n, block, timeout)
            return await self.for_key(key).acquire_async(n, block=block, timeout=timeout)  # type: ignore[union-attr]
        p, n, rc = self._acquire_first(n)
        if p is not None:
            return p
        h, info = self._h, new_info()
        if rc < 0:
            rc = await self._slow_async(h, rc, n, *self._waits(block, timeout), info)
        return self._permit(h, n, rc, info)

    if TYPE_CHECKING:

        def try_acquire(self, n: int = 1, *, key: Optional[Union[str, bytes]] = None) -> Permit:
            """A C method (swpy_py.c): the fast path, else _try_acquire."""

    def _try_acquire(self, n: int = 1, *, key: Optional[Union[str, bytes]] = None) -> Permit:
        """try_acquire(n=1, *, key=None): enter with n units without raising
        on a refusal: returns a :class:`Permit`, true when admitted (release
        it when done), false with ``retry_after`` when refused. An admission
        that must wait (pacing) is waited for with time.sleep before
        returning. (try_acquire is a C method for one unit without key=,
        with this behaviour; the rest comes here.)"""
        if key is not None and self._kt is not None:
            return self._kt.try_acquire(self, key, n)
        try:
            return self.acquire(n, key=key, block=False)
        except BlockedError as e:
            return refused(_Outcome, self._target(key), n, e.retry_after, e.remaining)

    def _try_acquired_key(self, rc: int, key: Union[str, bytes]) -> Permit:
        """try_acquire(key=) after an entry of one unit that did not pass at
        once (rc): waited for (a WAIT verdict), or a false permit."""
        return self._kt.try_finish(self, key, 1, rc)  # type: ignore[union-attr]

    def _try_acquired(self, rc: int) -> Permit:
        """try_acquire() after an entry of one unit that did not pass at once
        (rc): waited for (a WAIT verdict), or a false permit."""
        h = self._h
        info = new_info()
        try:
            return self._permit(h, 1, self._slow(h, rc, 1, self._flags, False, None, info), info)
        except BlockedError as e:
            return refused(_Outcome, self, 1, e.retry_after, e.remaining)

    async def try_acquire_async(self, n: int = 1, *, key: Optional[Union[str, bytes]] = None) -> Permit:
        """:meth:`try_acquire` for coroutines."""
        if key is not None and self._kt is not None:
            return await self._kt.try_acquire_async(self, key, n)
        try:
            return await self.acquire_async(n, key=key, block=False)
        except BlockedError as e:
            return refused(_Outcome, self._target(key), n, e.retry_after, e.remaining)

    # ---------------------------------------------------------- statistics

    def stats(self, now: Optional[int] = None) -> Stats:
        """Pass / block / success / exception QPS, average and minimum RT,
        requests in flight and borrowed passes waiting, at now (ms; default:
        the limiter's clock)."""
        h = self._handle()
        t = self._time(now)
        node = lib.sw_limiter_node(h)

        def f(v: float) -> float:
            if v < 0:
                raise error_from_code(int(v), "stats")
            return v

        success_qps = f(lib.sw_node_success_qps_at(node, t))
        return Stats(
            pass_qps=f(lib.sw_node_pass_qps_at(node, t)),
            block_qps=f(lib.sw_node_block_qps_at(node, t)),
            success_qps=success_qps,
            exception_qps=f(lib.sw_node_exception_qps_at(node, t)),
            total_qps=f(lib.sw_node_total_qps_at(node, t)),
            occupied_pass_qps=f(lib.sw_node_occupied_pass_qps_at(node, t)),
            avg_rt=f(lib.sw_node_avg_rt_at(node, t)),
            min_rt=f(lib.sw_node_min_rt_at(node, t)) if success_qps > 0 else None,
            max_success_qps=f(lib.sw_node_max_success_qps_at(node, t)),
            concurrency=int(f(lib.sw_node_concurrency(node))),
            waiting=int(f(lib.sw_node_waiting_at(node, t))),
            time_ms=t,
            would_block_qps=f(lib.sw_node_would_block_qps_at(node, t)),
        )

    def set_dry_run(self, on: bool) -> None:
        """Switch dry-run (shadow mode) on or off at run time: the rule keeps
        deciding and counting, but lets everything through; permits say
        ``would_block``. Statistics are kept. The limiter that made keys
        switches its keyed table too (every key, in every process)."""
        check(lib.sw_limiter_set_dry_run(self._handle(), 1 if on else 0), "set_dry_run")
        if self._kt is not None:
            self._kt.set_dry_run(on)

    def second_metric(self) -> "Metric":
        """The node's per-second metric (borrowed: a live view)."""
        from ._window import Metric

        h = self._handle()
        return Metric._borrowed(keep_alive(lib.sw_node_second_metric(lib.sw_limiter_node(h)), h))

    def minute_metric(self) -> "Metric":
        """The node's per-minute metric (borrowed: a live view)."""
        from ._window import Metric

        h = self._handle()
        return Metric._borrowed(keep_alive(lib.sw_node_minute_metric(lib.sw_limiter_node(h)), h))

    def rule(self) -> Dict[str, Any]:
        """The rule in force (it may have been changed by another process
        sharing the segment)."""
        o = new_options()
        check(lib.sw_limiter_get_rule(self._handle(), o))
        return self._rule_dict(o)

    @staticmethod
    def _rule_dict(o: Any) -> Dict[str, Any]:
        qps = get_opt(o, lib.SW_OPT_GRADE) == lib.SW_GRADE_QPS
        return {
            "grade": "qps" if qps else "concurrency",
            "threshold": get_opt(o, lib.SW_OPT_THRESHOLD),
            "behavior": _BEHAVIOR_NAMES.get(int(get_opt(o, lib.SW_OPT_BEHAVIOR)), "?"),
            "max_queue": get_opt(o, lib.SW_OPT_MAX_QUEUE_MS) / 1000.0,
            "warm_up": int(get_opt(o, lib.SW_OPT_WARM_UP_SEC)),
            "cold_factor": int(get_opt(o, lib.SW_OPT_COLD_FACTOR)),
            "strict": bool(get_opt(o, lib.SW_OPT_STRICT)),
        }

    def set_threshold(self, value: float) -> None:
        """Change the threshold (QPS or concurrency) at run time, keeping the
        statistics and the pacing / warm-up state. With a keyed table, the
        threshold of every key changes too (one rule for all keys, in every
        process). With keys in a registry, a key's limiter changes alone and
        the limiter that made keys changes itself only (keys made later
        start with the original rule)."""
        h = self._handle()
        value = want_real(value, "threshold")
        o = new_options()
        check(lib.sw_limiter_get_rule(h, o))
        set_opt(o, lib.SW_OPT_THRESHOLD, value, "threshold")
        if self._kt is not None:  # first: the keyed table's range is the narrower
            ko = self._kt.rule_options()
            set_opt(ko, lib.SW_OPT_THRESHOLD, value, "threshold")
            self._kt.set_rule(ko, "threshold")
        check(lib.sw_limiter_set_rule(h, o), "set_threshold")

    # ------------------------------------------------------------- closing

    def close(self) -> None:
        """Release the limiter (and, for the limiter that made them, every
        key's limiter or the keyed table, and the segment mappings). Later use raises
        :class:`ClosedError`; calls already inside the C library finish
        safely (memory is freed when the last of them returns)."""
        root = self._root
        if self._key is not None:  # a key's limiter: only this handle
            with root.lock:
                self._h = _CLOSED
                self._site.clear()
            return
        with root.lock:
            root.closed = True
            for m in root.members:
                if m._cluster is not None and m._h is not _CLOSED:
                    m._cluster.remove(m._h)  # before the handle can be freed
                m._h = _CLOSED
                m._site.clear()
            root.members.clear()
            if self._kt is not None:
                self._kt.close()
            root.keys.clear()
            root.overflow = None
            root.registry = None
            root.segment = None

    # --------------------------------------------------------- processes

    def __reduce__(self) -> Tuple[Any, ...]:
        root = self._root
        if root.init_kwargs is None:
            raise TypeError(
                "a RateLimiter without segment= lives in this process's memory and cannot be "
                "sent to another process; use segment= to share one across processes"
            )
        return (_reopen, (root.init_kwargs, self._key))


check(lib.swpy_install(), "RateLimiter's fast paths (swpy_py.c)")


def _reopen(kwargs: Dict[str, Any], key: Optional[Union[str, bytes]]) -> Union[RateLimiter, KeyLimiter]:
    lim = RateLimiter(**kwargs)
    return lim if key is None else lim.for_key(key)

