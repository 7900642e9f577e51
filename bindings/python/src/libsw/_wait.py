# SPDX-License-Identifier: Apache-2.0
"""The slow path of an entry, shared by limiters and keyed tables, by sync
and async callers.

An entry whose fast path did not pass leaves its decision in the C
thread-local swpy_decision(). :func:`steps` turns it into what to do — sleep
(a WAIT verdict, or a BLOCK retried with block=True), raise BlockedError, or
return the entry time — as a generator that yields the seconds to sleep, so
that :func:`run` (time.sleep) and :func:`run_async` (asyncio.sleep) drive
the same logic.
"""
from __future__ import annotations

import math
from typing import Any, Awaitable, Callable, Generator, List, Optional

from ._errors import BlockedError
from ._libsw import ffi, lib

NOT_PASS: int = lib.SWPY_NOT_PASS
_PASS: int = lib.SW_VERDICT_PASS
_WAIT: int = lib.SW_VERDICT_WAIT

Steps = Generator[float, None, int]


def new_info() -> List[Any]:
    """What steps() reports: [seconds waited, remaining (None: read it after
    a pass), borrowed, full (a keyed table's new key found no place), the
    admitting decision (a copy; None when a retry passed at once, its
    result then being what retry() returns)]."""
    return [0.0, None, False, False, None]


def steps(rc: int, retry: Callable[[], int], end: Callable[[], None], fail: Callable[[int], Exception],
          now: Callable[[], int], resource: Any, block: bool, timeout: Optional[float],
          info: Optional[List[Any]]) -> Steps:
    """Finish an entry whose first try returned rc (SWPY_NOT_PASS or an
    error): yields seconds to sleep, returns the entry time t0. retry()
    enters again; end() ends an admitted entry whose wait was interrupted
    (the exception thrown into the generator then propagates)."""
    waited = 0.0
    while rc < 0:
        if rc != NOT_PASS:
            raise fail(rc)
        d = lib.swpy_decision()
        full = bool(d.full)
        if info is not None:
            info[3] = full
        if d.verdict == _PASS:  # a keyed table's new key let through uncounted (on_full "open")
            if info is not None:
                info[4] = ffi.new("sw_decision *", d[0])
            rc = now()
            break
        if d.verdict == _WAIT:
            s = d.wait_ms / 1000.0
            if info is not None:
                info[1] = d.remaining
                info[2] = bool(d.borrowed)
                info[4] = ffi.new("sw_decision *", d[0])  # (an async sleep lets other entries in)
            try:
                yield s
            except BaseException:  # interrupted or cancelled: end the admitted entry
                end()
                raise
            waited += s
            rc = now()
            break
        ra = d.retry_after_ms
        retry_s = math.inf if ra < 0 else ra / 1000.0
        s = max(retry_s, 0.001)
        if not block or ra < 0 or (timeout is not None and waited + s > timeout):
            raise BlockedError(retry_s, resource, d.remaining, full=full)
        yield s
        waited += s
        rc = retry()
    if info is not None:
        info[0] = waited
    return rc


def run(gen: Steps, sleep: Callable[[float], Any]) -> int:
    """Drive steps() with a blocking sleep; return t0."""
    try:
        s = next(gen)
        while True:
            try:
                sleep(s)
            except BaseException as e:
                gen.throw(e)  # re-raises once the entry is ended
                raise
            s = gen.send(None)
    except StopIteration as stop:
        return stop.value


async def run_async(gen: Steps, sleep: Callable[[float], Awaitable[Any]]) -> int:
    """Drive steps() with an awaitable sleep; return t0."""
    try:
        s = next(gen)
        while True:
            try:
                await sleep(s)
            except BaseException as e:
                gen.throw(e)
                raise
            s = gen.send(None)
    except StopIteration as stop:
        return stop.value
