# SPDX-License-Identifier: Apache-2.0
"""The per-key half of RateLimiter: for_key() and the readers of keys.

Keys live in a keyed table (_keyed.py) when one takes the rule, else each
key has a limiter of its own in a registry (or a shared segment), made on
first use and kept (bounded by the registry's capacity). RateLimiter
inherits this mixin; it relies on RateLimiter's attributes (_root, _h, _kt,
_key, _cluster) and helpers (_time, _closed_msg, _registry_get).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Union

from ._errors import ClosedError, NotSupportedError, RegistryFullError, check
from ._keyed import ON_FULL as _KEYED_ON_FULL
from ._keyed import KEY_MAX, KeyDigest, KeyedStats, KeyedTable, KeyLimiter, KeyStats, encode_key, key_error
from ._libsw import ffi, lib
from ._util import CLOSED, set_opt, to_bytes_name

if TYPE_CHECKING:
    from ._limiter import RateLimiter

REGISTRY_ON_FULL = ("raise", "allow", "shared")


def check_on_full(on_full: Optional[str]) -> None:
    """on_full is a policy of either path (which one applies is known once
    the rule is: PerKey._keys_path)."""
    if on_full is not None and on_full not in _KEYED_ON_FULL and on_full not in REGISTRY_ON_FULL:
        raise ValueError("on_full=%r is not one of 'evict', 'open', 'closed' (a keyed table) or "
                         "'raise', 'allow', 'shared' (keys in a registry)" % (on_full,))


class PerKey:
    """RateLimiter's per-key methods (see the module's docstring)."""

    _root: Any
    _h: Any
    _kt: Optional[KeyedTable]
    _key: Optional[str]

    def _keys_path(self, opts: Any, on_full: Optional[str], key_bytes: int, prioritized: bool) -> Any:
        """The keyed table's options when one takes the rule (then keys use
        it), else None (keys get limiters from a registry); sets on_full."""
        root = self._root
        kopts = KeyedTable.options(opts, on_full if on_full in _KEYED_ON_FULL else "evict", key_bytes)
        if not prioritized and KeyedTable.takes(kopts):  # a keyed table has no borrowing
            if on_full in REGISTRY_ON_FULL and on_full != "allow":
                raise ValueError("on_full=%r is for keys in a registry; this rule's keys are in a keyed "
                                 "table: on_full is one of 'evict', 'open', 'closed'" % (on_full,))
            root.on_full = on_full or "evict"
            return kopts
        if on_full in _KEYED_ON_FULL and on_full not in ("open", "allow"):
            raise ValueError("on_full=%r needs a keyed table, which does not take this rule (warm-up, "
                             "prioritized, cluster, ...): its keys are in a registry, where on_full is "
                             "one of 'raise', 'allow', 'shared'" % (on_full,))
        root.on_full = "allow" if on_full == "open" else on_full or "raise"
        return None

    def for_key(self, key: Union[str, bytes]) -> Union["RateLimiter", KeyLimiter]:
        """The limiter of key, with this limiter's rule and settings, usable
        as a decorator, a context manager and with acquire / try_acquire.
        With a keyed table: a :class:`KeyLimiter`, a view made on each call
        (the key's state is in the table, inserted at its first entry).
        Otherwise a RateLimiter from a registry of ``capacity`` keys (in the
        segment, as ``"<name>:<key>"``, when there is one), made on first
        use and kept."""
        root = self._root
        if self._key is not None:
            raise TypeError("for_key() of a key's limiter: call it on the limiter that made it")
        if self._kt is not None:
            if self._h is CLOSED:
                raise ClosedError(self._closed_msg())
            kb = encode_key(key)
            if not 1 <= len(kb) <= KEY_MAX:
                raise key_error(key, kb, lib.SW_ERANGE)
            return KeyLimiter(self, key, kb)
        skey = self._registry_key(key)
        child = root.keys.get(skey)
        if child is not None and child._h is not CLOSED:
            return child
        if self._h is CLOSED:
            raise ClosedError(self._closed_msg())
        with root.lock:
            child = root.keys.get(skey)
            if child is not None and child._h is not CLOSED:
                return child
            if root.registry is None:
                p = ffi.new("sw_registry **")
                check(lib.sw_registry_create(p, root.capacity, root.opts), "registry")
                root.registry = ffi.gc(p[0], lib.sw_registry_free)
            bname = to_bytes_name(root.prefix + skey, "key")
            try:
                h = self._registry_get(bname, "key")
            except RegistryFullError:
                if root.on_full == "raise":
                    raise
                return self._overflow()
            child = self._child(h, skey)
            if self._cluster is not None:  # each key is a fleet-wide budget of its own
                self._cluster.add(h, bname)
            root.keys[skey] = child
            return child

    @staticmethod
    def _registry_key(key: object) -> str:
        if isinstance(key, bytes):
            return key.decode("utf-8", "surrogateescape")
        if isinstance(key, str):
            return key
        raise TypeError("key must be str or bytes, not %s" % type(key).__name__)

    def _child(self, h: Any, key: str) -> "RateLimiter":
        child = object.__new__(type(self))
        child.__dict__.update(self.__dict__)
        child._h = h
        child._key = key
        child._make_site()
        self._root.members.append(child)
        return child

    def _overflow(self) -> "RateLimiter":
        root = self._root
        if root.overflow is None:
            opts = root.opts
            if root.on_full == "allow":
                opts = ffi.gc(lib.sw_options_clone(root.opts), lib.sw_options_free)
                hi = ffi.new("double *")
                check(lib.sw_option_bounds(lib.SW_OPT_THRESHOLD, ffi.NULL, hi, ffi.NULL))
                set_opt(opts, lib.SW_OPT_THRESHOLD, hi[0])
                set_opt(opts, lib.SW_OPT_BEHAVIOR, lib.SW_BEHAVIOR_REJECT)
            p = ffi.new("sw_limiter **")
            check(lib.sw_limiter_create(p, opts), "overflow limiter")
            root.overflow = self._child(ffi.gc(p[0], lib.sw_limiter_free), "<overflow>")
        return root.overflow

    def keys(self, *, raw: bool = False, now: Optional[int] = None) -> Iterator[Union[str, bytes, KeyDigest]]:
        """An iterator over the keys. A keyed table's: the keys present at
        now (idle ones too, until their place is reclaimed), in place order,
        read from C in batches: bounded memory for any number of keys; str
        (UTF-8, undecodable bytes as surrogateescape) or, with raw=True,
        bytes; a key longer than key_bytes is its :class:`KeyDigest`. A
        registry's: the keys with a limiter (in a segment: made by any
        process), in creation order."""
        if self._kt is not None:
            return self._kt.scan(self._time(now), raw)
        root = self._root
        reg = root.registry
        out: List[Union[str, bytes]] = []
        name = ffi.new("const char **")
        for i in range(lib.sw_registry_count(reg) if reg is not None else 0):
            if lib.sw_registry_at(reg, i, ffi.NULL, name) == 0:
                b = ffi.string(name[0])
                if b.startswith(root.prefix.encode("utf-8")):
                    b = b[len(root.prefix.encode("utf-8")):]
                    out.append(b if raw else b.decode("utf-8", "surrogateescape"))
        return iter(out)  # bounded by the registry's capacity

    def key_stats(self, key: Union[str, bytes], now: Optional[int] = None) -> Optional[KeyStats]:
        """What is kept of key at now (ms; default: the limiter's clock), or
        None when nothing is (a key never seen, or whose place was reclaimed).
        Registry keys report the blocks of the whole interval."""
        t = self._time(now)
        if self._kt is not None:
            return self._kt.lookup(key, t)
        reg = self._root.registry
        p = ffi.new("sw_limiter **")
        bname = to_bytes_name(self._root.prefix + self._registry_key(key), "key")
        if reg is None or check(lib.sw_registry_find(reg, bname, p), "key_stats") == 0:
            return None
        node = lib.sw_limiter_node(p[0])
        m = lib.sw_node_second_metric(node)
        return KeyStats(key, check(lib.sw_metric_pass_at(m, t)), check(lib.sw_metric_block_at(m, t)),
                        check(lib.sw_node_concurrency(node)), -1, t, int(lib.sw_metric_interval_sec(m) * 1000))

    def top_keys(self, n: int = 10, *, by: str = "pass", now: Optional[int] = None,
                 raw: bool = False) -> List[KeyStats]:
        """The n keys (at most 100,000) with the most passes (by="pass") or
        blocks (by="block") at now, most first: one pass over a keyed table,
        in C."""
        return self._keyed("top_keys").top(self._time(now), n, by, raw)[0]

    def active_keys(self, now: Optional[int] = None) -> int:
        """How many keys of the keyed table have a pass or a block in the interval at now."""
        return self._keyed("active_keys").top(self._time(now), 0, "pass", False)[1]

    def keyed_stats(self) -> KeyedStats:
        """The keyed table's geometry, memory, keys and totals since creation
        (:class:`KeyedStats`)."""
        return self._keyed("keyed_stats").stats()

    @property
    def keyed(self) -> bool:
        """True when the keys are in a keyed table (else in a registry)."""
        return self._kt is not None

    def _keyed(self, what: str) -> KeyedTable:
        kt = self._kt
        if kt is None:
            raise NotSupportedError("%s() needs a keyed table; the keys of this rule are in a registry" % what,
                                    lib.SW_ENOTSUP)
        if self._h is CLOSED:
            raise ClosedError(self._closed_msg())
        return kt

    @property
    def capacity(self) -> int:
        return self._root.capacity

