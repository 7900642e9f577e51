# SPDX-License-Identifier: Apache-2.0
"""Raw sliding windows: LeapArray (any bucket type), Metric (Sentinel's
ArrayMetric), SlidingView (sentinel-golang's SlidingWindowMetric).

Every reading or writing method takes an optional ``now`` (milliseconds):
without it the C library reads its clock (CLOCK_MONOTONIC)."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from ._errors import ArgumentError, ClosedError, check, error_from_code
from ._libsw import ffi, lib
from ._util import keep_alive, new_options, set_opt, to_bytes_name, want_int, want_now

_EVENTS = {
    "pass": lib.SW_EVENT_PASS,
    "block": lib.SW_EVENT_BLOCK,
    "exception": lib.SW_EVENT_EXCEPTION,
    "success": lib.SW_EVENT_SUCCESS,
    "rt": lib.SW_EVENT_RT,
    "occupied_pass": lib.SW_EVENT_OCCUPIED_PASS,
}


def _event(e: Union[str, int]) -> int:
    if isinstance(e, str):
        try:
            return _EVENTS[e]
        except KeyError:
            raise ArgumentError("event %r is not one of %s" % (e, ", ".join(_EVENTS)), lib.SW_ERANGE) from None
    return want_int(e, "event", 0, len(_EVENTS) - 1)


def _i64(v: int, what: str) -> int:
    if v < 0:
        raise error_from_code(v, what)
    return v


@dataclass(frozen=True)
class MetricRecord:
    """One window of a metric (Sentinel's MetricNode fields)."""

    start_ms: int
    pass_: int
    block: int
    exception: int
    success: int
    rt: int
    occupied_pass: int
    min_rt: int

    def as_dict(self) -> Dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Window:
    """One window of a leap array: its start, length, ring slot and the
    values of its bucket's fields (empty for a type without generic
    access)."""

    start_ms: int
    length_ms: int
    slot: int
    detached: bool = False
    values: Dict[str, int] = field(default_factory=dict)


def _record(r: Any) -> MetricRecord:
    return MetricRecord(r.start_ms, getattr(r, "pass"), r.block, r.exception, r.success, r.rt,
                        r.occupied_pass, r.min_rt)


def load_plugin(path: Union[str, bytes, "os.PathLike[str]"]) -> int:
    """Load a bucket-type plugin (a shared object exporting sw_plugin_entry)
    and register its types; returns how many were registered. Raises
    PluginError (cannot be loaded, wrong ABI) or AlreadyExistsError (a type
    name is taken, e.g. the same plugin loaded twice)."""
    b = to_bytes_name(path, "plugin path")
    n = ffi.new("uint32_t *")
    check(lib.sw_plugin_load(b, n), "load_plugin(%r)" % (os.fsdecode(b),))
    return int(n[0])


def bucket_type_fields(type_name: str) -> Tuple[str, ...]:
    """Field names of a registered bucket type (empty without generic access)."""
    t = lib.sw_bucket_type_find(to_bytes_name(type_name, "type name"))
    if t == ffi.NULL:
        raise error_from_code(lib.SW_ENOTFOUND, "bucket type %r" % (type_name,))
    return _fields(t)


def _fields(t: Any) -> Tuple[str, ...]:
    if t.field_names == ffi.NULL:
        return ()
    return tuple(ffi.string(t.field_names[i]).decode() for i in range(t.field_count))


class LeapArray:
    """A ring of ``sample_count`` windows covering ``interval_ms``, holding
    buckets of a registered type: the built-in ``"sw.metric"`` (fields pass,
    block, exception, success, rt, occupied_pass, min_rt) or a plugin's
    (see :func:`load_plugin`). Fields are added to and summed by name."""

    def __init__(self, type_name: str = "sw.metric", sample_count: int = 2, interval_ms: int = 1000) -> None:
        if not isinstance(type_name, str):
            raise TypeError("type_name must be a str, not %s" % type(type_name).__name__)
        want_int(sample_count, "sample_count", -(2**31), 2**31 - 1)
        want_int(interval_ms, "interval_ms", -(2**63), 2**63 - 1)
        p = ffi.new("sw_leap_array **")
        check(lib.sw_leap_array_create_by_name(p, type_name.encode(), ffi.NULL, sample_count, interval_ms),
              "LeapArray(%r, %d, %d)" % (type_name, sample_count, interval_ms))
        self._setup(ffi.gc(p[0], lib.sw_leap_array_free))

    @classmethod
    def _borrowed(cls, h: Any) -> "LeapArray":
        self = object.__new__(cls)
        self._setup(h)
        return self

    def _setup(self, h: Any) -> None:
        self._h = h
        self._type = lib.sw_leap_array_type(h)
        self._type_name = ffi.string(self._type.name).decode()
        self._fields = _fields(self._type)
        self._index = {n: i for i, n in enumerate(self._fields)}
        self._n = lib.sw_leap_array_sample_count(h)
        self._get = self._type.get if self._type.get != ffi.NULL else None
        self._is_metric = self._type_name.startswith("sw.metric")

    def _handle(self) -> Any:
        h = self._h
        if h is None:
            raise ClosedError("LeapArray is closed")
        return h

    def close(self) -> None:
        self._h = None

    @property
    def type_name(self) -> str:
        return self._type_name

    @property
    def fields(self) -> Tuple[str, ...]:
        return self._fields

    @property
    def sample_count(self) -> int:
        return self._n

    @property
    def interval_ms(self) -> int:
        return int(lib.sw_leap_array_interval_ms(self._handle()))

    @property
    def window_length_ms(self) -> int:
        return int(lib.sw_leap_array_window_length_ms(self._handle()))

    @property
    def detached_count(self) -> int:
        """Calls whose time was behind the stored window (clock went back)."""
        return int(lib.sw_leap_array_detached_count(self._handle()))

    def _field(self, f: Union[str, int]) -> int:
        if isinstance(f, str):
            try:
                return self._index[f]
            except KeyError:
                raise ArgumentError("%s has no field %r (fields: %s)" % (self._type_name, f, ", ".join(self._fields)),
                                    lib.SW_ERANGE) from None
        return want_int(f, "field", 0, 2**32 - 1)

    def add(self, field: Union[str, int], n: int = 1, now: Optional[int] = None) -> None:
        """Add n to a field of the current window (at now)."""
        h = self._handle()
        fi = self._field(field)
        n = want_int(n, "n", -(2**63), 2**63 - 1)
        rc = lib.sw_leap_array_add(h, fi, n) if now is None else lib.sw_leap_array_add_at(h, want_now(now), fi, n)
        check(rc, "add")

    def sum(self, field: Union[str, int], now: Optional[int] = None) -> int:
        """A field combined over the sliding interval ending at now (summed,
        or min / max by the field's kind)."""
        h = self._handle()
        fi = self._field(field)
        out = ffi.new("int64_t *")
        t = lib.sw_now_ms() if now is None else want_now(now)
        check(lib.sw_leap_array_sum_at(h, t, fi, out), "sum")
        return int(out[0])

    def _window(self, w: Any) -> Window:
        values: Dict[str, int] = {}
        if self._get is not None and w.bucket != ffi.NULL:
            if self._is_metric:
                for i, name in enumerate(self._fields):
                    values[name] = int(lib.sw_metric_bucket_get(self._h, w.bucket, i))
            else:  # arrays created by name have no context
                for i, name in enumerate(self._fields):
                    values[name] = int(self._get(ffi.NULL, w.bucket, i))
        return Window(int(w.start_ms), int(w.length_ms), int(w.slot),
                      bool(w.flags & lib.SW_WINDOW_DETACHED), values)

    def current_window(self, now: Optional[int] = None) -> Window:
        """The window containing now, created or reset as needed."""
        h = self._handle()
        w = ffi.new("sw_window *")
        if now is None:
            check(lib.sw_leap_array_current_window(h, w), "current_window")
        else:
            check(lib.sw_leap_array_current_window_at(h, want_now(now), w), "current_window")
        return self._window(w)

    def previous_window(self, now: Optional[int] = None) -> Optional[Window]:
        h = self._handle()
        w = ffi.new("sw_window *")
        rc = (lib.sw_leap_array_previous_window(h, w) if now is None
              else lib.sw_leap_array_previous_window_at(h, want_now(now), w))
        return self._window(w) if check(rc, "previous_window") == 1 else None

    def window_value(self, now: int) -> Optional[Window]:
        """The stored window containing now, or None."""
        h = self._handle()
        w = ffi.new("sw_window *")
        rc = lib.sw_leap_array_window_value_at(h, want_now(now), w)
        return self._window(w) if check(rc, "window_value") == 1 else None

    def valid_head(self, now: Optional[int] = None) -> Optional[Window]:
        h = self._handle()
        w = ffi.new("sw_window *")
        rc = (lib.sw_leap_array_valid_head(h, w) if now is None
              else lib.sw_leap_array_valid_head_at(h, want_now(now), w))
        return self._window(w) if check(rc, "valid_head") == 1 else None

    def windows(self, now: Optional[int] = None) -> List[Window]:
        """The windows of the sliding interval ending at now, oldest first."""
        h = self._handle()
        cap = self._n
        while True:
            buf = ffi.new("sw_window[]", cap)
            rc = lib.sw_leap_array_list(h, buf, cap) if now is None else lib.sw_leap_array_list_at(h, want_now(now), buf, cap)
            check(rc, "windows")
            if rc <= cap:
                return [self._window(buf[i]) for i in range(rc)]
            cap = rc

    def all_windows(self) -> List[Window]:
        """Every stored window, whatever its age, oldest first."""
        h = self._handle()
        cap = self._n
        buf = ffi.new("sw_window[]", cap)
        rc = check(lib.sw_leap_array_list_all(h, buf, cap), "all_windows")
        return [self._window(buf[i]) for i in range(min(rc, cap))]

    def time_index(self, t: int) -> int:
        out = ffi.new("int32_t *")
        check(lib.sw_leap_array_time_index(self._handle(), want_now(t), out), "time_index")
        return int(out[0])

    def window_start(self, t: int) -> int:
        out = ffi.new("int64_t *")
        check(lib.sw_leap_array_window_start(self._handle(), want_now(t), out), "window_start")
        return int(out[0])

    def is_window_deprecated(self, now: int, start_ms: int) -> bool:
        rc = lib.sw_leap_array_is_window_deprecated_at(self._handle(), want_now(now), want_now(start_ms))
        return check(rc, "is_window_deprecated") == 1

    def __repr__(self) -> str:
        return "<libsw.LeapArray %s %d windows>" % (self._type_name, self._n)


class Metric:
    """Sentinel's ArrayMetric over a ``sample_count`` x ``interval_ms``
    leap array of metric buckets; ``occupiable=True`` makes it borrow from
    future windows (OccupiableBucketLeapArray)."""

    def __init__(self, sample_count: int = 2, interval_ms: int = 1000, occupiable: bool = False, *,
                 stripes: Optional[int] = None, max_rt_ms: Optional[int] = None) -> None:
        want_int(sample_count, "sample_count", -(2**31), 2**31 - 1)
        want_int(interval_ms, "interval_ms", -(2**63), 2**63 - 1)
        opts = new_options()
        set_opt(opts, lib.SW_OPT_OCCUPIABLE, 1 if occupiable else 0)
        if stripes is not None:
            set_opt(opts, lib.SW_OPT_STRIPES, want_int(stripes, "stripes"), "stripes")
        if max_rt_ms is not None:
            set_opt(opts, lib.SW_OPT_MAX_RT_MS, want_int(max_rt_ms, "max_rt_ms"), "max_rt_ms")
        p = ffi.new("sw_metric **")
        check(lib.sw_metric_create(p, sample_count, interval_ms, opts),
              "Metric(%d, %d)" % (sample_count, interval_ms))
        self._h = ffi.gc(p[0], lib.sw_metric_free)
        self._n = sample_count

    @classmethod
    def _borrowed(cls, h: Any) -> "Metric":
        self = object.__new__(cls)
        self._h = h
        self._n = lib.sw_metric_sample_count(h)
        return self

    def _handle(self) -> Any:
        h = self._h
        if h is None:
            raise ClosedError("Metric is closed")
        return h

    def close(self) -> None:
        self._h = None

    @property
    def sample_count(self) -> int:
        return self._n

    @property
    def interval_sec(self) -> float:
        return float(lib.sw_metric_interval_sec(self._handle()))

    @property
    def leap_array(self) -> LeapArray:
        """The underlying array (a live view)."""
        h = self._handle()
        return LeapArray._borrowed(keep_alive(lib.sw_metric_leap_array(h), h))

    def view(self, sample_count: int, interval_ms: int) -> "SlidingView":
        """sentinel-golang's SlidingWindowMetric over this metric's array."""
        return SlidingView(self, sample_count, interval_ms)

    # sums over the interval ending at now
    def _sum(self, fn: Any, fn_at: Any, now: Optional[int], what: str) -> int:
        h = self._handle()
        return _i64(fn(h) if now is None else fn_at(h, want_now(now)), what)

    def pass_(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_pass, lib.sw_metric_pass_at, now, "pass")

    def block(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_block, lib.sw_metric_block_at, now, "block")

    def exception(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_exception, lib.sw_metric_exception_at, now, "exception")

    def success(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_success, lib.sw_metric_success_at, now, "success")

    def rt(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_rt, lib.sw_metric_rt_at, now, "rt")

    def occupied_pass(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_occupied_pass, lib.sw_metric_occupied_pass_at, now, "occupied_pass")

    def min_rt(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_min_rt, lib.sw_metric_min_rt_at, now, "min_rt")

    def max_success(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_max_success, lib.sw_metric_max_success_at, now, "max_success")

    def previous_window_pass(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_previous_window_pass, lib.sw_metric_previous_window_pass_at, now,
                         "previous_window_pass")

    def previous_window_block(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_previous_window_block, lib.sw_metric_previous_window_block_at, now,
                         "previous_window_block")

    def waiting(self, now: Optional[int] = None) -> int:
        return self._sum(lib.sw_metric_waiting, lib.sw_metric_waiting_at, now, "waiting")

    def window_pass(self, now: Optional[int] = None) -> int:
        """PASS of the stored window containing now (0 if none)."""
        h = self._handle()
        t = lib.sw_now_ms() if now is None else want_now(now)
        return _i64(lib.sw_metric_window_pass_at(h, t), "window_pass")

    def sum(self, event: Union[str, int], now: Optional[int] = None) -> int:
        h = self._handle()
        t = lib.sw_now_ms() if now is None else want_now(now)
        return _i64(lib.sw_metric_sum_at(h, t, _event(event)), "sum")

    # adding to the current window
    def _add(self, fn: Any, fn_at: Any, n: int, now: Optional[int], what: str) -> None:
        h = self._handle()
        n = want_int(n, "n", -(2**63), 2**63 - 1)
        check(fn(h, n) if now is None else fn_at(h, want_now(now), n), what)

    def add_pass(self, n: int = 1, now: Optional[int] = None) -> None:
        self._add(lib.sw_metric_add_pass, lib.sw_metric_add_pass_at, n, now, "add_pass")

    def add_block(self, n: int = 1, now: Optional[int] = None) -> None:
        self._add(lib.sw_metric_add_block, lib.sw_metric_add_block_at, n, now, "add_block")

    def add_exception(self, n: int = 1, now: Optional[int] = None) -> None:
        self._add(lib.sw_metric_add_exception, lib.sw_metric_add_exception_at, n, now, "add_exception")

    def add_success(self, n: int = 1, now: Optional[int] = None) -> None:
        self._add(lib.sw_metric_add_success, lib.sw_metric_add_success_at, n, now, "add_success")

    def add_occupied_pass(self, n: int = 1, now: Optional[int] = None) -> None:
        self._add(lib.sw_metric_add_occupied_pass, lib.sw_metric_add_occupied_pass_at, n, now, "add_occupied_pass")

    def add_rt(self, rt_ms: int, now: Optional[int] = None) -> None:
        """Add a response time (to RT, lowering the window's min RT)."""
        self._add(lib.sw_metric_add_rt, lib.sw_metric_add_rt_at, rt_ms, now, "add_rt")

    def add_waiting(self, future_ms: int, n: int = 1) -> None:
        """Borrow n passes from the window containing future_ms (occupiable only)."""
        h = self._handle()
        check(lib.sw_metric_add_waiting(h, want_now(future_ms), want_int(n, "n", -(2**63), 2**63 - 1)),
              "add_waiting")

    def try_pass(self, n: int, limit: int, now: Optional[int] = None) -> Tuple[bool, int]:
        """Check-then-add as Sentinel's DefaultController: (passed, pass
        count before the add)."""
        h = self._handle()
        n = want_int(n, "n", -(2**63), 2**63 - 1)
        limit = want_int(limit, "limit", -(2**63), 2**63 - 1)
        out = ffi.new("int64_t *")
        rc = (lib.sw_metric_try_pass(h, n, limit, out) if now is None
              else lib.sw_metric_try_pass_at(h, want_now(now), n, limit, out))
        return check(rc, "try_pass") == 1, int(out[0])

    def details(self, now: Optional[int] = None) -> List[MetricRecord]:
        """One record per window of the interval ending at now, oldest first."""
        h = self._handle()
        cap = self._n
        while True:
            buf = ffi.new("sw_metric_record[]", cap)
            rc = lib.sw_metric_details(h, buf, cap) if now is None else lib.sw_metric_details_at(h, want_now(now), buf, cap)
            check(rc, "details")
            if rc <= cap:
                return [_record(buf[i]) for i in range(rc)]
            cap = rc

    def __repr__(self) -> str:
        return "<libsw.Metric %d windows>" % self._n


class SlidingView:
    """A read-only ``sample_count`` x ``interval_ms`` view over a Metric's
    larger array (sentinel-golang's SlidingWindowMetric)."""

    def __init__(self, metric: Metric, sample_count: int, interval_ms: int) -> None:
        if not isinstance(metric, Metric):
            raise TypeError("metric must be a libsw.Metric")
        mh = metric._handle()
        want_int(sample_count, "sample_count", -(2**31), 2**31 - 1)
        want_int(interval_ms, "interval_ms", -(2**63), 2**63 - 1)
        p = ffi.new("sw_sliding_view **")
        check(lib.sw_sliding_view_create(p, mh, sample_count, interval_ms), "SlidingView")
        self._metric_h = mh  # the metric must outlive the view
        self._h = ffi.gc(p[0], lib.sw_sliding_view_free)

    def _t(self, now: Optional[int]) -> int:
        return lib.sw_now_ms() if now is None else want_now(now)

    def sum(self, event: Union[str, int], now: Optional[int] = None) -> int:
        return _i64(lib.sw_sliding_view_sum_at(self._h, self._t(now), _event(event)), "sum")

    def qps(self, event: Union[str, int], now: Optional[int] = None) -> float:
        v = lib.sw_sliding_view_qps_at(self._h, self._t(now), _event(event))
        return float(_i64(int(v), "qps")) if v < 0 else v

    def previous_qps(self, event: Union[str, int], now: Optional[int] = None) -> float:
        v = lib.sw_sliding_view_previous_qps_at(self._h, self._t(now), _event(event))
        return float(_i64(int(v), "previous_qps")) if v < 0 else v

    def max_of_single_bucket(self, event: Union[str, int], now: Optional[int] = None) -> int:
        return _i64(lib.sw_sliding_view_max_of_single_bucket_at(self._h, self._t(now), _event(event)),
                    "max_of_single_bucket")

    def min_rt(self, now: Optional[int] = None) -> int:
        return _i64(lib.sw_sliding_view_min_rt_at(self._h, self._t(now)), "min_rt")

    def avg_rt(self, now: Optional[int] = None) -> float:
        v = lib.sw_sliding_view_avg_rt_at(self._h, self._t(now))
        return float(_i64(int(v), "avg_rt")) if v < 0 else v
