#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# swctl on keyed tables (run by run.sh): a table with known keys at an
# explicit time (keyed_fixture exact) gives exact numbers in list, dump,
# /metrics (promtool), /api/series, the dashboard (headless Chromium) and
# the metric log (a burst between two polls); a churned table gives the
# library's key counts; a 1,000,000-key table is dumped in full with a peak
# RSS well under the table's size.
# Usage: tests/observability/keyed.sh BUILD_DIR
set -eu
. "$(dirname "$0")/lib.sh"
make -C "$build" -s tests/observability/keyed_fixture >/dev/null
fixture="$build/tests/observability/keyed_fixture"
seg="swkeyed-$$"
churn="swkeyed-churn-$$"
big="swkeyed-big-$$"
segs="$seg $churn $big"
stat_of() { # file field: a field of the fixture's "stats" line
  sed -n "s/^stats .*\b$2=\([0-9]*\).*/\1/p" "$1"
}

"$fixture" "$seg" exact "$work/burst" > "$work/exact.out" &
pids="$pids $!"
wait_line "$work/exact.out" ready

echo "--- swctl list: the table as one resource, exact"
"$swctl" list "$seg" --top 4 > "$work/list.txt"
cat "$work/list.txt"
grep -v '^MEMORY' "$work/list.txt" > "$work/list.got"
cat > "$work/list.want" <<EOF
$seg: keyed table, 9 keys, capacity 1000
RULE        reject, 1 per second per key, interval 600000 ms in 2 windows
TOTALS      pass 2475  block 160  would_block 0  success 300  exception 4  avg_rt 16.7
KEYS        present 9  active 9  inserted 9  reclaimed 0  evicted 0  refused 0
TOP 4 BY PASSES                                PASS     BLOCK
  10.0.0.1                                      600       100
  10.0.0.2                                      600        50
  2001:db8::1                                   600        10
  192.168.1.3                                   300         0
TOP 4 BY BLOCKS                                PASS     BLOCK
  10.0.0.1                                      600       100
  10.0.0.2                                      600        50
  2001:db8::1                                   600        10
EOF
diff "$work/list.want" "$work/list.got" || fail "swctl list differs (above)"
grep -q "^MEMORY      capacity 1000  .* bytes $(stat_of "$work/exact.out" bytes)\$" "$work/list.txt" ||
  fail "MEMORY is not the table's: $(stat_of "$work/exact.out" bytes) bytes"
"$swctl" list "$seg" --top 1001 2> "$work/err" && fail "--top 1001 accepted"
grep -q "want a whole number in 0..1000" "$work/err" || fail "$(cat "$work/err")"

echo "--- swctl dump: the table's line, then every key: text, addresses, hex, a digest"
"$swctl" dump "$seg" > "$work/dump.jsonl"
python3 - "$work/dump.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, keys = lines[0], {k["key"]: k for k in lines[1:]}
want = {"type": "keyed", "keys": 9, "active_keys": 9, "inserted": 9, "pass": 2475, "block": 160,
        "success": 300, "exception": 4, "rt": 5000, "capacity": 1000, "threshold": 1}
assert {k: head[k] for k in want} == want, head
assert [t["key"] for t in head["top_pass"]][:3] == ["10.0.0.1", "10.0.0.2", "2001:db8::1"], head
assert len(head["top_pass"]) == 9 and len(head["top_block"]) == 3, head
expect = {
    "10.0.0.1": ("ipv4", 600, 100), "10.0.0.2": ("ipv4", 600, 50),
    "2001:db8::1": ("ipv6", 600, 10), "192.168.1.3": ("ipv4", 300, 0),
    "alice": ("text", 200, 0), "bob": ("text", 100, 0),
    "0123456789abcdef": ("text", 20, 0), "0x0102ff": ("hex", 5, 0),
}
assert len(keys) == 9, sorted(keys)
for k, (kind, p, b) in expect.items():
    got = keys[k]
    assert (got["kind"], got["pass"], got["block"], got["in_flight"]) == (kind, p, b, 0), got
    # the fixture's time: the start of a 5-minute window before the dump
    assert 0 <= head["ts"] - got["last_pass_ms"] < 300000 + 5000, (head["ts"], got)
digest = [k for k in keys.values() if k["kind"] == "digest"]
assert len(digest) == 1 and digest[0]["pass"] == 50 and len(digest[0]["key"]) == 7 + 32, digest
print("dump: %d keys as expected" % len(keys))
PY

echo "--- swctl serve: /metrics (promtool, exact, --top bounds the series), /api/series"
p=$(port)
"$swctl" serve "$seg" --listen "127.0.0.1:$p" --seconds 60 --top 3 --log-dir "$work" --app k \
  2> "$work/serve.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p/metrics"
sleep 1.2 # the first poll has read the totals: the burst below is the next second's
curl -fs "http://127.0.0.1:$p/metrics" > "$work/metrics.txt"
promtool check metrics < "$work/metrics.txt" || fail "promtool rejected /metrics"
val() { grep -F "$1{segment=\"$seg\",resource=\"$seg\"${2:-}} " "$work/metrics.txt" | awk '{print $2}'; }
for want in libsw_pass_total:2475 libsw_block_total:160 libsw_success_total:300 \
    libsw_exception_total:4 libsw_response_time_seconds_total:5 libsw_threshold:1 \
    libsw_keyed_keys:9 libsw_keyed_active_keys:9 libsw_keyed_capacity:1000 \
    libsw_keyed_inserted_total:9 libsw_keyed_evicted_total:0; do
  name=${want%%:*} v=${want#*:}
  [ "$(val "$name")" = "$v" ] || fail "$name: $(val "$name"), not $v"
done
grep -q "^libsw_resources{segment=\"$seg\"} 1\$" "$work/metrics.txt" || fail "libsw_resources"
[ "$(val libsw_keyed_bytes)" = "$(stat_of "$work/exact.out" bytes)" ] || fail "libsw_keyed_bytes"
[ "$(val libsw_keyed_top_passes ',key="2001:db8::1"')" = 600 ] || fail "top passes 2001:db8::1"
[ "$(val libsw_keyed_top_blocks ',key="10.0.0.1"')" = 100 ] || fail "top blocks 10.0.0.1"
[ "$(grep -c '^libsw_keyed_top_passes{' "$work/metrics.txt")" = 3 ] || fail "not 3 top passes"
[ "$(grep -c '^libsw_keyed_top_blocks{' "$work/metrics.txt")" = 3 ] || fail "not 3 top blocks"
! grep -q '^libsw_concurrency{' "$work/metrics.txt" || fail "a registry-only series for a table"
curl -fs "http://127.0.0.1:$p/api/series" | python3 -c '
import json, sys
r = json.load(sys.stdin)["resources"]
assert len(r) == 1 and r[0]["keyed"]["pass"] == 2475 and r[0]["keyed"]["evicted"] == 0, r
assert [k["key"] for k in r[0]["keyed"]["top_block"]] == ["10.0.0.1", "10.0.0.2", "2001:db8::1"], r
print("series ok")'

echo "--- the dashboard shows the table's totals and top keys (headless Chromium)"
chrome --dump-dom "http://127.0.0.1:$p/" > "$work/dom.html"
python3 - "$work/dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
m = re.search(r'class="keyed-totals".*?</tr>\s*<tr>(.*?)</tr>', dom, re.S)
assert m, "no keyed totals on the dashboard"
totals = dict(re.findall(r'data-field="(\w+)"[^>]*>([^<]*)<', m.group(1)))
assert (totals["pass"], totals["block"], totals["keys"], totals["active_keys"],
        totals["capacity"]) == ("2475", "160", "9", "9", "1000"), totals
def top(by):
    t = re.search(r'data-by="%s">(.*?)</table>' % by, dom, re.S).group(1)
    return [(k, dict(re.findall(r'data-field="(\w+)"[^>]*>([^<]*)<', row)))
            for k, row in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', t, re.S)]
passes = top("pass")
assert [k for k, _ in passes] == ["10.0.0.1", "10.0.0.2", "2001:db8::1"], passes
assert passes[2][1] == {"pass": "600", "block": "10"}, passes
assert [k for k, _ in top("block")][0] == "10.0.0.1"
assert "keyed table" in dom
print("dashboard: totals", totals, "top", passes)
PY
shot="$build/tests/observability/dashboard-keyed.png"
chrome --window-size=1200,700 --screenshot="$shot" "http://127.0.0.1:$p/" >/dev/null
[ -s "$shot" ] || fail "no screenshot"
echo "screenshot: $shot"

echo "--- the metric log: the table's change between two polls, one line a second"
: > "$work/burst"
wait_line "$work/exact.out" burst
sleep 2.2 # two polls: the burst is in one second's line (or split across two)
log="$work/k-metrics.log"
python3 - "$log" "$seg" <<'PY'
import sys
lines = [l.rstrip("\n").split("|") for l in open(sys.argv[1])]
mine = [l for l in lines if l[1] == sys.argv[2]]
assert mine, "no line for the table: %r" % lines
total = [sum(int(l[i]) for l in mine) for i in (2, 3, 4, 5, 7, 8, 10)]
# pass, block, success, exception, borrowed, concurrency, would block
assert total == [30, 5, 12, 2, 0, 0, 0], (total, mine)
if len(mine) == 1:
    assert mine[0][6] == "20", mine  # the average RT
print("metric log:", ["|".join(l) for l in mine])
PY
curl -fs "http://127.0.0.1:$p/metrics" > "$work/metrics.txt"
[ "$(val libsw_pass_total)" = 2505 ] || fail "pass_total after the burst: $(val libsw_pass_total)"

echo "--- a churned table: the library's key counts; dry run"
"$fixture" "$churn" churn > "$work/churn.out"
"$swctl" list "$churn" > "$work/churn.txt"
cat "$work/churn.txt"
s() { stat_of "$work/churn.out" "$1"; }
[ "$(s evicted)" -gt 0 ] && [ "$(s reclaimed)" -gt 0 ] || fail "the fixture neither evicted nor reclaimed"
grep -q "^KEYS        present $(s keys)  active 0  inserted $(s inserted)  reclaimed $(s reclaimed)  evicted $(s evicted)  refused 0\$" \
  "$work/churn.txt" || fail "KEYS are not the library's: $(cat "$work/churn.out")"
grep -q "^TOTALS      pass $(s pass)  block 0  would_block $(s would_block) " "$work/churn.txt" ||
  fail "TOTALS are not the library's"
grep -q "^RULE .* (dry run)\$" "$work/churn.txt" || fail "dry run not shown"
[ "$("$swctl" dump "$churn" | wc -l)" = $(($(s keys) + 1)) ] || fail "dump of the churned table"

echo "--- 1,000,000 keys: dump streams every key, swctl's peak RSS well under the table"
"$fixture" "$big" big 1000000 > "$work/big.out"
bytes=$(stat_of "$work/big.out" bytes)
/usr/bin/time -f "%e %M" -o "$work/time" "$swctl" dump "$big" | wc -l > "$work/lines"
read -r secs rss_kb < "$work/time"
echo "dump: $(cat "$work/lines") lines in $secs s, peak RSS $rss_kb KiB; the table: $((bytes / 1024)) KiB"
[ "$(cat "$work/lines")" = 1000001 ] || fail "dump wrote $(cat "$work/lines") lines"
[ $((rss_kb * 1024 * 4)) -lt "$bytes" ] || fail "peak RSS $rss_kb KiB: not under a quarter of the table"

echo "keyed tables: all checks passed"
