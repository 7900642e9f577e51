#!/usr/bin/env python3
"""Per-call overhead of the libsw decorator (entry + exit) against an
undecorated call and against the `limits` package (fixed and moving window,
in-memory storage).

  bench_decorator.py                      ns per call, best of several runs
  bench_decorator.py --variants           also the hot-path designs compared
  bench_decorator.py --calls N --mode M   run exactly N calls of mode M and
                                          exit (for valgrind --tool=callgrind:
                                          run with N and with 0, subtract)

Modes: plain, libsw, limits-fixed, limits-moving (and, with --variants,
libsw-ffinew, libsw-tlocal, libsw-ptr). Every limiter has a threshold it never reaches,
so every call passes. run.sh prints both measures.

Per-key modes: a call is try_acquire(key=k), the function, release() — the
per-client form (docs/python.md) on a keyed table: plain-key (the same
call undecorated, with the same key generation), key-existing (1024 keys,
all in the table, in turn), key-new (a key never seen at every call; the
table holds them all).
"""
from __future__ import annotations

import argparse
import itertools
import sys
import threading
import time
from typing import Any, Callable, Dict

import libsw
from libsw import ffi, lib

THRESHOLD = 10**9
KEY_THRESHOLD = 10**6  # a keyed table's reject threshold is at most 1,048,575 per key and interval
EXISTING_KEYS = 1024
NEW_KEYS_CAPACITY = 1 << 21  # room for every key of a timed run (warm-up + runs x -n)


def target(x: int = 0) -> int:
    return x


# ------------------------------------------------------------------ modes


def make_plain() -> Callable[..., Any]:
    return target


def make_libsw() -> Callable[..., Any]:
    return libsw.RateLimiter(THRESHOLD)(target)


def _limits_decorator(strategy_name: str) -> Callable[..., Any]:
    from limits import RateLimitItemPerSecond
    from limits.storage import MemoryStorage
    from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

    storage = MemoryStorage()
    cls = FixedWindowRateLimiter if strategy_name == "fixed" else MovingWindowRateLimiter
    strategy = cls(storage)
    item = RateLimitItemPerSecond(THRESHOLD)
    hit = strategy.hit

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        def limited(*args: Any, **kwargs: Any) -> Any:
            if not hit(item, "bench"):
                raise RuntimeError("blocked")
            return fn(*args, **kwargs)

        return limited

    return deco(target)


def make_limits_fixed() -> Callable[..., Any]:
    return _limits_decorator("fixed")


def make_limits_moving() -> Callable[..., Any]:
    return _limits_decorator("moving")


# Hot-path designs that the shipped decorator was chosen against: the plain
# C API (sw_limiter_entry / sw_limiter_exit with a sw_decision * argument and
# the RT measured in Python), with the decision allocated per call
# (ffi.new) or kept per thread in a threading.local.


def _raw_limiter() -> Any:
    lim = libsw.RateLimiter(THRESHOLD)
    return lim, lim._h


def make_libsw_ffinew() -> Callable[..., Any]:
    lim, h = _raw_limiter()
    entry, exit_, new, now = lib.sw_limiter_entry, lib.sw_limiter_exit, ffi.new, time.monotonic_ns

    def limited(*args: Any, **kwargs: Any) -> Any:
        d = new("sw_decision *")
        entry(h, 1, 0, d)
        if d.verdict:
            raise RuntimeError("blocked or wait")
        t0 = now()
        try:
            result = target(*args, **kwargs)
        except BaseException:
            exit_(h, (now() - t0) // 1000000, 1, 1)
            raise
        exit_(h, (now() - t0) // 1000000, 1, 0)
        return result

    limited.keep = lim  # type: ignore[attr-defined]
    return limited


def make_libsw_tlocal() -> Callable[..., Any]:
    lim, h = _raw_limiter()
    entry, exit_, new, now = lib.sw_limiter_entry, lib.sw_limiter_exit, ffi.new, time.monotonic_ns
    tls = threading.local()

    def limited(*args: Any, **kwargs: Any) -> Any:
        try:
            d = tls.d
        except AttributeError:
            d = tls.d = new("sw_decision *")
        entry(h, 1, 0, d)
        if d.verdict:
            raise RuntimeError("blocked or wait")
        t0 = now()
        try:
            result = target(*args, **kwargs)
        except BaseException:
            exit_(h, (now() - t0) // 1000000, 1, 1)
            raise
        exit_(h, (now() - t0) // 1000000, 1, 0)
        return result

    limited.keep = lim  # type: ignore[attr-defined]
    return limited


def make_libsw_ptr() -> Callable[..., Any]:
    """The glue with (pointer, int, int) arguments and a C thread-local
    decision: what the shipped one-integer token calls replaced."""
    lim, h = _raw_limiter()
    enter, exit_ = lib.swpy_enter, lib.swpy_exit

    def limited(*args: Any, **kwargs: Any) -> Any:
        t0 = enter(h, 1, 0)
        if t0 < 0:
            raise RuntimeError("blocked or wait")
        try:
            result = target(*args, **kwargs)
        except BaseException:
            exit_(h, t0, 1, 1)
            raise
        exit_(h, t0, 1, 0)
        return result

    limited.keep = lim  # type: ignore[attr-defined]
    return limited


# ----------------------------------------------------------- per key


def _keys(existing: bool) -> Callable[[], str]:
    """The next key: one of EXISTING_KEYS in turn, or a new one each time
    (the same cost either way: a counter and a format)."""
    mask = EXISTING_KEYS - 1
    if existing:
        return ("10.0.%d.%d" % divmod(i & mask, 256) for i in itertools.count()).__next__
    return ("10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255) for i in itertools.count(1 << 20)).__next__


def make_plain_key() -> Callable[..., Any]:
    nxt = _keys(True)

    def call(x: int = 0) -> int:
        nxt()
        return target(x)

    return call


def _per_key(existing: bool) -> Callable[..., Any]:
    lim = libsw.RateLimiter(KEY_THRESHOLD, capacity=NEW_KEYS_CAPACITY)
    nxt = _keys(existing)
    if existing:  # every key in the table before the count
        for _ in range(EXISTING_KEYS):
            lim.try_acquire(key=nxt()).release()
    try_acquire = lim.try_acquire

    def limited(*args: Any, **kwargs: Any) -> Any:
        p = try_acquire(key=nxt())
        if not p:
            raise RuntimeError("blocked")
        try:
            result = target(*args, **kwargs)
        except BaseException:
            p.release(True)
            raise
        p.release()
        return result

    return limited


def make_key_existing() -> Callable[..., Any]:
    return _per_key(True)


def make_key_new() -> Callable[..., Any]:
    return _per_key(False)


MODES: Dict[str, Callable[[], Callable[..., Any]]] = {
    "plain": make_plain,
    "libsw": make_libsw,
    "limits-fixed": make_limits_fixed,
    "limits-moving": make_limits_moving,
    "libsw-ffinew": make_libsw_ffinew,
    "libsw-tlocal": make_libsw_tlocal,
    "libsw-ptr": make_libsw_ptr,
    "plain-key": make_plain_key,
    "key-existing": make_key_existing,
    "key-new": make_key_new,
}

LABELS = {
    "plain": "undecorated call",
    "libsw": "libsw decorator",
    "limits-fixed": "limits fixed window",
    "limits-moving": "limits moving window",
    "libsw-ffinew": "libsw raw API, ffi.new per call",
    "libsw-tlocal": "libsw raw API, threading.local",
    "libsw-ptr": "libsw glue (ptr,int,int), C TLS",
    "plain-key": "undecorated call + key generation",
    "key-existing": "per key, existing key",
    "key-new": "per key, new key",
}


# ----------------------------------------------------------------- timing


def loop(fn: Callable[..., Any], n: int) -> None:
    for _ in range(n):
        fn(1)


def ns_per_call(fn: Callable[..., Any], n: int, runs: int) -> float:
    loop(fn, min(n, 10000))  # warm up
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter_ns()
        loop(fn, n)
        best = min(best, (time.perf_counter_ns() - t) / n)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, help="run exactly this many calls of --mode and exit")
    ap.add_argument("--mode", choices=sorted(MODES), default="libsw")
    ap.add_argument("-n", type=int, default=200000, help="calls per timed run (default 200000)")
    ap.add_argument("--moving-n", type=int, default=20000,
                    help="calls per run for limits' moving window, whose in-memory cost grows "
                         "with the hits inside the window (default 20000)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs; the best is kept (default 7)")
    ap.add_argument("--variants", action="store_true", help="also time the alternative hot paths")
    ap.add_argument("--modes", help="comma-separated modes to time (default: all main ones)")
    a = ap.parse_args()

    if a.calls is not None:  # callgrind mode: setup, then exactly N calls
        fn = MODES[a.mode]()
        loop(fn, a.calls)
        return 0

    modes = ["plain", "libsw", "limits-fixed", "limits-moving", "plain-key", "key-existing", "key-new"]
    if a.variants:
        modes += ["libsw-ffinew", "libsw-tlocal", "libsw-ptr"]
    if a.modes:
        modes = a.modes.split(",")
    print("python %s, libsw %s, %d runs (best kept)" % (sys.version.split()[0], libsw.__version__, a.runs))
    res = {}
    for m in modes:
        n = a.moving_n if m == "limits-moving" else a.n
        res[m] = ns_per_call(MODES[m](), n, a.runs)
    print("%-34s %10s %12s" % ("mode", "ns/call", "overhead ns"))
    for m in modes:
        base = res.get("plain-key" if m.startswith("key-") else "plain", 0.0)
        print("%-34s %10.1f %12.1f" % (LABELS[m], res[m], res[m] - base))
    base = res.get("plain", 0.0)
    if "libsw" in res and "limits-fixed" in res and "plain" in res:
        ov = res["libsw"] - base
        ratio = (res["limits-fixed"] - base) / ov if ov > 0 else float("inf")
        print("libsw overhead %.0f ns (target < 600); limits fixed window / libsw overhead = %.1fx "
              "(target >= 5x)" % (ov, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
