# SPDX-License-Identifier: Apache-2.0
"""Per-key limits through RateLimiter's API: a keyed table for the rules it
takes, a registry (or a shared segment) for the others (warm-up here), and
a full registry. (tests/test_keyed.py tests the keyed table itself.)"""
import pytest

import libsw


def test_for_key_independent_limits(clock):
    lim = libsw.RateLimiter(2, name="api", clock=clock)
    a = lim.for_key("client-a")
    assert lim.for_key("client-a") == a  # a view made on each call, never cached
    assert a.key == "client-a" and a.resource == "client-a"
    b = lim.for_key(b"client-b")
    assert [bool(a.try_acquire()) for _ in range(3)] == [True, True, False]
    assert [bool(b.try_acquire()) for _ in range(3)] == [True, True, False]
    assert lim.try_acquire()  # the limiter itself is separate from its keys
    with pytest.raises(libsw.BlockedError) as ei:
        a.acquire()
    assert ei.value.resource == "client-a"
    assert sorted(lim.keys()) == ["client-a", "client-b"]


def test_acquire_with_key(clock):
    lim = libsw.RateLimiter(1, clock=clock)
    lim.acquire(key="x").release()
    with pytest.raises(libsw.BlockedError):
        lim.acquire(key="x")
    assert lim.try_acquire(key="y")
    assert lim.for_key("x").stats().block_qps == 1


def test_key_limiter_as_decorator_and_context(clock):
    lim = libsw.RateLimiter(1, clock=clock)

    @lim.for_key("k1")
    def f():
        return 1

    assert f() == 1
    with pytest.raises(libsw.BlockedError):
        f()
    with lim.for_key("k2"):
        pass


# A warm-up rule keeps its keys in a registry (a keyed table does not take it).
def test_registry_full_raises(clock):
    lim = libsw.RateLimiter(5, behavior="warm_up", capacity=2, clock=clock)
    assert not lim.keyed
    lim.for_key("a")
    lim.for_key("b")
    with pytest.raises(libsw.RegistryFullError, match="full") as ei:
        lim.for_key("c")
    assert ei.value.code_name == "SW_EFULL"
    assert lim.for_key("a").try_acquire()  # existing keys keep working
    assert lim.capacity == 2 and len(list(lim.keys())) == 2


def test_registry_full_allow(clock):
    lim = libsw.RateLimiter(5, behavior="warm_up", capacity=1, on_full="allow", clock=clock)
    assert lim.for_key("a").try_acquire()
    over = lim.for_key("b")
    assert all(over.try_acquire() for _ in range(100))  # fail open
    assert lim.for_key("c") is over


def test_registry_full_shared(clock):
    lim = libsw.RateLimiter(6, behavior="warm_up", capacity=1, on_full="shared", clock=clock)  # 2 per s cold
    lim.for_key("a")
    b, c = lim.for_key("b"), lim.for_key("c")
    assert b is c
    assert [bool(b.try_acquire()), bool(c.try_acquire()), bool(c.try_acquire())] == [True, True, False]


def test_bad_keys():
    lim = libsw.RateLimiter(1)
    with pytest.raises(ValueError, match="65536 bytes: a key is 1..65535"):
        lim.for_key("x" * 65536)  # a keyed table: keys of 1..65535 bytes
    with pytest.raises(ValueError, match="0 bytes"):
        lim.for_key("")
    with pytest.raises(ValueError, match="63|name"):
        libsw.RateLimiter(5, behavior="warm_up").for_key("x" * 64)  # a registry: 1..63
    with pytest.raises(TypeError):
        lim.for_key(42)
    with pytest.raises(TypeError):
        lim.for_key("a").for_key("b")


def test_keys_in_a_segment(shm_name, clock):
    a = libsw.RateLimiter(3, segment=shm_name, name="api", capacity=4, clock=clock)
    b = libsw.RateLimiter(3, segment=shm_name, name="api", capacity=4, clock=clock)
    other = libsw.RateLimiter(3, segment=shm_name, name="web", capacity=4, clock=clock)
    a.for_key("alice").acquire().release()
    b.for_key("alice").acquire().release()
    other.for_key("alice").acquire().release()
    assert a.for_key("alice").stats().pass_qps == 2  # shared by a and b
    assert other.for_key("alice").stats().pass_qps == 1  # another name, another key
    assert list(a.keys()) == ["alice"] and list(other.keys()) == ["alice"]
    # capacity is keys at once per limiter, in its own keyed table (no longer
    # names in all: api, web, api:alice, web:alice filled 4 places before)
    a.for_key("bob").acquire().release()
    assert sorted(b.keys()) == ["alice", "bob"] and a.keyed_stats().capacity == 4


def test_close_closes_keys(clock):
    lim = libsw.RateLimiter(1, clock=clock)
    k = lim.for_key("a")
    lim.close()
    with pytest.raises(libsw.ClosedError):
        k.acquire()
    with pytest.raises(libsw.ClosedError):
        lim.for_key("b")


def test_closing_one_key(clock):
    lim = libsw.RateLimiter(1, clock=clock)
    k = lim.for_key("a")
    k.acquire().release()
    k.close()
    with pytest.raises(libsw.ClosedError):
        k.acquire()
    again = lim.for_key("a")  # a new handle on the same registry entry
    assert again is not k and not again.try_acquire()
    assert lim.try_acquire()
