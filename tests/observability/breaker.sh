#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# swctl on circuit breakers' segments (run by run.sh): two breakers with
# known numbers (breaker_fixture) give them exactly in list, dump,
# one swctl serve of both (/metrics through promtool, /api/series), serve
# --all across rescans (each breaker once) and the dashboard (headless
# Chromium).
# Usage: tests/observability/breaker.sh BUILD_DIR
set -eu
. "$(dirname "$0")/lib.sh"
make -C "$build" -s tests/observability/breaker_fixture >/dev/null
seg="swbreaker-$$"
seg2="swbreaker2-$$"
segs="$seg $seg2"
for s in "$seg" "$seg2"; do
  "$build/tests/observability/breaker_fixture" "$s" | grep -q "ready verdict=1" ||
    fail "breaker_fixture did not open its breaker $s"
done

echo "--- swctl list: state, counts and transitions"
"$swctl" list "$seg" > "$work/list.txt"
cat "$work/list.txt"
grep -q "^$seg: circuit breaker (error_ratio)$" "$work/list.txt" || fail "list: no title"
awk 'NR == 3 && $1 == "open" && $2 == 5 && $3 == 3 && $4 == "0.600" && $6 == 1 && $12 == 2 {ok = 1}
     END {exit !ok}' "$work/list.txt" || fail "list: wrong line"

echo "--- swctl ls: a breaker's segment, readable"
"$swctl" ls --json > "$work/ls.json"
python3 - "$work/ls.json" "$seg" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["segment"] == sys.argv[2]]
assert len(rows) == 1 and rows[0]["kind"] == "breaker" and rows[0]["layout"] == "current", rows
PY

echo "--- swctl dump: one JSON line"
"$swctl" dump "$seg" > "$work/dump.json"
python3 - "$work/dump.json" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read())
want = {"state": "open", "strategy": "error_ratio", "requests": 5, "bad": 3, "opened": 1,
        "half_opened": 0, "probes": 0, "blocked": 2}
for k, v in want.items():
    assert d[k] == v, (k, d[k], v)
assert 590000 < d["next_probe_in_ms"] <= 600000, d["next_probe_in_ms"]
PY

echo "--- /metrics and /api/series"
p=$(port)
"$swctl" serve "$seg" "$seg2" --listen "127.0.0.1:$p" --seconds 30 2> "$work/serve.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p/metrics"
curl -fs "http://127.0.0.1:$p/metrics" > "$work/metrics.txt"
promtool check metrics < "$work/metrics.txt" || fail "promtool rejected /metrics"
val() { grep "^$1{segment=\"$seg\"${2:-}}" "$work/metrics.txt" | awk '{print $2}'; }
[ "$(val libsw_breaker_state ',state="open"')" = 1 ] || fail "state open"
[ "$(val libsw_breaker_state ',state="closed"')" = 0 ] || fail "state closed"
[ "$(val libsw_breaker_transitions_total ',transition="closed_to_open"')" = 1 ] || fail "transitions"
[ "$(val libsw_breaker_requests)" = 5 ] || fail "requests"
[ "$(val libsw_breaker_bad_requests)" = 3 ] || fail "bad requests"
[ "$(val libsw_breaker_bad_ratio)" = 0.59999999999999998 ] || fail "ratio: $(val libsw_breaker_bad_ratio)"
[ "$(val libsw_breaker_blocked_total)" = 2 ] || fail "blocked"
# two breakers on one port: each family once, a series set per breaker
[ "$(grep -c '^# TYPE libsw_breaker_state ' "$work/metrics.txt")" = 1 ] || fail "libsw_breaker_state typed twice"
[ "$(grep -c "^libsw_breaker_state{segment=\"$seg2\"" "$work/metrics.txt")" = 3 ] || fail "no states of $seg2"
curl -fs "http://127.0.0.1:$p/api/series" > "$work/series.json"
python3 -c 'import json,sys; bs=json.load(open(sys.argv[1]))["breakers"]; assert [b["segment"] for b in bs] == sys.argv[2:], bs; assert all(b["state"] == "open" and b["bad"] == 3 for b in bs), bs' \
  "$work/series.json" "$seg" "$seg2"

echo "--- serve --all: a rescan adds no breaker twice (series and mappings stay)"
p2=$(port)
"$swctl" serve --all --rescan 1 --listen "127.0.0.1:$p2" --seconds 60 2> "$work/all.err" &
all_pid=$!
pids="$pids $all_pid"
wait_http "http://127.0.0.1:$p2/metrics"
states() { # the state series of both breakers in /metrics
  curl -fs "http://127.0.0.1:$p2/metrics" | grep -Ec "^libsw_breaker_state\{segment=\"swbreaker2?-$$\"" || true
}
maps() { # the mappings of both breakers' files in the exporter
  grep -Ec "/dev/shm/swbreaker2?-$$( |$)" "/proc/$all_pid/maps" || true
}
for i in $(seq 1 60); do [ "$(states)" -ge 6 ] && break; sleep 0.25; done
first=$(states) first_maps=$(maps)
sleep 4.5 # four rescans and more
[ "$first" = 6 ] && [ "$(states)" = 6 ] ||
  fail "breaker state series: $first, then $(states) after 4 rescans (want 3 + 3)"
[ "$first_maps" = 2 ] && [ "$(maps)" = 2 ] ||
  fail "breaker mappings: $first_maps, then $(maps) after 4 rescans (want 1 + 1)"
kill "$all_pid"
"$swctl" serve --all --rescan 0 2> "$work/err" && fail "--rescan 0 accepted"
grep -q "want a whole number in 1..86400" "$work/err" || fail "$(cat "$work/err")"

echo "--- the dashboard shows the breaker (headless Chromium)"
chrome --dump-dom "http://127.0.0.1:$p/" > "$work/dom.html"
python3 - "$work/dom.html" "$seg" <<'PY'
import re, sys
dom, seg = open(sys.argv[1]).read(), sys.argv[2]
m = re.search(r'data-breaker="%s"[^>]*data-state="open".*?<tr class="latest"[^>]*>(.*?)</tr>' % re.escape(seg), dom, re.S)
assert m, "no open breaker card on the dashboard"
row = dict(re.findall(r'data-field="(\w+)"[^>]*>([^<]*)<', m.group(1)))
want = {"state": "open", "requests": "5", "bad": "3", "ratio": "0.600", "opened": "1", "blocked": "2"}
assert all(row[k] == v for k, v in want.items()), row
assert "(circuit breaker, error_ratio)" in dom
print("dashboard: breaker", row)
PY
chrome --window-size=1200,400 --screenshot="$build/tests/observability/dashboard-breaker.png" \
  "http://127.0.0.1:$p/" >/dev/null
echo "breaker: ok"
