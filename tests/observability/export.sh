#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# One exporter for a host (run by run.sh): swctl serve with several
# segments and with --all exports them on one port, each series labelled by
# its segment, and passes promtool; a segment created later is exported
# after a rescan; a keyed table of 100,000 keys adds a bounded number of
# series; an idle resource's minimum RT is NaN, a busy one's in seconds;
# the metric log has one file per segment.
# Usage: tests/observability/export.sh BUILD_DIR
set -eu
. "$(dirname "$0")/lib.sh"
make -C "$build" -s tests/observability/fixture tests/observability/keyed_fixture >/dev/null
fixture="$build/tests/observability/fixture"
keyed="$build/tests/observability/keyed_fixture"
a="swexp-a-$$"
b="swexp-b-$$"
k="swexp-k-$$"
big="swexp-big-$$"
late="swexp-late-$$"
segs="$a $b $k $big $late"
"$fixture" "$a" keep > "$work/a.out" &
pids="$pids $!"
wait_line "$work/a.out" ready
"$fixture" "$b" > /dev/null
"$keyed" "$k" exact > /dev/null
"$keyed" "$big" big 100000 > /dev/null

count() { # FILE SEGMENT: the samples labelled by SEGMENT
  grep -c "^[a-z_]*{segment=\"$2\"" "$1" || true
}

echo "--- serve A B K: one port, every series labelled by its segment, promtool passes"
p=$(port)
mkdir "$work/logs"
"$swctl" serve "$a" "$b" "$k" --listen "127.0.0.1:$p" --seconds 60 --log-dir "$work/logs" \
  2> "$work/serve.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p/metrics"
sleep 2.2 # two polls: a second of "steady" with its exits
curl -fs "http://127.0.0.1:$p/metrics" > "$work/three.txt"
promtool check metrics < "$work/three.txt" || fail "promtool rejected /metrics of 3 segments"
for s in "$a" "$b" "$k"; do
  [ "$(count "$work/three.txt" "$s")" -gt 5 ] || fail "no series of $s"
done
for fam in libsw_pass_total libsw_threshold libsw_min_response_time_seconds; do
  [ "$(grep -c "^# TYPE $fam " "$work/three.txt")" = 1 ] || fail "$fam has not one TYPE line"
done
grep -q "^libsw_segments 3$" "$work/three.txt" || fail "libsw_segments: $(grep ^libsw_segments "$work/three.txt")"
grep -q "^libsw_pass_total{segment=\"$b\",resource=\"api\"} 10$" "$work/three.txt" ||
  fail "the pass total of $b's api"
grep -q "^libsw_keyed_keys{segment=\"$k\",resource=\"$k\"} 9$" "$work/three.txt" ||
  fail "the keyed table's keys"

echo "--- the minimum RT: NaN when no request completed (not 5 s), else seconds"
grep -q "^libsw_min_response_time_seconds{segment=\"$b\",resource=\"api\"} NaN$" "$work/three.txt" ||
  fail "idle min RT: $(grep "min_response.*$b.*api" "$work/three.txt")"
grep -q "^libsw_min_response_time_seconds{segment=\"$a\",resource=\"steady\"} 0.001$" "$work/three.txt" ||
  fail "busy min RT: $(grep "min_response.*steady" "$work/three.txt")"
grep -q "min_response_time_seconds.* 5$" "$work/three.txt" && fail "a min RT of 5 s is exported"
"$swctl" dump "$b" | grep -q '"resource":"api".*"min_rt":null' || fail "dump: idle min_rt not null"

echo "--- the dashboard of 3 segments: a card per resource and segment, a keyed table's top keys"
chrome --dump-dom "http://127.0.0.1:$p/" > "$work/three.html"
python3 - "$work/three.html" "$a" "$b" "$k" <<'PY'
import re, sys
dom, a, b, k = open(sys.argv[1]).read(), *sys.argv[2:]
heads = re.findall(r'<div class="res[^"]*" data-resource="([^"]+)" data-segment="([^"]+)"[^>]*><h2>([^<]*)<', dom)
got = {(seg, name): h.strip() for name, seg, h in heads}
assert got[(a, "api")] == a + " / api" and got[(b, "api")] == b + " / api", got
assert (k, k) in got, got
keyed = dom[dom.index('data-segment="%s"' % k):]
assert "keyed table" in keyed and re.search(r'<table class="top" data-by="pass">.*?data-key=', keyed, re.S), keyed[:2000]
assert "3 segments" in dom, "status"
print("dashboard cards:", sorted(got.values()))
PY

echo "--- the metric log: one file per segment"
sleep 1.2
[ -s "$work/logs/$a-metrics.log" ] || fail "no log of $a: $(ls "$work/logs")"
grep -q "|steady|" "$work/logs/$a-metrics.log" || fail "$a's log has no steady line"
"$swctl" serve "$a" "$b" --app x --seconds 1 2> "$work/err" && fail "--app with 2 segments accepted"
grep -q "one segment" "$work/err" || fail "$(cat "$work/err")"

echo "--- serve --all: every segment, and one created later"
p2=$(port)
"$swctl" serve --all --listen "127.0.0.1:$p2" --seconds 60 --top 10 2> "$work/all.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p2/metrics"
# the first scan opens every segment of /dev/shm (other programs' too): a
# bound for a loaded machine, not a timing assertion
for i in $(seq 1 60); do
  curl -fs "http://127.0.0.1:$p2/metrics" > "$work/all.txt"
  grep -q "^libsw_keyed_top_passes{segment=\"$big\"" "$work/all.txt" &&
    grep -q "segment=\"$a\"" "$work/all.txt" && break
  sleep 0.5
done
promtool check metrics < "$work/all.txt" || fail "promtool rejected /metrics of --all"
for s in "$a" "$b" "$k" "$big"; do
  [ "$(count "$work/all.txt" "$s")" -gt 5 ] || fail "--all does not export $s"
done
"$fixture" "$late" > /dev/null
found=0
for i in $(seq 1 40); do # the rescan is every 5 s
  if curl -fs "http://127.0.0.1:$p2/metrics" | grep -q "segment=\"$late\""; then found=1; break; fi
  sleep 0.5
done
[ "$found" = 1 ] || fail "a segment created after the start was not exported"

echo "--- a keyed table of 100,000 keys: a bounded number of series"
n=$(count "$work/all.txt" "$big")
echo "series of the 100,000-key table with --top 10: $n"
# its totals and rule (9 + 10 keyed families) and 2 x 10 top keys: never one per key
[ "$n" -le 45 ] || fail "$n series for one keyed table"
[ "$(grep -c "^libsw_keyed_top_passes{segment=\"$big\"" "$work/all.txt")" = 10 ] ||
  fail "not 10 top keys by passes"
echo "export: ok"
