# SPDX-License-Identifier: Apache-2.0
"""Rates as users write them: "5/second", "100 per minute", "10 per 2 seconds",
several separated by ";" or ",".

A rate of N per period P becomes a keyed table whose rule admits N per
interval, the interval being P long. The C check is exact (passes in the
interval + 1 > N) only for an interval of 1000 ms of its clock, so a period
other than a second runs on a scaled clock: 1000 of its milliseconds are P
(:func:`Rate.clock`), and the interval is cut in ``windows`` windows, a
divisor of 1000 (docs/web.md, "Which window a rate gets").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

UNITS = {
    "ms": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hrs": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
# The windows an interval may have: divisors of the 1000 ms of the rule's
# clock that a keyed table takes (1..64).
WINDOWS = (1, 2, 4, 5, 8, 10, 20, 25, 40, 50)
DEFAULT_WINDOWS = 10
MAX_COUNT = 4_294_967_294  # a keyed table's window counts 32 bits (and one more with a 1 s period)
_RATE = re.compile(r"^\s*([^\s/]+)\s*(?:/|\s+per\s+)\s*(?:(\d*\.?\d+)\s*)?([a-z]+)\s*$", re.I)


@dataclass(frozen=True)
class Rate:
    """``count`` requests per ``period_ms``, checked over ``windows``
    windows of ``period_ms / windows`` each."""

    count: int
    period_ms: int
    windows: int = DEFAULT_WINDOWS
    text: str = ""

    @property
    def period(self) -> float:
        """The period in seconds."""
        return self.period_ms / 1000.0

    @property
    def scale(self) -> float:
        """Real seconds per second of the rule's clock."""
        return self.period_ms / 1000.0

    @property
    def window_ms(self) -> float:
        return self.period_ms / self.windows

    def policy(self) -> str:
        """This rate in a RateLimit-Policy field: ``N;w=SECONDS``."""
        w = self.period_ms / 1000.0
        return "%d;w=%s" % (self.count, ("%d" % w) if w == int(w) else ("%g" % w))

    def __str__(self) -> str:
        return self.text or "%d per %g seconds" % (self.count, self.period)


def _number(s: str, what: str, text: str) -> int:
    try:
        v = float(s)
    except ValueError:
        raise ValueError("rate %r: %s %r is not a number" % (text, what, s)) from None
    if v != v or v <= 0 or v != int(v):
        raise ValueError("rate %r: %s %r must be a whole number >= 1" % (text, what, s))
    return int(v)


def parse_rate(text: str, windows: Optional[int] = None) -> Rate:
    """One rate: ``"5/second"``, ``"100 per minute"``, ``"10 per 2 seconds"``,
    ``"10/2s"``. ValueError naming the text when it is not one."""
    if not isinstance(text, str):
        raise TypeError("a rate is a str like '5/second', not %s" % type(text).__name__)
    m = _RATE.match(text)
    if not m:
        raise ValueError("rate %r is not 'COUNT/UNIT' or 'COUNT per [N] UNIT' (e.g. '5/second', "
                         "'10 per 2 seconds')" % (text,))
    count_s, mult_s, unit = m.groups()
    unit = unit.lower()
    if unit not in UNITS:
        raise ValueError("rate %r: unit %r is not one of second, minute, hour, day (or s, m, h, d, ms)"
                         % (text, unit))
    count = _number(count_s, "count", text)
    if count > MAX_COUNT:
        raise ValueError("rate %r: count %d is over %d, the most a key's window counts" % (text, count, MAX_COUNT))
    period = float(mult_s or "1") * UNITS[unit]  # ("0.5 s": a period of whole milliseconds)
    period_ms = int(round(period))
    if period_ms <= 0 or abs(period - period_ms) > 1e-6 * max(1.0, period):
        raise ValueError("rate %r: the period %s %s is not a whole number of milliseconds" % (text, mult_s, unit))
    if period_ms < 10:
        raise ValueError("rate %r: a period under 10 ms cannot be cut into windows" % (text,))
    w = DEFAULT_WINDOWS if windows is None else windows
    if w not in WINDOWS:
        raise ValueError("windows=%r is not one of %s (divisors of 1000 up to 64)" % (windows, WINDOWS))
    return Rate(count, period_ms, w, text.strip())


def parse_rates(spec: object, windows: Optional[int] = None) -> Tuple[Rate, ...]:
    """Rates separated by ";" or "," (or a list of rate strings), sorted by
    period, shortest first (the order in which they are checked)."""
    if isinstance(spec, Rate):
        return (spec,)
    if isinstance(spec, str):
        parts: List[str] = [p for p in re.split(r"[;,]", spec) if p.strip()]
        if not parts:
            raise ValueError("rates %r: no rate in it (e.g. '5/second;100/minute')" % (spec,))
    elif isinstance(spec, (list, tuple)):
        parts = list(spec)
        if not parts:
            raise ValueError("rates []: no rate in it")
    else:
        raise TypeError("rates must be a str like '5/second;100/minute' or a list of them, not %s"
                        % type(spec).__name__)
    out: List[Rate] = []
    for p in parts:
        out.extend(parse_rates(p, windows) if isinstance(p, (list, tuple)) else
                   (p,) if isinstance(p, Rate) else (parse_rate(p, windows),))
    seen = set()
    for r in out:
        if (r.count, r.period_ms) in seen:
            raise ValueError("rates %r: %s is given twice" % (spec, r))
        seen.add((r.count, r.period_ms))
    return tuple(sorted(out, key=lambda r: (r.period_ms, r.count)))
