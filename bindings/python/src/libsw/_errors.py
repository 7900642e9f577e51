# SPDX-License-Identifier: Apache-2.0
"""Exceptions of libsw and the mapping from the C error codes."""
from __future__ import annotations

import math
from typing import Dict, NoReturn, Optional, Type, Union

from ._libsw import ffi, lib


class Error(Exception):
    """A libsw call failed. ``code`` is the negative sw_err value, ``code_name``
    its name (``"SW_ERANGE"``); ``str()`` carries the C library's message
    (sw_last_error()), which names the bad value."""

    code: int
    code_name: str

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.code_name = ffi.string(lib.sw_err_name(code)).decode() if code else ""


class ArgumentError(Error, ValueError):
    """An invalid argument or value (SW_EINVAL, SW_ERANGE, SW_ESIZE, ...)."""


class NotFoundError(Error, LookupError):
    """No such name: bucket type, segment (SW_ENOTFOUND)."""


class AlreadyExistsError(Error, ValueError):
    """The name is taken, e.g. a plugin loaded twice (SW_EEXIST)."""


class RegistryFullError(Error):
    """Every place of a registry (or shared segment) is taken (SW_EFULL): a new
    key cannot get a limiter. Existing keys keep working; nothing is evicted."""


class PluginError(Error, OSError):
    """A plugin could not be loaded (SW_EPLUGIN) or has the wrong ABI (SW_EABI)."""


class SegmentError(Error, OSError):
    """A shared segment is unusable: foreign, corrupt, of another libsw layout,
    or an I/O failure (SW_EFOREIGN, SW_ECORRUPT, SW_EVERSION, SW_EIO)."""


class SegmentPermissionError(SegmentError, PermissionError):
    """Permission denied on a shared segment (SW_EPERM)."""


class NotSupportedError(Error):
    """The operation is not supported by this object (SW_ENOTSUP, SW_ETYPE)."""


class StateError(Error, RuntimeError):
    """The object is in the wrong state (SW_ESTATE)."""


class OutOfMemoryError(Error, MemoryError):
    """The C library could not allocate memory (SW_ENOMEM)."""


class ClosedError(Error, ValueError):
    """The object was closed with close(); it cannot be used any more."""


class BlockedError(Exception):
    """A limiter refused the request.

    ``retry_after``: seconds (float) until a retry of the same size can pass
    (``math.inf`` when it never can, e.g. more units than the threshold);
    ``resource``: the limiter's name or key; ``remaining``: units still
    admissible now (normally 0); ``full``: a new key refused because its
    keyed table was full of active keys (``on_full="closed"``)."""

    retry_after: float
    resource: Optional[Union[str, bytes]]
    remaining: int
    full: bool

    def __init__(self, retry_after: float, resource: Optional[Union[str, bytes]] = None, remaining: int = 0,
                 full: bool = False) -> None:
        self.retry_after = retry_after
        self.resource = resource
        self.remaining = remaining
        self.full = full
        when = "never" if math.isinf(retry_after) else "after %.3f s" % retry_after
        what = repr(resource) if isinstance(resource, bytes) else resource or "request"
        super().__init__("%s blocked%s; retry %s" % (what, " (keyed table full)" if full else "", when))

    def __reduce__(self):  # picklable across processes
        return (BlockedError, (self.retry_after, self.resource, self.remaining, self.full))


_BY_CODE: Dict[int, Type[Error]] = {
    lib.SW_EINVAL: ArgumentError,
    lib.SW_ENULL: ArgumentError,
    lib.SW_ENOMEM: OutOfMemoryError,
    lib.SW_ESIZE: ArgumentError,
    lib.SW_EOVERFLOW: ArgumentError,
    lib.SW_ETIME: ArgumentError,
    lib.SW_ERANGE: ArgumentError,
    lib.SW_ENOTFOUND: NotFoundError,
    lib.SW_EEXIST: AlreadyExistsError,
    lib.SW_EFULL: RegistryFullError,
    lib.SW_EABI: PluginError,
    lib.SW_EPLUGIN: PluginError,
    lib.SW_EVERSION: SegmentError,
    lib.SW_EGEOMETRY: ArgumentError,
    lib.SW_ECORRUPT: SegmentError,
    lib.SW_EFOREIGN: SegmentError,
    lib.SW_EIO: SegmentError,
    lib.SW_EPERM: SegmentPermissionError,
    lib.SW_ENOTSUP: NotSupportedError,
    lib.SW_ESTATE: StateError,
    lib.SW_ETYPE: NotSupportedError,
}


def error_from_code(code: int, context: str = "") -> Error:
    """The exception for a negative sw_err code, with this thread's
    sw_last_error() message (call right after the failing C call)."""
    code = int(code)
    detail = ffi.string(lib.sw_last_error()).decode("utf-8", "replace")
    if not detail:
        detail = ffi.string(lib.sw_strerror(code)).decode()
    detail = detail.replace("SW_OPT_SEGMENT_MAX_MB", "segment_max_mb")  # the argument's name here
    name = ffi.string(lib.sw_err_name(code)).decode()
    msg = "%s%s (%s)" % (context + ": " if context else "", detail, name)
    return _BY_CODE.get(code, Error)(msg, code)


def raise_code(code: int, context: str = "") -> NoReturn:
    raise error_from_code(code, context)


def check(rc: int, context: str = "") -> int:
    """Return rc if it is not an error code, else raise."""
    if rc < 0:
        raise error_from_code(rc, context)
    return rc
