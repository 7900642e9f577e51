# SPDX-License-Identifier: Apache-2.0
"""Per-key limits on a keyed table through the binding: exact limits per key,
idle keys reclaimed, a full table under each on_full policy, binary keys,
the readers (key_stats, keys, top_keys, keyed_stats), the other rules and
forms (pacing, concurrency, dry run, async, decorator), bad input. Time is
a ManualClock throughout."""
import asyncio
import ipaddress
import math
import os
import pickle
import socket

import pytest

import libsw
from conftest import T0


def keyed(threshold, **kw):
    lim = libsw.RateLimiter(threshold, **kw)
    assert lim.keyed
    return lim


def test_exact_limit_per_key(clock):
    lim = keyed(3, capacity=1000, clock=clock)
    keys = ["client-%d" % i for i in range(200)]
    for _ in range(2):  # two intervals, each exact
        for k in keys:
            got = [lim.try_acquire(key=k) for _ in range(5)]
            assert [bool(p) for p in got] == [True, True, True, False, False]
            assert [p.remaining for p in got[:3]] == [2, 1, 0]
            assert got[3].retry_after == 1.0 and got[3].limiter.key == k
            for p in got[:3]:
                p.release()
        assert [lim.key_stats(k).pass_ for k in keys] == [3] * len(keys)
        clock.advance(1000)
    s = lim.keyed_stats()
    assert (s.keys, s.inserted, s.pass_, s.block, s.success) == (200, 200, 1200, 800, 1200)


def test_acquire_forms_share_the_key(clock):
    lim = keyed(4, clock=clock)
    lim.acquire(key="k").release()
    lim.for_key("k").acquire(2).release()
    with lim.for_key("k"):
        pass
    with pytest.raises(libsw.BlockedError) as ei:
        lim.acquire(key="k")
    assert ei.value.resource == "k" and ei.value.retry_after == 1.0 and not ei.value.full
    assert lim.try_acquire() and lim.stats().pass_qps == 1  # the limiter itself is apart


def test_views_hold_nothing_per_key(clock):
    lim = keyed(1, clock=clock)
    a, b = lim.for_key("a"), lim.for_key("a")
    assert a == b and a is not b and hash(a) == hash(b) and a != lim.for_key(b"b")
    assert a.key == "a" and a.resource == "a" and a.name is None and "KeyLimiter" in repr(a)
    assert lim.try_acquire(key="a").limiter == a
    with pytest.raises(TypeError):
        a.for_key("x")


def test_binary_and_nul_keys(clock):
    lim = keyed(1, clock=clock)
    v4 = socket.inet_pton(socket.AF_INET, "10.0.0.0")  # b"\n\0\0\0"
    v6 = ipaddress.ip_address("2001:db8::1").packed
    for k in (v4, v6, b"\x00\x00\x00\x01", b"\x00\x00\x00\x02", "a\0b", "a\0c"):
        assert lim.try_acquire(key=k) and not lim.try_acquire(key=k), k
    assert lim.keyed_stats().keys == 6
    addresses = {str(ipaddress.ip_address(k)) for k in lim.keys(raw=True) if len(k) in (4, 16)}
    assert addresses == {"10.0.0.0", "2001:db8::1", "0.0.0.1", "0.0.0.2"}
    assert {"a\0b", "a\0c"} <= set(lim.keys())
    # a str key is its UTF-8 bytes: the same key as those bytes
    assert not lim.try_acquire(key="a\0b".encode()) and lim.key_stats(b"a\0b").pass_ == 1
    assert lim.try_acquire(key="é") and not lim.try_acquire(key="é".encode())
    # bytes that are not UTF-8 come back as surrogateescape str, and enter as the same key
    assert lim.try_acquire(key=b"\xff\xfe")
    back = [k for k in lim.keys() if k.startswith("\udcff")]
    assert back == ["\udcff\udcfe"] and not lim.try_acquire(key=back[0])


def test_long_keys_are_digests(clock):
    lim = keyed(1, clock=clock, key_bytes=16)
    long_key = "user-" + "x" * 40
    assert lim.try_acquire(key=long_key) and not lim.try_acquire(key=long_key)
    assert lim.try_acquire(key="y" * 65535)  # the longest key
    listed = list(lim.keys())
    assert len(listed) == 2 and all(isinstance(k, libsw.KeyDigest) and len(k) == 16 for k in listed)
    assert lim.key_stats(long_key).pass_ == 1 and "KeyDigest" in repr(listed[0])
    with pytest.raises(TypeError, match="digest"):
        lim.try_acquire(key=listed[0])
    wide = keyed(1, clock=clock, key_bytes=64)  # kept whole up to 64 bytes
    wide.try_acquire(key=long_key)
    assert list(wide.keys()) == [long_key] and wide.keyed_stats().key_bytes == 64


def test_idle_keys_reclaimed_in_waves(clock):
    """10 x capacity distinct keys, in waves each idle longer than the
    interval before the next: nothing refused or evicted, every key exact."""
    capacity, threshold = 1000, 2
    lim = keyed(threshold, capacity=capacity, on_full="closed", clock=clock)
    for wave in range(10):
        for i in range(capacity):
            k = b"w%d-%d" % (wave, i)
            got = [bool(lim.try_acquire(key=k)) for _ in range(threshold + 1)]
            assert got == [True] * threshold + [False], (wave, i)
        clock.advance(1001)  # every key of the wave is idle: its windows left the interval
    s = lim.keyed_stats()
    assert s.refused == 0 and s.evicted == 0
    assert s.inserted == 10 * capacity and s.reclaimed >= 9 * capacity - (s.slots - capacity)
    assert s.keys <= s.slots and s.pass_ == 10 * capacity * threshold


def fill_active(lim, n):
    """n distinct new keys, each entered once now (all active)."""
    return [lim.try_acquire(key=b"active-%d" % i) for i in range(n)]


def test_full_table_evicts_least_recent(clock):
    lim = keyed(5, capacity=16, clock=clock)  # on_full="evict" by default
    slots = lim.keyed_stats().slots
    permits = fill_active(lim, 4 * slots)
    assert all(permits) and not any(p.full for p in permits)  # every new key admitted
    s = lim.keyed_stats()
    assert s.evicted >= 3 * slots and s.refused == 0 and s.keys <= slots
    assert s.inserted == 4 * slots
    # an evicted key starts again from nothing: its count went with it
    gone = [i for i in range(4 * slots) if lim.key_stats(b"active-%d" % i) is None]
    assert len(gone) >= 3 * slots
    assert [bool(lim.try_acquire(key=b"active-%d" % gone[0])) for _ in range(6)] == [True] * 5 + [False]


def test_full_table_open_lets_new_keys_through_uncounted(clock):
    lim = keyed(1, capacity=16, on_full="open", clock=clock)
    slots = lim.keyed_stats().slots
    permits = fill_active(lim, 2 * slots)
    assert all(permits)
    full = [i for i, p in enumerate(permits) if p.full]
    assert len(full) >= slots and lim.keyed_stats().refused == len(full)
    k = b"active-%d" % full[0]
    assert lim.key_stats(k) is None  # not in the table: nothing counted
    assert all(lim.try_acquire(key=k) for _ in range(3))  # fail open, every time
    for p in permits:
        p.release()
    assert lim.keyed_stats().evicted == 0


def test_full_table_closed_refuses_new_keys(clock):
    lim = keyed(1, capacity=16, on_full="closed", clock=clock)
    slots = lim.keyed_stats().slots
    permits = fill_active(lim, 2 * slots)
    refused = [p for p in permits if not p]
    assert len(refused) >= slots and all(p.full for p in refused)
    assert all(p.full is False for p in permits if p)
    assert refused[0].retry_after == 0.5  # the next window, when a key may have gone idle
    with pytest.raises(libsw.BlockedError) as ei:
        lim.acquire(key=b"one more")
    assert ei.value.full and "keyed table full" in str(ei.value)
    s = lim.keyed_stats()
    assert s.refused == len(refused) + 1 and s.evicted == 0
    clock.advance(1001)  # the keys went idle: their places are reclaimed
    assert lim.try_acquire(key=b"one more") and lim.keyed_stats().reclaimed == 1


def test_allow_is_open_on_a_keyed_table(clock):
    lim = keyed(1, capacity=16, on_full="allow", clock=clock)
    assert sum(p.full for p in fill_active(lim, 100)) >= 100 - lim.keyed_stats().slots


def test_readers(clock):
    lim = keyed(100, capacity=4096, clock=clock)
    for i in range(600):  # more than one batch of the scan
        for _ in range(i % 7):
            lim.try_acquire(key="k%d" % i).release()
    for _ in range(120):
        lim.try_acquire(key="k7")
    assert lim.key_stats("nobody") is None
    present = sorted(["k%d" % i for i in range(600) if i % 7] + ["k7"])
    assert sorted(lim.keys()) == present
    top = lim.top_keys(3)  # k7, then two of the keys with 6 passes
    assert [(t.key, t.pass_) for t in top][0] == ("k7", 100) and [t.pass_ for t in top[1:]] == [6, 6]
    assert top[0].pass_qps == 100.0 and lim.top_keys(0) == []
    blocked = lim.top_keys(1, by="block")
    assert blocked[0].key == "k7" and blocked[0].block == 20
    assert lim.active_keys() == len(present)
    s = lim.key_stats("k7")
    assert (s.pass_, s.block, s.in_flight, s.last_ms, s.time_ms) == (100, 20, 0, T0, T0)
    assert s.as_dict()["pass_"] == 100 and lim.keyed_stats().as_dict()["capacity"] == 4096
    assert lim.for_key("k7").stats().block_qps == 20 and lim.for_key("none").stats().pass_ == 0
    clock.advance(2000)
    assert lim.key_stats("k7").pass_ == 0 and lim.active_keys() == 0  # idle, still present
    with pytest.raises(ValueError, match="by="):
        lim.top_keys(by="rt")
    with pytest.raises(ValueError, match="n="):
        lim.top_keys(10**6)


def test_keys_is_a_lazy_iterator(clock):
    lim = keyed(1, capacity=100_000, clock=clock)
    for i in range(1000):
        lim.try_acquire(key=b"%d" % i)
    it = lim.keys()
    assert iter(it) is it and next(it) is not None  # nothing listed before it is asked for
    assert sum(1 for _ in lim.keys()) == 1000


def test_registry_path_for_rules_a_keyed_table_refuses(clock):
    """Warm-up, warm-up + pacing, prioritized entries, more than 64 windows
    and reject thresholds a key's window cannot count (over 4,294,967,295)
    keep a registry."""
    for kw in (dict(behavior="warm_up"), dict(behavior="warm_up_pacing"), dict(prioritized=True),
               dict(windows=100), dict(qps=5e9)):
        kw = dict(dict(qps=10), **kw)
        lim = libsw.RateLimiter(clock=clock, capacity=4, **kw)
        assert not lim.keyed, kw
        k = lim.for_key("a")
        assert isinstance(k, libsw.RateLimiter) and lim.for_key("a") is k  # kept, bounded by capacity
        with pytest.raises(libsw.NotSupportedError, match="registry"):
            lim.keyed_stats()
        with pytest.raises(libsw.NotSupportedError):
            lim.top_keys()
    lim = libsw.RateLimiter(10, behavior="warm_up", capacity=4, clock=clock)
    lim.try_acquire(key="a").release()
    assert list(lim.keys()) == ["a"] and list(lim.keys(raw=True)) == [b"a"]
    assert lim.key_stats("a").pass_ == 1 and lim.key_stats("b") is None


def test_pacing_per_key(clock):
    lim = keyed(10, behavior="pacing", clock=clock)  # 100 ms apart per key
    a = [lim.acquire(key="a") for _ in range(3)]
    b = lim.acquire(key="b")  # another key does not queue behind "a"
    assert [p.waited for p in a] == [0.0, 0.1, 0.1] and b.waited == 0.0
    assert clock.sleeps == [0.1, 0.1]


def test_concurrency_per_key(clock):
    lim = libsw.RateLimiter(concurrency=2, clock=clock)
    assert lim.keyed
    p1, p2 = lim.acquire(key="a"), lim.acquire(key="a")
    assert not lim.try_acquire(key="a") and lim.try_acquire(key="b")
    assert lim.key_stats("a").in_flight == 2 and lim.for_key("a").stats().concurrency == 2
    p1.release()
    assert lim.try_acquire(key="a")
    p2.release()
    p2.release()  # once only


def test_concurrency_open_full_key_releases_cleanly(clock):
    lim = libsw.RateLimiter(concurrency=1, capacity=16, on_full="open", clock=clock)
    permits = fill_active(lim, 100)
    full = [p for p in permits if p.full]
    assert full
    for p in permits:
        p.release()  # an uncounted key has nothing in flight: no error


def test_dry_run_and_thresholds(clock):
    lim = keyed(1, dry_run=True, clock=clock)
    p1, p2 = lim.try_acquire(key="k"), lim.try_acquire(key="k")
    assert p1 and p2 and not p1.would_block and p2.would_block
    assert lim.keyed_stats().would_block == 1
    lim.set_dry_run(False)
    assert not lim.try_acquire(key="k")
    lim.set_threshold(3)  # every key's, and the limiter's own
    assert lim.for_key("k").rule()["threshold"] == 3 and lim.rule()["threshold"] == 3
    clock.advance(1000)
    assert [bool(lim.try_acquire(key="k")) for _ in range(4)] == [True, True, True, False]
    with pytest.raises(ValueError, match="threshold"):
        lim.set_threshold(5e9)  # over the 4,294,967,295 a key's window counts


def test_decorator_and_context_manager_of_a_key(clock):
    lim = keyed(1, clock=clock)

    @lim.for_key("k1")
    def f():
        return 1

    assert f() == 1 and f.limiter.key == "k1"
    with pytest.raises(libsw.BlockedError):
        f()
    with pytest.raises(RuntimeError):
        with lim.for_key("k2"):
            raise RuntimeError("x")
    assert lim.keyed_stats().exception == 1
    v = lim.for_key("k3")
    with pytest.raises(RuntimeError, match="without a matching"):
        v.__exit__(None, None, None)


def test_async_forms(clock):
    lim = keyed(2, behavior="pacing", clock=clock)

    @lim.for_key("d")
    async def g():
        return 2

    async def main():
        p = await lim.acquire_async(key="a")
        q = await lim.try_acquire_async(key="a")
        async with lim.for_key("b"):
            pass
        r = await lim.for_key("c").try_acquire_async()
        return p, q, r, await g()

    p, q, r, two = asyncio.run(main())
    assert p and q and r and two == 2 and q.waited == 0.5  # paced with the clock's async_sleep
    strict = keyed(1, clock=clock, block=True, timeout=0.2)

    async def blocked():
        await strict.acquire_async(key="z")
        with pytest.raises(libsw.BlockedError):
            await strict.acquire_async(key="z")  # the retry would wait past the timeout
        assert not await strict.try_acquire_async(key="z")

    asyncio.run(blocked())


def test_block_waits_for_the_key(clock):
    lim = keyed(1, clock=clock, block=True)
    lim.acquire(key="k").release()
    p = lim.acquire(key="k")  # retried after retry_after, with the clock's sleep
    assert p and p.waited == 1.0 and clock.sleeps == [1.0]


def test_bad_input(clock):
    lim = keyed(1, clock=clock)
    for bad in (42, object(), 1.5, bytearray(b"x"), ["k"]):
        with pytest.raises(TypeError, match="key must be str or bytes"):
            lim.try_acquire(key=bad)
        with pytest.raises(TypeError):
            lim.for_key(bad)
    with pytest.raises(ValueError, match="0 bytes: a key is 1..65535"):
        lim.try_acquire(key="")
    with pytest.raises(ValueError, match="65536 bytes"):
        lim.acquire(key=b"x" * 65536)
    with pytest.raises(ValueError, match="not encodable"):
        lim.try_acquire(key="\ud800")
    for n, exc in ((-1, ValueError), (2**40, ValueError), (2**70, ValueError), (True, TypeError), ("1", TypeError)):
        with pytest.raises(exc):
            lim.try_acquire(n, key="k")
    assert lim.try_acquire(0, key="k")  # zero units: a check
    for cap, match in ((0, "capacity=0 is outside"), (2**40, "capacity"), (2**28 + 1, "capacity=268435457")):
        with pytest.raises(ValueError, match=match):
            libsw.RateLimiter(1, capacity=cap)
    with pytest.raises(TypeError, match="capacity"):
        libsw.RateLimiter(1, capacity=1.5)
    with pytest.raises(ValueError, match="key_bytes"):
        libsw.RateLimiter(1, key_bytes=129)


def test_huge_capacity_is_reserved_not_used():
    lim = keyed(1, capacity=2**24)
    s = lim.keyed_stats()
    assert s.capacity == 2**24 and s.bytes > 2**24 * 49
    assert lim.try_acquire(key="k")


def test_close(clock):
    lim = keyed(1, clock=clock)
    v = lim.for_key("a")
    p = lim.acquire(key="b")
    lim.close()
    p.release()  # admitted before close: ends safely
    for call in (lambda: lim.try_acquire(key="a"), v.acquire, v.try_acquire, lambda: lim.for_key("c"),
                 lim.keyed_stats, lambda: list(lim.keys()), lim.top_keys):
        with pytest.raises(libsw.ClosedError):
            call()
    assert v.closed
    lim2 = keyed(1, clock=clock)
    w = lim2.for_key("a")
    w.close()
    with pytest.raises(libsw.ClosedError):
        w.acquire()
    assert lim2.for_key("a").try_acquire()  # another view of the key


def test_heap_view_is_not_picklable(clock):
    with pytest.raises(TypeError, match="segment"):
        pickle.dumps(keyed(1, clock=clock).for_key("a"))


# ------------------------------------------------------------- segments


def test_keys_segment_is_named_after_the_segment_and_name(shm_name, clock):
    lim = keyed(2, segment=shm_name, name="GET /api", capacity=64, clock=clock)
    path = "/dev/shm/%s.keys.GET%%20%%2Fapi" % shm_name
    assert os.path.exists(path) and os.path.exists("/dev/shm/" + shm_name)
    other = keyed(2, segment=shm_name, name="GET /api", capacity=64, clock=clock)
    lim.acquire(key="k").release()
    assert other.try_acquire(key="k") and not lim.try_acquire(key="k")  # one key, shared
    assert other.key_stats("k").pass_ == 2
    v = other.for_key(b"\x0a\x00\x00\x01")
    v.acquire().release()
    again = pickle.loads(pickle.dumps(v))  # reopens the segments
    assert again.key == b"\n\x00\x00\x01" and again.stats().pass_ == 1
    libsw.unlink_segment(shm_name)  # the segment and its keys' segments
    assert not os.path.exists(path) and not os.path.exists("/dev/shm/" + shm_name)


def test_keys_segment_in_a_file(tmp_path, clock):
    seg = str(tmp_path / "limits")
    lim = keyed(1, segment=seg, capacity=16, clock=clock)
    assert lim.try_acquire(key="a") and not lim.try_acquire(key="a")
    assert sorted(os.listdir(tmp_path)) == ["limits", "limits.keys.default"]
    libsw.unlink_segment(seg)
    assert os.listdir(tmp_path) == []


def test_failed_constructor_leaves_no_file(shm_name, clock):
    # the keys' segment name would be too long for a POSIX name: nothing stays
    long_seg = shm_name + "-" + "x" * (60 - len(shm_name))
    with pytest.raises(ValueError, match="keys' segment"):
        keyed(1, segment=long_seg, capacity=16, clock=clock)
    assert not os.path.exists("/dev/shm/" + long_seg)
    # a keys' segment of another capacity: the new segment of names is removed
    keyed(1, segment=shm_name, capacity=16, clock=clock)
    libsw.lib.sw_segment_unlink(shm_name.encode())
    with pytest.raises(ValueError, match="holds 16 keys"):
        keyed(1, segment=shm_name, capacity=32, clock=clock)
    assert not os.path.exists("/dev/shm/" + shm_name)
    assert os.path.exists("/dev/shm/%s.keys.default" % shm_name)  # not ours: kept
    # another kind of state per key (pacing): refused, nothing created
    with pytest.raises(ValueError, match="pacing"):
        keyed(1, segment=shm_name, capacity=16, behavior="pacing", clock=clock)
    assert not os.path.exists("/dev/shm/" + shm_name)


def test_segment_rule_follows_the_last_opener(shm_name, clock):
    a = keyed(5, segment=shm_name, capacity=16, clock=clock)
    b = keyed(2, segment=shm_name, capacity=16, clock=clock)
    assert a.for_key("k").rule()["threshold"] == 2 == b.for_key("k").rule()["threshold"]
    assert sum(bool(a.try_acquire(key="k")) for _ in range(5)) == 2


def test_names_sets_the_segment_of_names(shm_name, clock):
    lim = keyed(1, segment=shm_name, capacity=1_000_000, clock=clock)
    size = os.path.getsize("/dev/shm/" + shm_name)
    assert size < 64 << 20  # 1024 names, not a million
    small = "%s-small" % shm_name
    try:
        keyed(1, segment=small, names=8, capacity=16, clock=clock)
        assert os.path.getsize("/dev/shm/" + small) < size
    finally:
        libsw.unlink_segment(small)
    assert lim.keyed_stats().capacity == 1_000_000


def test_retry_after_is_finite():
    lim = keyed(1)
    lim.try_acquire(key="k")
    p = lim.try_acquire(key="k")
    assert not p and 0 < p.retry_after <= 1.0 and not math.isinf(p.retry_after)


def test_keyed_fast_path_on_libsws_clock_and_every_key_length():
    """try_acquire(key=) of a limiter on libsw's own clock: one C call and a
    token (KeyPermit); a key of any length up to 65,535 bytes is kept for
    its release (longer than the record's inline room: a copy)."""
    lim = libsw.RateLimiter(3, capacity=16, key_bytes=16)
    for key in ("a", "é" * 40, b"\x00" * 300, "k" * 65535):
        got = [lim.try_acquire(key=key) for _ in range(4)]
        assert [bool(p) for p in got] == [True, True, True, False]
        assert type(got[0]).__name__ == "KeyPermit" and got[0].limiter.key == key
        assert [p.remaining for p in got[:3]] == [2, 1, 0]
        for p in got:
            p.release()
            assert not p.active
    s = lim.keyed_stats()
    assert (s.pass_, s.success, s.block) == (12, 12, 4)
    with pytest.raises(libsw.ArgumentError, match="65536 bytes"):
        lim.try_acquire(key="k" * 65536)


@pytest.mark.parametrize("clocked", [False, True])
def test_cancel_gives_an_entry_back(clock, clocked):
    lim = libsw.RateLimiter(2, capacity=4, clock=clock if clocked else None)
    p = lim.try_acquire(key="c")
    try:
        p.cancel()
    except libsw.NotSupportedError:   # the C library has no cancel yet: the entry was released instead
        assert not p.active and lim.keyed_stats().success == 1
        pytest.skip("sw_keyed_cancel: SW_ENOTSUP (not built yet)")
    assert not p.active
    p.cancel()    # once
    p.release()   # and nothing after it
    ks = lim.key_stats("c")
    assert ks is None or ks.pass_ == 0   # as if never admitted
    assert [bool(lim.try_acquire(key="c")) for _ in range(3)] == [True, True, False]


def test_names_zero_keeps_the_keys_segment_alone(shm_name, clock):
    lim = libsw.RateLimiter(2, name="only", segment=shm_name, names=0, capacity=8, clock=clock)
    assert not os.path.exists("/dev/shm/" + shm_name)   # no segment of limiters by name
    assert os.path.exists("/dev/shm/%s.keys.only" % shm_name)
    assert lim.segment_name == shm_name
    other = libsw.RateLimiter(2, name="only", segment=shm_name, names=0, capacity=8, clock=clock)
    assert [bool(x.try_acquire(key="k")) for x in (lim, other, lim)] == [True, True, False]


@pytest.mark.parametrize("clocked", [False, True])
def test_cancel_of_a_limiters_own_permit(clock, clocked):
    """Permit.cancel() without a key: sw_limiter_cancel."""
    lim = libsw.RateLimiter(2, clock=clock if clocked else None)
    p = lim.try_acquire()
    try:
        p.cancel()
    except libsw.NotSupportedError:
        pytest.skip("sw_limiter_cancel: SW_ENOTSUP (not built yet)")
    assert not p.active
    assert [bool(lim.try_acquire()) for _ in range(3)] == [True, True, False]
