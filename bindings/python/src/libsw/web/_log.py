# SPDX-License-Identifier: Apache-2.0
"""Logging on ``logging.getLogger("libsw")``, once per event kind per
interval: a kind seen again within the interval is counted, and the count
is told with the next line of that kind."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List

log = logging.getLogger("libsw")


class Throttle:
    """At most one line per kind per ``interval`` seconds (``clock``:
    seconds, monotonic)."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(interval, (int, float)) or interval < 0:
            raise ValueError("log_interval=%r must be seconds >= 0" % (interval,))
        self.interval = float(interval)
        self.clock = clock
        self._last: Dict[str, float] = {}
        self._held: Dict[str, int] = {}
        self._lock = threading.Lock()

    def due(self, kind: str) -> bool:
        """Whether a line of kind may be logged now (then it is taken as
        logged); otherwise the event is counted for the next line."""
        now = self.clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._held[kind] = self._held.get(kind, 0) + 1
                return False
            self._last[kind] = now
            return True

    def emit(self, level: int, kind: str, msg: str, *args: Any) -> bool:
        """Log msg % args at level if kind is due; True if logged."""
        if not self.due(kind):
            return False
        held = self._held.pop(kind, 0)
        if held:
            msg += " (and %d more since the last such line)"
            args = args + (held,)
        log.log(level, "libsw: " + msg, *args)
        return True


def counters_grown(prev: Dict[str, int], now: Dict[str, int], fields: List[str]) -> Dict[str, int]:
    """The fields that grew since prev, with by how much; prev takes now's values."""
    out = {f: now[f] - prev.get(f, now[f]) for f in fields if now[f] > prev.get(f, now[f])}
    prev.update({f: now[f] for f in fields})
    return out
