# SPDX-License-Identifier: Apache-2.0
"""Rules as data: Sentinel's FlowRule JSON list (docs/rules.md).

``load_rules(path)`` reads a file into :class:`FlowRule` objects, parsed and
checked by the C library (``sw_rules_parse``, on jansson): the fields and
messages of ``swctl rules`` and of the Lua binding, each rule checked whole
(its fields, its options and a limiter made with it). ``limiters_from_file``
makes a :class:`RateLimiter` per rule, and :class:`RuleWatcher` re-reads the
file when it changes and applies the new rules to those limiters — live, in
every process sharing their segment, statistics kept. A file that does not
parse or names a bad value changes nothing: the error names the rule and
the field, and the rules in force stay.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ._errors import ArgumentError, check
from ._libsw import ffi, lib
from ._limiter import RateLimiter
from ._util import get_opt, new_options, set_opt

__all__ = ["FlowRule", "RuleWatcher", "limiters_from_file", "load_rules", "parse_rules"]

_BEHAVIOR_NAMES = {0: "reject", 1: "warm_up", 2: "pacing", 3: "warm_up_pacing"}


@dataclass(frozen=True)
class FlowRule:
    """One rule of a FlowRule list, with Sentinel's defaults."""

    resource: str
    count: float
    grade: int = 1  # 0: concurrency (Sentinel's threads), 1: QPS
    control_behavior: int = 0  # 0 reject, 1 warm up, 2 pacing, 3 warm up + pacing
    warm_up_period_sec: int = 10
    max_queueing_time_ms: int = 500
    cluster_mode: bool = False
    strict: bool = True
    dry_run: bool = False
    keyed: Optional[bool] = None
    capacity: Optional[int] = None

    def limiter_kwargs(self) -> Dict[str, Any]:
        """The rule as :class:`RateLimiter` arguments."""
        kw: Dict[str, Any] = {"qps" if self.grade == 1 else "concurrency": self.count}
        kw.update(behavior=_BEHAVIOR_NAMES[self.control_behavior], warm_up=self.warm_up_period_sec,
                  max_queue=self.max_queueing_time_ms / 1000.0, strict=self.strict,
                  dry_run=self.dry_run)
        return kw

    def to_json(self) -> Dict[str, Any]:
        """The canonical object (the one ``swctl rules get`` writes)."""
        count: Union[int, float] = self.count
        if float(count).is_integer() and abs(count) < 9e15:
            count = int(count)
        d: Dict[str, Any] = {
            "resource": self.resource, "limitApp": "default", "grade": self.grade, "count": count,
            "strategy": 0, "controlBehavior": self.control_behavior,
            "warmUpPeriodSec": self.warm_up_period_sec, "maxQueueingTimeMs": self.max_queueing_time_ms,
            "clusterMode": self.cluster_mode, "strict": self.strict, "dryRun": self.dry_run,
        }
        if self.keyed is not None:
            d["keyed"] = self.keyed
        if self.capacity is not None:
            d["capacity"] = self.capacity
        return d

    def options(self) -> Any:
        """The rule as C options (sw_options *), checked by their bounds."""
        o = new_options()
        for key, value, field in (
                (lib.SW_OPT_GRADE, self.grade, "grade"), (lib.SW_OPT_THRESHOLD, self.count, "count"),
                (lib.SW_OPT_BEHAVIOR, self.control_behavior, "controlBehavior"),
                (lib.SW_OPT_WARM_UP_SEC, self.warm_up_period_sec, "warmUpPeriodSec"),
                (lib.SW_OPT_MAX_QUEUE_MS, self.max_queueing_time_ms, "maxQueueingTimeMs"),
                (lib.SW_OPT_CLUSTER, int(self.cluster_mode), "clusterMode"),
                (lib.SW_OPT_STRICT, int(self.strict), "strict"),
                (lib.SW_OPT_DRY_RUN, int(self.dry_run), "dryRun")):
            set_opt(o, key, value, field)
        return o


def _invalid(message: str) -> ArgumentError:
    return ArgumentError(message, lib.SW_EINVAL)


def parse_rules(text: Union[str, bytes]) -> List[FlowRule]:
    """The rules of a FlowRule JSON list; :class:`ArgumentError` naming the
    rule and the field (or where the JSON breaks) for a bad one
    (:class:`AlreadyExistsError` for a resource with two rules,
    :class:`NotSupportedError` from a libsw built without jansson)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    p = ffi.new("sw_rules **")
    check(lib.sw_rules_parse(p, data, len(data)))
    rules = ffi.gc(p[0], lib.sw_rules_free)
    o = new_options()
    res, keyed, capacity = ffi.new("const char **"), ffi.new("int64_t *"), ffi.new("int64_t *")
    out = []
    for i in range(lib.sw_rules_count(rules)):
        check(lib.sw_rules_at(rules, i, res, o, keyed, capacity))
        out.append(FlowRule(
            resource=ffi.string(res[0]).decode("utf-8"), count=get_opt(o, lib.SW_OPT_THRESHOLD),
            grade=int(get_opt(o, lib.SW_OPT_GRADE)),
            control_behavior=int(get_opt(o, lib.SW_OPT_BEHAVIOR)),
            warm_up_period_sec=int(get_opt(o, lib.SW_OPT_WARM_UP_SEC)),
            max_queueing_time_ms=int(get_opt(o, lib.SW_OPT_MAX_QUEUE_MS)),
            cluster_mode=bool(get_opt(o, lib.SW_OPT_CLUSTER)),
            strict=bool(get_opt(o, lib.SW_OPT_STRICT)), dry_run=bool(get_opt(o, lib.SW_OPT_DRY_RUN)),
            keyed=None if keyed[0] < 0 else bool(keyed[0]), capacity=int(capacity[0]) or None))
    return out


def load_rules(path: Union[str, "os.PathLike[str]"]) -> List[FlowRule]:
    """The rules of the file at path (see :func:`parse_rules`)."""
    with open(path, "rb") as f:
        return parse_rules(f.read())


def _apply(lim: RateLimiter, rule: FlowRule) -> None:
    """The rule on an existing limiter, live (statistics kept)."""
    o = rule.options()
    if lim._kt is not None:  # a keyed table: one rule for every key
        lim._kt.set_rule(o, "rule of %s" % rule.resource)
    check(lib.sw_limiter_set_rule(lim._handle(), o), "rule of %s" % rule.resource)


def limiters_from_file(path: Union[str, "os.PathLike[str]"], **common: Any) -> Dict[str, RateLimiter]:
    """A :class:`RateLimiter` per rule of the file, named by its resource,
    with the common arguments (segment=, capacity=, ...). In a segment that
    exists, a limiter that exists is given the file's rule."""
    made: Dict[str, RateLimiter] = {}
    try:
        for r in load_rules(path):
            lim = made[r.resource] = RateLimiter(name=r.resource, **r.limiter_kwargs(), **common)
            _apply(lim, r)  # an existing limiter of a segment keeps its rule otherwise
    except BaseException:
        for lim in made.values():
            lim.close()
        raise
    return made


class RuleWatcher:
    """Re-reads a rule file when it changes (its size, time or inode; a file
    replaced by a rename, as editors and configuration tools do, counts)
    and applies its rules to ``limiters`` (resource -> RateLimiter). A file
    that does not parse or names a bad value, or a resource it does not
    know, changes nothing: ``on_error`` gets the error (default: ignored,
    kept in ``last_error``) and the rules in force stay.

    ``check()`` looks once (returns True when it applied a new version);
    ``start()`` looks every ``interval`` seconds on a daemon thread until
    ``stop()``. Usable as a context manager."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], limiters: Mapping[str, RateLimiter], *,
                 interval: float = 1.0, on_error: Optional[Callable[[Exception], Any]] = None) -> None:
        if not interval > 0:
            raise _invalid("interval=%r: want seconds > 0" % (interval,))
        self.path = os.fspath(path)
        self.limiters = dict(limiters)
        self.interval = float(interval)
        self.on_error = on_error
        self.last_error: Optional[Exception] = None
        self.applied = 0  # versions applied
        self._seen = self._stamp()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _stamp(self) -> Any:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def check(self) -> bool:
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return False
        self._seen = stamp
        try:
            rules = load_rules(self.path)
            unknown = [r.resource for r in rules if r.resource not in self.limiters]
            if unknown:
                raise _invalid("%s: no limiter for %s" % (self.path, ", ".join(map(repr, unknown))))
            for r in rules:  # checked whole above: each is one C call now
                _apply(self.limiters[r.resource], r)
        except Exception as e:  # noqa: BLE001 (reported, and the rules in force stay)
            self.last_error = e
            if self.on_error is not None:
                self.on_error(e)
            return False
        self.last_error = None
        self.applied += 1
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()

    def start(self) -> "RuleWatcher":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="libsw-rules", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "RuleWatcher":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
