# SPDX-License-Identifier: Apache-2.0
"""Process targets for test_processes (importable by spawned children)."""
import libsw


def hammer(lim, n, go, q):
    go.wait(60)  # a barrier: start together, to contend
    passed = 0
    for _ in range(n):
        p = lim.try_acquire()
        if p:
            passed += 1
            p.release()
    q.put(passed)


def decorated(lim, n, go, q):
    go.wait(60)

    @lim
    def work():
        return 1

    q.put(sum(work() for _ in range(n)))


def use_after_fork(lim, seg_lim, q):
    # handles inherited through fork are valid in the child
    @lim
    def f():
        return 1

    out = [f() for _ in range(3)]
    p = seg_lim.acquire(5)
    p.release()
    q.put((out, lim.stats().pass_qps, isinstance(lim, libsw.RateLimiter)))


def enter_keys(lim, keys, rounds):
    """Enter every key `rounds` times (in turn): passes per key."""
    passed = dict.fromkeys(keys, 0)
    for _ in range(rounds):
        for k in keys:
            p = lim.try_acquire(key=k)
            if p:
                passed[k] += 1
                p.release()
    return passed


def keyed_hammer(lim, keys, rounds, go, q):
    go.wait(60)
    q.put(enter_keys(lim, keys, rounds))
