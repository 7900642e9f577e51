# SPDX-License-Identifier: Apache-2.0
"""Rules as data: Sentinel's FlowRule JSON loaded from a file, applied to
limiters, and followed by a watcher (docs/rules.md)."""
import json
import os

import pytest

import libsw
from conftest import REPO

EXAMPLES = os.path.join(REPO, "tests", "observability", "rules")
# the repository's example files: not in the sdist (a wheel's tests run without a clone)
needs_examples = pytest.mark.skipif(not os.path.isdir(EXAMPLES),
                                    reason="needs the libsw repository (tests/observability/rules)")


@needs_examples
def test_sentinel_examples_load_unchanged():
    for name in sorted(os.listdir(EXAMPLES)):
        rules = libsw.load_rules(os.path.join(EXAMPLES, name))
        assert rules, name
    (orders, checkout, uploads) = libsw.load_rules(os.path.join(EXAMPLES, "sentinel-dashboard.json"))
    assert (orders.resource, orders.count, orders.control_behavior) == ("GET:/api/orders", 100, 2)
    assert checkout.limiter_kwargs()["behavior"] == "warm_up"
    assert uploads.limiter_kwargs() == {"concurrency": 4.0, "behavior": "reject", "warm_up": 10,
                                        "max_queue": 0.5, "strict": True, "dry_run": False}


@needs_examples
def test_canonical_form_round_trips():
    rules = libsw.load_rules(os.path.join(EXAMPLES, "libsw-extras.json"))
    text = json.dumps([r.to_json() for r in rules])
    assert libsw.parse_rules(text) == rules
    assert rules[0].to_json()["count"] == 0.5 and rules[0].dry_run and not rules[0].strict


@pytest.mark.parametrize("text, message", [
    ('[{"resource": "a", "count": 1}', "not JSON"),
    ('{"resource": "a"}', "want a JSON array"),
    ('[{"resource": "a", "count": -1}]', 'rule 1 (resource "a"): count: want a number >= 0'),
    ('[{"resource": "a", "count": 1}, {"resource": "b", "count": 1, "grade": 2}]',
     'rule 2 (resource "b"): grade: 2 is outside 0..1'),
    ('[{"resource": "a", "count": 1, "cuont": 2}]', 'rule 1 (resource "a"): cuont: not a field'),
    ('[{"resource": "a", "count": 1, "strategy": 1}]', "strategy: 1 (relate) is not supported"),
    ('[{"resource": "a", "count": 1, "limitApp": "appA"}]', 'limitApp: libsw limits every caller'),
    ('[{"resource": "a", "count": 1}, {"resource": "a", "count": 2}]', 'resource "a" already has rule 1'),
    ('[{"resource": "a", "count": 1, "count": 2}]', "duplicate object key"),
    ('[{"resource": "a", "count": 1, "grade": 0, "controlBehavior": 1}]', 'rule 1 (resource "a")'),
])
def test_bad_rules_name_the_rule_and_field(text, message):
    """The C library's checks and messages (swctl rules and Lua say the same)."""
    with pytest.raises((libsw.ArgumentError, libsw.AlreadyExistsError)) as e:
        libsw.parse_rules(text)
    assert message in str(e.value)
    # a resource with two rules: SW_EEXIST (AlreadyExistsError); the rest SW_EINVAL
    assert e.value.code_name == ("SW_EEXIST" if "already has" in message else "SW_EINVAL")


def test_limiters_from_file_and_watcher(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([{"resource": "api", "count": 3}, {"resource": "search", "count": 2}]))
    clock = libsw.ManualClock(1000)
    lims = libsw.limiters_from_file(path, clock=clock)
    api = lims["api"]
    assert [bool(api.try_acquire()) for _ in range(4)] == [True, True, True, False]
    errors = []
    watcher = libsw.RuleWatcher(path, lims, on_error=errors.append)
    assert not watcher.check()  # unchanged
    # a new version, written elsewhere and renamed over the file as editors do
    tmp = tmp_path / "rules.json.new"
    tmp.write_text(json.dumps([{"resource": "api", "count": 5, "dryRun": True},
                               {"resource": "search", "count": 2}]))
    os.replace(tmp, path)
    assert watcher.check() and watcher.applied == 1
    assert api.rule()["threshold"] == 5 and api.stats().pass_qps == 3  # statistics kept
    assert [bool(api.try_acquire()) for _ in range(3)] == [True, True, True]  # dry run
    # a bad version changes nothing and is reported
    tmp.write_text('[{"resource": "api", "count": -5}]')
    os.replace(tmp, path)
    assert not watcher.check()
    assert "count: want a number >= 0" in str(errors[-1]) and api.rule()["threshold"] == 5
    tmp.write_text('[{"resource": "other", "count": 1}]')
    os.replace(tmp, path)
    assert not watcher.check() and "no limiter for 'other'" in str(watcher.last_error)
    for lim in lims.values():
        lim.close()


def test_watcher_thread_applies_changes(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text('[{"resource": "api", "count": 1}]')
    lims = libsw.limiters_from_file(path)
    with libsw.RuleWatcher(path, lims, interval=0.05) as w:
        tmp = tmp_path / "new"
        tmp.write_text('[{"resource": "api", "count": 7}]')
        os.replace(tmp, path)
        for _ in range(200):  # liveness bound, not a timing assertion
            if w.applied:
                break
            import time
            time.sleep(0.05)
    assert lims["api"].rule()["threshold"] == 7
    lims["api"].close()
