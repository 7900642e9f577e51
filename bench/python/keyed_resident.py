# SPDX-License-Identifier: Apache-2.0
"""Resident memory of a keyed table of capacity 1,000,000 (default 2 windows,
16 key bytes) as distinct keys arrive: the Rss of its mapping, from
/proc/self/smaps (docs/python.md, "Memory per key").
   .venv/bin/python bench/python/keyed_resident.py"""
import os, libsw
name = "rss-meas"
libsw.unlink_segment(name)
l = libsw.RateLimiter(1e9, segment=name, capacity=1_000_000, names=0)
def rss():
    tot = 0; on = False
    for line in open("/proc/self/smaps"):
        if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
            on = name in line
        elif on and line.startswith("Rss:"):
            tot += int(line.split()[1])
    return tot / 1024
n = 0
for target in (1000, 10000, 100000, 1000000):
    while n < target:
        l.try_acquire(key=n.to_bytes(4, "big")); n += 1
    print(target, "keys: %.1f MiB resident" % rss())
libsw.unlink_segment(name)
