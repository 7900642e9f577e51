# SPDX-License-Identifier: Apache-2.0
"""Time: libsw's process-wide clocks, and a clock for deterministic runs.

libsw reads two clocks (docs/api.md, "Clock"): the window clock places
requests in windows (now_ms(); CLOCK_MONOTONIC_COARSE by default: a few ns
a read, one kernel tick of resolution, a few ms behind CLOCK_MONOTONIC), the
duration clock measures response times and pacing (now_ns();
CLOCK_MONOTONIC).
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

from ._errors import check
from ._libsw import lib

_SOURCES = {
    "default": lib.SW_CLOCK_DEFAULT,
    "monotonic": lib.SW_CLOCK_MONOTONIC,
    "coarse": lib.SW_CLOCK_MONOTONIC_COARSE,
}


def now_ms() -> int:
    """The window clock, in milliseconds (by default CLOCK_MONOTONIC_COARSE:
    it moves by whole kernel ticks, clock_resolution() apart)."""
    return lib.sw_now_ms()


def now_ns() -> int:
    """The duration clock, in nanoseconds (by default CLOCK_MONOTONIC): what
    response times and pacing waits are measured with."""
    return lib.sw_now_ns()


def clock_resolution() -> float:
    """The resolution of now_ms(), in seconds: the kernel tick of the coarse
    clock (0.004 with HZ=250), 0.001 for the precise clock."""
    return check(lib.sw_clock_resolution_ns(), "clock_resolution") / 1e9


def use_clock(source: str = "default") -> None:
    """Choose libsw's process-wide clocks: ``"default"`` (windows on
    CLOCK_MONOTONIC_COARSE, durations on CLOCK_MONOTONIC), ``"monotonic"``
    (both CLOCK_MONOTONIC) or ``"coarse"`` (both CLOCK_MONOTONIC_COARSE).
    Processes sharing a segment should use the same."""
    if source not in _SOURCES:
        raise ValueError("source=%r is not one of %s" % (source, ", ".join(sorted(_SOURCES))))
    check(lib.sw_clock_use(_SOURCES[source]), "use_clock")


def use_coarse_clock(coarse: bool = True) -> None:
    """Put both clocks on CLOCK_MONOTONIC_COARSE (durations too: response
    times and pacing then move by ticks) or, with False, both on
    CLOCK_MONOTONIC. use_clock("default") restores the default: windows
    coarse, durations precise."""
    use_clock("coarse" if coarse else "monotonic")


class ManualClock:
    """A clock that moves only when told to: pass it as ``clock=`` to a
    :class:`~libsw.RateLimiter`. Calling it returns the time in milliseconds.

    Its :meth:`sleep` and :meth:`async_sleep` advance the time instead of
    waiting, and a limiter given this clock uses them for every wait (pacing
    waits, retries with ``block=True``), so a simulation runs instantly.
    ``sleeps`` records every sleep asked for, in seconds."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        if isinstance(start_ms, bool) or not isinstance(start_ms, int) or start_ms < 0:
            raise ValueError("start_ms must be an int >= 0, not %r" % (start_ms,))
        self._t = start_ms
        self._lock = threading.Lock()
        self.sleeps: List[float] = []

    def __call__(self) -> int:
        return self._t

    def now(self) -> int:
        return self._t

    def advance(self, ms: int) -> int:
        """Move the time forward by ms (an int >= 0); return the new time."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise ValueError("advance() takes an int >= 0 of milliseconds, not %r" % (ms,))
        with self._lock:
            self._t += ms
            return self._t

    def set(self, ms: int) -> None:
        """Set the time (it may go backwards: libsw handles a clock behind its
        windows by counting into a detached window, see docs/api.md)."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise ValueError("set() takes an int >= 0 of milliseconds, not %r" % (ms,))
        with self._lock:
            self._t = ms

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._t += int(round(seconds * 1000))

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)
        await asyncio.sleep(0)

    def __getstate__(self) -> Dict[str, Any]:
        return {"t": self._t, "sleeps": list(self.sleeps)}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self._t = state["t"]
        self.sleeps = state["sleeps"]
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "ManualClock(%d)" % self._t
