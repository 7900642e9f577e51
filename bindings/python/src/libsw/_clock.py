"""Deterministic time for tests and simulations."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List


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
