# SPDX-License-Identifier: Apache-2.0
"""Argument checks shared by the modules."""
from __future__ import annotations

import contextvars
import math
import os
from typing import Optional, Union

from ._errors import ArgumentError, check
from ._libsw import ffi, lib

INT64_MAX = 2**63 - 1
# The handle of a closed limiter: C calls on it fail with SW_ENULL, which the
# slow path turns into ClosedError (no check on the fast path).
CLOSED = ffi.NULL
UINT32_MAX = 2**32 - 1


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def want_int(v: object, what: str, lo: int = 0, hi: int = INT64_MAX) -> int:
    """v as an int in lo..hi: TypeError for another type, ValueError outside."""
    if not is_int(v):
        raise TypeError("%s must be an int, not %s" % (what, type(v).__name__))
    if v < lo or v > hi:  # type: ignore[operator]
        raise ArgumentError("%s=%r is outside %d..%d" % (what, v, lo, hi), lib.SW_ERANGE)
    return int(v)  # type: ignore[call-overload]


def want_real(v: object, what: str) -> float:
    if not is_real(v):
        raise TypeError("%s must be a number, not %s" % (what, type(v).__name__))
    try:
        return float(v)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond the double range
        raise ArgumentError("%s=%r is too large" % (what, v), lib.SW_ERANGE) from None


def want_now(now: object) -> int:
    """An explicit time in milliseconds."""
    return want_int(now, "now (ms)")


def seconds_to_ms(v: object, what: str) -> float:
    """Seconds (int or float) to milliseconds, rounded when finite; the C
    library checks the range and says what is wrong."""
    ms = want_real(v, what) * 1000.0
    return float(round(ms)) if math.isfinite(ms) else ms


def to_bytes_name(name: Union[str, bytes, "os.PathLike[str]"], what: str) -> bytes:
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if isinstance(name, str):
        b = name.encode("utf-8")
    elif isinstance(name, bytes):
        b = name
    else:
        raise TypeError("%s must be str or bytes, not %s" % (what, type(name).__name__))
    if b"\0" in b:
        raise ArgumentError("%s %r contains a NUL byte" % (what, name), lib.SW_EINVAL)
    return b


def pop_entered(var: "contextvars.ContextVar[Optional[tuple]]", owner: object, what: str) -> tuple:
    """Pop the top of a `with` stack kept in a context variable as tuples
    (owner, ..., previous top); RuntimeError if owner did not enter last."""
    top = var.get()
    if top is None or top[0] is not owner:
        raise RuntimeError("%s.__exit__ without a matching __enter__ in this thread or task" % what)
    var.set(top[-1])
    return top


def new_options() -> "ffi.CData":
    p = ffi.new("sw_options **")
    check(lib.sw_options_create(p), "sw_options_create")
    return ffi.gc(p[0], lib.sw_options_free)


def set_opt(opts: "ffi.CData", key: int, value: float, what: Optional[str] = None) -> None:
    rc = lib.sw_options_set_double(opts, key, value)
    if rc < 0:
        check(rc, what or "")


def get_opt(opts: "ffi.CData", key: int) -> float:
    v = ffi.new("double *")
    check(lib.sw_options_get_double(opts, key, v))
    return v[0]


def keep_alive(ptr: "ffi.CData", *owners: object) -> "ffi.CData":
    """A copy of a borrowed pointer that keeps its owners (cdata handles with
    their destructors) alive as long as it lives."""
    return ffi.gc(ptr, lambda _p, _o=owners: None)
