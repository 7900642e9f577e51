# SPDX-License-Identifier: Apache-2.0
"""Exactness across workers: processes that open one new table and enter
the same new keys at the same moment never admit more than the limit for
any key (a key inserted by two processes at once, a table created by two
at once); and every rate unit means what it says."""
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

import libsw
from libsw.web import Limiter, Request, parse_rate

T0 = 604_800_000 * 18  # ms: a multiple of every period below (windows start at T0)
WORKER = r"""
import json, sys, time
import libsw.web as w
seg, rounds, keys, tries, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
got = []
for r in range(rounds):
    go = start + r * 0.25
    while time.time() < go:   # every process starts the round at once
        pass
    lim = w.Limiter(segment=seg, key="header:x-key")
    rules = lim.rules("round%d" % r, "5/minute")   # a new table each round, opened by every process at once
    seen = {}
    for t in range(tries):
        for k in range(keys):
            out = lim.enter(w.Request("GET", "/", None, {"x-key": "r%d-k%d" % (r, k)}), rules)
            seen[k] = seen.get(k, 0) + out.allowed
            out.release()
    got.append(seen)
    lim.close()
print(json.dumps(got))
"""


def test_new_keys_entered_by_several_processes_at_once_never_admit_more_than_the_limit(tmp_path):
    """4 processes, 12 rounds: each round a new table that they all open at
    the same moment, 40 new keys that they all enter 8 times at once: per
    key, 5 passes in all, never more (and, all trying long enough, never
    fewer)."""
    seg = "lswt-exact-%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs, rounds, keys = 4, 12, 40
    start = time.time() + 3.0  # every process imported libsw by then
    try:
        ps = [subprocess.Popen([sys.executable, str(script), seg, str(rounds), str(keys), "8", str(start)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(procs)]
        outs = [p.communicate(timeout=300) for p in ps]
        assert all(p.returncode == 0 for p in ps), [(p.returncode, e[-2000:]) for p, (_, e) in zip(ps, outs)]
        per = [json.loads(o) for o, _ in outs]
        over = []
        for r in range(rounds):
            for k in range(keys):
                total = sum(per[p][r][str(k)] for p in range(procs))
                if total != 5:
                    over.append((r, k, total))
        assert not over, "keys that admitted other than 5 of 32: %s" % over[:20]
    finally:
        libsw.unlink_segment(seg)


# ------------------------------------------------------------------ units


@pytest.mark.parametrize("text,period_ms", [
    ("1/ms", None), ("1/10ms", 10), ("3/50 ms", 50), ("2 per 0.5 s", 500), ("2 per 0.01 s", 10),
    ("2/s", 1000), ("2/sec", 1000), ("2/second", 1000), ("2/seconds", 1000),
    ("2/m", 60_000), ("2/min", 60_000), ("2/mins", 60_000), ("2/minute", 60_000), ("2 per 2 minutes", 120_000),
    ("2/h", 3_600_000), ("2/hr", 3_600_000), ("2/hour", 3_600_000), ("2/hours", 3_600_000),
    ("2/d", 86_400_000), ("2/day", 86_400_000), ("2 per 7 days", 604_800_000),
])
def test_every_unit_means_its_period(text, period_ms):
    if period_ms is None:
        with pytest.raises(ValueError, match="under 10 ms"):
            parse_rate(text)
        return
    assert parse_rate(text).period_ms == period_ms
    clock = libsw.ManualClock(T0)
    lim = Limiter(segment=None, clock=clock, key="global")
    rules = lim.rules("r", text)
    r = Request("GET", "/", None, {})
    count = parse_rate(text).count
    assert [lim.enter(r, rules).allowed for _ in range(count + 1)] == [True] * count + [False]
    refused = lim.enter(r, rules)
    assert refused.retry_after == pytest.approx(period_ms / 1000.0, rel=0.02, abs=0.002)
    clock.advance(period_ms - period_ms // 10 - 1)   # still inside the period: refused
    assert not lim.enter(r, rules).allowed
    clock.advance(period_ms // 10 + 1)              # the first window left: passes again
    assert lim.enter(r, rules).allowed


@pytest.mark.parametrize("bad", ["2 per 0.0005 s", "2 per 1.5 ms", "2 per 0.5 ms"])
def test_fractional_periods_must_be_whole_milliseconds(bad):
    with pytest.raises(ValueError):
        parse_rate(bad)
