# SPDX-License-Identifier: Apache-2.0
"""A million distinct keys cost the interpreter nothing per key: the keys'
state is in the keyed table (memory outside Python's allocator, touched as
keys arrive), and no Python object is kept per key."""
import gc
import os
import tracemalloc

import libsw
from conftest import T0

PAGE = os.sysconf("SC_PAGE_SIZE")
KEYS = 1_000_000


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def test_a_million_keys_grow_memory_by_the_table_only():
    lim = libsw.RateLimiter(5, capacity=KEYS, clock=libsw.ManualClock(T0))
    try_acquire = lim.try_acquire
    for i in range(1000):  # warm up: code paths, the allocator's pools
        try_acquire(key=i.to_bytes(4, "big"))
    gc.collect()
    tracemalloc.start()
    try:
        rss0, traced0 = rss(), tracemalloc.get_traced_memory()[0]
        for i in range(1000, KEYS):  # binary IPv4 addresses, each new
            try_acquire(key=i.to_bytes(4, "big"))
        gc.collect()
        rss1, traced1 = rss(), tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    s = lim.keyed_stats()
    assert s.keys == KEYS and s.inserted == KEYS and s.evicted == 0
    assert traced1 - traced0 < 64 << 10  # Python objects: nothing per key
    assert rss1 - rss0 < s.bytes + (8 << 20)  # the table's pages, and a small constant
    assert lim.key_stats((KEYS - 1).to_bytes(4, "big")).pass_ == 1
