#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of each form of a libsw limiter (decorator, `with`,
try_acquire + release, async decorator, `async with`) against an
undecorated call, and of the decorator against the `limits` package (fixed
and moving window, in-memory storage).

  bench_decorator.py                      ns per call, best of several runs
  bench_decorator.py --variants           also the hot-path designs compared
  bench_decorator.py --calls N --mode M   run exactly N calls of mode M and
                                          exit (for valgrind --tool=callgrind:
                                          run with N and with 0, subtract)

Modes: plain, libsw (the decorator), with (`with lim:` around the call),
try (p = lim.try_acquire(), the call, p.release(); release(True) when it
raises), async-plain (an undecorated coroutine, awaited), async-libsw (the
decorator on a coroutine), async-with (`async with lim:` around the await),
limits-fixed, limits-moving (and, with --variants, the designs compared:
libsw-ffinew, libsw-tlocal, libsw-ptr for the decorator; with-contextvars,
with-pymethods, try-python, async-with-coroutines for the other forms). Async modes await the coroutine in a loop inside
one asyncio.run. Every limiter has a threshold it never reaches, so every
call passes. run.sh prints both measures, and a summary: each form's ns and
instructions per call and its ratio to the decorator's
(--summary NS_FILE INSTR_FILE).

Per-key modes: a call is try_acquire(key=k), the function, release() — the
per-client form (docs/python.md) on a keyed table: plain-key (the same
call undecorated, with the same key generation), key-existing (1024 keys,
all in a table of 20,000 keys, libsw.web's default, in turn), key-new (a
key never seen at every call; the table, of 2^21 keys, holds them all:
each new key lands on memory no cache holds).
"""
from __future__ import annotations

import argparse
import asyncio
import contextvars
import inspect
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
EXISTING_KEYS_CAPACITY = 20_000  # the existing keys' table: libsw.web's default capacity


def target(x: int = 0) -> int:
    return x


# ------------------------------------------------------------------ modes


def _with_form(cm: Any) -> Callable[..., Any]:
    """The call inside `with cm:`."""

    def limited(*args: Any, **kwargs: Any) -> Any:
        with cm:
            return target(*args, **kwargs)

    limited.keep = cm  # type: ignore[attr-defined]
    return limited


def _permit_form(lim: Any) -> Callable[..., Any]:
    """p = lim.try_acquire(), the call, p.release() (release(True) when it raises)."""

    def limited(*args: Any, **kwargs: Any) -> Any:
        p = lim.try_acquire()
        if not p:
            raise RuntimeError("blocked")
        try:
            result = target(*args, **kwargs)
        except BaseException:
            p.release(True)
            raise
        p.release()
        return result

    limited.keep = lim  # type: ignore[attr-defined]
    return limited


def make_with() -> Callable[..., Any]:
    return _with_form(libsw.RateLimiter(THRESHOLD))


def make_try() -> Callable[..., Any]:
    return _permit_form(libsw.RateLimiter(THRESHOLD))


async def target_async(x: int = 0) -> int:
    return x


def _async_with_form(cm: Any) -> Callable[..., Any]:
    """The awaited call inside `async with cm:`."""

    async def limited(*args: Any, **kwargs: Any) -> Any:
        async with cm:
            return await target_async(*args, **kwargs)

    limited.keep = cm  # type: ignore[attr-defined]
    return limited


def make_async_with() -> Callable[..., Any]:
    return _async_with_form(libsw.RateLimiter(THRESHOLD))


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

        limited.storage = storage  # type: ignore[attr-defined]  # (the strategy holds it weakly)
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


# Designs of the other forms compared (--variants): where `with` keeps its
# entry, and whether the forms' methods are Python functions or C methods.


def _with_variant(kind: str) -> Callable[..., Any]:
    """`with` over the C calls: "contextvars" keeps (handle, t0) in a
    ContextVar stack (the design before the records in C); "pymethods" has
    Python __enter__ / __exit__ over the C records matched by context."""
    lim = libsw.RateLimiter(THRESHOLD)
    h, site = lim._h, lim._site_addr
    enter, exit_ = lib.swpy_enter, lib.swpy_exit
    with_enter, with_exit, with_exit_err = lib.swpy_with_enter, lib.swpy_with_exit, lib.swpy_with_exit_err
    active: "contextvars.ContextVar[Any]" = contextvars.ContextVar("bench_active", default=None)
    active.set(None)  # (the thread's context)

    class ContextVars:
        def __enter__(self) -> "ContextVars":
            t0 = enter(h, 1, 0)
            if t0 < 0:
                raise RuntimeError("blocked or wait")
            active.set((t0, active.get()))
            return self

        def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
            t0, prev = active.get()
            active.set(prev)
            exit_(h, t0, 1, et is not None)

    class PyMethods:
        def __enter__(self) -> "PyMethods":
            if with_enter(site):
                raise RuntimeError("blocked or wait")
            return self

        def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
            rc = with_exit(site) if et is None else with_exit_err(site)
            if rc:
                raise RuntimeError("no entry")

    limited = _with_form(ContextVars() if kind == "contextvars" else PyMethods())
    limited.lim = lim  # type: ignore[attr-defined]
    return limited


def make_with_contextvars() -> Callable[..., Any]:
    return _with_variant("contextvars")


def make_with_pymethods() -> Callable[..., Any]:
    return _with_variant("pymethods")


def make_try_python() -> Callable[..., Any]:
    """try_acquire + release as Python methods over the same C calls."""
    lim = libsw.RateLimiter(THRESHOLD)
    site = lim._site_addr
    acquire, release_ok, release_err = lib.swpy_acquire_site, lib.swpy_release_ok, lib.swpy_release_err

    class PyPermit:
        __slots__ = ("_lim", "n", "_tok", "_rem")

        def release(self, error: bool = False) -> None:
            tok = self._tok
            if tok:
                rem = release_err(tok) if error else release_ok(tok)
                if rem < 0:
                    raise RuntimeError("release")
                self._rem = rem
                self._tok = 0

    class PyLimiter:
        def try_acquire(self, n: int = 1, *, key: Any = None) -> PyPermit:
            tok = acquire(site)
            if tok <= 0:
                raise RuntimeError("blocked or wait")
            p = PyPermit()
            p._lim = self
            p.n = 1
            p._tok = tok
            return p

    limited = _permit_form(PyLimiter())
    limited.lim = lim  # type: ignore[attr-defined]
    return limited


def make_async_with_coroutines() -> Callable[..., Any]:
    """`async with` whose __aenter__ / __aexit__ are coroutines over the C
    records (the C methods return a done awaitable instead)."""
    lim = libsw.RateLimiter(THRESHOLD)
    site = lim._site_addr
    with_enter, with_exit, with_exit_err = lib.swpy_with_enter, lib.swpy_with_exit, lib.swpy_with_exit_err

    class Coroutines:
        async def __aenter__(self) -> "Coroutines":
            if with_enter(site):
                raise RuntimeError("blocked or wait")
            return self

        async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
            rc = with_exit(site) if et is None else with_exit_err(site)
            if rc:
                raise RuntimeError("no entry")

    limited = _async_with_form(Coroutines())
    limited.lim = lim  # type: ignore[attr-defined]
    return limited


# ----------------------------------------------------------- per key


def _keys(existing: bool, lim: Any = None) -> Callable[[], Any]:
    """The next key: one of EXISTING_KEYS in turn, or a new one each time
    (the same cost either way: a counter and a format); with lim, the
    permit of lim.try_acquire(key=) for it, made in the same step."""
    mask = EXISTING_KEYS - 1
    if existing:
        def key(i: int) -> str:
            return "10.0.%d.%d" % divmod(i & mask, 256)
    else:
        def key(i: int) -> str:
            return "10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255)
    count = itertools.count(0 if existing else 1 << 20)
    if lim is None:
        return (key(i) for i in count).__next__
    acquire = lim.try_acquire
    return (acquire(key=key(i)) for i in count).__next__


def make_plain_key() -> Callable[..., Any]:
    nxt = _keys(True)

    def call(x: int = 0) -> int:
        nxt()
        return target(x)

    return call


class _EachKey:
    """A limiter whose try_acquire() enters the next key."""

    def __init__(self, existing: bool) -> None:
        self.lim = libsw.RateLimiter(KEY_THRESHOLD, capacity=EXISTING_KEYS_CAPACITY if existing else NEW_KEYS_CAPACITY)
        self.try_acquire = _keys(existing, self.lim)
        if existing:  # every key in the table before the count
            for _ in range(EXISTING_KEYS):
                self.try_acquire().release()


def make_key_existing() -> Callable[..., Any]:
    return _permit_form(_EachKey(True))


def make_key_new() -> Callable[..., Any]:
    return _permit_form(_EachKey(False))


MODES: Dict[str, Callable[[], Callable[..., Any]]] = {
    "plain": lambda: target,
    "libsw": lambda: libsw.RateLimiter(THRESHOLD)(target),
    "with": make_with,
    "try": make_try,
    "async-plain": lambda: target_async,
    "async-libsw": lambda: libsw.RateLimiter(THRESHOLD)(target_async),
    "async-with": make_async_with,
    "limits-fixed": make_limits_fixed,
    "limits-moving": make_limits_moving,
    "libsw-ffinew": make_libsw_ffinew,
    "libsw-tlocal": make_libsw_tlocal,
    "libsw-ptr": make_libsw_ptr,
    "with-contextvars": make_with_contextvars,
    "with-pymethods": make_with_pymethods,
    "try-python": make_try_python,
    "async-with-coroutines": make_async_with_coroutines,
    "plain-key": make_plain_key,
    "key-existing": make_key_existing,
    "key-new": make_key_new,
}

LABELS = {
    "plain": "undecorated call",
    "libsw": "libsw decorator",
    "with": "with lim:",
    "try": "try_acquire() + release()",
    "async-plain": "undecorated coroutine",
    "async-libsw": "async decorator",
    "async-with": "async with lim:",
    "limits-fixed": "limits fixed window",
    "limits-moving": "limits moving window",
    "libsw-ffinew": "libsw raw API, ffi.new per call",
    "libsw-tlocal": "libsw raw API, threading.local",
    "libsw-ptr": "libsw glue (ptr,int,int), C TLS",
    "with-contextvars": "with: ContextVar stack",
    "with-pymethods": "with: Python methods, C records",
    "try-python": "try_acquire: Python methods",
    "async-with-coroutines": "async with: coroutine methods",
    "plain-key": "undecorated call + key generation",
    "key-existing": "per key, existing key",
    "key-new": "per key, new key",
}


# ----------------------------------------------------------------- timing


# The forms of the summary, against the decorator (libsw).
FORMS = ["plain", "libsw", "with", "try", "async-libsw", "async-with"]


def _sync_loop(fn: Callable[..., Any], n: int) -> None:
    for _ in range(n):
        fn(1)


async def _async_loop(fn: Callable[..., Any], n: int) -> None:
    for _ in range(n):
        await fn(1)


def loop(fn: Callable[..., Any], n: int) -> None:
    if inspect.iscoroutinefunction(fn):
        asyncio.run(_async_loop(fn, n))
    else:
        _sync_loop(fn, n)


def _elapsed_ns(fn: Callable[..., Any], n: int) -> int:
    """The time of n calls of fn (awaited inside one asyncio.run for a
    coroutine function)."""
    if inspect.iscoroutinefunction(fn):
        async def timed() -> int:
            t = time.perf_counter_ns()
            await _async_loop(fn, n)
            return time.perf_counter_ns() - t

        return asyncio.run(timed())
    t = time.perf_counter_ns()
    _sync_loop(fn, n)
    return time.perf_counter_ns() - t


def ns_per_call(fns: Dict[str, Callable[..., Any]], ns: Dict[str, int], runs: int) -> Dict[str, float]:
    """The best ns per call of each mode (fns: mode -> function, ns: mode ->
    calls per run). The runs go round the modes, so that a busy spell of a
    shared machine spoils one run of each mode, never all runs of one."""
    for m, fn in fns.items():
        _elapsed_ns(fn, min(ns[m], 10000))  # warm up
    best = {m: float("inf") for m in fns}
    for _ in range(runs):
        for m, fn in fns.items():
            best[m] = min(best[m], _elapsed_ns(fn, ns[m]) / ns[m])
    return best


def baseline(mode: str) -> str:
    """The undecorated mode a mode's overhead is counted over."""
    return "plain-key" if mode.startswith("key-") else "async-plain" if mode.startswith("async-") else "plain"


def _read_pairs(path: str) -> Dict[str, float]:
    with open(path, encoding="utf-8") as f:
        return {m: float(v) for m, v in (line.split() for line in f if line.strip())}


def summary(ns_path: str, instr_path: str) -> None:
    """One line per form: ns and instructions per call, and the ratio of
    each to the decorator's, and the cost over the same call undecorated
    (a coroutine's for the async forms)."""
    ns, ins = _read_pairs(ns_path), _read_pairs(instr_path)
    print("%-28s %8s %10s %8s %10s %11s %11s" % ("form", "ns/call", "instr/call", "ns/deco", "instr/deco",
                                                "ns over", "instr over"))
    for m in FORMS:
        if m not in ns or m not in ins:
            continue
        print("%-28s %8.0f %10.0f %7.2fx %9.2fx %11.0f %11.0f" % (
            LABELS[m], ns[m], ins[m], ns[m] / ns["libsw"], ins[m] / ins["libsw"],
            ns[m] - ns[baseline(m)] if baseline(m) in ns else ns[m] - ns["plain"],
            ins[m] - ins[baseline(m)] if baseline(m) in ins else ins[m] - ins["plain"]))
    goals(ns, ins)


def goals(ns: Dict[str, float], ins: Dict[str, float]) -> None:
    """The goals of issue 16, one line each: the decorator's cost over an
    undecorated call (<= 250 ns), and every other form's cost against the
    decorator's (<= 1.5x): the ratio of the totals, and for the async forms
    also against the async decorator (the same coroutine call around it)
    and of the costs over the undecorated call or coroutine."""
    print("# goals (issue 16): ns from the timed runs, instructions from callgrind")
    if "libsw" in ns and "plain" in ns and "libsw" in ins and "plain" in ins:
        print("goal=decorator_over_call ns=%.0f instructions=%.0f target_ns=250"
              % (ns["libsw"] - ns["plain"], ins["libsw"] - ins["plain"]))
    for m in ("with", "try", "async-libsw", "async-with"):
        if not all(k in d for d in (ns, ins) for k in (m, "libsw", baseline(m), "plain")):
            continue
        line = "goal=%s_vs_decorator ns=%.0f instructions=%.0f ratio_ns=%.2f ratio_instructions=%.2f" % (
            m.replace("-", "_"), ns[m], ins[m], ns[m] / ns["libsw"], ins[m] / ins["libsw"])
        line += " over_ratio_ns=%.2f over_ratio_instructions=%.2f" % (
            (ns[m] - ns[baseline(m)]) / (ns["libsw"] - ns["plain"]),
            (ins[m] - ins[baseline(m)]) / (ins["libsw"] - ins["plain"]))
        if m == "async-with" and "async-libsw" in ns and "async-libsw" in ins:
            line += " ratio_async_decorator_ns=%.2f ratio_async_decorator_instructions=%.2f" % (
                ns[m] / ns["async-libsw"], ins[m] / ins["async-libsw"])
        print(line + " target_ratio=1.5")


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
    ap.add_argument("--ns-out", help="also write 'mode ns' lines to this file")
    ap.add_argument("--summary", nargs=2, metavar=("NS_FILE", "INSTR_FILE"),
                    help="print the forms' summary from 'mode value' files and exit")
    a = ap.parse_args()

    if a.summary:
        summary(*a.summary)
        return 0

    if a.calls is not None:  # callgrind mode: setup, then exactly N calls
        fn = MODES[a.mode]()
        loop(fn, a.calls)
        return 0

    modes = ["plain", "libsw", "with", "try", "async-plain", "async-libsw", "async-with",
             "limits-fixed", "limits-moving", "plain-key", "key-existing", "key-new"]
    if a.variants:
        modes += ["libsw-ffinew", "libsw-tlocal", "libsw-ptr", "with-contextvars", "with-pymethods",
                  "try-python", "async-with-coroutines"]
    if a.modes:
        modes = a.modes.split(",")
    print("python %s, libsw %s, %d runs (best kept)" % (sys.version.split()[0], libsw.__version__, a.runs))
    # limits' moving window runs alone: its cost grows with the hits still in
    # its window, which the runs of the other modes would leave there longer
    res: Dict[str, float] = {}
    for group in ([m for m in modes if m != "limits-moving"], [m for m in modes if m == "limits-moving"]):
        if group:
            res.update(ns_per_call({m: MODES[m]() for m in group},
                                   {m: a.moving_n if m == "limits-moving" else a.n for m in group}, a.runs))
    res = {m: res[m] for m in modes}
    print("%-34s %10s %12s" % ("mode", "ns/call", "overhead ns"))
    for m in modes:
        base = res.get(baseline(m), 0.0)
        print("%-34s %10.1f %12.1f" % (LABELS[m], res[m], res[m] - base))
    if a.ns_out:
        with open(a.ns_out, "w", encoding="utf-8") as f:
            f.writelines("%s %.1f\n" % (m, v) for m, v in res.items())
    base = res.get("plain", 0.0)
    if "libsw" in res and "limits-fixed" in res and "plain" in res:
        ov = res["libsw"] - base
        ratio = (res["limits-fixed"] - base) / ov if ov > 0 else float("inf")
        print("libsw overhead %.0f ns; limits fixed window / libsw overhead = %.1fx" % (ov, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
