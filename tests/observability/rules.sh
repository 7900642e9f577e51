#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Rules as data (run by run.sh): swctl rules get / apply / check with
# Sentinel's FlowRule JSON — the examples of Sentinel's file data source and
# of its dashboard load unchanged; a round trip is byte-identical; bad JSON
# and bad values are refused, naming the rule and the field, with nothing
# changed; a rule applied while 2 processes enter holds from the next
# window, and no entry is lost.
# Usage: tests/observability/rules.sh BUILD_DIR
set -eu
. "$(dirname "$0")/lib.sh"
make -C "$build" -s tests/observability/fixture tests/observability/keyed_fixture \
  tests/observability/rules_fixture >/dev/null
fixture="$build/tests/observability/fixture"
keyed="$build/tests/observability/keyed_fixture"
rf="$build/tests/observability/rules_fixture"
ex="$top/tests/observability/rules"
seg="swrules-$$"
kseg="swrules-k-$$"
hot="swrules-hot-$$"
segs="$seg $kseg $hot"
"$fixture" "$seg" > /dev/null
"$keyed" "$kseg" exact > /dev/null

echo "--- Sentinel's examples load unchanged; the round trip is byte-identical"
for f in "$ex"/*.json; do
  "$swctl" rules check "$f" > "$work/canon.json" || fail "$f refused"
  "$swctl" rules apply "$seg" "$f" || fail "apply $f"
  "$swctl" rules get "$seg" > "$work/got.json"
  # every rule of the file is in the segment, as the canonical form says
  python3 - "$work/canon.json" "$work/got.json" <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))
got = {r["resource"]: r for r in json.load(open(sys.argv[2]))}
for r in want:
    assert got[r["resource"]] == r, (r, got.get(r["resource"]))
PY
  # applying what get printed changes nothing, byte for byte
  "$swctl" rules apply "$seg" "$work/got.json" || fail "apply of get's output"
  "$swctl" rules get "$seg" | cmp - "$work/got.json" || fail "the round trip of $f differs"
done
"$swctl" rules get "$seg" > "$work/all.json"
python3 - "$work/all.json" <<'PY'
import json, sys
r = {x["resource"]: x for x in json.load(open(sys.argv[1]))}
assert r["GET:/api/orders"]["controlBehavior"] == 2 and r["GET:/api/orders"]["count"] == 100
assert r["checkout"]["controlBehavior"] == 1 and r["checkout"]["warmUpPeriodSec"] == 10
assert r["uploads"]["grade"] == 0 and r["uploads"]["count"] == 4
s = r["shadow"]
assert s["dryRun"] is True and s["strict"] is False and s["count"] == 0.5, s
assert s["controlBehavior"] == 3 and s["maxQueueingTimeMs"] == 1000 and s["warmUpPeriodSec"] == 5
assert r["api"]["count"] == 10  # not named by a file: unchanged
print("rules of", len(r), "resources as applied")
PY
"$swctl" list "$seg" | grep -q "^shadow .*0.5 warm-up+pacing (dry run)" || fail "list: $("$swctl" list "$seg")"

echo "--- bad files change nothing and say which rule and field"
cp "$work/all.json" "$work/before.json"
refused() { # FILE TEXT: apply exits 3 with TEXT, and the rules are as before
  "$swctl" rules apply "$seg" "$1" 2> "$work/err" && fail "$1 accepted"
  [ $? = 3 ] || true
  "$swctl" rules apply "$seg" "$1" 2>/dev/null || [ $? = 3 ] || fail "$1: exit status not 3"
  grep -qF "$2" "$work/err" || fail "$1: $(cat "$work/err")"
  grep -q "nothing changed\|rule\|not JSON" "$work/err" || fail "$1: $(cat "$work/err")"
  "$swctl" rules get "$seg" | cmp -s - "$work/before.json" || fail "$1 changed the rules"
}
printf '[{"resource": "api", "count": 5},' > "$work/trunc.json"
refused "$work/trunc.json" "not JSON: line 1"
printf '[{"resource": "api", "count": 5}, {"resource": "abc", "count": -2}]' > "$work/neg.json"
refused "$work/neg.json" 'rule 2 (resource "abc"): count: want a number >= 0'
printf '[{"resource": "api", "count": 5, "grade": 3}]' > "$work/grade.json"
refused "$work/grade.json" 'rule 1 (resource "api"): grade: 3 is outside 0..1'
printf '[{"resource": "api", "count": 5, "strategy": 1}]' > "$work/strategy.json"
refused "$work/strategy.json" 'strategy: 1 (relate) is not supported'
printf '[{"resource": "api", "count": 5, "cuont": 1}]' > "$work/typo.json"
refused "$work/typo.json" 'rule 1 (resource "api"): cuont: not a field'
printf '[{"resource": "api", "count": 5}, {"resource": "api", "count": 6}]' > "$work/dup.json"
refused "$work/dup.json" 'resource "api" already has rule 1'
printf '[{"resource": "api", "count": 5, "capacity": 99}]' > "$work/cap.json"
refused "$work/cap.json" 'capacity: 99, but the segment holds 16 names'
printf '[{"resource": "api", "count": 5, "grade": 0, "controlBehavior": 2}]' > "$work/combo.json"
refused "$work/combo.json" 'rule 1 (resource "api")'
python3 -c 'import json; print(json.dumps([{"resource": "n%d" % i, "count": 1} for i in range(20)]))' > "$work/many.json"
refused "$work/many.json" "new resources do not fit"

echo "--- a keyed table: one rule, named after its segment"
"$swctl" rules get "$kseg" > "$work/k.json"
grep -q '"keyed": true' "$work/k.json" && grep -q '"capacity": 1000' "$work/k.json" || fail "$(cat "$work/k.json")"
sed 's/"count": 1,/"count": 3,/' "$work/k.json" > "$work/k3.json"
"$swctl" rules apply "$kseg" "$work/k3.json" || fail "keyed apply"
"$swctl" rules get "$kseg" | grep -q '"count": 3,' || fail "the keyed rule did not change"
"$swctl" list "$kseg" | grep -q "^RULE        reject, 3 per second per key" || fail "keyed list"
sed 's/"grade": 1,/"grade": 0,/' "$work/k3.json" > "$work/kc.json"
"$swctl" rules apply "$kseg" "$work/kc.json" 2> "$work/err" && fail "a keyed table changed its kind of state"
grep -q "nothing changed" "$work/err" || fail "$(cat "$work/err")"

echo "--- apply while 2 processes enter: the new threshold from the next window, no entry lost"
"$rf" "$hot" create > /dev/null
"$rf" "$hot" work 6000 > "$work/w1.out" &
w1=$!
"$rf" "$hot" work 6000 > "$work/w2.out" &
w2=$!
pids="$pids $w1 $w2"
sleep 2.5
printf '[{"resource": "hot", "grade": 1, "count": 5}]' > "$work/five.json"
"$swctl" rules apply "$hot" "$work/five.json" || fail "apply under load"
applied=$("$rf" "$hot" now)
wait "$w1" "$w2"
"$rf" "$hot" counted > "$work/counted.out"
python3 - "$applied" "$work/w1.out" "$work/w2.out" "$work/counted.out" <<'PY'
import sys
applied = int(sys.argv[1])
seconds, entries = {}, 0
for path in sys.argv[2:4]:
    for line in open(path):
        f = line.split()
        if f[0] == "second":
            p, b = seconds.get(int(f[1]), (0, 0))
            seconds[int(f[1])] = (p + int(f[2]), b + int(f[3]))
        elif f[0] == "total":
            entries += int(f[1])
before = [p for s, (p, b) in seconds.items() if s + 1000 <= applied - 1000]
after = {s: p for s, (p, b) in seconds.items() if s > applied}
assert before and max(before) > 5, ("the old threshold (1000) admitted more than 5 a second", seconds)
assert after, seconds
assert all(p <= 5 for p in after.values()), ("over the new threshold", applied, after)
assert sum(1 for p in after.values() if p == 5) >= 1, after
f = open(sys.argv[4]).read().split()
counted = int(f[1]) + int(f[2])
passes = sum(p for p, b in seconds.values())
assert counted == entries, ("entries lost or counted twice", counted, entries)
assert int(f[1]) == passes, (f, passes)
print("%d entries by 2 processes, all counted; %d seconds after the change, each <= 5 passes"
      % (entries, len(after)))
PY
echo "rules: ok"
