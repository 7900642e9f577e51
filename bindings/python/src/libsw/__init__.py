# SPDX-License-Identifier: Apache-2.0
"""libsw: Sentinel-style sliding-window statistics and rate limiting.

A CFFI binding of the libsw C library, whose core is compiled into
``libsw._libsw``. Start with :class:`RateLimiter`::

    import libsw

    limiter = libsw.RateLimiter(10)          # 10 passes per second

    @limiter
    def handler(request): ...

    try:
        handler(req)
    except libsw.BlockedError as e:
        reply(429, retry_after=e.retry_after)

See docs/python.md in the libsw repository.
"""
from __future__ import annotations

import os
from typing import Union

from ._breaker import BreakerStats, CircuitBreaker, CircuitOpenError
from ._clock import ManualClock, clock_resolution, now_ms, now_ns, use_clock, use_coarse_clock
from ._errors import (
    AlreadyExistsError,
    ArgumentError,
    BlockedError,
    ClosedError,
    Error,
    NotFoundError,
    NotSupportedError,
    OutOfMemoryError,
    PluginError,
    RegistryFullError,
    SegmentError,
    SegmentPermissionError,
    StateError,
    check,
)
from ._keyed import KeyDigest, KeyedStats, KeyLimiter, KeyStats, keys_segments
from ._libsw import ffi, lib
from ._limiter import RateLimiter, Stats
from ._permit import Permit
from ._rules import FlowRule, RuleWatcher, limiters_from_file, load_rules, parse_rules
from ._util import to_bytes_name
from ._window import LeapArray, Metric, MetricRecord, SlidingView, Window, bucket_type_fields, load_plugin

__version__: str = ffi.string(lib.sw_version_string()).decode()
version_info = (lib.SW_VERSION_MAJOR, lib.SW_VERSION_MINOR, lib.SW_VERSION_PATCH)


def unlink_segment(name: Union[str, bytes]) -> None:
    """Remove a shared segment's name, and those of its limiters' keyed
    tables (``"<name>.keys.<limiter name>"``) and libsw.web's mark of its
    last reset (``"<name>.reset"``). Processes attached keep their mapping;
    the next open creates a new segment. A missing segment is not an
    error."""
    seg = to_bytes_name(name, "segment")
    check(lib.sw_segment_unlink(seg), "unlink_segment")
    for keys in keys_segments(seg):
        check(lib.sw_segment_unlink(keys), "unlink_segment")
    mark = seg + b".reset" if b"/" in seg else b"/dev/shm/" + seg + b".reset"
    try:
        os.unlink(mark)
    except FileNotFoundError:
        pass



__all__ = [
    "AlreadyExistsError",
    "ArgumentError",
    "BlockedError",
    "BreakerStats",
    "CircuitBreaker",
    "CircuitOpenError",
    "ClosedError",
    "Error",
    "FlowRule",
    "KeyDigest",
    "KeyLimiter",
    "KeyStats",
    "KeyedStats",
    "LeapArray",
    "ManualClock",
    "Metric",
    "MetricRecord",
    "NotFoundError",
    "NotSupportedError",
    "OutOfMemoryError",
    "Permit",
    "PluginError",
    "RateLimiter",
    "RegistryFullError",
    "RuleWatcher",
    "SegmentError",
    "SegmentPermissionError",
    "SlidingView",
    "StateError",
    "Stats",
    "Window",
    "bucket_type_fields",
    "clock_resolution",
    "limiters_from_file",
    "load_plugin",
    "load_rules",
    "now_ms",
    "now_ns",
    "parse_rules",
    "unlink_segment",
    "use_clock",
    "use_coarse_clock",
    "version_info",
]
