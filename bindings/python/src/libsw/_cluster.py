# SPDX-License-Identifier: Apache-2.0
"""Fleet-wide limits on Redis: one sw_cluster (connections and a refiller
thread) per Redis address, settings and process.

Teardown is the C library's contract (<sw/sw.h>): the refiller reads every
limiter added to it, so a limiter is removed (sw_cluster_remove waits for the
round in flight) before its memory can go, and every refiller is stopped
(sw_cluster_free) at interpreter exit, before module teardown frees the
limiters in any order. A cluster keeps the handles it refills alive until
they are removed. After fork() the child has no refiller thread: it gets a
cluster of its own; the parent's copy is left alone (its lock may be held
by a thread that does not exist in the child).

Redis going down and coming back is logged on the ``"libsw"`` logger, once
per change and server, at WARNING (both, so that the default logging setup
shows the pair).
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any, Dict, Optional, Tuple

from ._errors import ArgumentError, StateError, check
from ._libsw import ffi, lib
from ._util import to_bytes_name, want_int

log = logging.getLogger("libsw")

FAILURES = {
    "local": lib.SW_CLUSTER_FALLBACK_LOCAL,
    "open": lib.SW_CLUSTER_FAIL_OPEN,
    "closed": lib.SW_CLUSTER_FAIL_CLOSED,
}


@ffi.def_extern()
def swpy_cluster_log(user: Any, up: int, server: Any, message: Any) -> None:
    """sw_cluster_set_log's callback, on the refiller thread (CFFI takes the
    GIL). An exception here would only be printed by CFFI: none escapes."""
    try:
        log.warning("libsw: %s", ffi.string(message).decode("utf-8", "replace"))
    except Exception:  # pragma: no cover - logging itself failed
        pass


class Settings:
    """The validated Redis settings of a RateLimiter(cluster=...)."""

    __slots__ = ("address", "username", "password", "database", "key")

    def __init__(self, cluster: object, username: object, password: object, database: object,
                 timeout_ms: int) -> None:
        if not isinstance(cluster, str):
            raise TypeError("cluster must be a str (\"host:port[,host:port...]\"), not %s"
                            % type(cluster).__name__)
        address = cluster[len("redis://"):] if cluster.startswith("redis://") else cluster
        self.address = to_bytes_name(address, "cluster")
        self.username = None if username is None else to_bytes_name(username, "cluster_username")
        self.password = None if password is None else to_bytes_name(password, "cluster_password")
        if self.username is not None and self.password is None:
            raise ArgumentError("cluster_username=%r needs a cluster_password" % (username,),
                                lib.SW_EINVAL)
        self.database = want_int(database, "cluster_database", 0, 2**31 - 1)
        self.key = (self.address, self.username, self.password, self.database, timeout_ms)


class Cluster:
    """One sw_cluster per Redis address and settings, and process."""

    _all: Dict[Tuple[Any, ...], "Cluster"] = {}
    _lock = threading.Lock()
    _closed = False  # interpreter exit: no new cluster, every refiller stopped

    def __init__(self, settings: Settings, opts: Any) -> None:
        self.settings = settings
        self.opts = opts
        self.items: Dict[int, Tuple[Any, bytes]] = {}  # id(handle) -> (handle, resource)
        self.handle: Any = None
        self.handle = self._open()

    def _open(self) -> Any:
        s = self.settings
        p = ffi.new("sw_cluster **")
        check(lib.sw_cluster_create(p, s.address, self.opts), "cluster")
        c = p[0]
        try:
            if s.password is not None:
                check(lib.sw_cluster_set_auth(c, s.username or ffi.NULL, s.password),
                      "cluster_password")
            if s.database:
                check(lib.sw_cluster_set_database(c, s.database), "cluster_database")
            check(lib.sw_cluster_set_log(c, lib.swpy_cluster_log, ffi.NULL), "cluster log")
            check(lib.sw_cluster_start(c), "cluster refiller")
        except BaseException:
            lib.sw_cluster_free(c)
            raise
        return c  # freed at exit (shutdown), never by the garbage collector

    @classmethod
    def get(cls, settings: Settings, opts: Any) -> "Cluster":
        with cls._lock:
            if cls._closed:
                raise StateError("the interpreter is exiting: no new cluster limiter",
                                 lib.SW_ESTATE)
            c = cls._all.get(settings.key)
            if c is None:
                c = cls._all[settings.key] = cls(settings, opts)
            return c

    def add(self, h: Any, resource: bytes) -> None:
        with Cluster._lock:
            if self.handle is None:
                raise StateError("the interpreter is exiting: no new cluster limiter",
                                 lib.SW_ESTATE)
            check(lib.sw_cluster_add(self.handle, h, resource), "cluster resource %r" % (resource,))
            self.items[id(h)] = (h, resource)

    def remove(self, h: Any) -> None:
        """Stop refilling h; once this returns the refiller never reads it
        again (the handle may then be freed)."""
        with Cluster._lock:
            item = self.items.pop(id(h), None)
            if item is not None and self.handle is not None:
                lib.sw_cluster_remove(self.handle, h)  # waits for a round in flight

    @classmethod
    def shutdown(cls) -> None:
        """Stop every refiller (atexit): after this no thread of libsw reads a
        limiter, whatever order the interpreter frees them in."""
        with cls._lock:
            cls._closed = True
            for c in cls._all.values():
                if c.handle is not None:
                    lib.sw_cluster_free(c.handle)  # joins the refiller
                    c.handle = None

    @classmethod
    def after_fork(cls) -> None:
        cls._lock = threading.Lock()  # a thread of the parent may have held it
        if cls._closed:
            return
        for c in cls._all.values():
            # the parent's refiller thread is gone here, and its lock may be
            # held: the copy is left alone (leaked), a new cluster takes over
            c.handle = None
            try:
                c.handle = c._open()
            except Exception as e:  # pragma: no cover - out of memory, no thread
                log.warning("libsw: no cluster refiller in the forked child: %s", e)
                continue
            for h, resource in c.items.values():
                lib.sw_cluster_add(c.handle, h, resource)


atexit.register(Cluster.shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=Cluster.after_fork)


def resource_name(name: Optional[str]) -> bytes:
    """The Redis resource of a limiter name: 1..63 bytes, no NUL."""
    b = to_bytes_name(name if name is not None else "default", "name")
    if not 1 <= len(b) <= 63:
        raise ArgumentError("name=%r is %d bytes: a cluster resource is 1..63" % (name, len(b)),
                            lib.SW_ERANGE)
    return b



__all__ = ["Cluster", "FAILURES", "Settings", "resource_name"]
