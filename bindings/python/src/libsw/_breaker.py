# SPDX-License-Identifier: Apache-2.0
"""CircuitBreaker: Sentinel's degrade rules around calls to an upstream.

The statistics and the state machine are libsw's (libsw/breaker/ in C);
this module turns a call into an entry and an exit: a decorator (sync or
``async def``), a context manager (``with`` / ``async with``), or
:meth:`CircuitBreaker.call`. A refused call raises :class:`CircuitOpenError`
with ``retry_after`` in seconds. See docs/breakers.md and docs/python.md.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from typing import Any, Callable, NamedTuple, Optional, Tuple, Type, TypeVar, Union

from ._errors import check, error_from_code
from ._libsw import ffi, lib
from ._util import to_bytes_name, want_int, want_real

log = logging.getLogger("libsw")
F = TypeVar("F", bound=Callable[..., Any])

STATES = {lib.SW_BREAKER_CLOSED: "closed", lib.SW_BREAKER_OPEN: "open",
          lib.SW_BREAKER_HALF_OPEN: "half_open"}
_STRATEGIES = ("slow_ratio", "error_ratio", "error_count")
# The C library's option names, as this module's arguments are called.
_ARG_NAMES = {
    "SW_OPT_BREAKER_SLOW_RATIO": "slow_ratio",
    "SW_OPT_BREAKER_TIME_WINDOW_SEC": "open_for", "SW_OPT_BREAKER_MIN_REQUESTS": "min_requests",
    "SW_OPT_BREAKER_STAT_INTERVAL_MS": "interval (ms)", "SW_OPT_BREAKER_SAMPLE_COUNT": "windows",
    "SW_OPT_BREAKER_HALF_OPEN_CALLS": "half_open_calls",
    "SW_OPT_BREAKER_PROBE_TIMEOUT_MS": "probe_timeout (ms)",
}


class CircuitOpenError(Exception):
    """A circuit breaker refused the call. ``retry_after``: seconds until
    the next probe may go (open), or until the probe in flight times out
    (half-open); ``state``: ``"open"`` or ``"half_open"``; ``name``: the
    breaker's name, if it has one."""

    retry_after: float
    state: str
    name: Optional[str]

    def __init__(self, retry_after: float, state: str = "open", name: Optional[str] = None) -> None:
        self.retry_after = retry_after
        self.state = state
        self.name = name
        super().__init__("%s: circuit %s; retry after %.3f s" % (name or "call", state.replace("_", "-"),
                                                                 retry_after))

    def __reduce__(self):  # picklable across processes
        return (CircuitOpenError, (self.retry_after, self.state, self.name))


class BreakerStats(NamedTuple):
    """A breaker at one moment (all processes' counts for a shared one)."""
    state: str            #: "closed", "open" or "half_open"
    requests: int         #: completions in the stat interval
    bad: int              #: ... slow or failed
    ratio: float          #: bad / requests (0.0 without completions)
    next_probe_in: float  #: open: seconds until the next probe; else 0.0
    probes_in_flight: int
    opened: int           #: transitions closed -> open
    half_opened: int      #: open -> half-open
    closed: int           #: half-open -> closed
    reopened: int         #: half-open -> open (a bad probe)
    probes: int
    probes_lost: int      #: probes whose timeout passed before they ended
    blocked: int          #: calls refused


@ffi.def_extern()
def swpy_breaker_changed(user: Any, frm: int, to: int, t: int, value: float) -> None:
    """sw_breaker_set_listener's callback, in the thread whose call made the
    transition. An exception of the user's function is logged, not raised."""
    try:
        breaker = ffi.from_handle(user)
        breaker._on_state_change(STATES.get(frm, "?"), STATES.get(to, "?"), t, value)
    except Exception:
        log.exception("libsw: on_state_change of a CircuitBreaker failed")


# The calls in progress in this thread or task: (breaker, decision, t0) entries.
_calls: "contextvars.ContextVar[Tuple[Any, ...]]" = contextvars.ContextVar("libsw_breaker_calls",
                                                                          default=())


class CircuitBreaker:
    """A circuit breaker (Sentinel 1.8's degrade rules). Give exactly one
    strategy: ``error_ratio=`` (open when more than this fraction of the
    calls of the interval failed), ``error_count=`` (more failures than
    this), or ``slow_ratio=`` with ``max_rt=`` (more than this fraction took
    longer than ``max_rt`` seconds; a ratio of 1.0 opens at 100%).

    ``min_requests``: fewer calls in the interval never open it;
    ``interval``: the stat interval in seconds, cut into ``windows``;
    ``open_for``: seconds open before a probe; ``half_open_calls``: probes
    let through in half-open; ``probe_timeout``: seconds after which a
    probe that never ended is taken as lost (another call probes).
    ``exceptions``: the exception types that count as failures (others
    propagate and count as successes). ``segment``: a shared memory name
    or file path: one breaker for every process that opens it (``reset``
    replaces an existing one). ``on_state_change(old, new, t_ms, value)``:
    called for each transition a call of this process makes. ``clock``: a
    :class:`~libsw.ManualClock` (tests and simulations).
    """

    def __init__(self, *, error_ratio: Optional[float] = None, error_count: Optional[int] = None,
                 slow_ratio: Optional[float] = None, max_rt: Optional[float] = None,
                 min_requests: int = 5, interval: float = 1.0, windows: int = 1,
                 open_for: float = 10.0, half_open_calls: int = 1, probe_timeout: float = 5.0,
                 exceptions: Union[Type[BaseException], Tuple[Type[BaseException], ...]] = (Exception,),
                 segment: Optional[Union[str, bytes]] = None, reset: bool = False,
                 name: Optional[str] = None,
                 on_state_change: Optional[Callable[[str, str, int, float], Any]] = None,
                 clock: Optional[Callable[[], int]] = None) -> None:
        given = [k for k, v in (("slow_ratio", slow_ratio), ("error_ratio", error_ratio),
                                ("error_count", error_count)) if v is not None]
        if len(given) != 1:
            raise TypeError("give exactly one of slow_ratio=, error_ratio=, error_count= (got %s)"
                            % (", ".join(given) or "none"))
        strategy = given[0]
        if strategy == "slow_ratio":
            if max_rt is None:
                raise TypeError("slow_ratio= needs max_rt= (seconds)")
            count = want_real(max_rt, "max_rt") * 1000.0
            ratio = want_real(slow_ratio, "slow_ratio")
        else:
            if max_rt is not None:
                raise TypeError("max_rt= goes with slow_ratio= only")
            count = (want_real(error_ratio, "error_ratio") if strategy == "error_ratio"
                     else float(want_int(error_count, "error_count")))
            ratio = 1.0
        if isinstance(exceptions, type):
            exceptions = (exceptions,)
        if not all(isinstance(e, type) and issubclass(e, BaseException) for e in exceptions):
            raise TypeError("exceptions must be exception types, not %r" % (exceptions,))
        self._exceptions = tuple(exceptions)
        self._count_name = strategy if strategy != "slow_ratio" else "max_rt (ms)"
        self.name = name
        self._clock = clock
        self._on_state_change = on_state_change
        self._handle = None
        self._b = ffi.NULL
        opts = ffi.new("sw_options **")
        check(lib.sw_options_create(opts), "CircuitBreaker")
        o = ffi.gc(opts[0], lib.sw_options_free)
        for key, value, what in (
                (lib.SW_OPT_BREAKER_STRATEGY, _STRATEGIES.index(strategy), "strategy"),
                (lib.SW_OPT_BREAKER_COUNT, count, strategy if strategy != "slow_ratio" else "max_rt (ms)"),
                (lib.SW_OPT_BREAKER_SLOW_RATIO, ratio, "slow_ratio"),
                (lib.SW_OPT_BREAKER_TIME_WINDOW_SEC, want_real(open_for, "open_for"), "open_for"),
                (lib.SW_OPT_BREAKER_MIN_REQUESTS, want_int(min_requests, "min_requests"), "min_requests"),
                (lib.SW_OPT_BREAKER_STAT_INTERVAL_MS, round(want_real(interval, "interval") * 1000),
                 "interval (ms)"),
                (lib.SW_OPT_BREAKER_SAMPLE_COUNT, want_int(windows, "windows"), "windows"),
                (lib.SW_OPT_BREAKER_HALF_OPEN_CALLS, want_int(half_open_calls, "half_open_calls"),
                 "half_open_calls"),
                (lib.SW_OPT_BREAKER_PROBE_TIMEOUT_MS,
                 round(want_real(probe_timeout, "probe_timeout") * 1000), "probe_timeout (ms)")):
            self._check(lib.sw_options_set_double(o, key, float(value)), what)
        out = ffi.new("sw_breaker **")
        if segment is None:
            self._check(lib.sw_breaker_create(out, o), "CircuitBreaker")
        else:
            flags = lib.SW_SEGMENT_RESET if reset else lib.SW_SEGMENT_CREATE
            self._check(lib.sw_breaker_open(out, to_bytes_name(segment, "segment"), o, flags),
                        "CircuitBreaker(segment=%r)" % (segment,))
        self._b = out[0]
        if on_state_change is not None:
            self._handle = ffi.new_handle(self)
            check(lib.sw_breaker_set_listener(self._b, lib.swpy_breaker_changed, self._handle))

    def _check(self, rc: int, context: str) -> None:
        if rc < 0:
            e = error_from_code(rc, context)
            msg = str(e).replace("SW_OPT_BREAKER_COUNT", self._count_name)
            for c_name, py_name in _ARG_NAMES.items():
                msg = msg.replace(c_name, py_name)
            raise type(e)(msg, e.code)

    # ------------------------------------------------------------------ calls

    def enter(self) -> Any:
        """Ask to make a call: the decision to hand to :meth:`exit`, or
        :class:`CircuitOpenError`."""
        d = ffi.new("sw_decision *")
        if self._clock is None:
            rc = lib.sw_breaker_entry(self._b, d)
        else:
            rc = lib.sw_breaker_entry_at(self._b, self._clock(), d)
        if rc < 0:
            self._check(rc, "CircuitBreaker.enter")
        if d.verdict == lib.SW_VERDICT_BLOCK:
            st = self.stats()
            raise CircuitOpenError(d.retry_after_ms / 1000.0, st.state if st.state != "closed" else "open",
                                   self.name)
        return d

    def exit(self, decision: Any, rt: float, error: bool = False, cancel: bool = False) -> None:
        """End a call entered with :meth:`enter`: it took ``rt`` seconds and
        failed or not; ``cancel``: it did not run (a probe's place goes back)."""
        flags = (lib.SW_EXIT_ERROR if error else 0) | (lib.SW_EXIT_CANCEL if cancel else 0)
        rt_ms = min(max(int(round(rt * 1000)), 0), 2**31 - 1)
        if self._clock is None:
            rc = lib.sw_breaker_exit(self._b, decision, rt_ms, flags)
        else:
            rc = lib.sw_breaker_exit_at(self._b, self._clock(), decision, rt_ms, flags)
        if rc < 0:
            self._check(rc, "CircuitBreaker.exit")

    def _start(self) -> float:
        """Seconds on the clock response times are measured with: the
        ManualClock, else libsw's duration clock (sw_now_ns)."""
        return self._clock() / 1000.0 if self._clock is not None else lib.sw_now_ns() / 1e9

    def __enter__(self) -> "CircuitBreaker":
        d = self.enter()
        _calls.set(_calls.get() + ((self, d, self._start()),))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        calls = _calls.get()
        for i in range(len(calls) - 1, -1, -1):  # this breaker's innermost call
            if calls[i][0] is self:
                _, d, t0 = calls[i]
                _calls.set(calls[:i] + calls[i + 1:])
                break
        else:  # pragma: no cover - __exit__ without __enter__
            return
        cancel = isinstance(exc, asyncio.CancelledError)
        error = exc is not None and not cancel and isinstance(exc, self._exceptions)
        self.exit(d, self._start() - t0, error=error, cancel=cancel)

    async def __aenter__(self) -> "CircuitBreaker":
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, fn: F) -> F:
        """Decorate a function or ``async def`` function: each call goes
        through the breaker."""
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                async with self:
                    return await fn(*args, **kwargs)
            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return guarded  # type: ignore[return-value]

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs) through the breaker."""
        with self:
            return fn(*args, **kwargs)

    # ------------------------------------------------------------------ state

    def stats(self) -> BreakerStats:
        """The state and counts now."""
        now = self._clock() if self._clock is not None else lib.sw_now_ms()
        info = ffi.new("sw_breaker_info *")
        self._check(lib.sw_breaker_stats_at(self._b, now, info), "CircuitBreaker.stats")
        probe_in = max(info.next_probe_ms - now, 0) / 1000.0 if info.state == lib.SW_BREAKER_OPEN else 0.0
        return BreakerStats(STATES.get(info.state, "?"), info.total, info.bad, info.ratio, probe_in,
                            info.probes_in_flight, info.opened, info.half_opened, info.closed,
                            info.reopened, info.probes, info.probes_lost, info.blocked)

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half_open"``."""
        return self.stats().state

    def close(self) -> None:
        """Free the breaker (a shared one stays in its segment)."""
        if self._b != ffi.NULL:
            lib.sw_breaker_free(self._b)
            self._b = ffi.NULL
        self._handle = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return "CircuitBreaker(%s%s)" % (self.name + ", " if self.name else "",
                                         self.state if self._b != ffi.NULL else "closed handle")
